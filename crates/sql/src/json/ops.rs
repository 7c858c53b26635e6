//! jsonb's operations on trees: ordering (`compareJsonbContainers`), containment
//! (`@>`), key existence (`?`), concatenation (`||`), deletion (`-`, `#-`), paths (`#>`,
//! `jsonb_set`, `jsonb_insert`) and `jsonb_strip_nulls`, each as PostgreSQL's
//! `jsonb_util.c` and `jsonfuncs.c` define it.

use std::cmp::Ordering;

use quire_engine::SqlState;

use super::{array_index, key_order, Jsonb};
use crate::error::{Result, SqlError};

/// One element of a path (`text[]`): a key in an object, an integer index in an array;
/// `None` for a NULL element.
pub(crate) type PathStep = Option<String>;

/// What `jsonb_set` and `jsonb_insert` do at the path's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetMode {
    /// `jsonb_set`: replace; add a missing key or index when `create`.
    Set { create: bool },
    /// `jsonb_insert`: add (an existing key is an error), before or after an index.
    Insert { after: bool },
}

fn invalid(msg: &str) -> SqlError {
    SqlError::new(SqlState::INVALID_PARAMETER_VALUE, msg)
}

/// The order of kinds when two values differ in kind.
fn rank(v: &Jsonb) -> u8 {
    match v {
        Jsonb::Null => 0,
        Jsonb::String(_) => 1,
        Jsonb::Number(_) => 2,
        Jsonb::Bool(_) => 3,
        Jsonb::Array(_) => 4,
        Jsonb::Object(_) => 5,
    }
}

/// Two scalars of one kind compared; containers compare equal here.
fn scalar_cmp(a: &Jsonb, b: &Jsonb) -> Ordering {
    match (a, b) {
        (Jsonb::String(x), Jsonb::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Jsonb::Number(x), Jsonb::Number(y)) => x.cmp(y),
        (Jsonb::Bool(x), Jsonb::Bool(y)) => x.cmp(y),
        _ => Ordering::Equal,
    }
}

fn scalar_eq(a: &Jsonb, b: &Jsonb) -> bool {
    rank(a) == rank(b) && a.is_scalar() && b.is_scalar() && scalar_cmp(a, b).is_eq()
}

enum Cmp<'a> {
    Values(&'a Jsonb, &'a Jsonb),
    Keys(&'a str, &'a str),
}

/// Depth first, as PostgreSQL's iterators walk: kinds, then sizes, then members.
fn walk(a: &Jsonb, b: &Jsonb) -> Ordering {
    let mut stack = vec![Cmp::Values(a, b)];
    while let Some(c) = stack.pop() {
        let o = match c {
            Cmp::Keys(x, y) => x.as_bytes().cmp(y.as_bytes()),
            Cmp::Values(x, y) => match (x, y) {
                _ if rank(x) != rank(y) => rank(x).cmp(&rank(y)),
                (Jsonb::Array(xs), Jsonb::Array(ys)) => {
                    stack.extend(xs.iter().zip(ys).rev().map(|(p, q)| Cmp::Values(p, q)));
                    xs.len().cmp(&ys.len())
                }
                (Jsonb::Object(xs), Jsonb::Object(ys)) => {
                    for ((k, p), (l, q)) in xs.iter().zip(ys).rev() {
                        stack.push(Cmp::Values(p, q));
                        stack.push(Cmp::Keys(k, l));
                    }
                    xs.len().cmp(&ys.len())
                }
                _ => scalar_cmp(x, y),
            },
        };
        if o.is_ne() {
            return o;
        }
    }
    Ordering::Equal
}

/// A top-level scalar against a container, as PostgreSQL orders its "raw scalar"
/// pseudo-array: below an object and below an array of one element, above `[]`.
fn scalar_vs_container(c: &Jsonb) -> Ordering {
    match c {
        Jsonb::Array(items) if items.is_empty() => Ordering::Greater,
        _ => Ordering::Less,
    }
}

impl Jsonb {
    /// jsonb's ordering (its B-tree comparison, and `=`).
    pub(crate) fn compare(&self, other: &Jsonb) -> Ordering {
        match (self.is_scalar(), other.is_scalar()) {
            (true, false) => scalar_vs_container(other),
            (false, true) => scalar_vs_container(self).reverse(),
            _ => walk(self, other),
        }
    }

