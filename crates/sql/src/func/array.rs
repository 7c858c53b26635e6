//! The array functions and operators: resolution of PostgreSQL's polymorphic signatures
//! (`anyarray`, `anyelement`) and evaluation over arrays in their canonical text form
//! ([`crate::types::array`]).
//!
//! ## Rules
//! - Resolution: the array arguments fix the element type; an `anyelement` argument is
//!   cast to it. With only an element argument typed, the array is of its type. With
//!   neither typed, 42804 `could not determine polymorphic type`, as PostgreSQL.
//! - Searching functions (`array_position`, `array_remove`, `array_replace`) compare with
//!   IS NOT DISTINCT FROM and take one-dimensional arrays only (0A000 otherwise), as
//!   PostgreSQL.
//! - `x op ANY (array)` is true if the operator holds for some element, NULL if it holds for
//!   none but some comparison was NULL, else false; ALL is the dual.

use std::cmp::Ordering;
use std::fmt::Write as _;

use quire_engine::{SqlState, Value};

use super::{no_such_function, text_arg, unify, Func};
use crate::error::{Result, SqlError};
use crate::types::array::{self, Builder, Dim, Parsed};
use crate::types::{self, CmpOp, SqlType};

/// An array function or operator; `elem` is the arrays' element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArrayFn {
    /// `ARRAY[...]` of elements; `nested` when the elements are arrays themselves.
    Make {
        elem: SqlType,
        nested: bool,
    },
    /// `anyarray || anyarray`, array_cat.
    Cat(SqlType),
    /// `anyarray || anyelement`, array_append.
    Append(SqlType),
    /// `anyelement || anyarray`, array_prepend.
    Prepend(SqlType),
    Length,
    Upper,
    Lower,
    Ndims,
    Dims,
    Cardinality,
    Position(SqlType),
    Positions(SqlType),
    Remove(SqlType),
    Replace(SqlType),
    /// array_to_string(array, sep [, null_string]): the elements' text as stored.
    ToString,
    /// string_to_array(text, sep [, null_string]).
    FromString,
    /// `array[i][j]...`: one subscript per argument after the array.
    Subscript(SqlType),
    /// `array[lo:hi]...`: a lower and an upper bound per dimension after the array; bit
    /// k of `omitted` set when argument k + 1 was left out (`a[:2]`).
    Slice {
        elem: SqlType,
        omitted: u16,
    },
    /// `a @> b` (and `b <@ a`): every element of b is in a.
    Contains(SqlType),
    /// `a && b`: some element is in both.
    Overlap(SqlType),
    /// array_fill(value, dims [, lower bounds]).
    Fill(SqlType),
    /// array_reverse(a): the first dimension reversed.
    Reverse,
    /// array_sort(a [, descending [, nulls_first]]).
    Sort(SqlType),
    /// `x op ANY (array)` or `x op ALL (array)`, comparing as `ty` (`x` is cast to it
    /// already, each element on the way).
    Any {
        op: CmpOp,
        all: bool,
        elem: SqlType,
        ty: SqlType,
    },
}

fn poly_error(name: &str) -> SqlError {
    SqlError::new(
        SqlState::DATATYPE_MISMATCH,
        "could not determine polymorphic type because input has type unknown",
    )
    .with_hint(format!("Add explicit casts to the arguments of {name}()."))
}

/// The element type of a call whose arguments at `arrays` are `anyarray` and at `elems`
/// `anyelement`.
fn element_type(
    name: &str,
    args: &[SqlType],
    arrays: &[usize],
    elems: &[usize],
) -> Result<SqlType> {
    let mut elem = SqlType::Unknown;
    for &i in arrays {
        match args.get(i) {
            Some(SqlType::Unknown) | None => {}
            Some(t) => {
                let e = t.element().ok_or_else(|| no_such_function(name, args))?;
                elem = unify(elem, e).ok_or_else(|| no_such_function(name, args))?;
            }
        }
    }
    if elem == SqlType::Unknown {
        for &i in elems {
            if let Some(&t) = args.get(i).filter(|t| **t != SqlType::Unknown) {
                elem = unify(elem, t).ok_or_else(|| no_such_function(name, args))?;
            }
        }
    }
    if elem == SqlType::Unknown {
        return Err(poly_error(name));
    }
    if SqlType::array_of(elem).is_none() {
        return Err(no_such_function(name, args));
    }
    Ok(elem)
}

