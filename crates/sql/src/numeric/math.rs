// The algorithms follow `numeric.c`, whose short names (a, b, x, n, w) they keep.
#![allow(clippy::many_single_char_names)]

//! `numeric`'s math functions with PostgreSQL's result scales and errors (`numeric.c`):
//! `sqrt`, `ln`, `log`, `exp`, `power`, and the exact ones (`floor`, `ceil`, `trunc`,
//! `sign`, `div`, `gcd`, `lcm`, `factorial`, `scale`, `min_scale`, `trim_scale`,
//! `width_bucket`).
//!
//! ## Rules
//! - The transcendental functions compute in fixed point (`m / 10^w`) with guard digits
//!   beyond the result scale, then round half away from zero to the scale PostgreSQL
//!   chooses (at least 16 significant digits, at least the inputs' scales, at most 1000).
//! - Every size is bounded before anything is computed: `exp` refuses |x| ≥ 6000 (22003),
//!   `power` estimates the result's weight first, `factorial` refuses n > 32177.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{One, Signed, ToPrimitive, Zero};
use quire_engine::{Numeric, NumericSpecial as Special, SqlState};

use super::{div_round, from_parts, inf, nan, parts, pow10, rescale, sign, MAX_DISPLAY_SCALE};
use super::{Op, MIN_SIG_DIGITS};
use crate::error::{Result, SqlError};

/// Guard digits carried beyond the result scale.
const GUARD: i64 = 12;

fn log_error(message: &str) -> SqlError {
    SqlError::new(SqlState::INVALID_ARGUMENT_FOR_LOG, message)
}

fn power_error(message: &str) -> SqlError {
    SqlError::new(SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION, message)
}

fn overflow() -> SqlError {
    SqlError::new(
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        "value overflows numeric format",
    )
}

fn one() -> Numeric {
    super::from_i64(1)
}

fn clamp_scale(s: i64) -> i64 {
    s.clamp(0, MAX_DISPLAY_SCALE)
}

/// The decimal exponent of the leading digit (`123.4` → 2, `0.05` → -2); not for zero.
fn dweight(m: &BigInt, s: i64) -> i64 {
    super::len_i64(m.magnitude().to_string().len()) - 1 - s
}

/// log10(|n|) in double precision (any size; not for zero).
fn log10_approx(m: &BigInt, s: i64) -> f64 {
    let digits = m.magnitude().to_string();
    let lead: f64 = digits[..digits.len().min(17)].parse().unwrap_or(1.0);
    let lead_len = super::len_i64(digits.len().min(17));
    lead.log10() + (super::len_i64(digits.len()) - lead_len - s) as f64
}

/// PostgreSQL's `estimate_ln_dweight`: the decimal weight of ln(n), n > 0.
fn estimate_ln_dweight(m: &BigInt, s: i64) -> i64 {
    let scaled_one = pow10(s);
    let lo = &scaled_one * 9 / 10;
    let hi = &scaled_one * 11 / 10;
    if *m >= lo && *m <= hi {
        // ln(1 + x) ≈ x
        let x = m - &scaled_one;
        if x.is_zero() {
            return 0;
        }
        return dweight(&x, s);
    }
    let ln = log10_approx(m, s) * std::f64::consts::LN_10;
    ln.abs().log10().trunc() as i64
}

/// ln(x / 10^w) at precision w, for 0.1 < x / 10^w < 100.
fn ln_fixed(x: &BigInt, w: i64) -> BigInt {
    let unit = pow10(w);
    let near = pow10(w - 2);
    let mut x = x.clone();
    let mut halvings = 0u32;
    while (&x - &unit).abs() > near {
        x = (&x * &unit).sqrt();
        halvings += 1;
    }
    // ln(x) = 2 atanh(z), z = (x - 1) / (x + 1).
    let z = (&x - &unit) * &unit / (&x + &unit);
    let z2 = &z * &z / &unit;
    let mut sum = BigInt::zero();
    let mut power = z;
    let mut k = 1u32;
    loop {
        let term = &power / k;
        if term.is_zero() {
            break;
        }
        sum += term;
        power = power * &z2 / &unit;
        k += 2;
    }
    sum << (halvings + 1)
}

/// ln(10) at precision w.
fn ln10_fixed(w: i64) -> BigInt {
    ln_fixed(&(pow10(w) * 10), w)
}

