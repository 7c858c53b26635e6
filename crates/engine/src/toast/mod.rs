//! # toast — values too large for a page (PostgreSQL's TOAST)
//!
//! A heap tuple must fit on one page ([`crate::heap::MAX_TUPLE_BYTES`]). Before a table's row
//! is written, [`Toast::store`] makes it small enough, as PostgreSQL's
//! `heap_toast_insert_or_update` does: while the tuple is over [`TOAST_TUPLE_THRESHOLD`],
//! the largest text, bytea or numeric value not yet compressed is compressed (LZ4, kept only
//! if it shrinks); then, while still over, the largest value left in line moves out of line
//! into the table's TOAST relation, leaving a pointer. A value of up to [`MAX_VALUE_BYTES`]
//! can be stored.
//!
//! The TOAST relation is an ordinary heap ([`RelFileLocator::toast`]: the table's relation
//! number with [`RelFileLocator::TOAST_BIT`] set), created when the first value goes out of
//! line. A value is written there as chunks of at most [`CHUNK_BYTES`], each a row
//! `(value id, chunk number, next chunk's block, next chunk's offset, bytes)`, the last
//! chunk written first, so each one knows the address of the next and the pointer holds the
//! first's: a value is read by following its chain, with no index. Every chunk is checked
//! against the pointer (value id, chunk number, total length) as it is read; a mismatch is
//! data corruption (XX001), never a wrong value.
//!
//! ## Stored forms (the bytes of a value with tag 14, [`crate::value::Stored::Toasted`])
//! ```text
//! form u8 (bit 0 compressed, bit 1 out of line; bits 4-5 the kind: text, bytea, numeric)
//! raw_len u32 (the value's own length)
//! in line:     the LZ4 block
//! out of line: stored_len u32 (bytes in the chunks), value id u64,
//!              first chunk: block u32, offset u16
//! ```
//!
//! ## Rules
//! - Chunks live and die with the row version that points at them, through MVCC: they are
//!   inserted by the writer of that version, and deleted ([`Toast::delete_values`]) by the
//!   transaction that deletes it or replaces it by a version without them. So they commit
//!   and roll back with it, and vacuum of the TOAST relation (beside its table's) removes
//!   them once no snapshot can see the version, as any dead tuple.
//! - An update that keeps a value unchanged keeps its pointer: no chunk is written again
//!   (the new value is compared with the old one, whole, before the pointer is reused).
//! - Chunks are read by address, whatever their visibility: a version a snapshot sees still
//!   has its chunks, since they die with it.
//! - A chunk write that the row's update then does not use (the update was refused: a
//!   concurrent change) deletes its chunks again ([`Toast::discard`]).
//! - No content lock of the table's pages is held while TOAST reads or writes chunks.

use crate::buffer::BufferPool;
use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::heap::tuple::HEADER_BYTES;
use crate::heap::{Heap, HeapTuple, UpdateCheck, Writer, MAX_TUPLE_BYTES};
use crate::page::Tid;
use crate::types::{Fork, RelFileLocator};
use crate::value::{
    decode_row, decode_row_with, encoded_row_len, toasted_fields, DecodeError, Numeric, Row,
    Stored, Value,
};
use crate::wal::Wal;

/// A row whose tuple is larger goes through TOAST (PostgreSQL's `TOAST_TUPLE_THRESHOLD` for
/// 8 KiB pages), and TOAST works until it is no larger (`TOAST_TUPLE_TARGET`).
pub const TOAST_TUPLE_THRESHOLD: usize = 2032;
/// Values shorter than this are not worth compressing (pglz's `min_input_size`).
const MIN_COMPRESS_BYTES: usize = 32;
/// Values longer than this are not worth a pointer either.
const MIN_EXTERNAL_BYTES: usize = 64;
/// The longest value, PostgreSQL's 1 GB varlena limit.
pub const MAX_VALUE_BYTES: usize = (1 << 30) - 1;
/// Bytes of a value per chunk: one chunk fills a page (room is left for the chunk row's
/// other columns, at most 9 bytes each, and the bytea's tag and length).
pub const CHUNK_BYTES: usize = MAX_TUPLE_BYTES - HEADER_BYTES - 48;

