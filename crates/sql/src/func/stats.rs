//! The statistics aggregates: `var_pop`, `var_samp` (`variance`), `stddev_pop`,
//! `stddev_samp` (`stddev`) of one argument, and the SQL standard's regression aggregates of
//! two (`regr_*`, `covar_pop`, `covar_samp`, `corr`), as PostgreSQL computes them.
//!
//! ## Rules
//! - `float4`/`float8` arguments accumulate in double precision with the Youngs–Cramer
//!   algorithm (`float.c`'s `float8_accum`, `float8_regr_accum`): the count, the sums, and
//!   the sums of squared deviations from the running mean, which do not lose the precision
//!   `n·Σx² − (Σx)²` would. An overflow from finite inputs is 22003; an infinite or NaN
//!   input makes the deviations NaN.
//! - Integer and `numeric` arguments of the one-argument aggregates accumulate exactly as
//!   numeric (`numeric.c`'s `numeric_stddev_internal`): `(n·Σx² − (Σx)²) / (n·(n−1))` (or
//!   `n·n`) at the division's scale, and its square root at the same scale; a NaN or an
//!   infinity among the inputs gives NaN.
//! - The regression aggregates take double precision (their arguments are cast) and skip a
//!   row where either argument is NULL: `(Y, X)`, the dependent variable first.

use quire_engine::{Numeric, SqlState, Value};

use crate::error::{Result, SqlError};
use crate::numeric::{self, Op};

/// One-argument spread aggregates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spread {
    VarPop,
    VarSamp,
    StddevPop,
    StddevSamp,
}

/// The two-argument regression aggregates (`regr_count(Y, X)` and the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Regr {
    Count,
    Sxx,
    Syy,
    Sxy,
    AvgX,
    AvgY,
    R2,
    Slope,
    Intercept,
    CovarPop,
    CovarSamp,
    Corr,
}

/// The spread aggregate named `name` (without `pg_catalog.`).
pub(crate) fn spread(name: &str) -> Option<Spread> {
    Some(match name {
        "var_pop" => Spread::VarPop,
        "var_samp" | "variance" => Spread::VarSamp,
        "stddev_pop" => Spread::StddevPop,
        "stddev_samp" | "stddev" => Spread::StddevSamp,
        _ => return None,
    })
}

/// The regression aggregate named `name` (without `pg_catalog.`).
pub(crate) fn regr(name: &str) -> Option<Regr> {
    Some(match name {
        "regr_count" => Regr::Count,
        "regr_sxx" => Regr::Sxx,
        "regr_syy" => Regr::Syy,
        "regr_sxy" => Regr::Sxy,
        "regr_avgx" => Regr::AvgX,
        "regr_avgy" => Regr::AvgY,
        "regr_r2" => Regr::R2,
        "regr_slope" => Regr::Slope,
        "regr_intercept" => Regr::Intercept,
        "covar_pop" => Regr::CovarPop,
        "covar_samp" => Regr::CovarSamp,
        "corr" => Regr::Corr,
        _ => return None,
    })
}

impl Spread {
    fn sample(self) -> bool {
        matches!(self, Spread::VarSamp | Spread::StddevSamp)
    }

    fn root(self) -> bool {
        matches!(self, Spread::StddevPop | Spread::StddevSamp)
    }
}

fn overflow() -> SqlError {
    SqlError::new(
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        "value out of range: overflow",
    )
}

/// `float8_accum`'s state: the count, Σx, and Σ(x − mean)² kept as Youngs–Cramer do.
#[derive(Clone, Debug, Default)]
pub(crate) struct FloatSpread {
    n: f64,
    sx: f64,
    sxx: f64,
}

impl FloatSpread {
    /// No value added yet.
    pub(crate) fn is_empty(&self) -> bool {
        self.n == 0.0
    }

    pub(crate) fn add(&mut self, x: f64) -> Result<()> {
        let (n0, sx0) = (self.n, self.sx);
        self.n += 1.0;
        self.sx += x;
        if n0 > 0.0 {
            let d = x * self.n - self.sx;
            self.sxx += d * d / (self.n * n0);
            if self.sx.is_infinite() || self.sxx.is_infinite() {
                if !sx0.is_infinite() && !x.is_infinite() {
                    return Err(overflow());
                }
                self.sxx = f64::NAN;
            }
        } else if !x.is_finite() {
            self.sxx = f64::NAN;
        }
        Ok(())
    }

