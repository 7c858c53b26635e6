//! Values on the wire: result columns in text or binary format, and parameter values from
//! Bind in either format, for the SQL layer's types. Binary formats are PostgreSQL's send
//! and receive functions (big-endian integers and floats, timestamps in microseconds since
//! 2000-01-01).

use quire_engine::{SqlState, Value};
use quire_sql::{array, format_text, parse_text, OutColumn, SqlError, SqlType, PG_EPOCH_OFFSET_US};

use crate::protocol::backend;

const US_PER_DAY: i64 = 86_400_000_000;

/// PostgreSQL's most bytes in one value (`MaxAllocSize`): a field longer than this cannot be
/// sent, and no value may be built that long.
const MAX_FIELD_BYTES: usize = 0x3fff_ffff;

/// Appends one result row as a DataRow to `out`; `binary(i)` says column `i`'s format.
/// Fails (54000) for a row the protocol cannot carry: more than 32767 columns or a field
/// over 1 GB.
pub(crate) fn encode_row(
    out: &mut Vec<u8>,
    row: &[Value],
    columns: &[OutColumn],
    binary: impl Fn(usize) -> bool,
) -> Result<(), SqlError> {
    let too_large = || {
        SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            "the row is too large for the protocol",
        )
    };
    let count = i16::try_from(row.len()).map_err(|_| too_large())?;
    let start = out.len();
    let at = backend::data_row_begin(out, count);
    for (i, (v, c)) in row.iter().zip(columns).enumerate() {
        let bytes = if binary(i) {
            encode_binary(v, c.ty)?
        } else {
            format_text(v, c.ty).map(String::into_bytes)
        };
        if bytes.as_ref().is_some_and(|b| b.len() > MAX_FIELD_BYTES) {
            out.truncate(start);
            return Err(too_large());
        }
        backend::data_row_field(out, bytes.as_deref());
    }
    backend::data_row_end(out, at);
    Ok(())
}

/// `pg_type.typlen` of a type: its fixed width, or -1 for a variable-length one.
pub(crate) fn type_size(ty: SqlType) -> i16 {
    match ty {
        SqlType::Bool | SqlType::Char => 1,
        SqlType::Int2 => 2,
        SqlType::Int4
        | SqlType::Float4
        | SqlType::Date
        | SqlType::Oid
        | SqlType::Regclass
        | SqlType::Regtype
        | SqlType::Regnamespace
        | SqlType::Void => 4,
        SqlType::Int8
        | SqlType::Float8
        | SqlType::Timestamp
        | SqlType::Timestamptz
        | SqlType::PgLsn => 8,
        SqlType::Uuid | SqlType::Interval => 16,
        SqlType::Name => 64,
        SqlType::Unknown => -2,
        _ => -1,
    }
}

/// `atttypmod` of a type: `varchar(n)` and `char(n)` are n + 4, `numeric(p, s)` is
/// ((p << 16) | s) + 4, as PostgreSQL stores them; -1 otherwise.
pub(crate) fn type_modifier(ty: SqlType) -> i32 {
    match ty {
        SqlType::Varchar(Some(n)) | SqlType::Bpchar(Some(n)) => {
            i32::try_from(n).map_or(-1, |n| n.saturating_add(4))
        }
        SqlType::Numeric(Some((p, s))) => ((i32::from(p) << 16) | i32::from(s)) + 4,
        _ => -1,
    }
}

/// A value's binary form (`typsend`); `None` for NULL.
fn encode_binary(v: &Value, ty: SqlType) -> Result<Option<Vec<u8>>, SqlError> {
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
        (Value::Text(s), SqlType::Array(&elem)) => encode_array(s, elem)?,
        (Value::Text(s), _) => s.as_bytes().to_vec(),
        (Value::Bytea(b), _) => b.clone(),
        (Value::Timestamp(us), _) => us.saturating_sub(PG_EPOCH_OFFSET_US).to_be_bytes().to_vec(),
        (Value::Numeric(n), _) => quire_sql::numeric_to_binary(n),
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
fn encode_array(text: &str, elem: SqlType) -> Result<Vec<u8>, SqlError> {
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
        match encode_binary(&v, elem)? {
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
fn decode_array(bytes: &[u8], elem: SqlType, n: usize) -> Result<Value, SqlError> {
    let bad = |why: &str| {
        SqlError::new(
            SqlState::INVALID_BINARY_REPRESENTATION,
            format!("{why} in bind parameter {n}"),
        )
    };
    let mut rest = bytes;
    let int = |rest: &mut &[u8]| -> Result<i32, SqlError> {
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
    // Each element takes at least its 4-byte length: a count beyond that is a lie.
    if count > rest.len() / 4 {
        return Err(bad("insufficient data left in message"));
    }
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
        let v = decode_param(Some(field), true, elem, n)?;
        elems.push(format_text(&v, elem));
    }
    if !rest.is_empty() {
        return Err(bad("incorrect binary data format"));
    }
    array::write(&array::Parsed { dims, elems }).map(Value::Text)
}

/// A parameter's value from its Bind bytes.
pub(crate) fn decode_param(
    bytes: Option<&[u8]>,
    binary: bool,
    ty: SqlType,
    n: usize,
) -> Result<Value, SqlError> {
    let Some(bytes) = bytes else {
        return Ok(Value::Null);
    };
    if !binary {
        let text = std::str::from_utf8(bytes).map_err(|_| {
            SqlError::new(
                SqlState::CHARACTER_NOT_IN_REPERTOIRE,
                format!("invalid byte sequence for encoding \"UTF8\" in parameter ${n}"),
            )
        })?;
        return parse_text(ty, text);
    }
    let bad = || {
        SqlError::new(
            SqlState::INVALID_BINARY_REPRESENTATION,
            format!("incorrect binary data format in bind parameter {n}"),
        )
    };
    let fixed = |len: usize| -> Result<&[u8], SqlError> {
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
            parse_text(ty, s)?
        }
        SqlType::Oid | SqlType::Regclass | SqlType::Regtype | SqlType::Regnamespace => {
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
        SqlType::Array(&elem) => decode_array(bytes, elem, n)?,
        SqlType::Bytea => Value::Bytea(bytes.to_vec()),
        SqlType::Numeric(typmod) => {
            quire_sql::check_numeric(quire_sql::numeric_from_binary(bytes)?, typmod)?
        }
        SqlType::Timestamp | SqlType::Timestamptz => {
            let pg = i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| bad())?);
            Value::Timestamp(pg.checked_add(PG_EPOCH_OFFSET_US).ok_or_else(bad)?)
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