type Signature = (Func, Vec<Option<SqlType>>, SqlType);

/// The array function `name` for arguments of types `args`, if it is one.
pub(crate) fn resolve(name: &str, args: &[SqlType]) -> Option<Result<Signature>> {
    use SqlType as T;
    let n = args.len();
    let arr = |e: SqlType| SqlType::array_of(e).unwrap_or(T::TEXT_ARRAY);
    let sig = |f: ArrayFn, casts: Vec<Option<SqlType>>, ret: SqlType| (Func::Array(f), casts, ret);
    let elem = |arrays: &[usize], elems: &[usize]| element_type(name, args, arrays, elems);
    let dims = |f: ArrayFn, ret: SqlType| -> Result<Signature> {
        let e = elem(&[0], &[])?;
        let mut casts = vec![Some(arr(e))];
        casts.extend((1..n).map(|_| Some(T::Int4)));
        Ok(sig(f, casts, ret))
    };
    let r =
        match (name, n) {
            ("array_length", 2) => dims(ArrayFn::Length, T::Int4),
            ("array_upper", 2) => dims(ArrayFn::Upper, T::Int4),
            ("array_lower", 2) => dims(ArrayFn::Lower, T::Int4),
            ("array_ndims", 1) => dims(ArrayFn::Ndims, T::Int4),
            ("array_dims", 1) => dims(ArrayFn::Dims, T::Text),
            ("cardinality", 1) => dims(ArrayFn::Cardinality, T::Int4),
            ("array_cat", 2) => {
                elem(&[0, 1], &[]).map(|e| sig(ArrayFn::Cat(e), vec![Some(arr(e)); 2], arr(e)))
            }
            ("array_append", 2) => elem(&[0], &[1])
                .map(|e| sig(ArrayFn::Append(e), vec![Some(arr(e)), Some(e)], arr(e))),
            ("array_prepend", 2) => elem(&[1], &[0])
                .map(|e| sig(ArrayFn::Prepend(e), vec![Some(e), Some(arr(e))], arr(e))),
            ("array_position", 2 | 3) => elem(&[0], &[1]).map(|e| {
                let mut casts = vec![Some(arr(e)), Some(e)];
                casts.extend((2..n).map(|_| Some(T::Int4)));
                sig(ArrayFn::Position(e), casts, T::Int4)
            }),
            ("array_positions", 2) => elem(&[0], &[1]).map(|e| {
                sig(
                    ArrayFn::Positions(e),
                    vec![Some(arr(e)), Some(e)],
                    arr(T::Int4),
                )
            }),
            ("array_remove", 2) => elem(&[0], &[1])
                .map(|e| sig(ArrayFn::Remove(e), vec![Some(arr(e)), Some(e)], arr(e))),
            ("array_replace", 3) => elem(&[0], &[1, 2]).map(|e| {
                sig(
                    ArrayFn::Replace(e),
                    vec![Some(arr(e)), Some(e), Some(e)],
                    arr(e),
                )
            }),
            ("array_to_string", 2 | 3) => elem(&[0], &[]).map(|e| {
                let mut casts = vec![Some(arr(e))];
                casts.extend((1..n).map(|_| Some(T::Text)));
                sig(ArrayFn::ToString, casts, T::Text)
            }),
            ("array_fill", 2 | 3) => elem(&[], &[0]).map(|e| {
                let mut casts = vec![Some(e), Some(arr(T::Int4))];
                casts.extend((2..n).map(|_| Some(arr(T::Int4))));
                sig(ArrayFn::Fill(e), casts, arr(e))
            }),
            ("array_reverse", 1) => {
                elem(&[0], &[]).map(|e| sig(ArrayFn::Reverse, vec![Some(arr(e))], arr(e)))
            }
            ("array_sort", 1..=3) => elem(&[0], &[]).map(|e| {
                let mut casts = vec![Some(arr(e))];
                casts.extend((1..n).map(|_| Some(T::Bool)));
                sig(ArrayFn::Sort(e), casts, arr(e))
            }),
            ("string_to_array", 2 | 3) => Ok(sig(
                ArrayFn::FromString,
                vec![Some(T::Text); n],
                T::TEXT_ARRAY,
            )),
            _ => return None,
        };
    Some(r)
}

