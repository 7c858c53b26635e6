//! The engine's data types and their on-page encoding.
//!
//! A row is a list of [`Value`]s, one per column. On a page each value is a tag byte and a
//! payload (little-endian; lengths as LEB128), so a row can be decoded without its table's
//! definition — which makes a corrupt or foreign tuple detectable instead of misread:
//!
//! ```text
//! tag 0 NULL | 1 false | 2 true | 3 int: i64 | 4 float: f64 bits | 5 text: len, UTF-8 bytes
//! tag 6 bytea: len, bytes | 7 timestamp: i64 microseconds since 1970-01-01 00:00:00 UTC
//! tag 8 numeric: len, the numeric's own encoding (`numeric.rs`), which sorts by memcmp
//! tag 9 | 10 | 11 | 12 int in 1 | 2 | 3 | 4 bytes (two's complement, sign-extended)
//! tag 13 interval: i32 months, i32 days, i64 microseconds
//! tag 14 toasted: len, a value stored by TOAST (compressed, or out of line), read by
//!        `crate::toast`; only heap tuples of tables hold it, never index keys
//! ```
//!
//! An integer is written in the fewest bytes that hold it (tags 9-12, tag 3 only beyond
//! 32 bits), as PostgreSQL stores `int4` in four bytes, not eight: pgbench's accounts rows
//! and their index entries then take what PostgreSQL's take, so as many fit in the pool.
//!
//! ## Rules
//! - Decoding never panics: garbage gives a [`DecodeError`] that callers turn into an error
//!   naming the relation and tuple.
//! - [`Value::compare`] is a total order within a type (floats by IEEE total order, NULL after
//!   every value as in PostgreSQL's default `ASC NULLS LAST`), which index keys rely on.
//! - A toasted value ([`Stored::Toasted`]) is opaque here: [`decode_row`] refuses it, and
//!   [`decode_row_with`] hands its bytes to the caller (the TOAST layer), which knows how to
//!   fetch and decompress it.
//! - Compare values, never their bytes: an integer written before the narrow forms existed
//!   is in eight bytes, the same integer written now in fewer.

use std::cmp::Ordering;
use std::fmt;

use crate::bytes::Reader;

mod numeric;
pub use numeric::{
    compare_encoded as numeric_compare, Numeric, NumericError, Special as NumericSpecial,
    MAX_DIGITS as NUMERIC_MAX_DIGITS,
};

/// A column type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Bool,
    /// 64-bit signed integer (PostgreSQL's `bigint`; narrower integers map to it).
    Int,
    /// 64-bit IEEE float (`double precision`).
    Float,
    /// UTF-8 text.
    Text,
    /// Bytes.
    Bytea,
    /// Microseconds since 1970-01-01 00:00:00 UTC (`timestamp`).
    Timestamp,
    /// Exact decimal (`numeric`).
    Numeric,
    /// PostgreSQL's `interval`: months, days and microseconds.
    Interval,
}

/// An `interval` as PostgreSQL keeps it: three fields that are not normalized into each
/// other (a month's length depends on the month). Intervals compare by their span with a
/// month counted as 30 days and a day as 24 hours, as PostgreSQL's `interval_cmp` does, so
/// `1 month` and `30 days` are equal though not identical.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

impl Interval {
    /// The span in microseconds that comparison uses (never overflows an i128).
    pub fn span(self) -> i128 {
        const US_PER_DAY: i128 = 86_400_000_000;
        (i128::from(self.months) * 30 + i128::from(self.days)) * US_PER_DAY
            + i128::from(self.micros)
    }

    pub fn compare(self, other: Interval) -> Ordering {
        self.span().cmp(&other.span())
    }
}

