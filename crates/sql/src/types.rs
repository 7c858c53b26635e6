//! SQL types over the engine's types: which PostgreSQL type a column was declared with (the
//! engine stores all integers as `Int` and all floats as `Float`), the text input and output
//! functions, and assignment casts with their range checks.

use std::fmt::Write as _;

use quire_engine::{SqlState, Type, Value};
use sqlparser::ast::{self, CharacterLength, DataType, ExactNumberInfo, TimezoneInfo};

use crate::error::{Result, SqlError};
use crate::numeric;

pub mod array;
pub mod binary;

/// A column's or an expression's SQL type. `Unknown` is an untyped string literal or
/// parameter before the context gives it a type, as in PostgreSQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlType {
    Int2,
    Int4,
    Int8,
    Bool,
    Float4,
    Float8,
    Text,
    /// `varchar(n)`: the length limit in characters, if any.
    Varchar(Option<u32>),
    Bytea,
    Timestamp,
    /// `timestamp with time zone`: stored as UTC microseconds; the session's TimeZone is UTC.
    Timestamptz,
    /// Days since 1970-01-01, stored as an engine `Int`.
    Date,
    /// 16 bytes, stored as an engine `Bytea`.
    Uuid,
    /// Months, days and microseconds (`crate::datetime::interval`).
    Interval,
    /// `char(n)`: blank-padded to n characters on input.
    Bpchar(Option<u32>),
    /// `numeric(precision, scale)` (or unconstrained): exact decimals (`crate::numeric`).
    Numeric(Option<(u16, u16)>),
    /// The catalogs' `oid`, `regclass` and `regtype` (all stored as an engine `Int`).
    Oid,
    Regclass,
    Regtype,
    Regnamespace,
    /// `regproc`: a function's oid, shown as its name (`-` for 0; quire's built-in
    /// functions have no pg_proc rows, so any other oid shows as its number).
    Regproc,
    /// The catalogs' `name` and `"char"` (text underneath).
    Name,
    Char,
    /// An array of the element type (without its typmod), kept in its canonical text form
    /// ([`array`]).
    Array(&'static SqlType),
    /// The catalogs' `int2vector` and `oidvector`: one-dimensional arrays of smallint or oid
    /// with subscripts from 0, kept as arrays (`[0:1]={1,2}`), printed as `1 2`.
    Vector(&'static SqlType),
    /// `pg_lsn`: a WAL position, stored as an engine `Int`, printed as `16/B374D848`. Values
    /// are below 2^63 (quire's WAL would need 8 EiB to pass it).
    PgLsn,
    /// `json`: the input text as written, checked to be JSON (`crate::json`).
    Json,
    /// `jsonb`: the canonical text of the parsed value (`crate::json`).
    Jsonb,
    /// `void`: what a function that returns nothing returns (`pg_stat_reset_shared`),
    /// printed as the empty string.
    Void,
    Unknown,
}

/// A comparison operator (`=`, `<>`, `<`, `<=`, `>`, `>=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub(crate) fn holds(self, o: std::cmp::Ordering) -> bool {
        match self {
            CmpOp::Eq => o.is_eq(),
            CmpOp::Ne => o.is_ne(),
            CmpOp::Lt => o.is_lt(),
            CmpOp::Le => o.is_le(),
            CmpOp::Gt => o.is_gt(),
            CmpOp::Ge => o.is_ge(),
        }
    }

    /// The operator with its operands swapped (`a < b` is `b > a`).
    pub(crate) fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            op => op,
        }
    }
}

/// Microseconds from 1970-01-01 (the engine's epoch) to 2000-01-01 (PostgreSQL's).
pub const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

const US_PER_DAY: i64 = 86_400_000_000;

impl SqlType {
    /// A `reg*` type whose input looks a name up in the catalog (when the statement runs:
    /// the catalog may change between a prepared statement's bind and its execution).
    pub fn is_named_oid(self) -> bool {
        matches!(
            self,
            SqlType::Regclass | SqlType::Regtype | SqlType::Regnamespace | SqlType::Regproc
        )
    }

    /// `text[]`.
    pub const TEXT_ARRAY: SqlType = SqlType::Array(&SqlType::Text);
    /// `smallint[]`.
    pub const INT2_ARRAY: SqlType = SqlType::Array(&SqlType::Int2);
    /// `int2vector`.
    pub const INT2_VECTOR: SqlType = SqlType::Vector(&SqlType::Int2);
    /// `oidvector`.
    pub const OID_VECTOR: SqlType = SqlType::Vector(&SqlType::Oid);

    /// The array type of elements of this type (typmod dropped); `None` if it has none.
    pub fn array_of(elem: SqlType) -> Option<SqlType> {
        array::array_type(elem).map(|(e, _)| SqlType::Array(e))
    }

    /// An array type's element type; `None` for a type that is not an array.
    pub fn element(self) -> Option<SqlType> {
        match self {
            SqlType::Array(e) | SqlType::Vector(e) => Some(*e),
            _ => None,
        }
    }

    /// PostgreSQL's type oid (`pg_type.oid`).
    pub fn oid(self) -> u32 {
        match self {
            SqlType::Int2 => 21,
            SqlType::Int4 => 23,
            SqlType::Int8 => 20,
            SqlType::Bool => 16,
            SqlType::Float4 => 700,
            SqlType::Float8 => 701,
            SqlType::Text => 25,
            SqlType::Varchar(_) => 1043,
            SqlType::Bytea => 17,
            SqlType::Timestamp => 1114,
            SqlType::Timestamptz => 1184,
            SqlType::Date => 1082,
            SqlType::Uuid => 2950,
            SqlType::Interval => 1186,
            SqlType::Bpchar(_) => 1042,
            SqlType::Numeric(_) => 1700,
            SqlType::Oid => 26,
            SqlType::Regclass => 2205,
            SqlType::Regtype => 2206,
            SqlType::Regnamespace => 4089,
            SqlType::Regproc => 24,
            SqlType::Name => 19,
            SqlType::Char => 18,
            SqlType::Array(elem) => array::array_type(*elem).map_or(0, |(_, oid)| oid),
            SqlType::Vector(SqlType::Int2) => 22,
            SqlType::Vector(_) => 30,
            SqlType::PgLsn => 3220,
            SqlType::Json => 114,
            SqlType::Jsonb => 3802,
            SqlType::Void => 2278,
            SqlType::Unknown => 705,
        }
    }

    /// The type of a type oid a client sent (for parameters); `None` for types quire lacks.
    pub fn from_oid(oid: u32) -> Option<SqlType> {
        Some(match oid {
            21 => SqlType::Int2,
            23 => SqlType::Int4,
            20 => SqlType::Int8,
            16 => SqlType::Bool,
            700 => SqlType::Float4,
            701 => SqlType::Float8,
            25 => SqlType::Text,
            1043 => SqlType::Varchar(None),
            17 => SqlType::Bytea,
            1114 => SqlType::Timestamp,
            1184 => SqlType::Timestamptz,
            1082 => SqlType::Date,
            2950 => SqlType::Uuid,
            1186 => SqlType::Interval,
            1042 => SqlType::Bpchar(None),
            1700 => SqlType::Numeric(None),
            26 => SqlType::Oid,
            2205 => SqlType::Regclass,
            2206 => SqlType::Regtype,
            4089 => SqlType::Regnamespace,
            24 => SqlType::Regproc,
            19 => SqlType::Name,
            18 => SqlType::Char,
            22 => SqlType::INT2_VECTOR,
            30 => SqlType::OID_VECTOR,
            3220 => SqlType::PgLsn,
            114 => SqlType::Json,
            3802 => SqlType::Jsonb,
            2278 => SqlType::Void,
            705 | 0 => SqlType::Unknown,
            _ => {
                return array::SCALAR_TYPES
                    .iter()
                    .find(|(_, array_oid)| *array_oid == oid)
                    .map(|(e, _)| SqlType::Array(e))
            }
        })
    }

