//! A spool: rows written once and read back in order, in memory up to a budget
//! (`work_mem`) and in a temp file beyond it (PostgreSQL's tuplestore, for what is read
//! later than it is made: a portal that an Execute with a row limit runs in parts).
//!
//! ## Rules
//! - Memory is bounded by the budget whatever the number of rows: the rows past it go to
//!   one temp file of the engine's ([`quire_engine::Database::temp_file`]), which is
//!   removed when the spool is dropped.
//! - Writing ends before reading begins ([`Spool::push`] after the first
//!   [`Spool::pop`] is a bug, asserted).
//! - A row in the file is its length (4 bytes, little-endian) and the engine's row
//!   encoding; the spool is the one writer and the one reader of that form.

use std::collections::VecDeque;

use quire_engine::temp::TempFile;
use quire_engine::{Database, Row, SqlState, Value};

use crate::error::{Result, SqlError};

/// What a row is taken to cost in memory beyond its encoded bytes (its vector and values).
const ROW_OVERHEAD_BYTES: usize = 64;

/// Rows in order, in memory up to a budget and then in a temp file.
pub struct Spool {
    memory: VecDeque<Row>,
    memory_bytes: usize,
    budget_bytes: usize,
    columns: usize,
    file: Option<TempFile>,
    /// Rows in the file, and where the next one to read starts.
    file_rows: u64,
    read_at: u64,
    reading: bool,
}

impl Spool {
    /// An empty spool of rows of `columns` values that keeps at most `budget_bytes` in
    /// memory.
    pub fn new(columns: usize, budget_bytes: u64) -> Spool {
        Spool {
            memory: VecDeque::new(),
            memory_bytes: 0,
            budget_bytes: usize::try_from(budget_bytes).unwrap_or(usize::MAX),
            columns,
            file: None,
            file_rows: 0,
            read_at: 0,
            reading: false,
        }
    }

    /// Adds a row at the end; past the budget it goes to the temp file (made in `db`'s).
    pub fn push(&mut self, db: &Database, row: &[Value]) -> Result<()> {
        assert!(!self.reading, "a spool is written before it is read");
        debug_assert_eq!(row.len(), self.columns, "a spool's rows have its columns");
        let bytes = quire_engine::encoded_row_len(row);
        if self.file.is_none()
            && self.memory_bytes + bytes + ROW_OVERHEAD_BYTES <= self.budget_bytes
        {
            self.memory_bytes += bytes + ROW_OVERHEAD_BYTES;
            self.memory.push_back(row.to_vec());
            return Ok(());
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(db.temp_file()?),
        };
        let len = u32::try_from(bytes).map_err(|_| {
            SqlError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                "a row is too large to spool",
            )
        })?;
        let mut record = Vec::with_capacity(4 + bytes);
        record.extend_from_slice(&len.to_le_bytes());
        quire_engine::encode_row(row, &mut record);
        file.append(&record)?;
        self.file_rows += 1;
        Ok(())
    }

    /// The next row, in the order pushed; `None` once all were read.
    pub fn pop(&mut self) -> Result<Option<Row>> {
        self.reading = true;
        if let Some(row) = self.memory.pop_front() {
            return Ok(Some(row));
        }
        let Some(file) = &self.file else {
            return Ok(None);
        };
        if self.file_rows == 0 {
            return Ok(None);
        }
        let mut len = [0u8; 4];
        file.read_exact_at(&mut len, self.read_at)?;
        let len = u32::from_le_bytes(len) as usize;
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, self.read_at + 4)?;
        self.read_at += 4 + len as u64;
        self.file_rows -= 1;
        let row = quire_engine::decode_row(&bytes, self.columns).map_err(|e| {
            SqlError::new(
                SqlState::INTERNAL_ERROR,
                format!("a spooled row is corrupt: {e}"),
            )
        })?;
        Ok(Some(row))
    }

    /// Whether rows remain to be read.
    pub fn is_empty(&self) -> bool {
        self.memory.is_empty() && self.file_rows == 0
    }

    /// Whether rows went to the temp file.
    pub fn spilled(&self) -> bool {
        self.file.is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use quire_engine::vfs::{SimVfs, Vfs};

    use super::*;

    #[test]
    fn rows_come_back_in_order_from_memory_then_the_file() {
        let vfs: Arc<dyn Vfs> = Arc::new(SimVfs::new(1));
        let config = quire_engine::Config {
            shared_buffers_bytes: 1 << 20,
            autovacuum: false,
            ..quire_engine::Config::default()
        };
        let db = Database::open(&vfs, std::path::Path::new("/data"), config).unwrap();
        let mut spool = Spool::new(2, 1024);
        for i in 0..200 {
            spool
                .push(&db, &[Value::Int(i), Value::Text(format!("row {i}"))])
                .unwrap();
        }
        assert!(spool.spilled(), "200 rows do not fit in 1 kB");
        for i in 0..200 {
            let row = spool.pop().unwrap().expect("a row");
            assert_eq!(row, vec![Value::Int(i), Value::Text(format!("row {i}"))]);
        }
        assert!(spool.is_empty());
        assert_eq!(spool.pop().unwrap(), None);
        drop(spool);
        let tmp = quire_engine::temp::dir(std::path::Path::new("/data"));
        assert_eq!(
            vfs.list_dir(&tmp).unwrap(),
            Vec::<std::path::PathBuf>::new()
        );
    }
}
