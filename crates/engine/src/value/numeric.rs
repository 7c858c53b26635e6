//! `numeric`: exact decimal numbers of any precision, kept in one byte form that is both
//! their storage and their sort key, so that the B-tree orders them by `memcmp` without
//! decoding (no allocation on the descent path), as it does every other type.
//!
//! ```text
//! display scale u16 LE | sign | exponent u32 BE | digit pairs ...            | end
//!                      | 0x80 (zero: nothing follows)
//!                      | 0xC0 | e + 2^31        | one byte per pair: 1..=100  | 0x00
//!                      | 0x40 | !(e + 2^31)     | 0xFF - (1..=100)            | 0xFF
//! ```
//!
//! A non-zero value is `±0.d1 d2 … dn × 10^e` with `d1` and `dn` not zero (normalized, so
//! `1.0` and `1.00` share everything but the display scale, and compare equal); its digits
//! go in pairs (the last padded with a zero). Negative values invert the exponent and the
//! digits, so that byte order is numeric order; the end byte sorts a shorter digit string
//! before a longer one with the same prefix. The display scale (digits shown after the
//! point, PostgreSQL's `dscale`) comes first and is skipped by comparisons.
//!
//! ## Rules
//! - Every `Numeric` holds a valid encoding: built by [`Numeric::from_digits`], or decoded
//!   by [`Numeric::decode`], which checks every byte (input from disk; never panics).
//! - The value has no more fractional digits than its display scale: `from_digits` takes
//!   the digits of `value × 10^scale`, an integer.

use std::cmp::Ordering;
use std::fmt;

/// Most significant digits a numeric holds (PostgreSQL's limit: 131072 before the point
/// and 16383 after).
pub const MAX_DIGITS: usize = 131_072 + 16_383;
/// The largest display scale (PostgreSQL's `NUMERIC_MAX_DISPLAY_SCALE` is 1000; its
/// storage allows 16383).
pub const MAX_SCALE: u16 = 16_383;

const SIGN_NEG: u8 = 0x40;
const SIGN_ZERO: u8 = 0x80;
const SIGN_POS: u8 = 0xC0;
const SIGN_NEG_INF: u8 = 0x20;
const SIGN_POS_INF: u8 = 0xE0;
const SIGN_NAN: u8 = 0xF0;

/// A numeric that is not a number: PostgreSQL's `NaN`, `Infinity` and `-Infinity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    NaN,
    PosInf,
    NegInf,
}

impl Special {
    fn sign_byte(self) -> u8 {
        match self {
            Special::NaN => SIGN_NAN,
            Special::PosInf => SIGN_POS_INF,
            Special::NegInf => SIGN_NEG_INF,
        }
    }
}
const EXP_BIAS: i64 = 1 << 31;

/// An exact decimal number with a display scale.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Numeric {
    bytes: Vec<u8>,
}

/// Why a numeric cannot be built or decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NumericError {
    #[error("value overflows numeric format")]
    Overflow,
    #[error("invalid numeric encoding: {0}")]
    Corrupt(&'static str),
}

impl Numeric {
    /// `±digits × 10^-scale`: `digits` are decimal digit values (0..=9), most significant
    /// first, leading and trailing zeros allowed.
    pub fn from_digits(negative: bool, digits: &[u8], scale: u16) -> Result<Numeric, NumericError> {
        debug_assert!(digits.iter().all(|&d| d <= 9));
        if scale > MAX_SCALE {
            return Err(NumericError::Overflow);
        }
        let mut bytes = Vec::with_capacity(8 + digits.len() / 2);
        bytes.extend_from_slice(&scale.to_le_bytes());
        let first = digits.iter().position(|&d| d != 0);
        let Some(first) = first else {
            bytes.push(SIGN_ZERO);
            return Ok(Numeric { bytes });
        };
        let last = digits.iter().rposition(|&d| d != 0).expect("a non-zero digit exists");
        let significant = &digits[first..=last];
        if significant.len() > MAX_DIGITS {
            return Err(NumericError::Overflow);
        }
        // value = 0.significant × 10^e, with e the count of digits before the point.
        let before_point = i64::try_from(digits.len() - first).expect("bounded by MAX_DIGITS")
            - i64::from(scale);
        if before_point > 131_072 {
            return Err(NumericError::Overflow);
        }
        let biased = u32::try_from(before_point + EXP_BIAS).expect("a bounded exponent");
        let negative = negative && !significant.is_empty();
        bytes.push(if negative { SIGN_NEG } else { SIGN_POS });
        let exp = if negative { !biased } else { biased };
        bytes.extend_from_slice(&exp.to_be_bytes());
        for pair in significant.chunks(2) {
            let p = pair[0] * 10 + pair.get(1).copied().unwrap_or(0) + 1;
            bytes.push(if negative { 0xFF - p } else { p });
        }
        bytes.push(if negative { 0xFF } else { 0x00 });
        Ok(Numeric { bytes })
    }