    /// The engine type values of this type are stored as.
    pub fn engine_type(self) -> Type {
        match self {
            SqlType::Int2
            | SqlType::Int4
            | SqlType::Int8
            | SqlType::Date
            | SqlType::Oid
            | SqlType::Regclass
            | SqlType::Regtype
            | SqlType::Regnamespace
            | SqlType::Regproc
            | SqlType::PgLsn => Type::Int,
            SqlType::Bool => Type::Bool,
            SqlType::Float4 | SqlType::Float8 => Type::Float,
            SqlType::Text
            | SqlType::Varchar(_)
            | SqlType::Bpchar(_)
            | SqlType::Name
            | SqlType::Char
            | SqlType::Array(_)
            | SqlType::Vector(_)
            | SqlType::Json
            | SqlType::Jsonb
            | SqlType::Void
            | SqlType::Unknown => Type::Text,
            SqlType::Bytea | SqlType::Uuid => Type::Bytea,
            SqlType::Timestamp | SqlType::Timestamptz => Type::Timestamp,
            SqlType::Numeric(_) => Type::Numeric,
            SqlType::Interval => Type::Interval,
        }
    }

    /// The declared type of a column the engine's API created (no SQL metadata).
    pub fn of_engine_type(ty: Type) -> SqlType {
        match ty {
            Type::Bool => SqlType::Bool,
            Type::Int => SqlType::Int8,
            Type::Float => SqlType::Float8,
            Type::Text => SqlType::Text,
            Type::Bytea => SqlType::Bytea,
            Type::Timestamp => SqlType::Timestamp,
            Type::Numeric => SqlType::Numeric(None),
            Type::Interval => SqlType::Interval,
        }
    }

    /// PostgreSQL's name of the type (`format_type`), also the form stored in the catalog.
    pub fn name(self) -> String {
        match self {
            SqlType::Int2 => "smallint".into(),
            SqlType::Int4 => "integer".into(),
            SqlType::Int8 => "bigint".into(),
            SqlType::Bool => "boolean".into(),
            SqlType::Float4 => "real".into(),
            SqlType::Float8 => "double precision".into(),
            SqlType::Text => "text".into(),
            SqlType::Varchar(None) => "character varying".into(),
            SqlType::Varchar(Some(n)) => format!("character varying({n})"),
            SqlType::Bytea => "bytea".into(),
            SqlType::Timestamp => "timestamp without time zone".into(),
            SqlType::Timestamptz => "timestamp with time zone".into(),
            SqlType::Date => "date".into(),
            SqlType::Uuid => "uuid".into(),
            SqlType::Interval => "interval".into(),
            SqlType::Bpchar(None) => "bpchar".into(),
            SqlType::Bpchar(Some(n)) => format!("character({n})"),
            SqlType::Numeric(None) => "numeric".into(),
            SqlType::Numeric(Some((p, s))) => format!("numeric({p},{s})"),
            SqlType::Oid => "oid".into(),
            SqlType::Regclass => "regclass".into(),
            SqlType::Regtype => "regtype".into(),
            SqlType::Regnamespace => "regnamespace".into(),
            SqlType::Regproc => "regproc".into(),
            SqlType::Name => "name".into(),
            SqlType::Char => "\"char\"".into(),
            SqlType::Array(elem) => format!("{}[]", elem.name()),
            SqlType::Vector(SqlType::Int2) => "int2vector".into(),
            SqlType::Vector(_) => "oidvector".into(),
            SqlType::PgLsn => "pg_lsn".into(),
            SqlType::Json => "json".into(),
            SqlType::Jsonb => "jsonb".into(),
            SqlType::Void => "void".into(),
            SqlType::Unknown => "unknown".into(),
        }
    }

    /// The inverse of [`SqlType::name`], also accepting PostgreSQL's internal names.
    #[allow(clippy::match_same_arms)] // a table: each name on its own line
    pub fn from_name(name: &str) -> Option<SqlType> {
        Some(match name {
            "smallint" => SqlType::Int2,
            "integer" => SqlType::Int4,
            "bigint" => SqlType::Int8,
            "boolean" => SqlType::Bool,
            "real" => SqlType::Float4,
            "double precision" => SqlType::Float8,
            "text" => SqlType::Text,
            "character varying" => SqlType::Varchar(None),
            "bytea" => SqlType::Bytea,
            "timestamp without time zone" | "timestamp" => SqlType::Timestamp,
            "timestamp with time zone" | "timestamptz" => SqlType::Timestamptz,
            "date" => SqlType::Date,
            "uuid" => SqlType::Uuid,
            "interval" => SqlType::Interval,
            "bpchar" => SqlType::Bpchar(None),
            "oid" => SqlType::Oid,
            "regclass" => SqlType::Regclass,
            "regtype" => SqlType::Regtype,
            "regnamespace" => SqlType::Regnamespace,
            "regproc" => SqlType::Regproc,
            "name" => SqlType::Name,
            "\"char\"" | "char" => SqlType::Char,
            "int2vector" => SqlType::INT2_VECTOR,
            "oidvector" => SqlType::OID_VECTOR,
            "pg_lsn" => SqlType::PgLsn,
            "json" => SqlType::Json,
            "jsonb" => SqlType::Jsonb,
            "void" => SqlType::Void,
            "int2" => SqlType::Int2,
            "int" | "int4" => SqlType::Int4,
            "int8" => SqlType::Int8,
            "bool" => SqlType::Bool,
            "float4" => SqlType::Float4,
            "float8" => SqlType::Float8,
            "varchar" => SqlType::Varchar(None),
            "numeric" | "decimal" => SqlType::Numeric(None),
            _ => {
                if let Some(elem) = name.strip_suffix("[]") {
                    return SqlType::array_of(SqlType::from_name(elem)?);
                }
                if let Some(elem) = name.strip_prefix('_') {
                    return SqlType::array_of(SqlType::from_name(elem)?);
                }
                if let Some(ps) = name.strip_prefix("numeric(") {
                    let (p, s) = ps.strip_suffix(')')?.split_once(',')?;
                    return Some(SqlType::Numeric(Some((
                        p.trim().parse().ok()?,
                        s.trim().parse().ok()?,
                    ))));
                }
                if let Some(n) = name.strip_prefix("character(") {
                    return Some(SqlType::Bpchar(Some(n.strip_suffix(')')?.parse().ok()?)));
                }
                let n = name
                    .strip_prefix("character varying(")?
                    .strip_suffix(')')?
                    .parse()
                    .ok()?;
                SqlType::Varchar(Some(n))
            }
        })
    }

