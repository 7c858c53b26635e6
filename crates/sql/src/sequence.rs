//! Sequences as SQL sees them (the engine's `sequence` layer keeps their state): CREATE
//! SEQUENCE's options, the functions `nextval`, `currval`, `setval` and `lastval`, the
//! session's last values, and the sequences `serial` columns own.
//!
//! ## Rules
//! - Options get PostgreSQL's defaults: ascending from 1 up to the type's maximum
//!   (`AS smallint|integer|bigint`, bigint by default), descending from -1 down to the
//!   type's minimum; START at MINVALUE going up, MAXVALUE going down.
//! - `currval` and `lastval` are the session's, set by its own `nextval` and `setval` only
//!   (55000 before that), as PostgreSQL's backend-local sequence table.
//! - A `serial` column is an `integer NOT NULL DEFAULT nextval('<table>_<column>_seq')`
//!   whose sequence the column owns: DROP TABLE drops it (see `catalog::drop`).

use std::cell::RefCell;
use std::collections::HashMap;

use quire_engine::{Oid, SeqOptions, SqlState, Transaction};
use sqlparser::ast::{self, DataType, Expr as AstExpr, SequenceOptions, UnaryOperator};

use crate::error::{Result, SqlError};

/// `nextval` and `setval` results of this session, for `currval` and `lastval`.
#[derive(Default)]
pub(crate) struct SessionSequences {
    values: RefCell<HashMap<Oid, i64>>,
    /// The sequence `nextval` last advanced, for `lastval`.
    latest: RefCell<Option<Oid>>,
}

impl SessionSequences {
    pub(crate) fn nextval(&self, tx: &Transaction, seq: Oid) -> Result<i64> {
        let v = tx.nextval(seq)?;
        self.values.borrow_mut().insert(seq, v);
        *self.latest.borrow_mut() = Some(seq);
        Ok(v)
    }

    pub(crate) fn setval(
        &self,
        tx: &Transaction,
        seq: Oid,
        value: i64,
        is_called: bool,
    ) -> Result<i64> {
        tx.setval(seq, value, is_called)?;
        // PostgreSQL's setval sets currval only when the value counts as handed out.
        if is_called {
            self.values.borrow_mut().insert(seq, value);
        }
        Ok(value)
    }

    pub(crate) fn currval(&self, tx: &Transaction, seq: Oid) -> Result<i64> {
        // The lookup checks that it is a sequence, and takes its lock, as PostgreSQL does.
        let def = tx.sequence_def(seq)?;
        self.values.borrow().get(&seq).copied().ok_or_else(|| {
            SqlError::new(
                SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "currval of sequence \"{}\" is not yet defined in this session",
                    def.name
                ),
            )
        })
    }

    pub(crate) fn lastval(&self, tx: &Transaction) -> Result<i64> {
        let not_yet = || {
            SqlError::new(
                SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
                "lastval is not yet defined in this session",
            )
        };
        let seq = (*self.latest.borrow()).ok_or_else(not_yet)?;
        if tx.relation(seq)?.is_none() {
            return Err(not_yet());
        }
        self.values.borrow().get(&seq).copied().ok_or_else(not_yet)
    }
}

/// The width and bounds of a sequence's type (`AS ...`).
fn type_bounds(ty: &DataType) -> Result<(u8, i64, i64)> {
    Ok(match ty {
        DataType::SmallInt(_) | DataType::Int2(_) => (2, i16::MIN.into(), i16::MAX.into()),
        DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => {
            (4, i32::MIN.into(), i32::MAX.into())
        }
        DataType::BigInt(_) | DataType::Int8(_) => (8, i64::MIN, i64::MAX),
        other => {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "sequence type must be smallint, integer, or bigint".to_string()
                    + &format!(" (not {other})"),
            ))
        }
    })
}

/// An integer constant of a sequence option (`-5`, `+3`, `100`).
fn constant(e: &AstExpr) -> Result<i64> {
    let bad = || {
        SqlError::new(
            SqlState::SYNTAX_ERROR,
            format!("sequence option value {e} is not an integer"),
        )
    };
    crate::stack::check_stack_depth()?;
    match e {
        AstExpr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse().map_err(|_| bad()),
            _ => Err(bad()),
        },
        AstExpr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => constant(expr)?.checked_neg().ok_or_else(bad),
        AstExpr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        }
        | AstExpr::Nested(expr) => constant(expr),
        _ => Err(bad()),
    }
}

