//! Values in PostgreSQL's binary formats (its types' send and receive functions):
//! big-endian integers and floats, timestamps in microseconds and dates in days since
//! 2000-01-01, numerics as base-10000 digits, arrays as `array_send` writes them. Bind
//! parameters, binary result columns and COPY's binary format all use these.
//!
//! Rules: [`recv`] trusts nothing — every length is checked against the bytes there are
//! before anything is allocated, and a bad value is 22P03 `incorrect binary data format`.

use quire_engine::{SqlState, Value};

use super::array;
use super::{format_text, parse_text, SqlType, PG_EPOCH_OFFSET_US};
use crate::error::{Result, SqlError};

const US_PER_DAY: i64 = 86_400_000_000;

/// PostgreSQL's most bytes in one value (`MaxAllocSize`).
const MAX_FIELD_BYTES: usize = 0x3fff_ffff;

/// jsonb's binary format version (`jsonb_send`'s first byte).
const JSONB_VERSION: u8 = 1;

/// A value's binary form (`typsend`); `None` for NULL.
pub fn send(v: &Value, ty: SqlType) -> Result<Option<Vec<u8>>> {
    Ok(Some(match (v, ty) {
        (Value::Null, _) => return Ok(None),
        (Value::Int(i), SqlType::Int2) => (*i as i16).to_be_bytes().to_vec(),
        (Value::Int(i), SqlType::Int4) => (*i as i32).to_be_bytes().to_vec(),
        (Value::Int(i), t) if t.is_oid() => (*i as u32).to_be_bytes().to_vec(),
        // Days since 1970 on disk, since 2000 on the wire.
        (Value::Int(d), SqlType::Date) => ((*d - PG_EPOCH_OFFSET_US / US_PER_DAY) as i32)
            .to_be_bytes()
            .to_vec(),
        (Value::Int(i), _) => i.to_be_bytes().to_vec(),
        (Value::Bool(b), _) => vec![u8::from(*b)],
        (Value::Float(f), SqlType::Float4) => (*f as f32).to_be_bytes().to_vec(),
        (Value::Float(f), _) => f.to_be_bytes().to_vec(),
        (Value::Text(s), SqlType::Array(&elem) | SqlType::Vector(&elem)) => send_array(s, elem)?,
        // jsonb_send: a version byte, then the text.
        (Value::Text(s), SqlType::Jsonb) => [&[JSONB_VERSION][..], s.as_bytes()].concat(),
        (Value::Text(s), _) => s.as_bytes().to_vec(),
        (Value::Bytea(b), _) => b.clone(),
        // The infinities are the same extremes on the wire.
        (Value::Timestamp(us @ (i64::MAX | i64::MIN)), _) => us.to_be_bytes().to_vec(),
        (Value::Timestamp(us), _) => us.saturating_sub(PG_EPOCH_OFFSET_US).to_be_bytes().to_vec(),
        (Value::Numeric(n), _) => crate::numeric::to_binary(n),
        // PostgreSQL's order: microseconds, days, months.
        (Value::Interval(i), _) => [
            &i.micros.to_be_bytes()[..],
            &i.days.to_be_bytes(),
            &i.months.to_be_bytes(),
        ]
        .concat(),
    }))
}

/// An array in PostgreSQL's binary form (`array_send`): the number of dimensions, whether
/// any element is NULL, the element type's oid, each dimension's length and lower bound,
/// then each element as its length (-1 for NULL) and its binary form.
fn send_array(text: &str, elem: SqlType) -> Result<Vec<u8>> {
    let a = array::parse(text)?;
    let mut out = Vec::with_capacity(20 + 8 * a.elems.len());
    let ndim = i32::try_from(a.dims.len()).map_err(|_| SqlError::internal("array too large"))?;
    out.extend_from_slice(&ndim.to_be_bytes());
    out.extend_from_slice(&i32::from(a.elems.iter().any(Option::is_none)).to_be_bytes());
    out.extend_from_slice(&elem.oid().to_be_bytes());
    for d in &a.dims {
        let len = i32::try_from(d.len).map_err(|_| SqlError::internal("array too large"))?;
        let lower = i32::try_from(d.lower).map_err(|_| SqlError::internal("array too large"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&lower.to_be_bytes());
    }
    for e in &a.elems {
        let v = match e {
            None => Value::Null,
            Some(t) => parse_text(elem, t)?,
        };
        match send(&v, elem)? {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                let len =
                    i32::try_from(b.len()).map_err(|_| SqlError::internal("array too large"))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&b);
            }
        }
        if out.len() > MAX_FIELD_BYTES {
            return Err(SqlError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                "the row is too large for the protocol",
            ));
        }
    }
    Ok(out)
}