/// ln(m × 10^-s) at precision w (m > 0).
fn ln_at(m: &BigInt, s: i64, w: i64) -> BigInt {
    let k = dweight(m, s);
    let ww = w + GUARD + super::len_i64(k.unsigned_abs().to_string().len());
    // a = m × 10^(-s-k), in [1, 10).
    let shift = ww - s - k;
    let a = if shift >= 0 {
        m * pow10(shift)
    } else {
        m / pow10(-shift)
    };
    let total = ln_fixed(&a, ww) + ln10_fixed(ww) * k;
    rescale(&total, ww, w)
}

/// e^(x / 10^w) at precision w, for |x / 10^w| < 3.
fn exp_fixed(x: &BigInt, w: i64) -> BigInt {
    let unit = pow10(w);
    let small = pow10(w - 2);
    let mut x = x.clone();
    let mut halvings = 0u32;
    while x.abs() > small {
        x /= 2;
        halvings += 1;
    }
    let mut sum = unit.clone();
    let mut term = unit.clone();
    let mut k = 1u32;
    loop {
        term = term * &x / &unit / k;
        if term.is_zero() {
            break;
        }
        sum += &term;
        k += 1;
    }
    for _ in 0..halvings {
        sum = &sum * &sum / &unit;
    }
    sum
}

/// e^(m × 10^-s) rounded to `rscale`: 22003 beyond numeric's 131072 digits before the
/// point, zero below its last digit.
fn exp_to_scale(m: &BigInt, s: i64, rscale: i64) -> Result<Numeric> {
    let x = super::to_f64_parts(m, s);
    let weight = x * std::f64::consts::LOG10_E;
    if weight > 131_073.0 {
        return Err(overflow());
    }
    if weight < -(rscale as f64) - 2.0 {
        return from_parts(&BigInt::zero(), rscale);
    }
    // e^x = 10^q × e^r, r = x - q ln 10 in about [0, ln 10).
    let q = (x / std::f64::consts::LN_10).floor() as i64;
    let w = (rscale + q).max(1) + GUARD;
    let wl = w + 6;
    let xf = rescale(m, s, wl);
    let r = xf - ln10_fixed(wl) * q;
    let e = exp_fixed(&rescale(&r, wl, w), w);
    // value = e × 10^(q - w)
    from_parts(&rescale(&e, w - q, rscale), rscale)
}

/// `sqrt(n)`: 2201F for a negative argument.
pub(crate) fn sqrt(n: &Numeric) -> Result<Numeric> {
    let negative = || power_error("cannot take square root of a negative number");
    match n.as_special() {
        Some(Special::NegInf) => return Err(negative()),
        Some(_) => return Ok(n.clone()),
        None if n.is_negative() => return Err(negative()),
        None => {}
    }
    let (m, s) = parts(n);
    let s = i64::from(s);
    let weight = if m.is_zero() {
        0
    } else {
        super::weight_and_first_digit(n).0
    };
    let sweight = (weight + 1) * 4 / 2 - 1;
    sqrt_at(n, clamp_scale((MIN_SIG_DIGITS - sweight).max(s)))
}

/// The square root of a finite, non-negative `n`, rounded half away from zero to `rscale`
/// digits (PostgreSQL's `sqrt_var`).
pub(crate) fn sqrt_at(n: &Numeric, rscale: i64) -> Result<Numeric> {
    debug_assert!(n.as_special().is_none() && !n.is_negative());
    let (m, s) = parts(n);
    let s = i64::from(s);
    // sqrt(m × 10^-s) × 10^(rscale+1) = sqrt(m × 10^(2 rscale + 2 - s)), truncated, then
    // rounded by one digit.
    let root = (m * pow10(2 * rscale + 2 - s)).sqrt();
    from_parts(&div_round(&root, &BigInt::from(10)), rscale)
}

fn check_log_arg(n: &Numeric) -> Result<()> {
    match sign(n) {
        0 => Err(log_error("cannot take logarithm of zero")),
        -1 => Err(log_error("cannot take logarithm of a negative number")),
        _ => Ok(()),
    }
}

/// `ln(n)`: 2201E for zero or a negative argument.
pub(crate) fn ln(n: &Numeric) -> Result<Numeric> {
    match n.as_special() {
        Some(Special::NegInf) => {
            return Err(log_error("cannot take logarithm of a negative number"))
        }
        Some(_) => return Ok(n.clone()),
        None => check_log_arg(n)?,
    }
    let (m, s) = parts(n);
    let s = i64::from(s);
    let rscale = clamp_scale((MIN_SIG_DIGITS - estimate_ln_dweight(&m, s)).max(s));
    from_parts(&ln_at(&m, s, rscale), rscale)
}

