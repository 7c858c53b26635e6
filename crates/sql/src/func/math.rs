// The functions follow `float.c` and `numeric.c`, whose short names (x, y, n) they keep.
#![allow(clippy::many_single_char_names)]

//! The math functions: resolution by argument types (PostgreSQL's choice between the
//! `double precision` and the `numeric` version: numeric when an argument is numeric and
//! none is a float, else double precision) and evaluation with PostgreSQL's errors.
//! The numeric versions are in [`crate::numeric::math`].
//!
//! ## Rules
//! - A float result that overflows where no input was infinite is 22003 `value out of
//!   range: overflow`; one that becomes zero from non-zero inputs is `...: underflow`
//!   (PostgreSQL's `float_overflow_error`, `float_underflow_error`).
//! - The degree-based trigonometric functions follow `float.c`: exact at the angles where
//!   the result is a whole or half number (`sind(30)` is 0.5).

use quire_engine::{Numeric, SqlState, Value};

use super::Func;
use crate::error::{Result, SqlError};
use crate::numeric::{self, math as nm};
use crate::types::SqlType;

/// A math function, in its float8 (`F`) or numeric (`N`) version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Math {
    F(FloatFn),
    N(NumFn),
    /// power(a, b) / a ^ b.
    Power {
        numeric: bool,
    },
    /// log(base, x).
    Log {
        numeric: bool,
    },
    Atan2 {
        degrees: bool,
    },
    WidthBucket {
        numeric: bool,
    },
    /// abs of an integer type (its range checked).
    AbsInt(SqlType),
    /// gcd / lcm of integers of a type, or of numerics.
    Gcd {
        lcm: bool,
        ty: SqlType,
    },
    /// mod(a, b) of integers of a type, or of numerics.
    Mod(SqlType),
    Div,
    TruncScale,
    Factorial,
    Pi,
}

/// A float8 function of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatFn {
    Sqrt,
    Cbrt,
    Exp,
    Ln,
    Log10,
    Ceil,
    Floor,
    Trunc,
    Sign,
    Sin,
    Cos,
    Tan,
    Cot,
    Asin,
    Acos,
    Atan,
    Sind,
    Cosd,
    Tand,
    Cotd,
    Asind,
    Acosd,
    Atand,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    Degrees,
    Radians,
}

/// A numeric function of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumFn {
    Sqrt,
    Exp,
    Ln,
    Log10,
    Ceil,
    Floor,
    Trunc,
    Sign,
    Scale,
    MinScale,
    TrimScale,
}

fn float_fn(name: &str) -> Option<FloatFn> {
    use FloatFn as F;
    Some(match name {
        "cbrt" => F::Cbrt,
        "sin" => F::Sin,
        "cos" => F::Cos,
        "tan" => F::Tan,
        "cot" => F::Cot,
        "asin" => F::Asin,
        "acos" => F::Acos,
        "atan" => F::Atan,
        "sind" => F::Sind,
        "cosd" => F::Cosd,
        "tand" => F::Tand,
        "cotd" => F::Cotd,
        "asind" => F::Asind,
        "acosd" => F::Acosd,
        "atand" => F::Atand,
        "sinh" => F::Sinh,
        "cosh" => F::Cosh,
        "tanh" => F::Tanh,
        "asinh" => F::Asinh,
        "acosh" => F::Acosh,
        "atanh" => F::Atanh,
        "degrees" => F::Degrees,
        "radians" => F::Radians,
        _ => return None,
    })
}

/// Functions with a float8 and a numeric version.
fn both_fn(name: &str) -> Option<(FloatFn, NumFn)> {
    Some(match name {
        "sqrt" => (FloatFn::Sqrt, NumFn::Sqrt),
        "exp" => (FloatFn::Exp, NumFn::Exp),
        "ln" => (FloatFn::Ln, NumFn::Ln),
        "log" | "log10" => (FloatFn::Log10, NumFn::Log10),
        "ceil" | "ceiling" => (FloatFn::Ceil, NumFn::Ceil),
        "floor" => (FloatFn::Floor, NumFn::Floor),
        "trunc" => (FloatFn::Trunc, NumFn::Trunc),
        "sign" => (FloatFn::Sign, NumFn::Sign),
        _ => return None,
    })
}

