//! Views: CREATE [OR REPLACE] VIEW binds the query once, to fix the view's columns and note
//! the relations it reads ([`catalog::view::ViewBody`]); a query that names a view binds
//! the stored query again in its place, as PostgreSQL's rewriter puts a view's query tree
//! into the query that reads it, and the rest of the pipeline sees a subquery in FROM.
//!
//! ## Rules
//! - A view's query is bound as a statement of its own: the enclosing query's CTEs, outer
//!   rows, aggregates and clause are not its to see.
//! - Its columns must still be the stored ones (names come from the view, types must be
//!   equal); otherwise the view is refused with 0A000 naming it, never read wrongly.
//! - A view that reaches itself is refused (42P17), and so is CREATE OR REPLACE of a view
//!   whose new query reads the view.

use quire_engine::{Oid, SqlState};
use sqlparser::ast;

use super::query::{Item, ItemExpr};
use super::scope::rename;
use super::{ident_name, Binder, OutColumn, Scope};
use crate::catalog::view::{ViewBody, ViewInfo};
use crate::error::{Result, SqlError};
use crate::nodes::{Node, Plan};
use crate::parse::quote_ident;
use crate::types::SqlType;

/// The context of one query level that a view's query must not see, set aside while it is
/// bound.
struct Level {
    outer: Vec<Scope>,
    ctes: Vec<super::with::CteBinding>,
    agg: Option<super::query::AggCtx>,
    agg_probe: Option<bool>,
    in_aggregate: bool,
    win: Option<super::window::WinCtx>,
    in_window: bool,
    srf: Option<super::srf::SrfCtx>,
    clause: Option<&'static str>,
    lowest_outer_ref: usize,
    sublinks: usize,
    outer_joins: usize,
}