/// `log(base, n)`: 2201E for zero or negative arguments, 22012 for base 1.
pub(crate) fn log(base: &Numeric, n: &Numeric) -> Result<Numeric> {
    if base.as_special().is_some() || n.as_special().is_some() {
        return log_special(base, n);
    }
    check_log_arg(base)?;
    check_log_arg(n)?;
    let (mb, sb) = parts(base);
    let (mn, sn) = parts(n);
    let (sb, sn) = (i64::from(sb), i64::from(sn));
    let (db, dn) = (estimate_ln_dweight(&mb, sb), estimate_ln_dweight(&mn, sn));
    let rscale = clamp_scale((MIN_SIG_DIGITS - (dn - db)).max(sb).max(sn));
    let w = rscale + GUARD + db.abs() + dn.abs();
    let ln_base = ln_at(&mb, sb, w);
    if ln_base.is_zero() {
        return Err(SqlError::new(
            SqlState::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    let ln_n = ln_at(&mn, sn, w);
    from_parts(&div_round(&(ln_n * pow10(rscale)), &ln_base), rscale)
}

fn log_special(base: &Numeric, n: &Numeric) -> Result<Numeric> {
    if base.as_special() == Some(Special::NaN) || n.as_special() == Some(Special::NaN) {
        return Ok(nan());
    }
    if sign(base) < 0 || sign(n) < 0 {
        return Err(log_error("cannot take logarithm of a negative number"));
    }
    if sign(base) == 0 || sign(n) == 0 {
        return Err(log_error("cannot take logarithm of zero"));
    }
    Ok(match (base.as_special(), n.as_special()) {
        (Some(_), Some(_)) => nan(),
        (Some(_), None) => Numeric::zero(),
        _ => inf(false),
    })
}

/// `exp(n)`: 22003 when the result overflows.
pub(crate) fn exp(n: &Numeric) -> Result<Numeric> {
    match n.as_special() {
        Some(Special::NegInf) => return Ok(Numeric::zero()),
        Some(_) => return Ok(n.clone()),
        None => {}
    }
    let (m, s) = parts(n);
    let s = i64::from(s);
    // PostgreSQL's exp_var limit.
    let x = super::to_f64_parts(&m, s);
    let val = (x * std::f64::consts::LOG10_E).clamp(-2000.0, 2000.0);
    let rscale = clamp_scale((MIN_SIG_DIGITS - val as i64).max(s));
    if x.abs() >= 6000.0 {
        if x > 0.0 {
            return Err(overflow());
        }
        return from_parts(&BigInt::zero(), rscale);
    }
    exp_to_scale(&m, s, rscale)
}

/// Whether a finite numeric is an integer.
fn is_integral(n: &Numeric) -> bool {
    let (m, s) = parts(n);
    (m % pow10(i64::from(s))).is_zero()
}

/// `power(a, b)` (and `a ^ b`), with POSIX's rules for NaN and infinities.
pub(crate) fn power(a: &Numeric, b: &Numeric) -> Result<Numeric> {
    if a.as_special().is_some() || b.as_special().is_some() {
        return power_special(a, b);
    }
    if a.is_zero() && b.is_negative() {
        return Err(power_error("zero raised to a negative power is undefined"));
    }
    if is_integral(b) {
        if let Some(e) = super::to_i64(b, "integer")?.and_then(|e| i32::try_from(e).ok()) {
            return power_int(a, i64::from(e), i64::from(b.scale()));
        }
    }
    if a.is_zero() {
        return from_parts(&BigInt::zero(), MIN_SIG_DIGITS);
    }
    let negative_result = if a.is_negative() {
        if !is_integral(b) {
            return Err(power_error(
                "a negative number raised to a non-integer power yields a complex result",
            ));
        }
        let (mb, sb) = parts(b);
        (mb / pow10(i64::from(sb))).is_odd()
    } else {
        false
    };
    let (ma, sa) = parts(a);
    let ma = ma.abs();
    let (mb, sb) = parts(b);
    let (sa, sb) = (i64::from(sa), i64::from(sb));
    let val = log10_approx(&ma, sa) * std::f64::consts::LN_10 * super::to_f64_parts(&mb, sb);
    if val.abs() > 2000.0 * 3.01 {
        if val > 0.0 {
            return Err(overflow());
        }
        return from_parts(&BigInt::zero(), MAX_DISPLAY_SCALE);
    }
    let val = val * std::f64::consts::LOG10_E;
    let rscale = clamp_scale((MIN_SIG_DIGITS - val as i64).max(sa).max(sb));
    let r = exp_of_product(&ma, sa, &mb, sb, val, rscale)?;
    if negative_result {
        super::negate(&r)
    } else {
        Ok(r)
    }
}

/// e^(b × ln a) rounded to `rscale`; `weight` estimates the result's decimal weight.
fn exp_of_product(
    ma: &BigInt,
    sa: i64,
    mb: &BigInt,
    sb: i64,
    weight: f64,
    rscale: i64,
) -> Result<Numeric> {
    // The exponent is needed to rscale + weight digits after its point, and b scales the
    // error of ln a by its own size.
    let b_digits = dweight(mb, sb).max(0) + 1;
    let w = rscale + (weight.abs() as i64) + b_digits + GUARD;
    let ln_a = ln_at(ma, sa, w);
    // y = b × ln a at precision w
    let y = ln_a * mb / pow10(sb);
    exp_to_scale(&y, w, rscale)
}

/// PostgreSQL's `power_var_int`: an integer exponent that fits an int4.
fn power_int(a: &Numeric, e: i64, exp_scale: i64) -> Result<Numeric> {
    let (m, s) = parts(a);
    let s = i64::from(s);
    // The result's decimal weight (0 for a zero base, as PostgreSQL's estimate gives).
    let f = if m.is_zero() {
        0.0
    } else {
        e as f64 * log10_approx(&m, s)
    };
    if f > 3.0 * f64::from(i16::MAX) * 4.0 {
        return Err(overflow());
    }
    if f + 1.0 < -(MAX_DISPLAY_SCALE as f64) {
        return from_parts(&BigInt::zero(), MAX_DISPLAY_SCALE);
    }
    let rscale = clamp_scale((MIN_SIG_DIGITS - f as i64).max(s).max(exp_scale));
    if e == 0 {
        return from_parts(&pow10(rscale), rscale);
    }
    if m.is_zero() {
        return from_parts(&m, rscale);
    }
    let digits = super::len_i64(m.magnitude().to_string().len());
    let n = e.unsigned_abs();
    if u64::try_from(digits).unwrap_or(u64::MAX).saturating_mul(n) <= 200_000 {
        // Exact: m^n × 10^(-s n), then 1/x for a negative exponent.
        let n32 = u32::try_from(n).expect("bounded above");
        let p = num_traits::pow(m, n32 as usize);
        let ps = s * i64::from(n32);
        let r = if e > 0 {
            rescale(&p, ps, rscale)
        } else {
            // 10^ps / p at rscale = 10^(ps + rscale) / p
            div_round(&pow10(ps + rscale), &p)
        };
        return from_parts(&r, rscale);
    }
    let negative = m.is_negative() && n % 2 == 1;
    let r = exp_of_product(&m.abs(), s, &BigInt::from(e), 0, f, rscale)?;
    if negative {
        super::negate(&r)
    } else {
        Ok(r)
    }
}

fn power_special(a: &Numeric, b: &Numeric) -> Result<Numeric> {
    let is_one = |n: &Numeric| n.as_special().is_none() && *n == one();
    if a.as_special() == Some(Special::NaN) {
        return Ok(if b.as_special().is_none() && b.is_zero() {
            one()
        } else {
            nan()
        });
    }
    if b.as_special() == Some(Special::NaN) {
        return Ok(if is_one(a) { one() } else { nan() });
    }
    let (sa, sb) = (sign(a), sign(b));
    if sa == 0 && sb < 0 {
        return Err(power_error("zero raised to a negative power is undefined"));
    }
    // An infinity counts as integral (PostgreSQL's numeric_is_integral).
    let b_integral = b.as_special().is_some() || is_integral(b);
    if sa < 0 && !b_integral {
        return Err(power_error(
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    if is_one(a) || sb == 0 {
        return Ok(one());
    }
    if sa == 0 && sb > 0 {
        return Ok(Numeric::zero());
    }
    if b.as_special().is_some() {
        let abs_a_gt_one = if a.as_special().is_some() {
            true
        } else {
            if *a == super::from_i64(-1) {
                return Ok(one());
            }
            super::abs(a)? > one()
        };
        return Ok(if abs_a_gt_one == (sb > 0) {
            inf(false)
        } else {
            Numeric::zero()
        });
    }
    if a.as_special() == Some(Special::PosInf) {
        return Ok(if sb > 0 { inf(false) } else { Numeric::zero() });
    }
    // a is -Infinity, b finite and integral.
    if sb < 0 {
        return Ok(Numeric::zero());
    }
    let (mb, sb_scale) = parts(b);
    let odd = (mb / pow10(i64::from(sb_scale))).is_odd();
    Ok(inf(odd))
}

/// `floor`, `ceil`: the integer below or above.
pub(crate) fn floor_ceil(n: &Numeric, ceil: bool) -> Result<Numeric> {
    if n.as_special().is_some() {
        return Ok(n.clone());
    }
    let (m, s) = parts(n);
    let d = pow10(i64::from(s));
    let (q, r) = m.div_mod_floor(&d);
    let q = if ceil && !r.is_zero() { q + 1 } else { q };
    from_parts(&q, 0)
}

/// `trunc(n, digits)`: toward zero; negative `digits` truncate left of the point.
pub(crate) fn trunc(n: &Numeric, digits: i64) -> Result<Numeric> {
    if n.as_special().is_some() {
        return Ok(n.clone());
    }
    let (m, s) = parts(n);
    let s = i64::from(s);
    let digits = digits.clamp(super::MIN_ROUND_SCALE, super::MAX_SCALE);
    if digits >= s {
        return from_parts(&(m * pow10(digits - s)), digits);
    }
    let t = m / pow10(s - digits);
    if digits >= 0 {
        from_parts(&t, digits)
    } else {
        from_parts(&(t * pow10(-digits)), 0)
    }
}

/// `sign(n)`: -1, 0 or 1 (NaN for NaN).
pub(crate) fn sign_of(n: &Numeric) -> Numeric {
    if n.as_special() == Some(Special::NaN) {
        return nan();
    }
    super::from_i64(i64::from(sign(n)))
}

/// `div(a, b)`: the quotient truncated toward zero.
pub(crate) fn div(a: &Numeric, b: &Numeric) -> Result<Numeric> {
    if a.as_special().is_some() || b.as_special().is_some() {
        return super::arith(Op::Div, a, b);
    }
    let (ma, sa) = parts(a);
    let (mb, sb) = parts(b);
    if mb.is_zero() {
        return Err(SqlError::new(
            SqlState::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    // a / b = (ma × 10^sb) / (mb × 10^sa)
    let q = (ma * pow10(i64::from(sb))) / (mb * pow10(i64::from(sa)));
    from_parts(&q, 0)
}

/// `gcd` (`lcm` when `lcm`): on the values at the larger scale; NaN if either is special.
pub(crate) fn gcd_lcm(a: &Numeric, b: &Numeric, lcm: bool) -> Result<Numeric> {
    if a.as_special().is_some() || b.as_special().is_some() {
        return Ok(nan());
    }
    let (ma, sa) = parts(a);
    let (mb, sb) = parts(b);
    let scale = i64::from(sa.max(sb));
    let x = rescale(&ma, i64::from(sa), scale).abs();
    let y = rescale(&mb, i64::from(sb), scale).abs();
    let g = x.gcd(&y);
    if !lcm {
        return from_parts(&g, scale);
    }
    if x.is_zero() || y.is_zero() {
        return from_parts(&BigInt::zero(), scale);
    }
    // lcm(x, y) / 10^scale = x / g × y / 10^scale
    from_parts(&(x / g * y), scale)
}

/// `factorial(n)`: 22003 for a negative n, and beyond 32177 (numeric's limit).
pub(crate) fn factorial(n: i64) -> Result<Numeric> {
    if n < 0 {
        return Err(SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "factorial of a negative number is undefined",
        ));
    }
    if n > 32_177 {
        return Err(overflow());
    }
    let mut r = BigInt::one();
    for k in 2..=n {
        r *= k;
    }
    from_parts(&r, 0)
}

/// `scale(n)`: the display scale (NULL for the special values).
pub(crate) fn scale(n: &Numeric) -> Option<i64> {
    n.as_special().is_none().then(|| i64::from(n.scale()))
}

/// `min_scale(n)`: the fewest fractional digits that keep the value.
pub(crate) fn min_scale(n: &Numeric) -> Option<i64> {
    if n.as_special().is_some() {
        return None;
    }
    let (mut m, s) = parts(n);
    let mut s = i64::from(s);
    let ten = BigInt::from(10);
    while s > 0 && (&m % &ten).is_zero() {
        m /= &ten;
        s -= 1;
    }
    Some(if m.is_zero() { 0 } else { s })
}

/// `trim_scale(n)`: the value with its trailing fractional zeros gone.
pub(crate) fn trim_scale(n: &Numeric) -> Result<Numeric> {
    match min_scale(n) {
        None => Ok(n.clone()),
        Some(s) => super::round(n, s),
    }
}

fn bucket_error(message: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_ARGUMENT_FOR_WIDTH_BUCKET_FUNCTION,
        message,
    )
}

/// `width_bucket(operand, low, high, count)` on numerics.
pub(crate) fn width_bucket(x: &Numeric, lo: &Numeric, hi: &Numeric, count: i64) -> Result<i64> {
    if count <= 0 {
        return Err(bucket_error("count must be greater than zero"));
    }
    for b in [lo, hi] {
        match b.as_special() {
            Some(Special::NaN) => return Err(bucket_error("lower and upper bounds cannot be NaN")),
            Some(_) => return Err(bucket_error("lower and upper bounds must be finite")),
            None => {}
        }
    }
    let out_of_range =
        || SqlError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range");
    let last = count.checked_add(1).filter(|&c| c <= i64::from(i32::MAX));
    let ascending = match lo.cmp(hi) {
        std::cmp::Ordering::Equal => {
            return Err(bucket_error("lower bound cannot equal upper bound"))
        }
        o => o.is_lt(),
    };
    let (below, above) = if ascending {
        (x < lo, x >= hi)
    } else {
        (x > lo, x <= hi)
    };
    if below {
        return Ok(0);
    }
    if above {
        return last.ok_or_else(out_of_range);
    }
    // floor((x - lo) × count / (hi - lo)) + 1, exactly (both differences have one sign).
    let (num, den) = if ascending {
        (
            super::arith(Op::Sub, x, lo)?,
            super::arith(Op::Sub, hi, lo)?,
        )
    } else {
        (
            super::arith(Op::Sub, lo, x)?,
            super::arith(Op::Sub, lo, hi)?,
        )
    };
    let (mn, sn) = parts(&num);
    let (md, sd) = parts(&den);
    let q = (mn * count * pow10(i64::from(sd))) / (md * pow10(i64::from(sn)));
    q.to_i64()
        .and_then(|q| q.checked_add(1))
        .ok_or_else(out_of_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Numeric {
        super::super::parse(s).unwrap()
    }

    #[test]
    fn transcendental_functions_match_postgresql() {
        assert_eq!(sqrt(&n("2")).unwrap().to_string(), "1.414213562373095");
        assert_eq!(sqrt(&n("4.2")).unwrap().to_string(), "2.049390153191920");
        assert_eq!(ln(&n("4.2")).unwrap().to_string(), "1.4350845252893226");
        assert_eq!(exp(&n("1")).unwrap().to_string(), "2.7182818284590452");
        assert_eq!(
            log(&n("2"), &n("4.2")).unwrap().to_string(),
            "2.0703893278913979"
        );
        assert_eq!(
            power(&n("4.2"), &n("4.2")).unwrap().to_string(),
            "414.61691860129675"
        );
        assert_eq!(
            power(&n("-2"), &n("3")).unwrap().to_string(),
            "-8.0000000000000000"
        );
        assert_eq!(
            power(&n("-2"), &n("-1")).unwrap().to_string(),
            "-0.5000000000000000"
        );
        assert_eq!(ln(&n("0")).unwrap_err().sqlstate(), "2201E");
        assert_eq!(sqrt(&n("-1")).unwrap_err().sqlstate(), "2201F");
        assert_eq!(power(&n("-2"), &n("3.3")).unwrap_err().sqlstate(), "2201F");
        assert_eq!(exp(&n("6000")).unwrap_err().sqlstate(), "22003");
    }

    #[test]
    fn exact_functions() {
        assert_eq!(floor_ceil(&n("-7.777"), false).unwrap().to_string(), "-8");
        assert_eq!(floor_ceil(&n("-7.777"), true).unwrap().to_string(), "-7");
        assert_eq!(trunc(&n("-7.777"), 1).unwrap().to_string(), "-7.7");
        assert_eq!(div(&n("-7.777"), &n("2")).unwrap().to_string(), "-3");
        assert_eq!(
            gcd_lcm(&n("12.5"), &n("7.5"), false).unwrap().to_string(),
            "2.5"
        );
        assert_eq!(min_scale(&n("1.2300")), Some(2));
        assert_eq!(width_bucket(&n("5.5"), &n("0"), &n("10"), 5).unwrap(), 3);
        assert_eq!(factorial(5).unwrap().to_string(), "120");
    }
}