fn num_only_fn(name: &str) -> Option<NumFn> {
    Some(match name {
        "scale" => NumFn::Scale,
        "min_scale" => NumFn::MinScale,
        "trim_scale" => NumFn::TrimScale,
        _ => return None,
    })
}

fn is_number(t: SqlType) -> bool {
    t.is_int() || t.is_float() || t.is_numeric() || t == SqlType::Unknown
}

/// Whether the numeric version fits: some argument numeric, none a float.
fn wants_numeric(args: &[SqlType]) -> bool {
    args.iter().any(|t| t.is_numeric()) && !args.iter().any(|t| t.is_float())
}

type Resolved = (Func, Vec<Option<SqlType>>, SqlType);

/// The math function `name` taking `args`, if there is one.
pub(super) fn resolve(name: &str, args: &[SqlType]) -> Option<Resolved> {
    use SqlType as T;
    if !args.iter().all(|&t| is_number(t)) {
        return None;
    }
    let num = Some(T::Numeric(None));
    let f8 = Some(T::Float8);
    let m = |m: Math, c: Vec<Option<SqlType>>, r: SqlType| Some((Func::Math(m), c, r));
    let numeric = wants_numeric(args);
    match (name, args.len()) {
        (_, 1) if both_fn(name).is_some() => {
            let (f, n) = both_fn(name)?;
            if numeric {
                m(Math::N(n), vec![num], T::Numeric(None))
            } else {
                m(Math::F(f), vec![f8], T::Float8)
            }
        }
        (_, 1) if float_fn(name).is_some() => m(Math::F(float_fn(name)?), vec![f8], T::Float8),
        (_, 1) if num_only_fn(name).is_some() && !args[0].is_float() => {
            let f = num_only_fn(name)?;
            let ret = if f == NumFn::TrimScale {
                T::Numeric(None)
            } else {
                T::Int4
            };
            m(Math::N(f), vec![num], ret)
        }
        ("power" | "pow" | "log", 2) => {
            let f = if name == "log" {
                Math::Log { numeric }
            } else {
                Math::Power { numeric }
            };
            let (c, r) = if numeric {
                (num, T::Numeric(None))
            } else {
                (f8, T::Float8)
            };
            m(f, vec![c, c], r)
        }
        ("atan2" | "atan2d", 2) => m(
            Math::Atan2 {
                degrees: name == "atan2d",
            },
            vec![f8, f8],
            T::Float8,
        ),
        ("width_bucket", 4) if !args[3].is_float() && !args[3].is_numeric() => {
            let numeric = wants_numeric(&args[..3]) || args[..3].iter().all(|t| t.is_int());
            let c = if numeric { num } else { f8 };
            m(
                Math::WidthBucket { numeric },
                vec![c, c, c, Some(T::Int4)],
                T::Int4,
            )
        }
        ("abs", 1) if args[0].is_int() => m(Math::AbsInt(args[0]), vec![None], args[0]),
        ("gcd" | "lcm" | "mod", 2) if !args.iter().any(|t| t.is_float()) => {
            let ty = if numeric {
                T::Numeric(None)
            } else {
                super::unify(args[0], args[1])
                    .filter(|t| t.is_int())
                    .unwrap_or(T::Int4)
            };
            let f = if name == "mod" {
                Math::Mod(ty)
            } else {
                Math::Gcd {
                    lcm: name == "lcm",
                    ty,
                }
            };
            m(f, vec![Some(ty), Some(ty)], ty)
        }
        ("div", 2) if !args.iter().any(|t| t.is_float()) => {
            m(Math::Div, vec![num, num], T::Numeric(None))
        }
        ("trunc", 2) if !args[0].is_float() && args[1].is_int() || args[1] == T::Unknown => {
            m(Math::TruncScale, vec![num, Some(T::Int4)], T::Numeric(None))
        }
        ("factorial", 1) if args[0].is_int() || args[0] == T::Unknown => {
            m(Math::Factorial, vec![Some(T::Int8)], T::Numeric(None))
        }
        ("pi", 0) => m(Math::Pi, vec![], T::Float8),
        _ => None,
    }
}

