//! The json and jsonb functions and operators (PostgreSQL's `json.c`, `jsonb.c` and
//! `jsonfuncs.c`): conversion of SQL values (`to_json`, and every builder's values), the
//! access operators (`->`, `->>`, `#>`, `#>>` and the `extract_path` functions), jsonb's
//! containment, existence, concatenation, deletion and path updates, and the builders.
//!
//! ## Rules
//! - A builder's values reach it already converted: the binder wraps each one in
//!   [`JsonFn::ToJson`] of its type, so no call needs its arguments' types.
//! - json results are pieces of the argument's text as written; jsonb results are canonical
//!   texts written from a tree ([`crate::json`]).

use quire_engine::{SqlState, Value};

use super::Func;
use crate::datetime::encode::{xsd, XsdKind};
use crate::error::{Result, SqlError};
use crate::json::{self, push_string, Jsonb, Members, PathStep, SetMode};
use crate::types::{self, array, SqlType};

/// A json or jsonb function or operator; `json` says the document is of type json (else
/// jsonb).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JsonFn {
    /// `to_json(x)` / `to_jsonb(x)` of a value of type `from`.
    ToJson {
        from: SqlType,
        jsonb: bool,
    },
    /// `->` (and `->>` when `text`) with a key, or an integer index when `index`.
    Get {
        json: bool,
        index: bool,
        text: bool,
    },
    /// `#>` / `#>>` with a `text[]` path, or the `extract_path` functions (the path as the
    /// arguments after the first, when `variadic`); json and jsonb alike.
    Path {
        text: bool,
        variadic: bool,
    },
    /// `json(b)_typeof` and `json(b)_array_length`, which read either type's text.
    Typeof,
    ArrayLength,
    /// `a @> b`.
    Contains,
    /// `?`, `?|` (any), `?&` (all).
    Exists,
    ExistsAny,
    ExistsAll,
    /// `||`.
    Concat,
    /// `- text`, `- text[]`, `- integer`, `#- text[]`.
    DeleteKey,
    DeleteKeys,
    DeleteIndex,
    DeletePath,
    /// `jsonb_set(target, path, new [, create_missing])`.
    Set,
    /// `jsonb_insert(target, path, new [, insert_after])`.
    Insert,
    StripNulls,
    /// `json_strip_nulls`: the document rebuilt without blanks, keys as written.
    JsonStripNulls,
    /// `json_object(text[])`, `json_object(keys text[], values text[])` and jsonb's.
    Object {
        jsonb: bool,
    },
    Pretty,
    /// `json(b)_build_object` and `json(b)_build_array` (values converted by the binder).
    BuildObject {
        jsonb: bool,
    },
    BuildArray {
        jsonb: bool,
    },
}

type Signature = (Func, Vec<Option<SqlType>>, SqlType);

