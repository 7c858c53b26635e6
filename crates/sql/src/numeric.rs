//! `numeric` arithmetic with PostgreSQL's result scales (`numeric.c`): the engine keeps a
//! numeric as its own sortable bytes ([`Numeric`]); here a value becomes an integer
//! mantissa and a display scale (`value = mantissa × 10^-scale`), exact for any size.
//!
//! ## Rules
//! - `+`, `-`: the larger scale; `*`: the sum of the scales; `/`: PostgreSQL's
//!   `select_div_scale` (at least 16 significant digits, at least either input's scale, at
//!   most 1000), rounded half away from zero; `%`: the larger scale, the dividend's sign.
//! - Rounding is always half away from zero, as PostgreSQL's numeric rounds.
//! - `numeric(p, s)` rounds to `s` and refuses (22003) a value needing more than `p - s`
//!   digits before the point.
//! - `NaN` and `±Infinity` follow PostgreSQL's rules (`numeric.c`): NaN wins over
//!   everything, `Inf - Inf` and `Inf × 0` are NaN, a finite value over infinity is 0.

use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_traits::{Signed, ToPrimitive, Zero};
use quire_engine::{Numeric, NumericError, NumericSpecial as Special, SqlState};

use crate::error::{Result, SqlError};

pub(crate) mod math;

/// PostgreSQL's `NUMERIC_MIN_SIG_DIGITS` and `NUMERIC_MAX_DISPLAY_SCALE`.
const MIN_SIG_DIGITS: i64 = 16;
const MAX_DISPLAY_SCALE: i64 = 1000;
/// The largest display scale numeric stores (`NUMERIC_DSCALE_MAX`).
const MAX_SCALE: i64 = 16_383;
/// The lowest `round`/`trunc` scale that can matter: numeric's largest weight.
const MIN_ROUND_SCALE: i64 = -131_072;

fn overflow(e: &NumericError) -> SqlError {
    match e {
        NumericError::Overflow => SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value overflows numeric format",
        ),
        NumericError::Corrupt(what) => {
            SqlError::new(SqlState::INTERNAL_ERROR, format!("numeric: {what}"))
        }
    }
}

/// A numeric as mantissa and scale.
fn parts(n: &Numeric) -> (BigInt, u16) {
    let digits = n.scaled_digits();
    let m = BigInt::from_radix_be(Sign::Plus, &digits, 10).unwrap_or_default();
    (if n.is_negative() { -m } else { m }, n.scale())
}

/// `mantissa × 10^-scale` as a numeric.
fn from_parts(m: &BigInt, scale: i64) -> Result<Numeric> {
    let scale = u16::try_from(scale).map_err(|_| {
        SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "value overflows numeric format",
        )
    })?;
    let (sign, digits) = m.to_radix_be(10);
    Numeric::from_digits(sign == Sign::Minus, &digits, scale).map_err(|e| overflow(&e))
}

/// A length as i64 (lengths here are bounded by the numeric's digit limit).
fn len_i64(n: usize) -> i64 {
    i64::try_from(n).expect("a numeric's length fits i64")
}

fn pow10(n: i64) -> BigInt {
    num_traits::pow(BigInt::from(10), usize::try_from(n).unwrap_or(0))
}

/// `num / den` rounded half away from zero (`den` not zero).
fn div_round(num: &BigInt, den: &BigInt) -> BigInt {
    let (q, r) = num.div_rem(den);
    if (r.abs() * 2) >= den.abs() {
        if (num.sign() == Sign::Minus) == (den.sign() == Sign::Minus) {
            q + 1
        } else {
            q - 1
        }
    } else {
        q
    }
}

/// `m × 10^-from` at scale `to`, rounded half away from zero when digits go.
fn rescale(m: &BigInt, from: i64, to: i64) -> BigInt {
    if to >= from {
        m * pow10(to - from)
    } else {
        div_round(m, &pow10(from - to))
    }
}