fn f64_arg(v: &Value) -> f64 {
    crate::types::as_f64(v).unwrap_or(f64::NAN)
}

fn int_arg(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        _ => 0,
    }
}

fn num_arg(v: &Value) -> Numeric {
    match v {
        Value::Numeric(n) => n.clone(),
        Value::Int(i) => numeric::from_i64(*i),
        _ => Numeric::zero(),
    }
}

pub(crate) fn out_of_range(message: &str) -> SqlError {
    SqlError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, message)
}

/// PostgreSQL's `check_float8_val`: overflow and underflow errors.
fn checked(r: f64, inf_ok: bool, zero_ok: bool) -> Result<Value> {
    if r.is_infinite() && !inf_ok {
        return Err(out_of_range("value out of range: overflow"));
    }
    if r == 0.0 && !zero_ok {
        return Err(out_of_range("value out of range: underflow"));
    }
    Ok(Value::Float(r))
}

impl Math {
    pub(crate) fn call(self, args: &[Value]) -> Result<Value> {
        let f = |i: usize| f64_arg(&args[i]);
        let n = |i: usize| num_arg(&args[i]);
        Ok(match self {
            Math::F(g) => float_call(g, f(0))?,
            Math::N(g) => num_call(g, &n(0))?,
            Math::Power { numeric: true } => Value::Numeric(nm::power(&n(0), &n(1))?),
            Math::Power { numeric: false } => float_power(f(0), f(1))?,
            Math::Log { numeric: true } => Value::Numeric(nm::log(&n(0), &n(1))?),
            Math::Log { numeric: false } => {
                let (b, x) = (f(0), f(1));
                let ln_b = float_call(FloatFn::Ln, b)?;
                let ln_x = float_call(FloatFn::Ln, x)?;
                let (Value::Float(lb), Value::Float(lx)) = (ln_b, ln_x) else {
                    unreachable!("ln returns a float")
                };
                if lb == 0.0 {
                    return Err(SqlError::new(
                        SqlState::DIVISION_BY_ZERO,
                        "division by zero",
                    ));
                }
                Value::Float(lx / lb)
            }
            Math::Atan2 { degrees: false } => Value::Float(f(0).atan2(f(1))),
            Math::Atan2 { degrees: true } => Value::Float(f(0).atan2(f(1)) / 1.0f64.atan() * 45.0),
            Math::WidthBucket { numeric: true } => {
                Value::Int(nm::width_bucket(&n(0), &n(1), &n(2), int_arg(&args[3]))?)
            }
            Math::WidthBucket { numeric: false } => {
                Value::Int(width_bucket_f64(f(0), f(1), f(2), int_arg(&args[3]))?)
            }
            Math::AbsInt(ty) => {
                let v = int_arg(&args[0]).checked_abs().unwrap_or(i64::MAX);
                crate::types::check_int_range(v, ty)
                    .map_err(|_| out_of_range(&format!("{} out of range", type_word(ty))))?
            }
            Math::Gcd { lcm, ty } if ty.is_numeric() => {
                Value::Numeric(nm::gcd_lcm(&n(0), &n(1), lcm)?)
            }
            Math::Gcd { lcm, ty } => int_gcd(int_arg(&args[0]), int_arg(&args[1]), lcm, ty)?,
            Math::Mod(ty) if ty.is_numeric() => {
                Value::Numeric(numeric::arith(numeric::Op::Mod, &n(0), &n(1))?)
            }
            Math::Mod(_) => {
                let (a, b) = (int_arg(&args[0]), int_arg(&args[1]));
                if b == 0 {
                    return Err(SqlError::new(
                        SqlState::DIVISION_BY_ZERO,
                        "division by zero",
                    ));
                }
                // i64::MIN % -1 is 0 (PostgreSQL special-cases it as well).
                Value::Int(a.checked_rem(b).unwrap_or(0))
            }
            Math::Div => Value::Numeric(nm::div(&n(0), &n(1))?),
            Math::TruncScale => Value::Numeric(nm::trunc(&n(0), int_arg(&args[1]))?),
            Math::Factorial => Value::Numeric(nm::factorial(int_arg(&args[0]))?),
            Math::Pi => Value::Float(std::f64::consts::PI),
        })
    }
}

