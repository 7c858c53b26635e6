//! [`Page`]: a read-only view of a page. Every accessor is total, so it is safe on a page
//! straight from disk; positions derived from the header are clamped or checked.

use std::ops::Range;

use super::{
    line_pointer_at, max_align, read_u16, read_u32, ItemId, ItemState, OffsetNumber, PageError,
    CHECKSUM_AT, FIRST_OFFSET_NUMBER, FLAGS_AT, HEADER_SIZE, LAYOUT_VERSION, LINE_POINTER_SIZE,
    LOWER_AT, LSN_AT, MAXALIGN, MAX_ITEM_COUNT, MAX_STORED_ITEMS, PAGE_SIZE, RESERVED_AT, SPECIAL_AT, UPPER_AT,
    VALID_FLAG_BITS, VERSION_AT,
};
use crate::types::Lsn;

/// A read-only view of a page (held under at least a shared content lock, or private).
#[derive(Clone, Copy)]
pub struct Page<'a> {
    bytes: &'a [u8; PAGE_SIZE],
}

impl std::fmt::Debug for Page<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page")
            .field("lsn", &self.lsn())
            .field("flags", &self.flags())
            .field("lower", &self.lower())
            .field("upper", &self.upper())
            .field("special", &self.special())
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl<'a> Page<'a> {
    pub fn new(bytes: &'a [u8; PAGE_SIZE]) -> Self {
        Page { bytes }
    }

    /// The raw page.
    pub fn bytes(self) -> &'a [u8; PAGE_SIZE] {
        self.bytes
    }

    /// Whether the page was never initialised (`pd_upper == 0`, PostgreSQL's `PageIsNew`).
    pub fn is_new(self) -> bool {
        self.upper() == 0
    }

    /// `pd_lsn`: the end LSN of the last WAL record that changed the page.
    pub fn lsn(self) -> Lsn {
        Lsn(crate::bytes::u64_at(self.bytes, LSN_AT).expect("pd_lsn lies inside the page"))
    }

    /// `pd_checksum` as stored (meaningful only on a page just read from disk).
    pub fn stored_checksum(self) -> u32 {
        read_u32(self.bytes, CHECKSUM_AT)
    }

    /// `pd_flags`.
    pub fn flags(self) -> u16 {
        read_u16(self.bytes, FLAGS_AT)
    }

    /// Whether every bit of `flag` is set.
    pub fn has_flag(self, flag: u16) -> bool {
        self.flags() & flag == flag
    }

    /// `pd_lower`: the end of the line-pointer array.
    pub fn lower(self) -> u16 {
        read_u16(self.bytes, LOWER_AT)
    }

    /// `pd_upper`: the start of item storage.
    pub fn upper(self) -> u16 {
        read_u16(self.bytes, UPPER_AT)
    }

    /// `pd_special`: the start of the special space.
    pub fn special(self) -> u16 {
        read_u16(self.bytes, SPECIAL_AT)
    }

    /// `pd_version`: the page layout version.
    pub fn version(self) -> u16 {
        read_u16(self.bytes, VERSION_AT)
    }

    /// Checks every header field (what [`verify`](super::verify) checks after the checksum):
    /// version, reserved field, flags, and `24 <= lower <= upper <= special <= 8192`.
    pub fn check_header(self) -> Result<(), PageError> {
        let version = self.version();
        if version != LAYOUT_VERSION {
            return Err(PageError::BadVersion { version });
        }
        let reserved = read_u16(self.bytes, RESERVED_AT);
        if reserved != 0 {
            return Err(PageError::BadReserved { reserved });
        }
        let flags = self.flags();
        if flags & !VALID_FLAG_BITS != 0 {
            return Err(PageError::BadFlags { flags });
        }
        self.check_bounds()
    }

    /// Checks `pd_lower`, `pd_upper` and `pd_special`: everything the item code relies on to
    /// stay inside the page.
    pub(super) fn check_bounds(self) -> Result<(), PageError> {
        let (lower, upper, special) = (self.lower(), self.upper(), self.special());
        let (lower_at, upper_at, special_at) =
            (usize::from(lower), usize::from(upper), usize::from(special));
        if lower_at < HEADER_SIZE || !(lower_at - HEADER_SIZE).is_multiple_of(LINE_POINTER_SIZE) {
            return Err(PageError::BadLower { lower });
        }
        if !(HEADER_SIZE..=PAGE_SIZE).contains(&special_at) || !special_at.is_multiple_of(MAXALIGN)
        {
            return Err(PageError::BadSpecial { special });
        }
        if upper_at > special_at || !upper_at.is_multiple_of(MAXALIGN) {
            return Err(PageError::BadUpper { upper, special });
        }
        if lower_at > upper_at {
            return Err(PageError::LowerAboveUpper { lower, upper });
        }
        Ok(())
    }

    /// Room for one more item, after subtracting its new line pointer (PostgreSQL's
    /// `PageGetFreeSpace`). Items are aligned, so an item of `n` bytes fits if
    /// `max_align(n) <= free_space_bytes()`; 0 on a page with an inconsistent header.
    pub fn free_space_bytes(self) -> usize {
        let gap = usize::from(self.upper()).saturating_sub(usize::from(self.lower()));
        gap.saturating_sub(LINE_POINTER_SIZE)
    }

    /// The highest item number on the page, i.e. the number of line pointers (PostgreSQL's
    /// `PageGetMaxOffsetNumber`). Clamped to what the page can hold, so iterating
    /// `1..=item_count()` stays inside the page even if `pd_lower` is garbage.
    pub fn item_count(self) -> OffsetNumber {
        let pointers = usize::from(self.lower()).saturating_sub(HEADER_SIZE) / LINE_POINTER_SIZE;
        pointers.min(MAX_ITEM_COUNT) as OffsetNumber
    }

    /// Every line pointer with its item number, in order: one pass over the pointer array,
    /// for loops over all of them (page compaction runs one per HOT update in redo).
    pub(super) fn line_pointers(self) -> impl Iterator<Item = (OffsetNumber, ItemId)> + 'a {
        let end = HEADER_SIZE + usize::from(self.item_count()) * LINE_POINTER_SIZE;
        self.bytes[HEADER_SIZE..end]
            .chunks_exact(LINE_POINTER_SIZE)
            .zip(FIRST_OFFSET_NUMBER..)
            .map(|(word, off)| {
                let word = u32::from_le_bytes(word.try_into().expect("chunks of four bytes"));
                (off, ItemId::from_raw(word))
            })
    }

    /// Line pointer `off`, or `None` if `off` is 0 or past [`item_count`](Self::item_count).
    pub fn item_id(self, off: OffsetNumber) -> Option<ItemId> {
        if off < FIRST_OFFSET_NUMBER || off > self.item_count() {
            return None;
        }
        Some(ItemId::from_raw(read_u32(self.bytes, line_pointer_at(off))))
    }

    /// The bytes of live item `off`; `None` if it is out of range, not normal (unused, dead,
    /// redirect), or its line pointer is corrupt (see [`check_item`](Self::check_item)).
    pub fn item(self, off: OffsetNumber) -> Option<&'a [u8]> {
        self.item_range(off).map(|range| &self.bytes[range])
    }

    /// Where live item `off` lies in the page (see [`item`](Self::item)).
    pub(super) fn item_range(self, off: OffsetNumber) -> Option<Range<usize>> {
        let id = self.item_id(off)?;
        if id.state != ItemState::Normal {
            return None;
        }
        self.storage(id)
    }

    /// Checks line pointer `off`: a normal item must have storage, and any storage (of a
    /// normal or dead item) must be aligned and inside `[pd_upper, pd_special)`. `Ok` for an
    /// out-of-range `off` (there is no pointer to be wrong).
    pub fn check_item(self, off: OffsetNumber) -> Result<(), PageError> {
        match self.item_id(off) {
            Some(id) if owns_storage(id) => self.checked_storage(off, id).map(|_| ()),
            _ => Ok(()),
        }
    }

    /// Checks the header bounds and every line pointer, and that no two items overlap: a deep
    /// check (PostgreSQL's amcheck territory), more than [`verify`](super::verify) does.
    pub fn check_items(self) -> Result<(), PageError> {
        self.check_bounds()?;
        let mut starts = [(0u16, 0u16); MAX_ITEM_COUNT];
        let mut n = 0;
        for off in FIRST_OFFSET_NUMBER..=self.item_count() {
            self.check_item(off)?;
            let id = self.item_id(off).unwrap_or(ItemId::UNUSED);
            if owns_storage(id) {
                starts[n] = (id.offset, off);
                n += 1;
            }
        }
        self.check_no_overlap(&mut starts[..n])
    }

    /// The first pass of [`PageMut::repair_fragmentation`]: puts `(byte offset, item number)`
    /// of every live item in `live`, sorted by descending byte offset, and checks each one's
    /// storage (whether two overlap is for the caller to check). The header bounds have been
    /// checked.
    ///
    /// Two passes over the line pointers, both free of branches per pointer (one for the
    /// flags, one gathering the live items): a page that HOT updates have churned mixes live
    /// items and redirects at random, a branch on the state mispredicted at most pointers,
    /// and this scan was most of the time of redoing such updates. Then the live items are
    /// sorted ([`sort_by_descending_start`]). A corrupt page is named afterwards, by
    /// [`check_items`](Self::check_items).
    ///
    /// [`PageMut::repair_fragmentation`]: super::PageMut::repair_fragmentation
    #[allow(
        clippy::needless_bitwise_bool,
        reason = "`&` and `|` on booleans keep the loop free of branches, which is its point"
    )]
    pub(super) fn scan_for_repair(
        self,
        live: &mut [(u16, OffsetNumber); MAX_STORED_ITEMS + 1],
    ) -> Result<RepairScan, PageError> {
        let floor = usize::from(self.upper()).max(usize::from(self.lower()));
        let ceiling = usize::from(self.special());
        let mut scan = RepairScan::default();
        let mut corrupt = false;
        // The flags; the compiler makes this a vector loop.
        for (_, id) in self.line_pointers() {
            let normal = id.state == ItemState::Normal;
            let (start, len) = (usize::from(id.offset), usize::from(id.len_bytes));
            let sane = (len > 0) & start.is_multiple_of(MAXALIGN) & (start >= floor)
                & (start + len <= ceiling);
            corrupt |= normal & !sane;
            let free = matches!(id.state, ItemState::Dead | ItemState::Unused);
            scan.has_unused |= id.state == ItemState::Unused;
            scan.stale_storage |= free & (start | len != 0);
        }
        // The live items in item-number order: written always, kept only if live. A write
        // after the last live item goes to the slot past it (the array has one spare), so it
        // never overwrites a kept one; the `min` keeps it inside the array when there are
        // too many live items, which are refused below.
        let mut n = 0;
        for (off, id) in self.line_pointers() {
            live[n.min(MAX_STORED_ITEMS)] = (id.offset, off);
            n += usize::from(id.state == ItemState::Normal);
        }
        if corrupt || n > MAX_STORED_ITEMS {
            return Err(self.corruption_found_by_scan());
        }
        sort_by_descending_start(&mut live[..n]);
        scan.n = n;
        Ok(scan)
    }

    /// The error for a page [`scan_for_repair`](Self::scan_for_repair) found corrupt: a live
    /// item's storage out of bounds, or more live items than fit apart (pigeonhole: then two
    /// overlap).
    fn corruption_found_by_scan(self) -> PageError {
        // `check_items` finds what the scan found (a bad pointer or an overlap); the fallback
        // cannot be reached and only keeps a corrupt page from reaching a panic.
        let unreachable = PageError::ItemsOverlap {
            offset_number: FIRST_OFFSET_NUMBER,
            other: FIRST_OFFSET_NUMBER,
        };
        self.check_items().err().unwrap_or(unreachable)
    }

    /// Checks that the items at `(byte offset, item number)` do not overlap; sorts `items` by
    /// descending byte offset. The items' storage has been checked.
    fn check_no_overlap(self, items: &mut [(u16, OffsetNumber)]) -> Result<(), PageError> {
        sort_by_descending_start(items);
        self.check_sorted_no_overlap(items)
    }

    /// [`check_no_overlap`](Self::check_no_overlap) of items already sorted by descending
    /// byte offset.
    pub(super) fn check_sorted_no_overlap(
        self,
        items: &[(u16, OffsetNumber)],
    ) -> Result<(), PageError> {
        for pair in items.windows(2) {
            let ((higher_start, higher), (start, off)) = (pair[0], pair[1]);
            // The caller found `off` among the pointers: it is in range.
            let len = ItemId::from_raw(read_u32(self.bytes, line_pointer_at(off))).len_bytes;
            if usize::from(start) + usize::from(len) > usize::from(higher_start) {
                return Err(PageError::ItemsOverlap {
                    offset_number: off,
                    other: higher,
                });
            }
        }
        Ok(())
    }

    /// The special space, `[pd_special, 8192)`; `None` if `pd_special` is out of range (a new
    /// page, or garbage).
    pub fn special_space(self) -> Option<&'a [u8]> {
        let start = usize::from(self.special());
        (HEADER_SIZE..=PAGE_SIZE)
            .contains(&start)
            .then(|| &self.bytes[start..])
    }

    /// Whether any line pointer is unused (what [`HAS_FREE_LINES`](super::HAS_FREE_LINES)
    /// hints at).
    pub fn has_unused_line_pointer(self) -> bool {
        self.first_unused_from(FIRST_OFFSET_NUMBER).is_some()
    }

    /// The first unused line pointer at or after `from`.
    pub(super) fn first_unused_from(self, from: OffsetNumber) -> Option<OffsetNumber> {
        (from.max(FIRST_OFFSET_NUMBER)..=self.item_count())
            .find(|&off| self.item_id(off).is_some_and(|id| !id.is_used()))
    }

    /// The byte range of an item's storage, if the line pointer is sane.
    pub(super) fn storage(self, id: ItemId) -> Option<Range<usize>> {
        let start = usize::from(id.offset);
        let end = start + usize::from(id.len_bytes);
        // Items live in [pd_upper, pd_special); the max/min also keep a garbage header from
        // steering an item into the header, the line pointers or past the page.
        let floor = usize::from(self.upper()).max(usize::from(self.lower()));
        let ceiling = usize::from(self.special()).min(PAGE_SIZE);
        let sane = id.has_storage() && start.is_multiple_of(MAXALIGN) && start >= floor;
        (sane && end <= ceiling).then_some(start..end)
    }

    /// [`storage`](Self::storage), with the corrupt line pointer as an error.
    pub(super) fn checked_storage(
        self,
        off: OffsetNumber,
        id: ItemId,
    ) -> Result<Range<usize>, PageError> {
        self.storage(id).ok_or(PageError::BadLinePointer {
            offset_number: off,
            item_offset: id.offset,
            len_bytes: id.len_bytes,
            upper: self.upper(),
            special: self.special(),
        })
    }

    /// The aligned bytes taken by the storage of the items of `state` (for accounting checks).
    pub(super) fn aligned_storage_bytes(self, state: ItemState) -> usize {
        (FIRST_OFFSET_NUMBER..=self.item_count())
            .filter_map(|off| self.item_id(off))
            .filter(|id| id.state == state)
            .map(|id| max_align(usize::from(id.len_bytes)))
            .sum()
    }
}