/// Parses PostgreSQL's numeric input (`numeric_in`): blanks around; `NaN`, `Infinity`;
/// `[+-]digits[.digits][e[+-]digits]` with single underscores between digits, or an
/// integer in `0x`, `0o`, `0b` form. 22P02 else; 22003 beyond numeric's limits (131072
/// digits before the point, 16383 after).
pub(crate) fn parse(text: &str) -> Result<Numeric> {
    let bad = || SqlError::bad_input("numeric", text);
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    if let Some(special) = parse_special(t) {
        return Ok(Numeric::special(special));
    }
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let prefix = body.get(..2).map(str::to_ascii_lowercase);
    let radix = match prefix.as_deref() {
        Some("0x") => 16,
        Some("0o") => 8,
        Some("0b") => 2,
        _ => 10,
    };
    if radix != 10 {
        let digits = strip_underscores(&body[2..], radix, true).ok_or_else(bad)?;
        // Each digit is at most 4 bits: 0.31 decimal digits per bit bounds the size.
        if digits.len() > 131_072 * 10 / 12 {
            return Err(overflow(&NumericError::Overflow));
        }
        let m = BigInt::parse_bytes(digits.as_bytes(), radix).ok_or_else(bad)?;
        return from_parts(&if negative { -m } else { m }, 0);
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => {
            let e = &body[i + 1..];
            let (esign, edigits) = match e.as_bytes().first() {
                Some(b'-') => (-1, &e[1..]),
                Some(b'+') => (1, &e[1..]),
                _ => (1, e),
            };
            let edigits = strip_underscores(edigits, 10, false).ok_or_else(bad)?;
            // Beyond any exponent numeric can hold: refused before converting.
            let e: i64 = if edigits.len() > 9 {
                i64::MAX / 2
            } else {
                edigits.parse().map_err(|_| bad())?
            };
            (&body[..i], esign * e)
        }
        None => (body, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let int_part = strip_underscores(int_part, 10, false).ok_or_else(bad)?;
    let frac_part = strip_underscores(frac_part, 10, false).ok_or_else(bad)?;
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(bad());
    }
    digits_to_numeric(negative, &int_part, &frac_part, exponent)
}

/// Digits of `radix` with single underscores between them (and, after a `0x`-style
/// prefix, before the first); `None` for anything else.
fn strip_underscores(s: &str, radix: u32, leading_ok: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let before = i > 0 && char::from(bytes[i - 1]).is_digit(radix) || i == 0 && leading_ok;
            let after = bytes
                .get(i + 1)
                .is_some_and(|&n| char::from(n).is_digit(radix));
            if !(before && after) {
                return None;
            }
            continue;
        }
        if !char::from(b).is_digit(radix) {
            return None;
        }
        out.push(char::from(b));
    }
    if leading_ok && out.is_empty() {
        return None;
    }
    Some(out)
}

/// `±int_part.frac_part × 10^exponent` (decimal digits only), within numeric's limits.
fn digits_to_numeric(
    negative: bool,
    int_part: &str,
    frac_part: &str,
    exponent: i64,
) -> Result<Numeric> {
    let int_digits = len_i64(int_part.trim_start_matches('0').len());
    let scale = len_i64(frac_part.len()) - exponent;
    let too_big = int_digits + exponent > 131_072
        && int_part.bytes().chain(frac_part.bytes()).any(|b| b != b'0');
    if scale > MAX_SCALE || too_big {
        return Err(overflow(&NumericError::Overflow));
    }
    let digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .collect();
    let m = BigInt::from_radix_be(Sign::Plus, &digits, 10).unwrap_or_default();
    let m = if negative { -m } else { m };
    if scale >= 0 {
        from_parts(&m, scale)
    } else if m.is_zero() {
        from_parts(&m, 0)
    } else {
        from_parts(&(m * pow10(-scale)), 0)
    }
}

