//! Reading a WAL record's main data field by field, failing with the record's LSN (never
//! panicking) when the record is shorter than its kind says: WAL is input from disk. A thin
//! wrapper over [`crate::bytes::Reader`] that turns a short read into [`Error::WalCorrupt`].

use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::wal::DecodedRecord;
use crate::types::Lsn;

/// A cursor over one record's main data.
pub(crate) struct RecordCursor<'a> {
    reader: Reader<'a>,
    lsn: Lsn,
    /// Which resource manager's record this is, for the error ("heap", "B-tree").
    what: &'static str,
}

impl<'a> RecordCursor<'a> {
    pub(crate) fn new(rec: &'a DecodedRecord, what: &'static str) -> Self {
        RecordCursor {
            reader: Reader::new(&rec.main),
            lsn: rec.lsn,
            what,
        }
    }

    fn short<T>(&self, field: Option<T>) -> Result<T> {
        field.ok_or_else(|| Error::WalCorrupt {
            lsn: self.lsn,
            reason: format!("{} record is too short", self.what),
        })
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        let v = self.reader.u8();
        self.short(v)
    }

    pub(crate) fn u16(&mut self) -> Result<u16> {
        let v = self.reader.u16();
        self.short(v)
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        let v = self.reader.u32();
        self.short(v)
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let v = self.reader.u64();
        self.short(v)
    }

    /// A byte string prefixed by its length as a u16.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let s = self.reader.bytes_u16();
        self.short(s)
    }

    /// Everything not read yet.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        self.reader.rest()
    }

    /// Fails unless every byte was read.
    pub(crate) fn done(&self) -> Result<()> {
        self.reader.done().ok_or_else(|| Error::WalCorrupt {
            lsn: self.lsn,
            reason: format!("{} record has trailing bytes", self.what),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(main: Vec<u8>) -> DecodedRecord {
        DecodedRecord {
            lsn: Lsn(4242),
            end_lsn: Lsn(4300),
            prev: Lsn::INVALID,
            xid: crate::types::Xid::INVALID,
            rmid: crate::types::Rmid(0),
            info: 0,
            blocks: Vec::new(),
            main,
        }
    }

    #[test]
    fn reads_fields_in_order_and_reports_short_and_long_records() {
        let rec = record(vec![
            7, 1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 9, 9, 5,
        ]);
        let mut c = RecordCursor::new(&rec, "test");
        assert_eq!(c.u8().unwrap(), 7);
        assert_eq!(c.u16().unwrap(), 1);
        assert_eq!(c.u32().unwrap(), 2);
        assert_eq!(c.u64().unwrap(), 3);
        assert_eq!(c.bytes().unwrap(), &[9, 9]);
        let e = c.done().unwrap_err().to_string();
        // The LSN as PostgreSQL prints it: 4242 is 0x1092.
        assert!(
            e.contains("trailing") && e.contains("at LSN 0/1092:"),
            "{e}"
        );
        assert_eq!(c.rest(), &[5]);
        c.done().unwrap();
        let e = c.u8().unwrap_err().to_string();
        assert!(
            e.contains("test record is too short") && e.contains("0/1092"),
            "{e}"
        );
    }
}