    /// The type a SQL type name denotes.
    pub fn from_ast(ty: &DataType) -> Result<SqlType> {
        crate::stack::check_stack_depth()?;
        Ok(match ty {
            DataType::SmallInt(_) | DataType::Int2(_) => SqlType::Int2,
            DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => SqlType::Int4,
            DataType::BigInt(_) | DataType::Int8(_) => SqlType::Int8,
            DataType::Bool | DataType::Boolean => SqlType::Bool,
            DataType::Real | DataType::Float4 => SqlType::Float4,
            DataType::Float8 | DataType::DoublePrecision => SqlType::Float8,
            // SQL's FLOAT(p), p in bits: real up to 24, double precision up to 53 (gram.y).
            DataType::Float(info) => match info {
                ExactNumberInfo::Precision(0) => {
                    return Err(SqlError::new(
                        SqlState::INVALID_PARAMETER_VALUE,
                        "precision for type float must be at least 1 bit",
                    ))
                }
                ExactNumberInfo::Precision(1..=24) => SqlType::Float4,
                ExactNumberInfo::None | ExactNumberInfo::Precision(25..=53) => SqlType::Float8,
                ExactNumberInfo::Precision(_) => {
                    return Err(SqlError::new(
                        SqlState::INVALID_PARAMETER_VALUE,
                        "precision for type float must be less than 54 bits",
                    ))
                }
                ExactNumberInfo::PrecisionAndScale(..) => {
                    return Err(SqlError::syntax("syntax error at or near \",\""))
                }
            },
            DataType::Text => SqlType::Text,
            DataType::Varchar(len) | DataType::CharacterVarying(len) => match len {
                None => SqlType::Varchar(None),
                Some(CharacterLength::IntegerLength { length, .. }) => {
                    let n = u32::try_from(*length)
                        .ok()
                        .filter(|n| (1..=10_485_760).contains(n))
                        .ok_or_else(|| {
                            SqlError::new(
                                SqlState::INVALID_PARAMETER_VALUE,
                                "length for type varchar must be at least 1",
                            )
                        })?;
                    SqlType::Varchar(Some(n))
                }
                Some(CharacterLength::Max) => return Err(SqlError::unsupported("varchar(max)")),
            },
            DataType::Char(len) | DataType::Character(len) => match len {
                None => SqlType::Bpchar(Some(1)),
                Some(CharacterLength::IntegerLength { length, .. }) => {
                    let n = u32::try_from(*length)
                        .ok()
                        .filter(|n| (1..=10_485_760).contains(n))
                        .ok_or_else(|| {
                            SqlError::new(
                                SqlState::INVALID_PARAMETER_VALUE,
                                "length for type char must be at least 1",
                            )
                        })?;
                    SqlType::Bpchar(Some(n))
                }
                Some(CharacterLength::Max) => return Err(SqlError::unsupported("char(max)")),
            },
            DataType::Bytea => SqlType::Bytea,
            DataType::JSON => SqlType::Json,
            DataType::JSONB => SqlType::Jsonb,
            DataType::Numeric(info) | DataType::Decimal(info) | DataType::Dec(info) => {
                numeric_type(info)?
            }
            DataType::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) => {
                SqlType::Timestamp
            }
            DataType::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => {
                SqlType::Timestamptz
            }
            DataType::Date => SqlType::Date,
            DataType::Regclass => SqlType::Regclass,
            DataType::Uuid => SqlType::Uuid,
            DataType::Interval { .. } => SqlType::Interval,
            DataType::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _)) => {
                let elem = SqlType::from_ast(inner)?;
                if elem.element().is_some() {
                    // `int[][]` is `int[]`: PostgreSQL does not enforce declared dimensions.
                    return Ok(elem);
                }
                SqlType::array_of(elem).ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_OBJECT,
                        format!("could not find array type for data type {}", elem.name()),
                    )
                })?
            }
            DataType::Custom(name, mods) if mods.is_empty() => {
                let last = name.0.last().map(ToString::to_string).unwrap_or_default();
                let last = last.trim_matches('"').to_lowercase();
                SqlType::from_name(&last).ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_OBJECT,
                        format!("type \"{name}\" does not exist"),
                    )
                })?
            }
            other => return Err(SqlError::unsupported(format!("type {other}"))),
        })
    }

    pub fn is_numeric(self) -> bool {
        matches!(self, SqlType::Numeric(_))
    }

    pub fn is_int(self) -> bool {
        matches!(self, SqlType::Int2 | SqlType::Int4 | SqlType::Int8)
    }

    pub fn is_float(self) -> bool {
        matches!(self, SqlType::Float4 | SqlType::Float8)
    }

    pub fn is_text(self) -> bool {
        matches!(
            self,
            SqlType::Text
                | SqlType::Varchar(_)
                | SqlType::Bpchar(_)
                | SqlType::Name
                | SqlType::Char
                | SqlType::Unknown
        )
    }

    /// `pg_type.typlen`: the fixed width in bytes, -1 for a variable-length type, -2 for a
    /// C string (`unknown`).
    pub fn typlen(self) -> i16 {
        match self {
            SqlType::Bool | SqlType::Char => 1,
            SqlType::Int2 => 2,
            SqlType::Int4
            | SqlType::Float4
            | SqlType::Date
            | SqlType::Oid
            | SqlType::Regclass
            | SqlType::Regtype
            | SqlType::Regnamespace
            | SqlType::Regproc
            | SqlType::Void => 4,
            SqlType::Int8
            | SqlType::Float8
            | SqlType::Timestamp
            | SqlType::Timestamptz
            | SqlType::PgLsn => 8,
            SqlType::Uuid | SqlType::Interval => 16,
            SqlType::Name => 64,
            SqlType::Unknown => -2,
            _ => -1,
        }
    }

    /// `typstorage`: plain for fixed-length types, main for numeric, extended for the rest
    /// (the default of `attstorage`, which SET STORAGE changes).
    pub fn typstorage(self) -> &'static str {
        match self {
            SqlType::Numeric(_) => "m",
            t if t.typlen() > 0 => "p",
            _ => "x",
        }
    }

    /// `atttypmod`: `varchar(n)` and `char(n)` are n + 4, `numeric(p, s)` is
    /// ((p << 16) | s) + 4, as PostgreSQL stores them; -1 otherwise.
    pub fn typmod(self) -> i32 {
        match self {
            SqlType::Varchar(Some(n)) | SqlType::Bpchar(Some(n)) => {
                i32::try_from(n).map_or(-1, |n| n.saturating_add(4))
            }
            SqlType::Numeric(Some((p, s))) => ((i32::from(p) << 16) | i32::from(s)) + 4,
            _ => -1,
        }
    }

    /// The oid-like types (compared and cast as integers).
    pub fn is_oid(self) -> bool {
        matches!(
            self,
            SqlType::Oid
                | SqlType::Regclass
                | SqlType::Regtype
                | SqlType::Regnamespace
                | SqlType::Regproc
        )
    }

    /// The range of an integer type.
    fn int_range(self) -> (i64, i64) {
        match self {
            SqlType::Int2 => (i16::MIN.into(), i16::MAX.into()),
            SqlType::Int4 => (i32::MIN.into(), i32::MAX.into()),
            _ => (i64::MIN, i64::MAX),
        }
    }

    /// PostgreSQL's name of the type in messages ("integer", "bigint", ...).
    fn short_name(self) -> &'static str {
        match self {
            SqlType::Int2 => "smallint",
            SqlType::Int4 => "integer",
            SqlType::Int8 => "bigint",
            SqlType::Bool => "boolean",
            SqlType::Float4 => "real",
            SqlType::Float8 => "double precision",
            SqlType::Text | SqlType::Unknown => "text",
            SqlType::Varchar(_) => "character varying",
            SqlType::Bytea => "bytea",
            SqlType::Timestamp => "timestamp",
            SqlType::Timestamptz => "timestamp with time zone",
            SqlType::Date => "date",
            SqlType::Uuid => "uuid",
            SqlType::Interval => "interval",
            SqlType::Bpchar(_) => "character",
            SqlType::Numeric(_) => "numeric",
            SqlType::Oid => "oid",
            SqlType::Regclass => "regclass",
            SqlType::Regtype => "regtype",
            SqlType::Regnamespace => "regnamespace",
            SqlType::Regproc => "regproc",
            SqlType::Name => "name",
            SqlType::Char => "\"char\"",
            SqlType::Array(_) => "array",
            SqlType::Vector(SqlType::Int2) => "int2vector",
            SqlType::Vector(_) => "oidvector",
            SqlType::PgLsn => "pg_lsn",
            SqlType::Json => "json",
            SqlType::Jsonb => "jsonb",
            SqlType::Void => "void",
        }
    }
}

