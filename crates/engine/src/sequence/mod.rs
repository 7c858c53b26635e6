//! # sequence — numbers handed out outside transactions (PostgreSQL's `sequence.c`)
//!
//! A sequence is a relation of one page. Its definition (increment, bounds, start, CYCLE) is
//! a catalog entry like a table's, so CREATE and DROP SEQUENCE commit and roll back with
//! their transaction; its *state* (the last value handed out) changes in place, outside any
//! transaction, so that `nextval` never waits for another session's commit and a value once
//! handed out is never handed out again, even by a transaction that rolls back.
//!
//! ## Page layout (block 0)
//!
//! ```text
//! 0          24                                   8160        8168      8176     8184  8192
//! ┌──────────┬──────────── (empty) ───────────────┬───────────┬─────────┬────────┬──────┐
//! │ header   │                                    │ magic u32 │last_value│log_cnt │called│
//! │ (LSN ..) │                                    │ + pad u32 │   i64    │  i64   │ u8 ..│
//! └──────────┴────────────────────────────────────┴───────────┴─────────┴────────┴──────┘
//!                                                 └──── special space, 32 bytes ────────┘
//! ```
//!
//! ## Rules
//! - **Log ahead, then hand out** (PostgreSQL's `SEQ_LOG_VALS`). A `nextval` that finds no
//!   logged value left writes one WAL record saying "the last value is N + 32 steps", sets
//!   `log_cnt` to the values that record covers, and flushes the WAL up to it *before* the
//!   value reaches the caller; the next 32 calls only change the page. After a crash, redo
//!   sets the page to the logged value, so the sequence resumes past everything handed out
//!   (skipping at most 32 values, as PostgreSQL does); after a clean shutdown the page,
//!   written by the shutdown checkpoint, resumes exactly.
//! - **A checkpoint forces a new record.** When the page's LSN is at or before the redo
//!   point, the next `nextval` logs again whatever `log_cnt` says: redo from that checkpoint
//!   would not see the older record, and the page on disk may predate the values handed out
//!   since.
//! - **Redo rebuilds the page** from the record alone (the record carries the whole state
//!   and its block is `will_init`), so a torn sequence page needs no full-page image.
//! - The state changes under the page's exclusive content lock, which serialises callers;
//!   no lock is held across the WAL flush.

use crate::buffer::{BufferPool, PageWriteGuard};
use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::page::{Page, PageMut};
use crate::recovery::{redo_block, rmid, RecordCursor, RedoContext, ResourceManager};
use crate::types::{BufferTag, Fork, Lsn, Oid, RelFileLocator, Xid, PAGE_SIZE};
use crate::wal::record::record_types;
use crate::wal::{DecodedRecord, LoggedPage, Wal};

/// Values logged ahead by one WAL record (PostgreSQL's `SEQ_LOG_VALS`).
pub const LOG_AHEAD_VALUES: i64 = 32;

/// The special space of a sequence page.
const SPECIAL_SIZE_BYTES: usize = 32;
/// Marks a sequence page ("SEQ1"); anything else in its place is corruption.
const MAGIC: u32 = 0x5345_5131;

record_types! {
    /// Sequence record types.
    pub enum SequenceRecord for rmid::SEQUENCE {
        /// The page's state from now on: last_value i64, is_called u8 (log_cnt 0).
        Set = 1,
    }
}

/// A sequence's definition: what CREATE SEQUENCE says (PostgreSQL's `pg_sequence`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqOptions {
    pub increment: i64,
    pub min_value: i64,
    pub max_value: i64,
    pub start: i64,
    /// Accepted and shown; quire hands out one value per call (PostgreSQL's CACHE 1).
    pub cache: i64,
    pub cycle: bool,
    /// The width of the integer type the sequence was declared as (2, 4 or 8 bytes:
    /// PostgreSQL's `AS smallint | integer | bigint`), which its bounds already obey.
    pub value_bytes: u8,
}

impl Default for SeqOptions {
    /// PostgreSQL's defaults for an ascending bigint sequence.
    fn default() -> Self {
        SeqOptions {
            increment: 1,
            min_value: 1,
            max_value: i64::MAX,
            start: 1,
            cache: 1,
            cycle: false,
            value_bytes: 8,
        }
    }
}

const OPTIONS_BYTES: usize = 5 * 8 + 2;