    /// `self @> other`.
    pub(crate) fn contains(&self, other: &Jsonb) -> Result<bool> {
        match (self, other) {
            (Jsonb::Object(_), Jsonb::Object(_)) => deep_contains(self, other),
            (Jsonb::Object(_), _) | (_, Jsonb::Object(_)) => Ok(false),
            (Jsonb::Array(a), Jsonb::Array(b)) => array_contains(a, b),
            (Jsonb::Array(a), b) => array_contains(a, std::slice::from_ref(b)),
            (_, Jsonb::Array(_)) => Ok(false),
            (a, b) => Ok(scalar_eq(a, b)),
        }
    }

    /// `self ? key`: an object's key, or a string element of an array (or the string
    /// itself at the top level).
    pub(crate) fn exists(&self, key: &str) -> bool {
        match self {
            Jsonb::Object(_) => self.get(key).is_some(),
            Jsonb::Array(items) => items
                .iter()
                .any(|v| matches!(v, Jsonb::String(s) if s == key)),
            Jsonb::String(s) => s == key,
            _ => false,
        }
    }

    /// `self || other`: two objects merged (the right one's keys win), anything else as
    /// arrays concatenated (a non-array counting as an array of itself).
    pub(crate) fn concat(&self, other: &Jsonb) -> Jsonb {
        if let (Jsonb::Object(a), Jsonb::Object(b)) = (self, other) {
            return Jsonb::object(a.iter().chain(b).cloned().collect());
        }
        let items = |v: &Jsonb| match v {
            Jsonb::Array(items) => items.clone(),
            v => vec![v.clone()],
        };
        let mut out = items(self);
        out.extend(items(other));
        Jsonb::Array(out)
    }

    /// `self - key` (and `- text[]`): keys removed from an object, equal strings from an
    /// array.
    pub(crate) fn delete_keys(&self, keys: &[&str]) -> Result<Jsonb> {
        match self {
            Jsonb::Object(pairs) => Ok(Jsonb::Object(
                pairs
                    .iter()
                    .filter(|(k, _)| !keys.contains(&k.as_str()))
                    .cloned()
                    .collect(),
            )),
            Jsonb::Array(items) => Ok(Jsonb::Array(
                items
                    .iter()
                    .filter(|v| !matches!(v, Jsonb::String(s) if keys.contains(&s.as_str())))
                    .cloned()
                    .collect(),
            )),
            _ => Err(invalid("cannot delete from scalar")),
        }
    }

    /// `self - index`.
    pub(crate) fn delete_index(&self, i: i64) -> Result<Jsonb> {
        match self {
            Jsonb::Array(items) => {
                let mut out = items.clone();
                if let Some(k) = array_index(items.len(), i) {
                    out.remove(k);
                }
                Ok(Jsonb::Array(out))
            }
            Jsonb::Object(_) => Err(invalid("cannot delete from object using integer index")),
            _ => Err(invalid("cannot delete from scalar")),
        }
    }

    /// `self #- path`.
    pub(crate) fn delete_path(&self, path: &[PathStep]) -> Result<Jsonb> {
        if self.is_scalar() {
            return Err(invalid("cannot delete path in scalar"));
        }
        let mut out = self.clone();
        let Some((last, inner)) = path.split_last() else {
            return Ok(out);
        };
        let Some(target) = descend(&mut out, inner)? else {
            return Ok(out);
        };
        let Some(last) = last.as_deref() else {
            return Ok(out);
        };
        match target {
            Jsonb::Object(pairs) => pairs.retain(|(k, _)| k != last),
            Jsonb::Array(items) => {
                let i = index_step(last, path.len())?;
                if let Some(k) = array_index(items.len(), i) {
                    items.remove(k);
                }
            }
            _ => {}
        }
        Ok(out)
    }

    /// `jsonb_set` and `jsonb_insert`: `new` put at `path` as `mode` says.
    pub(crate) fn set_path(&self, path: &[PathStep], new: Jsonb, mode: SetMode) -> Result<Jsonb> {
        if self.is_scalar() {
            return Err(invalid("cannot set path in scalar"));
        }
        if let Some(k) = path.iter().position(Option::is_none) {
            return Err(SqlError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                format!("path element at position {} is null", k + 1),
            ));
        }
        let mut out = self.clone();
        let Some((Some(last), inner)) = path.split_last() else {
            return Ok(out);
        };
        if let Some(target) = descend(&mut out, inner)? {
            put(target, last, path.len(), new, mode)?;
        }
        Ok(out)
    }

    /// `jsonb_strip_nulls`: object members whose value is null removed, at every level.
    pub(crate) fn strip_nulls(&self) -> Result<Jsonb> {
        crate::stack::check_stack_depth()?;
        Ok(match self {
            Jsonb::Object(pairs) => {
                let mut out = Vec::with_capacity(pairs.len());
                for (k, v) in pairs {
                    if *v != Jsonb::Null {
                        out.push((k.clone(), v.strip_nulls()?));
                    }
                }
                Jsonb::Object(out)
            }
            Jsonb::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for v in items {
                    out.push(v.strip_nulls()?);
                }
                Jsonb::Array(out)
            }
            v => v.clone(),
        })
    }
}

