//! Page layout tests: a model-checked proptest of the item operations, checksum and
//! corruption tests, and "never panics on garbage" proptests.

use proptest::prelude::*;

use super::*;
use crate::types::Lsn;

fn new_page(special_size_bytes: usize) -> Box<[u8; PAGE_SIZE]> {
    let mut bytes = Box::new([0u8; PAGE_SIZE]);
    PageMut::new(&mut bytes).init(special_size_bytes);
    bytes
}

/// Item contents that differ per item and per byte, so a misplaced or shifted item shows.
fn item_bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add((i % 251) as u8))
        .collect()
}

/// The checksum computed the obvious way, on a copy with the field zeroed.
fn reference_checksum(page: &[u8; PAGE_SIZE], block: u32) -> u32 {
    let mut input = block.to_le_bytes().to_vec();
    input.extend_from_slice(page);
    input[4 + CHECKSUM_AT..4 + CHECKSUM_AT + 4].fill(0);
    crc32c::crc32c(&input)
}

fn set_header(bytes: &mut [u8; PAGE_SIZE], lower: u16, upper: u16, special: u16) {
    write_u16(bytes, LOWER_AT, lower);
    write_u16(bytes, UPPER_AT, upper);
    write_u16(bytes, SPECIAL_AT, special);
}

// ---------------------------------------------------------------------------------------------
// Model-checked random operations.

/// What the model expects of one line pointer.
#[derive(Clone, Debug)]
enum Slot {
    Unused,
    Live(Vec<u8>),
    /// Dead; keeps its aligned storage until the next repair.
    Dead {
        storage_bytes: usize,
    },
}

/// The expected page: line pointers in order (index 0 is item 1), and the bytes of storage
/// orphaned by `mark_unused` (reclaimed by the next repair).
#[derive(Debug)]
struct Model {
    slots: Vec<Slot>,
    orphaned_bytes: usize,
    special: usize,
}

impl Model {
    fn first_unused(&self) -> Option<OffsetNumber> {
        let index = self.slots.iter().position(|s| matches!(s, Slot::Unused))?;
        Some(index as OffsetNumber + 1)
    }

    fn next(&self) -> OffsetNumber {
        self.slots.len() as OffsetNumber + 1
    }

    /// Bytes between pd_upper and pd_special: live and dead storage plus orphans.
    fn storage_bytes(&self) -> usize {
        let slots: usize = self
            .slots
            .iter()
            .map(|s| match s {
                Slot::Unused => 0,
                Slot::Live(data) => max_align(data.len()),
                Slot::Dead { storage_bytes } => *storage_bytes,
            })
            .sum();
        slots + self.orphaned_bytes
    }

    fn slot(&mut self, off: OffsetNumber) -> Option<&mut Slot> {
        self.slots.get_mut(usize::from(off).checked_sub(1)?)
    }

    /// The item number an add should get, before considering room.
    fn add_target(&self, at: Option<OffsetNumber>) -> Option<OffsetNumber> {
        match at {
            None => Some(self.first_unused().unwrap_or(self.next())),
            Some(off) if off == self.next() => Some(off),
            Some(0) => None,
            Some(off) => {
                matches!(self.slots.get(usize::from(off) - 1), Some(Slot::Unused)).then_some(off)
            }
        }
    }

