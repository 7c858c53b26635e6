//! Values on the wire: result columns in text or binary format, and parameter values from
//! Bind in either format, for the SQL layer's types. The binary formats are the SQL layer's
//! (`quire_sql::binary`, PostgreSQL's send and receive functions).

use quire_engine::{SqlState, Value};
use quire_sql::{format_text, parse_text, OutColumn, SqlError, SqlType};

use crate::protocol::backend;

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
            quire_sql::binary::send(v, c.ty)?
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
    quire_sql::binary::recv(bytes, ty).map_err(|e| {
        if e.sqlstate() == SqlState::INVALID_BINARY_REPRESENTATION {
            SqlError::new(
                e.sqlstate(),
                format!("{} in bind parameter {n}", e.message()),
            )
        } else {
            e
        }
    })
}
