//! Vacuum's index pass: remove the entries whose heap TIDs are dead.

use std::time::Duration;

use super::redo;
use super::BTree;
use crate::error::Result;
use crate::page::{OffsetNumber, PageMut};

use crate::types::{MAX_BLOCKS, Xid};
use crate::vacuum::{DeadTidProbe, DeadTids};
use crate::wal::LoggedPage;

/// How long vacuum waits for the cleanup lock of one leaf before it gives up (a scan left
/// open on that leaf for so long is a stuck client; PostgreSQL waits forever).
pub const CLEANUP_WAIT: Duration = Duration::from_secs(600);

/// What [`BTree::bulk_delete`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BulkDeleteStats {
    /// Blocks of the index read (the metapage and never-initialised blocks included).
    pub pages_scanned: u64,
    /// Leaf pages among them.
    pub leaf_pages: u64,
    /// Leaf pages from which entries were removed (one WAL record each).
    pub pages_changed: u64,
    /// Leaf pages left without entries (they stay in place: no page deletion).
    pub empty_leaf_pages: u64,
    pub entries_seen: u64,
    pub entries_removed: u64,
}

impl BTree<'_> {
    /// Removes every entry whose heap TID is in `dead` (vacuum's index pass), one leaf at a
    /// time in block order under a cleanup lock, WAL-logged per page. Pages left empty stay.
    pub fn bulk_delete(&self, dead: &dyn DeadTids) -> Result<BulkDeleteStats> {
        let mut stats = BulkDeleteStats::default();
        // One probe for the whole pass: the TIDs of consecutive leaves continue each other's
        // heap blocks when the index follows the heap's order.
        let mut probe = DeadTidProbe::new(dead);
        let mut nblocks = self.nblocks()?;
        let mut block = 1;
        // Splits during the pass add blocks at the end; the pass goes on until it has read
        // the last one. Bounded: `block` grows by one a turn and no fork exceeds MAX_BLOCKS.
        while block < MAX_BLOCKS {
            if block >= nblocks {
                nblocks = self.nblocks()?;
                if block >= nblocks {
                    break;
                }
            }
            stats.pages_scanned += 1;
            self.vacuum_block(block, &mut probe, &mut stats)?;
            block += 1;
        }
        Ok(stats)
    }

    fn vacuum_block(
        &self,
        block: crate::types::BlockNumber,
        dead: &mut DeadTidProbe<'_>,
        stats: &mut BulkDeleteStats,
    ) -> Result<()> {
        let buf = self.pin(block)?;
        {
            let g = buf.read();
            // A page extended but never initialised (a crash before its split was logged)
            // holds nothing; internal pages hold no heap TIDs.
            if crate::page::Page::new(&g).is_new() || !self.view(&g, block)?.special.is_leaf() {
                return Ok(());
            }
        }
        // A cleanup lock on *every* leaf, even one without dead entries: a scan may hold
        // copies of entries that a split has since moved to a later page (see the module
        // header), and waiting for its pin here is what keeps us from removing them there.
        let mut g = buf.lock_for_cleanup(CLEANUP_WAIT)?;
        stats.leaf_pages += 1;
        let (remove, remaining) = {
            let p = self.view(&g, block)?;
            let mut remove: Vec<OffsetNumber> = Vec::new();
            for off in p.first_data()..=p.item_count() {
                if dead.contains(p.tuple(off)?.tid) {
                    remove.push(off);
                }
            }
            stats.entries_seen += p.data_count() as u64;
            (remove, p.data_count())
        };
        if remaining == remove.len() {
            stats.empty_leaf_pages += 1;
        }
        if remove.is_empty() {
            return Ok(());
        }
        PageMut::new(&mut g)
            .delete_items(&remove)
            .map_err(|e| self.corrupt(block, format!("cannot remove entries: {e}")))?;
        self.wal.log_page_change(
            Xid::INVALID,
            redo::BTreeRecord::Delete,
            &redo::delete_record(&remove),
            &mut [LoggedPage::changed(&mut g)],
        )?;
        stats.pages_changed += 1;
        stats.entries_removed += remove.len() as u64;
        Ok(())
    }
}