/// `new` put under `last` in `target` (the container the path's end is in).
fn put(target: &mut Jsonb, last: &str, len: usize, new: Jsonb, mode: SetMode) -> Result<()> {
    match target {
        Jsonb::Object(pairs) => match pairs.binary_search_by(|(k, _)| key_order(k, last)) {
            Ok(_) if matches!(mode, SetMode::Insert { .. }) => {
                return Err(invalid("cannot replace existing key")
                    .with_hint("Try using the function jsonb_set to replace key value."))
            }
            Ok(k) => pairs[k].1 = new,
            Err(_) if mode == (SetMode::Set { create: false }) => {}
            Err(k) => pairs.insert(k, (last.to_string(), new)),
        },
        Jsonb::Array(items) => {
            let i = index_step(last, len)?;
            let n = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if i < 0 { n + i } else { i };
            match mode {
                SetMode::Set { create } => match array_index(items.len(), i) {
                    Some(k) => items[k] = new,
                    None if !create => {}
                    None if at < 0 => items.insert(0, new),
                    None => items.push(new),
                },
                SetMode::Insert { after } => {
                    let at = at.clamp(-1, n) + i64::from(after);
                    let at = usize::try_from(at.clamp(0, n)).unwrap_or(items.len());
                    items.insert(at, new);
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The container `path` leads to in `v`, if every step finds one (an array step must be
/// an integer: 22P02 otherwise).
fn descend<'a>(v: &'a mut Jsonb, path: &[PathStep]) -> Result<Option<&'a mut Jsonb>> {
    let mut cur = v;
    for (pos, step) in path.iter().enumerate() {
        let Some(step) = step.as_deref() else {
            return Ok(None);
        };
        let next = match cur {
            Jsonb::Object(pairs) => match pairs.binary_search_by(|(k, _)| key_order(k, step)) {
                Ok(k) => &mut pairs[k].1,
                Err(_) => return Ok(None),
            },
            Jsonb::Array(items) => {
                let i = index_step(step, pos + 1)?;
                match array_index(items.len(), i) {
                    Some(k) => &mut items[k],
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        cur = next;
    }
    Ok(if cur.is_scalar() { None } else { Some(cur) })
}

/// A path element read as an array index (`strtol` with nothing after the number).
fn parse_index(step: &str) -> Option<i64> {
    step.trim_start().parse().ok()
}

fn index_step(step: &str, position: usize) -> Result<i64> {
    parse_index(step).ok_or_else(|| {
        SqlError::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("path element at position {position} is not an integer: \"{step}\""),
        )
    })
}

fn same_kind(a: &Jsonb, b: &Jsonb) -> bool {
    rank(a) == rank(b)
}

/// Whether container `val` contains container `cont` (of the same kind).
fn deep_contains(val: &Jsonb, cont: &Jsonb) -> Result<bool> {
    crate::stack::check_stack_depth()?;
    match (val, cont) {
        (Jsonb::Object(_), Jsonb::Object(cp)) => {
            for (k, cv) in cp {
                let Some(vv) = val.get(k) else {
                    return Ok(false);
                };
                let ok = if cv.is_scalar() {
                    scalar_eq(vv, cv)
                } else {
                    same_kind(vv, cv) && deep_contains(vv, cv)?
                };
                if !ok {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        (Jsonb::Array(v), Jsonb::Array(c)) => array_contains(v, c),
        _ => Ok(false),
    }
}

fn array_contains(val: &[Jsonb], cont: &[Jsonb]) -> Result<bool> {
    for c in cont {
        let found = if c.is_scalar() {
            val.iter().any(|v| scalar_eq(v, c))
        } else {
            let mut found = false;
            for v in val.iter().filter(|v| same_kind(v, c)) {
                if deep_contains(v, c)? {
                    found = true;
                    break;
                }
            }
            found
        };
        if !found {
            return Ok(false);
        }
    }
    Ok(true)
}
