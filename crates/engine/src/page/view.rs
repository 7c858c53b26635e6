//! [`Page`]: a read-only view of a page. Every accessor is total, so it is safe on a page
//! straight from disk; positions derived from the header are clamped or checked.

use std::ops::Range;

use super::{
    line_pointer_at, max_align, read_u16, read_u32, ItemId, ItemState, OffsetNumber, PageError,
    CHECKSUM_AT, FIRST_OFFSET_NUMBER, FLAGS_AT, HEADER_SIZE, LAYOUT_VERSION, LINE_POINTER_SIZE,
    LOWER_AT, LSN_AT, MAXALIGN, MAX_ITEM_COUNT, PAGE_SIZE, RESERVED_AT, SPECIAL_AT, UPPER_AT,
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

    /// Checks that the items at `(byte offset, item number)` do not overlap; sorts `items` by
    /// descending byte offset (the order in which [`PageMut::repair_fragmentation`] moves
    /// them). The items' storage has been checked.
    ///
    /// [`PageMut::repair_fragmentation`]: super::PageMut::repair_fragmentation
    pub(super) fn check_no_overlap(
        self,
        items: &mut [(u16, OffsetNumber)],
    ) -> Result<(), PageError> {
        sort_by_descending_start(items);
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

/// Sorts `(byte offset, item number)` pairs by descending byte offset without comparing
/// them when it can: items start at `MAXALIGN` boundaries on a sane page, each at its own,
/// so marking each item's boundary in a bitmap and reading the marks from the top puts them
/// in order, in time proportional to the items (the bitmap is 16 words). Sorting was most of
/// the time of redoing HOT updates (every prune compacts its page), and so, next, was a pass
/// over every boundary. Already ordered input (a page whose line pointers were never reused)
/// is left as it is; a page where two items share a boundary or one is unaligned (corrupt:
/// the overlap check that follows says how) is sorted the ordinary way.
fn sort_by_descending_start(items: &mut [(u16, OffsetNumber)]) {
    const SLOTS: usize = PAGE_SIZE / MAXALIGN;
    if items.is_sorted_by(|a, b| a.0 > b.0) {
        return;
    }
    // Item number per boundary, valid where `marked` has the boundary's bit.
    let mut slots = [0 as OffsetNumber; SLOTS];
    let mut marked = [0u64; SLOTS / 64];
    for &(start, off) in items.iter() {
        let start = usize::from(start);
        let slot = start / MAXALIGN;
        let free = slot < SLOTS && marked[slot / 64] & (1 << (slot % 64)) == 0;
        if !(free && start.is_multiple_of(MAXALIGN)) {
            items.sort_unstable_by_key(|&(start, _)| std::cmp::Reverse(start));
            return;
        }
        slots[slot] = off;
        marked[slot / 64] |= 1 << (slot % 64);
    }
    let mut n = 0;
    for (word_at, &word) in marked.iter().enumerate().rev() {
        let mut bits = word;
        while bits != 0 {
            let bit = 63 - bits.leading_zeros() as usize;
            bits &= !(1 << bit);
            let slot = word_at * 64 + bit;
            items[n] = (
                u16::try_from(slot * MAXALIGN).expect("slots cover one page"),
                slots[slot],
            );
            n += 1;
        }
    }
    debug_assert_eq!(n, items.len(), "every item found its slot");
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