    pub(crate) fn finish(&self, f: Spread) -> Value {
        let denominator = if f.sample() { self.n - 1.0 } else { self.n };
        if denominator <= 0.0 {
            return Value::Null;
        }
        let variance = self.sxx / denominator;
        Value::Float(if f.root() { variance.sqrt() } else { variance })
    }
}

/// `numeric_accum`'s state: the exact count, Σx and Σx², and whether a NaN or an infinity
/// came (then the result is NaN).
#[derive(Clone, Debug, Default)]
pub(crate) struct NumericSpread {
    n: i64,
    sum: Option<Numeric>,
    sum2: Option<Numeric>,
    special: bool,
}

impl NumericSpread {
    pub(crate) fn add(&mut self, x: &Numeric) -> Result<()> {
        self.n = self.n.checked_add(1).ok_or_else(overflow)?;
        if x.as_special().is_some() {
            self.special = true;
            return Ok(());
        }
        let square = numeric::arith(Op::Mul, x, x)?;
        self.sum = Some(match self.sum.take() {
            None => x.clone(),
            Some(s) => numeric::arith(Op::Add, &s, x)?,
        });
        self.sum2 = Some(match self.sum2.take() {
            None => square,
            Some(s) => numeric::arith(Op::Add, &s, &square)?,
        });
        Ok(())
    }

    pub(crate) fn finish(&self, f: Spread) -> Result<Value> {
        if self.n == 0 || f.sample() && self.n <= 1 {
            return Ok(Value::Null);
        }
        if self.special {
            return Ok(Value::Numeric(numeric::nan()));
        }
        let (Some(sum), Some(sum2)) = (&self.sum, &self.sum2) else {
            return Ok(Value::Null);
        };
        let n = numeric::from_i64(self.n);
        // n·Σx² − (Σx)², exact (scale twice the inputs' largest).
        let numerator = numeric::arith(
            Op::Sub,
            &numeric::arith(Op::Mul, &n, sum2)?,
            &numeric::arith(Op::Mul, sum, sum)?,
        )?;
        // Round-off cannot make it negative here (exact arithmetic), but zero is PostgreSQL's
        // plain `0`.
        if numeric::sign(&numerator) <= 0 {
            return Ok(Value::Numeric(numeric::from_i64(0)));
        }
        let other = if f.sample() { self.n - 1 } else { self.n };
        let denominator = numeric::arith(Op::Mul, &n, &numeric::from_i64(other))?;
        let variance = numeric::arith(Op::Div, &numerator, &denominator)?;
        Ok(Value::Numeric(if f.root() {
            numeric::math::sqrt_at(&variance, i64::from(variance.scale()))?
        } else {
            variance
        }))
    }
}

/// `float8_regr_accum`'s state: the count, Σx, Σy, and the sums of squared and crossed
/// deviations, kept as Youngs–Cramer do.
#[derive(Clone, Debug, Default)]
pub(crate) struct RegrState {
    n: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    syy: f64,
    sxy: f64,
}

impl RegrState {
    /// Adds one row: `y` the dependent variable (the first argument), `x` the second.
    pub(crate) fn add(&mut self, y: f64, x: f64) -> Result<()> {
        let (n0, sx0, sy0) = (self.n, self.sx, self.sy);
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        if n0 <= 0.0 {
            if !x.is_finite() {
                self.sxx = f64::NAN;
                self.sxy = f64::NAN;
            }
            if !y.is_finite() {
                self.syy = f64::NAN;
                self.sxy = f64::NAN;
            }
            return Ok(());
        }
        let dx = x * self.n - self.sx;
        let dy = y * self.n - self.sy;
        let scale = 1.0 / (self.n * n0);
        self.sxx += dx * dx * scale;
        self.syy += dy * dy * scale;
        self.sxy += dx * dy * scale;
        let finite_x = !sx0.is_infinite() && !x.is_infinite();
        let finite_y = !sy0.is_infinite() && !y.is_infinite();
        if (self.sx.is_infinite() || self.sxx.is_infinite()) && finite_x
            || (self.sy.is_infinite() || self.syy.is_infinite()) && finite_y
            || self.sxy.is_infinite() && finite_x && finite_y
        {
            return Err(overflow());
        }
        for s in [&mut self.sxx, &mut self.syy, &mut self.sxy] {
            if s.is_infinite() {
                *s = f64::NAN;
            }
        }
        Ok(())
    }