/// An array parameter in binary form (`array_recv`), as its canonical text.
fn recv_array(bytes: &[u8], elem: SqlType) -> Result<Value> {
    let bad = |why: &str| SqlError::new(SqlState::INVALID_BINARY_REPRESENTATION, why.to_string());
    let mut rest = bytes;
    let int = |rest: &mut &[u8]| -> Result<i32> {
        let (head, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| bad("insufficient data left in message"))?;
        *rest = tail;
        Ok(i32::from_be_bytes(*head))
    };
    let ndim = usize::try_from(int(&mut rest)?).map_err(|_| bad("invalid number of dimensions"))?;
    if ndim > array::MAX_DIMS {
        return Err(bad("invalid number of dimensions"));
    }
    let _has_nulls = int(&mut rest)?;
    let elem_oid = int(&mut rest)?.cast_unsigned();
    if elem_oid != elem.oid() {
        return Err(SqlError::new(
            SqlState::DATATYPE_MISMATCH,
            format!(
                "binary data has array element type {elem_oid} instead of expected {}",
                elem.oid()
            ),
        ));
    }
    let mut dims = Vec::with_capacity(ndim);
    let mut count: usize = 1;
    for _ in 0..ndim {
        let len = usize::try_from(int(&mut rest)?).map_err(|_| bad("invalid array length"))?;
        let lower = i64::from(int(&mut rest)?);
        count = count.saturating_mul(len);
        dims.push(array::Dim { len, lower });
    }
    if ndim == 0 {
        count = 0;
    }
    // Each element takes at least its 4-byte length: a count beyond that is a lie. And
    // each takes far more once held than its 4 bytes: charged before the vector exists.
    if count > rest.len() / 4 {
        return Err(bad("insufficient data left in message"));
    }
    array::check_parsed_size(count.saturating_mul(array::ELEMENT_OVERHEAD_BYTES) + rest.len())?;
    let mut elems = Vec::with_capacity(count);
    for _ in 0..count {
        let len = int(&mut rest)?;
        if len < 0 {
            elems.push(None);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| bad("invalid length"))?;
        if len > rest.len() {
            return Err(bad("insufficient data left in message"));
        }
        let (field, tail) = rest.split_at(len);
        rest = tail;
        let v = recv(field, elem)?;
        elems.push(format_text(&v, elem));
    }
    if !rest.is_empty() {
        return Err(bad("incorrect binary data format"));
    }
    array::write(&array::Parsed { dims, elems }).map(Value::Text)
}

