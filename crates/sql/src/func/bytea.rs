//! The binary-string functions (`bytea`'s own versions of the string functions, PostgreSQL's
//! `varlena.c`): `length`, `substr`/`substring`, `position`, `reverse`, `btrim`/`ltrim`/
//! `rtrim` (and SQL's TRIM), `overlay`, `get_byte`/`set_byte`, `get_bit`/`set_bit`,
//! `bit_count`.
//!
//! ## Rules
//! - A call whose string argument is `bytea` resolves here before the text functions: the
//!   bytes are worked on, never their text form (`\x...`).
//! - Positions count bytes from 1; bits count from the first byte's least significant bit,
//!   as PostgreSQL's `byteaGetBit`. An index outside the value is 2202E with PostgreSQL's
//!   message.

use quire_engine::{SqlState, Value};

use super::string::int;
use super::Func;
use crate::error::{Result, SqlError};
use crate::types::SqlType;

/// A binary-string function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ByteaFn {
    Length,
    Substr,
    Position,
    Reverse,
    Trim { leading: bool, trailing: bool },
    Overlay,
    GetByte,
    SetByte,
    GetBit,
    SetBit,
    BitCount,
}

type Resolved = (Func, Vec<Option<SqlType>>, SqlType);

/// The binary-string function `name` for arguments `args`, if the string argument is
/// `bytea`.
pub(super) fn resolve(name: &str, args: &[SqlType]) -> Option<Resolved> {
    use SqlType as T;
    let b = Some(T::Bytea);
    let int = Some(T::Int4);
    let f = |func: ByteaFn, casts: Vec<Option<SqlType>>, result: SqlType| {
        Some((Func::Bytea(func), casts, result))
    };
    // The string argument: the first (or either of position's two).
    let bytes = |t: &SqlType| *t == T::Bytea;
    let bytes_or_unknown = |t: &SqlType| *t == T::Bytea || *t == T::Unknown;
    match (name, args) {
        ("length", [a]) if bytes(a) => f(ByteaFn::Length, vec![b], T::Int4),
        ("substr" | "substring", [s, from] | [s, from, _]) if bytes(s) && from.is_int() => {
            let casts = [b, int, int];
            f(ByteaFn::Substr, casts[..args.len()].to_vec(), T::Bytea)
        }
        ("position", [h, n])
            if bytes(h) && bytes_or_unknown(n) || bytes(n) && bytes_or_unknown(h) =>
        {
            f(ByteaFn::Position, vec![b, b], T::Int4)
        }
        ("reverse", [a]) if bytes(a) => f(ByteaFn::Reverse, vec![b], T::Bytea),
        ("btrim" | "trim" | "ltrim" | "rtrim", [a, s]) if bytes(a) && bytes_or_unknown(s) => {
            let trim = ByteaFn::Trim {
                leading: name != "rtrim",
                trailing: name != "ltrim",
            };
            f(trim, vec![b, b], T::Bytea)
        }
        ("overlay", [s, with, _] | [s, with, _, _]) if bytes(s) && bytes_or_unknown(with) => {
            let casts = [b, b, int, int];
            f(ByteaFn::Overlay, casts[..args.len()].to_vec(), T::Bytea)
        }
        ("get_byte", [a, _]) if bytes(a) => f(ByteaFn::GetByte, vec![b, int], T::Int4),
        ("set_byte", [a, _, _]) if bytes(a) => f(ByteaFn::SetByte, vec![b, int, int], T::Bytea),
        ("get_bit", [a, _]) if bytes(a) => f(ByteaFn::GetBit, vec![b, Some(T::Int8)], T::Int4),
        ("set_bit", [a, _, _]) if bytes(a) => {
            f(ByteaFn::SetBit, vec![b, Some(T::Int8), int], T::Bytea)
        }
        ("bit_count", [a]) if bytes(a) => f(ByteaFn::BitCount, vec![b], T::Int8),
        _ => None,
    }
}

fn bytes(v: &Value) -> &[u8] {
    match v {
        Value::Bytea(b) => b,
        _ => &[],
    }
}

fn out_of_range(what: &str, n: i64, len: usize) -> SqlError {
    let last = i64::try_from(len).unwrap_or(i64::MAX) - 1;
    SqlError::new(
        SqlState::ARRAY_SUBSCRIPT_ERROR,
        format!("{what} {n} out of valid range, 0..{last}"),
    )
}

/// The byte (`bits` false) or bit index `n` of a value of `len` bytes, checked.
fn index(n: i64, len: usize, bits: bool) -> Result<usize> {
    let limit = if bits { len.saturating_mul(8) } else { len };
    usize::try_from(n)
        .ok()
        .filter(|&i| i < limit)
        .ok_or_else(|| out_of_range("index", n, limit))
}