/// `value` checked against the range of the integer type `ty` (SQLSTATE 22003 outside).
pub fn check_int_range(value: i64, ty: SqlType) -> Result<Value> {
    let (lo, hi) = ty.int_range();
    if value < lo || value > hi {
        return Err(SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{} out of range", ty.short_name()),
        ));
    }
    Ok(Value::Int(value))
}

/// The text input function of `ty`: PostgreSQL's accepted forms of each type.
/// PostgreSQL's `pg_strtoint16/32/64`: blanks around, a sign, decimal digits or a `0x`,
/// `0o`, `0b` prefix and its digits, single underscores between digits; 22003 with the
/// text as soon as the value leaves the type's range, 22P02 for anything else.
fn parse_int(text: &str, ty: SqlType) -> Result<i64> {
    let bad = || SqlError::bad_input(ty.short_name(), text);
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let prefix = body.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match prefix.as_deref() {
        Some("0x") => (16, &body[2..]),
        Some("0o") => (8, &body[2..]),
        Some("0b") => (2, &body[2..]),
        _ => (10, body),
    };
    let (lo, hi) = ty.int_range();
    let limit = if negative {
        i128::from(lo).unsigned_abs()
    } else {
        i128::from(hi).unsigned_abs()
    };
    let bytes = digits.as_bytes();
    let mut acc: u128 = 0;
    let mut any = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let next_is_digit = bytes
                .get(i + 1)
                .is_some_and(|&n| char::from(n).is_digit(radix));
            if !next_is_digit || radix == 10 && !any {
                return Err(bad());
            }
            continue;
        }
        let d = char::from(b).to_digit(radix).ok_or_else(bad)?;
        any = true;
        acc = acc * u128::from(radix) + u128::from(d);
        if acc > limit {
            return Err(SqlError::new(
                SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "value \"{text}\" is out of range for type {}",
                    ty.short_name()
                ),
            ));
        }
    }
    if !any {
        return Err(bad());
    }
    let v = i128::try_from(acc).map_err(|_| bad())?;
    i64::try_from(if negative { -v } else { v }).map_err(|_| bad())
}

pub fn parse_text(ty: SqlType, text: &str) -> Result<Value> {
    let bad = || SqlError::bad_input(ty.short_name(), text);
    let t = text.trim();
    match ty {
        SqlType::Int2 | SqlType::Int4 | SqlType::Int8 => parse_int(text, ty).map(Value::Int),
        SqlType::Bool => match t.to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "y" | "on" | "1" => Ok(Value::Bool(true)),
            "f" | "false" | "no" | "n" | "off" | "0" => Ok(Value::Bool(false)),
            _ => Err(bad()),
        },
        SqlType::Float4 | SqlType::Float8 => {
            let v: f64 = match t.to_ascii_lowercase().as_str() {
                "infinity" | "inf" | "+infinity" | "+inf" => f64::INFINITY,
                "-infinity" | "-inf" => f64::NEG_INFINITY,
                "nan" | "+nan" | "-nan" => f64::NAN,
                _ => t.parse().map_err(|_| bad())?,
            };
            let v = if ty == SqlType::Float4 {
                f64::from(v as f32)
            } else {
                v
            };
            // strtod's ERANGE: an overflow to infinity, or an underflow to zero of digits
            // that are not all zeros.
            let nonzero_digits = t
                .bytes()
                .take_while(|b| !matches!(b, b'e' | b'E'))
                .any(|b| (b'1'..=b'9').contains(&b));
            if v.is_infinite() && !t.to_ascii_lowercase().contains("inf")
                || v == 0.0 && nonzero_digits
            {
                return Err(SqlError::new(
                    SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
                    format!("\"{t}\" is out of range for type {}", ty.short_name()),
                ));
            }
            Ok(Value::Float(v))
        }
        SqlType::Text | SqlType::Unknown | SqlType::Name => Ok(Value::Text(text.to_string())),
        SqlType::Array(elem) => array::input(text, *elem),
        SqlType::Vector(elem) => array::vector_input(text, *elem),
        SqlType::Char => Ok(Value::Text(char_value(text))),
        SqlType::Varchar(limit) => check_varchar(text.to_string(), limit),
        SqlType::Bpchar(limit) => check_bpchar(text, limit),
        SqlType::Bytea => match text.strip_prefix("\\x") {
            Some(hex) => hex_decode(hex).map(Value::Bytea),
            None => parse_bytea_escape(text).ok_or_else(bad).map(Value::Bytea),
        },
        SqlType::Timestamp | SqlType::Timestamptz | SqlType::Date => parse_datetime(ty, text),
        SqlType::Uuid => parse_uuid(t).ok_or_else(bad).map(Value::Bytea),
        SqlType::Interval => {
            crate::datetime::interval::parse(text, crate::datetime::interval::Typmod::default())
                .map(Value::Interval)
        }
        SqlType::PgLsn => parse_lsn(t).ok_or_else(bad).map(Value::Int),
        SqlType::Json => crate::json::parse(text),
        SqlType::Jsonb => crate::json::jsonb_in(text),
        // PostgreSQL's `void_in` takes anything.
        SqlType::Void => Ok(Value::Text(String::new())),
        SqlType::Oid
        | SqlType::Regclass
        | SqlType::Regtype
        | SqlType::Regnamespace
        | SqlType::Regproc => {
            let v: u32 = t.parse().map_err(|_| bad())?;
            Ok(Value::Int(i64::from(v)))
        }
        SqlType::Numeric(typmod) => check_numeric(numeric::parse(text)?, typmod),
    }
}

/// A numeric under `numeric(p, s)`'s rule, if the type has one.
pub fn check_numeric(n: quire_engine::Numeric, typmod: Option<(u16, u16)>) -> Result<Value> {
    Ok(Value::Numeric(match typmod {
        Some((p, s)) => numeric::apply_typmod(&n, p, s)?,
        None => n,
    }))
}

/// `numeric`, `numeric(p)`, `numeric(p, s)` as PostgreSQL checks them.
fn numeric_type(info: &ast::ExactNumberInfo) -> Result<SqlType> {
    let precision = |p: u64| {
        u16::try_from(p)
            .ok()
            .filter(|p| (1..=1000).contains(p))
            .ok_or_else(|| {
                SqlError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!("NUMERIC precision {p} must be between 1 and 1000"),
                )
            })
    };
    Ok(match info {
        ast::ExactNumberInfo::None => SqlType::Numeric(None),
        ast::ExactNumberInfo::Precision(p) => SqlType::Numeric(Some((precision(*p)?, 0))),
        ast::ExactNumberInfo::PrecisionAndScale(p, s) => {
            let p = precision(*p)?;
            let s = u16::try_from(*s).ok().filter(|s| *s <= p).ok_or_else(|| {
                SqlError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!("NUMERIC scale {s} must be between 0 and precision {p}"),
                )
            })?;
            SqlType::Numeric(Some((p, s)))
        }
    })
}

