//! # page — the 8 KiB page layout
//!
//! PostgreSQL's slotted page (bufpage.h) with a 32-bit CRC32C checksum. Byte diagram in
//! `docs/design.md`:
//!
//! ```text
//! 0        8          12      14      16      18        20        22     24
//! | pd_lsn | checksum | flags | lower | upper | special | version | rsvd | line pointers ->
//! ... free space [lower, upper) ... <- items [upper, special) | special space [special, 8192)
//! ```
//!
//! ## Rules
//! - Only the holder of a buffer's exclusive content lock changes a page.
//! - The checksum is set on the copy being written ([`set_checksum`]) and verified on every
//!   read from disk ([`verify`]); an all-zero page is a valid new page (extension writes zeros).
//! - Nothing here panics on a page from disk: the header is checked by [`verify`], and item
//!   accessors bounds-check every line pointer, returning `None` for a bad one.

use crc32c::crc32c_append;

/// The size of a page in bytes.
pub const PAGE_SIZE: usize = 8192;
/// The size of the page header in bytes.
pub const HEADER_SIZE: usize = 24;
/// The size of a line pointer in bytes.
pub const LINE_POINTER_SIZE: usize = 4;
/// The page layout version written by this code.
pub const LAYOUT_VERSION: u16 = 1;
/// Items are aligned to 8 bytes (PostgreSQL's MAXALIGN).
const ALIGN: usize = 8;

/// A 1-based item number within a page.
pub type OffsetNumber = u16;

const OFF_LSN: usize = 0;
const OFF_CHECKSUM: usize = 8;
const OFF_FLAGS: usize = 12;
const OFF_LOWER: usize = 14;
const OFF_UPPER: usize = 16;
const OFF_SPECIAL: usize = 18;
const OFF_VERSION: usize = 20;

/// Page flags.
pub const HAS_FREE_LINES: u16 = 0x1;
pub const PAGE_FULL: u16 = 0x2;
pub const ALL_VISIBLE: u16 = 0x4;

/// Why a page read from disk is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("page verification failed, calculated checksum {calculated:#010x} but expected {stored:#010x}")]
    ChecksumMismatch { stored: u32, calculated: u32 },
    #[error(
        "page header is corrupt: pd_lower {lower}, pd_upper {upper}, pd_special {special} \
         (need {HEADER_SIZE} <= lower <= upper <= special <= {PAGE_SIZE}, special aligned)"
    )]
    BadBounds {
        lower: u16,
        upper: u16,
        special: u16,
    },
    #[error("page header is corrupt: unknown layout version {version}")]
    BadVersion { version: u16 },
}

/// The state of a line pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemState {
    Unused,
    Normal,
    Redirect,
    Dead,
}

/// A line pointer: where an item is and what state it is in (PostgreSQL's `ItemIdData`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemId {
    pub offset: u16,
    pub state: ItemState,
    pub len: u16,
}

impl ItemId {
    fn decode(word: u32) -> Self {
        let state = match (word >> 15) & 0x3 {
            0 => ItemState::Unused,
            1 => ItemState::Normal,
            2 => ItemState::Redirect,
            _ => ItemState::Dead,
        };
        ItemId {
            offset: (word & 0x7FFF) as u16,
            state,
            len: (word >> 17) as u16,
        }
    }

    fn encode(self) -> u32 {
        let state = match self.state {
            ItemState::Unused => 0,
            ItemState::Normal => 1,
            ItemState::Redirect => 2,
            ItemState::Dead => 3,
        };
        debug_assert!(self.offset < 0x8000 && self.len < 0x8000);
        u32::from(self.offset) | (state << 15) | (u32::from(self.len) << 17)
    }
}

fn get_u16(page: &[u8; PAGE_SIZE], at: usize) -> u16 {
    u16::from_le_bytes([page[at], page[at + 1]])
}