const FORM_COMPRESSED: u8 = 1;
const FORM_EXTERNAL: u8 = 2;
const KIND_SHIFT: u8 = 4;

/// How TOAST may store a column's values (PostgreSQL's `attstorage`), set by `ALTER TABLE
/// ... ALTER COLUMN ... SET STORAGE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Never compressed, never out of line.
    Plain,
    /// Compressed; out of line only when the row would not fit a page otherwise.
    Main,
    /// Out of line, never compressed.
    External,
    /// Compressed, then out of line (text's and bytea's default).
    Extended,
}

impl Storage {
    /// The default of values of type `ty` (PostgreSQL's `typstorage`).
    pub fn default_for(ty: crate::value::Type) -> Storage {
        use crate::value::Type;
        match ty {
            Type::Text | Type::Bytea => Storage::Extended,
            Type::Numeric => Storage::Main,
            _ => Storage::Plain,
        }
    }

    /// `attstorage`'s letter.
    pub fn code(self) -> &'static str {
        match self {
            Storage::Plain => "p",
            Storage::Main => "m",
            Storage::External => "e",
            Storage::Extended => "x",
        }
    }
}

/// The types TOAST stores (PostgreSQL's varlena types among the engine's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text = 0,
    Bytea = 1,
    Numeric = 2,
}

impl Kind {
    fn of(v: &Value) -> Option<(Kind, &[u8])> {
        match v {
            Value::Text(s) => Some((Kind::Text, s.as_bytes())),
            Value::Bytea(b) => Some((Kind::Bytea, b)),
            Value::Numeric(n) => Some((Kind::Numeric, n.as_bytes())),
            _ => None,
        }
    }

    fn from_form(form: u8) -> Option<Kind> {
        match form >> KIND_SHIFT {
            0 => Some(Kind::Text),
            1 => Some(Kind::Bytea),
            2 => Some(Kind::Numeric),
            _ => None,
        }
    }

    /// The value of this kind whose bytes are `raw`.
    fn value(self, raw: Vec<u8>) -> std::result::Result<Value, String> {
        Ok(match self {
            Kind::Text => {
                Value::Text(String::from_utf8(raw).map_err(|_| "text that is not UTF-8")?)
            }
            Kind::Bytea => Value::Bytea(raw),
            Kind::Numeric => Value::Numeric(
                Numeric::decode(&raw).map_err(|e| format!("not a valid numeric: {e}"))?,
            ),
        })
    }
}

/// A value stored out of line (PostgreSQL's `varatt_external`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pointer {
    kind: Kind,
    compressed: bool,
    raw_len: u32,
    stored_len: u32,
    value_id: u64,
    first: Tid,
}

/// A stored form, parsed.
enum Form<'a> {
    InLine {
        kind: Kind,
        raw_len: u32,
        lz4: &'a [u8],
    },
    External(Pointer),
}

impl Form<'_> {
    fn parse(bytes: &[u8]) -> Option<Form<'_>> {
        let mut r = Reader::new(bytes);
        let form = r.u8()?;
        let kind = Kind::from_form(form)?;
        let raw_len = r.u32()?;
        if form & FORM_EXTERNAL == 0 {
            if form & FORM_COMPRESSED == 0 {
                return None; // in line and not compressed is a plain value
            }
            return Some(Form::InLine {
                kind,
                raw_len,
                lz4: r.take(r.remaining())?,
            });
        }
        let p = Pointer {
            kind,
            compressed: form & FORM_COMPRESSED != 0,
            raw_len,
            stored_len: r.u32()?,
            value_id: r.u64()?,
            first: Tid::new(r.u32()?, r.u16()?),
        };
        (r.remaining() == 0).then_some(Form::External(p))
    }
}

