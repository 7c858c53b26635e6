//! Keys: comparing search keys with encoded tuples without decoding them into [`Value`]s (no
//! allocation on the descent path), in exactly the order of [`Value::compare`].

use std::cmp::Ordering;

use super::page::Tuple;
use crate::bytes::Reader;
use crate::page::Tid;
use crate::value::{read_int_value, read_value, Type, Value};

/// A key value borrowed from encoded bytes: the value encoding's own borrowed form.
pub use crate::value::ValueRef as KeyRef;

impl KeyRef<'_> {
    /// The rank [`Value::compare`] orders different types by (NULL last).
    fn rank(&self) -> u8 {
        match self {
            KeyRef::Null => u8::MAX,
            KeyRef::Bool(_) => Type::Bool.to_u8(),
            KeyRef::Int(_) => Type::Int.to_u8(),
            KeyRef::Float(_) => Type::Float.to_u8(),
            KeyRef::Text(_) => Type::Text.to_u8(),
            KeyRef::Bytea(_) => Type::Bytea.to_u8(),
            KeyRef::Timestamp(_) => Type::Timestamp.to_u8(),
            KeyRef::Numeric(_) => Type::Numeric.to_u8(),
            KeyRef::Interval(_) => Type::Interval.to_u8(),
        }
    }

    fn compare(&self, other: &KeyRef<'_>) -> Ordering {
        match (self, other) {
            (KeyRef::Null, KeyRef::Null) => Ordering::Equal,
            (KeyRef::Bool(a), KeyRef::Bool(b)) => a.cmp(b),
            (KeyRef::Int(a), KeyRef::Int(b)) | (KeyRef::Timestamp(a), KeyRef::Timestamp(b)) => {
                a.cmp(b)
            }
            (KeyRef::Float(a), KeyRef::Float(b)) => a.total_cmp(b),
            // Byte order is `String` order.
            (KeyRef::Text(a), KeyRef::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (KeyRef::Bytea(a), KeyRef::Bytea(b)) => a.cmp(b),
            (KeyRef::Numeric(a), KeyRef::Numeric(b)) => crate::value::numeric_compare(a, b),
            (KeyRef::Interval(a), KeyRef::Interval(b)) => a.compare(*b),
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }
}

/// Borrows a [`Value`] as a [`KeyRef`].
pub fn key_ref(v: &Value) -> KeyRef<'_> {
    match v {
        Value::Null => KeyRef::Null,
        Value::Bool(b) => KeyRef::Bool(*b),
        Value::Int(i) => KeyRef::Int(*i),
        Value::Float(f) => KeyRef::Float(*f),
        Value::Text(s) => KeyRef::Text(s),
        Value::Bytea(b) => KeyRef::Bytea(b),
        Value::Timestamp(t) => KeyRef::Timestamp(*t),
        Value::Numeric(n) => KeyRef::Numeric(n.as_bytes()),
        Value::Interval(i) => KeyRef::Interval(*i),
    }
}

/// Reads encoded key values one at a time; `None` on malformed bytes (never panics).
pub struct KeyReader<'a> {
    r: Reader<'a>,
}

impl<'a> KeyReader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        KeyReader { r: Reader::new(b) }
    }

    /// The next value.
    pub fn next_value(&mut self) -> Option<KeyRef<'a>> {
        read_value(&mut self.r, 0).ok()
    }

    /// Compares `v` with the next value (`v` first), reading it; `None` on malformed bytes.
    /// An integer against an integer entry is compared without decoding a [`KeyRef`]: most
    /// keys are integers, and every probe of a descent makes this comparison.
    #[inline]
    pub fn compare_next(&mut self, v: &Value) -> Option<Ordering> {
        if let Value::Int(want) = v {
            if let Some(have) = read_int_value(&mut self.r) {
                return Some(want.cmp(&have));
            }
        }
        Some(key_ref(v).compare(&self.next_value()?))
    }

    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.r.remaining() == 0
    }
}

/// Why a comparison failed: the tuple's key bytes are malformed.
#[derive(Debug)]
pub struct BadKey;

/// A position to search for: a key prefix (the first `cols.len()` columns), optionally a heap
/// TID (only with every column), and what equality means.
#[derive(Clone, Copy, Debug)]
pub struct SearchKey<'k> {
    pub cols: &'k [Value],
    pub tid: Option<Tid>,
    /// Treat a tuple equal to the key as *less* than it, so the search goes past equal
    /// tuples: PostgreSQL's `nextkey`. Inserting (a tuple equal to a pivot belongs right of
    /// it) and a lower bound that excludes its value use it.
    pub equal_goes_right: bool,
}