impl Binder<'_> {
    /// CREATE [OR REPLACE] VIEW name [(columns)] AS query.
    pub(super) fn create_view(&mut self, cv: &ast::CreateView) -> Result<Plan> {
        if cv.materialized {
            return Err(SqlError::unsupported("CREATE MATERIALIZED VIEW"));
        }
        if cv.temporary {
            return Err(SqlError::unsupported("CREATE TEMPORARY VIEW"));
        }
        if !matches!(cv.options, ast::CreateTableOptions::None) {
            return Err(SqlError::unsupported("CREATE VIEW ... WITH (options)"));
        }
        if cv.if_not_exists || cv.or_alter || cv.to.is_some() || cv.params.is_some() {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                format!("syntax error in \"{}\"", cv.name),
            ));
        }
        let name = super::table_name(&cv.name)?;
        crate::catalog::check_not_reserved(&name)?;
        let params_before = self.params.len();
        self.relations_read = Some(Vec::new());
        self.star_target = star_list(&cv.query).map(|p| p.as_ptr() as usize);
        let r = self.query(&cv.query);
        self.star_target = None;
        let stars = self.star_items.take();
        let reads = self.relations_read.take().unwrap_or_default();
        let (_, out) = r?;
        if self.params.len() > params_before {
            return Err(SqlError::new(
                SqlState::UNDEFINED_PARAMETER,
                format!("there is no parameter ${}", params_before + 1),
            ));
        }
        let names: Vec<String> = cv.columns.iter().map(|c| ident_name(&c.name)).collect();
        let columns = view_columns(&names, &out)?;
        let mut depends: Vec<Oid> = Vec::new();
        for oid in reads {
            if depends.contains(&oid) {
                continue;
            }
            // PostgreSQL makes such a view temporary itself; quire has no temporary views.
            if let Some(quire_engine::Entry::Table(t)) = self.tx.relation(oid)? {
                if crate::catalog::display_name(&t.name).len() != t.name.len() {
                    return Err(SqlError::unsupported(
                        "a view of a temporary table (a temporary view)",
                    ));
                }
            }
            depends.push(oid);
        }
        let renamed = columns.iter().zip(&out).any(|((n, _), o)| *n != o.name);
        let text = match stars {
            // `*` stands for the columns there are now, as PostgreSQL expands it when the
            // view is made: a column added to a table later is not the view's.
            Some(items) => {
                let mut q = (*cv.query).clone();
                if let ast::SetExpr::Select(sel) = &mut *q.body {
                    sel.projection = items;
                }
                q.to_string()
            }
            None => cv.query.to_string(),
        };
        let query = if renamed {
            // The names the view gives its columns become the query's own, so that its
            // text alone (pg_get_viewdef, a dump) makes the same view.
            let names: Vec<String> = columns.iter().map(|(n, _)| quote_ident(n)).collect();
            format!(
                "SELECT * FROM ({text}) AS {}({})",
                quote_ident(&name),
                names.join(", ")
            )
        } else {
            text
        };
        Ok(Plan::CreateView {
            name,
            or_replace: cv.or_replace,
            body: ViewBody {
                query,
                columns,
                depends,
            },
        })
    }

    /// A FROM item naming view `oid` (`name`): its query, bound in the place of the name.
    pub(super) fn view_reference(
        &mut self,
        oid: Oid,
        name: &str,
        qualifier: &str,
        alias: Option<&ast::TableAlias>,
    ) -> Result<(Node, Scope)> {
        self.note_read(oid);
        if self.views_open.contains(&oid) {
            return Err(recursion(name));
        }
        // Read under its lock: what the name found may have been replaced meanwhile.
        let view = crate::catalog::view::read(self.tx, oid)?;
        let query = parse_view_query(&view)?;
        let level = self.set_level_aside();
        self.views_open.push(view.oid);
        let r = self.query(&query);
        self.views_open.pop();
        self.restore_level(level);
        let (node, out) = r?;
        let out = stored_columns(&view, &out)?;
        let scope = Scope::of_out(&out, Some(qualifier));
        Ok((node, rename(scope, alias)?))
    }

    /// Notes that the statement reads relation `oid` (a view being created depends on it);
    /// what a view's own query reads is that view's, not the statement's.
    pub(super) fn note_read(&mut self, oid: Oid) {
        if let (Some(reads), true) = (&mut self.relations_read, self.views_open.is_empty()) {
            reads.push(oid);
        }
    }

    fn set_level_aside(&mut self) -> Level {
        Level {
            outer: std::mem::take(&mut self.outer),
            ctes: std::mem::take(&mut self.ctes),
            agg: self.agg.take(),
            agg_probe: self.agg_probe.take(),
            in_aggregate: std::mem::take(&mut self.in_aggregate),
            win: self.win.take(),
            in_window: std::mem::take(&mut self.in_window),
            srf: self.srf.take(),
            clause: self.clause.take(),
            lowest_outer_ref: std::mem::replace(&mut self.lowest_outer_ref, usize::MAX),
            sublinks: std::mem::take(&mut self.sublinks),
            outer_joins: std::mem::take(&mut self.outer_joins),
        }
    }

    fn restore_level(&mut self, l: Level) {
        self.outer = l.outer;
        self.ctes = l.ctes;
        self.agg = l.agg;
        self.agg_probe = l.agg_probe;
        self.in_aggregate = l.in_aggregate;
        self.win = l.win;
        self.in_window = l.in_window;
        self.srf = l.srf;
        self.clause = l.clause;
        self.lowest_outer_ref = l.lowest_outer_ref;
        self.sublinks = l.sublinks;
        self.outer_joins = l.outer_joins;
    }
}

/// Whether view `view` still binds (after its tables changed), with the error if not.
pub(crate) fn check_view(tx: &quire_engine::Transaction, view: &ViewInfo) -> Result<()> {
    let mut b = Binder::new(tx, &[]);
    b.view_reference(view.oid, &view.name, &view.name, None)
        .map(|_| ())
}

/// The select list of `q`'s SELECT when `q` is one SELECT whose list has a `*`.
fn star_list(q: &ast::Query) -> Option<&[ast::SelectItem]> {
    let ast::SetExpr::Select(sel) = &*q.body else {
        return None;
    };
    sel.projection
        .iter()
        .any(|i| {
            matches!(
                i,
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..)
            )
        })
        .then_some(sel.projection.as_slice())
}

