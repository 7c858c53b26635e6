//! The test resource manager: WAL-logged byte changes to pages. Crash tests and the torture
//! tool use it as the simplest real client of the WAL protocol: change the page under its
//! exclusive lock, log the change (with a full-page image on the first change after the redo
//! point), set the page LSN, mark the page dirty.

use std::sync::Arc;

use super::{redo_block, rmid, RedoContext, ResourceManager, Rmid};
use crate::buffer::PinnedBuffer;
use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::page::{Page, PageMut, HEADER_SIZE};
use crate::types::{Lsn, PAGE_SIZE, Xid};
use crate::wal::record::record_types;
use crate::wal::{DecodedRecord, LoggedPage, Wal};

record_types! {
    /// Record types of the test resource manager.
    pub enum TestRecord for rmid::TEST {
        SetBytes = 1,
    }
}

fn apply(page: &mut [u8; PAGE_SIZE], offset: usize, bytes: &[u8]) {
    if Page::new(page).is_new() {
        PageMut::new(page).init(0);
    }
    page[offset..offset + bytes.len()].copy_from_slice(bytes);
}

/// Writes `bytes` at `offset` (past the page header) of a pinned page, WAL-logged. Returns
/// the record's end LSN: flush to it to make the change durable.
pub fn set_bytes(wal: &Wal, buf: &PinnedBuffer<'_>, offset: usize, bytes: &[u8]) -> Result<Lsn> {
    assert!(
        offset >= HEADER_SIZE && offset + bytes.len() <= PAGE_SIZE,
        "change outside the page body"
    );
    let mut main = Vec::with_capacity(4 + bytes.len());
    main.extend_from_slice(&(offset as u16).to_le_bytes());
    main.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    main.extend_from_slice(bytes);
    let mut page = buf.write();
    apply(&mut page, offset, bytes);
    wal.log_page_change(
        Xid::INVALID,
        TestRecord::SetBytes,
        &main,
        &mut [LoggedPage::changed(&mut page)],
    )
}

/// Decodes the main data [`set_bytes`] logs: `offset u16 | len u16 | len bytes`.
fn decode(main: &[u8]) -> Option<(usize, &[u8])> {
    let mut r = Reader::new(main);
    let offset = usize::from(r.u16()?);
    let bytes = r.bytes_u16()?;
    r.done()?;
    Some((offset, bytes))
}

/// The test resource manager; [`registration`] gives it with its `rmid` for
/// [`Database::open_with_resource_managers`](crate::Database::open_with_resource_managers).
pub struct TestRm;

/// The test resource manager with its id, to register where a test or tool opens a
/// database whose WAL may hold its records.
pub fn registration() -> (Rmid, Arc<dyn ResourceManager>) {
    (rmid::TEST, Arc::new(TestRm))
}

impl ResourceManager for TestRm {
    fn name(&self) -> &'static str {
        "test"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let bad = || Error::WalCorrupt {
            lsn: rec.lsn,
            reason: "malformed test record".into(),
        };
        let TestRecord::SetBytes = rec.record_type()?;
        let (offset, bytes) = decode(&rec.main).ok_or_else(bad)?;
        if offset < HEADER_SIZE || offset + bytes.len() > PAGE_SIZE {
            return Err(bad());
        }
        redo_block(ctx, rec, 0, false, |page, _| {
            apply(page, offset, bytes);
            Ok(())
        })
    }
}