impl Pointer {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(23);
        let form = FORM_EXTERNAL
            | if self.compressed { FORM_COMPRESSED } else { 0 }
            | (self.kind as u8) << KIND_SHIFT;
        out.push(form);
        out.extend_from_slice(&self.raw_len.to_le_bytes());
        out.extend_from_slice(&self.stored_len.to_le_bytes());
        out.extend_from_slice(&self.value_id.to_le_bytes());
        out.extend_from_slice(&self.first.block.to_le_bytes());
        out.extend_from_slice(&self.first.offset.to_le_bytes());
        out
    }
}

fn compressed_form(kind: Kind, raw_len: usize, lz4: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + lz4.len());
    out.push(FORM_COMPRESSED | (kind as u8) << KIND_SHIFT);
    out.extend_from_slice(&(raw_len as u32).to_le_bytes());
    out.extend_from_slice(lz4);
    out
}

/// What writing a value out of line needs: ids for values, the TOAST relation's creation,
/// and the writer stamping the chunks.
struct Ids<'f, 'w> {
    new_id: &'f mut dyn FnMut() -> u64,
    create: &'f dyn Fn() -> Result<()>,
    w: &'f Writer<'w>,
}

/// A row as the heap will store it, and which out-of-line values it wrote or kept.
#[derive(Debug)]
pub struct StoredRow<'r> {
    pub fields: Vec<Stored<'r>>,
    /// Values this store wrote out of line (deleted again by [`Toast::discard`]).
    fresh: Vec<Pointer>,
    /// Ids of the out-of-line values the row points at, new or kept.
    ids: Vec<u64>,
}

impl StoredRow<'_> {
    /// Whether any value was toasted: else the row is stored as it is.
    pub fn is_plain(&self) -> bool {
        self.fields.iter().all(|f| matches!(f, Stored::Plain(_)))
    }
}

/// What an update keeps from the version it replaces: the old tuple and its row as read.
pub struct OldVersion<'o> {
    pub tuple: &'o HeapTuple,
    pub row: &'o [Value],
    /// Whether the tuple holds toasted values ([`Toast::row_noting`] says).
    pub toasted: bool,
}

/// TOAST for one table.
pub struct Toast<'a> {
    main: RelFileLocator,
    heap: Heap<'a>,
    pool: &'a BufferPool,
}

impl<'a> Toast<'a> {
    pub fn new(pool: &'a BufferPool, wal: &'a Wal, main: RelFileLocator) -> Self {
        Toast {
            main,
            heap: Heap::new(pool, wal, main.toast()),
            pool,
        }
    }

    /// The table's relation.
    pub fn table(&self) -> RelFileLocator {
        self.main
    }