impl ArrayFn {
    /// Whether a NULL argument makes the result NULL without a call.
    pub(crate) fn strict(self) -> bool {
        !matches!(
            self,
            ArrayFn::Make { .. }
                | ArrayFn::Cat(_)
                | ArrayFn::Append(_)
                | ArrayFn::Prepend(_)
                | ArrayFn::Position(_)
                | ArrayFn::Positions(_)
                | ArrayFn::Remove(_)
                | ArrayFn::Replace(_)
                | ArrayFn::ToString
                | ArrayFn::FromString
                | ArrayFn::Any { .. }
                | ArrayFn::Slice { .. }
                | ArrayFn::Sort(_)
        )
    }

    pub(crate) fn call(self, args: &[Value]) -> Result<Value> {
        match self {
            ArrayFn::Make { elem, nested } => make(args, elem, nested),
            ArrayFn::Cat(_) => cat(args.first(), args.get(1)),
            ArrayFn::Append(e) => append(args, e, false),
            ArrayFn::Prepend(e) => append(args, e, true),
            ArrayFn::Length | ArrayFn::Upper | ArrayFn::Lower => dim_of(self, args),
            ArrayFn::Ndims | ArrayFn::Dims | ArrayFn::Cardinality => shape(self, args),
            ArrayFn::Position(e) => position(args, e),
            ArrayFn::Positions(e) => positions(args, e),
            ArrayFn::Remove(e) | ArrayFn::Replace(e) => remove_replace(self, args, e),
            ArrayFn::ToString => to_string(args),
            ArrayFn::FromString => string_to_array(args),
            ArrayFn::Subscript(e) => subscript(args, e),
            ArrayFn::Slice { omitted, .. } => slice(args, omitted),
            ArrayFn::Contains(e) => contains(&args[0], &args[1], e),
            ArrayFn::Overlap(e) => overlap(&args[0], &args[1], e),
            ArrayFn::Fill(e) => fill(args, e),
            ArrayFn::Reverse => reverse(&args[0]),
            ArrayFn::Sort(e) => sort(args, e),
            ArrayFn::Any { op, all, elem, ty } => any(args, op, all, elem, ty),
        }
    }
}