/// `NaN`, `[+-]Infinity` and `[+-]inf`, in any case (PostgreSQL's `numeric_in`).
fn parse_special(t: &str) -> Option<Special> {
    let lower = t.to_ascii_lowercase();
    match lower.as_str() {
        "nan" => Some(Special::NaN),
        "infinity" | "+infinity" | "inf" | "+inf" => Some(Special::PosInf),
        "-infinity" | "-inf" => Some(Special::NegInf),
        _ => None,
    }
}

pub(crate) fn nan() -> Numeric {
    Numeric::special(Special::NaN)
}

/// Infinity with the given sign (`true`: negative).
fn inf(negative: bool) -> Numeric {
    Numeric::special(if negative {
        Special::NegInf
    } else {
        Special::PosInf
    })
}

/// -1, 0 or 1 (infinities included; not for NaN).
pub(crate) fn sign(n: &Numeric) -> i32 {
    match n.as_special() {
        Some(Special::NegInf) => -1,
        None if n.is_zero() => 0,
        None if n.is_negative() => -1,
        Some(_) | None => 1,
    }
}

pub(crate) fn from_i64(v: i64) -> Numeric {
    from_parts(&BigInt::from(v), 0).expect("an i64 fits a numeric")
}

/// float8 to numeric, as PostgreSQL: the float's 15 significant digits (`DBL_DIG`).
pub(crate) fn from_f64(v: f64) -> Result<Numeric> {
    if v.is_nan() {
        return Ok(nan());
    }
    if v.is_infinite() {
        return Ok(inf(v < 0.0));
    }
    parse(&format!("{v:.14e}")).map(|n| normalize_scale(&n))
}

/// The same value with no trailing fractional zeros (a float's digits carry no scale).
fn normalize_scale(n: &Numeric) -> Numeric {
    let (m, s) = parts(n);
    let mut m = m;
    let mut s = i64::from(s);
    while s > 0 && (&m % 10u32).is_zero() {
        m /= 10u32;
        s -= 1;
    }
    from_parts(&m, s).unwrap_or_else(|_| n.clone())
}

/// numeric to an integer type named `type_name`: rounded half away from zero; 0A000 for
/// NaN and infinities, `None` beyond i64.
pub(crate) fn to_i64(n: &Numeric, type_name: &str) -> Result<Option<i64>> {
    match n.as_special() {
        Some(Special::NaN) => Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("cannot convert NaN to {type_name}"),
        )),
        Some(_) => Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("cannot convert infinity to {type_name}"),
        )),
        None => {
            let (m, s) = parts(n);
            Ok(rescale(&m, i64::from(s), 0).to_i64())
        }
    }
}

/// `m × 10^-s` as the nearest double (±inf beyond its range).
fn to_f64_parts(m: &BigInt, s: i64) -> f64 {
    format!("{m}e{}", -s).parse().unwrap_or(f64::NAN)
}

pub(crate) fn to_f64(n: &Numeric) -> f64 {
    match n.as_special() {
        Some(Special::NaN) => f64::NAN,
        Some(Special::PosInf) => f64::INFINITY,
        Some(Special::NegInf) => f64::NEG_INFINITY,
        None => n.to_string().parse().unwrap_or(f64::NAN),
    }
}

/// The arithmetic operators on numerics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

fn division_by_zero() -> SqlError {
    SqlError::new(SqlState::DIVISION_BY_ZERO, "division by zero")
}