impl SeqOptions {
    /// Checks the options as PostgreSQL's `init_params` does (SQLSTATE 22023).
    pub fn check(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidParameter { what });
        if self.increment == 0 {
            return bad("INCREMENT must not be zero".into());
        }
        if self.min_value >= self.max_value {
            return bad(format!(
                "MINVALUE ({}) must be less than MAXVALUE ({})",
                self.min_value, self.max_value
            ));
        }
        if self.start < self.min_value {
            return bad(format!(
                "START value ({}) cannot be less than MINVALUE ({})",
                self.start, self.min_value
            ));
        }
        if self.start > self.max_value {
            return bad(format!(
                "START value ({}) cannot be greater than MAXVALUE ({})",
                self.start, self.max_value
            ));
        }
        if self.cache < 1 {
            return bad(format!("CACHE ({}) must be greater than zero", self.cache));
        }
        if !matches!(self.value_bytes, 2 | 4 | 8) {
            return bad(format!("a sequence value of {} bytes", self.value_bytes));
        }
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(OPTIONS_BYTES);
        for v in [
            self.increment,
            self.min_value,
            self.max_value,
            self.start,
            self.cache,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.push(u8::from(self.cycle));
        out.push(self.value_bytes);
        out
    }

    /// `None` if `bytes` are not options (a catalog row of another kind, or corruption).
    pub fn decode(bytes: &[u8]) -> Option<SeqOptions> {
        let mut r = Reader::new(bytes);
        let opts = SeqOptions {
            increment: r.i64()?,
            min_value: r.i64()?,
            max_value: r.i64()?,
            start: r.i64()?,
            cache: r.i64()?,
            cycle: match r.u8()? {
                0 => false,
                1 => true,
                _ => return None,
            },
            value_bytes: r.u8().filter(|b| matches!(b, 2 | 4 | 8))?,
        };
        r.done()?;
        Some(opts)
    }

    /// The value after `v`, or `None` past the bound (CYCLE wraps instead).
    fn step(&self, v: i64) -> Option<i64> {
        match v.checked_add(self.increment) {
            Some(n) if (self.min_value..=self.max_value).contains(&n) => Some(n),
            _ if self.cycle => Some(if self.increment > 0 {
                self.min_value
            } else {
                self.max_value
            }),
            _ => None,
        }
    }
}

/// A sequence's definition in the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequenceDef {
    pub oid: Oid,
    pub name: String,
    pub rel: RelFileLocator,
    pub options: SeqOptions,
}

/// A sequence's state, as its page holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqState {
    /// The last value handed out (or, before the first `nextval`, the start).
    pub last_value: i64,
    /// Values handed out since the last WAL record that are still covered by it.
    pub log_cnt: i64,
    /// Whether `last_value` has been handed out (false: the next call returns it).
    pub is_called: bool,
}