fn parsed(v: &Value) -> Result<Parsed> {
    array::parse(text_arg(v).unwrap_or("{}"))
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn not_one_dim() -> SqlError {
    SqlError::new(
        SqlState::FEATURE_NOT_SUPPORTED,
        "searching for elements in multidimensional arrays is not supported",
    )
}

/// `ARRAY[...]`: elements (or, nested, sub-arrays of one shape) as an array.
fn make(args: &[Value], elem: SqlType, nested: bool) -> Result<Value> {
    if !nested {
        let mut b = Builder::default();
        for v in args {
            b.push_value(v, elem)?;
        }
        return Ok(b.finish());
    }
    let mut inner: Option<Vec<Dim>> = None;
    let mut elems = Vec::new();
    for v in args {
        let p = parsed(v)?;
        if p.dims.is_empty() && v.is_null() {
            return Err(SqlError::new(
                SqlState::ARRAY_SUBSCRIPT_ERROR,
                "multidimensional arrays must have array expressions with matching dimensions",
            ));
        }
        match &inner {
            None => inner = Some(p.dims.clone()),
            Some(d) if *d != p.dims => {
                return Err(SqlError::new(
                    SqlState::ARRAY_SUBSCRIPT_ERROR,
                    "multidimensional arrays must have array expressions with matching dimensions",
                ))
            }
            Some(_) => {}
        }
        elems.extend(p.elems);
    }
    let Some(inner) = inner.filter(|d| !d.is_empty()) else {
        return Ok(Value::Text("{}".into()));
    };
    if inner.len() + 1 > array::MAX_DIMS {
        return Err(array::too_many_dims(inner.len() + 1));
    }
    let mut dims = vec![Dim {
        len: args.len(),
        lower: 1,
    }];
    dims.extend(inner);
    array::write(&Parsed { dims, elems }).map(Value::Text)
}

/// array_cat: NULL or empty sides vanish; one-dimensional arrays concatenate, keeping the
/// first one's lower bound.
fn cat(a: Option<&Value>, b: Option<&Value>) -> Result<Value> {
    let (a, b) = match (a.filter(|v| !v.is_null()), b.filter(|v| !v.is_null())) {
        (None, None) => return Ok(Value::Null),
        (Some(x), None) | (None, Some(x)) => return Ok(x.clone()),
        (Some(a), Some(b)) => (parsed(a)?, parsed(b)?),
    };
    if a.dims.is_empty() {
        return array::write(&b).map(Value::Text);
    }
    if b.dims.is_empty() {
        return array::write(&a).map(Value::Text);
    }
    if a.dims.len() != b.dims.len() || a.dims[1..] != b.dims[1..] {
        return Err(SqlError::new(
            SqlState::ARRAY_SUBSCRIPT_ERROR,
            "cannot concatenate incompatible arrays",
        )
        .with_detail(
            "Arrays with differing element dimensions are not compatible for concatenation.",
        ));
    }
    let mut dims = a.dims.clone();
    dims[0].len += b.dims[0].len;
    let mut elems = a.elems;
    elems.extend(b.elems);
    array::write(&Parsed { dims, elems }).map(Value::Text)
}

/// array_append / array_prepend: the element added to a one-dimensional array.
fn append(args: &[Value], elem: SqlType, prepend: bool) -> Result<Value> {
    let (arr, v) = if prepend {
        (&args[1], &args[0])
    } else {
        (&args[0], &args[1])
    };
    let mut a = if arr.is_null() {
        Parsed::default()
    } else {
        parsed(arr)?
    };
    if a.dims.len() > 1 {
        return Err(SqlError::new(
            SqlState::DATA_EXCEPTION,
            "argument must be empty or one-dimensional array",
        ));
    }
    let e = types::format_text(v, elem);
    match (a.dims.first_mut(), prepend) {
        (None, _) => a = Parsed::flat(vec![e]),
        (Some(d), true) => {
            d.len += 1;
            a.elems.insert(0, e);
        }
        (Some(d), false) => {
            d.len += 1;
            a.elems.push(e);
        }
    }
    array::write(&a).map(Value::Text)
}

/// array_length / array_upper / array_lower of a dimension (NULL if it has none).
fn dim_of(f: ArrayFn, args: &[Value]) -> Result<Value> {
    let a = parsed(&args[0])?;
    let d = match &args[1] {
        Value::Int(d) => usize::try_from(*d - 1).ok().and_then(|i| a.dims.get(i)),
        _ => None,
    };
    Ok(match d {
        None => Value::Null,
        Some(d) => Value::Int(match f {
            ArrayFn::Length => to_i64(d.len),
            ArrayFn::Lower => d.lower,
            _ => d.lower + to_i64(d.len) - 1,
        }),
    })
}

/// array_ndims / array_dims / cardinality.
fn shape(f: ArrayFn, args: &[Value]) -> Result<Value> {
    let a = parsed(&args[0])?;
    Ok(match f {
        ArrayFn::Cardinality => Value::Int(to_i64(a.elems.len())),
        _ if a.dims.is_empty() => Value::Null,
        ArrayFn::Ndims => Value::Int(to_i64(a.dims.len())),
        _ => {
            let mut out = String::new();
            for d in &a.dims {
                let _ = write!(out, "[{}:{}]", d.lower, d.lower + to_i64(d.len) - 1);
            }
            Value::Text(out)
        }
    })
}

/// A one-dimensional array's elements as values of `elem`, with its lower bound.
fn one_dim(v: &Value, elem: SqlType) -> Result<(i64, Vec<Value>)> {
    let a = parsed(v)?;
    if a.dims.len() > 1 {
        return Err(not_one_dim());
    }
    let lower = a.dims.first().map_or(1, |d| d.lower);
    let values = a
        .elems
        .iter()
        .map(|e| {
            e.as_deref()
                .map_or(Ok(Value::Null), |s| types::parse_text(elem, s))
        })
        .collect::<Result<_>>()?;
    Ok((lower, values))
}

/// IS NOT DISTINCT FROM.
fn same(a: &Value, b: &Value) -> bool {
    match (a.is_null(), b.is_null()) {
        (true, true) => true,
        (false, false) => types::compare(a, b).is_eq(),
        _ => false,
    }
}

fn position(args: &[Value], elem: SqlType) -> Result<Value> {
    if args[0].is_null() {
        return Ok(Value::Null);
    }
    let (lower, values) = one_dim(&args[0], elem)?;
    let start = match args.get(2) {
        None => 0,
        Some(Value::Int(s)) => usize::try_from(*s - lower).unwrap_or(0),
        Some(_) => {
            return Err(SqlError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                "initial position must not be null",
            ))
        }
    };
    let found = values
        .iter()
        .enumerate()
        .skip(start)
        .find(|(_, v)| same(v, &args[1]));
    Ok(found.map_or(Value::Null, |(i, _)| Value::Int(lower + to_i64(i))))
}