/// A select list with every `*` spelled out as the columns it stands for (qualified as
/// the FROM clause names them), each other item named as it is now.
pub(super) fn spelled_out(items: &[Item<'_>], scope: &Scope) -> Vec<ast::SelectItem> {
    items
        .iter()
        .map(|item| match &item.expr {
            ItemExpr::Column(i) => {
                let c = &scope.cols[*i];
                ast::SelectItem::UnnamedExpr(match &c.qualifier {
                    Some(q) => ast::Expr::CompoundIdentifier(vec![ident(q), ident(&c.name)]),
                    None => ast::Expr::Identifier(ident(&c.name)),
                })
            }
            ItemExpr::Ast(e @ ast::Expr::Identifier(i)) if ident_name(i) == item.name => {
                ast::SelectItem::UnnamedExpr((*e).clone())
            }
            ItemExpr::Ast(e @ ast::Expr::CompoundIdentifier(parts))
                if parts.last().is_some_and(|i| ident_name(i) == item.name) =>
            {
                ast::SelectItem::UnnamedExpr((*e).clone())
            }
            ItemExpr::Ast(e) => ast::SelectItem::ExprWithAlias {
                expr: (*e).clone(),
                alias: ident(&item.name),
            },
        })
        .collect()
}

/// An identifier that reads back as `name`: quoted only when it must be.
fn ident(name: &str) -> ast::Ident {
    if quote_ident(name) == name {
        ast::Ident::new(name)
    } else {
        ast::Ident::with_quote('"', name)
    }
}

/// DROP VIEW [IF EXISTS] names [CASCADE].
pub(super) fn drop_view(names: &[ast::ObjectName], if_exists: bool, cascade: bool) -> Result<Plan> {
    Ok(Plan::DropView {
        names: names.iter().map(super::table_name).collect::<Result<_>>()?,
        if_exists,
        cascade,
    })
}

/// 42P17, PostgreSQL's words for a view that reads itself.
pub(crate) fn recursion(view: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_OBJECT_DEFINITION,
        format!("infinite recursion detected in rules for relation \"{view}\""),
    )
}

/// The view's columns: the names given (fewer than the query's columns is allowed), the
/// query's names for the rest, the query's types (an unknown-typed literal as text).
fn view_columns(names: &[String], out: &[OutColumn]) -> Result<Vec<(String, SqlType)>> {
    if names.len() > out.len() {
        return Err(SqlError::new(
            SqlState::SYNTAX_ERROR,
            "CREATE VIEW specifies more column names than columns",
        ));
    }
    let mut columns: Vec<(String, SqlType)> = Vec::with_capacity(out.len());
    for (i, o) in out.iter().enumerate() {
        let name = names.get(i).unwrap_or(&o.name).clone();
        if columns.iter().any(|(n, _)| *n == name) {
            return Err(SqlError::new(
                SqlState::DUPLICATE_COLUMN,
                format!("column \"{name}\" specified more than once"),
            ));
        }
        let ty = if o.ty == SqlType::Unknown {
            SqlType::Text
        } else {
            o.ty
        };
        columns.push((name, ty));
    }
    Ok(columns)
}

/// The stored query of `view`, parsed.
fn parse_view_query(view: &ViewInfo) -> Result<ast::Query> {
    let damaged = || {
        SqlError::new(
            SqlState::DATA_CORRUPTED,
            format!("the query of view \"{}\" does not parse", view.name),
        )
    };
    let mut stmts = crate::parse::parse(&view.body.query).map_err(|_| damaged())?;
    match (stmts.pop(), stmts.is_empty()) {
        (Some(crate::parse::Statement::Sql(stmt)), true) => match *stmt {
            ast::Statement::Query(q) => Ok(*q),
            _ => Err(damaged()),
        },
        _ => Err(damaged()),
    }
}

/// The view's stored columns, checked against what its query gives now.
fn stored_columns(view: &ViewInfo, out: &[OutColumn]) -> Result<Vec<OutColumn>> {
    let same = out.len() == view.body.columns.len()
        && out
            .iter()
            .zip(&view.body.columns)
            .all(|(o, (_, ty))| o.ty == *ty || (o.ty == SqlType::Unknown && *ty == SqlType::Text));
    if !same {
        return Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!(
                "view \"{}\" no longer matches the tables it reads (a column was added, \
                 renamed or changed type); recreate it with CREATE OR REPLACE VIEW",
                view.name
            ),
        ));
    }
    Ok(view
        .body
        .columns
        .iter()
        .map(|(name, ty)| OutColumn {
            name: name.clone(),
            ty: *ty,
        })
        .collect())
}
