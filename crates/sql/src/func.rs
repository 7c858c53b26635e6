//! Scalar functions and aggregates: resolution by name and argument types (what the binder
//! asks), and evaluation (what the executor asks). A `pg_catalog.` prefix is accepted on
//! every name, as PostgreSQL resolves unqualified names through `pg_catalog` first.
//!
//! ## Rules
//! - A function that builds a value computes its length first and fails with 54000 past
//!   1 GB before allocating it (`types::check_value_len`, `check_requested_len` for
//!   `repeat`, `check_growth` for what grows piece by piece: `concat`, `string_agg`, an
//!   array's text). A long build checks the interrupt as it goes (`repeat`).
//! - A call no function takes is 42883 with PostgreSQL's hint ([`no_such_function`]); the
//!   binder adds the position of the function's name.

use quire_engine::{SqlState, Value};

use crate::context::Cx;
use crate::error::{Result, SqlError};
use crate::parse::quote_ident;
use crate::types::{self, SqlType};
use crate::types::{as_f64, compare};

mod advisory;
pub(crate) mod array;
pub(crate) mod bytea;
pub(crate) mod json;
mod math;
mod number_format;
pub(crate) mod regex;
pub(crate) mod stats;
pub(crate) mod string;
mod to_char;

/// What `to_char` formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToChar {
    Timestamp,
    Timestamptz,
    /// A date, as PostgreSQL's implicit cast makes it a timestamptz: its midnight on the
    /// session zone's clock.
    Date,
    Interval,
    Number,
}

/// A scalar function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Func {
    Lower,
    Upper,
    Length,
    Substr,
    Left,
    Right,
    Replace,
    /// btrim, ltrim, rtrim (and SQL's TRIM): which ends, and the characters (blank if none).
    Trim {
        leading: bool,
        trailing: bool,
    },
    Strpos,
    Repeat,
    CurrentDate,
    Concat,
    Coalesce,
    NullIf,
    Greatest,
    Least,
    Abs,
    Round,
    Random,
    /// nextval, currval, setval, lastval: see `crate::sequence`.
    NextVal,
    CurrVal,
    SetVal,
    LastVal,
    Md5,
    Now,
    Version,
    CurrentDatabase,
    CurrentUser,
    SessionUser,
    CurrentSchema,
    CurrentSchemas,
    CurrentSetting,
    /// set_config(name, value, is_local): see [`crate::settings::Settings::set_config`].
    SetConfig,
    TableIsVisible,
    /// `pg_partition_ancestors(regclass)`: the relation and the partitioned tables above
    /// it. quire has no partitioning yet, so the set is the relation alone, given here as
    /// a scalar (psql 18's `\d` calls it in a select list).
    PartitionAncestors,
    /// `pg_get_serial_sequence(table, column)`.
    SerialSequence,
    /// pg_relation_size, pg_table_size, pg_indexes_size, pg_total_relation_size.
    RelationSize(crate::pg_catalog::SizeOf),
    SizePretty,
    TypeIsVisible,
    /// `to_regtype(text)`, `to_regclass(text)`: the oid of the named type or relation, NULL
    /// when there is none (where a cast to `regtype` / `regclass` fails).
    ToRegType,
    /// `pg_input_is_valid(text, type)`: whether the type's input takes the text.
    InputIsValid,
    ToRegClass,
    /// `pg_collation_is_visible(oid)`: true for the collations pg_collation lists, NULL for
    /// an oid that is none.
    CollationIsVisible,
    FormatType,
    GetUserById,
    GetIndexDef,
    GetConstraintDef,
    GetExpr,
    /// obj_description(oid [, catalog]) and col_description(table, column): the comment
    /// COMMENT ON set (`pg_description`), NULL if none.
    ObjDescription,
    ColDescription,
    /// Definitions of objects quire cannot have (views, triggers, rules, statistics
    /// objects, partitions): NULL, as PostgreSQL answers for an oid no such object has.
    NoObjectDef,
    /// `pg_get_viewdef(oid | name [, pretty])`.
    GetViewDef,
    EncodingToChar,
    BackendPid,
    /// pg_cancel_backend(pid), pg_terminate_backend(pid [, timeout_ms]).
    SignalBackend(crate::backends::Signal),
    /// pg_current_wal_insert_lsn, pg_current_wal_lsn, pg_current_wal_flush_lsn.
    WalLsn(WalPosition),
    /// pg_wal_lsn_diff: the bytes between two WAL positions.
    WalLsnDiff,
    /// pg_stat_reset_shared(target): `bgwriter` or `wal` counters start from zero.
    ResetShared,
    /// `pg_sleep(seconds)`.
    Sleep,
    /// The advisory lock functions (`func/advisory.rs`).
    Advisory(advisory::Advisory),
    QuoteIdent,
    /// quote_literal(text) and quote_nullable(text): the value as a string literal
    /// (`E'...'` when it has a backslash); quote_nullable gives `NULL` for NULL.
    QuoteLiteral {
        nullable: bool,
    },
    /// pg_is_in_recovery(): false, as quire has no standby mode.
    InRecovery,
    /// pg_tablespace_location(oid): `''` for the two built-in tablespaces (the data
    /// directory's), NULL for any other oid (quire has no other tablespaces).
    TablespaceLocation,
    /// acldefault(objtype, owner): the privileges an object of that kind has when its acl
    /// column is NULL, as PostgreSQL 16's `acldefault` gives them.
    AclDefault,
    /// `to_char(value, template)`, by the value's kind.
    ToChar(ToChar),
    RelationIsPublishable,
    /// A date/time operator (`datetime::arith`), bound from `+ - * /` by the binder.
    DateTime(crate::datetime::arith::DtOp),
    /// A date/time function (`datetime::fields`), resolved by the binder.
    DateTimeFn(crate::datetime::fields::DtFunc),
    /// The math functions: see [`math`].
    Math(math::Math),
    /// The string functions of [`string`].
    Str(string::StrFn),
    /// The binary-string functions (`func::bytea`).
    Bytea(bytea::ByteaFn),
    Regex(regex::ReFn),
    /// format(formatstr, args...): `%s`, `%I`, `%L`, `%%`, positions, `-` and widths.
    Format,
    /// concat_ws(separator, values...): `concat`'s values joined by the separator, NULLs
    /// left out; NULL only for a NULL separator.
    ConcatWs,
    /// pg_typeof(x): the argument's type, known when the call is bound.
    TypeOf(SqlType),
    /// The array functions and operators: see [`array`].
    Array(array::ArrayFn),
    /// The json and jsonb functions and operators: see [`json`].
    Json(json::JsonFn),
}

/// Which of the WAL's positions a `pg_current_wal_*lsn()` function reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalPosition {
    Insert,
    Write,
    Flush,
}

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggFunc {
    CountStar,
    Count,
    Sum,
    Min,
    Max,
    Avg,
    BoolAnd,
    BoolOr,
    StringAgg,
    /// array_agg of values of the type (`Unknown` until [`AggFunc::typed`]).
    ArrayAgg(SqlType),
    /// json_agg / jsonb_agg of values the binder converted to json (or jsonb) text.
    JsonAgg {
        jsonb: bool,
    },
    /// json_object_agg / jsonb_object_agg of text keys and converted values.
    JsonObjectAgg {
        jsonb: bool,
    },
    /// var_pop, var_samp, stddev_pop, stddev_samp (and their short names).
    Spread(stats::Spread),
    /// regr_*, covar_pop, covar_samp and corr of (Y, X).
    Regr(stats::Regr),
    /// any_value: some non-NULL value of the group (the first met).
    AnyValue,
    /// bit_and, bit_or, bit_xor of integers.
    Bit(BitOp),
}

/// The bitwise aggregates' operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitOp {
    And,
    Or,
    Xor,
}

/// A window function: a built-in one, or an aggregate over the window's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WinFunc {
    RowNumber,
    Rank,
    DenseRank,
    PercentRank,
    CumeDist,
    Ntile,
    Lag,
    Lead,
    FirstValue,
    LastValue,
    NthValue,
    Agg(AggFunc),
}

/// The built-in window function named `name`, if it is one.
pub(crate) fn window_function(name: &str) -> Option<WinFunc> {
    Some(match strip_catalog(name) {
        "row_number" => WinFunc::RowNumber,
        "rank" => WinFunc::Rank,
        "dense_rank" => WinFunc::DenseRank,
        "percent_rank" => WinFunc::PercentRank,
        "cume_dist" => WinFunc::CumeDist,
        "ntile" => WinFunc::Ntile,
        "lag" => WinFunc::Lag,
        "lead" => WinFunc::Lead,
        "first_value" => WinFunc::FirstValue,
        "last_value" => WinFunc::LastValue,
        "nth_value" => WinFunc::NthValue,
        _ => return None,
    })
}