fn positions(args: &[Value], elem: SqlType) -> Result<Value> {
    if args[0].is_null() {
        return Ok(Value::Null);
    }
    let (lower, values) = one_dim(&args[0], elem)?;
    let mut b = Builder::default();
    for (i, v) in values.iter().enumerate() {
        if same(v, &args[1]) {
            b.push_value(&Value::Int(lower + to_i64(i)), SqlType::Int4)?;
        }
    }
    Ok(b.finish())
}

/// array_remove(a, x) / array_replace(a, x, y).
fn remove_replace(f: ArrayFn, args: &[Value], elem: SqlType) -> Result<Value> {
    if args[0].is_null() {
        return Ok(Value::Null);
    }
    let a = parsed(&args[0])?;
    if a.dims.len() > 1 && matches!(f, ArrayFn::Remove(_)) {
        return Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "removing elements from multidimensional arrays is not supported",
        ));
    }
    let target = types::format_text(&args[1], elem);
    let with = args.get(2).map(|v| types::format_text(v, elem));
    // Canonical texts: equal elements have equal texts.
    let mut elems = Vec::with_capacity(a.elems.len());
    for e in a.elems {
        match (&with, e == target) {
            (_, false) => elems.push(e),
            (Some(w), true) => elems.push(w.clone()),
            (None, true) => {}
        }
    }
    if matches!(f, ArrayFn::Replace(_)) {
        return array::write(&Parsed {
            dims: a.dims,
            elems,
        })
        .map(Value::Text);
    }
    let lower = a.dims.first().map_or(1, |d| d.lower);
    let mut out = Parsed::flat(elems);
    if let Some(d) = out.dims.first_mut() {
        d.lower = lower;
    }
    array::write(&out).map(Value::Text)
}

fn to_string(args: &[Value]) -> Result<Value> {
    let (Some(arr), Some(sep)) = (text_arg(&args[0]), text_arg(&args[1])) else {
        return Ok(Value::Null);
    };
    let null_text = args.get(2).and_then(text_arg);
    let a = array::parse(arr)?;
    let mut out = String::new();
    let mut first = true;
    for e in &a.elems {
        let Some(piece) = e.as_deref().or(null_text) else {
            continue;
        };
        let sep = if first { "" } else { sep };
        types::check_growth(out.len(), sep.len() + piece.len())?;
        out.push_str(sep);
        out.push_str(piece);
        first = false;
    }
    Ok(Value::Text(out))
}

/// string_to_array(s, sep [, null_string]): a NULL separator splits into characters, an
/// empty one keeps the string whole.
pub(crate) fn string_to_array(args: &[Value]) -> Result<Value> {
    let Some(s) = text_arg(&args[0]) else {
        return Ok(Value::Null);
    };
    let null_text = args.get(2).and_then(text_arg);
    let mut b = Builder::default();
    let mut push = |piece: &str| b.push((Some(piece) != null_text).then_some(piece));
    if s.is_empty() {
        return Ok(Value::Text("{}".into()));
    }
    match text_arg(&args[1]) {
        None => {
            let mut buf = [0u8; 4];
            for c in s.chars() {
                push(c.encode_utf8(&mut buf))?;
            }
        }
        Some("") => push(s)?,
        Some(sep) => {
            for piece in s.split(sep) {
                push(piece)?;
            }
        }
    }
    Ok(b.finish())
}

/// `a[i][j]...`: the element at the subscripts (one per dimension), NULL outside.
fn subscript(args: &[Value], elem: SqlType) -> Result<Value> {
    let a = parsed(&args[0])?;
    let subs = &args[1..];
    if subs.len() != a.dims.len() {
        return Ok(Value::Null);
    }
    let mut offset = 0usize;
    for (s, d) in subs.iter().zip(&a.dims) {
        let Value::Int(i) = s else {
            return Ok(Value::Null);
        };
        let Some(k) = i.checked_sub(d.lower).and_then(|k| usize::try_from(k).ok()) else {
            return Ok(Value::Null);
        };
        if k >= d.len {
            return Ok(Value::Null);
        }
        offset = offset * d.len + k;
    }
    match a.elems.get(offset) {
        Some(Some(s)) => types::parse_text(elem, s),
        _ => Ok(Value::Null),
    }
}