/// CREATE SEQUENCE's options with PostgreSQL's defaults filled in. OWNED BY is refused
/// (ownership comes from `serial`).
pub(crate) fn options(given: &[SequenceOptions]) -> Result<SeqOptions> {
    let mut bounds = (8, i64::MIN, i64::MAX);
    let (mut increment, mut min, mut max, mut start, mut cache, mut cycle) =
        (1, None, None, None, 1, false);
    for o in given {
        match o {
            SequenceOptions::DataType(ty) => bounds = type_bounds(ty)?,
            SequenceOptions::IncrementBy(e, _) => increment = constant(e)?,
            SequenceOptions::MinValue(e) => min = e.as_ref().map(constant).transpose()?,
            SequenceOptions::MaxValue(e) => max = e.as_ref().map(constant).transpose()?,
            SequenceOptions::StartWith(e, _) => start = Some(constant(e)?),
            SequenceOptions::Cache(e) => cache = constant(e)?,
            SequenceOptions::Cycle(no) => cycle = !no,
            SequenceOptions::OwnedBy(_) => {
                return Err(SqlError::unsupported("CREATE SEQUENCE ... OWNED BY"))
            }
        }
    }
    let ascending = increment > 0;
    let (value_bytes, lowest, highest) = bounds;
    let min_value = min.unwrap_or(if ascending { 1 } else { lowest });
    let max_value = max.unwrap_or(if ascending { highest } else { -1 });
    for (what, v) in [("MINVALUE", min_value), ("MAXVALUE", max_value)] {
        if !(lowest..=highest).contains(&v) {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                format!("{what} ({v}) is out of range for sequence data type"),
            ));
        }
    }
    let opts = SeqOptions {
        increment,
        min_value,
        max_value,
        start: start.unwrap_or(if ascending { min_value } else { max_value }),
        cache,
        cycle,
        value_bytes,
    };
    opts.check()?;
    Ok(opts)
}

/// ALTER SEQUENCE in `tx`: new options (transactional), RESTART (a `setval`, as
/// PostgreSQL's before version 10 made it; not undone by a rollback here), OWNED BY. Returns
/// the notices to send (IF EXISTS of a missing sequence).
pub(crate) fn alter(
    tx: &Transaction,
    stmt: &crate::parse::AlterSequenceStmt,
) -> Result<Vec<String>> {
    let name = stmt.name.strip_prefix("public.").unwrap_or(&stmt.name);
    let seq = match tx.relation_named(name)? {
        Some(quire_engine::Entry::Sequence(def)) if !name.starts_with("quire_") => def,
        Some(other) => {
            let kind = match other {
                quire_engine::Entry::Index(_) => "indexes",
                _ => "tables",
            };
            return Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!("cannot open relation \"{name}\""),
            )
            .with_detail(format!("This operation is not supported for {kind}.")));
        }
        None if stmt.if_exists => {
            return Ok(vec![format!(
                "relation \"{name}\" does not exist, skipping"
            )])
        }
        None => {
            return Err(SqlError::new(
                SqlState::UNDEFINED_TABLE,
                format!("relation \"{name}\" does not exist"),
            ))
        }
    };
    let (options, owned) = alter_options(seq.options, &stmt.options)?;
    if options != seq.options {
        tx.alter_sequence(seq.oid, &options)?;
    }
    match stmt.restart {
        Some(crate::parse::Restart::To(v)) => tx.setval(seq.oid, v, false)?,
        Some(crate::parse::Restart::ToStart) => tx.setval(seq.oid, options.start, false)?,
        None => {}
    }
    if let Some(owned) = owned {
        crate::catalog::set_owner(tx, seq.oid, owned)?;
    }
    Ok(Vec::new())
}

/// What OWNED BY says: the table and column that own the sequence, or none.
pub(crate) type OwnedBy = Option<(String, String)>;

/// ALTER SEQUENCE's options over the sequence's `current` ones, as PostgreSQL's
/// `init_params` applies them: what is not given stays, NO MINVALUE / NO MAXVALUE take the
/// defaults for the direction, and a new AS type moves bounds that were the old type's.
/// Also what OWNED BY said, if it was given.
pub(crate) fn alter_options(
    current: SeqOptions,
    given: &[SequenceOptions],
) -> Result<(SeqOptions, Option<OwnedBy>)> {
    let mut o = current;
    let old = bounds_of(o.value_bytes);
    let mut owned = None;
    let (mut min, mut max) = (Some(o.min_value), Some(o.max_value));
    for g in given {
        match g {
            SequenceOptions::DataType(ty) => {
                let (bytes, lo, hi) = type_bounds(ty)?;
                o.value_bytes = bytes;
                if min == Some(old.0) {
                    min = Some(lo);
                }
                if max == Some(old.1) {
                    max = Some(hi);
                }
            }
            SequenceOptions::IncrementBy(e, _) => o.increment = constant(e)?,
            SequenceOptions::MinValue(e) => min = e.as_ref().map(constant).transpose()?,
            SequenceOptions::MaxValue(e) => max = e.as_ref().map(constant).transpose()?,
            SequenceOptions::StartWith(e, _) => o.start = constant(e)?,
            SequenceOptions::Cache(e) => o.cache = constant(e)?,
            SequenceOptions::Cycle(no) => o.cycle = !no,
            SequenceOptions::OwnedBy(n) => owned = Some(owned_by(n.as_ref())?),
        }
    }
    let (lowest, highest) = bounds_of(o.value_bytes);
    let ascending = o.increment > 0;
    o.min_value = min.unwrap_or(if ascending { 1 } else { lowest });
    o.max_value = max.unwrap_or(if ascending { highest } else { -1 });
    for (what, v) in [("MINVALUE", o.min_value), ("MAXVALUE", o.max_value)] {
        if !(lowest..=highest).contains(&v) {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                format!("{what} ({v}) is out of range for sequence data type"),
            ));
        }
    }
    o.check()?;
    Ok((o, owned))
}