impl SearchKey<'_> {
    /// Compares the key with a tuple (`Greater`: the tuple sorts before the key), with
    /// equality adjusted by `equal_goes_right`. Minus infinity is less than every key.
    pub fn compare(&self, t: &Tuple<'_>) -> Result<Ordering, BadKey> {
        let ord = self.compare_raw(t)?;
        Ok(if ord == Ordering::Equal && self.equal_goes_right {
            Ordering::Greater
        } else {
            ord
        })
    }

    /// The comparison without the adjustment: `Equal` when the tuple matches the key's
    /// columns (and its TID, if the key has one).
    pub fn compare_raw(&self, t: &Tuple<'_>) -> Result<Ordering, BadKey> {
        if t.is_minus_infinity() {
            return Ok(Ordering::Greater);
        }
        if usize::from(t.natts) < self.cols.len() {
            return Err(BadKey);
        }
        let mut r = KeyReader::new(t.key);
        for v in self.cols {
            match r.compare_next(v).ok_or(BadKey)? {
                Ordering::Equal => {}
                other => return Ok(other),
            }
        }
        if self.cols.len() < usize::from(t.natts) {
            return Ok(Ordering::Equal);
        }
        Ok(self.tid.map_or(Ordering::Equal, |tid| tid.cmp(&t.tid)))
    }
}

/// Compares the first `ncols` key columns of two tuples (minus infinity first).
pub fn compare_keys(a: &Tuple<'_>, b: &Tuple<'_>, ncols: usize) -> Result<Ordering, BadKey> {
    match (a.is_minus_infinity(), b.is_minus_infinity()) {
        (true, true) => return Ok(Ordering::Equal),
        (true, false) => return Ok(Ordering::Less),
        (false, true) => return Ok(Ordering::Greater),
        (false, false) => {}
    }
    let (mut ra, mut rb) = (KeyReader::new(a.key), KeyReader::new(b.key));
    for _ in 0..ncols {
        let (x, y) = (
            ra.next_value().ok_or(BadKey)?,
            rb.next_value().ok_or(BadKey)?,
        );
        match x.compare(&y) {
            Ordering::Equal => {}
            other => return Ok(other),
        }
    }
    Ok(Ordering::Equal)
}

/// Compares two tuples by (key, TID): the order of entries and pivots.
pub fn compare_tuples(a: &Tuple<'_>, b: &Tuple<'_>, ncols: usize) -> Result<Ordering, BadKey> {
    if a.is_minus_infinity() || b.is_minus_infinity() {
        return compare_keys(a, b, ncols);
    }
    Ok(compare_keys(a, b, ncols)?.then(a.tid.cmp(&b.tid)))
}

/// Whether the tuple's first `prefix.len()` columns compare `Less`, `Equal` or `Greater`
/// than `prefix` (for scan bounds).
pub fn compare_prefix(t: &Tuple<'_>, prefix: &[Value]) -> Result<Ordering, BadKey> {
    let sk = SearchKey {
        cols: prefix,
        tid: None,
        equal_goes_right: false,
    };
    Ok(sk.compare_raw(t)?.reverse())
}

/// Checks a tuple's key: exactly `ncols` well-formed values of the index's types (or NULL).
pub fn check_key(t: &Tuple<'_>, key_types: &[Type]) -> Result<(), String> {
    if usize::from(t.natts) != key_types.len() {
        return Err(format!(
            "{} key columns, expected {}",
            t.natts,
            key_types.len()
        ));
    }
    let mut r = KeyReader::new(t.key);
    for (i, ty) in key_types.iter().enumerate() {
        let v = r
            .next_value()
            .ok_or_else(|| format!("key column {} is malformed", i + 1))?;
        let ok = match v {
            KeyRef::Null => true,
            KeyRef::Bool(_) => *ty == Type::Bool,
            KeyRef::Int(_) => *ty == Type::Int,
            KeyRef::Float(_) => *ty == Type::Float,
            KeyRef::Text(_) => *ty == Type::Text,
            KeyRef::Bytea(_) => *ty == Type::Bytea,
            KeyRef::Timestamp(_) => *ty == Type::Timestamp,
            KeyRef::Numeric(_) => *ty == Type::Numeric,
            KeyRef::Interval(_) => *ty == Type::Interval,
        };
        if !ok {
            return Err(format!("key column {} is not of type {}", i + 1, ty.name()));
        }
    }
    if !r.at_end() {
        return Err("bytes follow the last key column".into());
    }
    Ok(())
}

