//! The page checksum: CRC32C over the block number and the page with its checksum field
//! read as zero, and the verification of pages read from disk.

use crc32c::crc32c_append;

use super::{write_u32, Page, PageError, CHECKSUM_AT, PAGE_SIZE};

/// The end of the checksum field.
const CHECKSUM_END: usize = CHECKSUM_AT + 4;

/// The checksum of `page` stored as block `block`. Computed over the pieces around the
/// checksum field, so the page is neither copied nor modified.
pub fn checksum(page: &[u8; PAGE_SIZE], block: u32) -> u32 {
    let crc = crc32c_append(0, &block.to_le_bytes());
    let crc = crc32c_append(crc, &page[..CHECKSUM_AT]);
    let crc = crc32c_append(crc, &[0; CHECKSUM_END - CHECKSUM_AT]);
    crc32c_append(crc, &page[CHECKSUM_END..])
}

/// Sets the checksum field of a page about to be written as block `block`.
///
/// Call it on the private copy being written, never on a shared buffer (see the module
/// rules). An all-zero page is left all-zero: a new page carries no checksum, and giving it one
/// would make it a non-zero page with an invalid header, which [`verify`] rejects.
pub fn set_checksum(page: &mut [u8; PAGE_SIZE], block: u32) {
    if is_zero_page(page) {
        return;
    }
    let crc = checksum(page, block);
    write_u32(page, CHECKSUM_AT, crc);
}

/// Verifies a page read from disk as block `block`: an all-zero page is valid (a new page, as
/// in PostgreSQL's PageIsVerified: extension writes zeros before the page is initialised);
/// otherwise the header must be sane (lower/upper/special bounds) and the checksum must match.
///
/// The checksum is checked first: on a damaged page it is the primary fact (a header check
/// first would report whichever field the damage happened to hit), and a header check that
/// passes only means something on a page whose bytes are the ones that were written.
pub fn verify(page: &[u8; PAGE_SIZE], block: u32) -> Result<(), PageError> {
    if is_zero_page(page) {
        return Ok(());
    }
    let stored = Page::new(page).stored_checksum();
    let calculated = checksum(page, block);
    if stored != calculated {
        return Err(PageError::ChecksumMismatch { stored, calculated });
    }
    Page::new(page).check_header()
}

/// Whether the page is all zeros. Only a page whose `pd_upper` is zero can be, so the other
/// 8 KiB are scanned only for those.
fn is_zero_page(page: &[u8; PAGE_SIZE]) -> bool {
    Page::new(page).is_new() && page.iter().all(|&b| b == 0)
}