    /// `NaN`, `Infinity` or `-Infinity`.
    pub fn special(kind: Special) -> Numeric {
        Numeric {
            bytes: vec![0, 0, kind.sign_byte()],
        }
    }

    /// Which special value this is, if it is one (`None` for every finite number).
    pub fn as_special(&self) -> Option<Special> {
        match self.bytes[2] {
            SIGN_NAN => Some(Special::NaN),
            SIGN_POS_INF => Some(Special::PosInf),
            SIGN_NEG_INF => Some(Special::NegInf),
            _ => None,
        }
    }

    /// Zero with display scale 0.
    pub fn zero() -> Numeric {
        Numeric::from_digits(false, &[], 0).expect("zero fits")
    }

    /// The display scale: digits shown after the point.
    pub fn scale(&self) -> u16 {
        u16::from_le_bytes([self.bytes[0], self.bytes[1]])
    }

    pub fn is_negative(&self) -> bool {
        self.bytes[2] == SIGN_NEG
    }

    pub fn is_zero(&self) -> bool {
        self.bytes[2] == SIGN_ZERO
    }

    /// The digits of `|value| × 10^scale` (no leading zeros; `[0]` for zero, and for the
    /// special values, which callers check first).
    pub fn scaled_digits(&self) -> Vec<u8> {
        if self.is_zero() || self.as_special().is_some() {
            return vec![0];
        }
        let (exp, significant) = self.parts();
        // |value| × 10^scale = significant × 10^(exp - len + scale); valid encodings keep
        // that power at or above zero.
        let len = i64::try_from(significant.len()).expect("bounded by MAX_DIGITS");
        let zeros = usize::try_from(exp + i64::from(self.scale()) - len)
            .expect("a valid encoding's digits fit its scale");
        let mut out = significant;
        out.resize(out.len() + zeros, 0);
        out
    }

    /// The exponent and the significant digits (not for zero).
    fn parts(&self) -> (i64, Vec<u8>) {
        let negative = self.is_negative();
        let raw = u32::from_be_bytes([self.bytes[3], self.bytes[4], self.bytes[5], self.bytes[6]]);
        let exp = i64::from(if negative { !raw } else { raw }) - EXP_BIAS;
        let pairs = &self.bytes[7..self.bytes.len() - 1];
        let mut digits = Vec::with_capacity(pairs.len() * 2);
        for &b in pairs {
            let p = if negative { 0xFF - b } else { b } - 1;
            digits.push(p / 10);
            digits.push(p % 10);
        }
        if digits.last() == Some(&0) {
            digits.pop();
        }
        (exp, digits)
    }

    /// The same value shown with another display scale (no rounding: `scale` must keep every
    /// significant digit, which the caller rounded to first).
    pub fn with_scale(&self, scale: u16) -> Result<Numeric, NumericError> {
        let digits = self.scaled_digits();
        let old = self.scale();
        let mut d = digits;
        if scale >= old {
            d.resize(d.len() + usize::from(scale - old), 0);
        } else {
            let cut = usize::from(old - scale).min(d.len());
            if d[d.len() - cut..].iter().any(|&x| x != 0) {
                return Err(NumericError::Corrupt("with_scale would drop digits"));
            }
            d.truncate(d.len() - cut);
        }
        Numeric::from_digits(self.is_negative(), &d, scale)
    }

