//! WITH: common table expressions (PostgreSQL's parse_cte.c).
//!
//! ## Rules
//! - Scope: a query's CTEs are visible in it and in every query nested in it; an inner
//!   WITH's name shadows an outer one. Without RECURSIVE a CTE sees only the CTEs before
//!   it (a later one's name, or its own, is a table name, with PostgreSQL's hint when no
//!   table has it); with RECURSIVE it sees itself too.
//! - A recursive CTE is `non-recursive term UNION [ALL] recursive term`; its columns are
//!   the non-recursive term's (an untyped literal's is text), which the union's common
//!   types must equal (42804 otherwise). Its one reference must be in the recursive term,
//!   outside expression subqueries and outer joins' nullable sides (42P19), and the CTE
//!   has no ORDER BY, OFFSET or LIMIT (0A000).
//! - The analyzer only binds: every CTE becomes a [`Cte`] of a [`Node::With`] and every
//!   reference a [`Node::CteScan`]; which are inlined is `crate::optimize`'s choice.

use quire_engine::SqlState;
use sqlparser::ast::{self, SetExpr, SetOperator, SetQuantifier};

use super::scope::rename;
use super::Scope;
use super::{ident_name, Binder, OutColumn};
use crate::error::{Result, SqlError};
use crate::nodes::{Cte, Node, Plan};
use crate::types::SqlType;

/// A CTE in scope.
pub(crate) struct CteBinding {
    name: String,
    id: usize,
    /// The query level whose WITH defines it (`outer.len()` there): it is computed once per
    /// run of that level, so a subquery deeper down that reads it depends on that level's
    /// row as if it read a column of it (no initplan).
    level: usize,
    out: Vec<OutColumn>,
    state: CteState,
}

/// What a reference to a CTE in scope means where it is met.
#[derive(Clone, Copy)]
enum CteState {
    /// Bound: a reference reads it.
    Ready,
    /// Not yet visible (a CTE of a WITH without RECURSIVE, itself or after the one bound).
    Pending,
    /// A recursive CTE's non-recursive term, or a self-reference where no recursive term
    /// can be (`bad_form`): a reference is an error.
    NoReference { bad_form: bool },
    /// Its recursive term: the reference reads the working table; `sublinks` and
    /// `outer_joins` are the binder's counts where the term starts.
    RecursiveTerm {
        refs: usize,
        sublinks: usize,
        outer_joins: usize,
    },
}

/// `e` located at `ident` (a CTE's name, a reference to one), unless it has a position.
pub(super) fn at_ident(e: SqlError, ident: &ast::Ident) -> SqlError {
    match usize::try_from(ident.span.start.column) {
        Ok(p) if p > 0 && e.position().is_none() => e.with_position(p),
        _ => e,
    }
}

fn recursion_error(name: &str, what: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_RECURSION,
        format!("recursive reference to query \"{name}\" must not appear {what}"),
    )
}