impl Type {
    pub fn name(self) -> &'static str {
        match self {
            Type::Bool => "boolean",
            Type::Int => "bigint",
            Type::Float => "double precision",
            Type::Text => "text",
            Type::Bytea => "bytea",
            Type::Timestamp => "timestamp",
            Type::Numeric => "numeric",
            Type::Interval => "interval",
        }
    }

    pub fn to_u8(self) -> u8 {
        match self {
            Type::Bool => 1,
            Type::Int => 2,
            Type::Float => 3,
            Type::Text => 4,
            Type::Bytea => 5,
            Type::Timestamp => 6,
            Type::Numeric => 7,
            Type::Interval => 8,
        }
    }

    pub fn from_u8(b: u8) -> Option<Type> {
        Some(match b {
            1 => Type::Bool,
            2 => Type::Int,
            3 => Type::Float,
            4 => Type::Text,
            5 => Type::Bytea,
            6 => Type::Timestamp,
            7 => Type::Numeric,
            8 => Type::Interval,
            _ => return None,
        })
    }
}

/// A value of some [`Type`], or NULL.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Bytea(Vec<u8>),
    Timestamp(i64),
    Numeric(Numeric),
    Interval(Interval),
}

/// A row: one value per column.
pub type Row = Vec<Value>;

/// A value borrowed from its encoding, without allocation (the B-tree compares keys in this
/// form). `read_value` is the one decoder of the encoding.
#[derive(Clone, Copy, Debug)]
pub enum ValueRef<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(&'a str),
    Bytea(&'a [u8]),
    Timestamp(i64),
    /// A numeric's encoding, checked when it was read.
    Numeric(&'a [u8]),
    Interval(Interval),
}

impl ValueRef<'_> {
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Bool(b) => Value::Bool(b),
            ValueRef::Int(i) => Value::Int(i),
            ValueRef::Float(f) => Value::Float(f),
            ValueRef::Text(s) => Value::Text(s.to_string()),
            ValueRef::Bytea(b) => Value::Bytea(b.to_vec()),
            ValueRef::Timestamp(t) => Value::Timestamp(t),
            ValueRef::Numeric(b) => Value::Numeric(
                Numeric::decode(b).expect("read_value checked the encoding"),
            ),
            ValueRef::Interval(i) => Value::Interval(i),
        }
    }
}

/// Why bytes are not an encoded row.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("the row ends inside value {index}")]
    Truncated { index: usize },
    #[error("value {index} has unknown tag {tag}")]
    BadTag { index: usize, tag: u8 },
    #[error("value {index} is text that is not UTF-8")]
    BadUtf8 { index: usize },
    #[error("{extra} bytes follow the last value")]
    TrailingBytes { extra: usize },
    #[error("value {index} is not a valid numeric: {reason}")]
    BadNumeric { index: usize, reason: NumericError },
    #[error("value {index} is toasted, where no toasted value may be")]
    Toasted { index: usize },
}

const TAG_NULL: u8 = 0;
const TAG_FALSE: u8 = 1;
const TAG_TRUE: u8 = 2;
const TAG_INT: u8 = 3;
const TAG_FLOAT: u8 = 4;
const TAG_TEXT: u8 = 5;
const TAG_BYTEA: u8 = 6;
const TAG_TIMESTAMP: u8 = 7;
const TAG_NUMERIC: u8 = 8;
const TAG_INTERVAL: u8 = 13;
const TAG_TOAST: u8 = 14;
/// Integers in 1, 2, 3 and 4 bytes: `TAG_INT1 + width - 1`.
const TAG_INT1: u8 = 9;
const TAG_INT4: u8 = 12;

/// The fewest bytes that hold `v` in two's complement: 1, 2, 3, 4 or 8.
fn int_width(v: i64) -> usize {
    // Bits needed beyond the sign: a value fits in `w` bytes when they cover them and a sign bit.
    let magnitude_bits = 64 - (v ^ (v >> 63)).leading_zeros() as usize;
    match magnitude_bits {
        0..=7 => 1,
        8..=15 => 2,
        16..=23 => 3,
        24..=31 => 4,
        _ => 8,
    }
}