    fn place(&mut self, off: OffsetNumber, data: Vec<u8>) {
        if off == self.next() {
            self.slots.push(Slot::Live(data));
        } else {
            self.slots[usize::from(off) - 1] = Slot::Live(data);
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// `at`: `None`, or a selector reduced modulo `item_count + 2` (0 is invalid,
    /// `item_count + 1` appends).
    Add {
        len: usize,
        seed: u8,
        at: Option<u16>,
    },
    MarkDead(u16),
    MarkUnused(u16),
    Repair,
    Checksum(u32),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let len = prop_oneof![1usize..=16, 1usize..=2000];
    prop_oneof![
        8 => (len, any::<u8>(), proptest::option::weighted(0.2, any::<u16>()))
            .prop_map(|(len, seed, at)| Op::Add { len, seed, at }),
        3 => any::<u16>().prop_map(Op::MarkDead),
        3 => any::<u16>().prop_map(Op::MarkUnused),
        1 => Just(Op::Repair),
        1 => any::<u32>().prop_map(Op::Checksum),
    ]
}

/// A selector reduced to `0..=item_count + 1`, so that it often names a real line pointer.
fn select(model: &Model, selector: u16) -> OffsetNumber {
    selector % (model.next() + 1)
}

fn apply(bytes: &mut [u8; PAGE_SIZE], model: &mut Model, op: Op) -> Result<(), TestCaseError> {
    match op {
        Op::Add { len, seed, at } => {
            let at = at.map(|s| select(model, s));
            let data = item_bytes(len, seed);
            let page = Page::new(bytes);
            let gap = usize::from(page.upper()) - usize::from(page.lower());
            let promised = at.is_none() && page.free_space_bytes() >= max_align(len);
            let target = model.add_target(at);
            let pointer_bytes = if target == Some(model.next()) {
                LINE_POINTER_SIZE
            } else {
                0
            };
            let fits = max_align(len) + pointer_bytes <= gap;
            let expected = target.filter(|_| fits);
            let got = PageMut::new(bytes).add_item(&data, at);
            prop_assert_eq!(
                got,
                expected,
                "add of {} bytes at {:?} with gap {}",
                len,
                at,
                gap
            );
            prop_assert!(!promised || got.is_some(), "free_space_bytes promised room");
            if let Some(off) = got {
                model.place(off, data);
            }
        }
        Op::MarkDead(selector) => {
            let off = select(model, selector);
            let storage = match model.slot(off) {
                Some(Slot::Live(data)) => Some(max_align(data.len())),
                _ => None,
            };
            if let Some(storage_bytes) = storage {
                *model.slot(off).expect("in range") = Slot::Dead { storage_bytes };
            }
            prop_assert_eq!(PageMut::new(bytes).mark_dead(off), storage.is_some());
        }
        Op::MarkUnused(selector) => {
            let off = select(model, selector);
            let freed = match model.slot(off) {
                Some(Slot::Live(data)) => Some(max_align(data.len())),
                Some(Slot::Dead { storage_bytes }) => Some(*storage_bytes),
                _ => None,
            };
            if let Some(storage_bytes) = freed {
                model.orphaned_bytes += storage_bytes;
                *model.slot(off).expect("in range") = Slot::Unused;
            }
            prop_assert_eq!(PageMut::new(bytes).mark_unused(off), freed.is_some());
        }
        Op::Repair => {
            prop_assert_eq!(PageMut::new(bytes).repair_fragmentation(), Ok(()));
            model.orphaned_bytes = 0;
            for slot in &mut model.slots {
                if let Slot::Dead { storage_bytes } = slot {
                    *storage_bytes = 0;
                }
            }
        }
        Op::Checksum(block) => {
            set_checksum(bytes, block);
            prop_assert_eq!(verify(bytes, block), Ok(()));
            let elsewhere = verify(bytes, block.wrapping_add(1));
            prop_assert!(
                matches!(elsewhere, Err(PageError::ChecksumMismatch { .. })),
                "{:?}",
                elsewhere
            );
        }
    }
    Ok(())
}

/// Everything the model predicts about the page.
fn check_against_model(bytes: &[u8; PAGE_SIZE], model: &Model) -> Result<(), TestCaseError> {
    let page = Page::new(bytes);
    prop_assert_eq!(page.check_header(), Ok(()));
    prop_assert_eq!(page.check_items(), Ok(()));
    let (lower, upper) = (usize::from(page.lower()), usize::from(page.upper()));
    prop_assert_eq!(usize::from(page.special()), model.special);
    prop_assert_eq!(usize::from(page.item_count()), model.slots.len());
    prop_assert_eq!(lower, HEADER_SIZE + model.slots.len() * LINE_POINTER_SIZE);
    prop_assert_eq!(
        model.special - upper,
        model.storage_bytes(),
        "storage accounting"
    );
    prop_assert_eq!(
        page.free_space_bytes(),
        (upper - lower).saturating_sub(LINE_POINTER_SIZE)
    );
    prop_assert_eq!(
        page.has_flag(HAS_FREE_LINES),
        model.first_unused().is_some()
    );
    for (index, slot) in model.slots.iter().enumerate() {
        let off = index as OffsetNumber + 1;
        let state = page.item_id(off).map(|id| id.state);
        match slot {
            Slot::Unused => prop_assert_eq!(state, Some(ItemState::Unused)),
            Slot::Live(_) => prop_assert_eq!(state, Some(ItemState::Normal)),
            Slot::Dead { .. } => prop_assert_eq!(state, Some(ItemState::Dead)),
        }
        let expected = match slot {
            Slot::Live(data) => Some(&data[..]),
            _ => None,
        };
        prop_assert_eq!(page.item(off), expected, "item {}", off);
    }
    prop_assert_eq!(page.item(0), None);
    prop_assert_eq!(page.item(model.next()), None);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn model_random_operations_keep_items_and_space_exact(
        special_size in prop_oneof![Just(0usize), 1usize..=64],
        ops in proptest::collection::vec(op_strategy(), 1..200),
    ) {
        let mut bytes = new_page(special_size);
        let mut model = Model {
            slots: Vec::new(),
            orphaned_bytes: 0,
            special: PAGE_SIZE - max_align(special_size),
        };
        for op in ops {
            apply(&mut bytes, &mut model, op)?;
            check_against_model(&bytes, &model)?;
        }
        // A final repair leaves exactly the live items.
        PageMut::new(&mut bytes).repair_fragmentation().unwrap();
        model.orphaned_bytes = 0;
        for slot in &mut model.slots {
            if let Slot::Dead { storage_bytes } = slot {
                *storage_bytes = 0;
            }
        }
        check_against_model(&bytes, &model)?;
    }

    #[test]
    fn checksum_matches_a_reference_over_a_copied_page(
        bytes in proptest::collection::vec(any::<u8>(), PAGE_SIZE),
        block in any::<u32>(),
    ) {
        let page: [u8; PAGE_SIZE] = bytes.try_into().unwrap();
        prop_assert_eq!(checksum(&page, block), reference_checksum(&page, block));
    }

    #[test]
    fn checksum_round_trips_only_at_the_same_block(
        block in any::<u32>(),
        other in any::<u32>(),
        items in proptest::collection::vec((1usize..=500, any::<u8>()), 0..10),
        lsn in any::<u64>(),
    ) {
        prop_assume!(block != other);
        let mut bytes = new_page(16);
        let mut page = PageMut::new(&mut bytes);
        page.set_lsn(Lsn(lsn));
        for (len, seed) in items {
            page.add_item(&item_bytes(len, seed), None).unwrap();
        }
        let before = *bytes;
        set_checksum(&mut bytes, block);
        prop_assert_eq!(&bytes[..CHECKSUM_AT], &before[..CHECKSUM_AT]);
        prop_assert_eq!(&bytes[CHECKSUM_AT + 4..], &before[CHECKSUM_AT + 4..]);
        prop_assert_eq!(verify(&bytes, block), Ok(()));
        let stored = Page::new(&bytes).stored_checksum();
        prop_assert_eq!(
            verify(&bytes, other),
            Err(PageError::ChecksumMismatch { stored, calculated: checksum(&bytes, other) })
        );
    }

    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), PAGE_SIZE),
        block in any::<u32>(),
        sane_header in any::<bool>(),
    ) {
        let mut bytes: Box<[u8; PAGE_SIZE]> = bytes.into_boxed_slice().try_into().unwrap();
        if sane_header {
            // Random line pointers under a plausible header reach the item code paths.
            write_u16(&mut bytes, VERSION_AT, LAYOUT_VERSION);
            let lower = read_u16(&bytes, LOWER_AT) % 512 / 4 * 4 + HEADER_SIZE as u16;
            set_header(&mut bytes, lower, 4096, PAGE_SIZE as u16);
        }
        exercise_everything(&mut bytes, block);
    }

    #[test]
    fn garbage_line_pointers_never_escape_the_item_space(
        lower_pointers in 0usize..64,
        words in proptest::collection::vec(line_pointer_word(), 64),
        fill in any::<u8>(),
        // 0: just below the lowest slot of the pointers in use; else in 8-byte units.
        upper in prop_oneof![Just(0usize), (HEADER_SIZE + 64 * LINE_POINTER_SIZE) / 8..=PAGE_SIZE / 8],
    ) {
        let mut bytes = new_page(0);
        let upper = if upper == 0 { PAGE_SIZE - 64 * lower_pointers } else { upper * 8 };
        bytes[upper..].fill(fill);
        for (index, word) in words.into_iter().enumerate() {
            write_u32(&mut bytes, HEADER_SIZE + index * LINE_POINTER_SIZE, encode_word(index, word));
        }
        let lower = HEADER_SIZE + lower_pointers * LINE_POINTER_SIZE;
        set_header(&mut bytes, lower as u16, upper as u16, PAGE_SIZE as u16);
        let page = Page::new(&bytes);
        let readable: Vec<(OffsetNumber, Vec<u8>)> = (1..=page.item_count())
            .filter_map(|off| Some((off, page.item(off)?.to_vec())))
            .collect();
        for (off, _) in &readable {
            let id = page.item_id(*off).unwrap();
            prop_assert!(usize::from(id.offset) >= upper);
            prop_assert!(usize::from(id.offset) + usize::from(id.len_bytes) <= PAGE_SIZE);
        }
        let before = *bytes;
        if PageMut::new(&mut bytes).repair_fragmentation().is_ok() {
            // Only a page whose live items were all sane and disjoint is repaired, and then
            // every live item survives intact.
            let page = Page::new(&bytes);
            prop_assert_eq!(page.check_items(), Ok(()));
            for (off, data) in &readable {
                prop_assert_eq!(page.item(*off), Some(&data[..]));
            }
        } else {
            prop_assert_eq!(&bytes[..], &before[..], "a refused repair changes nothing");
            prop_assert!(Page::new(&bytes).check_items().is_err(), "only a corrupt page is refused");
        }
    }
}

