//! B-tree page layout: the special space, index tuples, the metapage, and a checked view of a
//! page (every accessor returns [`Error::CorruptIndex`] on garbage instead of panicking).
//! Byte diagrams are in `docs/design.md` ("B+tree pages and records").

use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::page::{OffsetNumber, Page, PageMut, Tid, FIRST_OFFSET_NUMBER, MAXALIGN};

use crate::value::Type;
use crate::types::{BlockNumber, PAGE_SIZE, RelFileLocator};

/// Bytes of special space at the end of every B-tree page.
pub const SPECIAL_SIZE: usize = 16;
/// Where the special space starts.
const SPECIAL_AT: usize = PAGE_SIZE - SPECIAL_SIZE;
/// Marks a page as a B-tree page (PostgreSQL's `BTREE_MAGIC`), in the special space.
pub const PAGE_MAGIC: u32 = 0x0005_3162;
/// "No block": the right-link of the rightmost page of a level, the downlink of a leaf tuple.
pub const NO_BLOCK: BlockNumber = u32::MAX;

/// Page flag: a leaf (level 0).
pub const LEAF: u16 = 0x1;
/// Page flag: the root (the only page of the top level).
pub const ROOT: u16 = 0x2;
/// Page flag: the metapage (block 0).
pub const META: u16 = 0x4;
const VALID_FLAGS: u16 = LEAF | ROOT | META;

/// Bytes of the fixed index-tuple header: heap TID (6), natts (1), flags (1), downlink (4).
pub const TUPLE_HEADER_SIZE: usize = 12;
/// The bytes items may use on a page: all but the page header and the special space.
pub const ITEM_SPACE_BYTES: usize = PAGE_SIZE - crate::page::HEADER_SIZE - SPECIAL_SIZE;
/// The largest index tuple (PostgreSQL's `BTMaxItemSize`): a third of a page, so any page
/// holds a high key and two items, which a split needs.
pub const MAX_TUPLE_BYTES: usize =
    (PAGE_SIZE - align(crate::page::HEADER_SIZE + 3 * 4) - SPECIAL_SIZE) / 3 / MAXALIGN * MAXALIGN;

/// The metapage is block 0.
pub const META_BLOCK: BlockNumber = 0;
/// The metapage's magic number and layout version.
const META_MAGIC: u32 = 0x5154_4251; // "QBTQ"
const META_VERSION: u32 = 1;

/// Rounds up to [`MAXALIGN`].
pub const fn align(len: usize) -> usize {
    (len + MAXALIGN - 1) & !(MAXALIGN - 1)
}

/// What one item costs on a page: its aligned bytes and its line pointer.
pub const fn item_cost(len: usize) -> usize {
    align(len) + crate::page::LINE_POINTER_SIZE
}

/// The special space of a B-tree page (PostgreSQL's `BTPageOpaqueData`, without the left
/// link: quire scans only forwards and never deletes pages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Special {
    /// The next page of the same level, or [`NO_BLOCK`] on the rightmost page.
    pub right_link: BlockNumber,
    /// 0 for leaves.
    pub level: u16,
    pub flags: u16,
}

impl Special {
    pub fn is_leaf(self) -> bool {
        self.flags & LEAF != 0
    }

    pub fn is_root(self) -> bool {
        self.flags & ROOT != 0
    }

    pub fn is_rightmost(self) -> bool {
        self.right_link == NO_BLOCK
    }

    /// Flags for an ordinary (not root) page of `level`.
    pub fn flags_for(level: u16) -> u16 {
        if level == 0 {
            LEAF
        } else {
            0
        }
    }

    fn write(self, page: &mut [u8; PAGE_SIZE]) {
        let s = &mut page[SPECIAL_AT..];
        s[0..4].copy_from_slice(&self.right_link.to_le_bytes());
        s[4..6].copy_from_slice(&self.level.to_le_bytes());
        s[6..8].copy_from_slice(&self.flags.to_le_bytes());
        s[8..12].copy_from_slice(&PAGE_MAGIC.to_le_bytes());
        s[12..16].fill(0);
    }

    /// Reads what [`write`](Self::write) wrote: the fields, the magic number, the reserved
    /// word.
    fn read(page: &[u8; PAGE_SIZE]) -> Option<(Special, u32, u32)> {
        let mut r = Reader::new(&page[SPECIAL_AT..]);
        let special = Special {
            right_link: r.u32()?,
            level: r.u16()?,
            flags: r.u16()?,
        };
        Some((special, r.u32()?, r.u32()?))
    }
}

// ------------------------------------------------------------------------------ tuples