impl WinFunc {
    /// A built-in window function's signature for arguments of types `args`: the types its
    /// arguments are cast to (`None` to keep the argument's own) and its result type; `None`
    /// if it takes no such arguments.
    pub(crate) fn signature(self, args: &[SqlType]) -> Option<(Vec<Option<SqlType>>, SqlType)> {
        use SqlType as T;
        let value = args
            .first()
            .map(|t| if *t == T::Unknown { T::Text } else { *t });
        Some(match (self, args.len(), value) {
            (WinFunc::RowNumber | WinFunc::Rank | WinFunc::DenseRank, 0, _) => (vec![], T::Int8),
            (WinFunc::PercentRank | WinFunc::CumeDist, 0, _) => (vec![], T::Float8),
            (WinFunc::Ntile, 1, _) => (vec![Some(T::Int4)], T::Int4),
            (WinFunc::Lag | WinFunc::Lead, 1..=3, Some(v)) => {
                let casts = [Some(v), Some(T::Int4), Some(v)];
                (casts[..args.len()].to_vec(), v)
            }
            (WinFunc::FirstValue | WinFunc::LastValue, 1, Some(v)) => (vec![Some(v)], v),
            (WinFunc::NthValue, 2, Some(v)) => (vec![Some(v), Some(T::Int4)], v),
            _ => return None,
        })
    }
}

/// Most arguments a variadic function (concat, coalesce) takes.
const MAX_ARGS: usize = 100;

fn strip_catalog(name: &str) -> &str {
    name.strip_prefix("pg_catalog.").unwrap_or(name)
}

/// The aggregate named `name`, if it is one.
pub(crate) fn aggregate(name: &str) -> Option<AggFunc> {
    Some(match strip_catalog(name) {
        "count" => AggFunc::Count,
        "sum" => AggFunc::Sum,
        "min" => AggFunc::Min,
        "max" => AggFunc::Max,
        "avg" => AggFunc::Avg,
        "bool_and" | "every" => AggFunc::BoolAnd,
        "bool_or" => AggFunc::BoolOr,
        "string_agg" => AggFunc::StringAgg,
        "array_agg" => AggFunc::ArrayAgg(SqlType::Unknown),
        "json_agg" => AggFunc::JsonAgg { jsonb: false },
        "jsonb_agg" => AggFunc::JsonAgg { jsonb: true },
        "json_object_agg" => AggFunc::JsonObjectAgg { jsonb: false },
        "jsonb_object_agg" => AggFunc::JsonObjectAgg { jsonb: true },
        "any_value" => AggFunc::AnyValue,
        "bit_and" => AggFunc::Bit(BitOp::And),
        "bit_or" => AggFunc::Bit(BitOp::Or),
        "bit_xor" => AggFunc::Bit(BitOp::Xor),
        other => {
            return stats::spread(other)
                .map(AggFunc::Spread)
                .or_else(|| stats::regr(other).map(AggFunc::Regr))
        }
    })
}

impl AggFunc {
    /// The aggregate for a (first) argument of type `arg`: array_agg learns its element type.
    pub(crate) fn typed(self, arg: Option<SqlType>) -> AggFunc {
        match (self, arg) {
            (AggFunc::ArrayAgg(_), Some(SqlType::Unknown)) => AggFunc::ArrayAgg(SqlType::Text),
            (AggFunc::ArrayAgg(_), Some(t)) => AggFunc::ArrayAgg(t),
            (f, _) => f,
        }
    }

    /// How many arguments the aggregate takes (count(*) none).
    pub(crate) fn arity(self) -> usize {
        match self {
            AggFunc::CountStar => 0,
            AggFunc::StringAgg | AggFunc::JsonObjectAgg { .. } | AggFunc::Regr(_) => 2,
            _ => 1,
        }
    }

    /// The aggregate's result type for a (first) argument of type `arg`, if it takes one.
    pub(crate) fn result_type(self, arg: SqlType) -> Option<SqlType> {
        Some(match self {
            AggFunc::CountStar | AggFunc::Count | AggFunc::Regr(stats::Regr::Count) => {
                SqlType::Int8
            }
            AggFunc::Sum if arg.is_int() => SqlType::Int8,
            AggFunc::Sum | AggFunc::Avg | AggFunc::Spread(_) if arg.is_numeric() => {
                SqlType::Numeric(None)
            }
            AggFunc::Sum | AggFunc::Avg if arg.is_float() || arg.is_int() => SqlType::Float8,
            AggFunc::Spread(_) if arg == SqlType::Float8 => SqlType::Float8,
            AggFunc::Regr(_) => SqlType::Float8,
            AggFunc::Min | AggFunc::Max | AggFunc::AnyValue => arg,
            AggFunc::BoolAnd | AggFunc::BoolOr if arg == SqlType::Bool => SqlType::Bool,
            AggFunc::StringAgg if arg.is_text() => SqlType::Text,
            AggFunc::StringAgg if arg == SqlType::Bytea => SqlType::Bytea,
            AggFunc::Bit(_) if arg.is_int() => arg,
            AggFunc::ArrayAgg(_) if arg.element().is_some() => arg,
            AggFunc::ArrayAgg(_) => SqlType::array_of(arg)?,
            AggFunc::JsonAgg { jsonb: true } | AggFunc::JsonObjectAgg { jsonb: true } => {
                SqlType::Jsonb
            }
            AggFunc::JsonAgg { .. } | AggFunc::JsonObjectAgg { .. } => SqlType::Json,
            _ => return None,
        })
    }
}

/// An aggregate's running state.
#[derive(Clone, Debug)]
pub(crate) enum AggState {
    Count(i64),
    Sum(Option<Value>),
    /// The sum so far (float or numeric) and the count.
    Avg {
        sum: Option<Value>,
        n: i64,
    },
    Extreme(Option<Value>),
    Bool(Option<bool>),
    Text(Option<String>),
    /// string_agg of bytea.
    Bytes(Option<Vec<u8>>),
    FloatSpread(stats::FloatSpread),
    NumericSpread(stats::NumericSpread),
    Regr(stats::RegrState),
    /// array_agg's array so far (NULL for no row).
    Array(Option<crate::types::array::Builder>),
    /// array_agg of arrays: the sub-arrays' shape and their elements so far.
    Arrays(Option<crate::types::array::Stacker>),
    /// json_agg's and jsonb_agg's text so far (`[1, 2`), NULL for no row.
    JsonArray(Option<String>),
    /// json_object_agg's and jsonb_object_agg's pairs so far, and their bytes.
    JsonObject(Vec<(String, String)>, usize),
}

impl AggState {
    pub(crate) fn new(f: AggFunc) -> AggState {
        match f {
            AggFunc::CountStar | AggFunc::Count => AggState::Count(0),
            AggFunc::Sum | AggFunc::Bit(_) => AggState::Sum(None),
            AggFunc::Avg => AggState::Avg { sum: None, n: 0 },
            AggFunc::Min | AggFunc::Max | AggFunc::AnyValue => AggState::Extreme(None),
            AggFunc::Spread(_) => AggState::FloatSpread(stats::FloatSpread::default()),
            AggFunc::Regr(_) => AggState::Regr(stats::RegrState::default()),
            AggFunc::BoolAnd | AggFunc::BoolOr => AggState::Bool(None),
            AggFunc::StringAgg => AggState::Text(None),
            AggFunc::ArrayAgg(t) if t.element().is_some() => AggState::Arrays(None),
            AggFunc::ArrayAgg(_) => AggState::Array(None),
            AggFunc::JsonAgg { .. } => AggState::JsonArray(None),
            AggFunc::JsonObjectAgg { .. } => AggState::JsonObject(Vec::new(), 0),
        }
    }