/// A line-pointer word: random bits (`Err`), or `(state, length)` of a pointer to its own
/// 64-byte slot at the end of the page (`Ok`, see [`encode_word`]), so that some pages pass
/// every check and get repaired.
fn line_pointer_word() -> impl Strategy<Value = Result<(u32, u32), u32>> {
    prop_oneof![
        1 => any::<u32>().prop_map(Err),
        5 => (0u32..4, 1u32..=64).prop_map(Ok),
    ]
}

/// The raw line pointer number `index` (0-based) for a [`line_pointer_word`].
fn encode_word(index: usize, word: Result<(u32, u32), u32>) -> u32 {
    match word {
        Err(raw) => raw,
        Ok((state, len_bytes)) => {
            let item_at = (PAGE_SIZE - 64 * (index + 1)) as u32;
            item_at | (state << 15) | (len_bytes << 17)
        }
    }
}

/// Calls every accessor and mutator on `bytes`; the test is that none panics.
fn exercise_everything(bytes: &mut [u8; PAGE_SIZE], block: u32) {
    let _ = verify(bytes, block);
    let page = Page::new(bytes);
    let _ = (page.is_new(), page.lsn(), page.flags(), page.check_header());
    let _ = (
        page.free_space_bytes(),
        page.special_space(),
        page.check_items(),
    );
    for off in 0..=page.item_count().saturating_add(2) {
        let _ = (page.item_id(off), page.item(off), page.check_item(off));
    }
    let mut copy = *bytes;
    let mut page = PageMut::new(&mut copy);
    let _ = page.add_item(&[7; 100], None);
    let _ = page.add_item(&[7; 8], Some(3));
    let _ = page.insert_item(&[9; 24], 2);
    let _ = page.delete_items(&[1, 3]);
    let _ = (
        page.mark_dead(1),
        page.mark_unused(2),
        page.repair_fragmentation(),
    );
    let _ = page.special_space_mut();
    set_checksum(bytes, block);
    let _ = verify(bytes, block);
}

// ---------------------------------------------------------------------------------------------
// Corruption detection.

#[test]
fn every_single_bit_flip_is_a_checksum_mismatch() {
    let mut bytes = new_page(16);
    let mut page = PageMut::new(&mut bytes);
    page.set_lsn(Lsn(0x0123_4567_89AB_CDEF));
    for seed in 0..5 {
        page.add_item(&item_bytes(300, seed), None).unwrap();
    }
    set_checksum(&mut bytes, 7);
    assert_eq!(verify(&bytes, 7), Ok(()));
    // CRC32C detects every single-bit error, so every bit of the page is tried (the sample is
    // the whole page), including the header fields and the checksum itself.
    for bit in 0..PAGE_SIZE * 8 {
        let (at, mask) = (bit / 8, 1u8 << (bit % 8));
        bytes[at] ^= mask;
        let result = verify(&bytes, 7);
        assert!(
            matches!(result, Err(PageError::ChecksumMismatch { .. })),
            "flipping bit {bit} gave {result:?}"
        );
        bytes[at] ^= mask;
    }
}