/// What [`Page::scan_for_repair`] found besides the live items.
#[derive(Default)]
pub(super) struct RepairScan {
    /// How many live items it put in the array.
    pub n: usize,
    /// Whether a line pointer is unused.
    pub has_unused: bool,
    /// Whether a dead or unused pointer still names storage, to be cleared.
    pub stale_storage: bool,
}

/// Sorts `(byte offset, item number)` pairs by descending byte offset (see [`StartMarks`]);
/// input already in order (a page whose line pointers were never reused) is left as it is,
/// and a page where two items share a boundary or one is unaligned (corrupt: the overlap
/// check that follows says how) is sorted the ordinary way.
fn sort_by_descending_start(items: &mut [(u16, OffsetNumber)]) {
    if items.is_sorted_by(|a, b| a.0 > b.0) {
        return;
    }
    let mut marks = StartMarks::new();
    for &(start, off) in items.iter() {
        marks.mark(start, off);
    }
    let sane = items.iter().all(|&(start, _)| {
        usize::from(start) < PAGE_SIZE && usize::from(start).is_multiple_of(MAXALIGN)
    });
    if !sane || marks.count() != items.len() {
        items.sort_unstable_by_key(|&(start, _)| std::cmp::Reverse(start));
        return;
    }
    let n = marks.read_descending(items);
    debug_assert_eq!(n, items.len(), "every item found its slot");
}