fn put_u16(page: &mut [u8; PAGE_SIZE], at: usize, v: u16) {
    page[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn align_up(n: usize) -> usize {
    (n + ALIGN - 1) & !(ALIGN - 1)
}

/// The checksum of a page as block `block`: CRC32C over the block number and the page with
/// its checksum field read as zero, computed in pieces so the page is not copied.
pub fn checksum(page: &[u8; PAGE_SIZE], block: u32) -> u32 {
    let mut crc = crc32c_append(0, &block.to_le_bytes());
    crc = crc32c_append(crc, &page[..OFF_CHECKSUM]);
    crc = crc32c_append(crc, &[0u8; 4]);
    crc32c_append(crc, &page[OFF_CHECKSUM + 4..])
}

/// Sets the checksum field of a page about to be written as block `block`.
pub fn set_checksum(page: &mut [u8; PAGE_SIZE], block: u32) {
    let crc = checksum(page, block);
    page[OFF_CHECKSUM..OFF_CHECKSUM + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Verifies a page read from disk as block `block`. An all-zero page is valid (new).
pub fn verify(page: &[u8; PAGE_SIZE], block: u32) -> Result<(), PageError> {
    let view = Page::new(page);
    if view.is_new() && page.iter().all(|b| *b == 0) {
        return Ok(());
    }
    let stored = u32::from_le_bytes(
        page[OFF_CHECKSUM..OFF_CHECKSUM + 4]
            .try_into()
            .expect("4-byte slice"),
    );
    let calculated = checksum(page, block);
    if stored != calculated {
        return Err(PageError::ChecksumMismatch { stored, calculated });
    }
    view.check_header()
}

/// A read-only view of a page.
#[derive(Clone, Copy)]
pub struct Page<'a> {
    bytes: &'a [u8; PAGE_SIZE],
}

impl<'a> Page<'a> {
    pub fn new(bytes: &'a [u8; PAGE_SIZE]) -> Self {
        Page { bytes }
    }

    /// A page never initialised (all-zero header; `pd_upper == 0`).
    pub fn is_new(&self) -> bool {
        self.upper() == 0
    }

    pub fn lsn(&self) -> u64 {
        u64::from_le_bytes(
            self.bytes[OFF_LSN..OFF_LSN + 8]
                .try_into()
                .expect("8-byte slice"),
        )
    }

    pub fn flags(&self) -> u16 {
        get_u16(self.bytes, OFF_FLAGS)
    }

    pub fn lower(&self) -> u16 {
        get_u16(self.bytes, OFF_LOWER)
    }

    pub fn upper(&self) -> u16 {
        get_u16(self.bytes, OFF_UPPER)
    }

    pub fn special(&self) -> u16 {
        get_u16(self.bytes, OFF_SPECIAL)
    }

    /// Checks the header bounds, as PostgreSQL's `PageIsVerified` does.
    pub fn check_header(&self) -> Result<(), PageError> {
        let (lower, upper, special) = (self.lower(), self.upper(), self.special());
        let version = get_u16(self.bytes, OFF_VERSION);
        if version != LAYOUT_VERSION {
            return Err(PageError::BadVersion { version });
        }
        let ok = usize::from(lower) >= HEADER_SIZE
            && lower <= upper
            && upper <= special
            && usize::from(special) <= PAGE_SIZE
            && usize::from(special) % ALIGN == 0
            && (usize::from(lower) - HEADER_SIZE).is_multiple_of(LINE_POINTER_SIZE);
        if ok {
            Ok(())
        } else {
            Err(PageError::BadBounds {
                lower,
                upper,
                special,
            })
        }
    }

    /// The highest item number in use (the number of line pointers).
    pub fn item_count(&self) -> u16 {
        let lower = usize::from(self.lower());
        (lower.saturating_sub(HEADER_SIZE) / LINE_POINTER_SIZE) as u16
    }

    /// The line pointer `off`, if it exists.
    pub fn item_id(&self, off: OffsetNumber) -> Option<ItemId> {
        if off == 0 || off > self.item_count() {
            return None;
        }
        let at = HEADER_SIZE + (usize::from(off) - 1) * LINE_POINTER_SIZE;
        let word = u32::from_le_bytes(self.bytes.get(at..at + 4)?.try_into().ok()?);
        Some(ItemId::decode(word))
    }

    /// The bytes of a normal item; `None` for unused, dead, redirect, out-of-range or
    /// corrupt line pointers.
    pub fn item(&self, off: OffsetNumber) -> Option<&'a [u8]> {
        let id = self.item_id(off)?;
        if id.state != ItemState::Normal {
            return None;
        }
        let start = usize::from(id.offset);
        let end = start + usize::from(id.len);
        if start < usize::from(self.upper()) || end > usize::from(self.special()) {
            return None;
        }
        self.bytes.get(start..end)
    }

    /// Room for one more item, after its line pointer (PostgreSQL's `PageGetFreeSpace`).
    pub fn free_space_bytes(&self) -> usize {
        let gap = usize::from(self.upper()).saturating_sub(usize::from(self.lower()));
        gap.saturating_sub(LINE_POINTER_SIZE)
    }

    /// The special space.
    pub fn special_space(&self) -> &'a [u8] {
        let start = usize::from(self.special()).min(PAGE_SIZE);
        &self.bytes[start..]
    }
}

/// A page being changed (under the buffer's exclusive content lock).
pub struct PageMut<'a> {
    bytes: &'a mut [u8; PAGE_SIZE],
}