fn any(args: &[Value], op: CmpOp, all: bool, elem: SqlType, ty: SqlType) -> Result<Value> {
    let (x, arr) = (&args[0], &args[1]);
    if arr.is_null() {
        return Ok(Value::Null);
    }
    let a = parsed(arr)?;
    let mut saw_null = false;
    for e in &a.elems {
        let holds = match e {
            Some(s) if !x.is_null() => {
                let v = types::cast(types::parse_text(elem, s)?, elem, ty)?;
                Some(op.holds(types::compare_typed(x, &v, ty)?))
            }
            _ => None,
        };
        match holds {
            None => saw_null = true,
            Some(h) if h != all => return Ok(Value::Bool(h)),
            Some(_) => {}
        }
    }
    Ok(if saw_null {
        Value::Null
    } else {
        Value::Bool(all)
    })
}

/// `a[lo:hi]...`: the elements inside the bounds (clamped to the array's), as an array
/// with lower bounds 1; empty if any range is.
fn slice(args: &[Value], omitted: u16) -> Result<Value> {
    let bounds = &args[1..];
    for (k, b) in bounds.iter().enumerate() {
        if b.is_null() && omitted & (1 << k) == 0 {
            return Ok(Value::Null);
        }
    }
    if args[0].is_null() {
        return Ok(Value::Null);
    }
    let a = parsed(&args[0])?;
    let n = bounds.len() / 2;
    if a.dims.is_empty() || n > a.dims.len() {
        return Ok(Value::Text("{}".into()));
    }
    let mut ranges = Vec::with_capacity(a.dims.len());
    for (i, d) in a.dims.iter().enumerate() {
        let upper = d.lower + to_i64(d.len) - 1;
        let (lo, hi) = match (bounds.get(2 * i), bounds.get(2 * i + 1)) {
            (Some(lo), Some(hi)) => (int_or(lo, d.lower), int_or(hi, upper)),
            _ => (d.lower, upper),
        };
        let (lo, hi) = (lo.max(d.lower), hi.min(upper));
        if lo > hi {
            return Ok(Value::Text("{}".into()));
        }
        // Offsets into the dimension.
        ranges.push((to_usize(lo - d.lower), to_usize(hi - d.lower)));
    }
    let mut elems = Vec::new();
    collect_slice(&a, &ranges, 0, 0, &mut elems);
    let dims = ranges
        .iter()
        .map(|&(lo, hi)| Dim {
            len: hi - lo + 1,
            lower: 1,
        })
        .collect();
    array::write(&Parsed { dims, elems }).map(Value::Text)
}

fn int_or(v: &Value, default: i64) -> i64 {
    match v {
        Value::Int(i) => *i,
        _ => default,
    }
}

fn to_usize(i: i64) -> usize {
    usize::try_from(i).unwrap_or(0)
}

/// The elements of `a` inside `ranges` (one per dimension, from dimension `depth` on),
/// row-major; `base` is the offset of the current sub-array.
fn collect_slice(
    a: &Parsed,
    ranges: &[(usize, usize)],
    depth: usize,
    base: usize,
    out: &mut Vec<Option<String>>,
) {
    let (lo, hi) = ranges[depth];
    for k in lo..=hi {
        let offset = base * a.dims[depth].len + k;
        if depth + 1 == ranges.len() {
            out.push(a.elems.get(offset).cloned().flatten());
        } else {
            collect_slice(a, ranges, depth + 1, offset, out);
        }
    }
}

/// Whether some non-NULL element of `xs` equals the non-NULL `v`.
fn holds_value(xs: &[Value], v: &Value) -> bool {
    !v.is_null()
        && xs
            .iter()
            .any(|w| !w.is_null() && types::compare(v, w).is_eq())
}

/// Each element of `b` equals some element of `a` (a NULL never does).
fn contains(a: &Value, b: &Value, elem: SqlType) -> Result<Value> {
    let (x, y) = (values_of(a, elem)?, values_of(b, elem)?);
    Ok(Value::Bool(y.iter().all(|v| holds_value(&x, v))))
}

