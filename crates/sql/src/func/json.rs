//! `json_build_object`, which builds an object in PostgreSQL's own spacing
//! (`{"a" : 1, "b" : true}`); drivers' catalog queries (SQLAlchemy's reflection) call it.

use quire_engine::{SqlState, Value};

use crate::error::{Result, SqlError};
use crate::json::push_string;
use crate::types::{self, SqlType};

/// Most arguments a call takes (PostgreSQL's `FUNC_MAX_ARGS`); one bit each says which are
/// `json`.
pub(super) const MAX_ARGS: usize = 100;

/// Whether `json_build_object` takes an argument of type `t`: the types whose JSON form
/// follows from the value alone (PostgreSQL's `datum_to_json`: numbers bare, booleans,
/// json as it is, text-like values quoted). Dates, timestamps, arrays, bytea and float4
/// (printed with its own precision) would need more: 0A000 until they are there.
pub(super) fn takes(t: SqlType) -> bool {
    t.is_int()
        || t.is_text()
        || matches!(
            t,
            SqlType::Oid
                | SqlType::Float8
                | SqlType::Numeric(_)
                | SqlType::Bool
                | SqlType::Json
                | SqlType::Unknown
        )
}

/// 0A000 for an argument type [`takes`] refuses.
pub(super) fn refuse(t: SqlType) -> SqlError {
    SqlError::unsupported(format!("json_build_object of a {} value", t.name()))
}

/// One value in its JSON form; `json` when the argument is of type json (its text as it
/// is).
fn push_value(out: &mut String, v: &Value, json: bool) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => {
            let text = types::format_text(v, SqlType::Float8).unwrap_or_default();
            if f.is_finite() {
                out.push_str(&text);
            } else {
                push_string(out, &text);
            }
        }
        Value::Numeric(_) => {
            // numeric's NaN and infinities are not JSON numbers.
            let text = types::format_text(v, SqlType::Numeric(None)).unwrap_or_default();
            if text
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'-' || b == b'.')
            {
                out.push_str(&text);
            } else {
                push_string(out, &text);
            }
        }
        Value::Text(t) if json => out.push_str(t),
        Value::Text(t) => push_string(out, t),
        // [`takes`] lets no other kind of value through.
        other => push_string(out, &format!("{other:?}")),
    }
}

/// `json_build_object(key, value, ...)`: keys are written as text (22004 for a NULL one);
/// bit i of `json_args` is set when argument i is of type json.
pub(super) fn build_object(args: &[Value], json_args: u128) -> Result<Value> {
    if !args.len().is_multiple_of(2) {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "argument list must have even number of elements",
        )
        .with_hint(
            "The arguments of json_build_object() must consist of alternating keys and values.",
        ));
    }
    let mut out = String::from("{");
    for (i, pair) in args.chunks(2).enumerate() {
        if pair[0].is_null() {
            return Err(SqlError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                "null value not allowed for object key",
            ));
        }
        if i > 0 {
            out.push_str(", ");
        }
        let mut key = String::new();
        push_value(&mut key, &pair[0], false);
        // A key is always a string: a number or boolean key is quoted.
        if key.starts_with('"') {
            out.push_str(&key);
        } else {
            push_string(&mut out, &key);
        }
        out.push_str(" : ");
        push_value(&mut out, &pair[1], json_args & (1u128 << (2 * i + 1)) != 0);
        types::check_value_len(out.len())?;
    }
    out.push('}');
    Ok(Value::Text(out))
}
