//! The test resource manager: WAL-logged byte changes to pages. Crash tests and the torture
//! tool use it as the simplest real client of the WAL protocol: change the page under its
//! exclusive lock, log the change (with a full-page image on the first change after the redo
//! point), set the page LSN, mark the page dirty.

use std::sync::Arc;

use super::{redo_buffer, rmid, RedoBuffer, RedoContext, ResourceManager};
use crate::buffer::PinnedBuffer;
use crate::error::{Error, Result};
use crate::page::{Page, PageMut, HEADER_SIZE, PAGE_SIZE};
use crate::wal::{DecodedRecord, LoggedPage, Lsn, Wal};

pub const SET_BYTES: u8 = 1;

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
        0,
        rmid::TEST,
        SET_BYTES,
        &main,
        &mut [LoggedPage::changed(&mut page)],
    )
}

/// The test resource manager; [`registration`] gives it with its `rmid` for
/// [`Database::open_with_resource_managers`](crate::Database::open_with_resource_managers).
pub struct TestRm;

/// The test resource manager with its id, to register where a test or tool opens a
/// database whose WAL may hold its records.
pub fn registration() -> (u8, Arc<dyn ResourceManager>) {
    (rmid::TEST, Arc::new(TestRm))
}

impl ResourceManager for TestRm {
    fn name(&self) -> &'static str {
        "test"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let m = &rec.main;
        let bad = || Error::WalCorrupt {
            lsn: rec.lsn,
            reason: "malformed test record".into(),
        };
        if rec.info != SET_BYTES || m.len() < 4 {
            return Err(bad());
        }
        let offset = usize::from(u16::from_le_bytes([m[0], m[1]]));
        let len = usize::from(u16::from_le_bytes([m[2], m[3]]));
        if m.len() != 4 + len || offset < HEADER_SIZE || offset + len > PAGE_SIZE {
            return Err(bad());
        }
        if let RedoBuffer::Apply(buf) = redo_buffer(ctx, rec, 0)? {
            let mut page = buf.write();
            apply(&mut page, offset, &m[4..]);
            PageMut::new(&mut page).set_lsn(rec.end_lsn);
            page.mark_dirty();
        }
        Ok(())
    }
}
