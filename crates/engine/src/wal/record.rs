//! WAL record format: a fixed header, block references (each with an optional full-page
//! image), and the main data, protected by a CRC32C. Byte layout (little-endian), records
//! start 8-byte aligned in the WAL stream:
//!
//! ```text
//! 0         4         8               16              24    25    26      27    28        32
//! | tot_len | crc32c  | prev (u64)    | xid (u64)     | rmid| info|nblocks| rsvd| main_len |
//! 32: nblocks x block reference (20 bytes, + 8192 bytes of image if HAS_IMAGE):
//!     | db_oid u32 | rel_number u64 | fork u8 | flags u8 | rsvd u16 | block u32 | [image]
//! then main_len bytes of main data.
//! ```
//! The CRC covers bytes `8..tot_len` and then bytes `0..4`, so it protects everything but
//! itself, the length included.

use crate::buffer::BufferTag;
use crate::page::PAGE_SIZE;
use crate::smgr::{Fork, RelFileLocator};

use super::Lsn;

pub const RECORD_HEADER_SIZE: usize = 32;
pub const BLOCK_REF_SIZE: usize = 20;
const HAS_IMAGE: u8 = 0x1;
/// Block references per record, as PostgreSQL's `XLR_MAX_BLOCK_ID` (32) halved: quire's
/// records are small, and the bound keeps a record well inside the WAL buffers.
pub const MAX_BLOCK_REFS: usize = 16;
/// The largest record: every block with an image, plus main data.
pub const MAX_RECORD_SIZE: usize = 256 * 1024;

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

/// The encoded size of a record.
pub fn encoded_size(rec: &WalRecord<'_>) -> usize {
    RECORD_HEADER_SIZE
        + rec
            .blocks
            .iter()
            .map(|b| BLOCK_REF_SIZE + if b.image.is_some() { PAGE_SIZE } else { 0 })
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
        out.push(if b.image.is_some() { HAS_IMAGE } else { 0 });
        out.extend_from_slice(&[0u8; 2]);
        out.extend_from_slice(&b.tag.block.to_le_bytes());
        if let Some(img) = b.image {
            out.extend_from_slice(&img[..]);
        }
    }
    out.extend_from_slice(rec.main);
    debug_assert_eq!(out.len(), total);
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
            let img = bytes
                .get(at..at + PAGE_SIZE)
                .ok_or(RecordError::Malformed("page image past the end"))?;
            at += PAGE_SIZE;
            Some(Box::new(
                <[u8; PAGE_SIZE]>::try_from(img).expect("PAGE_SIZE bytes"),
            ))
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
