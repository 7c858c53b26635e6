//! # The array — PostgreSQL's dead-TID structure (`dead_tids = array`)
//!
//! PostgreSQL's sorted array of 6-byte item pointers (before PostgreSQL 17), searched by
//! bisection, capped at 1 GB (`MaxAllocSize`) as PostgreSQL's is: the old behaviour, kept
//! behind the switch so that seed 004's comparison can be run again. It keeps the rules of the
//! module header (`mod.rs`); its budget rule is PostgreSQL's, not the store's.

use std::fmt;
use std::mem::size_of;

use super::{check_input, BlockCursor, DeadTids, TidStoreError};
use crate::page::{OffsetNumber, Tid, MAX_ITEM_COUNT};
use crate::types::BlockNumber;

/// PostgreSQL's `MaxAllocSize` (1 GB - 1): the largest array PostgreSQL's vacuum allocates
/// for dead TIDs, whatever `maintenance_work_mem` says.
pub(super) const MAX_ALLOC_SIZE: u64 = 0x3fff_ffff;

/// The size of one item pointer in [`TidArray`], as PostgreSQL's `ItemPointerData`.
const ITEM_POINTER_BYTES: usize = 6;

/// One TID as PostgreSQL stores it (`ItemPointerData`): the block number as two 16-bit
/// halves, then the offset; 6 bytes, 2-byte aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct ItemPointer {
    block_hi: u16,
    block_lo: u16,
    offset: u16,
}

const _: () = assert!(size_of::<ItemPointer>() == ITEM_POINTER_BYTES);

impl ItemPointer {
    fn new(block: BlockNumber, offset: OffsetNumber) -> Self {
        ItemPointer {
            block_hi: (block >> 16) as u16,
            block_lo: block as u16,
            offset,
        }
    }

    fn block(self) -> BlockNumber {
        (u32::from(self.block_hi) << 16) | u32::from(self.block_lo)
    }

    /// Orders as (block, offset).
    fn key(self) -> u64 {
        (u64::from(self.block()) << 16) | u64::from(self.offset)
    }
}

/// PostgreSQL's dead-TID array (`dead_tids = array`, before PostgreSQL 17): 6 bytes per TID,
/// sorted because the heap is scanned in order, searched by bisection, and never larger than
/// `min(budget, 1 GB)`.
pub struct TidArray {
    budget_bytes: u64,
    /// The most TIDs it may hold: `min(budget, MaxAllocSize) / 6`.
    limit_tids: usize,
    items: Vec<ItemPointer>,
    last_block: Option<BlockNumber>,
    num_blocks: u64,
}

impl fmt::Debug for TidArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TidArray")
            .field("num_tids", &self.items.len())
            .field("limit_tids", &self.limit_tids)
            .field("memory_bytes", &self.memory_bytes())
            .finish_non_exhaustive()
    }
}

impl TidArray {
    pub fn new(budget_bytes: u64) -> Self {
        TidArray {
            budget_bytes,
            limit_tids: (budget_bytes.min(MAX_ALLOC_SIZE) / ITEM_POINTER_BYTES as u64) as usize,
            items: Vec::new(),
            last_block: None,
            num_blocks: 0,
        }
    }

    /// The most TIDs this array may hold.
    pub fn limit_tids(&self) -> u64 {
        self.limit_tids as u64
    }

    /// Allocates room for `tids` TIDs at once (clamped to the limit), as PostgreSQL sizes its
    /// array up front from the table's size; without it the array grows by doubling.
    pub fn reserve_exact_tids(&mut self, tids: u64) {
        let wanted = usize::try_from(tids)
            .unwrap_or(usize::MAX)
            .min(self.limit_tids);
        if wanted > self.items.len() {
            self.items.reserve_exact(wanted - self.items.len());
        }
    }
}

impl DeadTids for TidArray {
    fn try_add_block(
        &mut self,
        block: BlockNumber,
        offsets: &[OffsetNumber],
    ) -> Result<(), TidStoreError> {
        if !check_input(block, offsets, self.last_block)? {
            return Ok(());
        }
        let needed = self.items.len() + offsets.len();
        if needed > self.limit_tids {
            return Err(TidStoreError::ArrayFull {
                stored: self.items.len() as u64,
                adding: offsets.len(),
                limit_tids: self.limit_tids as u64,
            });
        }
        if needed > self.items.capacity() {
            let target = needed
                .max(self.items.capacity() * 2)
                .max(1024)
                .min(self.limit_tids);
            self.items.reserve_exact(target - self.items.len());
        }
        self.items
            .extend(offsets.iter().map(|&o| ItemPointer::new(block, o)));
        self.last_block = Some(block);
        self.num_blocks += 1;
        Ok(())
    }

    #[inline]
    fn contains(&self, tid: Tid) -> bool {
        let key = (u64::from(tid.block) << 16) | u64::from(tid.offset);
        // As PostgreSQL's lazy_tid_reaped: a bounds check first, which pays off when the
        // dead tuples are concentrated in part of the heap.
        let (Some(first), Some(last)) = (self.items.first(), self.items.last()) else {
            return false;
        };
        if key < first.key() || key > last.key() {
            return false;
        }
        // Bisection as glibc's bsearch() does it for PostgreSQL: branchy, stopping at the
        // first equal item. (std's branchless search is slower here: on an array that does
        // not fit in cache, the CPU's guess of the next probe prefetches it.)
        let (mut lo, mut hi) = (0, self.items.len());
        for _ in 0..usize::BITS {
            if lo >= hi {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            match self.items[mid].key().cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }

    fn offsets_of(&self, block: BlockNumber, out: &mut Vec<OffsetNumber>) {
        out.clear();
        let from = self.items.partition_point(|i| i.block() < block);
        out.extend(
            self.items[from..]
                .iter()
                .take_while(|i| i.block() == block)
                .map(|i| i.offset),
        );
    }

    fn num_tids(&self) -> u64 {
        self.items.len() as u64
    }

    fn num_blocks(&self) -> u64 {
        self.num_blocks
    }

    fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.items.capacity() * ITEM_POINTER_BYTES
    }

    fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    /// PostgreSQL's rule (`lazy_scan_heap`): stop when a page's worth of dead items might not
    /// fit any more.
    fn is_full(&self) -> bool {
        self.limit_tids - self.items.len() < MAX_ITEM_COUNT
    }

    fn clear(&mut self) {
        *self = TidArray::new(self.budget_bytes);
    }

    fn next_block(
        &self,
        cursor: &mut BlockCursor,
        offsets: &mut Vec<OffsetNumber>,
    ) -> Option<BlockNumber> {
        offsets.clear();
        let start = usize::try_from(cursor.pos).unwrap_or(usize::MAX);
        let first = self.items.get(start)?;
        let block = first.block();
        let rest = &self.items[start..];
        let count = rest.iter().take_while(|i| i.block() == block).count();
        offsets.extend(rest[..count].iter().map(|i| i.offset));
        cursor.pos = (start + count) as u64;
        Some(block)
    }
}