/// A string checked against `varchar(n)`'s limit (SQLSTATE 22001 beyond it).
pub fn check_varchar(s: String, limit: Option<u32>) -> Result<Value> {
    if let Some(n) = limit {
        if s.chars().count() > n as usize {
            return Err(SqlError::new(
                SqlState::STRING_DATA_RIGHT_TRUNCATION,
                format!("value too long for type character varying({n})"),
            ));
        }
    }
    Ok(Value::Text(s))
}

/// A string padded with blanks to `char(n)`'s length; longer is 22001 unless the excess
/// is blanks, as in PostgreSQL.
pub fn check_bpchar(s: &str, limit: Option<u32>) -> Result<Value> {
    let Some(n) = limit else {
        return Ok(Value::Text(s.to_string()));
    };
    let n = n as usize;
    let len = s.chars().count();
    if len > n {
        let cut: String = s.chars().take(n).collect();
        if s.chars().skip(n).any(|c| c != ' ') {
            return Err(SqlError::new(
                SqlState::STRING_DATA_RIGHT_TRUNCATION,
                format!("value too long for type character({n})"),
            ));
        }
        return Ok(Value::Text(cut));
    }
    let mut out = String::with_capacity(s.len() + n - len);
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', n - len));
    Ok(Value::Text(out))
}

/// Whether `e` came from applying a type's modifier (a length, a precision) rather than
/// from reading the text: PostgreSQL raises those when the value is stored, with no place
/// in the statement to point at.
pub(crate) fn is_typmod_error(e: &SqlError) -> bool {
    e.sqlstate() == SqlState::STRING_DATA_RIGHT_TRUNCATION
        || e.message() == "numeric field overflow"
}

/// A `date`, `timestamp` or `timestamptz` read as PostgreSQL reads it
/// ([`crate::datetime::parse`]), in the session's `DateStyle` order and time zone.
fn parse_datetime(ty: SqlType, text: &str) -> Result<Value> {
    use crate::datetime::parse::{decode, ZoneSpec};
    use crate::datetime::ts_is_finite;
    let style = crate::datetime::style::current();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    let d = decode(text, style.order, now_us, &style.zone)
        .map_err(|bad| datetime_input_error(ty, text, bad))?;
    let local_us = d.local_us;
    Ok(match ty {
        SqlType::Date if !ts_is_finite(local_us) => {
            return Err(SqlError::unsupported("date 'infinity'"))
        }
        SqlType::Date => Value::Int(local_us.div_euclid(US_PER_DAY)),
        SqlType::Timestamptz if ts_is_finite(local_us) => {
            let utc = match d.zone {
                Some(ZoneSpec::Offset(secs)) => local_us.checked_sub(i64::from(secs) * 1_000_000),
                Some(ZoneSpec::Named(z)) => Some(z.local_to_utc(local_us)),
                None => Some(style.zone.local_to_utc(local_us)),
            };
            // Within a zone's offset of the last microsecond quire counts, or on an infinity.
            let utc = utc.filter(|us| ts_is_finite(*us)).ok_or_else(|| {
                datetime_input_error(ty, text, crate::datetime::parse::Bad::TypeRange)
            })?;
            Value::Timestamp(utc)
        }
        _ => Value::Timestamp(local_us),
    })
}

/// PostgreSQL's `DateTimeParseError`: 22007 for a text that is not a date/time, 22008 for a
/// field out of range (hinting at `DateStyle` for a month), 22023 for an unknown zone.
fn datetime_input_error(ty: SqlType, text: &str, bad: crate::datetime::parse::Bad) -> SqlError {
    use crate::datetime::parse::Bad;
    match bad {
        Bad::Syntax => SqlError::new(
            SqlState::INVALID_DATETIME_FORMAT,
            format!(
                "invalid input syntax for type {}: \"{text}\"",
                ty.short_name()
            ),
        ),
        Bad::ZoneRange => SqlError::new(
            SqlState::INVALID_TIME_ZONE_DISPLACEMENT_VALUE,
            format!("time zone displacement out of range: \"{text}\""),
        ),
        Bad::TypeRange => {
            let what = if ty == SqlType::Date {
                "date"
            } else {
                "timestamp"
            };
            SqlError::new(
                SqlState::DATETIME_FIELD_OVERFLOW,
                format!("{what} out of range: \"{text}\""),
            )
        }
        Bad::UnknownZone(name) => SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("time zone \"{name}\" not recognized"),
        ),
        Bad::FieldRange | Bad::MonthRange => {
            let e = SqlError::new(
                SqlState::DATETIME_FIELD_OVERFLOW,
                format!("date/time field value out of range: \"{text}\""),
            );
            if bad == Bad::MonthRange {
                e.with_hint("Perhaps you need a different \"DateStyle\" setting.")
            } else {
                e
            }
        }
    }
}

fn parse_uuid(text: &str) -> Option<Vec<u8>> {
    let hex: String = text
        .trim_matches(['{', '}'])
        .chars()
        .filter(|&c| c != '-')
        .collect();
    if hex.len() != 32 {
        return None;
    }
    (0..32)
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

fn format_uuid(b: &[u8]) -> String {
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        let _ = write!(s, "{byte:02x}");
    }
    s
}

/// Bytes as lower-case hex digit pairs, appended to `out` (bytea's output, `encode(hex)`).
pub(crate) fn hex_encode(bytes: &[u8], out: &mut String) {
    out.reserve(2 * bytes.len());
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
}

/// PostgreSQL's `hex_decode` (bytea input after `\x`, `decode(hex)`): digit pairs, blanks
/// allowed between pairs; 22023 for a character that is not a hex digit or an odd count.
pub(crate) fn hex_decode(s: &str) -> Result<Vec<u8>> {
    let b = s.as_bytes();
    let digit = |i: usize| {
        char::from(b[i]).to_digit(16).ok_or_else(|| {
            let c = s[i..].chars().next().unwrap_or_default();
            SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                format!("invalid hexadecimal digit: \"{c}\""),
            )
        })
    };
    let mut out = Vec::with_capacity(b.len() / 2);
    let mut i = 0;
    while i < b.len() {
        if matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
            continue;
        }
        let hi = digit(i)?;
        if i + 1 >= b.len() {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "invalid hexadecimal data: odd number of digits",
            ));
        }
        let lo = digit(i + 1)?;
        out.push(u8::try_from(hi * 16 + lo).unwrap_or(0));
        i += 2;
    }
    Ok(out)
}

/// PostgreSQL's `byteain`: `\x` then hex ([`hex_decode`]), or else the escape format:
/// bytes as they are, `\\` for a backslash and `\ooo` (three octal digits) for any byte;
/// `None` for bad escape-format input.
fn parse_bytea_escape(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
        } else if b.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let octal = b.get(i + 1..i + 4)?;
            let ok = octal[0] <= b'3' && octal.iter().all(|d| (b'0'..=b'7').contains(d));
            if !ok {
                return None;
            }
            out.push(octal.iter().fold(0u8, |v, d| v * 8 + (d - b'0')));
            i += 4;
        }
    }
    Some(out)
}

/// `pg_lsn`'s input form: two hexadecimal numbers of at most 8 digits, `hi/lo`.
fn parse_lsn(t: &str) -> Option<i64> {
    let (hi, lo) = t.split_once('/')?;
    let part = |p: &str| {
        (!p.is_empty() && p.len() <= 8 && p.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(p, 16).ok())
            .flatten()
    };
    let lsn = (u64::from(part(hi)?) << 32) | u64::from(part(lo)?);
    i64::try_from(lsn).ok()
}