/// Formats a key as PostgreSQL's unique-violation detail does (values separated by ", ").
pub fn display_key(key: &[Value]) -> String {
    key.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::page::encode_tuple;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        crate::value::strategy::value(20)
    }

    fn tuple_of(vals: &[Value], tid: Tid) -> Vec<u8> {
        let mut key = Vec::new();
        crate::value::encode_row(vals, &mut key);
        encode_tuple(tid, vals.len() as u8, u32::MAX, &key)
    }

    /// Integers of every encoded width (1 to 4 bytes, and 8), mixed with a few other
    /// values, so that the integer fast path of [`KeyReader::compare_next`] meets both
    /// integers and other types.
    fn mostly_int() -> impl Strategy<Value = Value> {
        prop_oneof![
            4 => prop_oneof![
                any::<i8>().prop_map(i64::from),
                any::<i16>().prop_map(i64::from),
                (-(1i64 << 23)..(1i64 << 23)),
                any::<i32>().prop_map(i64::from),
                any::<i64>(),
            ]
            .prop_map(Value::Int),
            1 => Just(Value::Null),
            1 => any::<i64>().prop_map(Value::Timestamp),
            1 => Just(Value::Text("7".into())),
        ]
    }

    /// Any value, or (half the time) one of [`mostly_int`]'s.
    fn key_value() -> impl Strategy<Value = Value> {
        prop_oneof![value(), mostly_int()]
    }

    proptest! {
        #[test]
        fn encoded_comparison_agrees_with_value_compare(
            a in proptest::collection::vec(key_value(), 1..4),
            b in proptest::collection::vec(key_value(), 1..4),
        ) {
            let n = a.len().min(b.len());
            let (a, b) = (&a[..n], &b[..n]);
            let expected = a.iter().zip(b).map(|(x, y)| x.compare(y)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal);
            let tb = tuple_of(b, Tid::new(1, 1));
            let t = Tuple::parse(&tb).unwrap();
            let sk = SearchKey { cols: a, tid: None, equal_goes_right: false };
            prop_assert_eq!(sk.compare_raw(&t).unwrap(), expected);
            let ta = tuple_of(a, Tid::new(1, 1));
            prop_assert_eq!(compare_keys(&Tuple::parse(&ta).unwrap(), &t, n).unwrap(), expected);
            // An integer entry cut short is a bad key once the comparison reaches it.
            if let Value::Int(_) = b[n - 1] {
                let cut = Tuple::parse(&tb[..tb.len() - 1]).unwrap();
                let decided_before = a[..n - 1].iter().zip(b).any(|(x, y)| x.compare(y).is_ne());
                if decided_before {
                    prop_assert_eq!(sk.compare_raw(&cut).unwrap(), expected);
                } else {
                    prop_assert!(sk.compare_raw(&cut).is_err());
                }
            }
        }

        #[test]
        fn garbage_keys_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), natts in 0u8..4) {
            let tb = encode_tuple(Tid::new(0, 1), natts, 0, &bytes);
            let t = Tuple::parse(&tb).unwrap();
            let cols = [Value::Int(1), Value::Text("x".into()), Value::Null];
            let sk = SearchKey { cols: &cols[..usize::from(natts).min(3)], tid: Some(Tid::new(0, 1)), equal_goes_right: true };
            let _ = sk.compare(&t);
            let _ = compare_tuples(&t, &t, usize::from(natts));
            let _ = check_key(&t, &[Type::Int, Type::Text]);
        }
    }

    #[test]
    fn ties_break_on_the_tid_and_prefixes_match_every_tid() {
        let cols = [Value::Int(5), Value::Text("a".into())];
        let tb = tuple_of(&cols, Tid::new(3, 7));
        let t = Tuple::parse(&tb).unwrap();
        let exact = |tid, right| SearchKey {
            cols: &cols,
            tid: Some(tid),
            equal_goes_right: right,
        };
        assert_eq!(
            exact(Tid::new(3, 7), false).compare(&t).unwrap(),
            Ordering::Equal
        );
        assert_eq!(
            exact(Tid::new(3, 7), true).compare(&t).unwrap(),
            Ordering::Greater
        );
        assert_eq!(
            exact(Tid::new(3, 6), false).compare(&t).unwrap(),
            Ordering::Less
        );
        let prefix = SearchKey {
            cols: &cols[..1],
            tid: None,
            equal_goes_right: false,
        };
        assert_eq!(prefix.compare(&t).unwrap(), Ordering::Equal);
        assert_eq!(
            compare_prefix(&t, &[Value::Int(6)]).unwrap(),
            Ordering::Less
        );
        let minus_inf = encode_tuple(Tid::new(0, 0), 0, 9, &[]);
        assert_eq!(
            prefix.compare(&Tuple::parse(&minus_inf).unwrap()).unwrap(),
            Ordering::Greater
        );
    }
}
