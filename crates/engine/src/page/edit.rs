//! [`PageMut`]: changing a page, under the buffer's exclusive content lock. Mutators check the
//! header bounds they rely on and refuse (`None`, `false`, `Err`) instead of writing outside
//! the page, so a corrupt page is never made worse by an out-of-bounds write.

use std::ops::Range;

use super::{
    line_pointer_at, max_align, read_u32, write_u16, write_u32, ItemId, ItemState, OffsetNumber, Page,
    PageError, FIRST_OFFSET_NUMBER, FLAGS_AT, HAS_FREE_LINES, HEADER_SIZE, LAYOUT_VERSION,
    LINE_POINTER_SIZE, LOWER_AT, LSN_AT, MAXALIGN, MAX_ITEM_COUNT, MAX_ITEM_SIZE, MAX_STORED_ITEMS, PAGE_SIZE,
    SPECIAL_AT, UPPER_AT, VALID_FLAG_BITS, VERSION_AT,
};
use super::view::RepairScan;
use crate::types::Lsn;

/// The largest special space [`PageMut::init`] accepts: it must leave room for one aligned
/// item (PostgreSQL asserts `pageSize > specialSize + SizeOfPageHeaderData`).
const MAX_SPECIAL_SIZE: usize = PAGE_SIZE - HEADER_SIZE - MAXALIGN;

/// A page being changed. Only the holder of the buffer's exclusive content lock makes one.
pub struct PageMut<'a> {
    bytes: &'a mut [u8; PAGE_SIZE],
}

impl std::fmt::Debug for PageMut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_page().fmt(f)
    }
}

impl<'a> PageMut<'a> {
    pub fn new(bytes: &'a mut [u8; PAGE_SIZE]) -> Self {
        PageMut { bytes }
    }