/// Microseconds since 1970-01-01 in PostgreSQL's ISO output form, whatever the session's
/// `DateStyle`.
pub fn format_timestamp(us: i64) -> String {
    crate::datetime::encode::timestamp_iso(us)
}

/// The largest value quire builds (a text, a bytea, an array's text form): PostgreSQL's
/// `MaxAllocSize`, 1 GB less one byte. Every function and operator that builds a value
/// computes its length first and refuses (54000) one beyond this, before allocating it.
pub(crate) const MAX_VALUE_BYTES: usize = (1 << 30) - 1;

/// 54000 for a value of `bytes` beyond [`MAX_VALUE_BYTES`]. PostgreSQL reports such a
/// request as XX000 `invalid memory alloc request size`; quire keeps the words and makes
/// it 54000 (program limit exceeded), as every value limit here is.
pub(crate) fn check_value_len(bytes: usize) -> Result<()> {
    if bytes > MAX_VALUE_BYTES {
        return Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            format!("invalid memory alloc request size {bytes}"),
        )
        .with_detail(format!("A value may have at most {MAX_VALUE_BYTES} bytes.")));
    }
    Ok(())
}

/// 54000 for a result a function was asked to make longer than [`MAX_VALUE_BYTES`]
/// (`repeat`): PostgreSQL's words.
pub(crate) fn check_requested_len(bytes: Option<usize>) -> Result<()> {
    match bytes {
        Some(b) if b <= MAX_VALUE_BYTES => Ok(()),
        _ => Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            "requested length too large",
        )),
    }
}

/// 54000 for a string that grows piece by piece (`string_agg`, `concat`, an array's text,
/// a COPY line) past [`MAX_VALUE_BYTES`]: PostgreSQL's words for its string buffer.
pub(crate) fn check_growth(have: usize, adding: usize) -> Result<()> {
    if have.saturating_add(adding) > MAX_VALUE_BYTES {
        return Err(
            SqlError::new(SqlState::PROGRAM_LIMIT_EXCEEDED, "out of memory").with_detail(format!(
                "Cannot enlarge string buffer containing {have} bytes by {adding} more bytes."
            )),
        );
    }
    Ok(())
}

/// A `"char"` from text (PostgreSQL's `charin` and `text_char`): `\ooo` is that byte, else
/// the first byte (none for ''). Kept as `charout` prints it: a byte with the high bit set
/// as `\ooo`, the zero byte as ''.
fn char_value(text: &str) -> String {
    let octal = |c: &u8| (b'0'..=b'7').contains(c);
    let byte = match text.as_bytes() {
        [b'\\', digits @ ..] if digits.len() == 3 && digits.iter().all(octal) => {
            // As in PostgreSQL, `\777` wraps to its low byte.
            let value = digits
                .iter()
                .fold(0u32, |v, d| (v << 3) + u32::from(d - b'0'));
            (value & 0xff) as u8
        }
        [first, ..] => *first,
        [] => 0,
    };
    match byte {
        0 => String::new(),
        1..=127 => char::from(byte).to_string(),
        _ => format!("\\{byte:03o}"),
    }
}

/// A value as sent to the client in text format (and COPY TO writes it): [`format_text`],
/// with floats under the session's `extra_float_digits` and bytea under its
/// `bytea_output` (the thread's installed [`crate::datetime::style`]). Stored text (arrays,
/// casts the engine keeps) stays [`format_text`]'s exact form.
pub fn format_output(value: &Value, ty: SqlType) -> Option<String> {
    match value {
        Value::Float(f) if f.is_finite() => {
            let digits = crate::datetime::style::current().extra_float_digits;
            if digits > 0 {
                return format_text(value, ty);
            }
            let base = if ty == SqlType::Float4 { 6 } else { 15 };
            Some(float_with_digits(*f, (base + digits).max(1)))
        }
        Value::Bytea(b)
            if ty == SqlType::Bytea && crate::datetime::style::current().bytea_escape =>
        {
            Some(bytea_escape(b))
        }
        _ => format_text(value, ty),
    }
}

/// C's `%.*g` with `digits` significant digits (PostgreSQL's float output at
/// `extra_float_digits` 0 and below): trailing zeros dropped, exponent form below 1e-4 and
/// from 10^digits.
fn float_with_digits(f: f64, digits: i32) -> String {
    let precision = usize::try_from(digits - 1).unwrap_or(0);
    let sci = format!("{f:.precision$e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    shortest_decimal(&format!("{mantissa}e{exp}"), digits)
}

/// `bytea_output = escape`: printable ASCII as itself, a backslash doubled, any other byte
/// as `\ooo` (PostgreSQL's `byteaout`).
fn bytea_escape(b: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(char::from(c)),
            _ => {
                let _ = write!(s, "\\{c:03o}");
            }
        }
    }
    s
}

/// The text output function: `None` for NULL.
pub fn format_text(value: &Value, ty: SqlType) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => if *b { "t" } else { "f" }.to_string(),
        Value::Int(i) if ty == SqlType::Date => crate::datetime::encode::date(*i),
        // The engine's `Lsn` prints PostgreSQL's `%X/%X`.
        Value::Int(i) if ty == SqlType::PgLsn => quire_engine::Lsn(i.cast_unsigned()).to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format_float(*f, ty),
        Value::Text(s) => match ty {
            SqlType::Vector(_) => array::vector_output(s),
            _ => s.clone(),
        },
        Value::Bytea(b) if ty == SqlType::Uuid => format_uuid(b),
        Value::Bytea(b) => {
            let mut s = String::from("\\x");
            hex_encode(b, &mut s);
            s
        }
        Value::Timestamp(us) if ty == SqlType::Timestamptz => {
            crate::datetime::encode::timestamptz(*us)
        }
        Value::Timestamp(us) => crate::datetime::encode::timestamp(*us),
        Value::Numeric(n) => n.to_string(),
        Value::Interval(i) => crate::datetime::interval::format(*i),
    })
}

fn format_float(f: f64, ty: SqlType) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else if ty == SqlType::Float4 {
        // The shortest form that reads back as the same `real`, as PostgreSQL prints it.
        shortest_decimal(&format!("{:e}", f as f32), 6)
    } else {
        shortest_decimal(&format!("{f:e}"), 15)
    }
}

/// PostgreSQL's float output (`float_to_shortest_decimal`, `extra_float_digits` 1) from
/// Rust's shortest round-trip digits in scientific form (`-1.2345e-5`): plain notation for
/// decimal exponents from -4 to `max_plain_exp - 1`, else `d.ddde±XX`.
fn shortest_decimal(sci: &str, max_plain_exp: i32) -> String {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if digits.bytes().all(|b| b == b'0') {
        return format!("{sign}0");
    }
    if exp < -4 || exp >= max_plain_exp {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{point}{rest}e{esign}{:02}",
            exp.unsigned_abs()
        );
    }
    let len = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    if exp < 0 {
        let zeros = "0".repeat(usize::try_from(-exp - 1).unwrap_or(0));
        format!("{sign}0.{zeros}{digits}")
    } else if exp + 1 >= len {
        let zeros = "0".repeat(usize::try_from(exp + 1 - len).unwrap_or(0));
        format!("{sign}{digits}{zeros}")
    } else {
        let (int, frac) = digits.split_at(usize::try_from(exp + 1).unwrap_or(0));
        format!("{sign}{int}.{frac}")
    }
}