/// The json function `name` for arguments of types `args`, if it is one.
pub(crate) fn resolve(name: &str, args: &[SqlType]) -> Option<Result<Signature>> {
    use SqlType as T;
    let n = args.len();
    let doc = |jsonb: bool| if jsonb { T::Jsonb } else { T::Json };
    let jb = name.starts_with("jsonb") || name == "to_jsonb";
    let d = doc(jb);
    let sig =
        |f: JsonFn, casts: Vec<Option<SqlType>>, ret: SqlType| Ok((Func::Json(f), casts, ret));
    let variadic_text = |f: JsonFn, ret: SqlType| {
        let mut casts = vec![Some(d)];
        casts.extend((1..n).map(|_| Some(T::Text)));
        sig(f, casts, ret)
    };
    Some(match (name, n) {
        ("to_json" | "to_jsonb", 1) => {
            let from = if args[0] == T::Unknown {
                T::Text
            } else {
                args[0]
            };
            sig(JsonFn::ToJson { from, jsonb: jb }, vec![Some(from)], d)
        }
        ("json_typeof" | "jsonb_typeof", 1) => sig(JsonFn::Typeof, vec![Some(d)], T::Text),
        ("json_array_length" | "jsonb_array_length", 1) => {
            sig(JsonFn::ArrayLength, vec![Some(d)], T::Int4)
        }
        ("json_extract_path" | "jsonb_extract_path", 1..) => variadic_text(
            JsonFn::Path {
                text: false,
                variadic: true,
            },
            d,
        ),
        ("json_extract_path_text" | "jsonb_extract_path_text", 1..) => variadic_text(
            JsonFn::Path {
                text: true,
                variadic: true,
            },
            T::Text,
        ),
        ("jsonb_set" | "jsonb_insert", 3 | 4) => {
            let f = if name == "jsonb_set" {
                JsonFn::Set
            } else {
                JsonFn::Insert
            };
            let mut casts = vec![Some(T::Jsonb), Some(T::TEXT_ARRAY), Some(T::Jsonb)];
            if n == 4 {
                casts.push(Some(T::Bool));
            }
            sig(f, casts, T::Jsonb)
        }
        ("jsonb_strip_nulls", 1) => sig(JsonFn::StripNulls, vec![Some(T::Jsonb)], T::Jsonb),
        ("json_strip_nulls", 1) => sig(JsonFn::JsonStripNulls, vec![Some(T::Json)], T::Json),
        ("array_to_json", 1) if args[0].element().is_some() => sig(
            JsonFn::ToJson {
                from: args[0],
                jsonb: false,
            },
            vec![None],
            T::Json,
        ),
        ("json_object" | "jsonb_object", 1 | 2) => sig(
            JsonFn::Object { jsonb: jb },
            vec![Some(T::TEXT_ARRAY); n],
            d,
        ),
        ("jsonb_pretty", 1) => sig(JsonFn::Pretty, vec![Some(T::Jsonb)], T::Text),
        ("json_build_object" | "jsonb_build_object", _) => {
            sig(JsonFn::BuildObject { jsonb: jb }, untyped_as_text(args), d)
        }
        ("json_build_array" | "jsonb_build_array", _) => {
            sig(JsonFn::BuildArray { jsonb: jb }, untyped_as_text(args), d)
        }
        _ => return None,
    })
}

/// An untyped literal among variadic "any" arguments is text.
fn untyped_as_text(args: &[SqlType]) -> Vec<Option<SqlType>> {
    args.iter()
        .map(|&t| (t == SqlType::Unknown).then_some(SqlType::Text))
        .collect()
}

impl JsonFn {
    /// Whether a NULL argument makes the result NULL without a call.
    pub(crate) fn strict(self) -> bool {
        !matches!(self, JsonFn::BuildObject { .. } | JsonFn::BuildArray { .. })
    }

    pub(crate) fn call(self, args: &[Value]) -> Result<Value> {
        match self {
            JsonFn::ToJson { from, jsonb } => to_json(&args[0], from, jsonb),
            // A piece of a canonical jsonb text is canonical: both types are read as text
            // here, the values skipped over, no tree built.
            JsonFn::Get { json, index, text } => {
                let doc = text_arg(&args[0])?;
                if !json && index && !matches!(json::json_type_name(doc), "array" | "object") {
                    // A top-level scalar is a one-element pseudo-array to `->`.
                    let found = json::array_index(1, int_arg(&args[1])?).map(|_| doc);
                    return json_piece(found, text);
                }
                json_get(args, index, text)
            }
            JsonFn::Path { text, variadic, .. } => {
                let path = path_arg(args, variadic)?;
                json_path(&args[0], &path, text)
            }
            JsonFn::Typeof => Ok(Value::Text(
                json::json_type_name(text_arg(&args[0])?).to_string(),
            )),
            JsonFn::ArrayLength => array_length(text_arg(&args[0])?),
            JsonFn::BuildObject { jsonb } => build_object(args, jsonb),
            JsonFn::BuildArray { jsonb } => build_array(args, jsonb),
            JsonFn::JsonStripNulls => {
                let tree = json::parse_json_tree(text_arg(&args[0])?)?;
                Ok(Value::Text(tree.strip_nulls()?.compact()))
            }
            JsonFn::Object { jsonb } => object_from_arrays(args, jsonb),
            _ => self.call_jsonb(args),
        }
    }