impl SeqState {
    fn write(&self, page: &mut [u8; PAGE_SIZE]) {
        let mut p = PageMut::new(page);
        p.init(SPECIAL_SIZE_BYTES);
        let special = p
            .special_space_mut()
            .expect("a page just initialised has its special space");
        special[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        special[8..16].copy_from_slice(&self.last_value.to_le_bytes());
        special[16..24].copy_from_slice(&self.log_cnt.to_le_bytes());
        special[24] = u8::from(self.is_called);
    }

    fn read(page: &[u8; PAGE_SIZE], rel: RelFileLocator) -> Result<SeqState> {
        let corrupt = |reason: &str| Error::CorruptSequence {
            rel,
            reason: reason.into(),
        };
        let p = Page::new(page);
        p.check_header().map_err(|e| corrupt(&e.to_string()))?;
        let special = p
            .special_space()
            .filter(|s| s.len() == SPECIAL_SIZE_BYTES)
            .ok_or_else(|| corrupt("the special space is not a sequence's"))?;
        let mut r = Reader::new(special);
        if r.u32() != Some(MAGIC) {
            return Err(corrupt("the magic number is wrong"));
        }
        let (_pad, last_value, log_cnt, called) = (r.u32(), r.i64(), r.i64(), r.u8());
        let (Some(last_value), Some(log_cnt), Some(called @ (0 | 1))) = (last_value, log_cnt, called)
        else {
            return Err(corrupt("the state is malformed"));
        };
        if !(0..=LOG_AHEAD_VALUES).contains(&log_cnt) {
            return Err(corrupt(&format!("log_cnt {log_cnt} is out of range")));
        }
        Ok(SeqState {
            last_value,
            log_cnt,
            is_called: called == 1,
        })
    }
}

fn tag(rel: RelFileLocator) -> BufferTag {
    BufferTag::new(rel, Fork::Main, 0)
}

fn set_record(state: SeqState) -> Vec<u8> {
    let mut main = Vec::with_capacity(9);
    main.extend_from_slice(&state.last_value.to_le_bytes());
    main.push(u8::from(state.is_called));
    main
}

/// Creates the sequence's page (its file exists, created and WAL-logged by the caller) at
/// the start value, logged so that redo rebuilds it.
pub fn init(pool: &BufferPool, wal: &Wal, def: &SequenceDef) -> Result<()> {
    let buf = pool.extend(def.rel, Fork::Main)?;
    let mut page = buf.write();
    let state = SeqState {
        last_value: def.options.start,
        log_cnt: 0,
        is_called: false,
    };
    write_logged(wal, &mut page, state, state)?;
    Ok(())
}

/// Writes `on_page` to the sequence's page and logs `logged`, the state redo rebuilds the
/// page with (where a crash resumes from); returns the record's end.
fn write_logged(
    wal: &Wal,
    page: &mut PageWriteGuard<'_>,
    on_page: SeqState,
    logged: SeqState,
) -> Result<Lsn> {
    on_page.write(page);
    wal.log_page_change(
        Xid::INVALID,
        SequenceRecord::Set,
        &set_record(logged),
        &mut [LoggedPage::will_init(page)],
    )
}

/// The state now (for `SELECT * FROM seq` and `pg_sequences`).
pub fn state(pool: &BufferPool, def: &SequenceDef) -> Result<SeqState> {
    let buf = pool.read_buffer(tag(def.rel))?;
    let page = buf.read();
    SeqState::read(&page, def.rel)
}

/// `nextval`: the next value, durable in the WAL before it is returned (see the header).
pub fn next_value(pool: &BufferPool, wal: &Wal, def: &SequenceDef) -> Result<i64> {
    let opts = &def.options;
    let buf = pool.read_buffer(tag(def.rel))?;
    let (value, logged_upto) = {
        let mut page = buf.write();
        let old = SeqState::read(&page, def.rel)?;
        let value = if old.is_called {
            opts.step(old.last_value).ok_or_else(|| exhausted(def))?
        } else {
            old.last_value
        };
        let must_log =
            old.log_cnt == 0 || !old.is_called || Page::new(&page).lsn() <= wal.redo_point();
        if must_log {
            // Log up to 32 steps ahead, stopping at the bound rather than wrapping: the
            // values a record covers are then exactly those between `value` and it.
            let mut ahead = value;
            let mut covered = 0;
            while covered < LOG_AHEAD_VALUES {
                match ahead
                    .checked_add(opts.increment)
                    .filter(|n| (opts.min_value..=opts.max_value).contains(n))
                {
                    Some(n) => ahead = n,
                    None => break,
                }
                covered += 1;
            }
            let logged = SeqState {
                last_value: ahead,
                log_cnt: 0,
                is_called: true,
            };
            let on_page = SeqState {
                last_value: value,
                log_cnt: covered,
                is_called: true,
            };
            let end = write_logged(wal, &mut page, on_page, logged)?;
            (value, Some(end))
        } else {
            let lsn = Page::new(&page).lsn();
            SeqState {
                last_value: value,
                log_cnt: old.log_cnt - 1,
                is_called: true,
            }
            .write(&mut page);
            // `init` cleared the LSN; the page still reflects the same last record.
            PageMut::new(&mut page).set_lsn(lsn);
            page.mark_dirty();
            (value, None)
        }
    };
    drop(buf);
    if let Some(end) = logged_upto {
        wal.flush(end)?;
    }
    Ok(value)
}

/// `setval`: the sequence goes on after `value` (`is_called`) or at it; logged and flushed.
pub fn set_value(
    pool: &BufferPool,
    wal: &Wal,
    def: &SequenceDef,
    value: i64,
    is_called: bool,
) -> Result<()> {
    let opts = &def.options;
    if !(opts.min_value..=opts.max_value).contains(&value) {
        return Err(Error::OutOfRange {
            what: format!(
                "setval: value {value} is out of bounds for sequence \"{}\" ({}..{})",
                def.name, opts.min_value, opts.max_value
            ),
        });
    }
    let buf = pool.read_buffer(tag(def.rel))?;
    let end = {
        let mut page = buf.write();
        SeqState::read(&page, def.rel)?;
        let state = SeqState {
            last_value: value,
            log_cnt: 0,
            is_called,
        };
        write_logged(wal, &mut page, state, state)?
    };
    drop(buf);
    wal.flush(end)
}

fn exhausted(def: &SequenceDef) -> Error {
    let (which, bound) = if def.options.increment > 0 {
        ("maximum", def.options.max_value)
    } else {
        ("minimum", def.options.min_value)
    };
    Error::SequenceLimit {
        what: format!(
            "nextval: reached {which} value of sequence \"{}\" ({bound})",
            def.name
        ),
    }
}

/// Redo of sequence records.
pub struct SequenceRedo;

impl ResourceManager for SequenceRedo {
    fn name(&self) -> &'static str {
        "sequence"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let SequenceRecord::Set = rec.record_type()?;
        let mut c = RecordCursor::new(rec, "sequence");
        let last_value = c.u64()?.cast_signed();
        let is_called = match c.u8()? {
            0 => false,
            1 => true,
            other => {
                return Err(Error::WalCorrupt {
                    lsn: rec.lsn,
                    reason: format!("sequence record has is_called {other}"),
                })
            }
        };
        redo_block(ctx, rec, 0, true, |page, _| {
            SeqState {
                last_value,
                log_cnt: 0,
                is_called,
            }
            .write(page);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_and_refuse_other_bytes() {
        let o = SeqOptions {
            increment: -3,
            min_value: -100,
            max_value: 5,
            start: 5,
            cache: 1,
            cycle: true,
            value_bytes: 4,
        };
        assert_eq!(SeqOptions::decode(&o.encode()), Some(o));
        assert_eq!(SeqOptions::decode(&o.encode()[1..]), None);
        let mut bad = o.encode();
        *bad.last_mut().expect("not empty") = 7;
        assert_eq!(SeqOptions::decode(&bad), None);
        assert!(o.check().is_ok());
        let zero = SeqOptions {
            increment: 0,
            ..SeqOptions::default()
        };
        assert_eq!(zero.check().unwrap_err().sqlstate(), "22023");
    }

    #[test]
    fn steps_stop_at_the_bound_or_wrap_with_cycle() {
        let o = SeqOptions {
            max_value: 3,
            ..SeqOptions::default()
        };
        assert_eq!(o.step(2), Some(3));
        assert_eq!(o.step(3), None);
        let c = SeqOptions { cycle: true, ..o };
        assert_eq!(c.step(3), Some(1));
        let down = SeqOptions {
            increment: -1,
            min_value: i64::MIN,
            max_value: -1,
            start: -1,
            ..SeqOptions::default()
        };
        assert_eq!(down.step(i64::MIN), None, "no overflow past i64::MIN");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Bytes from disk: any special space, any options, an error or a value, no panic.
        #[test]
        fn decoders_never_panic(
            special in proptest::collection::vec(proptest::prelude::any::<u8>(), 32),
            options in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            flip in 0usize..PAGE_SIZE,
        ) {
            let rel = RelFileLocator::new(1, 16400);
            let mut page = [0u8; PAGE_SIZE];
            SeqState { last_value: 1, log_cnt: 0, is_called: false }.write(&mut page);
            page[PAGE_SIZE - SPECIAL_SIZE_BYTES..].copy_from_slice(&special);
            let _ = SeqState::read(&page, rel);
            page[flip] ^= 0xff;
            let _ = SeqState::read(&page, rel);
            let _ = SeqOptions::decode(&options);
        }
    }

    #[test]
    fn page_state_round_trips_and_garbage_is_an_error() {
        let rel = RelFileLocator::new(1, 16400);
        let mut page = [0u8; PAGE_SIZE];
        let s = SeqState {
            last_value: 42,
            log_cnt: 7,
            is_called: true,
        };
        s.write(&mut page);
        assert_eq!(SeqState::read(&page, rel).expect("valid"), s);
        let mut bad = page;
        bad[PAGE_SIZE - SPECIAL_SIZE_BYTES] ^= 1;
        assert_eq!(SeqState::read(&bad, rel).unwrap_err().sqlstate(), "XX001");
        let mut bad = page;
        bad[PAGE_SIZE - 8] = 9; // is_called
        assert!(SeqState::read(&bad, rel).is_err());
        let mut heap_page = [0u8; PAGE_SIZE];
        PageMut::new(&mut heap_page).init(0);
        assert!(SeqState::read(&heap_page, rel).is_err());
    }
}