#[test]
fn garbage_bounds_are_rejected_naming_the_field() {
    let cases = [
        (
            "lower > upper",
            200,
            96,
            8192,
            PageError::LowerAboveUpper {
                lower: 200,
                upper: 96,
            },
        ),
        (
            "special > 8192",
            24,
            8000,
            9000,
            PageError::BadSpecial { special: 9000 },
        ),
        (
            "upper > special",
            24,
            8192,
            8000,
            PageError::BadUpper {
                upper: 8192,
                special: 8000,
            },
        ),
        (
            "lower < 24",
            10,
            8000,
            8192,
            PageError::BadLower { lower: 10 },
        ),
        (
            "lower between pointers",
            26,
            8000,
            8192,
            PageError::BadLower { lower: 26 },
        ),
        (
            "special misaligned",
            24,
            8000,
            8190,
            PageError::BadSpecial { special: 8190 },
        ),
        (
            "upper misaligned",
            24,
            8001,
            8192,
            PageError::BadUpper {
                upper: 8001,
                special: 8192,
            },
        ),
        ("everything zero", 0, 0, 0, PageError::BadLower { lower: 0 }),
        (
            "lower one pointer above upper",
            100,
            96,
            8192,
            PageError::LowerAboveUpper {
                lower: 100,
                upper: 96,
            },
        ),
        (
            "upper one step above special",
            24,
            8008,
            8000,
            PageError::BadUpper {
                upper: 8008,
                special: 8000,
            },
        ),
        (
            "special one step past the page",
            24,
            8000,
            8200,
            PageError::BadSpecial { special: 8200 },
        ),
    ];
    for (what, lower, upper, special, expected) in cases {
        let mut bytes = new_page(0);
        set_header(&mut bytes, lower, upper, special);
        // Checksummed after the damage: only the header check can catch it.
        set_checksum(&mut bytes, 1);
        let err = verify(&bytes, 1).expect_err(what);
        assert_eq!(err, expected, "{what}");
        let message = err.to_string();
        let value = match err {
            PageError::LowerAboveUpper { lower, .. } | PageError::BadLower { lower } => lower,
            PageError::BadSpecial { special } => special,
            PageError::BadUpper { upper, .. } => upper,
            _ => unreachable!(),
        };
        assert!(message.contains(&format!(" {value}")), "{what}: {message}");
        assert!(message.contains("pd_"), "{what}: {message}");
    }
}

#[test]
fn boundary_headers_are_accepted() {
    // A full page (lower == upper), no special space (upper == special == 8192), and a page
    // whose line pointers fill everything (lower == special).
    for (lower, upper, special) in [(4000, 4000, 8192), (24, 8192, 8192), (8184, 8184, 8184)] {
        let mut bytes = new_page(0);
        set_header(&mut bytes, lower, upper, special);
        set_checksum(&mut bytes, 2);
        assert_eq!(verify(&bytes, 2), Ok(()), "{lower} {upper} {special}");
    }
}

#[test]
fn bad_version_reserved_and_flags_are_rejected() {
    let cases: [(usize, u16, PageError); 3] = [
        (VERSION_AT, 2, PageError::BadVersion { version: 2 }),
        (RESERVED_AT, 0x10, PageError::BadReserved { reserved: 0x10 }),
        (FLAGS_AT, 0x8, PageError::BadFlags { flags: 0x8 }),
    ];
    for (at, value, expected) in cases {
        let mut bytes = new_page(0);
        write_u16(&mut bytes, at, value);
        set_checksum(&mut bytes, 3);
        assert_eq!(verify(&bytes, 3), Err(expected));
    }
}

#[test]
fn damage_before_the_checksum_is_a_mismatch_not_a_header_error() {
    let mut bytes = new_page(0);
    set_checksum(&mut bytes, 3);
    set_header(&mut bytes, 200, 96, 8192);
    assert!(matches!(
        verify(&bytes, 3),
        Err(PageError::ChecksumMismatch { .. })
    ));
}

#[test]
fn all_zero_page_is_a_valid_new_page() {
    let mut bytes = Box::new([0u8; PAGE_SIZE]);
    for block in [0, 1, u32::MAX] {
        assert_eq!(verify(&bytes, block), Ok(()));
    }
    let page = Page::new(&bytes);
    assert!(page.is_new());
    assert_eq!(
        (page.item_count(), page.item(1), page.special_space()),
        (0, None, None)
    );
    set_checksum(&mut bytes, 5);
    assert!(
        bytes.iter().all(|&b| b == 0),
        "a new page carries no checksum"
    );
    assert!(PageMut::new(&mut bytes).add_item(b"x", None).is_none());
}

#[test]
fn zero_header_with_data_is_not_a_new_page() {
    let mut bytes = Box::new([0u8; PAGE_SIZE]);
    bytes[PAGE_SIZE - 1] = 1;
    assert!(matches!(
        verify(&bytes, 0),
        Err(PageError::ChecksumMismatch { .. })
    ));
    // Even with a matching checksum, the header is invalid.
    let crc = checksum(&bytes, 0);
    write_u32(&mut bytes, CHECKSUM_AT, crc);
    assert_eq!(verify(&bytes, 0), Err(PageError::BadVersion { version: 0 }));
}