/// Reads an integer of `width` bytes (1 to 4), sign-extending it.
///
/// Each width is a read of a constant size: copying a run-time length compiles to a `memcpy`
/// call, on the path every B-tree probe takes.
fn read_int(r: &mut Reader<'_>, width: usize) -> Option<i64> {
    debug_assert!((1..=4).contains(&width), "short integers are 1 to 4 bytes");
    Some(match width {
        1 => i64::from(i8::from_le_bytes(r.array()?)),
        2 => i64::from(i16::from_le_bytes(r.array()?)),
        // The three bytes in the high end of an i32; the arithmetic shift extends the sign.
        3 => {
            let [a, b, c] = r.array()?;
            i64::from(i32::from_le_bytes([0, a, b, c]) >> 8)
        }
        _ => i64::from(i32::from_le_bytes(r.array()?)),
    })
}

impl Value {
    /// The value's type; `None` for NULL, which has every type.
    pub fn type_of(&self) -> Option<Type> {
        Some(match self {
            Value::Null => return None,
            Value::Bool(_) => Type::Bool,
            Value::Int(_) => Type::Int,
            Value::Float(_) => Type::Float,
            Value::Text(_) => Type::Text,
            Value::Bytea(_) => Type::Bytea,
            Value::Timestamp(_) => Type::Timestamp,
            Value::Numeric(_) => Type::Numeric,
            Value::Interval(_) => Type::Interval,
        })
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The text, if this is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// Total order for index keys: by type first (so mixed types never compare equal), then
    /// by value; NULL last.
    pub fn compare(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Greater,
            (_, Value::Null) => Ordering::Less,
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Int(a), Value::Int(b)) | (Value::Timestamp(a), Value::Timestamp(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::Text(a), Value::Text(b)) => a.cmp(b),
            (Value::Bytea(a), Value::Bytea(b)) => a.cmp(b),
            (Value::Numeric(a), Value::Numeric(b)) => a.cmp(b),
            (Value::Interval(a), Value::Interval(b)) => a.compare(*b),
            (a, b) => a.type_rank().cmp(&b.type_rank()),
        }
    }

    fn type_rank(&self) -> u8 {
        self.type_of().map_or(u8::MAX, Type::to_u8)
    }

    /// Appends the value's encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.push(TAG_NULL),
            Value::Bool(false) => out.push(TAG_FALSE),
            Value::Bool(true) => out.push(TAG_TRUE),
            Value::Int(v) => {
                let width = int_width(*v);
                out.push(if width == 8 {
                    TAG_INT
                } else {
                    TAG_INT1 + width as u8 - 1
                });
                out.extend_from_slice(&v.to_le_bytes()[..width]);
            }
            Value::Float(v) => {
                out.push(TAG_FLOAT);
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Value::Text(s) => {
                out.push(TAG_TEXT);
                put_len(out, s.len());
                out.extend_from_slice(s.as_bytes());
            }
            Value::Bytea(b) => {
                out.push(TAG_BYTEA);
                put_len(out, b.len());
                out.extend_from_slice(b);
            }
            Value::Timestamp(v) => {
                out.push(TAG_TIMESTAMP);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Value::Numeric(n) => {
                out.push(TAG_NUMERIC);
                put_len(out, n.as_bytes().len());
                out.extend_from_slice(n.as_bytes());
            }
            Value::Interval(i) => {
                out.push(TAG_INTERVAL);
                out.extend_from_slice(&i.months.to_le_bytes());
                out.extend_from_slice(&i.days.to_le_bytes());
                out.extend_from_slice(&i.micros.to_le_bytes());
            }
        }
    }

    /// The encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        match self {
            Value::Null | Value::Bool(_) => 1,
            Value::Int(v) => 1 + int_width(*v),
            Value::Float(_) | Value::Timestamp(_) => 9,
            Value::Text(s) => 1 + len_len(s.len()) + s.len(),
            Value::Bytea(b) => 1 + len_len(b.len()) + b.len(),
            Value::Numeric(n) => 1 + len_len(n.as_bytes().len()) + n.as_bytes().len(),
            Value::Interval(_) => 17,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "NULL"),
            Value::Bool(b) => write!(f, "{}", if *b { "t" } else { "f" }),
            Value::Int(v) | Value::Timestamp(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Text(s) => write!(f, "{s}"),
            Value::Numeric(n) => write!(f, "{n}"),
            Value::Interval(i) => write!(f, "{} mons {} days {} us", i.months, i.days, i.micros),
            Value::Bytea(b) => {
                write!(f, "\\x")?;
                b.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
            }
        }
    }
}