/// An operator with a NaN or an infinity among its operands (`numeric.c`'s special cases).
fn arith_special(op: Op, lhs: &Numeric, rhs: &Numeric) -> Result<Numeric> {
    let (a, b) = (lhs.as_special(), rhs.as_special());
    if a == Some(Special::NaN) || b == Some(Special::NaN) {
        return Ok(nan());
    }
    let (sa, sb) = (sign(lhs), sign(rhs));
    Ok(match op {
        Op::Add | Op::Sub => {
            let sb = if op == Op::Sub { -sb } else { sb };
            match (a.is_some(), b.is_some()) {
                (true, true) if sa != sb => nan(),
                (true, _) => inf(sa < 0),
                _ => inf(sb < 0),
            }
        }
        Op::Mul if sa == 0 || sb == 0 => nan(),
        Op::Mul => inf(sa * sb < 0),
        Op::Div | Op::Mod if sb == 0 => return Err(division_by_zero()),
        Op::Div if a.is_some() && b.is_some() => nan(),
        Op::Div if a.is_some() => inf(sa * sb < 0),
        Op::Div => Numeric::zero(),
        Op::Mod if a.is_some() => nan(),
        Op::Mod => lhs.clone(),
    })
}

pub(crate) fn arith(op: Op, lhs: &Numeric, rhs: &Numeric) -> Result<Numeric> {
    if lhs.as_special().is_some() || rhs.as_special().is_some() {
        return arith_special(op, lhs, rhs);
    }
    let (ma, sa) = parts(lhs);
    let (mb, sb) = parts(rhs);
    let (sa, sb) = (i64::from(sa), i64::from(sb));
    let scale = sa.max(sb);
    match op {
        Op::Add => from_parts(&(rescale(&ma, sa, scale) + rescale(&mb, sb, scale)), scale),
        Op::Sub => from_parts(&(rescale(&ma, sa, scale) - rescale(&mb, sb, scale)), scale),
        // The product's scale is capped at numeric's largest (PostgreSQL's mul_var).
        Op::Mul if sa + sb > MAX_SCALE => {
            from_parts(&rescale(&(ma * mb), sa + sb, MAX_SCALE), MAX_SCALE)
        }
        Op::Mul => from_parts(&(ma * mb), sa + sb),
        Op::Div | Op::Mod if mb.is_zero() => Err(division_by_zero()),
        Op::Div => {
            let rscale = div_scale(lhs, rhs);
            // lhs / rhs × 10^rscale = ma × 10^(rscale - sa + sb) / mb.
            let shift = rscale - sa + sb;
            let quotient = if shift >= 0 {
                div_round(&(ma * pow10(shift)), &mb)
            } else {
                div_round(&ma, &(mb * pow10(-shift)))
            };
            from_parts(&quotient, rscale)
        }
        Op::Mod => {
            // Truncated remainder: the dividend's sign, as PostgreSQL's mod.
            let rem = rescale(&ma, sa, scale) % rescale(&mb, sb, scale);
            from_parts(&rem, scale)
        }
    }
}

/// PostgreSQL's `select_div_scale`.
fn div_scale(a: &Numeric, b: &Numeric) -> i64 {
    let (w1, d1) = weight_and_first_digit(a);
    let (w2, d2) = weight_and_first_digit(b);
    let mut qweight = w1 - w2;
    if d1 <= d2 {
        qweight -= 1;
    }
    (MIN_SIG_DIGITS - qweight * 4)
        .max(i64::from(a.scale()))
        .max(i64::from(b.scale()))
        .clamp(0, MAX_DISPLAY_SCALE)
}

/// The weight of the first non-zero base-10000 digit, and that digit (PostgreSQL's
/// `NBASE` representation), or (0, 0) for zero.
fn weight_and_first_digit(n: &Numeric) -> (i64, u32) {
    if n.is_zero() {
        return (0, 0);
    }
    let digits = n.scaled_digits();
    // value = 0.d1 d2 … × 10^e, e the number of digits before the point.
    let e = len_i64(digits.len()) - i64::from(n.scale());
    let weight = (e - 1).div_euclid(4);
    let first_len = usize::try_from((e - 1).rem_euclid(4) + 1).expect("1..=4");
    let mut first = 0u32;
    for i in 0..first_len {
        first = first * 10 + u32::from(digits.get(i).copied().unwrap_or(0));
    }
    (weight, first)
}

