//! Statement shapes: a simple-protocol statement with its constants taken out. pgbench's
//! `-M simple`, psql scripts and many applications send the same statement again and again
//! with other constants (`... WHERE aid = 4711`); each would be parsed and bound anew, a fifth
//! of a short SELECT's time. The shape of `SELECT abalance FROM t WHERE aid = 4711` is
//! `SELECT abalance FROM t WHERE aid = $1` with the constant `4711` of type `integer`: the
//! session runs it as the extended protocol runs a prepared statement, its plan kept under
//! the shape's text ([`crate::session`]'s plan cache), and `4711` its parameter.
//!
//! ## Rules
//! - A shape stands for its statement only where a parameter means what the constant
//!   meant. So [`shape_of`] takes only one SELECT, INSERT, UPDATE or DELETE of plain text:
//!   no comments, no dollar quotes or `$n`, no `E'...'`-style prefixed strings, no numbers
//!   with exponents, underscores or a leading point, at most [`MAX_CONSTANTS`] constants in
//!   at most [`MAX_SHAPE_BYTES`] bytes. Anything else goes the ordinary way.
//! - Each constant's parameter has the type PostgreSQL gives the constant: `integer` if it
//!   fits, else `bigint`, else `numeric` (also with a point); a quoted string is of unknown
//!   type, its type decided by where it stands, as the constant's would be.
//! - [`check_parameters`] refuses a shape whose parameter stands where a constant is not a
//!   value: an ORDER BY, GROUP BY or DISTINCT ON position (`ORDER BY 2`).
//! - The session also refuses a shape that does not bind, or binds with a parameter whose
//!   type stays unknown (`SELECT 'a'`) or whose input needs the catalog (`'t'::regclass`,
//!   which a constant resolves while binding: [`is_parameter_type`]): the statement then
//!   runs as written, with its own errors. `-2147483648` and `-9223372036854775808` are left as written too, since the
//!   constant folds its minus sign into a narrower type than the parameter's.

use sqlparser::ast::{
    Distinct, Expr, GroupByExpr, OrderByKind, Query, SetExpr, Statement as AstStatement,
    Value as AstValue,
};

use crate::types::SqlType;

/// Most constants a shape takes out; a statement with more (a long INSERT ... VALUES) runs
/// as written, and its plan is not kept.
pub(crate) const MAX_CONSTANTS: usize = 64;
/// Longest statement text given a shape.
pub(crate) const MAX_SHAPE_BYTES: usize = 4096;

/// A statement's shape: its text with `$1`, `$2`, ... for its constants, and the constants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub text: String,
    pub constants: Vec<Constant>,
}

/// A constant taken out of a statement: its parameter's type, and its text as a parameter
/// value in text format (a quoted string's contents, a number as written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Constant {
    pub ty: SqlType,
    pub text: String,
    /// A quoted string's place in the statement (characters from 1, at its opening quote):
    /// where an error in reading it points, as PostgreSQL's for an untyped literal.
    pub position: Option<usize>,
}

impl Shape {
    /// The parameter types, one per constant.
    pub fn hints(&self) -> Vec<SqlType> {
        self.constants.iter().map(|c| c.ty).collect()
    }
}

/// The shape of `sql`, or `None` if it is not one statement the rules allow.
pub(crate) fn shape_of(sql: &str) -> Option<Shape> {
    let original = sql;
    let lead = sql.len() - sql.trim_start().len();
    let sql = sql.trim();
    let sql = sql.strip_suffix(';').unwrap_or(sql).trim_end();
    if sql.len() > MAX_SHAPE_BYTES || !starts_with_dml(sql) {
        return None;
    }
    let b = sql.as_bytes();
    let mut text = String::with_capacity(sql.len() + 8);
    let mut constants = Vec::new();
    let mut copied = 0; // bytes of `sql` already in `text`
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'$' | b';' => return None,
            b'-' if b.get(i + 1) == Some(&b'-') => return None,
            b'/' if b.get(i + 1) == Some(&b'*') => return None,
            b'"' => i = skip_identifier(b, i)?,
            // `.5`: a number with a leading point.
            b'.' if b.get(i + 1).is_some_and(u8::is_ascii_digit)
                && (i == 0 || !is_word_byte(b[i - 1])) =>
            {
                return None;
            }
            b'\'' => {
                if i > 0 && is_word_byte(b[i - 1]) {
                    return None; // E'..', B'..', X'..', N'..', U&'..'
                }
                let (end, contents) = quoted_string(sql, i)?;
                let position = original[..lead + i].chars().count() + 1;
                push_constant(
                    &mut text,
                    &mut constants,
                    &sql[copied..i],
                    (SqlType::Unknown, Some(position)),
                    contents,
                )?;
                copied = end;
                i = end;
            }
            b'0'..=b'9' if i == 0 || !(is_word_byte(b[i - 1]) || b[i - 1] == b'.') => {
                let end = number_end(b, i)?;
                let digits = &sql[i..end];
                let ty = number_type(digits);
                // Only a constant beyond `integer` can fold a minus into a narrower type.
                if ty != SqlType::Int4 && folds_minus(sql, i, digits) {
                    return None;
                }
                push_constant(
                    &mut text,
                    &mut constants,
                    &sql[copied..i],
                    (ty, None),
                    digits.to_string(),
                )?;
                copied = end;
                i = end;
            }
            _ => i += 1,
        }
    }
    text.push_str(&sql[copied..]);
    Some(Shape { text, constants })
}