/// A value of type `ty` from its binary form (`typreceive`).
pub fn recv(bytes: &[u8], ty: SqlType) -> Result<Value> {
    let bad = || {
        SqlError::new(
            SqlState::INVALID_BINARY_REPRESENTATION,
            "incorrect binary data format",
        )
    };
    let fixed = |len: usize| -> Result<&[u8]> {
        if bytes.len() == len {
            Ok(bytes)
        } else {
            Err(bad())
        }
    };
    Ok(match ty {
        SqlType::Int2 => {
            Value::Int(i16::from_be_bytes(fixed(2)?.try_into().map_err(|_| bad())?).into())
        }
        SqlType::Int4 => {
            Value::Int(i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad())?).into())
        }
        SqlType::Int8 => Value::Int(i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad())?)),
        SqlType::Bool => Value::Bool(fixed(1)?[0] != 0),
        SqlType::Float4 => {
            Value::Float(f32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad())?).into())
        }
        SqlType::Float8 => {
            Value::Float(f64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad())?))
        }
        SqlType::Text
        | SqlType::Varchar(_)
        | SqlType::Bpchar(_)
        | SqlType::Name
        | SqlType::Char
        | SqlType::Json
        | SqlType::Unknown => {
            let s = std::str::from_utf8(bytes).map_err(|_| bad())?;
            super::parse_text(ty, s)?
        }
        SqlType::Jsonb => match bytes.split_first() {
            Some((&JSONB_VERSION, text)) => {
                let s = std::str::from_utf8(text).map_err(|_| bad())?;
                crate::json::jsonb_in(s)?
            }
            _ => {
                return Err(SqlError::new(
                    SqlState::INVALID_BINARY_REPRESENTATION,
                    "unsupported jsonb version number",
                ))
            }
        },
        SqlType::Oid
        | SqlType::Regclass
        | SqlType::Regtype
        | SqlType::Regnamespace
        | SqlType::Regproc => {
            Value::Int(u32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad())?).into())
        }
        SqlType::Date => {
            let d = i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| bad())?);
            Value::Int(i64::from(d) + PG_EPOCH_OFFSET_US / US_PER_DAY)
        }
        SqlType::Uuid => Value::Bytea(fixed(16)?.to_vec()),
        SqlType::Void => Value::Text(String::new()),
        SqlType::PgLsn => {
            let lsn = u64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad())?);
            Value::Int(i64::try_from(lsn).map_err(|_| bad())?)
        }
        SqlType::Array(&elem) | SqlType::Vector(&elem) => recv_array(bytes, elem)?,
        SqlType::Bytea => Value::Bytea(bytes.to_vec()),
        SqlType::Numeric(typmod) => {
            super::check_numeric(crate::numeric::from_binary(bytes)?, typmod)?
        }
        SqlType::Timestamp | SqlType::Timestamptz => {
            let pg = i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad())?);
            Value::Timestamp(match pg {
                i64::MAX | i64::MIN => pg,
                _ => pg.checked_add(PG_EPOCH_OFFSET_US).ok_or_else(bad)?,
            })
        }
        SqlType::Interval => {
            let b = fixed(16)?;
            let (micros, rest) = b.split_at(8);
            let (days, months) = rest.split_at(4);
            Value::Interval(quire_engine::Interval {
                micros: i64::from_be_bytes(micros.try_into().map_err(|_| bad())?),
                days: i32::from_be_bytes(days.try_into().map_err(|_| bad())?),
                months: i32::from_be_bytes(months.try_into().map_err(|_| bad())?),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array_header(elem: SqlType, len: i32) -> Vec<u8> {
        let mut b = Vec::new();
        for x in [1, 1, elem.oid().cast_signed(), len, 1] {
            b.extend_from_slice(&x.to_be_bytes());
        }
        b
    }

    #[test]
    fn arrays_round_trip_and_lying_or_huge_ones_are_refused() {
        let ty = SqlType::Array(&SqlType::Int4);
        let v = Value::Text("{1,NULL,-3}".into());
        let bytes = send(&v, ty).unwrap().unwrap();
        assert_eq!(recv(&bytes, ty).unwrap(), v);
        // A count the bytes cannot hold.
        let lie = array_header(SqlType::Int4, 1_000_000);
        assert_eq!(recv(&lie, ty).unwrap_err().sqlstate(), "22P03");
        // Enough NULLs (4 bytes each) to take gigabytes once held: refused first.
        let n = 17_000_000;
        let mut huge = array_header(SqlType::Int4, n);
        huge.extend(std::iter::repeat_n((-1i32).to_be_bytes(), n as usize).flatten());
        assert_eq!(recv(&huge, ty).unwrap_err().sqlstate(), "54000");
    }
}
