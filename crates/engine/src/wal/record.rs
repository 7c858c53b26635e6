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

use crate::buffer::BufferTag;
use crate::page::{Page, HEADER_SIZE, PAGE_SIZE};
use crate::smgr::{Fork, RelFileLocator};

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
pub use crate::types::MAX_RECORD_SIZE;

/// A block a record changes, with an optional full-page image (the first change after a
/// checkpoint's redo point logs one, so redo can repair a torn page).
#[derive(Clone, Copy, Debug)]
pub struct BlockRef<'a> {
    pub tag: BufferTag,
    pub image: Option<&'a [u8; PAGE_SIZE]>,
}

/// A record to insert.
#[derive(Clone, Copy, Debug)]
pub struct WalRecord<'a> {
    pub xid: u64,
    /// The resource manager that redoes it.
    pub rmid: u8,
    /// Resource-manager-specific bits (the record type).
    pub info: u8,
    pub blocks: &'a [BlockRef<'a>],
    pub main: &'a [u8],
}

/// A record as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRecord {
    /// Where it starts.
    pub lsn: Lsn,
    /// Where the next record may start (the LSN to flush to for this one to be durable).
    pub end_lsn: Lsn,
    pub prev: Lsn,
    pub xid: u64,
    pub rmid: u8,
    pub info: u8,
    pub blocks: Vec<DecodedBlock>,
    pub main: Vec<u8>,
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
    out.extend_from_slice(&rec.xid.to_le_bytes());
    out.push(rec.rmid);
    out.push(rec.info);
    out.push(rec.blocks.len() as u8);
    out.push(0);
    out.extend_from_slice(&(rec.main.len() as u32).to_le_bytes());
    for b in rec.blocks {
        out.extend_from_slice(&b.tag.rel.db_oid.to_le_bytes());
        out.extend_from_slice(&b.tag.rel.rel_number.to_le_bytes());
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

/// Decodes an image at the start of `bytes` (with its hole header if `has_hole`): the page,
/// its hole zero-filled, and the bytes it took.
fn decode_image(
    bytes: &[u8],
    has_hole: bool,
) -> Result<(Box<[u8; PAGE_SIZE]>, usize), RecordError> {
    let (hole_at, hole_len, header) = if has_hole {
        let h = bytes
            .get(..HOLE_HEADER_SIZE)
            .ok_or(RecordError::Malformed("image hole past the end"))?;
        let at = usize::from(u16::from_le_bytes([h[0], h[1]]));
        let len = usize::from(u16::from_le_bytes([h[2], h[3]]));
        if at < HEADER_SIZE || len == 0 || at + len > PAGE_SIZE {
            return Err(RecordError::Malformed("image hole outside the page"));
        }
        (at, len, HOLE_HEADER_SIZE)
    } else {
        (PAGE_SIZE, 0, 0)
    };
    let stored = bytes
        .get(header..header + PAGE_SIZE - hole_len)
        .ok_or(RecordError::Malformed("page image past the end"))?;
    let mut page = Box::new([0u8; PAGE_SIZE]);
    page[..hole_at].copy_from_slice(&stored[..hole_at]);
    page[hole_at + hole_len..].copy_from_slice(&stored[hole_at..]);
    Ok((page, header + stored.len()))
}

fn crc_of(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&bytes[8..]);
    crc32c::crc32c_append(crc, &bytes[..4])
}

/// Sets `prev` and the CRC of an encoded record.
pub fn seal(bytes: &mut [u8], prev: Lsn) {
    bytes[8..16].copy_from_slice(&prev.to_le_bytes());
    let crc = crc_of(bytes);
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The total length a record header announces, if it is plausible.
pub fn total_length(header: &[u8]) -> Result<usize, RecordError> {
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    if (RECORD_HEADER_SIZE..=MAX_RECORD_SIZE).contains(&len) {
        Ok(len)
    } else {
        Err(RecordError::BadLength(len))
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes a whole record (exactly `tot_len` bytes) found at `lsn`, ending at `end_lsn`.
pub fn decode(bytes: &[u8], lsn: Lsn, end_lsn: Lsn) -> Result<DecodedRecord, RecordError> {
    if bytes.len() < RECORD_HEADER_SIZE || total_length(bytes)? != bytes.len() {
        return Err(RecordError::BadLength(bytes.len()));
    }
    let stored = u32_at(bytes, 4);
    let computed = crc_of(bytes);
    if stored != computed {
        return Err(RecordError::BadCrc { stored, computed });
    }
    let nblocks = usize::from(bytes[26]);
    if nblocks > MAX_BLOCK_REFS {
        return Err(RecordError::Malformed("too many block references"));
    }
    let main_len = u32_at(bytes, 28) as usize;
    let mut at = RECORD_HEADER_SIZE;
    let mut blocks = Vec::with_capacity(nblocks);
    for _ in 0..nblocks {
        let r = bytes
            .get(at..at + BLOCK_REF_SIZE)
            .ok_or(RecordError::Malformed("block reference past the end"))?;
        at += BLOCK_REF_SIZE;
        let fork = match r[12] {
            0 => Fork::Main,
            1 => Fork::Fsm,
            2 => Fork::Vm,
            _ => return Err(RecordError::Malformed("unknown fork")),
        };
        let tag = BufferTag::new(
            RelFileLocator::new(u32_at(r, 0), u64_at(r, 4)),
            fork,
            u32_at(r, 16),
        );
        let image = if r[13] & HAS_IMAGE != 0 {
            let (image, used) = decode_image(&bytes[at..], r[13] & HAS_HOLE != 0)?;
            at += used;
            Some(image)
        } else {
            None
        };
        blocks.push(DecodedBlock { tag, image });
    }
    if at + main_len != bytes.len() {
        return Err(RecordError::Malformed(
            "main data length disagrees with the record length",
        ));
    }
    Ok(DecodedRecord {
        lsn,
        end_lsn,
        prev: u64_at(bytes, 8),
        xid: u64_at(bytes, 16),
        rmid: bytes[24],
        info: bytes[25],
        blocks,
        main: bytes[at..].to_vec(),
    })
}