fn type_word(ty: SqlType) -> &'static str {
    match ty {
        SqlType::Int2 => "smallint",
        SqlType::Int4 => "integer",
        _ => "bigint",
    }
}

fn int_gcd(a: i64, b: i64, lcm: bool, ty: SqlType) -> Result<Value> {
    let range = || out_of_range(&format!("{} out of range", type_word(ty)));
    let (x, y) = (i128::from(a).abs(), i128::from(b).abs());
    let g = {
        let (mut p, mut q) = (x, y);
        while q != 0 {
            (p, q) = (q, p % q);
        }
        p
    };
    let r = if !lcm {
        g
    } else if x == 0 || y == 0 {
        0
    } else {
        x / g * y
    };
    let r = i64::try_from(r).map_err(|_| range())?;
    crate::types::check_int_range(r, ty).map_err(|_| range())
}

fn num_call(g: NumFn, x: &Numeric) -> Result<Value> {
    let int_or_null = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    Ok(Value::Numeric(match g {
        NumFn::Sqrt => nm::sqrt(x)?,
        NumFn::Exp => nm::exp(x)?,
        NumFn::Ln => nm::ln(x)?,
        NumFn::Log10 => nm::log(&numeric::from_i64(10), x)?,
        NumFn::Ceil => nm::floor_ceil(x, true)?,
        NumFn::Floor => nm::floor_ceil(x, false)?,
        NumFn::Trunc => nm::trunc(x, 0)?,
        NumFn::Sign => nm::sign_of(x),
        NumFn::Scale => return Ok(int_or_null(nm::scale(x))),
        NumFn::MinScale => return Ok(int_or_null(nm::min_scale(x))),
        NumFn::TrimScale => nm::trim_scale(x)?,
    }))
}

fn input_out_of_range() -> SqlError {
    out_of_range("input is out of range")
}