impl<'a> PageMut<'a> {
    pub fn new(bytes: &'a mut [u8; PAGE_SIZE]) -> Self {
        PageMut { bytes }
    }

    pub fn as_page(&self) -> Page<'_> {
        Page::new(self.bytes)
    }

    /// Formats an empty page with `special_size_bytes` of special space at the end.
    pub fn init(&mut self, special_size_bytes: usize) {
        let special = PAGE_SIZE - align_up(special_size_bytes);
        assert!(
            special >= HEADER_SIZE,
            "special space of {special_size_bytes} bytes does not fit"
        );
        self.bytes.fill(0);
        put_u16(self.bytes, OFF_LOWER, HEADER_SIZE as u16);
        put_u16(self.bytes, OFF_UPPER, special as u16);
        put_u16(self.bytes, OFF_SPECIAL, special as u16);
        put_u16(self.bytes, OFF_VERSION, LAYOUT_VERSION);
    }

    pub fn set_lsn(&mut self, lsn: u64) {
        self.bytes[OFF_LSN..OFF_LSN + 8].copy_from_slice(&lsn.to_le_bytes());
    }

    pub fn set_flag(&mut self, flag: u16, on: bool) {
        let f = self.as_page().flags();
        put_u16(self.bytes, OFF_FLAGS, if on { f | flag } else { f & !flag });
    }

    fn set_item_id(&mut self, off: OffsetNumber, id: ItemId) {
        let at = HEADER_SIZE + (usize::from(off) - 1) * LINE_POINTER_SIZE;
        self.bytes[at..at + 4].copy_from_slice(&id.encode().to_le_bytes());
    }

    /// Adds an item; at `want` (which must be unused or one past the end) or at the first
    /// unused line pointer, else a new one. `None` if it does not fit.
    pub fn add_item(&mut self, data: &[u8], want: Option<OffsetNumber>) -> Option<OffsetNumber> {
        let page = self.as_page();
        debug_assert!(
            page.check_header().is_ok(),
            "adding to an uninitialised page"
        );
        let count = page.item_count();
        let off = match want {
            Some(o) if o == 0 || o > count + 1 => return None,
            Some(o) if o <= count => {
                if page.item_id(o)?.state != ItemState::Unused {
                    return None;
                }
                o
            }
            Some(o) => o,
            None if page.flags() & HAS_FREE_LINES != 0 => (1..=count)
                .find(|o| {
                    page.item_id(*o)
                        .is_some_and(|id| id.state == ItemState::Unused)
                })
                .unwrap_or(count + 1),
            None => count + 1,
        };
        let new_pointer = off > count;
        let lower = usize::from(page.lower()) + if new_pointer { LINE_POINTER_SIZE } else { 0 };
        let size = align_up(data.len());
        if data.is_empty() || data.len() >= 0x8000 {
            return None;
        }
        let upper = usize::from(page.upper());
        if size > upper || upper - size < lower {
            return None;
        }
        let start = upper - size;
        self.bytes[start..start + data.len()].copy_from_slice(data);
        self.bytes[start + data.len()..upper].fill(0);
        put_u16(self.bytes, OFF_LOWER, lower as u16);
        put_u16(self.bytes, OFF_UPPER, start as u16);
        self.set_item_id(
            off,
            ItemId {
                offset: start as u16,
                state: ItemState::Normal,
                len: data.len() as u16,
            },
        );
        if !new_pointer && !self.as_page().has_unused_pointer() {
            self.set_flag(HAS_FREE_LINES, false);
        }
        Some(off)
    }

    /// Marks an item dead: its line pointer stays, its storage is reclaimed by
    /// [`repair_fragmentation`](Self::repair_fragmentation).
    pub fn mark_dead(&mut self, off: OffsetNumber) -> bool {
        self.set_state(off, ItemState::Dead, true)
    }

    /// Marks a line pointer unused, free for reuse.
    pub fn mark_unused(&mut self, off: OffsetNumber) -> bool {
        let done = self.set_state(off, ItemState::Unused, false);
        if done {
            self.set_flag(HAS_FREE_LINES, true);
        }
        done
    }

    fn set_state(&mut self, off: OffsetNumber, state: ItemState, keep_storage: bool) -> bool {
        let Some(mut id) = self.as_page().item_id(off) else {
            return false;
        };
        id.state = state;
        if !keep_storage {
            id.offset = 0;
            id.len = 0;
        }
        self.set_item_id(off, id);
        true
    }

    /// Compacts normal items towards the end of the page, keeping their item numbers
    /// (PostgreSQL's `PageRepairFragmentation`); dead items lose their storage.
    pub fn repair_fragmentation(&mut self) {
        let page = self.as_page();
        let special = usize::from(page.special());
        let mut live: Vec<(OffsetNumber, Vec<u8>)> = (1..=page.item_count())
            .filter_map(|o| page.item(o).map(|d| (o, d.to_vec())))
            .collect();
        // Place the items in descending order of their old offset, as PostgreSQL does.
        live.sort_by_key(|(o, _)| std::cmp::Reverse(page.item_id(*o).map_or(0, |id| id.offset)));
        let count = page.item_count();
        let mut upper = special;
        for (off, data) in &live {
            upper -= align_up(data.len());
            self.bytes[upper..upper + data.len()].copy_from_slice(data);
            self.bytes[upper + data.len()..upper + align_up(data.len())].fill(0);
            self.set_item_id(
                *off,
                ItemId {
                    offset: upper as u16,
                    state: ItemState::Normal,
                    len: data.len() as u16,
                },
            );
        }
        for off in 1..=count {
            if let Some(mut id) = self.as_page().item_id(off) {
                if id.state == ItemState::Dead {
                    id.offset = 0;
                    id.len = 0;
                    self.set_item_id(off, id);
                }
            }
        }
        let lower = usize::from(self.as_page().lower());
        self.bytes[lower..upper].fill(0);
        put_u16(self.bytes, OFF_UPPER, upper as u16);
        let has_unused = self.as_page().has_unused_pointer();
        self.set_flag(HAS_FREE_LINES, has_unused);
    }

    /// The special space, writable.
    pub fn special_space_mut(&mut self) -> &mut [u8] {
        let start = usize::from(self.as_page().special()).min(PAGE_SIZE);
        &mut self.bytes[start..]
    }
}