pub(crate) fn negate(n: &Numeric) -> Result<Numeric> {
    match n.as_special() {
        Some(Special::NaN) => return Ok(nan()),
        Some(Special::PosInf) => return Ok(inf(true)),
        Some(Special::NegInf) => return Ok(inf(false)),
        None => {}
    }
    let (m, s) = parts(n);
    from_parts(&-m, i64::from(s))
}

pub(crate) fn abs(n: &Numeric) -> Result<Numeric> {
    if n.as_special().is_some() {
        return Ok(if n.as_special() == Some(Special::NaN) {
            nan()
        } else {
            inf(false)
        });
    }
    let (m, s) = parts(n);
    from_parts(&m.abs(), i64::from(s))
}

/// `round(n, digits)`: half away from zero; negative `digits` round left of the point.
pub(crate) fn round(n: &Numeric, digits: i64) -> Result<Numeric> {
    if n.as_special().is_some() {
        return Ok(n.clone());
    }
    let (m, s) = parts(n);
    let s = i64::from(s);
    let digits = digits.clamp(MIN_ROUND_SCALE, MAX_SCALE);
    let rounded = rescale(&m, s, digits);
    if digits >= 0 {
        from_parts(&rounded, digits)
    } else {
        from_parts(&(rounded * pow10(-digits)), 0)
    }
}

/// `numeric(precision, scale)`'s assignment: rounded to `scale`, at most
/// `precision - scale` digits before the point.
pub(crate) fn apply_typmod(n: &Numeric, precision: u16, scale: u16) -> Result<Numeric> {
    match n.as_special() {
        Some(Special::NaN) => return Ok(n.clone()),
        Some(_) => {
            return Err(SqlError::new(
                SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
                "numeric field overflow",
            )
            .with_detail(format!(
                "A field with precision {precision}, scale {scale} cannot hold an infinite value."
            )))
        }
        None => {}
    }
    let r = round(n, i64::from(scale))?;
    let int_digits = r.scaled_digits().len().saturating_sub(usize::from(scale));
    let limit = usize::from(precision - scale.min(precision));
    if !r.is_zero() && int_digits > limit {
        return Err(SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "numeric field overflow",
        )
        .with_detail(format!(
            "A field with precision {precision}, scale {scale} must round to an absolute \
             value less than {}.",
            if limit == 0 {
                "1".to_string()
            } else {
                format!("10^{limit}")
            }
        )));
    }
    Ok(r)
}

