//! WAL record format: a fixed header, block references (each with an optional full-page
//! image), and the main data, protected by a CRC32C. Byte layout (little-endian), records
//! start 8-byte aligned in the WAL stream:
//!
//! ```text
//! 0         4         8               16              24    25    26      27    28        32
//! | tot_len | crc32c  | prev (u64)    | xid (u64)     | rmid| info|nblocks| rsvd| main_len |
//! 32: nblocks x block reference (20 bytes, then the image if HAS_IMAGE):
//!     | db_oid u32 | rel_number u64 | fork u8 | flags u8 | rsvd u16 | block u32 | [image]
//!     image: 8192 bytes; or, if HAS_HOLE too, | hole_offset u16 | hole_length u16 | and
//!            the 8192 - hole_length bytes outside the hole
//! then main_len bytes of main data.
//! ```
//! The CRC covers bytes `8..tot_len` and then bytes `0..4`, so it protects everything but
//! itself, the length included.
//!
//! The hole is PostgreSQL's (`bimg.hole_offset`): the free space of a standard page, between
//! its line pointers and its items (`pd_lower..pd_upper`), left out of the image. Unlike
//! PostgreSQL, it is left out only when every byte of it is zero (the page layer zeroes what
//! it frees), so an image restored by redo is the page byte for byte.

use crate::bytes::Reader;
use crate::error::{Error, Result as EngineResult};
use crate::page::{Page, HEADER_SIZE};
use crate::types::{BufferTag, Fork, RelFileLocator, Rmid, Xid, MAX_RECORD_SIZE, PAGE_SIZE};

use super::Lsn;

pub const RECORD_HEADER_SIZE: usize = 32;
pub const BLOCK_REF_SIZE: usize = 20;
const HAS_IMAGE: u8 = 0x1;
/// The image leaves out a hole of zeros; its place precedes the image.
const HAS_HOLE: u8 = 0x2;
/// `hole_offset u16 | hole_length u16`.
const HOLE_HEADER_SIZE: usize = 4;
/// Block references per record, as PostgreSQL's `XLR_MAX_BLOCK_ID` (32) halved: quire's
/// records are small, and the bound keeps a record well inside the WAL buffers.
pub const MAX_BLOCK_REFS: usize = 16;

/// The encoded size of a relation ([`put_rel`]).
pub(crate) const REL_BYTES: usize = 12;

/// Appends a relation as block references name it: `db_oid u32 | rel_number u64`. Storage
/// and transaction records encode relations the same way, through this.
pub(crate) fn put_rel(out: &mut Vec<u8>, rel: RelFileLocator) {
    out.extend_from_slice(&rel.db_oid.to_le_bytes());
    out.extend_from_slice(&rel.rel_number.to_le_bytes());
}

/// Reads what [`put_rel`] wrote.
pub(crate) fn read_rel(r: &mut Reader<'_>) -> Option<RelFileLocator> {
    Some(RelFileLocator::new(r.u32()?, r.u64()?))
}

/// The record types of one resource manager: the `info` byte of its records as an enum, tied
/// to the manager's id, so that a record is always logged under the id of the manager whose
/// type it carries (PostgreSQL's `XLOG_HEAP_INSERT` and friends, which C cannot tie so).
/// Defined with `record_types!`.
pub trait RecordType: Copy + std::fmt::Debug {
    /// The resource manager that logs and redoes these records.
    const RMID: Rmid;
    /// The `info` byte stored in the record header.
    fn to_u8(self) -> u8;
    /// The record type an `info` byte names; `None` for a byte no record type has.
    fn from_u8(info: u8) -> Option<Self>;
}