    /// The jsonb-only operations.
    fn call_jsonb(self, args: &[Value]) -> Result<Value> {
        let doc = json::jsonb_of(&args[0])?;
        let out = match self {
            JsonFn::Contains => return Ok(Value::Bool(doc.contains(&json::jsonb_of(&args[1])?)?)),
            JsonFn::Exists => return Ok(Value::Bool(doc.exists(text_arg(&args[1])?))),
            JsonFn::ExistsAny | JsonFn::ExistsAll => {
                let keys = text_array(&args[1])?;
                let mut keys = keys.iter().flatten();
                let hit = if self == JsonFn::ExistsAny {
                    keys.any(|k| doc.exists(k))
                } else {
                    keys.all(|k| doc.exists(k))
                };
                return Ok(Value::Bool(hit));
            }
            JsonFn::Pretty => return Ok(Value::Text(doc.pretty())),
            JsonFn::Concat => doc.concat(&json::jsonb_of(&args[1])?),
            JsonFn::DeleteKey => doc.delete_keys(&[text_arg(&args[1])?])?,
            JsonFn::DeleteKeys => {
                let keys = text_array(&args[1])?;
                let keys: Vec<&str> = keys.iter().flatten().map(String::as_str).collect();
                doc.delete_keys(&keys)?
            }
            JsonFn::DeleteIndex => doc.delete_index(int_arg(&args[1])?)?,
            JsonFn::DeletePath => doc.delete_path(&text_array(&args[1])?)?,
            JsonFn::Set | JsonFn::Insert => {
                let flag = matches!(args.get(3), Some(Value::Bool(true)));
                let mode = match self {
                    JsonFn::Set => SetMode::Set {
                        create: args.len() < 4 || flag,
                    },
                    _ => SetMode::Insert { after: flag },
                };
                let new = json::jsonb_of(&args[2])?;
                doc.set_path(&text_array(&args[1])?, new, mode)?
            }
            JsonFn::StripNulls => doc.strip_nulls()?,
            _ => return Err(types::internal("json function")),
        };
        jsonb_value(&out)
    }
}

/// A jsonb tree as a stored value (its canonical text, within the value size limit).
pub(crate) fn jsonb_value(v: &Jsonb) -> Result<Value> {
    let text = v.to_text();
    types::check_value_len(text.len())?;
    Ok(Value::Text(text))
}

fn text_arg(v: &Value) -> Result<&str> {
    v.as_text()
        .ok_or_else(|| types::internal("json text argument"))
}

fn int_arg(v: &Value) -> Result<i64> {
    v.as_int()
        .ok_or_else(|| types::internal("json integer argument"))
}

/// A `text[]` argument's elements (NULL ones as `None`).
fn text_array(v: &Value) -> Result<Vec<PathStep>> {
    let a = array::parse(text_arg(v)?)?;
    Ok(a.elems)
}

fn path_arg(args: &[Value], variadic: bool) -> Result<Vec<PathStep>> {
    if !variadic {
        return text_array(&args[1]);
    }
    Ok(args[1..]
        .iter()
        .map(|v| v.as_text().map(str::to_string))
        .collect())
}

/// `json -> key | index` (and `->>`): the member's text as written.
fn json_get(args: &[Value], index: bool, text: bool) -> Result<Value> {
    let doc = text_arg(&args[0])?;
    let piece = if index {
        json_element(doc, int_arg(&args[1])?)?
    } else {
        json_field(doc, text_arg(&args[1])?)?
    };
    json_piece(piece, text)
}

fn json_piece(piece: Option<&str>, text: bool) -> Result<Value> {
    match piece {
        None => Ok(Value::Null),
        Some(p) if text => json::json_piece_text(p),
        Some(p) => Ok(Value::Text(p.to_string())),
    }
}

