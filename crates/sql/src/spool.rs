//! A spool: rows written once and read back in order, in memory up to a budget
//! (`work_mem`) and in a temp file beyond it (PostgreSQL's tuplestore, for what is read
//! later than it is made: a portal that an Execute with a row limit runs in parts).
//!
//! [`RunWriter`] and [`RunReader`] are the file half alone: a run of rows written through a
//! buffer and read back through one (an external sort's runs, a hash join's batches).
//!
//! ## Rules
//! - Memory is bounded by the budget whatever the number of rows: the rows past it go to
//!   one temp file of the engine's ([`quire_engine::Database::temp_file`]), which is
//!   removed when the spool (or the run) is dropped. A run costs [`RUN_BUFFER_BYTES`] of
//!   memory while written or read.
//! - Writing ends before reading begins ([`Spool::push`] after the first
//!   [`Spool::pop`] is a bug, asserted; a [`RunWriter`] becomes a [`RunReader`] by
//!   [`RunWriter::finish`]).
//! - A row in a file is its length (4 bytes, little-endian), its number of values (2
//!   bytes) and the engine's row encoding; [`RunWriter`] is the one writer and
//!   [`RunReader`] the one reader of that form.

use std::collections::VecDeque;

use quire_engine::temp::TempFile;
use quire_engine::{Database, Row, SqlState, Value};

use crate::error::{Result, SqlError};

/// What a row is taken to cost in memory beyond its encoded bytes (its vector and values).
const ROW_OVERHEAD_BYTES: usize = 64;

/// The buffer a run is written and read through.
pub const RUN_BUFFER_BYTES: usize = 64 * 1024;

/// Rows in order, in memory up to a budget and then in a temp file.
pub struct Spool {
    memory: VecDeque<Row>,
    memory_bytes: usize,
    budget_bytes: usize,
    columns: usize,
    /// Boxed: a spool sits in every suspended portal, and stays small without a file.
    writer: Option<Box<RunWriter>>,
    reader: Option<Box<RunReader>>,
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
            writer: None,
            reader: None,
            reading: false,
        }
    }

    /// Adds a row at the end; past the budget it goes to the temp file (made in `db`'s).
    pub fn push(&mut self, db: &Database, row: &[Value]) -> Result<()> {
        assert!(!self.reading, "a spool is written before it is read");
        debug_assert_eq!(row.len(), self.columns, "a spool's rows have its columns");
        let bytes = row_cost_bytes(row);
        if self.writer.is_none() && self.memory_bytes + bytes <= self.budget_bytes {
            self.memory_bytes += bytes;
            self.memory.push_back(row.to_vec());
            return Ok(());
        }
        let writer = match &mut self.writer {
            Some(w) => w,
            None => self.writer.insert(Box::new(RunWriter::new(db)?)),
        };
        writer.push(row)
    }

    /// The next row, in the order pushed; `None` once all were read.
    pub fn pop(&mut self) -> Result<Option<Row>> {
        if !self.reading {
            self.reading = true;
            if let Some(w) = self.writer.take() {
                self.reader = Some(Box::new(w.finish()?));
            }
        }
        if let Some(row) = self.memory.pop_front() {
            return Ok(Some(row));
        }
        match &mut self.reader {
            Some(r) => r.next_row(),
            None => Ok(None),
        }
    }

    /// Whether rows remain to be read.
    pub fn is_empty(&self) -> bool {
        let in_file = |n: u64| n > 0;
        self.memory.is_empty()
            && !self.writer.as_ref().is_some_and(|w| in_file(w.rows))
            && !self.reader.as_ref().is_some_and(|r| in_file(r.rows_left))
    }

    /// Whether rows went to the temp file.
    pub fn spilled(&self) -> bool {
        self.writer.is_some() || self.reader.is_some()
    }
}

/// What a row is taken to cost in memory: its encoded bytes and [`ROW_OVERHEAD_BYTES`].
pub fn row_cost_bytes(row: &[Value]) -> usize {
    quire_engine::encoded_row_len(row) + ROW_OVERHEAD_BYTES
}

/// Rows appended to a temp file through a buffer.
pub struct RunWriter {
    file: TempFile,
    buf: Vec<u8>,
    rows: u64,
}

impl RunWriter {
    /// A new, empty run in a temp file of `db`'s.
    pub fn new(db: &Database) -> Result<RunWriter> {
        Ok(RunWriter {
            file: db.temp_file()?,
            buf: Vec::with_capacity(RUN_BUFFER_BYTES),
            rows: 0,
        })
    }

    /// Appends a row.
    pub fn push(&mut self, row: &[Value]) -> Result<()> {
        let too_large = || {
            SqlError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                "a row is too large to spool",
            )
        };
        let len = u32::try_from(quire_engine::encoded_row_len(row)).map_err(|_| too_large())?;
        let columns = u16::try_from(row.len()).map_err(|_| too_large())?;
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(&columns.to_le_bytes());
        quire_engine::encode_row(row, &mut self.buf);
        self.rows += 1;
        if self.buf.len() >= RUN_BUFFER_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file.append(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// The run, written, to be read from its start.
    pub fn finish(mut self) -> Result<RunReader> {
        self.flush()?;
        Ok(RunReader {
            file: self.file,
            at: 0,
            buf: Vec::new(),
            pos: 0,
            rows_left: self.rows,
        })
    }
}

/// A run's rows read back in order through a buffer; the file goes when it is dropped.
pub struct RunReader {
    file: TempFile,
    /// Where the file's bytes after the buffer start.
    at: u64,
    buf: Vec<u8>,
    pos: usize,
    rows_left: u64,
}

impl RunReader {
    /// The next row; `None` at the end of the run.
    pub fn next_row(&mut self) -> Result<Option<Row>> {
        if self.rows_left == 0 {
            return Ok(None);
        }
        let header = self.take(6)?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let columns = usize::from(u16::from_le_bytes([header[4], header[5]]));
        let bytes = self.take(len)?;
        let row = quire_engine::decode_row(&bytes, columns).map_err(|e| {
            SqlError::new(
                SqlState::INTERNAL_ERROR,
                format!("a spooled row is corrupt: {e}"),
            )
        })?;
        self.rows_left -= 1;
        Ok(Some(row))
    }

    /// The next `n` bytes of the run, refilling the buffer from the file as needed.
    fn take(&mut self, n: usize) -> Result<Vec<u8>> {
        if self.buf.len() - self.pos < n {
            let left = self.file.len_bytes() - self.at;
            let want = (n - (self.buf.len() - self.pos)).max(RUN_BUFFER_BYTES);
            let read = usize::try_from(left.min(want as u64)).unwrap_or(usize::MAX);
            self.buf.drain(..self.pos);
            self.pos = 0;
            let start = self.buf.len();
            self.buf.resize(start + read, 0);
            self.file.read_exact_at(&mut self.buf[start..], self.at)?;
            self.at += read as u64;
            if self.buf.len() < n {
                return Err(SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    "a spooled run ends in the middle of a row",
                ));
            }
        }
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        Ok(out)
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