    /// The TOAST relation's heap (vacuum's).
    pub fn heap(&self) -> &Heap<'a> {
        &self.heap
    }

    /// Whether the TOAST relation exists yet.
    pub fn exists(&self) -> Result<bool> {
        self.pool.smgr().exists(self.heap.rel, Fork::Main)
    }

    fn corrupt(&self, what: impl std::fmt::Display) -> Error {
        Error::CorruptToast {
            rel: self.main,
            reason: what.to_string(),
        }
    }

    // ------------------------------------------------------------------ reading

    /// The row of a table's tuple, toasted values fetched and decompressed.
    pub fn row(&self, t: &HeapTuple) -> Result<Row> {
        self.row_of(t, |_| true)
    }

    /// [`Toast::row`], and whether the tuple holds toasted values (an update or delete of
    /// it then has pointers to keep or chunks to delete).
    pub fn row_noting(&self, t: &HeapTuple) -> Result<(Row, bool)> {
        let toasted = std::cell::Cell::new(false);
        let row = self.row_of(t, |_| {
            toasted.set(true);
            true
        })?;
        Ok((row, toasted.get()))
    }

    /// [`Toast::row`], fetching only the toasted values of the columns `wanted` says (the
    /// others read as NULL): index probes need their key's columns only.
    pub fn row_of(&self, t: &HeapTuple, wanted: impl Fn(usize) -> bool) -> Result<Row> {
        let natts = usize::from(t.header.natts);
        let values = t.bytes.get(HEADER_BYTES..).unwrap_or(&[]);
        decode_row_with(values, natts, |index, bytes| {
            if wanted(index) {
                self.detoast(bytes).map_err(ReadError::Toast)
            } else {
                Ok(Value::Null)
            }
        })
        .map_err(|e| match e {
            ReadError::Decode(d) => Error::CorruptTuple {
                rel: self.main,
                tid: t.tid,
                reason: d.to_string(),
            },
            ReadError::Toast(e) => e,
        })
    }

    /// The value a stored form stands for.
    fn detoast(&self, bytes: &[u8]) -> Result<Value> {
        let form = Form::parse(bytes).ok_or_else(|| self.corrupt("a malformed stored value"))?;
        let (kind, raw) = match form {
            Form::InLine { kind, raw_len, lz4 } => (kind, self.decompress(lz4, raw_len)?),
            Form::External(p) => {
                let stored = self.fetch_chunks(&p)?;
                let raw = if p.compressed {
                    self.decompress(&stored, p.raw_len)?
                } else {
                    stored
                };
                (p.kind, raw)
            }
        };
        kind.value(raw).map_err(|e| self.corrupt(e))
    }

    fn decompress(&self, lz4: &[u8], raw_len: u32) -> Result<Vec<u8>> {
        let raw_len = raw_len as usize;
        if raw_len > MAX_VALUE_BYTES {
            return Err(self.corrupt(format!("a value of {raw_len} bytes")));
        }
        let mut raw = vec![0; raw_len];
        match lz4_flex::block::decompress_into(lz4, &mut raw) {
            Ok(n) if n == raw_len => Ok(raw),
            Ok(n) => Err(self.corrupt(format!("{n} bytes decompressed, {raw_len} expected"))),
            Err(e) => Err(self.corrupt(format!("compressed data is corrupt: {e}"))),
        }
    }

    /// The stored bytes of an out-of-line value, its chain of chunks followed and checked.
    fn fetch_chunks(&self, p: &Pointer) -> Result<Vec<u8>> {
        let total = p.stored_len as usize;
        if total > MAX_VALUE_BYTES {
            return Err(self.corrupt(format!("a value of {total} bytes")));
        }
        let mut out = Vec::with_capacity(total);
        let mut at = Some(p.first);
        // Bounded: one round per chunk of the recorded length.
        for seq in 0..total.div_ceil(CHUNK_BYTES) {
            let missing = || {
                self.corrupt(format!(
                    "missing chunk number {seq} for toast value {}",
                    p.value_id
                ))
            };
            let tid = at.ok_or_else(missing)?;
            let t = self.heap.fetch(tid)?.ok_or_else(missing)?;
            let chunk = Chunk::read(&t).ok_or_else(|| {
                self.corrupt(format!(
                    "chunk {tid} of toast value {} is malformed",
                    p.value_id
                ))
            })?;
            if chunk.value_id != p.value_id || usize::try_from(chunk.seq) != Ok(seq) {
                return Err(missing());
            }
            if out.len() + chunk.bytes.len() > total {
                return Err(self.corrupt(format!("toast value {} is too long", p.value_id)));
            }
            out.extend_from_slice(&chunk.bytes);
            at = chunk.next;
        }
        if out.len() != total || at.is_some() {
            return Err(self.corrupt(format!(
                "toast value {} has {} bytes, {total} expected",
                p.value_id,
                out.len()
            )));
        }
        Ok(out)
    }

    // ------------------------------------------------------------------ writing

    /// `row` as the heap will store it, values compressed and moved out of line until the
    /// tuple is at most [`TOAST_TUPLE_THRESHOLD`] (see the module header), or `None` when it
    /// is stored as it is. `old`: the version an update replaces, whose unchanged
    /// out-of-line values are kept. `w` stamps the chunks; `new_id` hands out value ids;
    /// `create` makes the TOAST relation.
    pub fn store<'r>(
        &self,
        row: &'r [Value],
        storage: &dyn Fn(usize) -> Storage,
        old: Option<&OldVersion<'_>>,
        w: &Writer<'_>,
        new_id: &mut dyn FnMut() -> u64,
        create: &dyn Fn() -> Result<()>,
    ) -> Result<Option<StoredRow<'r>>> {
        let old_toasted = match old {
            Some(o) if o.toasted => self.toasted_of(o.tuple)?,
            _ => Vec::new(),
        };
        if old_toasted.is_empty() && HEADER_BYTES + encoded_row_len(row) <= TOAST_TUPLE_THRESHOLD {
            return Ok(None);
        }
        let mut out = StoredRow {
            fields: row.iter().map(Stored::Plain).collect(),
            fresh: Vec::new(),
            ids: Vec::new(),
        };
        if let Some(old) = old {
            keep_unchanged(&old_toasted, old.row, row, &mut out);
        }
        let mut size = HEADER_BYTES + out.fields.iter().map(Stored::encoded_len).sum::<usize>();
        if size <= TOAST_TUPLE_THRESHOLD {
            return Ok((!out.is_plain()).then_some(out));
        }
        for v in row {
            if Kind::of(v).is_some_and(|(_, b)| b.len() > MAX_VALUE_BYTES) {
                return Err(Error::ProgramLimitExceeded {
                    what: format!("value too large to store: {} bytes", v.encoded_len()),
                });
            }
        }
        // PostgreSQL's order: EXTENDED values compressed, then EXTENDED and EXTERNAL ones out
        // of line; then MAIN values compressed, and out of line only to fit the page.
        let extended = |i: usize| storage(i) == Storage::Extended;
        compress_largest(row, &extended, &mut out, &mut size);
        let movable = |i: usize| matches!(storage(i), Storage::Extended | Storage::External);
        let mut ids = Ids { new_id, create, w };
        self.move_largest(
            row,
            &movable,
            TOAST_TUPLE_THRESHOLD,
            &mut out,
            &mut size,
            &mut ids,
        )?;
        let main = |i: usize| storage(i) == Storage::Main;
        compress_largest(row, &main, &mut out, &mut size);
        self.move_largest(row, &main, MAX_TUPLE_BYTES, &mut out, &mut size, &mut ids)?;
        Ok(Some(out))
    }

    /// Moves the largest values of `row` that `pick` allows out of line while the tuple
    /// (`size` bytes) is over `limit`.
    fn move_largest(
        &self,
        row: &[Value],
        pick: &dyn Fn(usize) -> bool,
        limit: usize,
        out: &mut StoredRow<'_>,
        size: &mut usize,
        ids: &mut Ids<'_, '_>,
    ) -> Result<()> {
        while *size > limit {
            let Some(i) = largest(&out.fields, |i, f| {
                pick(i)
                    && Kind::of(&row[i]).is_some()
                    && f.encoded_len() >= MIN_EXTERNAL_BYTES
                    && !is_external(f)
            }) else {
                return Ok(());
            };
            let before = out.fields[i].encoded_len();
            let p = self.write_external(&row[i], &out.fields[i], ids)?;
            out.fresh.push(p);
            out.ids.push(p.value_id);
            out.fields[i] = Stored::Toasted(p.encode());
            *size = *size - before + out.fields[i].encoded_len();
        }
        Ok(())
    }

    fn toasted_of<'t>(&self, t: &'t HeapTuple) -> Result<Vec<(usize, &'t [u8])>> {
        let natts = usize::from(t.header.natts);
        toasted_fields(t.bytes.get(HEADER_BYTES..).unwrap_or(&[]), natts).map_err(|e| {
            Error::CorruptTuple {
                rel: self.main,
                tid: t.tid,
                reason: e.to_string(),
            }
        })
    }

    /// Writes `value` (stored as `field`: plain or compressed in line) out of line.
    fn write_external(
        &self,
        value: &Value,
        field: &Stored<'_>,
        ids: &mut Ids<'_, '_>,
    ) -> Result<Pointer> {
        let w = ids.w;
        let (kind, raw) = Kind::of(value).expect("only varlena values are large");
        let (compressed, stored): (bool, &[u8]) = match field {
            Stored::Toasted(form) => match Form::parse(form) {
                Some(Form::InLine { lz4, .. }) => (true, lz4),
                _ => (false, raw),
            },
            Stored::Plain(_) => (false, raw),
        };
        (ids.create)()?;
        let value_id = (ids.new_id)();
        let chunks: Vec<&[u8]> = stored.chunks(CHUNK_BYTES).collect();
        let mut next: Option<Tid> = None;
        let mut hint = None;
        // The last chunk first: each chunk names the next one's address.
        for (seq, bytes) in chunks.iter().enumerate().rev() {
            let row = Chunk::row(value_id, seq, next, bytes);
            next = Some(self.heap.insert(w.xid, w.cid, &row, &mut hint)?);
        }
        Ok(Pointer {
            kind,
            compressed,
            raw_len: raw.len() as u32,
            stored_len: stored.len() as u32,
            value_id,
            first: next.unwrap_or(Tid::new(u32::MAX, 0)),
        })
    }

    // ------------------------------------------------------------------ deleting

    /// Deletes the chunks of the out-of-line values of `old` that `kept` (the row replacing
    /// it, if any) does not point at: the version is gone, and with it its values.
    pub fn delete_values(
        &self,
        old: &OldVersion<'_>,
        kept: Option<&StoredRow<'_>>,
        w: &Writer<'_>,
    ) -> Result<()> {
        if !old.toasted {
            return Ok(());
        }
        for (_, bytes) in self.toasted_of(old.tuple)? {
            let Some(Form::External(p)) = Form::parse(bytes) else {
                continue;
            };
            if kept.is_some_and(|k| k.ids.contains(&p.value_id)) {
                continue;
            }
            self.delete_chunks(&p, w)?;
        }
        Ok(())
    }

    /// Deletes what `stored` wrote out of line: the row it was for was not written.
    pub fn discard(&self, stored: &StoredRow<'_>, w: &Writer<'_>) -> Result<()> {
        stored
            .fresh
            .iter()
            .try_for_each(|p| self.delete_chunks(p, w))
    }

    fn delete_chunks(&self, p: &Pointer, w: &Writer<'_>) -> Result<()> {
        // A later command id: chunks this very command wrote are the writer's to delete.
        let w = Writer {
            cid: w.cid.saturating_add(1),
            ..*w
        };
        let mut at = Some(p.first);
        for _ in 0..(p.stored_len as usize).div_ceil(CHUNK_BYTES) {
            let Some(tid) = at else { break };
            let Some(t) = self.heap.fetch(tid)? else {
                break;
            };
            let Some(chunk) = Chunk::read(&t).filter(|c| c.value_id == p.value_id) else {
                break;
            };
            match self.heap.delete(tid, &w)? {
                // Done, or deleted by this transaction already.
                UpdateCheck::Ok | UpdateCheck::SelfModified | UpdateCheck::Invisible => {}
                other => {
                    return Err(self.corrupt(format!(
                        "chunk {tid} of toast value {} is another transaction's ({other:?})",
                        p.value_id
                    )))
                }
            }
            at = chunk.next;
        }
        Ok(())
    }
}