/// Defines a resource manager's record types: a `#[repr(u8)]` enum whose discriminants are
/// the `info` bytes on disk, and its [`RecordType`] implementation for the given `rmid`.
macro_rules! record_types {
    (
        $(#[$meta:meta])*
        pub enum $name:ident for $rmid:path {
            $($(#[$vmeta:meta])* $variant:ident = $value:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name {
            $($(#[$vmeta])* $variant = $value,)+
        }

        impl $crate::wal::record::RecordType for $name {
            const RMID: $crate::types::Rmid = $rmid;

            fn to_u8(self) -> u8 {
                self as u8
            }

            fn from_u8(info: u8) -> Option<Self> {
                match info {
                    $($value => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use record_types;

/// A block a record changes, with an optional full-page image (the first change after a
/// checkpoint's redo point logs one, so redo can repair a torn page).
#[derive(Clone, Copy, Debug)]
pub struct BlockRef<'a> {
    pub tag: BufferTag,
    pub image: Option<&'a [u8; PAGE_SIZE]>,
}

/// A record to insert, built with [`WalRecord::new`].
#[derive(Clone, Copy, Debug)]
pub struct WalRecord<'a> {
    pub xid: Xid,
    /// The resource manager that redoes it. Set with `info` from one [`RecordType`], never
    /// apart (only the WAL's own format tests write arbitrary bytes here).
    pub(crate) rmid: Rmid,
    /// Resource-manager-specific bits (the record type).
    pub(crate) info: u8,
    pub blocks: &'a [BlockRef<'a>],
    pub main: &'a [u8],
}

impl<'a> WalRecord<'a> {
    /// A record of type `record_type`, logged under its resource manager's id.
    pub fn new<T: RecordType>(
        xid: Xid,
        record_type: T,
        blocks: &'a [BlockRef<'a>],
        main: &'a [u8],
    ) -> Self {
        WalRecord {
            xid,
            rmid: T::RMID,
            info: record_type.to_u8(),
            blocks,
            main,
        }
    }
}

/// A record as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRecord {
    /// Where it starts.
    pub lsn: Lsn,
    /// Where the next record may start (the LSN to flush to for this one to be durable).
    pub end_lsn: Lsn,
    pub prev: Lsn,
    pub xid: Xid,
    pub rmid: Rmid,
    pub info: u8,
    pub blocks: Vec<DecodedBlock>,
    pub main: Vec<u8>,
}

impl DecodedRecord {
    /// This record's type as resource manager `T` names it. A record of another manager, or
    /// an `info` byte that is no type of `T`'s, is corruption: the error names the LSN.
    pub fn record_type<T: RecordType>(&self) -> EngineResult<T> {
        if self.rmid != T::RMID {
            return Err(Error::WalCorrupt {
                lsn: self.lsn,
                reason: format!(
                    "record of resource manager {} read as one of resource manager {}",
                    self.rmid,
                    T::RMID
                ),
            });
        }
        T::from_u8(self.info).ok_or_else(|| Error::WalCorrupt {
            lsn: self.lsn,
            reason: format!(
                "unknown record type {} of resource manager {}",
                self.info, self.rmid
            ),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedBlock {
    pub tag: BufferTag,
    pub image: Option<Box<[u8; PAGE_SIZE]>>,
}

/// Why bytes are not a valid record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record length {0} is out of range")]
    BadLength(usize),
    #[error("record checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("record is malformed: {0}")]
    Malformed(&'static str),
}

/// The hole an image of `page` leaves out, as (offset, length): its free space
/// (`pd_lower..pd_upper`) if the header is sane and every byte of it is zero; else none,
/// (0, 0). A hole too short to pay for its own header is none too.
pub fn image_hole(page: &[u8; PAGE_SIZE]) -> (usize, usize) {
    let p = Page::new(page);
    let (lower, upper) = (usize::from(p.lower()), usize::from(p.upper()));
    if lower < HEADER_SIZE || upper > PAGE_SIZE || upper <= lower + HOLE_HEADER_SIZE {
        return (0, 0);
    }
    // A fold, not an early-exit search: it vectorises, and holes are mostly zeros.
    if page[lower..upper].iter().fold(0u8, |acc, &b| acc | b) != 0 {
        return (0, 0);
    }
    (lower, upper - lower)
}

/// The bytes an image of `page` takes in a record.
fn image_size(page: &[u8; PAGE_SIZE]) -> usize {
    match image_hole(page) {
        (_, 0) => PAGE_SIZE,
        (_, hole_len) => HOLE_HEADER_SIZE + PAGE_SIZE - hole_len,
    }
}

/// The encoded size of a record.
pub fn encoded_size(rec: &WalRecord<'_>) -> usize {
    RECORD_HEADER_SIZE
        + rec
            .blocks
            .iter()
            .map(|b| BLOCK_REF_SIZE + b.image.map_or(0, image_size))
            .sum::<usize>()
        + rec.main.len()
}

/// Encodes a record with `prev` zero; [`seal`] sets `prev` and the CRC once the record's
/// place in the WAL is known.
pub fn encode(rec: &WalRecord<'_>, out: &mut Vec<u8>) {
    out.clear();
    let total = encoded_size(rec);
    out.reserve(total);
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&[0u8; 4]); // crc
    out.extend_from_slice(&0u64.to_le_bytes()); // prev
    out.extend_from_slice(&rec.xid.0.to_le_bytes());
    out.push(rec.rmid.0);
    out.push(rec.info);
    out.push(rec.blocks.len() as u8);
    out.push(0);
    out.extend_from_slice(&(rec.main.len() as u32).to_le_bytes());
    for b in rec.blocks {
        put_rel(out, b.tag.rel);
        out.push(b.tag.fork as u8);
        let hole = b.image.map_or((0, 0), image_hole);
        out.push(match (b.image, hole) {
            (None, _) => 0,
            (Some(_), (_, 0)) => HAS_IMAGE,
            (Some(_), _) => HAS_IMAGE | HAS_HOLE,
        });
        out.extend_from_slice(&[0u8; 2]);
        out.extend_from_slice(&b.tag.block.to_le_bytes());
        if let Some(img) = b.image {
            let (hole_at, hole_len) = hole;
            if hole_len == 0 {
                out.extend_from_slice(&img[..]);
            } else {
                let as_u16 = |n: usize| u16::try_from(n).expect("a page offset fits in u16");
                out.extend_from_slice(&as_u16(hole_at).to_le_bytes());
                out.extend_from_slice(&as_u16(hole_len).to_le_bytes());
                out.extend_from_slice(&img[..hole_at]);
                out.extend_from_slice(&img[hole_at + hole_len..]);
            }
        }
    }
    out.extend_from_slice(rec.main);
    debug_assert_eq!(out.len(), total);
}

/// Decodes an image from `r` (with its hole header if `has_hole`): the page, its hole
/// zero-filled.
fn decode_image(r: &mut Reader<'_>, has_hole: bool) -> Result<Box<[u8; PAGE_SIZE]>, RecordError> {
    let (hole_at, hole_len) = if has_hole {
        let short = || RecordError::Malformed("image hole past the end");
        let at = usize::from(r.u16().ok_or_else(short)?);
        let len = usize::from(r.u16().ok_or_else(short)?);
        if at < HEADER_SIZE || len == 0 || at + len > PAGE_SIZE {
            return Err(RecordError::Malformed("image hole outside the page"));
        }
        (at, len)
    } else {
        (PAGE_SIZE, 0)
    };
    let stored = r
        .take(PAGE_SIZE - hole_len)
        .ok_or(RecordError::Malformed("page image past the end"))?;
    let mut page = Box::new([0u8; PAGE_SIZE]);
    page[..hole_at].copy_from_slice(&stored[..hole_at]);
    page[hole_at + hole_len..].copy_from_slice(&stored[hole_at..]);
    Ok(page)
}

fn crc_of(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&bytes[8..]);
    crc32c::crc32c_append(crc, &bytes[..4])
}

/// Sets `prev` and the CRC of an encoded record.
pub fn seal(bytes: &mut [u8], prev: Lsn) {
    bytes[8..16].copy_from_slice(&prev.0.to_le_bytes());
    let crc = crc_of(bytes);
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The total length a record header announces, if it is plausible.
pub fn total_length(header: &[u8]) -> Result<usize, RecordError> {
    let len = crate::bytes::u32_at(header, 0).ok_or(RecordError::BadLength(header.len()))? as usize;
    if (RECORD_HEADER_SIZE..=MAX_RECORD_SIZE).contains(&len) {
        Ok(len)
    } else {
        Err(RecordError::BadLength(len))
    }
}

/// Decodes a whole record (exactly `tot_len` bytes) found at `lsn`, ending at `end_lsn`.
pub fn decode(bytes: &[u8], lsn: Lsn, end_lsn: Lsn) -> Result<DecodedRecord, RecordError> {
    if bytes.len() < RECORD_HEADER_SIZE || total_length(bytes)? != bytes.len() {
        return Err(RecordError::BadLength(bytes.len()));
    }
    let mut r = Reader::new(bytes);
    // The header is there (the length is checked): these never fail.
    let short = || RecordError::Malformed("header past the end");
    let _tot_len = r.u32().ok_or_else(short)?;
    let stored = r.u32().ok_or_else(short)?;
    let prev = Lsn(r.u64().ok_or_else(short)?);
    let xid = Xid(r.u64().ok_or_else(short)?);
    let rmid = Rmid(r.u8().ok_or_else(short)?);
    let info = r.u8().ok_or_else(short)?;
    let nblocks = usize::from(r.u8().ok_or_else(short)?);
    let _reserved = r.u8().ok_or_else(short)?;
    let main_len = r.u32().ok_or_else(short)? as usize;
    let computed = crc_of(bytes);
    if stored != computed {
        return Err(RecordError::BadCrc { stored, computed });
    }
    if nblocks > MAX_BLOCK_REFS {
        return Err(RecordError::Malformed("too many block references"));
    }
    let mut blocks = Vec::with_capacity(nblocks);
    for _ in 0..nblocks {
        let short = || RecordError::Malformed("block reference past the end");
        let rel = read_rel(&mut r).ok_or_else(short)?;
        let fork =
            Fork::from_number(r.u8().ok_or_else(short)?).ok_or(RecordError::Malformed("unknown fork"))?;
        let flags = r.u8().ok_or_else(short)?;
        let _reserved = r.u16().ok_or_else(short)?;
        let block = r.u32().ok_or_else(short)?;
        let image = if flags & HAS_IMAGE != 0 {
            Some(decode_image(&mut r, flags & HAS_HOLE != 0)?)
        } else {
            None
        };
        blocks.push(DecodedBlock {
            tag: BufferTag::new(rel, fork, block),
            image,
        });
    }
    let main = r.rest();
    if main.len() != main_len {
        return Err(RecordError::Malformed(
            "main data length disagrees with the record length",
        ));
    }
    Ok(DecodedRecord {
        lsn,
        end_lsn,
        prev,
        xid,
        rmid,
        info,
        blocks,
        main: main.to_vec(),
    })
}