/// Whether the statement starts with SELECT, INSERT, UPDATE or DELETE.
fn starts_with_dml(sql: &str) -> bool {
    let word: String = sql
        .bytes()
        .take_while(u8::is_ascii_alphabetic)
        .map(|c| char::from(c.to_ascii_lowercase()))
        .collect();
    matches!(word.as_str(), "select" | "insert" | "update" | "delete")
}

/// Bytes that continue a word: letters, digits, `_`, `$` and any byte of a non-ASCII
/// character (PostgreSQL's identifier characters).
fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

fn push_constant(
    text: &mut String,
    constants: &mut Vec<Constant>,
    before: &str,
    (ty, position): (SqlType, Option<usize>),
    value: String,
) -> Option<()> {
    if constants.len() == MAX_CONSTANTS {
        return None;
    }
    text.push_str(before);
    constants.push(Constant {
        ty,
        text: value,
        position,
    });
    text.push('$');
    text.push_str(&constants.len().to_string());
    Some(())
}

/// The index after the double-quoted identifier at `i`.
fn skip_identifier(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < b.len() {
        if b[i] == b'"' {
            if b.get(i + 1) == Some(&b'"') {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// The standard string at `i` (a doubled quote stands for one; a backslash is an ordinary
/// character): the index after it and its contents.
fn quoted_string(sql: &str, start: usize) -> Option<(usize, String)> {
    let b = sql.as_bytes();
    let mut contents = String::new();
    let mut piece = start + 1;
    let mut i = start + 1;
    while i < b.len() {
        if b[i] == b'\'' {
            contents.push_str(&sql[piece..i]);
            if b.get(i + 1) == Some(&b'\'') {
                contents.push('\'');
                i += 2;
                piece = i;
                continue;
            }
            // Two strings separated by a newline are one (SQL's continuation): not here.
            return Some((i + 1, contents));
        }
        i += 1;
    }
    None
}

/// The index after the number at `i`: digits, optionally a point and digits. `None` for
/// any other form (exponent, underscore, hexadecimal, a letter after the digits, `1.`).
fn number_end(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    i = digits(i);
    if b.get(i) == Some(&b'.') {
        let after = digits(i + 1);
        if after == i + 1 {
            return None;
        }
        i = after;
    }
    match b.get(i) {
        Some(&c) if is_word_byte(c) || c == b'.' => None,
        _ => Some(i),
    }
}

/// PostgreSQL's type of a numeric constant.
fn number_type(digits: &str) -> SqlType {
    match digits.parse::<i64>() {
        Ok(v) if i32::try_from(v).is_ok() => SqlType::Int4,
        Ok(_) => SqlType::Int8,
        Err(_) => SqlType::Numeric(None),
    }
}

/// Whether a minus sign before the constant makes it fit the next narrower type, as the
/// binder folds `-constant`: the parameter's type would then differ from the constant's.
fn folds_minus(sql: &str, at: usize, digits: &str) -> bool {
    let minus_before = sql[..at].trim_end().ends_with('-');
    minus_before && matches!(digits, "2147483648" | "9223372036854775808")
}

/// Whether a constant whose parameter binds to type `ty` means the same as a parameter:
/// not while the type is unknown, nor for the `reg*` types, whose input reads the catalog.
pub(crate) fn is_parameter_type(ty: SqlType) -> bool {
    !matches!(
        ty,
        SqlType::Unknown
            | SqlType::Regclass
            | SqlType::Regtype
            | SqlType::Regnamespace
            | SqlType::Regproc
    )
}

/// Whether every parameter of `stmt` stands where a value may: not as an ORDER BY,
/// GROUP BY or DISTINCT ON item, where a constant is a position.
pub(crate) fn check_parameters(stmt: &AstStatement) -> bool {
    match stmt {
        AstStatement::Query(q) => query_ok(q),
        AstStatement::Insert(insert) => insert.source.as_deref().is_none_or(query_ok),
        AstStatement::Update { .. } | AstStatement::Delete(_) => true,
        _ => false,
    }
}

fn query_ok(q: &Query) -> bool {
    if crate::stack::check_stack_depth().is_err() {
        return false; // too deep to look through: the statement runs as written
    }
    let order_ok = q.order_by.as_ref().is_none_or(|o| match &o.kind {
        OrderByKind::Expressions(items) => items.iter().all(|e| !is_parameter(&e.expr)),
        OrderByKind::All(_) => true,
    });
    let ctes_ok = q
        .with
        .as_ref()
        .is_none_or(|w| w.cte_tables.iter().all(|c| query_ok(&c.query)));
    order_ok && ctes_ok && set_expr_ok(&q.body)
}

fn set_expr_ok(body: &SetExpr) -> bool {
    if crate::stack::check_stack_depth().is_err() {
        return false;
    }
    match body {
        SetExpr::Select(s) => {
            let group_ok = match &s.group_by {
                GroupByExpr::Expressions(items, _) => items.iter().all(|e| !is_parameter(e)),
                GroupByExpr::All(_) => true,
            };
            let distinct_ok = match &s.distinct {
                Some(Distinct::On(items)) => items.iter().all(|e| !is_parameter(e)),
                _ => true,
            };
            group_ok && distinct_ok
        }
        SetExpr::Query(q) => query_ok(q),
        SetExpr::SetOperation { left, right, .. } => set_expr_ok(left) && set_expr_ok(right),
        _ => true,
    }
}

fn is_parameter(mut e: &Expr) -> bool {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    matches!(e, Expr::Value(v) if matches!(v.value, AstValue::Placeholder(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(sql: &str) -> Option<(String, Vec<(SqlType, String)>)> {
        shape_of(sql).map(|s| {
            (
                s.text,
                s.constants.into_iter().map(|c| (c.ty, c.text)).collect(),
            )
        })
    }

    #[test]
    fn constants_become_parameters_with_postgresqls_types() {
        let (text, c) = shape("SELECT abalance FROM pgbench_accounts WHERE aid = 4711;").unwrap();
        assert_eq!(text, "SELECT abalance FROM pgbench_accounts WHERE aid = $1");
        assert_eq!(c, vec![(SqlType::Int4, "4711".into())]);
        let (text, c) =
            shape("update t set a = a + -5, b = 'it''s', c = 3000000000, d = 1.50 where k = 99999999999999999999")
                .unwrap();
        assert_eq!(
            text,
            "update t set a = a + -$1, b = $2, c = $3, d = $4 where k = $5"
        );
        assert_eq!(
            c,
            vec![
                (SqlType::Int4, "5".into()),
                (SqlType::Unknown, "it's".into()),
                (SqlType::Int8, "3000000000".into()),
                (SqlType::Numeric(None), "1.50".into()),
                (SqlType::Numeric(None), "99999999999999999999".into()),
            ]
        );
    }

    #[test]
    fn digits_in_names_and_quoted_names_stay() {
        let (text, c) = shape(r#"SELECT "col 1", t1.x2 FROM s0_12 t1 WHERE "a""7" = 7"#).unwrap();
        assert_eq!(
            text,
            r#"SELECT "col 1", t1.x2 FROM s0_12 t1 WHERE "a""7" = $1"#
        );
        assert_eq!(c, vec![(SqlType::Int4, "7".into())]);
        let (text, c) = shape("SELECT * FROM café1 WHERE x = 2").unwrap();
        assert_eq!(text, "SELECT * FROM café1 WHERE x = $1");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn statements_outside_the_rules_have_no_shape() {
        for sql in [
            "BEGIN",
            "CREATE TABLE t (a varchar(10))",
            "PREPARE TRANSACTION 'p_1'",
            "SELECT 1; SELECT 2",
            "SELECT 1 -- a comment",
            "SELECT /* c */ 1",
            "SELECT $1",
            "SELECT $$a$$",
            "SELECT E'a\\n'",
            "SELECT X'1F'",
            "SELECT 1e5",
            "SELECT 1_000",
            "SELECT 0x1F",
            "SELECT .5",
            "SELECT 5.",
            "SELECT 'unterminated",
            "SELECT -2147483648",
            "SELECT - 9223372036854775808",
            "WITH x AS (SELECT 1) SELECT * FROM x",
        ] {
            assert_eq!(shape(sql), None, "{sql}");
        }
        let many = format!("SELECT {}", vec!["1"; MAX_CONSTANTS + 1].join(", "));
        assert_eq!(shape(&many), None);
        let few = format!("SELECT {}", vec!["1"; MAX_CONSTANTS].join(", "));
        assert!(shape(&few).is_some());
        // A minus before a constant that fits either way is an ordinary operator.
        assert!(shape("SELECT -2147483647").is_some());
    }

    #[test]
    fn positions_are_not_values() {
        let parse = |sql: &str| {
            let dialect = sqlparser::dialect::PostgreSqlDialect {};
            sqlparser::parser::Parser::parse_sql(&dialect, sql)
                .unwrap()
                .remove(0)
        };
        for sql in [
            "SELECT a, b FROM t ORDER BY $1",
            "SELECT a, count(*) FROM t GROUP BY $1",
            "SELECT DISTINCT ON ($1) a FROM t",
            "SELECT a FROM t UNION SELECT a FROM u ORDER BY ($1)",
            "INSERT INTO t SELECT a FROM u ORDER BY $1",
        ] {
            assert!(!check_parameters(&parse(sql)), "{sql}");
        }
        for sql in [
            "SELECT a FROM t WHERE b = $1 ORDER BY a + $2 LIMIT $3",
            "SELECT a, count(*) FROM t WHERE b > $1 GROUP BY a",
            "INSERT INTO t VALUES ($1, $2)",
            "UPDATE t SET a = $1 WHERE b = $2",
            "DELETE FROM t WHERE a = $1",
        ] {
            assert!(check_parameters(&parse(sql)), "{sql}");
        }
    }
}