    /// The encoded form (storage and sort key).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Checks and takes an encoded form.
    pub fn decode(bytes: &[u8]) -> Result<Numeric, NumericError> {
        check_encoding(bytes)?;
        Ok(Numeric {
            bytes: bytes.to_vec(),
        })
    }
}

/// Compares two encoded forms: by value, ignoring the display scale.
pub fn compare_encoded(a: &[u8], b: &[u8]) -> Ordering {
    a.get(2..).cmp(&b.get(2..))
}

impl Ord for Numeric {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_encoded(&self.bytes, &other.bytes)
    }
}

impl PartialOrd for Numeric {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Validates an encoded form (see the module header), never panicking.
pub fn check_encoding(bytes: &[u8]) -> Result<(), NumericError> {
    let bad = NumericError::Corrupt;
    let [s0, s1, sign, rest @ ..] = bytes else {
        return Err(bad("too short"));
    };
    let scale = u16::from_le_bytes([*s0, *s1]);
    if scale > MAX_SCALE {
        return Err(bad("display scale out of range"));
    }
    match *sign {
        SIGN_ZERO if rest.is_empty() => return Ok(()),
        SIGN_ZERO => return Err(bad("bytes after zero")),
        SIGN_NAN | SIGN_POS_INF | SIGN_NEG_INF if rest.is_empty() && scale == 0 => return Ok(()),
        SIGN_NAN | SIGN_POS_INF | SIGN_NEG_INF => return Err(bad("bytes after a special")),
        SIGN_POS | SIGN_NEG => {}
        _ => return Err(bad("bad sign byte")),
    }
    let negative = *sign == SIGN_NEG;
    let [e0, e1, e2, e3, pairs @ .., end] = rest else {
        return Err(bad("too short"));
    };
    if *end != if negative { 0xFF } else { 0x00 } || pairs.is_empty() {
        return Err(bad("bad end or no digits"));
    }
    if pairs.len() > MAX_DIGITS.div_ceil(2) {
        return Err(bad("too many digits"));
    }
    let pair = |b: u8| -> Option<u8> {
        let p = if negative { 0xFF - b } else { b };
        (1..=100).contains(&p).then_some(p - 1)
    };
    let mut ndigits = 0i64;
    for (i, &b) in pairs.iter().enumerate() {
        let p = pair(b).ok_or(bad("bad digit pair"))?;
        if i == 0 && p / 10 == 0 {
            return Err(bad("leading zero"));
        }
        ndigits += 2;
        if i == pairs.len() - 1 {
            if p == 0 {
                return Err(bad("trailing zero pair"));
            }
            if p % 10 == 0 {
                ndigits -= 1;
            }
        }
    }
    let raw = u32::from_be_bytes([*e0, *e1, *e2, *e3]);
    let exp = i64::from(if negative { !raw } else { raw }) - EXP_BIAS;
    if exp > 131_072 || exp + i64::from(scale) < ndigits {
        return Err(bad("digits beyond the display scale or exponent out of range"));
    }
    Ok(())
}

impl fmt::Display for Numeric {
    /// PostgreSQL's output: all display-scale digits, no exponent (`-12.50`, `0.001`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_special() {
            Some(Special::NaN) => return f.write_str("NaN"),
            Some(Special::PosInf) => return f.write_str("Infinity"),
            Some(Special::NegInf) => return f.write_str("-Infinity"),
            None => {}
        }
        let digits = self.scaled_digits();
        let scale = usize::from(self.scale());
        let mut s = String::with_capacity(digits.len() + 3);
        if self.is_negative() {
            s.push('-');
        }
        let int_len = digits.len().saturating_sub(scale);
        if int_len == 0 {
            s.push('0');
        } else {
            s.extend(digits[..int_len].iter().map(|&d| char::from(b'0' + d)));
        }
        if scale > 0 {
            s.push('.');
            for _ in digits.len()..scale {
                s.push('0');
            }
            let frac_start = digits.len().saturating_sub(scale);
            s.extend(digits[frac_start..].iter().map(|&d| char::from(b'0' + d)));
        }
        f.write_str(&s)
    }
}