/// An index tuple, parsed: the fixed header and the encoded key values.
///
/// The same format serves leaf entries (key, heap TID), high keys (a pivot: key and TID of
/// the first entry of the right sibling when the page was split, no downlink) and internal
/// entries (a pivot and a downlink; the first entry of an internal page has no key at all
/// and stands for minus infinity).
#[derive(Clone, Copy, Debug)]
pub struct Tuple<'a> {
    pub tid: Tid,
    /// Key values stored: the index's column count, or 0 for minus infinity.
    pub natts: u8,
    pub downlink: BlockNumber,
    /// The encoded key values (see [`crate::value`]).
    pub key: &'a [u8],
}

impl<'a> Tuple<'a> {
    /// Parses the header; `None` if the bytes are too short or a reserved bit is set.
    pub fn parse(bytes: &'a [u8]) -> Option<Self> {
        let mut r = Reader::new(bytes);
        let tid = Tid::new(r.u32()?, r.u16()?);
        let natts = r.u8()?;
        let flags = r.u8()?;
        let downlink = r.u32()?;
        (flags == 0).then_some(Tuple {
            tid,
            natts,
            downlink,
            key: r.rest(),
        })
    }

    pub fn is_minus_infinity(&self) -> bool {
        self.natts == 0
    }
}

/// Encodes a tuple.
pub fn encode_tuple(tid: Tid, natts: u8, downlink: BlockNumber, key: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(TUPLE_HEADER_SIZE + key.len());
    t.extend_from_slice(&tid.block.to_le_bytes());
    t.extend_from_slice(&tid.offset.to_le_bytes());
    t.push(natts);
    t.push(0);
    t.extend_from_slice(&downlink.to_le_bytes());
    t.extend_from_slice(key);
    t
}

/// The same tuple with another downlink (a pivot from an entry, a downlink from a pivot).
pub fn with_downlink(tuple: &[u8], downlink: BlockNumber) -> Vec<u8> {
    let mut t = tuple.to_vec();
    if t.len() >= TUPLE_HEADER_SIZE {
        t[8..12].copy_from_slice(&downlink.to_le_bytes());
    }
    t
}

/// The minus-infinity form of an internal entry: its downlink without a key.
pub fn minus_infinity(downlink: BlockNumber) -> Vec<u8> {
    encode_tuple(Tid::new(0, 0), 0, downlink, &[])
}

// ------------------------------------------------------------------------------ pages

/// Builds a complete B-tree page: header, special space, the high key (if any) as item 1,
/// then `items` in order. Fails if they do not fit (the caller sized them; a failure means
/// the sizes came from a corrupt page or record).
pub fn build_page(
    special: Special,
    high_key: Option<&[u8]>,
    items: &[&[u8]],
) -> std::result::Result<Box<[u8; PAGE_SIZE]>, &'static str> {
    let mut page = Box::new([0u8; PAGE_SIZE]);
    let mut m = PageMut::new(&mut page);
    m.init(SPECIAL_SIZE);
    for item in high_key.into_iter().chain(items.iter().copied()) {
        m.add_item(item, None)
            .ok_or("the items do not fit on one page")?;
    }
    special.write(&mut page);
    Ok(page)
}

/// Bytes that `high_key` and `items` take on a page.
pub fn bytes_needed(high_key: Option<&[u8]>, items: &[&[u8]]) -> usize {
    high_key.map_or(0, |h| item_cost(h.len()))
        + items.iter().map(|i| item_cost(i.len())).sum::<usize>()
}

/// A checked, read-only view of a B-tree page.
#[derive(Clone, Copy)]
pub struct BtPage<'a> {
    pub page: Page<'a>,
    pub special: Special,
    pub rel: RelFileLocator,
    pub block: BlockNumber,
}

/// An [`Error::CorruptIndex`].
pub fn corrupt(rel: RelFileLocator, block: BlockNumber, reason: impl Into<String>) -> Error {
    Error::CorruptIndex {
        rel,
        block,
        reason: reason.into(),
    }
}

impl<'a> BtPage<'a> {
    /// Checks that the bytes are an initialised B-tree page (header bounds, special size,
    /// magic, flags) and returns a view.
    pub fn new(
        bytes: &'a [u8; PAGE_SIZE],
        rel: RelFileLocator,
        block: BlockNumber,
    ) -> Result<Self> {
        let page = Page::new(bytes);
        if page.is_new() {
            return Err(corrupt(
                rel,
                block,
                "the page is new (all zero) where a B-tree page was expected",
            ));
        }
        page.check_header()
            .map_err(|e| corrupt(rel, block, format!("bad page header: {e}")))?;
        if usize::from(page.special()) != SPECIAL_AT {
            return Err(corrupt(
                rel,
                block,
                format!("special space at {}, expected {SPECIAL_AT}", page.special()),
            ));
        }
        let Some((special, PAGE_MAGIC, 0)) = Special::read(bytes) else {
            return Err(corrupt(
                rel,
                block,
                "not a B-tree page (bad magic in the special space)",
            ));
        };
        if special.flags & !VALID_FLAGS != 0
            || special.is_leaf() != (special.level == 0 && special.flags & META == 0)
        {
            return Err(corrupt(
                rel,
                block,
                format!(
                    "bad page flags {:#06x} at level {}",
                    special.flags, special.level
                ),
            ));
        }
        Ok(BtPage {
            page,
            special,
            rel,
            block,
        })
    }