fn put_len(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7F) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn len_len(n: usize) -> usize {
    let bits = usize::BITS - n.leading_zeros();
    (bits.max(1)).div_ceil(7) as usize
}

/// Encodes a row (the values only; the tuple header holds their count).
pub fn encode_row(row: &[Value], out: &mut Vec<u8>) {
    for v in row {
        v.encode(out);
    }
}

/// The encoded size of a row.
pub fn encoded_row_len(row: &[Value]) -> usize {
    row.iter().map(Value::encoded_len).sum()
}

/// A column as a heap tuple stores it: a value as it is, or TOAST's stored form of one
/// (the bytes `crate::toast` wrote; tag 14).
#[derive(Clone, Debug, PartialEq)]
pub enum Stored<'a> {
    Plain(&'a Value),
    Toasted(Vec<u8>),
}

impl Stored<'_> {
    pub fn encoded_len(&self) -> usize {
        match self {
            Stored::Plain(v) => v.encoded_len(),
            Stored::Toasted(b) => 1 + len_len(b.len()) + b.len(),
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Stored::Plain(v) => v.encode(out),
            Stored::Toasted(b) => {
                out.push(TAG_TOAST);
                put_len(out, b.len());
                out.extend_from_slice(b);
            }
        }
    }
}

/// A row the heap can encode: plain values, or a row TOAST prepared.
pub trait EncodeRow {
    fn natts(&self) -> usize;
    fn encoded_len(&self) -> usize;
    fn encode_into(&self, out: &mut Vec<u8>);
}

impl EncodeRow for [Value] {
    fn natts(&self) -> usize {
        self.len()
    }
    fn encoded_len(&self) -> usize {
        encoded_row_len(self)
    }
    fn encode_into(&self, out: &mut Vec<u8>) {
        encode_row(self, out);
    }
}

impl EncodeRow for [Stored<'_>] {
    fn natts(&self) -> usize {
        self.len()
    }
    fn encoded_len(&self) -> usize {
        self.iter().map(Stored::encoded_len).sum()
    }
    fn encode_into(&self, out: &mut Vec<u8>) {
        for f in self {
            f.encode(out);
        }
    }
}

impl<T: EncodeRow + ?Sized> EncodeRow for &T {
    fn natts(&self) -> usize {
        (**self).natts()
    }
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }
    fn encode_into(&self, out: &mut Vec<u8>) {
        (**self).encode_into(out);
    }
}

/// A row held in a `Vec`, as the slice it derefs to.
impl EncodeRow for Vec<Value> {
    fn natts(&self) -> usize {
        self.as_slice().natts()
    }
    fn encoded_len(&self) -> usize {
        EncodeRow::encoded_len(self.as_slice())
    }
    fn encode_into(&self, out: &mut Vec<u8>) {
        self.as_slice().encode_into(out);
    }
}

/// Decodes `natts` values that must fill `bytes` exactly; a toasted value is an error.
pub fn decode_row(bytes: &[u8], natts: usize) -> Result<Row, DecodeError> {
    decode_row_with(bytes, natts, |index, _| {
        Err(DecodeError::Toasted { index })
    })
}

/// The toasted values of an encoded row, by column: `(index, the stored form's bytes)`.
pub fn toasted_fields(bytes: &[u8], natts: usize) -> Result<Vec<(usize, &[u8])>, DecodeError> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    for index in 0..natts {
        match read_field(&mut r, index)? {
            Field::Toasted(b) => out.push((index, b)),
            Field::Value(_) => {}
        }
    }
    Ok(out)
}

/// One encoded column: a value, or a toasted one's bytes.
enum Field<'a> {
    Value(ValueRef<'a>),
    Toasted(&'a [u8]),
}

fn read_field<'a>(r: &mut Reader<'a>, index: usize) -> Result<Field<'a>, DecodeError> {
    let mut ahead = r.clone();
    if ahead.u8() == Some(TAG_TOAST) {
        let short = || DecodeError::Truncated { index };
        let len = get_len(&mut ahead).ok_or_else(short)?;
        let body = ahead.take(len).ok_or_else(short)?;
        *r = ahead;
        return Ok(Field::Toasted(body));
    }
    read_value(r, index).map(Field::Value)
}

