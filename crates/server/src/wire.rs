//! Values on the wire: result columns in text or binary format, and parameter values from
//! Bind in either format, for the SQL layer's types. The binary formats are the SQL layer's
//! (`quire_sql::binary`, PostgreSQL's send and receive functions).

use quire_engine::{SqlState, Value};
use quire_sql::{format_output, parse_text, OutColumn, SqlError, SqlType};

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
            format_output(v, c.ty).map(String::into_bytes)
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

/// `pg_type.typlen` of a type (RowDescription's type size).
pub(crate) fn type_size(ty: SqlType) -> i16 {
    ty.typlen()
}

/// `atttypmod` of a type (RowDescription's type modifier).
pub(crate) fn type_modifier(ty: SqlType) -> i32 {
    ty.typmod()
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