/// A function of one float8 argument.
fn float_call(g: FloatFn, x: f64) -> Result<Value> {
    use FloatFn as F;
    let log_error = |m: &str| SqlError::new(SqlState::INVALID_ARGUMENT_FOR_LOG, m);
    if x.is_nan() && !matches!(g, F::Sign) {
        return Ok(Value::Float(x));
    }
    let inf_in = x.is_infinite();
    let trig = matches!(
        g,
        F::Sin | F::Cos | F::Tan | F::Cot | F::Sind | F::Cosd | F::Tand | F::Cotd
    );
    if trig && inf_in {
        return Err(input_out_of_range());
    }
    let unit = matches!(g, F::Asin | F::Acos | F::Asind | F::Acosd);
    if unit && !(-1.0..=1.0).contains(&x) {
        return Err(input_out_of_range());
    }
    Ok(Value::Float(match g {
        F::Sqrt if x < 0.0 => {
            return Err(SqlError::new(
                SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION,
                "cannot take square root of a negative number",
            ))
        }
        F::Ln | F::Log10 if x == 0.0 => return Err(log_error("cannot take logarithm of zero")),
        F::Ln | F::Log10 if x < 0.0 => {
            return Err(log_error("cannot take logarithm of a negative number"))
        }
        F::Sqrt => x.sqrt(),
        F::Cbrt => x.cbrt(),
        F::Ln => x.ln(),
        F::Log10 => x.log10(),
        F::Exp if inf_in => x.exp(),
        F::Exp => return checked(x.exp(), false, false),
        F::Ceil => x.ceil(),
        F::Floor => x.floor(),
        F::Trunc => x.trunc(),
        F::Sign if x > 0.0 => 1.0,
        F::Sign if x < 0.0 => -1.0,
        F::Sign => 0.0,
        F::Sin => x.sin(),
        F::Cos => x.cos(),
        F::Tan => x.tan(),
        F::Cot => return checked(1.0 / x.tan(), true, true),
        F::Asin => x.asin(),
        F::Acos => x.acos(),
        F::Atan => x.atan(),
        F::Sind | F::Cosd | F::Tand | F::Cotd | F::Asind | F::Acosd | F::Atand => {
            degrees_trig(g, x)
        }
        F::Sinh => x.sinh(),
        F::Cosh => x.cosh(),
        F::Tanh => x.tanh(),
        F::Asinh => x.asinh(),
        F::Acosh if x < 1.0 => return Err(input_out_of_range()),
        F::Acosh => x.acosh(),
        F::Atanh if !(-1.0..=1.0).contains(&x) => return Err(input_out_of_range()),
        F::Atanh => x.atanh(),
        F::Degrees => return checked(x * (180.0 / std::f64::consts::PI), inf_in, true),
        F::Radians => return checked(x * (std::f64::consts::PI / 180.0), inf_in, true),
    }))
}

const RADIANS_PER_DEGREE: f64 = 0.017_453_292_519_943_295;

fn sind_0_to_30(x: f64) -> f64 {
    let sin_30 = (30.0 * RADIANS_PER_DEGREE).sin();
    ((x * RADIANS_PER_DEGREE).sin() / sin_30) / 2.0
}

fn cosd_0_to_60(x: f64) -> f64 {
    let one_minus_cos_60 = 1.0 - (60.0 * RADIANS_PER_DEGREE).cos();
    1.0 - ((1.0 - (x * RADIANS_PER_DEGREE).cos()) / one_minus_cos_60) / 2.0
}

fn sind_q1(x: f64) -> f64 {
    if x <= 30.0 {
        sind_0_to_30(x)
    } else {
        cosd_0_to_60(90.0 - x)
    }
}

fn cosd_q1(x: f64) -> f64 {
    if x <= 60.0 {
        cosd_0_to_60(x)
    } else {
        sind_0_to_30(90.0 - x)
    }
}

fn asind_q1(x: f64) -> f64 {
    if x <= 0.5 {
        (x.asin() / 0.5f64.asin()) * 30.0
    } else {
        90.0 - (x.acos() / 0.5f64.acos()) * 60.0
    }
}

fn acosd_q1(x: f64) -> f64 {
    if x <= 0.5 {
        90.0 - (x.asin() / 0.5f64.asin()) * 30.0
    } else {
        (x.acos() / 0.5f64.acos()) * 60.0
    }
}