impl Binder<'_> {
    /// `WITH ... INSERT | UPDATE | DELETE`: the statement bound in the CTEs' scope, which
    /// are computed before the rows it changes are read.
    pub(super) fn dml_with(&mut self, q: &ast::Query) -> Result<Plan> {
        let (SetExpr::Insert(inner) | SetExpr::Update(inner) | SetExpr::Delete(inner)) = &*q.body
        else {
            return Err(SqlError::internal(
                "WITH before a statement that changes no rows",
            ));
        };
        let Some(with) = &q.with else {
            return self.statement(inner);
        };
        let saved = self.ctes.len();
        let r = self.with_ctes(with).and_then(|mut ctes| {
            for c in &mut ctes {
                c.statement_level = true;
            }
            let mut plan = self.statement(inner)?;
            let (Plan::Insert { source: rows, .. }
            | Plan::Update { scan: rows, .. }
            | Plan::Delete { scan: rows, .. }) = &mut plan
            else {
                return Err(SqlError::internal("a changing statement's plan"));
            };
            let input = std::mem::replace(rows, Node::empty());
            *rows = Node::With {
                ctes,
                input: Box::new(input),
            };
            Ok(plan)
        });
        self.ctes.truncate(saved);
        r
    }

    /// `WITH ... query`: the CTEs bound in order, then the query in their scope.
    pub(super) fn with_query(
        &mut self,
        with: &ast::With,
        q: &ast::Query,
    ) -> Result<(Node, Vec<OutColumn>)> {
        let saved = self.ctes.len();
        let r = self.with_ctes(with).and_then(|ctes| {
            let (input, out) = self.query_body(q)?;
            Ok((
                Node::With {
                    ctes,
                    input: Box::new(input),
                },
                out,
            ))
        });
        self.ctes.truncate(saved);
        r
    }

    fn with_ctes(&mut self, with: &ast::With) -> Result<Vec<Cte>> {
        let first = self.ctes.len();
        for (i, cte) in with.cte_tables.iter().enumerate() {
            let name = ident_name(&cte.alias.name);
            if with.cte_tables[..i]
                .iter()
                .any(|c| ident_name(&c.alias.name) == name)
            {
                let e = SqlError::new(
                    SqlState::DUPLICATE_ALIAS,
                    format!("WITH query name \"{name}\" specified more than once"),
                );
                return Err(at_ident(e, &cte.alias.name));
            }
            self.ctes.push(CteBinding {
                name,
                id: self.next_cte,
                level: self.outer.len(),
                out: Vec::new(),
                state: CteState::Pending,
            });
            self.next_cte += 1;
        }
        let mut ctes = Vec::with_capacity(with.cte_tables.len());
        for (i, cte) in with.cte_tables.iter().enumerate() {
            let at = first + i;
            let (plan, out, recursive) = if with.recursive {
                self.recursive_cte(at, cte).map_err(|e| {
                    let bad_form = e.message().ends_with("UNION [ALL] recursive-term");
                    if bad_form {
                        at_ident(e, &cte.alias.name)
                    } else {
                        e
                    }
                })?
            } else {
                let (plan, out) = self.query(&cte.query)?;
                (plan, out, false)
            };
            let out = cte_columns(&self.ctes[at].name, out, &cte.alias)
                .map_err(|e| at_ident(e, &cte.alias.name))?;
            let binding = &mut self.ctes[at];
            binding.out = out;
            binding.state = CteState::Ready;
            ctes.push(Cte {
                id: binding.id,
                name: binding.name.clone(),
                plan,
                recursive,
                materialized: cte
                    .materialized
                    .as_ref()
                    .map(|m| matches!(m, ast::CteAsMaterialized::Materialized)),
                statement_level: false,
            });
        }
        Ok(ctes)
    }

    /// A CTE of WITH RECURSIVE (`at` in the scope): a recursive union when it refers to
    /// itself, else as any CTE. Returns its plan, columns and whether it recursed.
    fn recursive_cte(&mut self, at: usize, cte: &ast::Cte) -> Result<(Node, Vec<OutColumn>, bool)> {
        let q = &cte.query;
        let union = match &*q.body {
            SetExpr::SetOperation {
                left,
                op: SetOperator::Union,
                set_quantifier,
                right,
            } if q.with.is_none() => Some((left, *set_quantifier, right)),
            _ => None,
        };
        let Some((left, quantifier, right)) = union else {
            self.ctes[at].state = CteState::NoReference { bad_form: true };
            let (plan, out) = self.query(q)?;
            return Ok((plan, out, false));
        };
        self.ctes[at].state = CteState::NoReference { bad_form: false };
        let (base, mut base_out) = self.set_expr(left)?;
        for c in &mut base_out {
            if c.ty == SqlType::Unknown {
                c.ty = SqlType::Text;
            }
        }
        self.ctes[at].out = cte_columns(&self.ctes[at].name, base_out.clone(), &cte.alias)?;
        self.ctes[at].state = CteState::RecursiveTerm {
            refs: 0,
            sublinks: self.sublinks,
            outer_joins: self.outer_joins,
        };
        let (step, step_out) = self.set_expr(right)?;
        let CteState::RecursiveTerm { refs, .. } = self.ctes[at].state else {
            return Err(SqlError::internal("a recursive CTE's state"));
        };
        if refs == 0 {
            // No self-reference: an ordinary CTE, bound again as one.
            let (plan, out) = self.query(q)?;
            return Ok((plan, out, false));
        }
        check_recursive_query(q)?;
        let name = self.ctes[at].name.clone();
        let (base, step, out) = self.recursive_types(&name, (base, base_out), (step, &step_out))?;
        let plan = Node::RecursiveUnion {
            id: self.ctes[at].id,
            distinct: !matches!(quantifier, SetQuantifier::All),
            base: Box::new(base),
            step: Box::new(step),
        };
        Ok((plan, out, true))
    }

    /// The recursive term brought to the non-recursive term's types, which must be the
    /// union's.
    fn recursive_types(
        &mut self,
        name: &str,
        base: (Node, Vec<OutColumn>),
        step: (Node, &[OutColumn]),
    ) -> Result<(Node, Node, Vec<OutColumn>)> {
        let base_types: Vec<SqlType> = base.1.iter().map(|c| c.ty).collect();
        let (base, step, out) = self.unify_sides("UNION", base, step)?;
        for (i, (c, t)) in out.iter().zip(&base_types).enumerate() {
            if c.ty != *t {
                return Err(SqlError::new(
                    SqlState::DATATYPE_MISMATCH,
                    format!(
                        "recursive query \"{name}\" column {} has type {} in non-recursive term but type {} overall",
                        i + 1,
                        t.name(),
                        c.ty.name()
                    ),
                )
                .with_hint("Cast the output of the non-recursive term to the correct type."));
            }
        }
        Ok((base, step, out))
    }

    /// A one-part name in FROM that is a CTE in scope: its scan (or, in its recursive
    /// term, its working table's). `None` when no visible CTE has the name.
    pub(super) fn cte_reference(
        &mut self,
        name: &str,
        alias: Option<&ast::TableAlias>,
    ) -> Result<Option<(Node, Scope)>> {
        let Some(at) = self
            .ctes
            .iter()
            .rposition(|c| c.name == name && !matches!(c.state, CteState::Pending))
        else {
            return Ok(None);
        };
        let (sublinks, outer_joins) = (self.sublinks, self.outer_joins);
        if self.ctes[at].level < self.outer.len() {
            self.lowest_outer_ref = self.lowest_outer_ref.min(self.ctes[at].level);
        }
        let binding = &mut self.ctes[at];
        let alias_name = alias.map(|a| ident_name(&a.name));
        let node = match &mut binding.state {
            CteState::Ready | CteState::Pending => Node::CteScan {
                id: binding.id,
                name: binding.name.clone(),
                alias: alias_name.clone(),
                plan: None,
            },
            CteState::NoReference { bad_form: false } => {
                return Err(recursion_error(name, "within its non-recursive term"))
            }
            CteState::NoReference { bad_form: true } => {
                return Err(SqlError::new(
                    SqlState::INVALID_RECURSION,
                    format!("recursive query \"{name}\" does not have the form non-recursive-term UNION [ALL] recursive-term"),
                ))
            }
            CteState::RecursiveTerm {
                refs,
                sublinks: s,
                outer_joins: o,
            } => {
                if *refs > 0 {
                    return Err(recursion_error(name, "more than once"));
                }
                if sublinks > *s {
                    return Err(recursion_error(name, "within a subquery"));
                }
                if outer_joins > *o {
                    return Err(recursion_error(name, "within an outer join"));
                }
                *refs += 1;
                Node::WorkTableScan {
                    id: binding.id,
                    name: binding.name.clone(),
                    alias: alias_name.clone(),
                }
            }
        };
        let scope = Scope::of_out(&binding.out, Some(alias_name.as_deref().unwrap_or(name)));
        Ok(Some((node, rename(scope, alias)?)))
    }

    /// A missing table's error, with PostgreSQL's hint when a CTE not visible here has
    /// the name.
    pub(super) fn hidden_cte_hint(&self, e: SqlError, name: &str) -> SqlError {
        let hidden = self
            .ctes
            .iter()
            .any(|c| c.name == name && matches!(c.state, CteState::Pending));
        if !hidden || e.sqlstate() != SqlState::UNDEFINED_TABLE {
            return e;
        }
        e.with_detail(format!(
            "There is a WITH item named \"{name}\", but it cannot be referenced from this part of the query."
        ))
        .with_hint("Use WITH RECURSIVE, or re-order the WITH items to remove forward references.")
    }
}