    pub(crate) fn finish(&self, f: Regr) -> Value {
        let Self {
            n,
            sx,
            sy,
            sxx,
            syy,
            sxy,
        } = *self;
        if f == Regr::Count {
            return Value::Int(n as i64);
        }
        let least = if f == Regr::CovarSamp { 2.0 } else { 1.0 };
        if n < least {
            return Value::Null;
        }
        let result = match f {
            Regr::Count => n,
            Regr::Sxx => sxx,
            Regr::Syy => syy,
            Regr::Sxy => sxy,
            Regr::AvgX => sx / n,
            Regr::AvgY => sy / n,
            Regr::CovarPop => sxy / n,
            Regr::CovarSamp => sxy / (n - 1.0),
            Regr::Corr if sxx == 0.0 || syy == 0.0 => return Value::Null,
            Regr::Corr => corr(sxx, syy, sxy),
            Regr::R2 | Regr::Slope | Regr::Intercept if sxx == 0.0 => return Value::Null,
            // A horizontal line fits exactly (the standard's rule).
            Regr::R2 if syy == 0.0 => 1.0,
            Regr::R2 => (sxy * sxy) / (sxx * syy),
            Regr::Slope => sxy / sxx,
            Regr::Intercept => (sy - sx * sxy / sxx) / n,
        };
        Value::Float(result)
    }
}

/// `corr`: Σxy over the root of Σxx·Σyy, that product's root taken factor by factor when it
/// would underflow or overflow, and kept within [−1, 1] against round-off.
fn corr(sxx: f64, syy: f64, sxy: f64) -> f64 {
    let product = sxx * syy;
    let root = if product == 0.0 || product.is_infinite() {
        sxx.sqrt() * syy.sqrt()
    } else {
        product.sqrt()
    };
    (sxy / root).clamp(-1.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_variance_is_youngs_cramer() {
        let mut s = FloatSpread::default();
        for x in [1.0, 2.0, 3.0, 4.0] {
            s.add(x).unwrap();
        }
        assert!(matches!(s.finish(Spread::VarPop), Value::Float(v) if (v - 1.25).abs() < 1e-15));
        assert!(
            matches!(s.finish(Spread::VarSamp), Value::Float(v) if (v - 5.0 / 3.0).abs() < 1e-15)
        );
        let one = {
            let mut s = FloatSpread::default();
            s.add(7.0).unwrap();
            s
        };
        assert!(matches!(one.finish(Spread::VarSamp), Value::Null));
        assert!(matches!(one.finish(Spread::VarPop), Value::Float(v) if v == 0.0));
        let mut big = FloatSpread::default();
        big.add(f64::MAX).unwrap();
        assert!(
            big.add(f64::MAX).is_err(),
            "finite inputs overflowing is 22003"
        );
    }

    #[test]
    fn numeric_variance_keeps_postgres_scale() {
        let mut s = NumericSpread::default();
        for x in ["1.5", "2.5", "4"] {
            s.add(&numeric::parse(x).unwrap()).unwrap();
        }
        let Value::Numeric(v) = s.finish(Spread::VarSamp).unwrap() else {
            panic!("numeric result");
        };
        // PostgreSQL: select var_samp(x) from (values (1.5),(2.5),(4)) v(x) → 1.5833333333333333
        assert_eq!(v.to_string(), "1.5833333333333333");
        let Value::Numeric(d) = s.finish(Spread::StddevPop).unwrap() else {
            panic!("numeric result");
        };
        // PostgreSQL: stddev_pop of the same → 1.02740233382816274171 (var_pop 1.0555…6, scale 20).
        assert_eq!(d.to_string(), "1.02740233382816274171");
    }

    #[test]
    fn regression_lines() {
        let mut r = RegrState::default();
        for (x, y) in [(1.0, 3.0), (2.0, 5.0), (3.0, 7.0)] {
            r.add(y, x).unwrap();
        }
        assert!(matches!(r.finish(Regr::Count), Value::Int(3)));
        assert!(matches!(r.finish(Regr::Slope), Value::Float(v) if (v - 2.0).abs() < 1e-12));
        assert!(matches!(r.finish(Regr::Intercept), Value::Float(v) if (v - 1.0).abs() < 1e-12));
        assert!(matches!(r.finish(Regr::Corr), Value::Float(v) if (v - 1.0).abs() < 1e-15));
        assert!(matches!(
            RegrState::default().finish(Regr::Sxx),
            Value::Null
        ));
    }
}