// ---------------------------------------------------------------------------------------------
// Layout and item operations.

#[test]
fn layout_bytes_match_the_documented_diagram() {
    let mut bytes = new_page(12);
    // Stale bytes in the free space (a writer may use it raw, as the clog does): the item's
    // padding must still come out zero.
    bytes[HEADER_SIZE..8176].fill(0xEE);
    let mut page = PageMut::new(&mut bytes);
    page.set_lsn(Lsn(0x1122_3344_5566_7788));
    page.set_flag(ALL_VISIBLE, true);
    assert_eq!(page.add_item(b"hello", None), Some(1));
    set_checksum(&mut bytes, 9);
    assert_eq!(&bytes[0..8], &0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(&bytes[8..12], &reference_checksum(&bytes, 9).to_le_bytes());
    assert_eq!(&bytes[12..14], &ALL_VISIBLE.to_le_bytes());
    assert_eq!(
        &bytes[14..16],
        &28u16.to_le_bytes(),
        "pd_lower: one line pointer"
    );
    assert_eq!(&bytes[16..18], &8168u16.to_le_bytes(), "pd_upper: 8176 - 8");
    assert_eq!(
        &bytes[18..20],
        &8176u16.to_le_bytes(),
        "pd_special: 8192 - 16"
    );
    assert_eq!(&bytes[20..22], &1u16.to_le_bytes(), "pd_version");
    assert_eq!(&bytes[22..24], &[0, 0], "reserved");
    let (item_at, normal, len_bytes) = (8168u32, 1u32, 5u32);
    let pointer = item_at | (normal << 15) | (len_bytes << 17);
    assert_eq!(&bytes[24..28], &u32::to_le_bytes(pointer));
    assert_eq!(&bytes[8168..8176], b"hello\0\0\0", "padding is zeroed");
}

#[test]
fn line_pointer_bits_match_postgres_itemiddata() {
    let id = ItemId {
        offset: 0x7FFF,
        state: ItemState::Dead,
        len_bytes: 0x1234,
    };
    assert_eq!(id.to_raw(), 0x7FFF | (3 << 15) | (0x1234 << 17));
    assert_eq!(ItemId::from_raw(id.to_raw()), id);
    assert_eq!(ItemId::from_raw(0x0001_0000).state, ItemState::Redirect);
    assert_eq!(ItemId::from_raw(0).to_raw(), ItemId::UNUSED.to_raw());
    assert!(!ItemId::UNUSED.is_used() && !ItemId::UNUSED.has_storage());
}

#[test]
fn free_space_counts_the_new_line_pointer_and_alignment() {
    let mut bytes = new_page(0);
    let mut page = PageMut::new(&mut bytes);
    assert_eq!(
        page.as_page().free_space_bytes(),
        PAGE_SIZE - HEADER_SIZE - LINE_POINTER_SIZE
    );
    assert_eq!(page.add_item(&[1; MAX_ITEM_SIZE + 1], None), None);
    assert_eq!(page.add_item(&[1; MAX_ITEM_SIZE], None), Some(1));
    assert_eq!(page.as_page().free_space_bytes(), 0);
    assert_eq!(
        page.add_item(&[1], None),
        None,
        "no room for a line pointer"
    );
    assert_eq!(page.add_item(&[], None), None, "empty items are refused");
    assert!(page.mark_unused(1));
    assert_eq!(page.repair_fragmentation(), Ok(()));
    assert_eq!(
        page.as_page().free_space_bytes(),
        PAGE_SIZE - HEADER_SIZE - 2 * 4
    );
    assert_eq!(
        page.add_item(&[2; MAX_ITEM_SIZE], None),
        Some(1),
        "reuses the pointer"
    );
}

#[test]
fn unused_line_pointer_is_reused_first_and_the_hint_cleared() {
    let mut bytes = new_page(0);
    let mut page = PageMut::new(&mut bytes);
    for n in 1..=4u8 {
        assert_eq!(page.add_item(&[n; 10], None), Some(OffsetNumber::from(n)));
    }
    assert!(page.mark_unused(3) && page.mark_unused(2));
    assert!(!page.mark_unused(2), "already unused");
    assert!(page.as_page().has_flag(HAS_FREE_LINES));
    assert_eq!(page.add_item(b"first", None), Some(2));
    assert!(page.as_page().has_flag(HAS_FREE_LINES), "3 is still unused");
    assert_eq!(page.add_item(b"second", None), Some(3));
    assert!(!page.as_page().has_flag(HAS_FREE_LINES));
    assert_eq!(page.add_item(b"third", None), Some(5));
    // A stale hint (as a page from disk may carry) is cleared by the next add.
    page.set_flag(HAS_FREE_LINES, true);
    assert_eq!(page.add_item(b"fourth", None), Some(6));
    assert!(!page.as_page().has_flag(HAS_FREE_LINES));
    assert_eq!(page.as_page().item(4), Some(&[4u8; 10][..]));
}

#[test]
fn add_at_an_explicit_offset_follows_page_add_item() {
    let mut bytes = new_page(0);
    let mut page = PageMut::new(&mut bytes);
    assert_eq!(page.add_item(b"a", Some(0)), None, "0 is invalid");
    assert_eq!(
        page.add_item(b"a", Some(2)),
        None,
        "beyond the next new pointer"
    );
    assert_eq!(page.add_item(b"a", Some(1)), Some(1));
    assert_eq!(
        page.add_item(b"b", Some(1)),
        None,
        "will not overwrite a used pointer"
    );
    assert!(page.mark_dead(1));
    assert_eq!(page.add_item(b"b", Some(1)), None, "nor a dead one");
    assert!(page.mark_unused(1));
    assert_eq!(page.add_item(b"b", Some(1)), Some(1));
    assert_eq!(page.as_page().item(1), Some(&b"b"[..]));
}

#[test]
fn repair_compacts_keeping_numbers_and_physical_order() {
    let mut bytes = new_page(8);
    let mut page = PageMut::new(&mut bytes);
    for n in 1..=6u8 {
        page.add_item(&item_bytes(usize::from(n) * 10, n), None)
            .unwrap();
    }
    assert!(page.mark_dead(2) && page.mark_unused(4));
    assert!(
        !page.mark_dead(4) && !page.mark_dead(7),
        "only live items die"
    );
    assert_eq!(page.repair_fragmentation(), Ok(()));
    let view = page.as_page();
    let offsets: Vec<u16> = [1, 3, 5, 6]
        .iter()
        .map(|&o| view.item_id(o).unwrap().offset)
        .collect();
    assert!(
        offsets.windows(2).all(|w| w[0] > w[1]),
        "physical order kept: {offsets:?}"
    );
    assert_eq!(usize::from(view.upper()), 8184 - (16 + 32 + 56 + 64));
    assert_eq!(
        view.item_id(2),
        Some(ItemId {
            offset: 0,
            state: ItemState::Dead,
            len_bytes: 0
        })
    );
    for n in [1u8, 3, 5, 6] {
        let data = item_bytes(usize::from(n) * 10, n);
        assert_eq!(view.item(OffsetNumber::from(n)), Some(&data[..]));
    }
    assert!(view.has_flag(HAS_FREE_LINES));
    let (lower, upper) = (usize::from(view.lower()), usize::from(view.upper()));
    assert!(
        bytes[lower..upper].iter().all(|&b| b == 0),
        "freed space zeroed"
    );
}

#[test]
fn corrupt_line_pointer_reads_none_and_repair_refuses() {
    let mut bytes = new_page(0);
    let mut page = PageMut::new(&mut bytes);
    page.add_item(b"good", None).unwrap();
    page.add_item(b"victim", None).unwrap();
    let bad = [
        ItemId::normal(8192, 8),  // past the page
        ItemId::normal(8184, 16), // runs past pd_special
        ItemId::normal(16, 8),    // inside the header
        ItemId::normal(8185, 4),  // misaligned
        ItemId::normal(8176, 0),  // normal without storage
    ];
    for id in bad {
        write_u32(&mut bytes, line_pointer_at(2), id.to_raw());
        let page = Page::new(&bytes);
        assert_eq!(page.item(2), None, "{id:?}");
        assert_eq!(page.item(1), Some(&b"good"[..]));
        assert!(matches!(
            page.check_item(2),
            Err(PageError::BadLinePointer {
                offset_number: 2,
                ..
            })
        ));
        let before = *bytes;
        let err = PageMut::new(&mut bytes).repair_fragmentation().unwrap_err();
        assert!(
            matches!(
                err,
                PageError::BadLinePointer {
                    offset_number: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(&bytes[..], &before[..]);
    }
}

#[test]
fn overlapping_items_make_repair_refuse() {
    for overlap_bytes in [1, 56] {
        let mut bytes = new_page(0);
        let mut page = PageMut::new(&mut bytes);
        page.add_item(&[1; 64], None).unwrap();
        page.add_item(&[2; 64], None).unwrap();
        // Item 2 claims the first bytes of item 1.
        let one = Page::new(&bytes).item_id(1).unwrap();
        let two = ItemId::normal(one.offset - 64, 64 + overlap_bytes);
        write_u32(&mut bytes, line_pointer_at(2), two.to_raw());
        let expected = Err(PageError::ItemsOverlap {
            offset_number: 2,
            other: 1,
        });
        assert_eq!(Page::new(&bytes).check_items(), expected);
        let before = *bytes;
        assert_eq!(PageMut::new(&mut bytes).repair_fragmentation(), expected);
        assert_eq!(&bytes[..], &before[..]);
    }
}

#[test]
fn a_page_full_of_the_most_live_items_repairs_and_keeps_every_one() {
    // 680 live 8-byte items (the most that fit apart), then two dead pointers without
    // storage: the page is exactly full, and the pointers after the last live item must not
    // take its place in the scan.
    const LIVE: usize = 680;
    let mut bytes = new_page(0);
    for index in 0..LIVE {
        let start = PAGE_SIZE - 8 * (index + 1);
        let id = ItemId::normal(start as u16, 8);
        write_u32(&mut bytes, HEADER_SIZE + index * LINE_POINTER_SIZE, id.to_raw());
        bytes[start..start + 8].copy_from_slice(&(index as u64).to_le_bytes());
    }
    let dead = ItemId {
        offset: 0,
        state: ItemState::Dead,
        len_bytes: 0,
    };
    for index in LIVE..LIVE + 2 {
        write_u32(&mut bytes, HEADER_SIZE + index * LINE_POINTER_SIZE, dead.to_raw());
    }
    let lower = HEADER_SIZE + (LIVE + 2) * LINE_POINTER_SIZE;
    set_header(&mut bytes, lower as u16, (PAGE_SIZE - 8 * LIVE) as u16, PAGE_SIZE as u16);
    assert_eq!(Page::new(&bytes).check_items(), Ok(()));
    assert_eq!(PageMut::new(&mut bytes).repair_fragmentation(), Ok(()));
    let page = Page::new(&bytes);
    assert_eq!(page.check_items(), Ok(()));
    for index in 0..LIVE {
        let item = page.item(index as OffsetNumber + 1).unwrap();
        assert_eq!(item, &(index as u64).to_le_bytes()[..], "item {}", index + 1);
    }
    assert_eq!(page.item_id(LIVE as OffsetNumber + 1), Some(dead));
}

#[test]
fn more_live_items_than_fit_apart_make_repair_refuse() {
    // 700 live items of 8 bytes and their pointers cannot fit in one page without two
    // overlapping: the pointer array alone leaves room for 671 words of items.
    const ITEMS: usize = 700;
    const WORDS: usize = (PAGE_SIZE - HEADER_SIZE - ITEMS * LINE_POINTER_SIZE) / 8;
    let mut bytes = new_page(0);
    for index in 0..ITEMS {
        let start = PAGE_SIZE - 8 * (1 + index % WORDS);
        let id = ItemId::normal(start as u16, 8);
        write_u32(&mut bytes, HEADER_SIZE + index * LINE_POINTER_SIZE, id.to_raw());
    }
    let lower = HEADER_SIZE + ITEMS * LINE_POINTER_SIZE;
    set_header(&mut bytes, lower as u16, (PAGE_SIZE - 8 * WORDS) as u16, PAGE_SIZE as u16);
    let before = *bytes;
    let err = PageMut::new(&mut bytes).repair_fragmentation().unwrap_err();
    assert!(matches!(err, PageError::ItemsOverlap { .. }), "{err}");
    assert_eq!(&bytes[..], &before[..]);
}

#[test]
#[should_panic(expected = "leaves no room for items")]
fn init_rejects_a_special_space_without_room() {
    let mut bytes = Box::new([0u8; PAGE_SIZE]);
    PageMut::new(&mut bytes).init(PAGE_SIZE - HEADER_SIZE - 7);
}

#[test]
fn special_space_is_aligned_writable_and_survives_item_changes() {
    let mut bytes = new_page(13);
    let mut page = PageMut::new(&mut bytes);
    let special = page.special_space_mut().unwrap();
    assert_eq!(special.len(), 16, "13 bytes rounded up to MAXALIGN");
    special.copy_from_slice(&[0xAB; 16]);
    page.add_item(&[1; 100], None).unwrap();
    page.add_item(&[2; 100], None).unwrap();
    assert!(page.mark_unused(1));
    page.repair_fragmentation().unwrap();
    assert_eq!(page.as_page().special_space(), Some(&[0xAB; 16][..]));
    set_checksum(&mut bytes, 0);
    assert_eq!(verify(&bytes, 0), Ok(()));
}

#[test]
fn flags_set_and_clear_independently() {
    let mut bytes = new_page(0);
    let mut page = PageMut::new(&mut bytes);
    page.set_flag(PAGE_FULL | ALL_VISIBLE, true);
    page.set_flag(PAGE_FULL, false);
    assert_eq!(page.as_page().flags(), ALL_VISIBLE);
    assert!(page.as_page().has_flag(ALL_VISIBLE) && !page.as_page().has_flag(PAGE_FULL));
}

#[test]
fn redirects_dead_pointers_and_truncation_of_the_pointer_array() {
    let mut page = new_page(0);
    let mut p = PageMut::new(&mut page);
    for i in 0..4u8 {
        assert_eq!(p.add_item(&[i; 40], None), Some(OffsetNumber::from(i) + 1));
    }
    assert!(p.set_redirect(1, 3));
    assert!(!p.set_redirect(1, 9), "target out of range");
    assert!(p.set_dead(2));
    assert!(p.mark_unused(4));
    p.repair_fragmentation().unwrap();
    let page_ro = p.as_page();
    let redirect = page_ro.item_id(1).unwrap();
    assert_eq!(
        (redirect.state, redirect.offset, redirect.len_bytes),
        (ItemState::Redirect, 3, 0)
    );
    assert_eq!(page_ro.item_id(2).unwrap().state, ItemState::Dead);
    assert!(
        !page_ro.item_id(2).unwrap().has_storage(),
        "repair drops dead storage"
    );
    assert_eq!(page_ro.item(3), Some(&[2u8; 40][..]));
    assert_eq!(page_ro.item(1), None, "a redirect has no item");
    // Only trailing unused pointers go.
    p.truncate_line_pointers();
    assert_eq!(p.as_page().item_count(), 3);
    assert!(p.mark_unused(3) && p.mark_unused(2) && p.mark_unused(1));
    p.truncate_line_pointers();
    assert_eq!(p.as_page().item_count(), 0);
    assert_eq!(usize::from(p.as_page().lower()), HEADER_SIZE);
    assert!(!p.as_page().has_flag(HAS_FREE_LINES));
    p.repair_fragmentation().unwrap();
    assert!(p.as_page().check_items().is_ok());
}

// ---------------------------------------------------------------------------------------------
// Index-page primitives: insert with shifting, multi-delete with compaction.

#[derive(Clone, Debug)]
enum IndexOp {
    /// Insert `len` bytes at a position selected modulo `count + 2` (0 is invalid).
    Insert { len: usize, seed: u8, at: u16 },
    /// Delete the items selected modulo `count + 2` (0 and `count + 1` name nothing).
    Delete(Vec<u16>),
}

fn index_op_strategy() -> impl Strategy<Value = IndexOp> {
    let len = prop_oneof![1usize..=24, 1usize..=1500];
    prop_oneof![
        6 => (len, any::<u8>(), any::<u16>()).prop_map(|(len, seed, at)| IndexOp::Insert { len, seed, at }),
        1 => proptest::collection::vec(any::<u16>(), 0..20).prop_map(IndexOp::Delete),
    ]
}

/// The page must hold exactly `model`'s items, in order, compactly stored.
fn check_index_page(
    bytes: &[u8; PAGE_SIZE],
    model: &[Vec<u8>],
    special: usize,
) -> Result<(), TestCaseError> {
    let page = Page::new(bytes);
    prop_assert_eq!(page.check_header(), Ok(()));
    prop_assert_eq!(page.check_items(), Ok(()));
    prop_assert_eq!(usize::from(page.item_count()), model.len());
    prop_assert_eq!(
        usize::from(page.lower()),
        HEADER_SIZE + model.len() * LINE_POINTER_SIZE
    );
    let stored: usize = model.iter().map(|d| max_align(d.len())).sum();
    prop_assert_eq!(
        special - usize::from(page.upper()),
        stored,
        "storage is compact"
    );
    for (index, data) in model.iter().enumerate() {
        prop_assert_eq!(
            page.item(index as OffsetNumber + 1),
            Some(&data[..]),
            "item {}",
            index + 1
        );
    }
    // Free space is zeroed: the page bytes depend only on the items.
    prop_assert!(bytes[usize::from(page.lower())..usize::from(page.upper())]
        .iter()
        .all(|&b| b == 0));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn insert_and_delete_items_keep_order_and_compact_storage(
        special_size in prop_oneof![Just(0usize), Just(16usize)],
        ops in proptest::collection::vec(index_op_strategy(), 1..150),
    ) {
        let mut bytes = new_page(special_size);
        let special = PAGE_SIZE - max_align(special_size);
        let mut model: Vec<Vec<u8>> = Vec::new();
        for op in ops {
            let before = *bytes;
            match op {
                IndexOp::Insert { len, seed, at } => {
                    let at = at % (model.len() as u16 + 2);
                    let data = item_bytes(len, seed);
                    let page = Page::new(&bytes);
                    let fits = usize::from(page.lower()) + LINE_POINTER_SIZE + max_align(len)
                        <= usize::from(page.upper());
                    let valid = at >= 1 && usize::from(at) <= model.len() + 1;
                    let got = PageMut::new(&mut bytes).insert_item(&data, at);
                    prop_assert_eq!(got, (fits && valid).then_some(at));
                    if got.is_some() {
                        model.insert(usize::from(at) - 1, data);
                    } else {
                        prop_assert_eq!(&bytes[..], &before[..], "a refused insert changes nothing");
                    }
                }
                IndexOp::Delete(selectors) => {
                    let offs: Vec<OffsetNumber> =
                        selectors.iter().map(|s| s % (model.len() as u16 + 2)).collect();
                    let valid = offs.iter().all(|&o| o >= 1 && usize::from(o) <= model.len());
                    let got = PageMut::new(&mut bytes).delete_items(&offs);
                    if valid {
                        prop_assert_eq!(got, Ok(()));
                        let mut index = 0;
                        model.retain(|_| {
                            index += 1;
                            !offs.contains(&index)
                        });
                        // Byte for byte the page that appending the kept items in order
                        // builds (padding included), whatever runs the compaction copied.
                        let mut rebuilt = new_page(special_size);
                        for (i, data) in model.iter().enumerate() {
                            let at = i as OffsetNumber + 1;
                            prop_assert_eq!(PageMut::new(&mut rebuilt).insert_item(data, at), Some(at));
                        }
                        prop_assert_eq!(&bytes[..], &rebuilt[..], "compaction is canonical");
                    } else {
                        prop_assert!(matches!(got, Err(PageError::NoSuchItem { .. })), "{:?}", got);
                        prop_assert_eq!(&bytes[..], &before[..], "a refused delete changes nothing");
                    }
                }
            }
            check_index_page(&bytes, &model, special)?;
        }
    }
}

#[test]
fn delete_items_refuses_a_corrupt_page_and_leaves_it_unchanged() {
    let mut bytes = new_page(16);
    let mut page = PageMut::new(&mut bytes);
    page.insert_item(&[1; 40], 1).unwrap();
    page.insert_item(&[2; 40], 2).unwrap();
    page.insert_item(&[3; 40], 3).unwrap();
    // Item 2's pointer now claims item 1's bytes: the items overlap.
    let first = Page::new(&bytes).item_id(1).unwrap();
    write_u32(
        &mut bytes,
        line_pointer_at(2),
        ItemId::normal(first.offset, 40).to_raw(),
    );
    let before = *bytes;
    let got = PageMut::new(&mut bytes).delete_items(&[3]);
    assert!(
        matches!(got, Err(PageError::ItemsOverlap { .. })),
        "{got:?}"
    );
    assert_eq!(&bytes[..], &before[..]);
}

#[test]
fn insert_item_shifts_the_following_items_up() {
    let mut bytes = new_page(16);
    let mut page = PageMut::new(&mut bytes);
    assert_eq!(page.insert_item(b"b", 1), Some(1));
    assert_eq!(page.insert_item(b"d", 2), Some(2));
    assert_eq!(page.insert_item(b"a", 1), Some(1));
    assert_eq!(page.insert_item(b"c", 3), Some(3));
    assert_eq!(page.insert_item(b"x", 6), None, "two past the end");
    assert_eq!(page.insert_item(b"x", 0), None);
    let items: Vec<&[u8]> = (1..=4).map(|o| page.as_page().item(o).unwrap()).collect();
    assert_eq!(items, [b"a", b"b", b"c", b"d"]);
    page.delete_items(&[1, 3, 3]).unwrap();
    let items: Vec<&[u8]> = (1..=2).map(|o| page.as_page().item(o).unwrap()).collect();
    assert_eq!(items, [b"b", b"d"]);
    assert_eq!(page.as_page().item_count(), 2);
}