/// Items sorted by byte offset without comparing them: on a sane page items start at
/// `MAXALIGN` boundaries, each at its own, so marking each item's boundary in a bitmap and
/// reading the marks from the top puts them in order, in time proportional to the items (the
/// bitmap is 16 words). Sorting was most of the time of redoing HOT updates (every prune
/// compacts its page).
struct StartMarks {
    /// Item number per boundary, valid where `marked` has the boundary's bit.
    slots: [OffsetNumber; START_SLOTS],
    marked: [u64; START_SLOTS / 64],
}

/// The `MAXALIGN` boundaries of a page.
const START_SLOTS: usize = PAGE_SIZE / MAXALIGN;

impl StartMarks {
    fn new() -> Self {
        StartMarks {
            slots: [0; START_SLOTS],
            marked: [0; START_SLOTS / 64],
        }
    }

    /// Marks item `off` at byte `start`. A start past the page wraps around (no panic): the
    /// caller sorts another way if any start is past the page or unaligned, or if a count
    /// short of the items marked (see [`count`](Self::count)) shows two at one boundary.
    fn mark(&mut self, start: u16, off: OffsetNumber) {
        let slot = usize::from(start) / MAXALIGN % START_SLOTS;
        self.slots[slot] = off;
        self.marked[slot / 64] |= 1 << (slot % 64);
    }

    /// How many boundaries are marked.
    fn count(&self) -> usize {
        self.marked.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Writes the marked `(byte offset, item number)` pairs to `out` from the highest offset
    /// down; returns how many. `out` holds at least [`count`](Self::count) pairs.
    fn read_descending(&self, out: &mut [(u16, OffsetNumber)]) -> usize {
        let mut n = 0;
        for (word_at, &word) in self.marked.iter().enumerate().rev() {
            let mut bits = word;
            // One round per marked bit.
            while bits != 0 {
                let bit = 63 - bits.leading_zeros() as usize;
                bits &= !(1 << bit);
                let slot = word_at * 64 + bit;
                let start = u16::try_from(slot * MAXALIGN).expect("slots cover one page");
                out[n] = (start, self.slots[slot]);
                n += 1;
            }
        }
        n
    }
}

/// Whether the line pointer's offset and length describe item bytes that must be sane: always
/// for a normal item, for a dead one only if it kept its storage. (Unused and redirect
/// pointers have none; a redirect's offset is an item number.)
fn owns_storage(id: ItemId) -> bool {
    match id.state {
        ItemState::Normal => true,
        ItemState::Dead => id.has_storage(),
        ItemState::Unused | ItemState::Redirect => false,
    }
}