    /// A read-only view, for the accessors of [`Page`].
    pub fn as_page(&self) -> Page<'_> {
        Page::new(self.bytes)
    }

    /// Formats an empty page with `special_size_bytes` (rounded up to [`MAXALIGN`]) of
    /// special space at the end, as PostgreSQL's `PageInit`. Everything else, LSN included,
    /// is zeroed.
    ///
    /// # Panics
    ///
    /// If the special space leaves no room for an item (more than 8160 bytes): a caller bug.
    pub fn init(&mut self, special_size_bytes: usize) {
        assert!(
            special_size_bytes <= MAX_SPECIAL_SIZE,
            "a special space of {special_size_bytes} bytes leaves no room for items \
             (at most {MAX_SPECIAL_SIZE})"
        );
        let special = (PAGE_SIZE - max_align(special_size_bytes)) as u16;
        self.bytes.fill(0);
        write_u16(self.bytes, LOWER_AT, HEADER_SIZE as u16);
        write_u16(self.bytes, UPPER_AT, special);
        write_u16(self.bytes, SPECIAL_AT, special);
        write_u16(self.bytes, VERSION_AT, LAYOUT_VERSION);
        debug_assert!(self.as_page().check_header().is_ok());
    }

    /// Sets `pd_lsn` (after WAL-logging the change, to the record's end LSN).
    pub fn set_lsn(&mut self, lsn: Lsn) {
        self.bytes[LSN_AT..LSN_AT + 8].copy_from_slice(&lsn.0.to_le_bytes());
    }

    /// Sets (`on`) or clears the bits of `flag`, one or more of the page flags.
    pub fn set_flag(&mut self, flag: u16, on: bool) {
        debug_assert!(
            flag & !VALID_FLAG_BITS == 0,
            "unknown page flag {flag:#06x}"
        );
        let flags = self.as_page().flags();
        let flags = if on { flags | flag } else { flags & !flag };
        write_u16(self.bytes, FLAGS_AT, flags);
    }

    /// Adds an item and returns its number, as PostgreSQL's `PageAddItem` (without
    /// shuffling). With `at`, the item goes to that line pointer, which must be unused or one
    /// past the last; without, to the first unused line pointer if [`HAS_FREE_LINES`] says
    /// there may be one, else to a new line pointer.
    ///
    /// `None`, with the page unchanged, if the item does not fit, `data` is empty (a normal
    /// item must have storage) or longer than [`MAX_ITEM_SIZE`], `at` is not usable, or the
    /// page header is inconsistent.
    pub fn add_item(&mut self, data: &[u8], at: Option<OffsetNumber>) -> Option<OffsetNumber> {
        let page = self.as_page();
        page.check_bounds().ok()?;
        if data.is_empty() || data.len() > MAX_ITEM_SIZE {
            return None;
        }
        let off = self.choose_line_pointer(at)?;
        let new_pointer = off > page.item_count();
        let lower = usize::from(page.lower()) + if new_pointer { LINE_POINTER_SIZE } else { 0 };
        // Checked: a large item on a nearly full page would take upper below zero.
        let upper = usize::from(page.upper()).checked_sub(max_align(data.len()))?;
        if lower > upper {
            return None;
        }
        self.write_item_bytes(upper, data);
        self.set_item_id(off, ItemId::normal(upper as u16, data.len() as u16));
        write_u16(self.bytes, LOWER_AT, lower as u16);
        write_u16(self.bytes, UPPER_AT, upper as u16);
        if self.as_page().has_flag(HAS_FREE_LINES) {
            // Keep the hint exact: clear it once the last unused pointer is taken, or when it
            // was stale (set, yet the scan found none), as PostgreSQL's PageAddItem does.
            let more = self.as_page().has_unused_line_pointer();
            self.set_flag(HAS_FREE_LINES, more);
        }
        debug_assert!(self.as_page().check_bounds().is_ok());
        Some(off)
    }

    /// Inserts an item as number `at`, moving the line pointers from `at` on up by one (their
    /// items are renumbered `+1`), as PostgreSQL's `PageAddItem` without `overwrite` does for
    /// index pages, whose line pointers are kept in key order. `at` may be one past the last
    /// item (an append). Returns `at`.
    ///
    /// `None`, with the page unchanged, if the item and its new line pointer do not fit, `data`
    /// is empty or longer than [`MAX_ITEM_SIZE`], `at` is 0 or beyond one past the last item,
    /// or the page header is inconsistent.
    pub fn insert_item(&mut self, data: &[u8], at: OffsetNumber) -> Option<OffsetNumber> {
        let page = self.as_page();
        page.check_bounds().ok()?;
        let count = page.item_count();
        if data.is_empty() || data.len() > MAX_ITEM_SIZE || at < FIRST_OFFSET_NUMBER {
            return None;
        }
        if at > count + 1 || usize::from(count) + 1 > MAX_ITEM_COUNT {
            return None;
        }
        let old_lower = usize::from(page.lower());
        let lower = old_lower + LINE_POINTER_SIZE;
        let upper = usize::from(page.upper()).checked_sub(max_align(data.len()))?;
        if lower > upper {
            return None;
        }
        self.write_item_bytes(upper, data);
        let from = line_pointer_at(at);
        // The pointers at and after `at` move up one slot; the gap is then overwritten.
        self.bytes
            .copy_within(from..old_lower, from + LINE_POINTER_SIZE);
        self.set_item_id(at, ItemId::normal(upper as u16, data.len() as u16));
        write_u16(self.bytes, LOWER_AT, lower as u16);
        write_u16(self.bytes, UPPER_AT, upper as u16);
        debug_assert!(self.as_page().check_bounds().is_ok());
        Some(at)
    }

    /// Removes the line pointers `offs` (any order; repeats count once) and their items,
    /// renumbering the items after each removed one down, and compacts the remaining items
    /// towards the special space, as PostgreSQL's `PageIndexMultiDelete`. The remaining items
    /// keep their relative order and their line pointers their states. For index pages, which
    /// have no redirect pointers: a redirect's target number is not renumbered.
    ///
    /// Fails, with the page unchanged, if an offset names no line pointer, the header is
    /// inconsistent, or a line pointer is corrupt or overlaps another (moving those would
    /// spread the damage).
    pub fn delete_items(&mut self, offs: &[OffsetNumber]) -> Result<(), PageError> {
        let page = self.as_page();
        page.check_items()?;
        let count = page.item_count();
        let mut remove = [false; MAX_ITEM_COUNT + 1];
        for &off in offs {
            if off < FIRST_OFFSET_NUMBER || off > count {
                return Err(PageError::NoSuchItem {
                    offset_number: off,
                    item_count: count,
                });
            }
            remove[usize::from(off)] = true;
        }
        let old: [u8; PAGE_SIZE] = *self.bytes;
        let old_page = Page::new(&old);
        let old_lower = usize::from(old_page.lower());
        let mut upper = usize::from(old_page.special());
        let mut kept: OffsetNumber = 0;
        // Kept items that lay back to back in the old page, each below the one before (as
        // items appended in order lie), form a run that one copy moves: most of a page, where
        // vacuum removes a few entries of a leaf filled in key order. An item is part of a
        // run only if its alignment padding is zero already, so the copy leaves the page
        // what item-by-item writing would.
        let mut run = CopyRun::default();
        for off in FIRST_OFFSET_NUMBER..=count {
            if remove[usize::from(off)] {
                continue;
            }
            let id = old_page.item_id(off).unwrap_or(ItemId::UNUSED);
            kept += 1;
            let moved = match old_page.storage(id) {
                Some(range) if matches!(id.state, ItemState::Normal | ItemState::Dead) => {
                    let aligned = max_align(range.len());
                    let padded = range.start..range.start + aligned;
                    if old[range.end..padded.end].iter().all(|&b| b == 0) {
                        if !run.extend(padded.clone()) {
                            self.copy_run(&old, run);
                            run = CopyRun::start(padded, upper);
                        }
                    } else {
                        self.copy_run(&old, run);
                        run = CopyRun::default();
                        self.write_item_bytes(upper - aligned, &old[range]);
                    }
                    upper -= aligned;
                    ItemId {
                        offset: upper as u16,
                        ..id
                    }
                }
                _ => id,
            };
            self.set_item_id(kept, moved);
        }
        self.copy_run(&old, run);
        let lower = HEADER_SIZE + usize::from(kept) * LINE_POINTER_SIZE;
        // Freed pointers and bytes are zeroed, so the page depends only on its items. (The
        // compacted items take no more room than before, so upper did not move below the old
        // lower: this covers the freed pointers too.)
        debug_assert!(upper >= old_lower);
        self.bytes[lower..upper].fill(0);
        write_u16(self.bytes, LOWER_AT, lower as u16);
        write_u16(self.bytes, UPPER_AT, upper as u16);
        let has_unused = self.as_page().has_unused_line_pointer();
        self.set_flag(HAS_FREE_LINES, has_unused);
        debug_assert!(self.as_page().check_items().is_ok());
        Ok(())
    }

    /// The line pointer an item added with `at` goes to, if `at` is usable.
    fn choose_line_pointer(&self, at: Option<OffsetNumber>) -> Option<OffsetNumber> {
        let page = self.as_page();
        let next = page.item_count() + 1;
        match at {
            Some(off) if off == next && usize::from(off) <= MAX_ITEM_COUNT => Some(off),
            Some(off) => page.item_id(off).filter(|id| !id.is_used()).map(|_| off),
            None if page.has_flag(HAS_FREE_LINES) => {
                Some(page.first_unused_from(FIRST_OFFSET_NUMBER).unwrap_or(next))
            }
            None => Some(next),
        }
    }

    /// Copies a run of items (with their padding) from `old` to where [`delete_items`]
    /// placed them.
    ///
    /// [`delete_items`]: Self::delete_items
    fn copy_run(&mut self, old: &[u8; PAGE_SIZE], run: CopyRun) {
        let len = run.src.len();
        self.bytes[run.dst_top - len..run.dst_top].copy_from_slice(&old[run.src]);
    }

    /// Writes an item at `start`, zeroing its alignment padding so that the page bytes (and
    /// so the checksum) depend only on the items, not on what was there before.
    fn write_item_bytes(&mut self, start: usize, data: &[u8]) {
        let end = start + data.len();
        self.bytes[start..end].copy_from_slice(data);
        self.bytes[end..start + max_align(data.len())].fill(0);
    }

    fn set_item_id(&mut self, off: OffsetNumber, id: ItemId) {
        debug_assert!(usize::from(off) <= MAX_ITEM_COUNT);
        write_u32(self.bytes, line_pointer_at(off), id.to_raw());
    }

    /// Marks live item `off` dead (as `ItemIdMarkDead`): readers no longer see it, its
    /// number stays taken, and its storage is reclaimed by the next
    /// [`repair_fragmentation`](Self::repair_fragmentation). `false` if `off` is not a live item.
    pub fn mark_dead(&mut self, off: OffsetNumber) -> bool {
        match self.as_page().item_id(off) {
            Some(id) if id.state == ItemState::Normal => {
                self.set_item_id(
                    off,
                    ItemId {
                        state: ItemState::Dead,
                        ..id
                    },
                );
                true
            }
            _ => false,
        }
    }

    /// Marks line pointer `off` unused (as `ItemIdSetUnused`), free for reuse by
    /// [`add_item`](Self::add_item); its storage is reclaimed by the next
    /// [`repair_fragmentation`](Self::repair_fragmentation). Sets [`HAS_FREE_LINES`] at once
    /// (PostgreSQL sets it only on repair) so the pointer is reused without waiting for one.
    /// `false` if `off` is out of range or already unused.
    pub fn mark_unused(&mut self, off: OffsetNumber) -> bool {
        match self.as_page().item_id(off) {
            Some(id) if id.is_used() => {
                self.set_item_id(off, ItemId::UNUSED);
                self.set_flag(HAS_FREE_LINES, true);
                true
            }
            _ => false,
        }
    }

    /// Makes line pointer `off` a redirect to item `target` of the same page (as
    /// `ItemIdSetRedirect`, left by pruning a HOT chain whose first versions are dead): its
    /// storage, if any, is reclaimed by the next repair. `false` if `off` or `target` is out of
    /// range or `off` is unused.
    pub fn set_redirect(&mut self, off: OffsetNumber, target: OffsetNumber) -> bool {
        let page = self.as_page();
        match (page.item_id(off), page.item_id(target)) {
            (Some(id), Some(_)) if id.is_used() && off != target => {
                self.set_item_id(
                    off,
                    ItemId {
                        offset: target,
                        state: ItemState::Redirect,
                        len_bytes: 0,
                    },
                );
                true
            }
            _ => false,
        }
    }

    /// Marks line pointer `off` dead without storage, whatever its state (a redirect whose
    /// chain died, say): `false` if out of range or unused.
    pub fn set_dead(&mut self, off: OffsetNumber) -> bool {
        match self.as_page().item_id(off) {
            Some(id) if id.is_used() => {
                let storage = if id.state == ItemState::Normal {
                    (id.offset, id.len_bytes)
                } else {
                    (0, 0)
                };
                self.set_item_id(
                    off,
                    ItemId {
                        offset: storage.0,
                        state: ItemState::Dead,
                        len_bytes: storage.1,
                    },
                );
                true
            }
            _ => false,
        }
    }

    /// Drops unused line pointers at the end of the array (PostgreSQL's
    /// `PageTruncateLinePointerArray`), so a page whose items are all gone is empty again.
    pub fn truncate_line_pointers(&mut self) {
        let mut n = self.as_page().item_count();
        // Bounded by the item count.
        while n > 0 && self.as_page().item_id(n).is_some_and(|id| !id.is_used()) {
            n -= 1;
        }
        let lower = HEADER_SIZE + usize::from(n) * LINE_POINTER_SIZE;
        let old_lower = usize::from(self.as_page().lower());
        if lower < old_lower {
            self.bytes[lower..old_lower].fill(0);
            write_u16(self.bytes, LOWER_AT, lower as u16);
            let has_unused = self.as_page().has_unused_line_pointer();
            self.set_flag(HAS_FREE_LINES, has_unused);
        }
    }

    /// Compacts the live items towards the special space, reclaiming the storage of dead
    /// items and of pointers marked unused, as PostgreSQL's `PageRepairFragmentation`. Item
    /// numbers do not change (line pointers are never removed or renumbered), the items keep
    /// their physical order, and [`HAS_FREE_LINES`] ends up set exactly if a pointer is unused.
    ///
    /// Fails, with the page unchanged, on an inconsistent header, a corrupt line pointer or
    /// overlapping items (moving those would spread the damage).
    ///
    /// Redo of HOT updates compacts a page at nearly every update, so this is one pass over
    /// the line pointers and then work in proportion to the live items: items that lie next
    /// to each other move together, in one copy, as in PostgreSQL's `compactify_tuples`.
    pub fn repair_fragmentation(&mut self) -> Result<(), PageError> {
        let page = self.as_page();
        page.check_bounds()?;
        // One spare slot: see `scan_for_repair`.
        let mut live = [(0u16, 0 as OffsetNumber); MAX_STORED_ITEMS + 1];
        let RepairScan {
            n,
            has_unused,
            stale_storage,
        } = page.scan_for_repair(&mut live)?;
        // Sorted by descending offset: each item then moves only towards the end of the page,
        // over bytes already vacated, so in-place moves cannot clobber an item not yet moved.
        page.check_sorted_no_overlap(&live[..n])?;
        let old_upper = usize::from(page.upper());
        let special = usize::from(page.special());
        let upper = self.move_items_up(&live[..n], special);
        self.bytes[old_upper..upper].fill(0);
        write_u16(self.bytes, UPPER_AT, upper as u16);
        if stale_storage {
            self.drop_storage_of_dead_and_unused();
        }
        self.set_flag(HAS_FREE_LINES, has_unused);
        debug_assert_eq!(
            special - upper,
            self.as_page().aligned_storage_bytes(ItemState::Normal),
            "after repair, item storage is exactly the live items"
        );
        Ok(())
    }

    /// Moves the live items `(byte offset, item number)`, sorted by descending offset and
    /// checked not to overlap, to lie packed below `top`; returns the new `pd_upper`. A run of
    /// items that already touch one another moves as one block, padding included (padding is
    /// zero: [`add_item`](Self::add_item) writes it, and items never change length).
    fn move_items_up(&mut self, items: &[(u16, OffsetNumber)], top: usize) -> usize {
        let mut upper = top;
        let mut i = 0;
        // Each round consumes at least one item.
        while i < items.len() {
            let run_top = usize::from(items[i].0) + self.aligned_len(items[i].1);
            let mut run_bottom = usize::from(items[i].0);
            let mut j = i + 1;
            while j < items.len()
                && usize::from(items[j].0) + self.aligned_len(items[j].1) == run_bottom
            {
                run_bottom = usize::from(items[j].0);
                j += 1;
            }
            debug_assert!(upper >= run_top, "items only move towards the special space");
            let shift = upper - run_top;
            if shift > 0 {
                self.bytes.copy_within(run_bottom..run_top, run_bottom + shift);
                for &(start, off) in &items[i..j] {
                    let len = self.item_len(off);
                    let moved = usize::from(start) + shift;
                    self.set_item_id(off, ItemId::normal(moved as u16, len));
                }
            }
            upper = run_bottom + shift;
            i = j;
        }
        upper
    }

    /// The length of item `off`, whose pointer the caller found in range.
    fn item_len(&self, off: OffsetNumber) -> u16 {
        ItemId::from_raw(read_u32(self.bytes, line_pointer_at(off))).len_bytes
    }

    /// The aligned bytes item `off` takes, its pointer in range.
    fn aligned_len(&self, off: OffsetNumber) -> usize {
        max_align(usize::from(self.item_len(off)))
    }

    /// Clears the offset and length of dead and unused line pointers: their storage is gone.
    fn drop_storage_of_dead_and_unused(&mut self) {
        // The count once, not per pointer.
        for off in FIRST_OFFSET_NUMBER..=self.as_page().item_count() {
            let at = line_pointer_at(off);
            let id = ItemId::from_raw(read_u32(self.bytes, at));
            if matches!(id.state, ItemState::Dead | ItemState::Unused) && id != ItemId::UNUSED {
                let cleared = ItemId {
                    offset: 0,
                    len_bytes: 0,
                    ..id
                };
                write_u32(self.bytes, at, cleared.to_raw());
            }
        }
    }

    /// The bytes of live item `off`, writable in place (a tuple header's `xmax`, say); `None`
    /// under the same conditions as [`Page::item`]. The length cannot change.
    pub fn item_mut(self, off: OffsetNumber) -> Option<&'a mut [u8]> {
        let range = self.as_page().item_range(off)?;
        Some(&mut self.bytes[range])
    }

    /// The special space, writable; `None` if `pd_special` is out of range (see
    /// [`Page::special_space`]).
    pub fn special_space_mut(&mut self) -> Option<&mut [u8]> {
        let start = usize::from(self.as_page().special());
        (HEADER_SIZE..=PAGE_SIZE)
            .contains(&start)
            .then(|| &mut self.bytes[start..])
    }
}

/// Old bytes `src` go to the bytes ending at `dst_top` ([`PageMut::delete_items`]).
#[derive(Clone, Debug, Default)]
struct CopyRun {
    src: Range<usize>,
    dst_top: usize,
}

impl CopyRun {
    fn start(src: Range<usize>, dst_top: usize) -> Self {
        CopyRun { src, dst_top }
    }

    /// Takes in the next item's padded storage if it lies just below the run.
    fn extend(&mut self, next: Range<usize>) -> bool {
        let joins = !self.src.is_empty() && next.end == self.src.start;
        if joins {
            self.src.start = next.start;
        }
        joins
    }
}