fn overlap(a: &Value, b: &Value, elem: SqlType) -> Result<Value> {
    let (x, y) = (values_of(a, elem)?, values_of(b, elem)?);
    Ok(Value::Bool(y.iter().any(|v| holds_value(&x, v))))
}

fn values_of(v: &Value, elem: SqlType) -> Result<Vec<Value>> {
    array::values(text_arg(v).unwrap_or("{}"), elem)
}

/// The integers of an `int[]` argument of array_fill (no NULLs).
fn fill_ints(v: &Value) -> Result<Vec<i64>> {
    values_of(v, SqlType::Int4)?
        .into_iter()
        .map(|v| match v {
            Value::Int(i) => Ok(i),
            _ => Err(SqlError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                "dimension values cannot be null",
            )),
        })
        .collect()
}

/// array_fill(value, lengths [, lower bounds]).
fn fill(args: &[Value], elem: SqlType) -> Result<Value> {
    let lens = fill_ints(&args[1])?;
    let lowers = args.get(2).map(fill_ints).transpose()?;
    if lowers.as_ref().is_some_and(|l| l.len() != lens.len()) {
        return Err(SqlError::new(
            SqlState::ARRAY_SUBSCRIPT_ERROR,
            "wrong number of array subscripts",
        )
        .with_detail("Low bound array has different size than dimensions array."));
    }
    if lens.len() > array::MAX_DIMS {
        return Err(array::too_many_dims(lens.len()));
    }
    let mut count: usize = 1;
    let mut dims = Vec::with_capacity(lens.len());
    for (i, &len) in lens.iter().enumerate() {
        let len = usize::try_from(len).unwrap_or(0);
        count = count.saturating_mul(len);
        let lower = lowers.as_ref().map_or(1, |l| l[i]);
        dims.push(Dim { len, lower });
    }
    let text = types::format_text(&args[0], elem);
    // Each element takes its text and a comma, and more while it is held: refused before
    // anything is allocated.
    let each = text.as_ref().map_or(5, |t| t.len() + 1);
    types::check_growth(0, count.saturating_mul(each))?;
    array::check_parsed_size(count.saturating_mul(each + array::ELEMENT_OVERHEAD_BYTES))?;
    if count == 0 {
        return Ok(Value::Text("{}".into()));
    }
    array::write(&Parsed {
        dims,
        elems: vec![text; count],
    })
    .map(Value::Text)
}

/// array_reverse: the first dimension's items in reverse order.
fn reverse(v: &Value) -> Result<Value> {
    let mut a = parsed(v)?;
    let Some(first) = a.dims.first() else {
        return array::write(&a).map(Value::Text);
    };
    let width = (a.elems.len() / first.len.max(1)).max(1);
    let items: Vec<&[Option<String>]> = a.elems.chunks(width).collect();
    a.elems = items.into_iter().rev().flatten().cloned().collect();
    array::write(&a).map(Value::Text)
}

/// array_sort(a [, descending [, nulls_first]]) of a one-dimensional array; NULLs last
/// ascending, first descending, unless told.
fn sort(args: &[Value], elem: SqlType) -> Result<Value> {
    if args[0].is_null() {
        return Ok(Value::Null);
    }
    let flag = |i: usize| match args.get(i) {
        Some(Value::Bool(b)) => Ok(Some(*b)),
        None => Ok(None),
        Some(_) => Err(SqlError::new(
            SqlState::NULL_VALUE_NOT_ALLOWED,
            "array_sort flags must not be null",
        )),
    };
    let descending = flag(1)?.unwrap_or(false);
    let nulls_first = flag(2)?.unwrap_or(descending);
    let (lower, mut values) = one_dim(&args[0], elem)?;
    values.sort_by(|x, y| match (x.is_null(), y.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) if nulls_first => Ordering::Less,
        (true, false) => Ordering::Greater,
        (false, true) if nulls_first => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) if descending => types::compare(y, x),
        (false, false) => types::compare(x, y),
    });
    let mut out = Parsed::flat(values.iter().map(|v| types::format_text(v, elem)).collect());
    if let Some(d) = out.dims.first_mut() {
        d.lower = lower;
    }
    array::write(&out).map(Value::Text)
}