/// `float.c`'s sind, cosd, tand, cotd, asind, acosd, atand (finite or ±inf for atand).
fn degrees_trig(g: FloatFn, x: f64) -> f64 {
    use FloatFn as F;
    match g {
        F::Asind if x >= 0.0 => asind_q1(x),
        F::Asind => -asind_q1(-x),
        F::Acosd if x >= 0.0 => acosd_q1(x),
        F::Acosd => 90.0 + asind_q1(-x),
        F::Atand => (x.atan() / 1.0f64.atan()) * 45.0,
        F::Cosd => {
            let mut a = x % 360.0;
            let mut sign = 1.0;
            if a < 0.0 {
                a = -a;
            }
            if a > 180.0 {
                a = 360.0 - a;
            }
            if a > 90.0 {
                a = 180.0 - a;
                sign = -sign;
            }
            sign * cosd_q1(a)
        }
        _ => {
            // sind, tand, cotd: the angle brought into the first quadrant.
            let mut a = x % 360.0;
            let mut sign = 1.0;
            if a < 0.0 {
                a = -a;
                sign = -sign;
            }
            if a > 180.0 {
                a = 360.0 - a;
                sign = -sign;
            }
            if a > 90.0 {
                a = 180.0 - a;
                if g != F::Sind {
                    sign = -sign;
                }
            }
            let r = match g {
                F::Sind => return sign * sind_q1(a),
                F::Tand => sign * ((sind_q1(a) / cosd_q1(a)) / (sind_q1(45.0) / cosd_q1(45.0))),
                _ => sign * ((cosd_q1(a) / sind_q1(a)) / (cosd_q1(45.0) / sind_q1(45.0))),
            };
            // No minus zero.
            if r == 0.0 {
                0.0
            } else {
                r
            }
        }
    }
}

/// `float.c`'s dpow: POSIX's pow with PostgreSQL's errors (its tests of exact values are
/// exact comparisons, as in C).
#[allow(clippy::float_cmp)]
fn float_power(x: f64, y: f64) -> Result<Value> {
    let power_error = |m: &str| SqlError::new(SqlState::INVALID_ARGUMENT_FOR_POWER_FUNCTION, m);
    if x.is_nan() {
        return Ok(Value::Float(if y.is_nan() || y != 0.0 { x } else { 1.0 }));
    }
    if y.is_nan() {
        return Ok(Value::Float(if x == 1.0 { 1.0 } else { y }));
    }
    if x == 0.0 && y < 0.0 {
        return Err(power_error("zero raised to a negative power is undefined"));
    }
    if x < 0.0 && y.floor() != y {
        return Err(power_error(
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    let r = x.powf(y);
    if x.is_infinite() || y.is_infinite() {
        return Ok(Value::Float(r));
    }
    checked(r, false, x == 0.0)
}

/// `float.c`'s width_bucket_float8.
fn width_bucket_f64(x: f64, lo: f64, hi: f64, count: i64) -> Result<i64> {
    let bucket_error =
        |m: &str| SqlError::new(SqlState::INVALID_ARGUMENT_FOR_WIDTH_BUCKET_FUNCTION, m);
    if count <= 0 {
        return Err(bucket_error("count must be greater than zero"));
    }
    if x.is_nan() || lo.is_nan() || hi.is_nan() {
        return Err(bucket_error(
            "operand, lower bound, and upper bound cannot be NaN",
        ));
    }
    if lo.is_infinite() || hi.is_infinite() {
        return Err(bucket_error("lower and upper bounds must be finite"));
    }
    let last = || {
        count
            .checked_add(1)
            .filter(|&c| c <= i64::from(i32::MAX))
            .ok_or_else(|| out_of_range("integer out of range"))
    };
    let c = count as f64;
    let fraction = |num: f64, den: f64, half_num: f64, half_den: f64| {
        if den.is_infinite() {
            half_num / half_den
        } else {
            num / den
        }
    };
    let r = if lo < hi {
        if x < lo {
            return Ok(0);
        }
        if x >= hi {
            return last();
        }
        c * fraction(x - lo, hi - lo, x / 2.0 - lo / 2.0, hi / 2.0 - lo / 2.0)
    } else if lo > hi {
        if x > lo {
            return Ok(0);
        }
        if x <= hi {
            return last();
        }
        c * fraction(lo - x, lo - hi, lo / 2.0 - x / 2.0, lo / 2.0 - hi / 2.0)
    } else {
        return Err(bucket_error("lower bound cannot equal upper bound"));
    };
    let r = (r as i64).min(count - 1);
    Ok(r + 1)
}