/// [`decode_row`], with each toasted value turned into a value by `toasted(index, bytes)`.
pub fn decode_row_with<E: From<DecodeError>>(
    bytes: &[u8],
    natts: usize,
    mut toasted: impl FnMut(usize, &[u8]) -> Result<Value, E>,
) -> Result<Row, E> {
    let mut r = Reader::new(bytes);
    // Bounded by the input: every value takes at least one byte.
    let mut row = Vec::with_capacity(natts.min(bytes.len()));
    for index in 0..natts {
        row.push(match read_field(&mut r, index)? {
            Field::Value(v) => v.to_value(),
            Field::Toasted(b) => toasted(index, b)?,
        });
    }
    if r.remaining() != 0 {
        return Err(DecodeError::TrailingBytes {
            extra: r.remaining(),
        }
        .into());
    }
    Ok(row)
}

/// Reads the next value if it is an integer, in any of its widths; otherwise (another type,
/// or bytes that end early) reads nothing and returns `None`, and [`read_value`] tells which.
/// The B-tree's commonest comparison, an integer key against an integer entry, takes this
/// instead of decoding a [`ValueRef`] of any type.
#[inline]
pub(crate) fn read_int_value(r: &mut Reader<'_>) -> Option<i64> {
    let mut ahead = r.clone();
    let v = match ahead.u8()? {
        TAG_INT => ahead.i64()?,
        tag @ TAG_INT1..=TAG_INT4 => read_int(&mut ahead, usize::from(tag - TAG_INT1) + 1)?,
        _ => return None,
    };
    *r = ahead;
    Some(v)
}

/// Reads the next encoded value, the `index`-th of its row (for the error).
pub(crate) fn read_value<'a>(
    r: &mut Reader<'a>,
    index: usize,
) -> Result<ValueRef<'a>, DecodeError> {
    let short = || DecodeError::Truncated { index };
    Ok(match r.u8().ok_or_else(short)? {
        TAG_NULL => ValueRef::Null,
        TAG_FALSE => ValueRef::Bool(false),
        TAG_TRUE => ValueRef::Bool(true),
        TAG_INT => ValueRef::Int(r.i64().ok_or_else(short)?),
        tag @ TAG_INT1..=TAG_INT4 => {
            ValueRef::Int(read_int(r, usize::from(tag - TAG_INT1) + 1).ok_or_else(short)?)
        }
        TAG_FLOAT => ValueRef::Float(f64::from_bits(r.u64().ok_or_else(short)?)),
        TAG_TIMESTAMP => ValueRef::Timestamp(r.i64().ok_or_else(short)?),
        TAG_INTERVAL => ValueRef::Interval(Interval {
            months: i32::from_le_bytes(r.array().ok_or_else(short)?),
            days: i32::from_le_bytes(r.array().ok_or_else(short)?),
            micros: r.i64().ok_or_else(short)?,
        }),
        TAG_TEXT => {
            let len = get_len(r).ok_or_else(short)?;
            let body = r.take(len).ok_or_else(short)?;
            ValueRef::Text(std::str::from_utf8(body).map_err(|_| DecodeError::BadUtf8 { index })?)
        }
        TAG_BYTEA => {
            let len = get_len(r).ok_or_else(short)?;
            ValueRef::Bytea(r.take(len).ok_or_else(short)?)
        }
        TAG_NUMERIC => {
            let len = get_len(r).ok_or_else(short)?;
            let body = r.take(len).ok_or_else(short)?;
            numeric::check_encoding(body)
                .map_err(|reason| DecodeError::BadNumeric { index, reason })?;
            ValueRef::Numeric(body)
        }
        tag => return Err(DecodeError::BadTag { index, tag }),
    })
}

