//! CHECK constraints: their expressions bound (boolean, no subquery, aggregate or window
//! call; 42804, 0A000, 42803, 42P20 as PostgreSQL) and named as PostgreSQL names them, and
//! bound again over a table's row for the statements that must verify them.

use quire_engine::SqlState;
use sqlparser::ast::Expr as AstExpr;

use super::{Binder, Scope};
use crate::catalog::{ColumnInfo, TableInfo};
use crate::error::{Result, SqlError};
use crate::nodes::{BoundCheck, Expr, NewCheck};
use crate::types::SqlType;

/// PostgreSQL's NAMEDATALEN - 1: the longest name it keeps.
const MAX_NAME_BYTES: usize = 63;

impl Binder<'_> {
    /// `e` bound as a CHECK constraint over `scope` (a table's row).
    pub(super) fn check_expr(&mut self, e: &AstExpr, scope: &Scope) -> Result<Expr> {
        let saved = self.set_clause(Some("check constraints"));
        let bound = self.expr_expecting(e, scope, Some(SqlType::Bool));
        self.clause = saved;
        let (x, ty) = bound?;
        if !matches!(ty, SqlType::Bool | SqlType::Unknown) {
            return Err(SqlError::type_mismatch(format!(
                "argument of CHECK must be type boolean, not type {}",
                ty.name()
            )));
        }
        if x.uses_subquery() {
            return Err(SqlError::new(
                SqlState::FEATURE_NOT_SUPPORTED,
                "cannot use subquery in check constraint",
            ));
        }
        self.coerce(x, ty, SqlType::Bool)
    }

    /// A new CHECK constraint of table `table` (whose row `scope` is): bound, and named
    /// `name` or as PostgreSQL would name it, apart from every name in `taken` (to which
    /// the name is added). 42710 if `name` is taken: by another of the same CREATE TABLE's
    /// (`fresh`) or by a constraint the table has.
    pub(super) fn new_check(
        &mut self,
        table: &str,
        name: Option<String>,
        e: &AstExpr,
        scope: &Scope,
        taken: &mut Vec<String>,
        fresh: bool,
    ) -> Result<NewCheck> {
        let bound = self.check_expr(e, scope)?;
        let name = match name {
            Some(n) if taken.contains(&n) => return Err(duplicate(&n, table, fresh)),
            Some(n) => n,
            None => {
                let mut columns = bound.columns();
                columns.sort_unstable();
                columns.dedup();
                let column = match columns.as_slice() {
                    [c] => scope
                        .cols
                        .iter()
                        .find(|s| matches!(s.source, Expr::Column(i) if i == *c))
                        .map(|s| s.name.as_str()),
                    _ => None,
                };
                choose_name(table, column, "check", taken)
            }
        };
        taken.push(name.clone());
        Ok(NewCheck {
            name,
            expr: e.to_string(),
            bound,
        })
    }

    /// CREATE TABLE's CHECK constraints (column and table ones, in the order written) over
    /// the new table's `columns`.
    pub(super) fn new_table_checks(
        &mut self,
        table: &str,
        columns: &[ColumnInfo],
        checks: Vec<(Option<String>, &AstExpr)>,
    ) -> Result<Vec<NewCheck>> {
        let shown = crate::catalog::display_name(table);
        let cols: Vec<(&str, SqlType)> = columns.iter().map(|c| (c.name.as_str(), c.ty)).collect();
        let scope = Scope::of_named(&cols, Some(shown));
        let mut taken = Vec::with_capacity(checks.len());
        let mut out = Vec::with_capacity(checks.len());
        for (name, e) in checks {
            out.push(self.new_check(shown, name, e, &scope, &mut taken, true)?);
        }
        Ok(out)
    }

    /// The CHECK constraints of `table` bound over its row, for a statement that writes it.
    pub(super) fn bound_checks(&mut self, table: &TableInfo) -> Result<Vec<BoundCheck>> {
        if table.checks.is_empty() {
            return Ok(Vec::new());
        }
        let scope = Scope::of_table(table, Some(&table.def.name));
        let mut out = Vec::with_capacity(table.checks.len());
        for c in &table.checks {
            let e = crate::parse::expression(&c.expr)?;
            out.push(BoundCheck {
                name: c.name.clone(),
                expr: self.check_expr(&e, &scope)?,
            });
        }
        Ok(out)
    }
}

/// 42710 for a constraint name in use, worded as PostgreSQL words each case.
fn duplicate(name: &str, table: &str, fresh: bool) -> SqlError {
    let message = if fresh {
        format!("check constraint \"{name}\" already exists")
    } else {
        format!("constraint \"{name}\" for relation \"{table}\" already exists")
    };
    SqlError::new(SqlState::DUPLICATE_OBJECT, message)
}

/// PostgreSQL's `ChooseConstraintName`: `<table>_<column>_<label>` (without the column when
/// there is none), each part shortened to fit 63 bytes, then `<label>1`, `<label>2`, ... until
/// the name is not in `taken`.
pub(crate) fn choose_name(
    table: &str,
    column: Option<&str>,
    label: &str,
    taken: &[String],
) -> String {
    for pass in 0usize.. {
        let label = if pass == 0 {
            label.to_string()
        } else {
            format!("{label}{pass}")
        };
        let name = object_name(table, column, &label);
        if !taken.contains(&name) {
            return name;
        }
    }
    unreachable!("some suffix is free: `taken` is finite")
}

/// PostgreSQL's `makeObjectName`: the longer of the two names is cut first, at a character
/// boundary, until `name1_name2_label` fits [`MAX_NAME_BYTES`].
fn object_name(name1: &str, name2: Option<&str>, label: &str) -> String {
    let mut n1 = name1.len();
    let mut n2 = name2.map_or(0, str::len);
    let overhead = label.len() + 1 + usize::from(name2.is_some());
    while n1 + n2 + overhead > MAX_NAME_BYTES {
        if n1 > n2 {
            n1 -= 1;
        } else {
            n2 -= 1;
        }
    }
    let cut = |s: &str, mut n: usize| {
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s[..n].to_string()
    };
    let mut out = cut(name1, n1);
    if let Some(c) = name2 {
        out.push('_');
        out.push_str(&cut(c, n2));
    }
    out.push('_');
    out.push_str(label);
    out
}

impl Binder<'_> {
    /// ALTER TABLE ... VALIDATE CONSTRAINT `name`: the CHECK constraint bound (42704 if the
    /// table has none of that name).
    pub(super) fn check_named(&mut self, table: &TableInfo, name: &str) -> Result<BoundCheck> {
        let Some(c) = table.checks.iter().find(|c| c.name == name) else {
            return Err(SqlError::new(
                SqlState::UNDEFINED_OBJECT,
                format!(
                    "constraint \"{name}\" of relation \"{}\" does not exist",
                    table.def.name
                ),
            ));
        };
        let scope = Scope::of_table(table, Some(&table.def.name));
        let e = crate::parse::expression(&c.expr)?;
        Ok(BoundCheck {
            name: c.name.clone(),
            expr: self.check_expr(&e, &scope)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_postgresql() {
        assert_eq!(choose_name("t", Some("a"), "check", &[]), "t_a_check");
        assert_eq!(choose_name("t", None, "check", &[]), "t_check");
        let taken = vec!["t_a_check".to_string(), "t_a_check1".to_string()];
        assert_eq!(choose_name("t", Some("a"), "check", &taken), "t_a_check2");
        let long = "x".repeat(70);
        let n = choose_name(&long, Some("col"), "check", &[]);
        assert_eq!(n.len(), 63);
        assert!(n.ends_with("_col_check"));
    }
}
