//! PLACEHOLDER: replaced by the page-layout work.
pub const PAGE_SIZE: usize = 8192;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("page verification failed, calculated checksum {calculated:#010x} but expected {stored:#010x}")]
    ChecksumMismatch { stored: u32, calculated: u32 },
}

pub fn set_checksum(_page: &mut [u8; PAGE_SIZE], _block: u32) {}

pub fn verify(_page: &[u8; PAGE_SIZE], _block: u32) -> Result<(), PageError> {
    Ok(())
}