/// Compresses the largest values of `row` in `out` while the tuple (`size` bytes) is over
/// the threshold; each value is tried once and kept compressed only if that shrinks it.
fn compress_largest(
    row: &[Value],
    pick: &dyn Fn(usize) -> bool,
    out: &mut StoredRow<'_>,
    size: &mut usize,
) {
    let mut tried = vec![false; row.len()];
    while *size > TOAST_TUPLE_THRESHOLD {
        let Some(i) = largest(&out.fields, |i, f| {
            let Stored::Plain(v) = f else { return false };
            pick(i) && !tried[i] && Kind::of(v).is_some_and(|(_, b)| b.len() >= MIN_COMPRESS_BYTES)
        }) else {
            return;
        };
        tried[i] = true;
        let (kind, raw) = Kind::of(&row[i]).expect("chosen for its kind");
        let lz4 = lz4_flex::block::compress(raw);
        let form = Stored::Toasted(compressed_form(kind, raw.len(), &lz4));
        if form.encoded_len() < out.fields[i].encoded_len() {
            *size -= out.fields[i].encoded_len() - form.encoded_len();
            out.fields[i] = form;
        }
    }
}

/// Keeps, in `out`, the pointers of the old version's out-of-line values (`old_toasted`,
/// read from a version whose row was `old_row`) that `row` holds unchanged.
fn keep_unchanged(
    old_toasted: &[(usize, &[u8])],
    old_row: &[Value],
    row: &[Value],
    out: &mut StoredRow<'_>,
) {
    for &(index, bytes) in old_toasted {
        let Some(Form::External(p)) = Form::parse(bytes) else {
            continue;
        };
        if index < row.len() && old_row.get(index) == Some(&row[index]) {
            out.fields[index] = Stored::Toasted(bytes.to_vec());
            out.ids.push(p.value_id);
        }
    }
}