    pub fn corrupt(&self, reason: impl Into<String>) -> Error {
        corrupt(self.rel, self.block, reason)
    }

    /// The number of line pointers.
    pub fn item_count(&self) -> OffsetNumber {
        self.page.item_count()
    }

    /// The first data item (item 1 is the high key on all but the rightmost page).
    pub fn first_data(&self) -> OffsetNumber {
        if self.special.is_rightmost() {
            FIRST_OFFSET_NUMBER
        } else {
            FIRST_OFFSET_NUMBER + 1
        }
    }

    /// The number of data items.
    pub fn data_count(&self) -> usize {
        usize::from(self.item_count() + 1 - self.first_data())
    }

    /// Raw item `off`.
    pub fn item_bytes(&self, off: OffsetNumber) -> Result<&'a [u8]> {
        self.page.item(off).ok_or_else(|| {
            self.corrupt(format!(
                "item {off} is missing or its line pointer is corrupt"
            ))
        })
    }

    /// Item `off`, parsed.
    pub fn tuple(&self, off: OffsetNumber) -> Result<Tuple<'a>> {
        let bytes = self.item_bytes(off)?;
        Tuple::parse(bytes).ok_or_else(|| self.corrupt(format!("item {off} is not an index tuple")))
    }

    /// The high key, `None` on the rightmost page of a level.
    pub fn high_key(&self) -> Result<Option<Tuple<'a>>> {
        if self.special.is_rightmost() {
            return Ok(None);
        }
        if self.item_count() < FIRST_OFFSET_NUMBER {
            return Err(self.corrupt("a page with a right sibling has no high key"));
        }
        self.tuple(FIRST_OFFSET_NUMBER).map(Some)
    }

    /// Every data item's bytes, in order.
    pub fn data_items(&self) -> Result<Vec<&'a [u8]>> {
        (self.first_data()..=self.item_count())
            .map(|off| self.item_bytes(off))
            .collect()
    }
}

// ------------------------------------------------------------------------------ metapage

/// The metapage's contents (item 1 of block 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub root: BlockNumber,
    /// The root's level (0: the root is a leaf).
    pub level: u16,
    pub key_types: Vec<Type>,
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(18 + self.key_types.len());
        m.extend_from_slice(&META_MAGIC.to_le_bytes());
        m.extend_from_slice(&META_VERSION.to_le_bytes());
        m.extend_from_slice(&self.root.to_le_bytes());
        m.extend_from_slice(&u32::from(self.level).to_le_bytes());
        m.extend_from_slice(&(self.key_types.len() as u16).to_le_bytes());
        m.extend(self.key_types.iter().map(|t| t.to_u8()));
        m
    }

    pub fn decode(b: &[u8]) -> Option<Meta> {
        let mut r = Reader::new(b);
        if r.u32()? != META_MAGIC || r.u32()? != META_VERSION {
            return None;
        }
        let root = r.u32()?;
        let level = u16::try_from(r.u32()?).ok()?;
        let n = usize::from(r.u16()?);
        let types = r.take(n)?;
        Some(Meta {
            root,
            level,
            key_types: types
                .iter()
                .map(|&t| Type::from_u8(t))
                .collect::<Option<_>>()?,
        })
    }

    /// The whole metapage.
    pub fn page(&self) -> Box<[u8; PAGE_SIZE]> {
        let special = Special {
            right_link: NO_BLOCK,
            level: 0,
            flags: META,
        };
        build_page(special, None, &[&self.encode()]).expect("a metapage fits: it is tiny")
    }

    /// Reads the metapage.
    pub fn read(bytes: &[u8; PAGE_SIZE], rel: RelFileLocator) -> Result<Meta> {
        let p = BtPage::new(bytes, rel, META_BLOCK)?;
        if p.special.flags != META {
            return Err(p.corrupt("block 0 is not a metapage"));
        }
        Meta::decode(p.item_bytes(FIRST_OFFSET_NUMBER)?)
            .ok_or_else(|| p.corrupt("the metapage contents are invalid"))
    }
}