/// The bounds of a sequence's integer type of `bytes` bytes.
fn bounds_of(bytes: u8) -> (i64, i64) {
    match bytes {
        2 => (i16::MIN.into(), i16::MAX.into()),
        4 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    }
}

/// OWNED BY `table.column` or NONE.
fn owned_by(n: Option<&ast::ObjectName>) -> Result<OwnedBy> {
    let Some(n) = n else {
        return Ok(None);
    };
    let parts: Vec<String> = n.0.iter().map(ToString::to_string).collect();
    let parts: Vec<String> = parts
        .iter()
        .map(
            |p| match p.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
                Some(q) => q.to_string(),
                None => p.to_lowercase(),
            },
        )
        .collect();
    match parts.as_slice() {
        [none] if none == "none" => Ok(None),
        [.., t, c] if parts.len() <= 3 => Ok(Some((t.clone(), c.clone()))),
        _ => Err(
            SqlError::new(SqlState::INVALID_PARAMETER_VALUE, "invalid OWNED BY option")
                .with_hint("Specify OWNED BY table.column or OWNED BY NONE."),
        ),
    }
}

/// The options of a `serial` column's sequence: the column type's width and maximum
/// (integer for `serial`, bigint for `bigserial`, smallint for `smallserial`).
pub(crate) fn serial_options(column: crate::types::SqlType) -> SeqOptions {
    use crate::types::SqlType;
    let (value_bytes, max_value) = match column {
        SqlType::Int2 => (2, i64::from(i16::MAX)),
        SqlType::Int4 => (4, i64::from(i32::MAX)),
        _ => (8, i64::MAX),
    };
    SeqOptions {
        max_value,
        value_bytes,
        ..SeqOptions::default()
    }
}

/// The options of an identity column's sequence: the column type's bounds unless `given`
/// says otherwise (PostgreSQL's identity sequence is `AS` the column's type). 22023 for a
/// column that is not smallint, integer or bigint.
pub(crate) fn identity_options(
    column: &crate::catalog::ColumnInfo,
    given: &[SequenceOptions],
) -> Result<SeqOptions> {
    use crate::types::SqlType;
    let ty = match column.ty {
        SqlType::Int2 => DataType::SmallInt(None),
        SqlType::Int4 => DataType::Integer(None),
        SqlType::Int8 => DataType::BigInt(None),
        _ => {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "identity column type must be smallint, integer, or bigint",
            ))
        }
    };
    let mut all = Vec::with_capacity(given.len() + 1);
    all.push(SequenceOptions::DataType(ty));
    all.extend(given.iter().cloned());
    options(&all)
}

/// The name PostgreSQL gives a serial column's sequence: `<table>_<column>_seq`, with a
/// number appended while the name is taken.
pub(crate) fn serial_name(tx: &Transaction, table: &str, column: &str) -> Result<String> {
    let base = format!("{table}_{column}_seq");
    if tx.relation_named(&base)?.is_none() {
        return Ok(base);
    }
    for n in 1..1000 {
        let name = format!("{base}{n}");
        if tx.relation_named(&name)?.is_none() {
            return Ok(name);
        }
    }
    Err(SqlError::new(
        SqlState::DUPLICATE_TABLE,
        format!("could not choose a name for the sequence of column \"{column}\""),
    ))
}

/// The DEFAULT text of a column that `seq` numbers, as PostgreSQL shows it.
pub(crate) fn nextval_default(seq: &str) -> String {
    format!("nextval('{}'::regclass)", seq.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    fn opts_of(sql: &str) -> Result<SeqOptions> {
        let stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses");
        let ast::Statement::CreateSequence {
            sequence_options, ..
        } = &stmt[0]
        else {
            panic!("not CREATE SEQUENCE");
        };
        options(sequence_options)
    }

    #[test]
    fn options_default_as_postgresql_does() {
        assert_eq!(opts_of("CREATE SEQUENCE s").unwrap(), SeqOptions::default());
        let down = opts_of("CREATE SEQUENCE s INCREMENT BY -2 AS integer").unwrap();
        assert_eq!(
            (down.min_value, down.max_value, down.start),
            (i64::from(i32::MIN), -1, -1)
        );
        let o = opts_of("CREATE SEQUENCE s AS smallint START WITH 5 MINVALUE 0 CYCLE").unwrap();
        assert_eq!(
            (o.min_value, o.max_value, o.start, o.cycle),
            (0, 32767, 5, true)
        );
        let e = opts_of("CREATE SEQUENCE s AS smallint MAXVALUE 40000").unwrap_err();
        assert_eq!(e.sqlstate(), "22023");
        let e = opts_of("CREATE SEQUENCE s START 0").unwrap_err();
        assert_eq!(e.sqlstate(), "22023");
        assert_eq!(nextval_default("a'b"), "nextval('a''b'::regclass)");
    }
}