/// The assignment cast of a value of type `from` to a column of type `to` (INSERT, UPDATE,
/// and parameters compared with a column): integers narrow with a range check, integers
/// widen to floats, untyped strings parse; anything else is a type mismatch (42804).
pub fn assign(value: Value, from: SqlType, to: SqlType, what: &str) -> Result<Value> {
    match (value, to) {
        (Value::Null, _) => Ok(Value::Null),
        (Value::Text(s), _) if from == SqlType::Unknown => parse_text(to, &s),
        (Value::Int(i), t) if t.is_int() && (from.is_int() || from.is_oid()) => {
            check_int_range(i, t)
        }
        (Value::Int(i), t) if t.is_oid() && (from.is_int() || from.is_oid()) => u32::try_from(i)
            .map(|_| Value::Int(i))
            .map_err(|_| SqlError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "OID out of range")),
        (Value::Int(i), SqlType::Float8) if from.is_int() => Ok(Value::Float(i as f64)),
        (Value::Int(i), SqlType::Float4) if from.is_int() => Ok(Value::Float(f64::from(i as f32))),
        (Value::Int(d), SqlType::Timestamp) if from == SqlType::Date => {
            Ok(Value::Timestamp(d.saturating_mul(US_PER_DAY)))
        }
        // A date's midnight on the session zone's clock (PostgreSQL's `date_timestamptz`).
        (Value::Int(d), SqlType::Timestamptz) if from == SqlType::Date => Ok(Value::Timestamp(
            crate::datetime::style::current()
                .zone
                .local_to_utc(d.saturating_mul(US_PER_DAY)),
        )),
        (Value::Timestamp(us), SqlType::Timestamptz) if from == SqlType::Timestamp => Ok(
            Value::Timestamp(crate::datetime::style::current().zone.local_to_utc(us)),
        ),
        (Value::Timestamp(us), SqlType::Timestamp) if from == SqlType::Timestamptz => Ok(
            Value::Timestamp(crate::datetime::style::current().zone.utc_to_local(us)),
        ),
        (Value::Int(i), SqlType::Numeric(typmod)) if from.is_int() => {
            check_numeric(numeric::from_i64(i), typmod)
        }
        (Value::Float(f), SqlType::Numeric(typmod)) => check_numeric(numeric::from_f64(f)?, typmod),
        (Value::Numeric(n), SqlType::Numeric(typmod)) => check_numeric(n, typmod),
        (Value::Numeric(n), t) if t.is_int() => {
            let i = numeric::to_i64(&n, t.short_name())?.ok_or_else(|| {
                SqlError::new(
                    SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
                    format!("{} out of range", t.short_name()),
                )
            })?;
            check_int_range(i, t)
        }
        (Value::Numeric(n), SqlType::Float8) => Ok(Value::Float(numeric::to_f64(&n))),
        (Value::Numeric(n), SqlType::Float4) => {
            Ok(Value::Float(f64::from(numeric::to_f64(&n) as f32)))
        }
        (Value::Float(f), SqlType::Float8) => Ok(Value::Float(f)),
        (Value::Float(f), SqlType::Float4) => Ok(Value::Float(f64::from(f as f32))),
        (Value::Float(f), t) if t.is_int() => float_to_int(f, t),
        (Value::Text(s), t) if from.is_text() => match t {
            SqlType::Varchar(limit) => check_varchar(s, limit),
            SqlType::Bpchar(limit) => check_bpchar(&s, limit),
            SqlType::Text | SqlType::Unknown | SqlType::Name => Ok(Value::Text(s)),
            SqlType::Char => Ok(Value::Text(char_value(&s))),
            _ => Err(mismatch(what, from, to)),
        },
        (v @ Value::Text(_), SqlType::Array(to_elem))
            if from == SqlType::Array(to_elem) || from == SqlType::Vector(to_elem) =>
        {
            Ok(v)
        }
        (v @ Value::Text(_), SqlType::Vector(_)) if from == to => Ok(v),
        (Value::Text(s), SqlType::Array(&to_elem)) => match from {
            SqlType::Array(&from_elem) => array::map_elements(&s, from_elem, to_elem, |v| {
                assign(v, from_elem, to_elem, what)
            })
            .map_err(|e| {
                if e.sqlstate() == SqlState::DATATYPE_MISMATCH {
                    mismatch(what, from, to)
                } else {
                    e
                }
            }),
            _ => Err(mismatch(what, from, to)),
        },
        (v @ Value::Timestamp(_), SqlType::Timestamp | SqlType::Timestamptz)
        | (v @ Value::Interval(_), SqlType::Interval) => Ok(v),
        (v @ (Value::Bool(_) | Value::Bytea(_)), t)
            if v.type_of() == Some(t.engine_type())
                && (from == t
                    || from.engine_type() == t.engine_type()
                        && from != SqlType::Uuid
                        && t != SqlType::Uuid) =>
        {
            Ok(v)
        }
        (v @ Value::Int(_), SqlType::Date) if from == SqlType::Date => Ok(v),
        (v @ Value::Int(_), SqlType::PgLsn) if from == SqlType::PgLsn => Ok(v),
        (v @ Value::Text(_), SqlType::Json | SqlType::Jsonb) if from == to => Ok(v),
        // json to jsonb and back are assignment casts; a jsonb text is valid json.
        (v @ Value::Text(_), SqlType::Json) if from == SqlType::Jsonb => Ok(v),
        (Value::Text(s), SqlType::Jsonb) if from == SqlType::Json => crate::json::jsonb_in(&s),
        // Any type's text form is an assignment cast to a string type (PostgreSQL's
        // automatic I/O conversion casts), checked against the target's length as text is.
        (v, t) if t.is_text() && from != SqlType::Text => {
            assign(cast(v, from, SqlType::Text)?, SqlType::Text, t, what)
        }
        _ => Err(mismatch(what, from, to)),
    }
}

fn mismatch(what: &str, from: SqlType, to: SqlType) -> SqlError {
    SqlError::type_mismatch(format!(
        "{what} is of type {} but expression is of type {}",
        to.name(),
        from.name()
    ))
}

/// An explicit cast (`::type`, `CAST`): assignment casts, plus anything to text and text
/// to anything.
pub fn cast(value: Value, from: SqlType, to: SqlType) -> Result<Value> {
    if let (Value::Bytea(b), true) = (&value, to.is_text()) {
        // `\x` and two hex digits a byte: twice the value.
        check_value_len(b.len().saturating_mul(2).saturating_add(2))?;
    }
    match (&value, to) {
        (Value::Null, _) => Ok(Value::Null),
        (Value::Text(s), SqlType::Array(&to_elem)) if from.element().is_some() => {
            let Some(from_elem) = from.element() else {
                return Err(internal("array cast"));
            };
            array::map_elements(s, from_elem, to_elem, |v| cast(v, from_elem, to_elem))
        }
        (Value::Text(s), _) if from.is_text() => parse_text(to, s),
        // PostgreSQL's bool-to-text cast (booltext) spells the value out; output (`t`) and
        // the cast to name (through output) do not.
        (Value::Bool(b), SqlType::Text | SqlType::Varchar(_) | SqlType::Bpchar(_))
            if from == SqlType::Bool =>
        {
            let word = if *b { "true" } else { "false" };
            match to {
                SqlType::Varchar(limit) => check_varchar(word.to_string(), limit),
                SqlType::Bpchar(limit) => check_bpchar(word, limit),
                _ => Ok(Value::Text(word.to_string())),
            }
        }
        (_, SqlType::Text | SqlType::Unknown | SqlType::Name) => {
            Ok(Value::Text(format_text(&value, from).unwrap_or_default()))
        }
        (_, SqlType::Varchar(limit)) => {
            check_varchar(format_text(&value, from).unwrap_or_default(), limit)
        }
        (_, SqlType::Bpchar(limit)) => {
            check_bpchar(&format_text(&value, from).unwrap_or_default(), limit)
        }
        (Value::Bool(b), t) if t.is_int() => Ok(Value::Int(i64::from(*b))),
        (Value::Int(i), SqlType::Bool) if from.is_int() => Ok(Value::Bool(*i != 0)),
        (Value::Timestamp(us), SqlType::Date) if !crate::datetime::ts_is_finite(*us) => Err(
            SqlError::new(SqlState::DATETIME_FIELD_OVERFLOW, "date out of range"),
        ),
        (Value::Timestamp(us), SqlType::Date) => {
            let local = if from == SqlType::Timestamptz {
                crate::datetime::style::current().zone.utc_to_local(*us)
            } else {
                *us
            };
            Ok(Value::Int(local.div_euclid(US_PER_DAY)))
        }
        (Value::Text(s), t)
            if from == SqlType::Jsonb
                && (t.is_int() || t.is_float() || t.is_numeric() || t == SqlType::Bool) =>
        {
            jsonb_scalar_cast(s, to)
        }
        _ => assign(value, from, to, "the value").map_err(|e| {
            if e.sqlstate() == SqlState::DATATYPE_MISMATCH {
                SqlError::new(
                    SqlState::CANNOT_COERCE,
                    format!("cannot cast type {} to {}", from.name(), to.name()),
                )
            } else {
                e
            }
        }),
    }
}