impl ByteaFn {
    /// Evaluates the function over non-NULL arguments of the resolved types.
    pub(super) fn call(self, args: &[Value]) -> Result<Value> {
        let s = bytes(&args[0]);
        Ok(match self {
            ByteaFn::Length => Value::Int(i64::try_from(s.len()).unwrap_or(i64::MAX)),
            ByteaFn::Substr => {
                Value::Bytea(substr(s, int(&args[1]), args.get(2).map(int))?.to_vec())
            }
            ByteaFn::Position => {
                // position(haystack, needle): the binder puts POSITION(needle IN haystack)
                // in this order, as gram.y does.
                let (haystack, needle) = (s, bytes(&args[1]));
                let at = if needle.is_empty() {
                    Some(0)
                } else {
                    haystack.windows(needle.len()).position(|w| w == needle)
                };
                Value::Int(at.map_or(0, |i| i64::try_from(i).unwrap_or(i64::MAX) + 1))
            }
            ByteaFn::Reverse => Value::Bytea(s.iter().rev().copied().collect()),
            ByteaFn::Trim { leading, trailing } => {
                let set = bytes(&args[1]);
                let mut t = s;
                while leading && t.first().is_some_and(|b| set.contains(b)) {
                    t = &t[1..];
                }
                while trailing && t.last().is_some_and(|b| set.contains(b)) {
                    t = &t[..t.len() - 1];
                }
                Value::Bytea(t.to_vec())
            }
            ByteaFn::Overlay => {
                let r = bytes(&args[1]);
                let start = int(&args[2]);
                let count = args
                    .get(3)
                    .map_or(i64::try_from(r.len()).unwrap_or(i64::MAX), int);
                let resume = start.checked_add(count).ok_or_else(|| {
                    SqlError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
                })?;
                let head = substr(s, 1, Some(start - 1))?;
                let tail = substr(s, resume, None)?;
                crate::types::check_value_len(head.len() + r.len() + tail.len())?;
                Value::Bytea([head, r, tail].concat())
            }
            ByteaFn::GetByte => Value::Int(i64::from(s[index(int(&args[1]), s.len(), false)?])),
            ByteaFn::SetByte => {
                let i = index(int(&args[1]), s.len(), false)?;
                let mut out = s.to_vec();
                // The new value's low byte, as PostgreSQL's byteaSetByte.
                out[i] = int(&args[2]).to_le_bytes()[0];
                Value::Bytea(out)
            }
            ByteaFn::GetBit => {
                let i = index(int(&args[1]), s.len(), true)?;
                Value::Int(i64::from((s[i / 8] >> (i % 8)) & 1))
            }
            ByteaFn::SetBit => {
                let i = index(int(&args[1]), s.len(), true)?;
                let bit = int(&args[2]);
                if bit != 0 && bit != 1 {
                    return Err(SqlError::new(
                        SqlState::INVALID_PARAMETER_VALUE,
                        "new bit must be 0 or 1",
                    ));
                }
                let mut out = s.to_vec();
                out[i / 8] = (out[i / 8] & !(1 << (i % 8))) | (u8::from(bit == 1) << (i % 8));
                Value::Bytea(out)
            }
            ByteaFn::BitCount => Value::Int(s.iter().map(|b| i64::from(b.count_ones())).sum()),
        })
    }
}

/// `substr(bytes, start [, count])` (`bytea_substr`): the bytes from position `start`
/// (from 1), `count` of them; a start before the first byte shortens the count.
fn substr(s: &[u8], start: i64, count: Option<i64>) -> Result<&[u8]> {
    let (skip, take) = super::substring_span(start, count)?;
    let from = skip.min(s.len());
    Ok(&s[from..from.saturating_add(take).min(s.len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x: &[u8]) -> Value {
        Value::Bytea(x.to_vec())
    }

    #[test]
    fn bytes_not_their_text() {
        let call = |f: ByteaFn, a: &[Value]| f.call(a).unwrap();
        let s = b(b"1234567890");
        assert_eq!(
            call(ByteaFn::Substr, &[s.clone(), Value::Int(4), Value::Int(3)]),
            b(b"456")
        );
        assert_eq!(
            call(
                ByteaFn::Substr,
                &[s.clone(), Value::Int(-10), Value::Int(13)]
            ),
            b(b"12")
        );
        assert_eq!(
            call(ByteaFn::Position, &[s.clone(), b(b"56")]),
            Value::Int(5)
        );
        assert_eq!(
            call(ByteaFn::Position, &[s.clone(), b(b"x")]),
            Value::Int(0)
        );
        assert_eq!(
            call(ByteaFn::Reverse, &[b(&[0xab, 0xcd])]),
            b(&[0xcd, 0xab])
        );
        let trim = ByteaFn::Trim {
            leading: true,
            trailing: false,
        };
        assert_eq!(call(trim, &[b(b"\0Tom\0"), b(b"\0")]), b(b"Tom\0"));
        assert_eq!(
            call(ByteaFn::GetBit, &[b(&[0b10]), Value::Int(1)]),
            Value::Int(1)
        );
        assert_eq!(
            call(ByteaFn::SetBit, &[b(&[0, 0]), Value::Int(9), Value::Int(1)]),
            b(&[0, 2])
        );
        assert!(ByteaFn::GetByte.call(&[b(b"ab"), Value::Int(2)]).is_err());
        assert_eq!(call(ByteaFn::BitCount, &[b(&[0xff, 0x01])]), Value::Int(9));
    }
}