/// PostgreSQL's binary `numeric` (`numeric_send`): ndigits, weight, sign, dscale (i16s),
/// then base-10000 digits.
pub fn to_binary(n: &Numeric) -> Vec<u8> {
    let scale = i64::from(n.scale());
    let (m, _) = parts(n);
    let mut out = Vec::new();
    if let Some(special) = n.as_special() {
        let sign: u16 = match special {
            Special::NaN => 0xC000,
            Special::PosInf => 0xD000,
            Special::NegInf => 0xF000,
        };
        for v in [0u16, 0, sign, 0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        return out;
    }
    if m.is_zero() {
        for v in [0i16, 0, 0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&(scale as i16).to_be_bytes());
        return out;
    }
    // Align the fraction to whole base-10000 digits, then split the integer in groups.
    let pad = (4 - scale.rem_euclid(4)) % 4;
    let aligned = m.abs() * pow10(pad);
    let frac_groups = (scale + pad) / 4;
    let mut groups: Vec<i16> = Vec::new();
    let mut rest = aligned;
    let base = BigInt::from(10_000);
    while !rest.is_zero() {
        let (q, r) = rest.div_rem(&base);
        groups.push(r.to_i16().expect("a base-10000 digit"));
        rest = q;
    }
    groups.reverse();
    // weight of the first group: groups before the point - 1.
    let mut weight = len_i64(groups.len()) - frac_groups - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    let sign: u16 = if n.is_negative() { 0x4000 } else { 0 };
    // numeric_send's counts are 16-bit, as PostgreSQL's own (which only the largest
    // unconstrained numerics exceed).
    out.extend_from_slice(
        &i16::try_from(groups.len())
            .unwrap_or(i16::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(&(weight as i16).to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&(scale as i16).to_be_bytes());
    for g in groups {
        out.extend_from_slice(&g.to_be_bytes());
    }
    out
}

/// The inverse of [`to_binary`] (`numeric_recv`); 22P03 on malformed bytes.
pub fn from_binary(b: &[u8]) -> Result<Numeric> {
    let bad = || {
        SqlError::new(
            SqlState::INVALID_BINARY_REPRESENTATION,
            "invalid binary numeric",
        )
    };
    let word = |i: usize| -> Result<i16> {
        let bytes = b.get(i * 2..i * 2 + 2).ok_or_else(bad)?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    };
    let ndigits = usize::try_from(word(0)?).map_err(|_| bad())?;
    let weight = i64::from(word(1)?);
    let sign = word(2)? as u16;
    let dscale = i64::from(word(3)?);
    if b.len() != 8 + ndigits * 2 || !(0..=i64::from(u16::MAX >> 2)).contains(&dscale) {
        return Err(bad());
    }
    match sign {
        0xC000 => return Ok(nan()),
        0xD000 => return Ok(inf(false)),
        0xF000 => return Ok(inf(true)),
        0 | 0x4000 => {}
        _ => return Err(bad()),
    }
    let mut m = BigInt::zero();
    for i in 0..ndigits {
        let d = word(4 + i)?;
        if !(0..10_000).contains(&d) {
            return Err(bad());
        }
        m = m * 10_000 + d;
    }
    // value = m × 10000^(weight - ndigits + 1)
    let exp10 = (weight - len_i64(ndigits) + 1) * 4;
    let m = if sign == 0x4000 { -m } else { m };
    let exact = if exp10 >= 0 {
        from_parts(&(m * pow10(exp10)), 0)?
    } else {
        from_parts(&m, -exp10)?
    };
    round(&exact, dscale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Numeric {
        parse(s).unwrap()
    }

    fn calc(op: Op, a: &str, b: &str) -> String {
        arith(op, &n(a), &n(b)).unwrap().to_string()
    }

    #[test]
    fn input_and_output_keep_the_scale() {
        for (input, out) in [
            ("1.50", "1.50"),
            ("-0.001", "-0.001"),
            ("+12", "12"),
            (".5", "0.5"),
            ("5.", "5"),
            ("1e3", "1000"),
            ("1.5e-3", "0.0015"),
            ("  7  ", "7"),
            ("-0", "0"),
        ] {
            assert_eq!(n(input).to_string(), out, "{input}");
        }
        for bad in ["", "abc", "1.2.3", "--1", "1e", "."] {
            assert_eq!(parse(bad).unwrap_err().sqlstate(), "22P02", "{bad:?}");
        }
    }

    #[test]
    fn arithmetic_gives_postgresql_scales() {
        assert_eq!(calc(Op::Add, "1.5", "2.25"), "3.75");
        assert_eq!(calc(Op::Sub, "1", "2.50"), "-1.50");
        assert_eq!(calc(Op::Mul, "1.5", "2.25"), "3.375");
        assert_eq!(calc(Op::Div, "1", "3"), "0.33333333333333333333");
        assert_eq!(calc(Op::Div, "10", "4"), "2.5000000000000000");
        assert_eq!(calc(Op::Div, "2", "3"), "0.66666666666666666667");
        assert_eq!(calc(Op::Div, "100000", "3"), "33333.333333333333");
        assert_eq!(calc(Op::Div, "1.000", "8"), "0.12500000000000000000");
        assert_eq!(calc(Op::Mod, "-7.5", "2"), "-1.5");
        assert_eq!(
            calc(Op::Mul, "123456789012345678901234567890", "10"),
            "1234567890123456789012345678900"
        );
        assert_eq!(
            arith(Op::Div, &n("1"), &n("0")).unwrap_err().sqlstate(),
            "22012"
        );
    }

    #[test]
    fn specials_follow_postgresql() {
        for (op, a, b, out) in [
            (Op::Add, "Infinity", "-Infinity", "NaN"),
            (Op::Add, "Infinity", "5", "Infinity"),
            (Op::Sub, "-inf", "Infinity", "-Infinity"),
            (Op::Sub, "Infinity", "Infinity", "NaN"),
            (Op::Mul, "Infinity", "0", "NaN"),
            (Op::Mul, "-Infinity", "-2", "Infinity"),
            (Op::Div, "1", "Infinity", "0"),
            (Op::Div, "Infinity", "-3", "-Infinity"),
            (Op::Div, "Infinity", "Infinity", "NaN"),
            (Op::Mod, "5.5", "-Infinity", "5.5"),
            (Op::Mod, "Infinity", "2", "NaN"),
            (Op::Div, "NaN", "0", "NaN"),
        ] {
            assert_eq!(calc(op, a, b), out, "{a} {op:?} {b}");
        }
        assert_eq!(
            arith(Op::Div, &n("Infinity"), &n("0"))
                .unwrap_err()
                .sqlstate(),
            "22012"
        );
        assert_eq!(
            apply_typmod(&n("Infinity"), 5, 2).unwrap_err().sqlstate(),
            "22003"
        );
        assert_eq!(apply_typmod(&n("NaN"), 5, 2).unwrap().to_string(), "NaN");
        for s in ["NaN", "Infinity", "-Infinity"] {
            assert_eq!(from_binary(&to_binary(&n(s))).unwrap().to_string(), s);
        }
    }

    #[test]
    fn rounding_casts_and_typmods() {
        assert_eq!(round(&n("2.5"), 0).unwrap().to_string(), "3");
        assert_eq!(round(&n("-2.5"), 0).unwrap().to_string(), "-3");
        assert_eq!(round(&n("1234.5678"), 2).unwrap().to_string(), "1234.57");
        assert_eq!(round(&n("1234.5678"), -2).unwrap().to_string(), "1200");
        assert_eq!(to_i64(&n("2.5"), "integer").unwrap(), Some(3));
        assert_eq!(to_i64(&n("1e30"), "integer").unwrap(), None);
        assert_eq!(
            to_i64(&n("NaN"), "integer").unwrap_err().sqlstate(),
            "0A000"
        );
        assert_eq!(from_f64(0.1).unwrap().to_string(), "0.1");
        assert_eq!(from_f64(-2.5e-3).unwrap().to_string(), "-0.0025");
        assert_eq!(
            apply_typmod(&n("123.456"), 5, 2).unwrap().to_string(),
            "123.46"
        );
        let e = apply_typmod(&n("1234.5"), 5, 2).unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
        assert_eq!(apply_typmod(&n("0.5"), 2, 2).unwrap().to_string(), "0.50");
    }

    #[test]
    fn binary_form_round_trips_as_numeric_send() {
        // 12345.678: ndigits 3, weight 1, dscale 3, digits 1 2345 6780.
        let b = to_binary(&n("12345.678"));
        assert_eq!(
            b,
            [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c].to_vec()
        );
        for s in [
            "0",
            "0.00",
            "-1",
            "0.0001",
            "-123456789.987654321",
            "1e20",
            "100",
        ] {
            let v = n(s);
            let back = from_binary(&to_binary(&v)).unwrap();
            assert_eq!(back.to_string(), v.to_string(), "{s}");
        }
        assert!(from_binary(&[0, 1]).is_err());
    }
}