/// The largest field `pick` accepts, by its stored length.
fn largest(fields: &[Stored<'_>], pick: impl Fn(usize, &Stored<'_>) -> bool) -> Option<usize> {
    fields
        .iter()
        .enumerate()
        .filter(|(i, f)| pick(*i, f))
        .max_by_key(|(_, f)| f.encoded_len())
        .map(|(i, _)| i)
}

fn is_external(f: &Stored<'_>) -> bool {
    matches!(f, Stored::Toasted(b) if matches!(Form::parse(b), Some(Form::External(_))))
}

/// One chunk of an out-of-line value, as its row in the TOAST relation.
struct Chunk {
    value_id: u64,
    seq: i64,
    next: Option<Tid>,
    bytes: Vec<u8>,
}

impl Chunk {
    fn row(value_id: u64, seq: usize, next: Option<Tid>, bytes: &[u8]) -> Vec<Value> {
        let (block, offset) = next.map_or((-1, 0), |t| (i64::from(t.block), i64::from(t.offset)));
        vec![
            Value::Int(value_id.cast_signed()),
            Value::Int(i64::try_from(seq).unwrap_or(i64::MAX)),
            Value::Int(block),
            Value::Int(offset),
            Value::Bytea(bytes.to_vec()),
        ]
    }

    fn read(t: &HeapTuple) -> Option<Chunk> {
        let values = t.bytes.get(HEADER_BYTES..)?;
        let mut row = decode_row(values, usize::from(t.header.natts)).ok()?;
        if row.len() != 5 {
            return None;
        }
        let Value::Bytea(bytes) = row.pop()? else {
            return None;
        };
        let ints: Vec<i64> = row.iter().map(Value::as_int).collect::<Option<_>>()?;
        let next = match (ints[2], ints[3]) {
            (-1, _) => None,
            (b, o) => Some(Tid::new(u32::try_from(b).ok()?, u16::try_from(o).ok()?)),
        };
        Some(Chunk {
            value_id: ints[0].cast_unsigned(),
            seq: ints[1],
            next,
            bytes,
        })
    }
}

/// Why a row did not read: its own bytes, or a toasted value's.
enum ReadError {
    Decode(DecodeError),
    Toast(Error),
}

impl From<DecodeError> for ReadError {
    fn from(e: DecodeError) -> Self {
        ReadError::Decode(e)
    }
}

#[cfg(test)]
mod tests;