/// The value of key `key` in the json object `doc` (the last one, if written twice).
fn json_field<'a>(doc: &'a str, key: &str) -> Result<Option<&'a str>> {
    Ok(match json::members(doc)? {
        Members::Object(m) => m
            .into_iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, r)| &doc[r]),
        _ => None,
    })
}

fn json_element(doc: &str, i: i64) -> Result<Option<&str>> {
    Ok(match json::members(doc)? {
        Members::Array(m) => json::array_index(m.len(), i).map(|k| &doc[m[k].clone()]),
        _ => None,
    })
}

fn json_path(doc: &Value, path: &[PathStep], text: bool) -> Result<Value> {
    let mut cur = text_arg(doc)?;
    for step in path {
        let Some(step) = step.as_deref() else {
            return Ok(Value::Null);
        };
        let next = match json::json_type_name(cur) {
            "object" => json_field(cur, step)?,
            "array" => match step.trim_start().parse::<i64>() {
                Ok(i) => json_element(cur, i)?,
                Err(_) => None,
            },
            _ => None,
        };
        let Some(next) = next else {
            return Ok(Value::Null);
        };
        cur = next;
    }
    json_piece(Some(cur), text)
}

/// The elements of a json or jsonb array (its text read, elements skipped over).
fn array_length(doc: &str) -> Result<Value> {
    let n = match json::json_type_name(doc) {
        "array" => match json::members(doc)? {
            Members::Array(m) => m.len(),
            _ => 0,
        },
        "object" => {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "cannot get array length of a non-array",
            ))
        }
        _ => {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "cannot get array length of a scalar",
            ))
        }
    };
    Ok(Value::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// `to_json` / `to_jsonb`: the value's JSON form (PostgreSQL's `datum_to_json`).
pub(crate) fn to_json(v: &Value, from: SqlType, jsonb: bool) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let mut out = String::new();
    push_json(&mut out, v, from)?;
    types::check_value_len(out.len())?;
    if jsonb {
        json::jsonb_in(&out)
    } else {
        Ok(Value::Text(out))
    }
}

/// Appends `v` (of type `ty`) in its JSON form: numbers bare (a NaN or infinity quoted),
/// booleans, json as written, arrays as JSON arrays, dates and times in ISO 8601, anything
/// else as its text, quoted.
fn push_json(out: &mut String, v: &Value, ty: SqlType) -> Result<()> {
    let text = || types::format_text(v, ty).unwrap_or_default();
    match (v, ty) {
        (Value::Null, _) => out.push_str("null"),
        (Value::Text(t), SqlType::Json | SqlType::Jsonb) => out.push_str(t),
        (Value::Text(t), SqlType::Array(&elem)) => push_array(out, t, elem)?,
        (Value::Bool(b), _) => out.push_str(if *b { "true" } else { "false" }),
        (Value::Int(_), t) if t.is_int() => out.push_str(&text()),
        (Value::Float(_) | Value::Numeric(_), _) => {
            let t = text();
            if t.bytes()
                .all(|b| b.is_ascii_digit() || b"-.e+".contains(&b))
            {
                out.push_str(&t);
            } else {
                push_string(out, &t);
            }
        }
        (Value::Int(days), SqlType::Date) => push_string(out, &xsd(*days, XsdKind::Date)),
        (Value::Timestamp(us), SqlType::Timestamp) => {
            push_string(out, &xsd(*us, XsdKind::Timestamp));
        }
        (Value::Timestamp(us), SqlType::Timestamptz) => {
            push_string(out, &xsd(*us, XsdKind::Timestamptz));
        }
        _ => push_string(out, &text()),
    }
    Ok(())
}