impl Page<'_> {
    fn has_unused_pointer(self) -> bool {
        (1..=self.item_count()).any(|o| {
            self.item_id(o)
                .is_some_and(|id| id.state == ItemState::Unused)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn fresh() -> Box<[u8; PAGE_SIZE]> {
        let mut p = Box::new([0u8; PAGE_SIZE]);
        PageMut::new(&mut p).init(16);
        p
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(usize, u8),
        Dead(u16),
        Unused(u16),
        Repair,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1usize..=2000, any::<u8>()).prop_map(|(n, b)| Op::Add(n, b)),
            2 => (1u16..40).prop_map(Op::Dead),
            2 => (1u16..40).prop_map(Op::Unused),
            1 => Just(Op::Repair),
        ]
    }

    /// Bytes the items of `model` occupy, aligned, plus line pointers.
    fn used_bytes(model: &BTreeMap<u16, Vec<u8>>, dead_storage: usize, pointers: usize) -> usize {
        model.values().map(|d| align_up(d.len())).sum::<usize>()
            + dead_storage
            + pointers * LINE_POINTER_SIZE
    }

    proptest! {
        #[test]
        fn items_round_trip_against_a_model(ops in proptest::collection::vec(op(), 1..120)) {
            let mut page = fresh();
            let mut model: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
            let mut dead: BTreeMap<u16, usize> = BTreeMap::new();
            for op in ops {
                let mut p = PageMut::new(&mut page);
                match op {
                    Op::Add(n, b) => {
                        let data: Vec<u8> = (0..n).map(|i| b.wrapping_add(i as u8)).collect();
                        let before = p.as_page();
                        let free = before.free_space_bytes();
                        let reuse = before.flags() & HAS_FREE_LINES != 0;
                        let gap = usize::from(before.upper()) - usize::from(before.lower());
                        if let Some(off) = p.add_item(&data, None) {
                            prop_assert!(!model.contains_key(&off) && !dead.contains_key(&off));
                            model.insert(off, data);
                        } else {
                            // It must truly not fit.
                            let need = align_up(n) + if reuse { 0 } else { LINE_POINTER_SIZE };
                            prop_assert!(need > gap || (!reuse && align_up(n) > free),
                                "add of {} failed with gap {}", n, gap);
                        }
                    }
                    Op::Dead(o) => {
                        if let Some(d) = model.remove(&o) {
                            prop_assert!(p.mark_dead(o));
                            dead.insert(o, align_up(d.len()));
                        }
                    }
                    Op::Unused(o) => {
                        if model.remove(&o).is_some() || dead.remove(&o).is_some() {
                            prop_assert!(p.mark_unused(o));
                        }
                    }
                    Op::Repair => {
                        p.repair_fragmentation();
                        for v in dead.values_mut() {
                            *v = 0;
                        }
                    }
                }
                let view = Page::new(&page);
                prop_assert!(view.check_header().is_ok());
                for (off, data) in &model {
                    prop_assert_eq!(view.item(*off), Some(&data[..]));
                }
                for off in dead.keys() {
                    prop_assert_eq!(view.item(*off), None);
                }
                // Space accounting is exact once fragmentation is repaired.
                let pointers = usize::from(view.item_count());
                let used = used_bytes(&model, dead.values().sum(), pointers);
                let capacity = usize::from(view.special()) - HEADER_SIZE;
                let gap = usize::from(view.upper()) - usize::from(view.lower());
                prop_assert!(gap + used <= capacity);
            }
            let mut p = PageMut::new(&mut page);
            p.repair_fragmentation();
            let view = Page::new(&page);
            let used = used_bytes(&model, 0, usize::from(view.item_count()));
            let gap = usize::from(view.upper()) - usize::from(view.lower());
            prop_assert_eq!(gap + used, usize::from(view.special()) - HEADER_SIZE);
            for (off, data) in &model {
                prop_assert_eq!(view.item(*off), Some(&data[..]));
            }
        }

        #[test]
        fn checksum_round_trips_and_binds_the_block(block in any::<u32>(), fill in any::<u8>()) {
            let mut page = fresh();
            PageMut::new(&mut page).add_item(&[fill; 300], None).unwrap();
            set_checksum(&mut page, block);
            prop_assert!(verify(&page, block).is_ok());
            let other = block.wrapping_add(1);
            let is_mismatch = matches!(verify(&page, other), Err(PageError::ChecksumMismatch { .. }));
            prop_assert!(is_mismatch);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), PAGE_SIZE), block in any::<u32>()) {
            let page: Box<[u8; PAGE_SIZE]> = bytes.into_boxed_slice().try_into().unwrap();
            let _ = verify(&page, block);
            let view = Page::new(&page);
            for off in 0..=view.item_count().min(3000) {
                let _ = view.item(off);
            }
            let _ = view.free_space_bytes();
            let _ = view.special_space();
        }
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let mut page = fresh();
        PageMut::new(&mut page)
            .add_item(b"some tuple bytes", None)
            .unwrap();
        PageMut::new(&mut page).set_lsn(0xDEAD_BEEF);
        set_checksum(&mut page, 7);
        for bit in (0..PAGE_SIZE * 8).step_by(37) {
            let mut bad = page.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(verify(&bad, 7).is_err(), "flip of bit {bit} went unnoticed");
        }
    }

    #[test]
    fn garbage_headers_are_rejected_with_the_field_values() {
        for (lower, upper, special) in [
            (100u16, 50u16, 8192u16),
            (24, 8000, 9000),
            (10, 100, 8192),
            (24, 8192, 8100),
        ] {
            let mut page = fresh();
            put_u16(&mut page, OFF_LOWER, lower);
            put_u16(&mut page, OFF_UPPER, upper);
            put_u16(&mut page, OFF_SPECIAL, special);
            set_checksum(&mut page, 1);
            let err = verify(&page, 1).unwrap_err();
            assert_eq!(
                err,
                PageError::BadBounds {
                    lower,
                    upper,
                    special
                }
            );
            assert!(err.to_string().contains(&format!("pd_lower {lower}")));
        }
    }

    #[test]
    fn an_all_zero_page_is_a_valid_new_page() {
        let page = Box::new([0u8; PAGE_SIZE]);
        assert!(verify(&page, 3).is_ok());
        assert!(Page::new(&page).is_new());
        assert_eq!(Page::new(&page).item(1), None);
    }

    #[test]
    fn unused_line_pointers_are_reused() {
        let mut page = fresh();
        let mut p = PageMut::new(&mut page);
        let a = p.add_item(b"aaaa", None).unwrap();
        let b = p.add_item(b"bbbb", None).unwrap();
        assert!(p.mark_unused(a));
        assert_eq!(p.add_item(b"cccc", None), Some(a));
        assert_eq!(p.as_page().item(b), Some(&b"bbbb"[..]));
        assert_eq!(p.as_page().flags() & HAS_FREE_LINES, 0);
    }
}