impl fmt::Debug for Numeric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Numeric({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn num(neg: bool, digits: &str, scale: u16) -> Numeric {
        let d: Vec<u8> = digits.bytes().map(|b| b - b'0').collect();
        Numeric::from_digits(neg, &d, scale).unwrap()
    }

    #[test]
    fn displays_as_postgresql() {
        assert_eq!(num(false, "12345", 2).to_string(), "123.45");
        assert_eq!(num(true, "1250", 2).to_string(), "-12.50");
        assert_eq!(num(false, "1", 3).to_string(), "0.001");
        assert_eq!(num(false, "0", 2).to_string(), "0.00");
        assert_eq!(num(true, "0", 0).to_string(), "0");
        assert_eq!(num(false, "1000", 0).to_string(), "1000");
        assert_eq!(num(false, "001000", 1).to_string(), "100.0");
    }

    #[test]
    fn orders_by_value_whatever_the_scale() {
        let vals = [
            num(true, "1000", 0),
            num(true, "123", 1),
            num(true, "12", 0),
            num(true, "1", 3),
            num(false, "0", 4),
            num(false, "1", 3),
            num(false, "12", 0),
            num(false, "1200", 2),
            num(false, "123", 1),
            num(false, "1000", 0),
        ];
        for w in vals.windows(2) {
            assert!(w[0] <= w[1], "{} <= {}", w[0], w[1]);
        }
        assert_eq!(num(false, "1200", 2).cmp(&num(false, "12", 0)), Ordering::Equal);
        assert_ne!(num(false, "1200", 2), num(false, "12", 0), "the scale differs");
    }

    #[test]
    fn specials_order_as_postgresql_and_round_trip() {
        let ninf = Numeric::special(Special::NegInf);
        let inf = Numeric::special(Special::PosInf);
        let nan = Numeric::special(Special::NaN);
        let order = [ninf.clone(), num(true, "1000", 0), num(false, "0", 0), num(false, "9", 0), inf.clone(), nan.clone()];
        for w in order.windows(2) {
            assert!(w[0] < w[1], "{} < {}", w[0], w[1]);
        }
        for (v, text) in [(ninf, "-Infinity"), (inf, "Infinity"), (nan, "NaN")] {
            assert_eq!(v.to_string(), text);
            assert_eq!(Numeric::decode(v.as_bytes()).unwrap(), v);
            assert!(!v.is_zero() && !v.is_negative());
        }
        assert!(Numeric::decode(&[0, 0, SIGN_NAN, 1]).is_err());
        assert!(Numeric::decode(&[1, 0, SIGN_POS_INF]).is_err());
    }

    proptest! {
        #[test]
        fn round_trips_and_orders_as_i128(a in any::<i64>(), sa in 0u16..12, b in any::<i64>(), sb in 0u16..12) {
            let make = |v: i64, s: u16| {
                let digits: Vec<u8> = v.unsigned_abs().to_string().bytes().map(|c| c - b'0').collect();
                Numeric::from_digits(v < 0, &digits, s).unwrap()
            };
            let (x, y) = (make(a, sa), make(b, sb));
            prop_assert_eq!(Numeric::decode(x.as_bytes()).unwrap(), x.clone());
            // a / 10^sa against b / 10^sb, exactly.
            let lhs = i128::from(a) * 10i128.pow(u32::from(sb));
            let rhs = i128::from(b) * 10i128.pow(u32::from(sa));
            prop_assert_eq!(x.cmp(&y), lhs.cmp(&rhs));
            let back: String = x.scaled_digits().iter().map(|d| char::from(b'0' + d)).collect();
            prop_assert_eq!(back, a.unsigned_abs().to_string());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(n) = Numeric::decode(&bytes) {
                let _ = n.to_string();
                let _ = n.scaled_digits();
            }
        }
    }
}