/// An array's JSON form (`array_to_json`): nested by dimension, commas without blanks.
fn push_array(out: &mut String, text: &str, elem: SqlType) -> Result<()> {
    let a = array::parse(text)?;
    let values = a.values(elem)?;
    if a.dims.is_empty() {
        out.push_str("[]");
        return Ok(());
    }
    let lens: Vec<usize> = a.dims.iter().map(|d| d.len).collect();
    let mut counters = vec![0usize; lens.len()];
    for (k, v) in values.iter().enumerate() {
        // Opening brackets for every dimension whose counter is at its start.
        let opening = counters.iter().rev().take_while(|c| **c == 0).count();
        if k > 0 {
            out.push(',');
        }
        out.extend(std::iter::repeat_n('[', opening.min(lens.len())));
        push_json(out, v, elem)?;
        let mut d = lens.len();
        while d > 0 {
            d -= 1;
            counters[d] += 1;
            if counters[d] < lens[d] {
                break;
            }
            counters[d] = 0;
            out.push(']');
        }
        types::check_value_len(out.len())?;
    }
    Ok(())
}

/// `json(b)_build_object(key, value, ...)`: keys already text (a NULL one refused),
/// values already in JSON form.
fn build_object(args: &[Value], jsonb: bool) -> Result<Value> {
    if !args.len().is_multiple_of(2) {
        let f = if jsonb {
            "jsonb_build_object"
        } else {
            "json_build_object"
        };
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "argument list must have even number of elements",
        )
        .with_hint(format!(
            "The arguments of {f}() must consist of alternating keys and values."
        )));
    }
    let mut out = String::from("{");
    for (i, pair) in args.chunks(2).enumerate() {
        let Value::Text(key) = &pair[0] else {
            return Err(null_key(jsonb, 2 * i + 1));
        };
        if i > 0 {
            out.push_str(", ");
        }
        push_string(&mut out, key);
        out.push_str(" : ");
        push_value_json(&mut out, &pair[1]);
        types::check_value_len(out.len())?;
    }
    out.push('}');
    finish(out, jsonb)
}

fn null_key(jsonb: bool, position: usize) -> SqlError {
    if jsonb {
        SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("argument {position}: key must not be null"),
        )
    } else {
        SqlError::new(
            SqlState::NULL_VALUE_NOT_ALLOWED,
            "null value not allowed for object key",
        )
    }
}

fn push_value_json(out: &mut String, v: &Value) {
    match v {
        Value::Text(t) => out.push_str(t),
        _ => out.push_str("null"),
    }
}

fn build_array(args: &[Value], jsonb: bool) -> Result<Value> {
    let mut out = String::from("[");
    for (i, v) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_value_json(&mut out, v);
        types::check_value_len(out.len())?;
    }
    out.push(']');
    finish(out, jsonb)
}

fn finish(out: String, jsonb: bool) -> Result<Value> {
    if jsonb {
        json::jsonb_in(&out)
    } else {
        Ok(Value::Text(out))
    }
}

/// json_agg's step: the value's JSON text (NULL as `null`) appended.
pub(super) fn agg_push(acc: &mut Option<String>, v: &Value) -> Result<()> {
    let piece = v.as_text().unwrap_or("null");
    match acc {
        None => *acc = Some(format!("[{piece}")),
        Some(a) => {
            types::check_growth(a.len(), piece.len().saturating_add(2))?;
            a.push_str(", ");
            a.push_str(piece);
        }
    }
    Ok(())
}

/// json_agg's and jsonb_agg's result: the elements are already canonical for jsonb.
pub(super) fn agg_finish(acc: Option<String>) -> Value {
    acc.map_or(Value::Null, |a| Value::Text(a + "]"))
}

/// json_object_agg's step: a key (22004 if NULL) and the value's JSON text.
pub(super) fn object_agg_push(
    pairs: &mut Vec<(String, String)>,
    bytes: &mut usize,
    args: &[Value],
    jsonb: bool,
) -> Result<()> {
    let Some(Value::Text(k)) = args.first() else {
        return Err(if jsonb {
            SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "field name must not be null",
            )
        } else {
            SqlError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                "null value not allowed for object key",
            )
        });
    };
    let v = args.get(1).and_then(Value::as_text).unwrap_or("null");
    types::check_growth(*bytes, k.len().saturating_add(v.len()).saturating_add(8))?;
    *bytes += k.len() + v.len() + 8;
    pairs.push((k.clone(), v.to_string()));
    Ok(())
}