/// A jsonb scalar cast to a number or boolean (PostgreSQL 11's `jsonb::numeric`, ...):
/// a number to a number type, a boolean to boolean, 22023 otherwise.
fn jsonb_scalar_cast(text: &str, to: SqlType) -> Result<Value> {
    use crate::json::Jsonb;
    let v = crate::json::parse_jsonb(text)?;
    let kind = match &v {
        Jsonb::Number(n) if to != SqlType::Bool => {
            return cast(Value::Numeric(n.clone()), SqlType::Numeric(None), to)
        }
        Jsonb::Bool(b) if to == SqlType::Bool => return Ok(Value::Bool(*b)),
        Jsonb::Null => "null",
        Jsonb::Bool(_) => "boolean",
        Jsonb::Number(_) => "numeric",
        Jsonb::String(_) => "string",
        Jsonb::Array(_) => "array",
        Jsonb::Object(_) => "object",
    };
    Err(SqlError::new(
        SqlState::INVALID_PARAMETER_VALUE,
        format!("cannot cast jsonb {kind} to type {}", to.short_name()),
    ))
}

/// Rounds half away from zero, as PostgreSQL's float-to-integer cast does (it rounds to
/// nearest, ties to even; the difference shows only at exact .5).
fn float_to_int(f: f64, to: SqlType) -> Result<Value> {
    let r = f.round_ties_even();
    if !r.is_finite() || r < i64::MIN as f64 || r >= i64::MAX as f64 {
        return Err(SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{} out of range", to.short_name()),
        ));
    }
    check_int_range(r as i64, to)
}

/// Two non-NULL values of type `ty` in its order: arrays element by element, jsonb by its
/// rules (equal texts need no parse: both are canonical), anything else as [`compare`].
pub(crate) fn compare_typed(a: &Value, b: &Value, ty: SqlType) -> Result<std::cmp::Ordering> {
    match (a, b, ty) {
        (Value::Text(x), Value::Text(y), SqlType::Array(&elem)) => array::compare(x, y, elem),
        (Value::Text(x), Value::Text(y), SqlType::Jsonb) if x != y => {
            Ok(crate::json::parse_jsonb(x)?.compare(&crate::json::parse_jsonb(y)?))
        }
        _ => Ok(compare(a, b)),
    }
}

/// Values compared the way SQL compares them: integers and floats numerically, text by
/// bytes (quire's one collation is C), NULLs last (only ORDER BY sees them here).
pub(crate) fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    match (a, b) {
        (Value::Int(x), Value::Float(y)) => (*x as f64).total_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.total_cmp(&(*y as f64)),
        _ => a.compare(b),
    }
}

pub(crate) fn internal(what: &str) -> SqlError {
    SqlError::internal(format_args!("bad {what} in a bound plan"))
}

pub(crate) fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Numeric(n) => Some(crate::numeric::to_f64(n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_text() {
        for s in [
            "1970-01-01 00:00:00",
            "2000-02-29 12:34:56.5",
            "1969-12-31 23:59:59.999999",
            "2026-11-23 19:15:00",
        ] {
            let Ok(Value::Timestamp(us)) = parse_text(SqlType::Timestamp, s) else {
                panic!("{s} does not read");
            };
            assert_eq!(format_timestamp(us), s);
        }
        let ts = |s: &str| parse_text(SqlType::Timestamp, s).map_err(|e| e.sqlstate());
        assert_eq!(ts("2000-01-01"), Ok(Value::Timestamp(PG_EPOCH_OFFSET_US)));
        assert_eq!(ts("2001-02-29"), Err(SqlState::DATETIME_FIELD_OVERFLOW));
        assert_eq!(ts("garbage"), Err(SqlState::INVALID_DATETIME_FORMAT));
        // quire's last microseconds (year 294247), pushed past by a zone offset: an error,
        // not an overflow.
        let tz = parse_text(SqlType::Timestamptz, "294247-01-10 00:00 -15");
        assert_eq!(
            tz.map_err(|e| e.sqlstate()),
            Err(SqlState::DATETIME_FIELD_OVERFLOW)
        );
    }

    #[test]
    fn integer_input_checks_range_and_syntax() {
        assert_eq!(parse_text(SqlType::Int2, "32767"), Ok(Value::Int(32767)));
        assert_eq!(
            parse_text(SqlType::Int2, "32768").unwrap_err().sqlstate(),
            "22003"
        );
        assert_eq!(
            parse_text(SqlType::Int4, "12a").unwrap_err().sqlstate(),
            "22P02"
        );
        assert_eq!(
            parse_text(SqlType::Bool, "maybe").unwrap_err().sqlstate(),
            "22P02"
        );
    }

    #[test]
    fn type_names_round_trip() {
        for t in [
            SqlType::Int2,
            SqlType::Int4,
            SqlType::Int8,
            SqlType::Bool,
            SqlType::Float4,
            SqlType::Float8,
            SqlType::Text,
            SqlType::Varchar(None),
            SqlType::Varchar(Some(12)),
            SqlType::Bytea,
            SqlType::Timestamp,
        ] {
            assert_eq!(SqlType::from_name(&t.name()), Some(t));
        }
    }

    #[test]
    fn assignment_narrows_with_checks_and_refuses_other_types() {
        assert_eq!(
            assign(Value::Int(70_000), SqlType::Int4, SqlType::Int2, "c")
                .unwrap_err()
                .sqlstate(),
            "22003"
        );
        assert_eq!(
            assign(Value::Bool(true), SqlType::Bool, SqlType::Int4, "c")
                .unwrap_err()
                .sqlstate(),
            "42804"
        );
        assert_eq!(
            assign(
                Value::Text("abc".into()),
                SqlType::Text,
                SqlType::Varchar(Some(2)),
                "c"
            )
            .unwrap_err()
            .sqlstate(),
            "22001"
        );
        assert_eq!(
            assign(
                Value::Text("7".into()),
                SqlType::Unknown,
                SqlType::Int8,
                "c"
            ),
            Ok(Value::Int(7))
        );
    }
}