/// A recursive CTE's query may not sort, limit or lock its union (0A000, as PostgreSQL).
fn check_recursive_query(q: &ast::Query) -> Result<()> {
    let clause = if q.order_by.is_some() {
        Some("ORDER BY")
    } else if q.limit_clause.is_some() || q.fetch.is_some() {
        Some("LIMIT")
    } else if !q.locks.is_empty() {
        Some("FOR UPDATE/SHARE")
    } else {
        None
    };
    match clause {
        Some(c) => Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("{c} in a recursive query is not implemented"),
        )),
        None => Ok(()),
    }
}

/// A CTE's columns renamed by its column list (`WITH t(a, b)`): 42P10 if it names more
/// columns than there are.
fn cte_columns(
    name: &str,
    mut out: Vec<OutColumn>,
    alias: &ast::TableAlias,
) -> Result<Vec<OutColumn>> {
    if alias.columns.len() > out.len() {
        return Err(SqlError::new(
            SqlState::INVALID_COLUMN_REFERENCE,
            format!(
                "WITH query \"{name}\" has {} columns available but {} columns specified",
                out.len(),
                alias.columns.len()
            ),
        ));
    }
    for (c, n) in out.iter_mut().zip(&alias.columns) {
        c.name = ident_name(&n.name);
    }
    Ok(out)
}