/// Reads what [`put_len`] wrote.
fn get_len(r: &mut Reader<'_>) -> Option<usize> {
    let mut n = 0usize;
    // At most 5 bytes: lengths are below 2^32 (items are far smaller).
    for i in 0..5 {
        let byte = r.u8()?;
        n |= usize::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

/// Property-test generators for values, shared by the tests of every layer that stores them.
#[cfg(test)]
pub(crate) mod strategy {
    use super::Value;
    use proptest::prelude::*;

    /// Any value of any type; texts and byte strings up to `max_len` long.
    pub(crate) fn value(max_len: usize) -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::Int),
            any::<f64>().prop_map(Value::Float),
            proptest::string::string_regex(&format!(".{{0,{max_len}}}"))
                .expect("a valid regex")
                .prop_map(Value::Text),
            proptest::collection::vec(any::<u8>(), 0..=max_len).prop_map(Value::Bytea),
            any::<i64>().prop_map(Value::Timestamp),
            (any::<i32>(), any::<i32>(), any::<i64>()).prop_map(|(months, days, micros)| {
                Value::Interval(super::Interval { months, days, micros })
            }),
            (any::<i64>(), 0u16..20).prop_map(|(v, scale)| {
                let digits: Vec<u8> =
                    v.unsigned_abs().to_string().bytes().map(|c| c - b'0').collect();
                Value::Numeric(super::Numeric::from_digits(v < 0, &digits, scale).expect("fits"))
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        strategy::value(300)
    }

    proptest! {
        #[test]
        fn rows_round_trip(row in proptest::collection::vec(value(), 0..20)) {
            let mut b = Vec::new();
            encode_row(&row, &mut b);
            prop_assert_eq!(b.len(), encoded_row_len(&row));
            let back = decode_row(&b, row.len()).unwrap();
            // NaN != NaN: compare encodings.
            let mut again = Vec::new();
            encode_row(&back, &mut again);
            prop_assert_eq!(again, b);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), natts in 0usize..40) {
            let _ = decode_row(&bytes, natts);
        }
    }

    #[test]
    fn integers_take_the_fewest_bytes_and_come_back_at_every_width_edge() {
        let edges: [(i64, usize); 12] = [
            (0, 2),
            (-1, 2),
            (127, 2),
            (-128, 2),
            (128, 3),
            (-129, 3),
            (32_767, 3),
            (32_768, 4),
            (-8_388_608, 4),
            (8_388_608, 5),
            (i64::from(i32::MIN), 5),
            (i64::from(i32::MAX) + 1, 9),
        ];
        for (v, len) in edges.into_iter().chain([(i64::MIN, 9), (i64::MAX, 9)]) {
            let mut b = Vec::new();
            Value::Int(v).encode(&mut b);
            assert_eq!(b.len(), len, "{v}");
            assert_eq!(Value::Int(v).encoded_len(), len, "{v}");
            assert_eq!(decode_row(&b, 1).unwrap(), vec![Value::Int(v)], "{v}");
        }
        // The eight-byte form stays readable whatever the value (rows written before the
        // narrow forms existed).
        let mut old = vec![TAG_INT];
        old.extend_from_slice(&(-5i64).to_le_bytes());
        assert_eq!(decode_row(&old, 1).unwrap(), vec![Value::Int(-5)]);
    }

    #[test]
    fn truncated_rows_are_refused() {
        let row = vec![Value::Int(7), Value::Text("hello".into()), Value::Null];
        let mut b = Vec::new();
        encode_row(&row, &mut b);
        for cut in 0..b.len() {
            assert!(decode_row(&b[..cut], 3).is_err(), "cut at {cut}");
        }
        assert!(matches!(
            decode_row(&b, 2),
            Err(DecodeError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn compare_orders_nulls_last_and_floats_totally() {
        assert_eq!(Value::Null.compare(&Value::Int(1)), Ordering::Greater);
        assert_eq!(Value::Int(-1).compare(&Value::Int(1)), Ordering::Less);
        assert_eq!(
            Value::Float(f64::NAN).compare(&Value::Float(1.0)),
            Ordering::Greater
        );
        assert_eq!(
            Value::Text("a".into()).compare(&Value::Text("b".into())),
            Ordering::Less
        );
    }
}