/// json_object_agg's result (`{ "a" : 1, "b" : 2 }`, PostgreSQL's spacing), or
/// jsonb_object_agg's canonical object; NULL for no row.
pub(super) fn object_agg_finish(pairs: &[(String, String)], f: super::AggFunc) -> Result<Value> {
    if pairs.is_empty() {
        return Ok(Value::Null);
    }
    let jsonb = matches!(f, super::AggFunc::JsonObjectAgg { jsonb: true });
    let mut out = String::from(if jsonb { "{" } else { "{ " });
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_string(&mut out, k);
        out.push_str(" : ");
        out.push_str(v);
    }
    out.push_str(if jsonb { "}" } else { " }" });
    finish(out, jsonb)
}

/// A json or jsonb set-returning function of one document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JsonSrf {
    /// `json(b)_array_elements(_text)`.
    Elements {
        json: bool,
        text: bool,
    },
    /// `json(b)_object_keys`.
    Keys {
        json: bool,
    },
    /// `json(b)_each(_text)`: its `key` column, and its `value` column.
    EachKey {
        json: bool,
        text: bool,
    },
    EachValue {
        json: bool,
        text: bool,
    },
}

impl JsonSrf {
    /// The function named `name` (its `_each` as the key column's call), if it is one.
    pub(crate) fn named(name: &str) -> Option<JsonSrf> {
        let json = !name.starts_with("jsonb");
        let base = name.strip_prefix(if json { "json_" } else { "jsonb_" })?;
        let (base, text) = match base.strip_suffix("_text") {
            Some(b) => (b, true),
            None => (base, false),
        };
        Some(match (base, text) {
            ("array_elements", _) => JsonSrf::Elements { json, text },
            ("object_keys", false) => JsonSrf::Keys { json },
            ("each", _) => JsonSrf::EachKey { json, text },
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            JsonSrf::Elements {
                json: true,
                text: false,
            } => "json_array_elements",
            JsonSrf::Elements {
                json: true,
                text: true,
            } => "json_array_elements_text",
            JsonSrf::Elements {
                json: false,
                text: false,
            } => "jsonb_array_elements",
            JsonSrf::Elements {
                json: false,
                text: true,
            } => "jsonb_array_elements_text",
            JsonSrf::Keys { json: true } => "json_object_keys",
            JsonSrf::Keys { json: false } => "jsonb_object_keys",
            JsonSrf::EachKey {
                json: true,
                text: false,
            }
            | JsonSrf::EachValue {
                json: true,
                text: false,
            } => "json_each",
            JsonSrf::EachKey {
                json: true,
                text: true,
            }
            | JsonSrf::EachValue {
                json: true,
                text: true,
            } => "json_each_text",
            JsonSrf::EachKey {
                json: false,
                text: false,
            }
            | JsonSrf::EachValue {
                json: false,
                text: false,
            } => "jsonb_each",
            JsonSrf::EachKey {
                json: false,
                text: true,
            }
            | JsonSrf::EachValue {
                json: false,
                text: true,
            } => "jsonb_each_text",
        }
    }

    /// The document's type.
    pub(crate) fn doc_type(self) -> SqlType {
        match self {
            JsonSrf::Elements { json, .. }
            | JsonSrf::Keys { json }
            | JsonSrf::EachKey { json, .. }
            | JsonSrf::EachValue { json, .. } => {
                if json {
                    SqlType::Json
                } else {
                    SqlType::Jsonb
                }
            }
        }
    }

    /// The type of the values.
    pub(crate) fn value_type(self) -> SqlType {
        match self {
            JsonSrf::Keys { .. } | JsonSrf::EachKey { .. } => SqlType::Text,
            JsonSrf::Elements { text: true, .. } | JsonSrf::EachValue { text: true, .. } => {
                SqlType::Text
            }
            _ => self.doc_type(),
        }
    }

    /// The values for the document `doc` (a bounded value, so they are gathered).
    pub(crate) fn values(self, doc: &Value) -> Result<Vec<Value>> {
        // Both types are read as text: a piece of a canonical jsonb text is canonical.
        self.pieces(text_arg(doc)?)
    }

    fn pieces(self, text: &str) -> Result<Vec<Value>> {
        let piece = |p: &str, as_text: bool| {
            if as_text {
                json::json_piece_text(p)
            } else {
                Ok(Value::Text(p.to_string()))
            }
        };
        match (self, json::members(text)?) {
            (JsonSrf::Elements { text: t, .. }, Members::Array(m)) => {
                m.into_iter().map(|r| piece(&text[r], t)).collect()
            }
            (JsonSrf::Keys { .. } | JsonSrf::EachKey { .. }, Members::Object(m)) => {
                Ok(m.into_iter().map(|(k, _)| Value::Text(k)).collect())
            }
            (JsonSrf::EachValue { text: t, .. }, Members::Object(m)) => {
                m.into_iter().map(|(_, r)| piece(&text[r], t)).collect()
            }
            _ => Err(self.wrong_kind(json::json_type_name(text))),
        }
    }

    /// 22023 for a document of the wrong kind, in PostgreSQL's words.
    fn wrong_kind(self, kind: &str) -> SqlError {
        let scalar = !matches!(kind, "array" | "object");
        let msg = match self {
            JsonSrf::Elements { json: false, .. } if scalar => {
                "cannot extract elements from a scalar".to_string()
            }
            JsonSrf::Elements { json: false, .. } => {
                "cannot extract elements from an object".to_string()
            }
            JsonSrf::Elements { .. } if scalar => {
                format!("cannot call {} on a scalar", self.name())
            }
            JsonSrf::Elements { .. } => format!("cannot call {} on a non-array", self.name()),
            JsonSrf::Keys { .. } if scalar => format!("cannot call {} on a scalar", self.name()),
            JsonSrf::Keys { .. } => format!("cannot call {} on an array", self.name()),
            JsonSrf::EachKey { json: true, .. } | JsonSrf::EachValue { json: true, .. } => {
                if scalar {
                    "cannot deconstruct a scalar".to_string()
                } else {
                    "cannot deconstruct an array as an object".to_string()
                }
            }
            _ => format!("cannot call {} on a non-object", self.name()),
        };
        SqlError::new(SqlState::INVALID_PARAMETER_VALUE, msg)
    }
}

fn array_error(msg: &str) -> SqlError {
    SqlError::new(SqlState::ARRAY_SUBSCRIPT_ERROR, msg)
}

/// `json_object(text[])` (alternating keys and values, or pairs as a two-column array)
/// and `json_object(keys, values)`.
fn object_from_arrays(args: &[Value], jsonb: bool) -> Result<Value> {
    let first = array::parse(text_arg(&args[0])?)?;
    let pairs: Vec<(PathStep, PathStep)> = if let Some(v) = args.get(1) {
        let values = array::parse(text_arg(v)?)?;
        if first.dims.len() > 1 || values.dims.len() > 1 {
            return Err(array_error("wrong number of array subscripts"));
        }
        if first.elems.len() != values.elems.len() {
            return Err(array_error("mismatched array dimensions"));
        }
        first.elems.into_iter().zip(values.elems).collect()
    } else {
        let n = first.dims.len();
        if n > 2 {
            return Err(array_error("wrong number of array subscripts"));
        }
        if n == 2 && first.dims[1].len != 2 {
            return Err(array_error("array must have two columns"));
        }
        if n < 2 && first.elems.len() % 2 != 0 {
            return Err(array_error("array must have even number of elements"));
        }
        let mut it = first.elems.into_iter();
        std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect()
    };
    let mut out = String::from("{");
    for (i, (k, v)) in pairs.iter().enumerate() {
        let Some(k) = k else {
            return Err(SqlError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                "null value not allowed for object key",
            ));
        };
        if i > 0 {
            out.push_str(", ");
        }
        push_string(&mut out, k);
        out.push_str(" : ");
        match v {
            Some(v) => push_string(&mut out, v),
            None => out.push_str("null"),
        }
        types::check_value_len(out.len())?;
    }
    out.push('}');
    finish(out, jsonb)
}