    /// Adds one input row's argument values (none for count(*)).
    pub(crate) fn add(&mut self, f: AggFunc, args: &[Value]) -> Result<()> {
        if f == AggFunc::CountStar {
            if let AggState::Count(n) = self {
                *n += 1;
            }
            return Ok(());
        }
        let v = args.first().cloned().unwrap_or(Value::Null);
        // The argument's type picks the state at the first value: string_agg of bytea, and
        // exact (numeric) spread for the integers and numerics the binder casts to numeric.
        match (&*self, &v) {
            (AggState::Text(None), Value::Bytea(_)) => *self = AggState::Bytes(None),
            (AggState::FloatSpread(acc), Value::Numeric(_)) if acc.is_empty() => {
                *self = AggState::NumericSpread(stats::NumericSpread::default());
            }
            _ => {}
        }
        match (&mut *self, f) {
            (AggState::Array(b), AggFunc::ArrayAgg(elem)) => {
                // array_agg keeps NULLs.
                return b.get_or_insert_with(Default::default).push_value(&v, elem);
            }
            (AggState::Arrays(s), _) => return s.get_or_insert_with(Default::default).push(&v),
            (AggState::JsonArray(acc), _) => return json::agg_push(acc, &v),
            (AggState::JsonObject(pairs, bytes), AggFunc::JsonObjectAgg { jsonb }) => {
                return json::object_agg_push(pairs, bytes, args, jsonb)
            }
            (AggState::Regr(acc), _) => {
                return match (as_f64(&v), args.get(1).and_then(as_f64)) {
                    (Some(dependent), Some(independent)) => acc.add(dependent, independent),
                    _ => Ok(()),
                }
            }
            _ => {}
        }
        if v.is_null() {
            return Ok(());
        }
        match (self, f) {
            (AggState::Count(n), _) => *n += 1,
            (AggState::FloatSpread(acc), _) => acc.add(as_f64(&v).unwrap_or(f64::NAN))?,
            (AggState::NumericSpread(acc), _) => match &v {
                Value::Numeric(x) => acc.add(x)?,
                _ => return Err(types::internal("numeric spread of a non-numeric")),
            },
            (AggState::Sum(acc), AggFunc::Bit(op)) => *acc = Some(bit_values(acc.take(), &v, op)),
            (AggState::Extreme(acc), AggFunc::AnyValue) => {
                if acc.is_none() {
                    *acc = Some(v);
                }
            }
            (AggState::Sum(acc), _) => *acc = Some(add_values(acc.take(), v)?),
            (AggState::Avg { sum, n }, _) => {
                *sum = Some(add_values(sum.take(), v)?);
                *n += 1;
            }
            (AggState::Extreme(acc), f) => {
                let replace = match acc {
                    None => true,
                    Some(cur) => {
                        let o = compare(&v, cur);
                        if f == AggFunc::Min {
                            o.is_lt()
                        } else {
                            o.is_gt()
                        }
                    }
                };
                if replace {
                    *acc = Some(v);
                }
            }
            (AggState::Bool(acc), f) => {
                let b = matches!(v, Value::Bool(true));
                *acc = Some(match (*acc, f) {
                    (None, _) => b,
                    (Some(a), AggFunc::BoolAnd) => a && b,
                    (Some(a), _) => a || b,
                });
            }
            (
                AggState::Array(_)
                | AggState::Arrays(_)
                | AggState::JsonArray(_)
                | AggState::JsonObject(..)
                | AggState::Regr(_),
                _,
            ) => return Err(types::internal("aggregate state")),
            (AggState::Bytes(acc), _) => {
                let Value::Bytea(bytes) = v else {
                    return Ok(());
                };
                match acc {
                    None => *acc = Some(bytes),
                    Some(so_far) => {
                        let sep: &[u8] = match args.get(1) {
                            Some(Value::Bytea(sep)) => sep,
                            _ => &[],
                        };
                        types::check_growth(so_far.len(), sep.len().saturating_add(bytes.len()))?;
                        so_far.extend_from_slice(sep);
                        so_far.extend_from_slice(&bytes);
                    }
                }
            }
            (AggState::Text(acc), _) => {
                let sep = match args.get(1) {
                    Some(Value::Text(s)) => s.as_str(),
                    _ => "",
                };
                let Value::Text(s) = v else {
                    return Ok(());
                };
                match acc {
                    None => *acc = Some(s),
                    Some(a) => {
                        types::check_growth(a.len(), sep.len().saturating_add(s.len()))?;
                        a.push_str(sep);
                        a.push_str(&s);
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn finish(self, f: AggFunc) -> Result<Value> {
        Ok(match self {
            AggState::Count(n) => Value::Int(n),
            AggState::Sum(v) | AggState::Extreme(v) => v.unwrap_or(Value::Null),
            AggState::Avg { n: 0, .. } | AggState::Avg { sum: None, .. } => Value::Null,
            AggState::Avg {
                sum: Some(Value::Numeric(sum)),
                n,
            } => Value::Numeric(crate::numeric::arith(
                crate::numeric::Op::Div,
                &sum,
                &crate::numeric::from_i64(n),
            )?),
            AggState::Avg { sum: Some(sum), n } => {
                Value::Float(as_f64(&sum).unwrap_or(0.0) / n as f64)
            }
            AggState::Bool(b) => b.map_or(Value::Null, Value::Bool),
            AggState::Text(s) => {
                debug_assert_eq!(f, AggFunc::StringAgg);
                s.map_or(Value::Null, Value::Text)
            }
            AggState::Bytes(b) => b.map_or(Value::Null, Value::Bytea),
            AggState::FloatSpread(acc) => match f {
                AggFunc::Spread(kind) => acc.finish(kind),
                _ => return Err(types::internal("spread state")),
            },
            AggState::NumericSpread(acc) => match f {
                AggFunc::Spread(kind) => acc.finish(kind)?,
                _ => return Err(types::internal("spread state")),
            },
            AggState::Regr(acc) => match f {
                AggFunc::Regr(kind) => acc.finish(kind),
                _ => return Err(types::internal("regression state")),
            },
            AggState::Array(b) => b.map_or(Value::Null, crate::types::array::Builder::finish),
            AggState::Arrays(s) => {
                s.map_or(Ok(Value::Null), crate::types::array::Stacker::finish)?
            }
            AggState::JsonArray(acc) => json::agg_finish(acc),
            AggState::JsonObject(pairs, _) => json::object_agg_finish(&pairs, f)?,
        })
    }
}

/// bit_and's, bit_or's and bit_xor's running value (integers of one type).
fn bit_values(acc: Option<Value>, v: &Value, op: BitOp) -> Value {
    match (acc, v) {
        (Some(Value::Int(a)), Value::Int(b)) => Value::Int(match op {
            BitOp::And => a & b,
            BitOp::Or => a | b,
            BitOp::Xor => a ^ b,
        }),
        (_, v) => v.clone(),
    }
}

/// sum's and avg's running addition: exact for integers (22003 past bigint) and numerics,
/// float otherwise.
fn add_values(acc: Option<Value>, v: Value) -> Result<Value> {
    Ok(match (acc, v) {
        (None, v) => v,
        (Some(Value::Int(a)), Value::Int(b)) => Value::Int(a.checked_add(b).ok_or_else(|| {
            SqlError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range")
        })?),
        (Some(Value::Numeric(a)), Value::Numeric(b)) => {
            Value::Numeric(crate::numeric::arith(crate::numeric::Op::Add, &a, &b)?)
        }
        (Some(a), b) => Value::Float(as_f64(&a).unwrap_or(0.0) + as_f64(&b).unwrap_or(0.0)),
    })
}

/// 42883 for a call no function takes, with PostgreSQL's hint (the binder adds where the
/// call is).
pub(crate) fn no_such_function(name: &str, args: &[SqlType]) -> SqlError {
    let types: Vec<String> = args.iter().map(|t| t.name()).collect();
    SqlError::new(
        SqlState::UNDEFINED_FUNCTION,
        format!("function {name}({}) does not exist", types.join(", ")),
    )
    .with_hint(
        "No function matches the given name and argument types. You might need to add explicit type casts.",
    )
}

/// Resolves a scalar function call: the function, the types its arguments are cast to
/// (`None` to keep the argument's own), and its result type.
pub(crate) fn resolve(
    name: &str,
    args: &[SqlType],
) -> Result<(Func, Vec<Option<SqlType>>, SqlType)> {
    use SqlType as T;
    let short = strip_catalog(name);
    let n = args.len();
    if n > MAX_ARGS {
        return Err(SqlError::new(
            SqlState::TOO_MANY_ARGUMENTS,
            format!("cannot pass more than {MAX_ARGS} arguments to a function"),
        ));
    }
    let text = |k: usize| vec![Some(T::Text); k];
    let keep = |k: usize| vec![None; k];
    let common = || -> Result<SqlType> {
        let mut t = T::Unknown;
        for &a in args {
            t = unify(t, a).ok_or_else(|| no_such_function(short, args))?;
        }
        Ok(if t == T::Unknown { T::Text } else { t })
    };
    if let Some(r) = array::resolve(short, args) {
        return r;
    }
    if let Some(r) = bytea::resolve(short, args) {
        return Ok(r);
    }
    if let Some(r) = json::resolve(short, args) {
        return r;
    }
    if let Some((f, casts, result)) = advisory::lookup(short, n) {
        return Ok((Func::Advisory(f), casts, result));
    }
    if let ("pg_typeof", [arg]) = (short, args) {
        return Ok((Func::TypeOf(*arg), vec![None], T::Regtype));
    }
    let r = match (short, n) {
        ("lower", 1) => (Func::Lower, text(1), T::Text),
        ("upper", 1) => (Func::Upper, text(1), T::Text),
        ("length" | "char_length" | "character_length", 1) => (Func::Length, text(1), T::Int4),
        ("substring", _) if regex::resolve(short, args).is_some() => {
            regex::resolve(short, args).ok_or_else(|| no_such_function(short, args))?
        }
        ("substr" | "substring", 2 | 3) => {
            let mut c = vec![Some(T::Text), Some(T::Int8)];
            if n == 3 {
                c.push(Some(T::Int8));
            }
            (Func::Substr, c, T::Text)
        }
        ("left", 2) => (Func::Left, vec![Some(T::Text), Some(T::Int8)], T::Text),
        ("right", 2) => (Func::Right, vec![Some(T::Text), Some(T::Int8)], T::Text),
        ("replace", 3) => (Func::Replace, text(3), T::Text),
        ("btrim" | "trim", 1 | 2) => (trim(true, true), text(n), T::Text),
        ("ltrim", 1 | 2) => (trim(true, false), text(n), T::Text),
        ("rtrim", 1 | 2) => (trim(false, true), text(n), T::Text),
        ("strpos" | "position", 2) => (Func::Strpos, text(2), T::Int4),
        ("repeat", 2) => (Func::Repeat, vec![Some(T::Text), Some(T::Int8)], T::Text),
        ("current_date", 0) => (Func::CurrentDate, vec![], T::Date),
        ("concat", _) => (Func::Concat, as_output_text(args), T::Text),
        ("concat_ws", 1..) => {
            let mut c = as_output_text(args);
            c[0] = Some(T::Text);
            (Func::ConcatWs, c, T::Text)
        }
        ("format", 1..) => {
            let mut c = as_output_text(args);
            c[0] = Some(T::Text);
            (Func::Format, c, T::Text)
        }
        ("coalesce", 1..) => {
            let t = common()?;
            (Func::Coalesce, vec![Some(t); n], t)
        }
        ("nullif", 2) => {
            let t = common()?;
            (Func::NullIf, vec![Some(t); 2], t)
        }
        ("greatest", 1..) => {
            let t = common()?;
            (Func::Greatest, vec![Some(t); n], t)
        }
        ("least", 1..) => {
            let t = common()?;
            (Func::Least, vec![Some(t); n], t)
        }
        ("abs", 1) if args[0].is_float() || args[0].is_numeric() => (Func::Abs, keep(1), args[0]),
        ("round", 1 | 2) if args[0].is_numeric() => {
            let mut c = vec![None];
            if n == 2 {
                c.push(Some(T::Int4));
            }
            (Func::Round, c, T::Numeric(None))
        }
        ("abs", 1) if args[0] == T::Unknown => (Func::Abs, vec![Some(T::Float8)], T::Float8),
        ("round", 1 | 2) if args[0].is_int() || args[0].is_float() || args[0] == T::Unknown => {
            let mut c = vec![Some(T::Float8)];
            if n == 2 {
                c.push(Some(T::Int4));
            }
            (Func::Round, c, T::Float8)
        }
        ("random", 0) => (Func::Random, vec![], T::Float8),
        ("nextval", 1) => (Func::NextVal, vec![Some(T::Regclass)], T::Int8),
        ("currval", 1) => (Func::CurrVal, vec![Some(T::Regclass)], T::Int8),
        ("setval", 2 | 3) => {
            let mut c = vec![Some(T::Regclass), Some(T::Int8)];
            if n == 3 {
                c.push(Some(T::Bool));
            }
            (Func::SetVal, c, T::Int8)
        }
        ("lastval", 0) => (Func::LastVal, vec![], T::Int8),
        // md5(bytea) hashes the bytes; md5(text) the text's.
        ("md5", 1) if args[0] == T::Bytea => (Func::Md5, vec![Some(T::Bytea)], T::Text),
        ("md5", 1) => (Func::Md5, text(1), T::Text),
        ("now" | "current_timestamp" | "statement_timestamp" | "transaction_timestamp", 0) => {
            (Func::Now, vec![], T::Timestamptz)
        }
        ("version", 0) => (Func::Version, vec![], T::Text),
        ("current_database", 0) => (Func::CurrentDatabase, vec![], T::Name),
        ("current_user" | "user" | "current_role", 0) => (Func::CurrentUser, vec![], T::Name),
        ("session_user", 0) => (Func::SessionUser, vec![], T::Name),
        ("current_schema", 0) => (Func::CurrentSchema, vec![], T::Name),
        ("current_schemas", 1) => (Func::CurrentSchemas, vec![Some(T::Bool)], T::TEXT_ARRAY),
        ("set_config", 3) => (
            Func::SetConfig,
            vec![Some(T::Text), Some(T::Text), Some(T::Bool)],
            T::Text,
        ),
        ("current_setting", 1 | 2) => {
            let mut c = text(1);
            if n == 2 {
                c.push(Some(T::Bool));
            }
            (Func::CurrentSetting, c, T::Text)
        }
        ("pg_relation_is_publishable", 1) => {
            (Func::RelationIsPublishable, vec![Some(T::Oid)], T::Bool)
        }
        ("pg_table_is_visible", 1) => (Func::TableIsVisible, vec![Some(T::Oid)], T::Bool),
        ("pg_get_serial_sequence", 2) => (
            Func::SerialSequence,
            vec![Some(T::Text), Some(T::Text)],
            T::Text,
        ),
        ("pg_partition_ancestors", 1) => (
            Func::PartitionAncestors,
            vec![Some(T::Regclass)],
            T::Regclass,
        ),
        // No user-defined functions exist (pg_proc is empty): none is visible.
        ("pg_function_is_visible", 1) => (Func::NoObjectDef, keep(1), T::Bool),
        ("pg_relation_size", 1 | 2) => {
            let mut c = vec![Some(T::Regclass)];
            if n == 2 {
                c.push(Some(T::Text));
            }
            (
                Func::RelationSize(crate::pg_catalog::SizeOf::Fork),
                c,
                T::Int8,
            )
        }
        ("pg_table_size", 1) => (
            Func::RelationSize(crate::pg_catalog::SizeOf::Table),
            vec![Some(T::Regclass)],
            T::Int8,
        ),
        ("pg_indexes_size", 1) => (
            Func::RelationSize(crate::pg_catalog::SizeOf::Indexes),
            vec![Some(T::Regclass)],
            T::Int8,
        ),
        ("pg_total_relation_size", 1) => (
            Func::RelationSize(crate::pg_catalog::SizeOf::Total),
            vec![Some(T::Regclass)],
            T::Int8,
        ),
        ("pg_size_pretty", 1) => (Func::SizePretty, vec![Some(T::Int8)], T::Text),
        ("pg_type_is_visible", 1) => (Func::TypeIsVisible, vec![Some(T::Oid)], T::Bool),
        ("pg_collation_is_visible", 1) => (Func::CollationIsVisible, vec![Some(T::Oid)], T::Bool),
        ("to_regtype", 1) => (Func::ToRegType, text(1), T::Regtype),
        ("pg_input_is_valid", 2) => (Func::InputIsValid, text(2), T::Bool),
        ("to_regclass", 1) => (Func::ToRegClass, text(1), T::Regclass),
        ("format_type", 2) => (Func::FormatType, vec![Some(T::Oid), Some(T::Int4)], T::Text),
        ("pg_get_userbyid", 1) => (Func::GetUserById, vec![Some(T::Oid)], T::Name),
        ("pg_get_indexdef", 1 | 3) => {
            let mut c = vec![Some(T::Oid)];
            if n == 3 {
                c.extend([Some(T::Int4), Some(T::Bool)]);
            }
            (Func::GetIndexDef, c, T::Text)
        }
        ("pg_get_constraintdef", 1 | 2) => {
            let mut c = vec![Some(T::Oid)];
            if n == 2 {
                c.push(Some(T::Bool));
            }
            (Func::GetConstraintDef, c, T::Text)
        }
        ("pg_get_viewdef", 1 | 2) => {
            let by_name = matches!(args[0], T::Text | T::Unknown | T::Varchar(_));
            let mut c = vec![Some(if by_name { T::Text } else { T::Oid })];
            if n == 2 {
                c.push(None);
            }
            (Func::GetViewDef, c, T::Text)
        }
        ("pg_get_expr", 2 | 3) => (Func::GetExpr, keep(n), T::Text),
        (
            "pg_get_statisticsobjdef_columns"
            | "pg_get_triggerdef"
            | "pg_get_ruledef"
            | "pg_get_partkeydef"
            | "pg_get_partition_constraintdef"
            | "pg_get_function_arguments"
            | "pg_get_function_result",
            1 | 2,
        ) => (Func::NoObjectDef, keep(n), T::Text),
        ("obj_description", 1 | 2) => {
            let mut c = vec![Some(T::Oid)];
            if n == 2 {
                c.push(Some(T::Name));
            }
            (Func::ObjDescription, c, T::Text)
        }
        ("col_description", 2) => (
            Func::ColDescription,
            vec![Some(T::Oid), Some(T::Int4)],
            T::Text,
        ),
        // No comments on shared objects (databases, roles, tablespaces) are kept yet.
        ("shobj_description", 2) => (Func::NoObjectDef, keep(2), T::Text),
        ("pg_encoding_to_char", 1) => (Func::EncodingToChar, vec![Some(T::Int4)], T::Name),
        ("pg_backend_pid", 0) => (Func::BackendPid, vec![], T::Int4),
        ("pg_cancel_backend", 1) => (
            Func::SignalBackend(crate::backends::Signal::Cancel),
            vec![Some(T::Int4)],
            T::Bool,
        ),
        ("pg_terminate_backend", 1 | 2) => {
            let mut c = vec![Some(T::Int4)];
            if n == 2 {
                c.push(Some(T::Int8));
            }
            (
                Func::SignalBackend(crate::backends::Signal::Terminate),
                c,
                T::Bool,
            )
        }
        ("pg_current_wal_insert_lsn", 0) => (Func::WalLsn(WalPosition::Insert), vec![], T::PgLsn),
        ("pg_current_wal_lsn", 0) => (Func::WalLsn(WalPosition::Write), vec![], T::PgLsn),
        ("pg_current_wal_flush_lsn", 0) => (Func::WalLsn(WalPosition::Flush), vec![], T::PgLsn),
        ("pg_stat_reset_shared", 1) => (Func::ResetShared, text(1), T::Void),
        ("pg_sleep", 1) => (Func::Sleep, vec![Some(T::Float8)], T::Void),
        ("pg_wal_lsn_diff", 2) => (
            Func::WalLsnDiff,
            vec![Some(T::PgLsn), Some(T::PgLsn)],
            T::Numeric(None),
        ),
        ("quote_ident", 1) => (Func::QuoteIdent, text(1), T::Text),
        ("quote_literal", 1) => (Func::QuoteLiteral { nullable: false }, text(1), T::Text),
        ("quote_nullable", 1) => (Func::QuoteLiteral { nullable: true }, text(1), T::Text),
        ("pg_is_in_recovery", 0) => (Func::InRecovery, vec![], T::Bool),
        ("pg_tablespace_location", 1) => (Func::TablespaceLocation, vec![Some(T::Oid)], T::Text),
        ("acldefault", 2) => (
            Func::AclDefault,
            vec![Some(T::Char), Some(T::Oid)],
            T::TEXT_ARRAY,
        ),
        ("to_char", 2) => {
            let (kind, arg) = match args[0] {
                T::Timestamp => (ToChar::Timestamp, T::Timestamp),
                T::Timestamptz => (ToChar::Timestamptz, T::Timestamptz),
                T::Date => (ToChar::Date, T::Date),
                T::Interval => (ToChar::Interval, T::Interval),
                t if t.is_int() || t.is_float() || t.is_numeric() => (ToChar::Number, t),
                _ => return Err(no_such_function(short, args)),
            };
            (Func::ToChar(kind), vec![Some(arg), Some(T::Text)], T::Text)
        }
        _ => string::resolve(short, args)
            .or_else(|| regex::resolve(short, args))
            .or_else(|| math::resolve(short, args))
            .ok_or_else(|| no_such_function(short, args))?,
    };
    Ok(r)
}

/// The argument types of a function that prints its arguments as their types' output
/// functions do (`concat`, `format`): each as text (the cast to text is that output),
/// except boolean, whose output (`t`) is not its cast (`true`) and is printed at the call.
fn as_output_text(args: &[SqlType]) -> Vec<Option<SqlType>> {
    args.iter()
        .map(|&t| (t != SqlType::Bool).then_some(SqlType::Text))
        .collect()
}

/// The common type of two operands (CASE branches, COALESCE arguments, comparisons):
/// `Unknown` gives way to the other, integers widen, integers and floats meet at float8,
/// text-like types meet at text.
pub(crate) fn unify(a: SqlType, b: SqlType) -> Option<SqlType> {
    use SqlType as T;
    Some(match (a, b) {
        (T::Unknown, t) | (t, T::Unknown) => t,
        (x, y) if x == y => x,
        (x, y) if x.is_int() && y.is_int() => {
            if x == T::Int8 || y == T::Int8 {
                T::Int8
            } else if x == T::Int4 || y == T::Int4 {
                T::Int4
            } else {
                T::Int2
            }
        }
        // numeric with an integer stays exact; with a float it becomes float (PostgreSQL).
        (x, y)
            if x.is_numeric() && (y.is_int() || y.is_numeric()) || y.is_numeric() && x.is_int() =>
        {
            T::Numeric(None)
        }
        (x, y) if x.is_numeric() && y.is_float() || y.is_numeric() && x.is_float() => T::Float8,
        (x, y) if (x.is_int() || x.is_float()) && (y.is_int() || y.is_float()) => T::Float8,
        (x, y) if x.is_oid() && (y.is_oid() || y.is_int()) => x,
        (x, y) if y.is_oid() && x.is_int() => y,
        (x, y) if x.is_text() && y.is_text() => T::Text,
        (T::Timestamp | T::Timestamptz, T::Timestamp | T::Timestamptz) => T::Timestamptz,
        (T::Date, T::Timestamp) | (T::Timestamp, T::Date) => T::Timestamp,
        (T::Array(x), T::Array(y)) => T::array_of(unify(*x, *y)?)?,
        (T::Vector(x), T::Array(y)) | (T::Array(y), T::Vector(x)) if x == y => T::Array(y),
        _ => return None,
    })
}

fn text_arg(v: &Value) -> Option<&str> {
    match v {
        Value::Text(s) => Some(s),
        _ => None,
    }
}

/// A `regclass` argument: the relation's oid (the cast from a name looked it up).
fn seq_arg(v: &Value) -> quire_engine::Oid {
    quire_engine::Oid(int_arg(v).and_then(|i| u64::try_from(i).ok()).unwrap_or(0))
}

fn int_arg(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// 25006 for a function that writes, in a read-only transaction.
fn writable(cx: &Cx, what: &str) -> Result<()> {
    if cx.settings.read_only() {
        return Err(SqlError::new(
            SqlState::READ_ONLY_SQL_TRANSACTION,
            format!("cannot execute {what} in a read-only transaction"),
        ));
    }
    Ok(())
}

impl Func {
    /// Whether a NULL argument makes the result NULL without calling the function.
    fn strict(self) -> bool {
        !matches!(
            self,
            Func::Concat
                | Func::ConcatWs
                | Func::Format
                | Func::Coalesce
                | Func::NullIf
                | Func::Greatest
                | Func::Least
                | Func::GetExpr
                | Func::FormatType
                | Func::NoObjectDef
                | Func::CurrentSetting
                | Func::SetConfig
                | Func::GetIndexDef
                | Func::GetViewDef
                | Func::TypeOf(_)
                | Func::QuoteLiteral { nullable: true }
        ) && !matches!(self, Func::Array(f) if !f.strict())
            && !matches!(self, Func::Json(f) if !f.strict())
    }

    pub(crate) fn call(self, args: Vec<Value>, cx: &Cx) -> Result<Value> {
        if self.strict() && args.iter().any(Value::is_null) {
            return Ok(Value::Null);
        }
        let a0 = args.first();
        Ok(match self {
            Func::DateTime(op) => op.call(&args)?,
            Func::DateTimeFn(f) => {
                f.call(&args, cx.now_us.div_euclid(86_400_000_000) * 86_400_000_000)?
            }
            Func::Lower | Func::Upper => {
                let s = text_arg(&args[0]).unwrap_or("");
                let lower = self == Func::Lower;
                check_case_len(s, lower)?;
                Value::Text(if lower {
                    s.to_lowercase()
                } else {
                    s.to_uppercase()
                })
            }
            Func::Length => Value::Int(
                text_arg(&args[0])
                    .unwrap_or("")
                    .chars()
                    .count()
                    .try_into()
                    .unwrap_or(i64::MAX),
            ),
            Func::Substr => substr(&args)?,
            Func::Left | Func::Right => {
                let s = text_arg(&args[0]).unwrap_or("");
                let n = int_arg(&args[1]).unwrap_or(0);
                Value::Text(left_right(s, n, self == Func::Left))
            }
            Func::Replace => {
                let (s, from, to) = (
                    text_arg(&args[0]).unwrap_or(""),
                    text_arg(&args[1]).unwrap_or(""),
                    text_arg(&args[2]).unwrap_or(""),
                );
                // PostgreSQL: an empty pattern replaces nothing.
                let out = if from.is_empty() {
                    s.to_string()
                } else {
                    let n = s.matches(from).count();
                    let len = (s.len() - n * from.len()).saturating_add(n.saturating_mul(to.len()));
                    types::check_value_len(len)?;
                    s.replace(from, to)
                };
                Value::Text(out)
            }
            Func::Trim { leading, trailing } => {
                let s = text_arg(&args[0]).unwrap_or("");
                let chars: Vec<char> = args
                    .get(1)
                    .and_then(text_arg)
                    .map_or_else(|| vec![' '], |c| c.chars().collect());
                let is_trimmed = |c: char| chars.contains(&c);
                let s = if leading {
                    s.trim_start_matches(is_trimmed)
                } else {
                    s
                };
                let s = if trailing {
                    s.trim_end_matches(is_trimmed)
                } else {
                    s
                };
                Value::Text(s.to_string())
            }
            Func::Strpos => {
                let (s, sub) = (
                    text_arg(&args[0]).unwrap_or(""),
                    text_arg(&args[1]).unwrap_or(""),
                );
                let at = s.find(sub).map_or(0, |byte| s[..byte].chars().count() + 1);
                Value::Int(i64::try_from(at).unwrap_or(i64::MAX))
            }
            Func::Repeat => {
                let s = text_arg(&args[0]).unwrap_or("");
                let n = usize::try_from(int_arg(&args[1]).unwrap_or(0).max(0)).unwrap_or(0);
                Value::Text(repeat(s, n, cx)?)
            }
            Func::CurrentDate => types::cast(
                Value::Timestamp(cx.now_us),
                SqlType::Timestamptz,
                SqlType::Date,
            )?,
            Func::Concat => Value::Text(concat(&args, "")?),
            Func::Format => match args.split_first() {
                Some((Value::Text(f), values)) => Value::Text(string::format(f, values)?),
                _ => Value::Null,
            },
            Func::ConcatWs => match args.split_first() {
                Some((Value::Text(sep), values)) => Value::Text(concat(values, sep)?),
                _ => Value::Null,
            },
            Func::Coalesce => args
                .into_iter()
                .find(|v| !v.is_null())
                .unwrap_or(Value::Null),
            Func::NullIf => {
                let mut it = args.into_iter();
                let (a, b) = (
                    it.next().unwrap_or(Value::Null),
                    it.next().unwrap_or(Value::Null),
                );
                if !a.is_null() && !b.is_null() && compare(&a, &b).is_eq() {
                    Value::Null
                } else {
                    a
                }
            }
            Func::Greatest | Func::Least => args
                .into_iter()
                .filter(|v| !v.is_null())
                .reduce(|a, b| {
                    let o = compare(&b, &a);
                    if (self == Func::Greatest && o.is_gt()) || (self == Func::Least && o.is_lt()) {
                        b
                    } else {
                        a
                    }
                })
                .unwrap_or(Value::Null),
            Func::Abs => match &args[0] {
                Value::Int(i) => Value::Int(i.checked_abs().ok_or_else(|| {
                    SqlError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
                })?),
                Value::Float(f) => Value::Float(f.abs()),
                Value::Numeric(n) => Value::Numeric(crate::numeric::abs(n)?),
                v => v.clone(),
            },
            Func::Round if matches!(a0, Some(Value::Numeric(_))) => {
                let Some(Value::Numeric(n)) = a0 else {
                    unreachable!("matched above")
                };
                let digits = args.get(1).and_then(int_arg).unwrap_or(0);
                Value::Numeric(crate::numeric::round(n, digits)?)
            }
            // round(float8) is C's rint: half to even.
            Func::Round if args.len() == 1 => {
                Value::Float(as_f64(&args[0]).unwrap_or(0.0).round_ties_even())
            }
            Func::Round => {
                let x = as_f64(&args[0]).unwrap_or(0.0);
                let digits = args.get(1).and_then(int_arg).unwrap_or(0).clamp(-300, 300) as i32;
                let scale = 10f64.powi(digits);
                // Half away from zero, as PostgreSQL's numeric round.
                Value::Float((x * scale).round() / scale)
            }
            Func::Random => Value::Float(random_f64()),
            Func::Math(m) => m.call(&args)?,
            Func::Str(f) => f.call(&args)?,
            Func::Bytea(f) => f.call(&args)?,
            Func::Regex(f) => f.call(&args, cx.interrupt)?,
            Func::Array(f) => f.call(&args)?,
            Func::TypeOf(t) => Value::Int(i64::from(t.oid())),
            Func::NextVal => {
                writable(cx, "nextval()")?;
                Value::Int(cx.sequences.nextval(cx.tx, seq_arg(&args[0]))?)
            }
            Func::CurrVal => Value::Int(cx.sequences.currval(cx.tx, seq_arg(&args[0]))?),
            Func::SetVal => {
                writable(cx, "setval()")?;
                let value = int_arg(&args[1]).unwrap_or(0);
                let is_called = !matches!(args.get(2), Some(Value::Bool(false)));
                Value::Int(
                    cx.sequences
                        .setval(cx.tx, seq_arg(&args[0]), value, is_called)?,
                )
            }
            Func::LastVal => Value::Int(cx.sequences.lastval(cx.tx)?),
            Func::Md5 => {
                let bytes = match &args[0] {
                    Value::Bytea(b) => b.as_slice(),
                    other => text_arg(other).unwrap_or("").as_bytes(),
                };
                Value::Text(format!("{:x}", md5::compute(bytes)))
            }
            Func::Now => Value::Timestamp(cx.now_us),
            Func::Version => Value::Text(format!(
                "PostgreSQL {} (quire {}) on {}, compiled by rustc",
                crate::settings::SERVER_VERSION,
                env!("CARGO_PKG_VERSION"),
                std::env::consts::ARCH
            )),
            Func::CurrentDatabase => Value::Text(crate::pg_catalog::DATABASE_NAME.into()),
            Func::CurrentUser => Value::Text(cx.settings.identity().current_user().into()),
            Func::SessionUser => Value::Text(cx.settings.identity().session_user().into()),
            Func::CurrentSchema => cx
                .settings
                .search_schemas()
                .first()
                .map_or(Value::Null, |s| Value::Text((*s).into())),
            Func::CurrentSchemas => {
                let implicit = matches!(a0, Some(Value::Bool(true)));
                let schemas = cx.settings.search_schemas();
                let mut b = crate::types::array::Builder::default();
                if implicit && !schemas.contains(&"pg_catalog") {
                    b.push(Some("pg_catalog"))?;
                }
                for s in schemas {
                    b.push(Some(s))?;
                }
                b.finish()
            }
            Func::SetConfig => {
                let Some(name) = a0.and_then(text_arg) else {
                    return Err(SqlError::new(
                        SqlState::NULL_VALUE_NOT_ALLOWED,
                        "SET requires parameter name",
                    ));
                };
                let value = args.get(1).and_then(text_arg);
                let local = matches!(args.get(2), Some(Value::Bool(true)));
                Value::Text(cx.settings.set_config(name, value, local)?)
            }
            Func::CurrentSetting => {
                let name = text_arg(a0.unwrap_or(&Value::Null)).unwrap_or("");
                let missing_ok = matches!(args.get(1), Some(Value::Bool(true)));
                match cx.settings.show(name) {
                    Some(v) => Value::Text(v),
                    None if missing_ok => Value::Null,
                    None => {
                        return Err(SqlError::new(
                            SqlState::UNDEFINED_OBJECT,
                            format!("unrecognized configuration parameter \"{name}\""),
                        ))
                    }
                }
            }
            Func::RelationSize(which) => {
                let fork = args.get(1).and_then(text_arg).unwrap_or("main");
                crate::pg_catalog::relation_size(cx.tx, oid_arg(&args[0]), which, fork)?
                    .map_or(Value::Null, Value::Int)
            }
            Func::SizePretty => Value::Text(crate::pg_catalog::size_pretty(
                int_arg(&args[0]).unwrap_or(0),
            )),
            Func::TableIsVisible => {
                Value::Bool(crate::pg_catalog::relation_name(cx.tx, oid_arg(&args[0]))?.is_some())
            }
            Func::PartitionAncestors => args[0].clone(),
            Func::SerialSequence => match (text_arg(&args[0]), args.get(1).and_then(text_arg)) {
                (Some(t), Some(c)) => crate::pg_catalog::serial_sequence(cx.tx, t, c)?
                    .map_or(Value::Null, Value::Text),
                _ => Value::Null,
            },
            Func::TypeIsVisible => Value::Bool(SqlType::from_oid(oid_arg(&args[0])).is_some()),
            Func::ToRegType => {
                let name = text_arg(&args[0]).unwrap_or("").trim();
                match name.parse::<u32>() {
                    // regtypein takes a number as the oid itself, unchecked.
                    Ok(oid) => Value::Int(i64::from(oid)),
                    Err(_) => SqlType::from_name(name)
                        .map_or(Value::Null, |t| Value::Int(i64::from(t.oid()))),
                }
            }
            Func::InputIsValid => {
                let input = text_arg(&args[0]).unwrap_or("");
                let ty = crate::parse::type_name(text_arg(&args[1]).unwrap_or(""))?;
                // A data exception (class 22: bad syntax, out of range, too long) is the
                // answer false; anything else (no such type) is an error, as in PostgreSQL.
                match types::cast(Value::Text(input.to_string()), SqlType::Text, ty) {
                    Ok(_) => Value::Bool(true),
                    Err(e) if e.sqlstate().code().starts_with("22") => Value::Bool(false),
                    Err(e) => return Err(e),
                }
            }
            Func::ToRegClass => {
                let name = text_arg(&args[0]).unwrap_or("").trim();
                match name.parse::<u32>() {
                    Ok(oid) => Value::Int(i64::from(oid)),
                    Err(_) => {
                        crate::pg_catalog::session_relation_oid(cx.tx, name, cx.backend.pid())?
                            .map_or(Value::Null, |oid| Value::Int(i64::from(oid)))
                    }
                }
            }
            Func::Json(f) => f.call(&args)?,
            Func::CollationIsVisible => match oid_arg(&args[0]) {
                oid if crate::pg_catalog::collation_exists(oid) => Value::Bool(true),
                _ => Value::Null,
            },
            Func::FormatType if a0.is_none_or(Value::is_null) => Value::Null,
            Func::FormatType => {
                let oid = oid_arg(&args[0]);
                let typmod = args.get(1).and_then(int_arg).unwrap_or(-1);
                Value::Text(crate::pg_catalog::format_type(oid, typmod))
            }
            Func::GetUserById => {
                Value::Text(crate::pg_catalog::role_name(cx.tx, oid_arg(&args[0]))?)
            }
            Func::GetIndexDef => match a0 {
                Some(Value::Int(oid)) => {
                    crate::pg_catalog::index_def(cx.tx, u32::try_from(*oid).unwrap_or(0))?
                        .map_or(Value::Null, Value::Text)
                }
                _ => Value::Null,
            },
            Func::GetViewDef => {
                let qualify = !cx.settings.sees_public();
                match a0 {
                    Some(Value::Text(name)) => {
                        crate::pg_catalog::view_def_named(cx.tx, name, qualify)?
                    }
                    Some(v) => crate::pg_catalog::view_def(
                        cx.tx,
                        v.as_int().and_then(|o| u32::try_from(o).ok()).unwrap_or(0),
                        qualify,
                    )?,
                    None => None,
                }
                .map_or(Value::Null, Value::Text)
            }
            Func::GetConstraintDef => {
                let qualify = !cx.settings.sees_public();
                crate::pg_catalog::constraint_def(cx.tx, oid_arg(&args[0]), qualify)?
                    .map_or(Value::Null, Value::Text)
            }
            // quire keeps expressions as text (pg_attrdef.adbin): shown as they are, with
            // the relation names of `'name'::regclass` qualified when `public` is not on
            // the search path (as PostgreSQL's deparser qualifies what it cannot see).
            Func::GetExpr => match a0 {
                Some(Value::Text(t)) if !cx.settings.sees_public() => {
                    Value::Text(crate::pg_catalog::qualify_regclass_literals(t))
                }
                Some(Value::Text(t)) => Value::Text(t.clone()),
                _ => Value::Null,
            },
            Func::ObjDescription => {
                let catalog = args.get(1).and_then(text_arg);
                crate::pg_catalog::description(cx.tx, oid_arg(&args[0]), catalog, 0)?
                    .map_or(Value::Null, Value::Text)
            }
            Func::ColDescription => {
                let column = int_arg(&args[1]).and_then(|c| i32::try_from(c).ok());
                match column {
                    Some(c) => crate::pg_catalog::description(cx.tx, oid_arg(&args[0]), None, c)?
                        .map_or(Value::Null, Value::Text),
                    None => Value::Null,
                }
            }
            Func::NoObjectDef => Value::Null,
            Func::EncodingToChar => Value::Text(
                if int_arg(&args[0]) == Some(6) {
                    "UTF8"
                } else {
                    ""
                }
                .into(),
            ),
            Func::BackendPid => Value::Int(i64::from(cx.backend.pid())),
            Func::SignalBackend(what) => signal_backend(cx, what, &args)?,
            Func::WalLsn(which) => {
                let p = cx.db.wal_positions();
                let lsn = match which {
                    WalPosition::Insert => p.insert,
                    WalPosition::Write => p.write,
                    WalPosition::Flush => p.flush,
                };
                // Below 2^63: see `SqlType::PgLsn`.
                Value::Int(i64::try_from(lsn.0).unwrap_or(i64::MAX))
            }
            Func::Sleep => {
                sleep(as_f64(&args[0]).unwrap_or(0.0), cx)?;
                Value::Text(String::new())
            }
            Func::Advisory(f) => advisory::call(cx, f, &args)?,
            Func::ResetShared => {
                let target = text_arg(&args[0]).unwrap_or("");
                match target {
                    "bgwriter" => cx
                        .db
                        .reset_shared_stats(quire_engine::SharedStats::Bgwriter),
                    "wal" => cx.db.reset_shared_stats(quire_engine::SharedStats::Wal),
                    // PostgreSQL's other targets: quire has no archiver and no recovery
                    // prefetch, so there is nothing to reset.
                    "archiver" | "recovery_prefetch" => {}
                    _ => {
                        return Err(SqlError::new(
                            SqlState::INVALID_PARAMETER_VALUE,
                            format!("unrecognized reset target: \"{target}\""),
                        ))
                    }
                }
                Value::Text(String::new())
            }
            Func::WalLsnDiff => match (int_arg(&args[0]), int_arg(&args[1])) {
                // Both below 2^63, so the difference fits.
                (Some(a), Some(b)) => Value::Numeric(crate::numeric::from_i64(a - b)),
                _ => Value::Null,
            },
            Func::QuoteIdent => {
                let s = text_arg(&args[0]).unwrap_or("");
                types::check_value_len(s.len() + s.matches('"').count() + 2)?;
                Value::Text(quote_ident(s))
            }
            Func::QuoteLiteral { .. } => match text_arg(&args[0]) {
                Some(s) => {
                    types::check_value_len(2 * s.len() + 3)?;
                    Value::Text(quote_literal(s))
                }
                None => Value::Text("NULL".into()),
            },
            Func::TablespaceLocation => match oid_arg(&args[0]) {
                1663 | 1664 => Value::Text(String::new()),
                _ => Value::Null,
            },
            Func::AclDefault => {
                let kind = text_arg(&args[0]).unwrap_or("");
                let owner = crate::pg_catalog::role_name(cx.tx, oid_arg(&args[1]))?;
                acl_default(kind, &owner)?
            }
            // No relation is in a publication: quire has no logical replication; and no
            // server is a standby.
            Func::RelationIsPublishable | Func::InRecovery => Value::Bool(false),
            Func::ToChar(kind) => {
                let template = text_arg(&args[1]).unwrap_or("");
                let text = match (kind, &args[0]) {
                    (ToChar::Timestamp | ToChar::Timestamptz, Value::Timestamp(us)) => {
                        to_char::timestamp(*us, kind == ToChar::Timestamptz, template)?
                    }
                    (ToChar::Date, Value::Int(days)) => {
                        let midnight = days.saturating_mul(crate::datetime::US_PER_DAY);
                        let zone = &crate::datetime::style::current().zone;
                        to_char::timestamp(zone.local_to_utc(midnight), true, template)?
                    }
                    (ToChar::Interval, Value::Interval(i)) => to_char::interval(*i, template)?,
                    (ToChar::Number, v) => Some(number_format::to_char(v, template)?),
                    _ => return Err(SqlError::internal("bad to_char argument in a bound plan")),
                };
                text.map_or(Value::Null, Value::Text)
            }
        })
    }
}

fn oid_arg(v: &Value) -> u32 {
    int_arg(v).and_then(|i| u32::try_from(i).ok()).unwrap_or(0)
}

/// `substr(s, from [, count])` with PostgreSQL's 1-based positions; a start before 1
/// shortens the count, as in PostgreSQL.
fn trim(leading: bool, trailing: bool) -> Func {
    Func::Trim { leading, trailing }
}

/// `lower(s)` or `upper(s)` stays within [`types::MAX_VALUE_BYTES`]: a character's other
/// case may be up to three times as long, so a string above a third of the limit is
/// measured first.
fn check_case_len(s: &str, lower: bool) -> Result<()> {
    if s.len() <= types::MAX_VALUE_BYTES / 3 {
        return Ok(());
    }
    let len: usize = s
        .chars()
        .map(|c| {
            if lower {
                c.to_lowercase().map(char::len_utf8).sum::<usize>()
            } else {
                c.to_uppercase().map(char::len_utf8).sum::<usize>()
            }
        })
        .sum();
    types::check_value_len(len)
}

/// `pg_sleep`: waits in slices of at most 100 ms, each after an interrupt check, so a
/// cancel or `statement_timeout` ends the wait as it ends any statement.
fn sleep(secs: f64, cx: &Cx) -> Result<()> {
    const SLICE: std::time::Duration = std::time::Duration::from_millis(100);
    if secs.is_nan() || secs <= 0.0 {
        return Ok(());
    }
    // Beyond a year PostgreSQL would wait too; a bound keeps the arithmetic finite.
    let total = std::time::Duration::from_secs_f64(secs.min(366.0 * 86_400.0));
    let end = std::time::Instant::now() + total;
    loop {
        cx.interrupt.check()?;
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(SLICE));
    }
}

/// Bytes `repeat` appends between two interrupt checks.
const REPEAT_CHUNK_BYTES: usize = 1 << 20;

/// `repeat(s, n)`: its length checked first (PostgreSQL's 54000), then built a chunk at a
/// time, so that a cancel or `statement_timeout` stops a large one.
fn repeat(s: &str, n: usize, cx: &Cx) -> Result<String> {
    let total = s.len().checked_mul(n);
    types::check_requested_len(total)?;
    let total = total.unwrap_or(0);
    if s.is_empty() || total <= REPEAT_CHUNK_BYTES {
        return Ok(s.repeat(n));
    }
    let per_chunk = (REPEAT_CHUNK_BYTES / s.len()).max(1);
    let chunk = s.repeat(per_chunk);
    let mut out = String::with_capacity(total);
    let mut left = n;
    while left >= per_chunk {
        cx.interrupt.check()?;
        out.push_str(&chunk);
        left -= per_chunk;
    }
    out.push_str(&s.repeat(left));
    debug_assert_eq!(out.len(), total);
    Ok(out)
}

/// `left(s, n)` / `right(s, n)`: the first (last) `n` characters; a negative `n` means all
/// but the last (first) `-n`.
fn left_right(s: &str, n: i64, left: bool) -> String {
    let len = i64::try_from(s.chars().count()).unwrap_or(i64::MAX);
    let keep = if n >= 0 { n.min(len) } else { (len + n).max(0) };
    let keep = usize::try_from(keep).unwrap_or(0);
    if left {
        s.chars().take(keep).collect()
    } else {
        let skip = s.chars().count() - keep;
        s.chars().skip(skip).collect()
    }
}

fn substr(args: &[Value]) -> Result<Value> {
    let s = text_arg(&args[0]).unwrap_or("");
    let (skip, take) = substring_span(
        int_arg(&args[1]).unwrap_or(1),
        args.get(2).and_then(int_arg),
    )?;
    Ok(Value::Text(s.chars().skip(skip).take(take).collect()))
}

/// `substr(s, start [, count])`'s span as (elements skipped, elements taken): from position
/// `start` (counted from 1), `count` of them or all the rest; a start before the first
/// shortens the count (PostgreSQL's `text_substring` and `bytea_substring`). 22011 for a
/// negative count.
pub(crate) fn substring_span(start: i64, count: Option<i64>) -> Result<(usize, usize)> {
    let end = match count {
        Some(n) if n < 0 => {
            return Err(SqlError::new(
                SqlState::SUBSTRING_ERROR,
                "negative substring length not allowed",
            ))
        }
        Some(n) => start.saturating_add(n),
        None => i64::MAX,
    };
    let first = start.max(1);
    if end <= first {
        return Ok((0, 0));
    }
    let skip = usize::try_from(first - 1).unwrap_or(usize::MAX);
    let take = usize::try_from(end - first).unwrap_or(usize::MAX);
    Ok((skip, take))
}

/// A random float in [0, 1) from a per-thread SplitMix64 seeded by the clock and thread.
fn random_f64() -> f64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let mut h = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&std::thread::current().id(), &mut h);
            t ^ std::hash::Hasher::finish(&h)
        });
    }
    STATE.with(|s| {
        let mut z = s.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set(z);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// `pg_cancel_backend` and `pg_terminate_backend` ([`crate::backends::signal`]); a
/// terminate with a timeout waits that long for the session to end.
fn signal_backend(cx: &Cx, what: crate::backends::Signal, args: &[Value]) -> Result<Value> {
    let Some(pid) = args.first().and_then(Value::as_int) else {
        return Ok(Value::Null);
    };
    let Ok(pid) = i32::try_from(pid) else {
        return Ok(Value::Bool(false));
    };
    let timeout_ms = match args.get(1) {
        None => 0,
        Some(Value::Null) => return Ok(Value::Null),
        Some(v) => v.as_int().unwrap_or(0),
    };
    if timeout_ms < 0 {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "\"timeout\" must not be negative",
        ));
    }
    let identity = cx.settings.identity();
    let me = identity.current_user();
    let privs = |role: &str| crate::roles::has_privs_of(cx.tx, me, role).unwrap_or(false);
    let who = crate::backends::Signaller {
        role: me,
        superuser: identity.is_superuser(),
        has_privs_of: &privs,
    };
    let sent = crate::backends::signal(cx.backend, cx.db, pid, &who, what)?;
    if !sent || timeout_ms == 0 {
        return Ok(Value::Bool(sent));
    }
    Ok(Value::Bool(wait_for_end(cx, pid, timeout_ms)?))
}

/// Waits up to `timeout_ms` for session `pid` to leave the registry (PostgreSQL's
/// `pg_wait_until_termination`, which checks every 100 ms at most).
fn wait_for_end(cx: &Cx, pid: i32, timeout_ms: i64) -> Result<bool> {
    let deadline = std::time::Instant::now()
        + std::time::Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
    let Some(registry) = cx.backend.registry() else {
        return Ok(true);
    };
    // Bounded by the deadline: each turn sleeps up to 100 ms.
    loop {
        if registry.get(pid).is_none() {
            return Ok(true);
        }
        cx.interrupt.check()?;
        let now = std::time::Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        std::thread::sleep((deadline - now).min(std::time::Duration::from_millis(100)));
    }
}

/// `concat`'s text of `values`, NULLs left out, `sep` between the others (`concat_ws`).
fn concat(values: &[Value], sep: &str) -> Result<String> {
    let mut s = String::new();
    let mut first = true;
    for v in values {
        // Arguments come as text, or boolean (`as_output_text`), as format's do.
        let Some(text) = string::format_arg(v) else {
            continue;
        };
        if !first {
            types::check_growth(s.len(), sep.len())?;
            s.push_str(sep);
        }
        first = false;
        types::check_growth(s.len(), text.len())?;
        s.push_str(&text);
    }
    Ok(s)
}

/// PostgreSQL's `quote_literal`: `'...'` with quotes doubled, and `E'...'` with
/// backslashes doubled when the text has one.
pub(super) fn quote_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 3);
    if s.contains('\\') {
        out.push('E');
    }
    out.push('\'');
    for c in s.chars() {
        if c == '\'' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// `acldefault(kind, owner)`: the owner's privileges on an object of `kind` (PostgreSQL's
/// `acldefault` letters: r relation, s sequence, f function, l language, L large object,
/// n schema, t tablespace, F foreign-data wrapper, S foreign server, T type, d database,
/// p parameter), and PUBLIC's where PostgreSQL grants it some.
fn acl_default(kind: &str, owner: &str) -> Result<Value> {
    let (own, public) = match kind {
        "r" => ("arwdDxt", ""),
        "s" => ("rwU", ""),
        "f" => ("X", "X"),
        "l" | "T" => ("U", "U"),
        "L" => ("rw", ""),
        "n" | "t" => ("UC", ""),
        "F" | "S" => ("U", ""),
        "d" => ("CTc", "Tc"),
        "p" => ("sA", ""),
        _ => {
            return Err(SqlError::new(
                SqlState::INTERNAL_ERROR,
                format!("unrecognized object type abbreviation: {kind}"),
            ))
        }
    };
    let who = quote_ident(owner);
    let mut b = crate::types::array::Builder::default();
    if !public.is_empty() {
        b.push(Some(&format!("={public}/{who}")))?;
    }
    b.push(Some(&format!("{who}={own}/{who}")))?;
    Ok(b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substr_follows_postgresql_positions() {
        let s = |a: &[Value]| substr(a).unwrap();
        let t = |x: &str| Value::Text(x.into());
        assert_eq!(s(&[t("hello"), Value::Int(2), Value::Int(3)]), t("ell"));
        assert_eq!(s(&[t("hello"), Value::Int(0), Value::Int(3)]), t("he"));
        assert_eq!(s(&[t("hello"), Value::Int(4)]), t("lo"));
        assert!(substr(&[t("x"), Value::Int(1), Value::Int(-1)]).is_err());
    }

    #[test]
    fn identifiers_are_quoted_only_when_needed() {
        assert_eq!(quote_ident("pgbench_accounts"), "pgbench_accounts");
        assert_eq!(quote_ident("Mixed"), "\"Mixed\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
