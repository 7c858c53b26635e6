//! Binding: a parsed statement checked against the catalog and turned into a [`Plan`], with
//! every expression typed and every parameter's type inferred from its context (a column it
//! is compared with or assigned to, a cast), as PostgreSQL infers them for a Parse message
//! without types. What this slice does not do is refused here with 0A000 naming it.

use quire_engine::{IsolationLevel, Transaction, Value};
use sqlparser::ast::{
    self, AssignmentTarget, BinaryOperator, ColumnOption, Expr as AstExpr, FromTable, FunctionArg,
    FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, LimitClause, ObjectName,
    ObjectNamePart, ObjectType, OrderByKind, OrderBySort, SelectItem, SetExpr, Statement,
    TableConstraint, TableFactor, TableObject, TransactionIsolationLevel, TransactionMode,
    UnaryOperator, Value as AstValue,
};

use crate::catalog::{self, ColumnInfo, TableInfo};
use crate::error::{Result, SqlError};
use crate::types::{self, SqlType};

/// Most parameters a statement may have (PostgreSQL's limit, the protocol's 16-bit count).
pub(crate) const MAX_PARAMS: usize = 65_535;

/// A typed expression.
#[derive(Clone, Debug)]
pub(crate) enum Expr {
    Const(Value),
    /// `$n`, zero-based.
    Param(usize),
    Column(usize),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Cast(Box<Expr>, SqlType, SqlType),
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// One conjunct of a WHERE clause.
#[derive(Clone, Debug)]
pub(crate) enum Pred {
    Cmp(CmpOp, Expr, Expr),
    IsNull(Expr, bool),
}

/// Where a statement's rows come from.
#[derive(Clone, Debug)]
pub(crate) enum Access {
    /// A sequential scan.
    Seq,
    /// The primary key's index, for `pk = value` on every key column (values in key order).
    PrimaryKey(Vec<Expr>),
}

#[derive(Clone, Debug)]
pub(crate) struct Filter {
    pub preds: Vec<Pred>,
    pub access: Access,
}

#[derive(Clone, Debug)]
pub(crate) enum Item {
    Expr(Expr),
    CountStar,
}

/// An output column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutColumn {
    pub name: String,
    pub ty: SqlType,
}

#[derive(Clone, Debug)]
pub(crate) enum Plan {
    Begin(IsolationLevel),
    Commit,
    Rollback,
    CreateTable {
        name: String,
        if_not_exists: bool,
        columns: Vec<ColumnInfo>,
        pkey: Option<Vec<usize>>,
    },
    DropTable {
        names: Vec<String>,
        if_exists: bool,
    },
    Truncate(Vec<TableInfo>),
    Insert {
        table: TableInfo,
        /// Full rows, one expression per column (NULL where the list left it out).
        rows: Vec<Vec<Expr>>,
    },
    Select {
        table: Option<TableInfo>,
        items: Vec<Item>,
        out: Vec<OutColumn>,
        filter: Filter,
        order_by: Option<(usize, bool)>,
        limit: Option<Expr>,
    },
    Update {
        table: TableInfo,
        sets: Vec<(usize, Expr)>,
        filter: Filter,
    },
    Delete {
        table: TableInfo,
        filter: Filter,
    },
}

/// A bound statement: its plan, its parameters' types and its output columns.
pub(crate) struct Bound {
    pub plan: Plan,
    pub params: Vec<SqlType>,
    pub out: Vec<OutColumn>,
}

/// Binds `stmt`; `hints` are the parameter types the client gave (`Unknown` where it gave
/// none). `tx` is needed only by statements that name tables.
pub(crate) fn bind(stmt: &Statement, hints: &[SqlType], tx: Option<&Transaction>) -> Result<Bound> {
    let mut b = Binder {
        params: hints.to_vec(),
        table: None,
    };
    let plan = b.statement(stmt, tx)?;
    let out = match &plan {
        Plan::Select { out, .. } => out.clone(),
        _ => Vec::new(),
    };
    // A parameter no context typed is text, as an untyped literal would be.
    let params = b
        .params
        .into_iter()
        .map(|t| {
            if t == SqlType::Unknown {
                SqlType::Text
            } else {
                t
            }
        })
        .collect();
    Ok(Bound { plan, params, out })
}

/// Whether binding `stmt` needs a transaction (it names a table).
pub(crate) fn needs_catalog(stmt: &Statement) -> bool {
    !matches!(
        stmt,
        Statement::StartTransaction { .. } | Statement::Commit { .. } | Statement::Rollback { .. }
    ) && !matches!(stmt, Statement::Query(q) if matches!(&*q.body, SetExpr::Select(s) if s.from.is_empty()))
}

struct Binder {
    /// The type of each parameter seen so far (`Unknown` until a context types it).
    params: Vec<SqlType>,
    /// The table whose columns names refer to.
    table: Option<TableInfo>,
}

fn ident_name(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

/// A table name: `t` or `public.t`.
fn table_name(name: &ObjectName) -> Result<String> {
    let parts: Vec<&ObjectNamePart> = name.0.iter().collect();
    let idents: Vec<&Ident> = parts
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Ok(i),
            ObjectNamePart::Function(_) => Err(SqlError::unsupported("a function as a name")),
        })
        .collect::<Result<_>>()?;
    match idents.as_slice() {
        [t] => Ok(ident_name(t)),
        [s, t] if ident_name(s) == "public" => Ok(ident_name(t)),
        _ => Err(SqlError::new(
            "3F000",
            format!("schema of \"{name}\" does not exist (quire has only \"public\")"),
        )),
    }
}

fn need_tx(tx: Option<&Transaction>) -> Result<&Transaction> {
    tx.ok_or_else(|| SqlError::new("XX000", "binding needs a transaction"))
}

impl Binder {
    fn statement(&mut self, stmt: &Statement, tx: Option<&Transaction>) -> Result<Plan> {
        match stmt {
            Statement::StartTransaction {
                modes,
                statements,
                exception,
                ..
            } => {
                if !statements.is_empty() || exception.is_some() {
                    return Err(SqlError::unsupported("BEGIN ... END blocks"));
                }
                let mut isolation = IsolationLevel::ReadCommitted;
                for m in modes {
                    match m {
                        TransactionMode::IsolationLevel(
                            TransactionIsolationLevel::ReadCommitted,
                        ) => {
                            isolation = IsolationLevel::ReadCommitted;
                        }
                        TransactionMode::IsolationLevel(
                            TransactionIsolationLevel::RepeatableRead,
                        ) => {
                            isolation = IsolationLevel::RepeatableRead;
                        }
                        other => {
                            return Err(SqlError::unsupported(format!("transaction mode {other}")))
                        }
                    }
                }
                Ok(Plan::Begin(isolation))
            }
            Statement::Commit { chain: false, .. } => Ok(Plan::Commit),
            Statement::Rollback {
                chain: false,
                savepoint: None,
            } => Ok(Plan::Rollback),
            Statement::Rollback {
                savepoint: Some(_), ..
            } => Err(SqlError::unsupported("ROLLBACK TO SAVEPOINT")),
            Statement::CreateTable(ct) => Self::create_table(ct),
            Statement::Drop {
                object_type: ObjectType::Table,
                if_exists,
                names,
                cascade: false,
                ..
            } => {
                let names: Vec<String> = names.iter().map(table_name).collect::<Result<_>>()?;
                for n in &names {
                    catalog::check_not_reserved(n)?;
                }
                Ok(Plan::DropTable {
                    names,
                    if_exists: *if_exists,
                })
            }
            Statement::Truncate(t) => {
                let tx = need_tx(tx)?;
                if t.partitions.is_some() || t.identity.is_some() || t.cascade.is_some() {
                    return Err(SqlError::unsupported("TRUNCATE options"));
                }
                let tables = t
                    .table_names
                    .iter()
                    .map(|n| catalog::lookup(tx, &table_name(&n.name)?))
                    .collect::<Result<_>>()?;
                Ok(Plan::Truncate(tables))
            }
            Statement::Insert(ins) => self.insert(ins, need_tx(tx)?),
            Statement::Query(q) => self.query(q, tx),
            Statement::Update(u) => self.update(u, need_tx(tx)?),
            Statement::Delete(d) => self.delete(d, need_tx(tx)?),
            other => Err(SqlError::unsupported(statement_kind(other))),
        }
    }

    fn create_table(ct: &ast::CreateTable) -> Result<Plan> {
        let name = table_name(&ct.name)?;
        catalog::check_not_reserved(&name)?;
        if ct.query.is_some() || ct.like.is_some() || ct.temporary || ct.external {
            return Err(SqlError::unsupported(
                "CREATE TABLE AS, LIKE, TEMPORARY or EXTERNAL",
            ));
        }
        if ct.columns.is_empty() {
            return Err(SqlError::unsupported("a table without columns"));
        }
        let mut columns = Vec::new();
        let mut pkey: Option<Vec<usize>> = None;
        for (i, c) in ct.columns.iter().enumerate() {
            let cname = ident_name(&c.name);
            if columns.iter().any(|x: &ColumnInfo| x.name == cname) {
                return Err(SqlError::new(
                    "42701",
                    format!("column \"{cname}\" specified more than once"),
                ));
            }
            let mut col = ColumnInfo {
                name: cname,
                ty: SqlType::from_ast(&c.data_type)?,
                not_null: false,
            };
            for opt in &c.options {
                match &opt.option {
                    ColumnOption::NotNull => col.not_null = true,
                    ColumnOption::Null => col.not_null = false,
                    ColumnOption::PrimaryKey(_) => {
                        if pkey.is_some() {
                            return Err(multiple_pkeys(&name));
                        }
                        col.not_null = true;
                        pkey = Some(vec![i]);
                    }
                    other => return Err(SqlError::unsupported(format!("column option {other}"))),
                }
            }
            columns.push(col);
        }
        for c in &ct.constraints {
            match c {
                TableConstraint::PrimaryKey(pk) => {
                    if pkey.is_some() {
                        return Err(multiple_pkeys(&name));
                    }
                    let mut key = Vec::new();
                    for ic in &pk.columns {
                        let AstExpr::Identifier(id) = &ic.column.expr else {
                            return Err(SqlError::unsupported("an expression in a primary key"));
                        };
                        let n = ident_name(id);
                        let pos = columns.iter().position(|c| c.name == n).ok_or_else(|| {
                            SqlError::new(
                                "42703",
                                format!("column \"{n}\" named in key does not exist"),
                            )
                        })?;
                        columns[pos].not_null = true;
                        key.push(pos);
                    }
                    pkey = Some(key);
                }
                other => return Err(SqlError::unsupported(format!("table constraint {other}"))),
            }
        }
        Ok(Plan::CreateTable {
            name,
            if_not_exists: ct.if_not_exists,
            columns,
            pkey,
        })
    }

    fn insert(&mut self, ins: &ast::Insert, tx: &Transaction) -> Result<Plan> {
        let TableObject::TableName(name) = &ins.table else {
            return Err(SqlError::unsupported("INSERT INTO a table function"));
        };
        if ins.on.is_some() || ins.returning.is_some() || !ins.assignments.is_empty() {
            return Err(SqlError::unsupported(
                "INSERT with ON CONFLICT, RETURNING or SET",
            ));
        }
        let table = catalog::lookup(tx, &table_name(name)?)?;
        let targets: Vec<usize> = if ins.columns.is_empty() {
            (0..table.columns.len()).collect()
        } else {
            ins.columns
                .iter()
                .map(|c| {
                    let n = match c.0.as_slice() {
                        [ObjectNamePart::Identifier(i)] => ident_name(i),
                        _ => {
                            return Err(SqlError::unsupported("a qualified column name in INSERT"))
                        }
                    };
                    table.column(&n)
                })
                .collect::<Result<_>>()?
        };
        let Some(source) = &ins.source else {
            return Err(SqlError::unsupported("INSERT without VALUES"));
        };
        let SetExpr::Values(values) = &*source.body else {
            return Err(SqlError::unsupported("INSERT ... SELECT"));
        };
        let mut rows = Vec::new();
        for value_row in &values.rows {
            let value_row = &value_row.content;
            if value_row.len() > targets.len() {
                return Err(SqlError::syntax(
                    "INSERT has more expressions than target columns",
                ));
            }
            if value_row.len() < targets.len() {
                return Err(SqlError::syntax(
                    "INSERT has more target columns than expressions",
                ));
            }
            let mut row = vec![Expr::Const(Value::Null); table.columns.len()];
            for (&pos, e) in targets.iter().zip(value_row) {
                if matches!(e, AstExpr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
                {
                    continue;
                }
                let col = &table.columns[pos];
                let (expr, ty) = self.expr(e, Some(col.ty))?;
                row[pos] = assign_expr(expr, ty, col)?;
            }
            rows.push(row);
        }
        Ok(Plan::Insert { table, rows })
    }

    fn query(&mut self, q: &ast::Query, tx: Option<&Transaction>) -> Result<Plan> {
        if q.with.is_some() || q.fetch.is_some() || !q.locks.is_empty() {
            return Err(SqlError::unsupported("WITH, FETCH or FOR UPDATE"));
        }
        let SetExpr::Select(sel) = &*q.body else {
            return Err(SqlError::unsupported(
                "a query other than SELECT (UNION, VALUES, ...)",
            ));
        };
        if sel.distinct.is_some()
            || sel.having.is_some()
            || !matches!(&sel.group_by, GroupByExpr::Expressions(g, _) if g.is_empty())
        {
            return Err(SqlError::unsupported("DISTINCT, GROUP BY or HAVING"));
        }
        let table = match sel.from.as_slice() {
            [] => None,
            [twj] if twj.joins.is_empty() => {
                let TableFactor::Table {
                    name, args: None, ..
                } = &twj.relation
                else {
                    return Err(SqlError::unsupported("this FROM item"));
                };
                Some(catalog::lookup(need_tx(tx)?, &table_name(name)?)?)
            }
            _ => return Err(SqlError::unsupported("joins")),
        };
        self.table.clone_from(&table);
        let mut items = Vec::new();
        let mut out = Vec::new();
        for item in &sel.projection {
            match item {
                SelectItem::Wildcard(_) => {
                    let t = self.table.as_ref().ok_or_else(|| {
                        SqlError::syntax("SELECT * with no tables specified is not valid")
                    })?;
                    for (i, c) in t.columns.iter().enumerate() {
                        items.push(Item::Expr(Expr::Column(i)));
                        out.push(OutColumn {
                            name: c.name.clone(),
                            ty: c.ty,
                        });
                    }
                }
                SelectItem::UnnamedExpr(e) => {
                    let (item, ty) = self.item(e)?;
                    out.push(OutColumn {
                        name: output_name(e),
                        ty,
                    });
                    items.push(item);
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    let (item, ty) = self.item(expr)?;
                    out.push(OutColumn {
                        name: ident_name(alias),
                        ty,
                    });
                    items.push(item);
                }
                SelectItem::QualifiedWildcard(..) => return Err(SqlError::unsupported("table.*")),
                SelectItem::ExprWithAliases { .. } => {
                    return Err(SqlError::unsupported("several aliases"))
                }
            }
        }
        let counts = items
            .iter()
            .filter(|i| matches!(i, Item::CountStar))
            .count();
        if counts > 0
            && items
                .iter()
                .any(|i| matches!(i, Item::Expr(e) if e.has_column()))
        {
            return Err(SqlError::new(
                "42803",
                "a column next to count(*) must appear in GROUP BY (GROUP BY is not supported yet)",
            ));
        }
        let filter = self.filter(sel.selection.as_ref())?;
        let order_by = match &q.order_by {
            None => None,
            Some(ob) => {
                let OrderByKind::Expressions(exprs) = &ob.kind else {
                    return Err(SqlError::unsupported("ORDER BY ALL"));
                };
                match exprs.as_slice() {
                    [] => None,
                    [e] => {
                        let desc = match e.options.sort {
                            None | Some(OrderBySort::Asc) => false,
                            Some(OrderBySort::Desc) => true,
                            Some(_) => return Err(SqlError::unsupported("ORDER BY ... USING")),
                        };
                        if e.options.nulls_first.is_some() || e.with_fill.is_some() {
                            return Err(SqlError::unsupported("NULLS FIRST/LAST"));
                        }
                        let (Expr::Column(c), _) = self.expr(&e.expr, None)? else {
                            return Err(SqlError::unsupported(
                                "ORDER BY an expression other than a column",
                            ));
                        };
                        if counts > 0 {
                            return Err(SqlError::new("42803", "ORDER BY a column next to count(*) needs GROUP BY (not supported yet)"));
                        }
                        Some((c, desc))
                    }
                    _ => return Err(SqlError::unsupported("ORDER BY several columns")),
                }
            }
        };
        let limit = match &q.limit_clause {
            None => None,
            Some(LimitClause::LimitOffset {
                limit: None,
                offset: None,
                limit_by,
            }) if limit_by.is_empty() => None,
            Some(LimitClause::LimitOffset {
                limit: Some(e),
                offset: None,
                limit_by,
            }) if limit_by.is_empty() => {
                let (e, ty) = self.expr(e, Some(SqlType::Int8))?;
                if e.has_column() || !(ty.is_int() || ty == SqlType::Unknown) {
                    return Err(SqlError::type_mismatch(
                        "argument of LIMIT must be of type bigint",
                    ));
                }
                Some(e)
            }
            Some(_) => return Err(SqlError::unsupported("OFFSET")),
        };
        Ok(Plan::Select {
            table,
            items,
            out,
            filter,
            order_by,
            limit,
        })
    }

    fn item(&mut self, e: &AstExpr) -> Result<(Item, SqlType)> {
        if let AstExpr::Function(f) = e {
            let name = f.name.to_string().to_lowercase();
            if name == "count" {
                if let FunctionArguments::List(list) = &f.args {
                    if matches!(
                        list.args.as_slice(),
                        [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)]
                    ) && list.duplicate_treatment.is_none()
                        && list.clauses.is_empty()
                        && f.filter.is_none()
                        && f.over.is_none()
                    {
                        return Ok((Item::CountStar, SqlType::Int8));
                    }
                }
            }
            return Err(SqlError::unsupported(format!("function {name}")));
        }
        let (e, ty) = self.expr(e, None)?;
        Ok((
            Item::Expr(e),
            if ty == SqlType::Unknown {
                SqlType::Text
            } else {
                ty
            },
        ))
    }

    fn update(&mut self, u: &ast::Update, tx: &Transaction) -> Result<Plan> {
        if u.from.is_some()
            || u.returning.is_some()
            || !u.table.joins.is_empty()
            || u.limit.is_some()
            || !u.order_by.is_empty()
        {
            return Err(SqlError::unsupported(
                "UPDATE with FROM, RETURNING, joins, ORDER BY or LIMIT",
            ));
        }
        let TableFactor::Table { name, .. } = &u.table.relation else {
            return Err(SqlError::unsupported("this UPDATE target"));
        };
        let table = catalog::lookup(tx, &table_name(name)?)?;
        self.table = Some(table.clone());
        let mut sets = Vec::new();
        for a in &u.assignments {
            let AssignmentTarget::ColumnName(col) = &a.target else {
                return Err(SqlError::unsupported("assigning a tuple of columns"));
            };
            let n = match col.0.as_slice() {
                [ObjectNamePart::Identifier(i)] => ident_name(i),
                _ => return Err(SqlError::unsupported("a qualified column name in SET")),
            };
            let pos = table.column(&n)?;
            if sets.iter().any(|(p, _)| *p == pos) {
                return Err(SqlError::new(
                    "42601",
                    format!("multiple assignments to same column \"{n}\""),
                ));
            }
            let col = &table.columns[pos];
            let (expr, ty) = self.expr(&a.value, Some(col.ty))?;
            sets.push((pos, assign_expr(expr, ty, col)?));
        }
        let filter = self.filter(u.selection.as_ref())?;
        Ok(Plan::Update {
            table,
            sets,
            filter,
        })
    }

    fn delete(&mut self, d: &ast::Delete, tx: &Transaction) -> Result<Plan> {
        if d.using.is_some()
            || d.returning.is_some()
            || !d.tables.is_empty()
            || d.limit.is_some()
            || !d.order_by.is_empty()
        {
            return Err(SqlError::unsupported(
                "DELETE with USING, RETURNING, ORDER BY or LIMIT",
            ));
        }
        let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &d.from;
        let [twj] = from.as_slice() else {
            return Err(SqlError::unsupported("DELETE from several tables"));
        };
        let TableFactor::Table { name, .. } = &twj.relation else {
            return Err(SqlError::unsupported("this DELETE target"));
        };
        if !twj.joins.is_empty() {
            return Err(SqlError::unsupported("joins in DELETE"));
        }
        let table = catalog::lookup(tx, &table_name(name)?)?;
        self.table = Some(table.clone());
        let filter = self.filter(d.selection.as_ref())?;
        Ok(Plan::Delete { table, filter })
    }

    /// A WHERE clause: a conjunction of comparisons and IS [NOT] NULL tests.
    fn filter(&mut self, selection: Option<&AstExpr>) -> Result<Filter> {
        let mut preds = Vec::new();
        if let Some(e) = selection {
            self.conjuncts(e, &mut preds)?;
        }
        let access = match &self.table {
            Some(TableInfo {
                pkey: Some((_, key)),
                ..
            }) => {
                let values: Option<Vec<Expr>> = key
                    .iter()
                    .map(|&k| {
                        preds.iter().find_map(|p| match p {
                            Pred::Cmp(CmpOp::Eq, Expr::Column(c), v)
                            | Pred::Cmp(CmpOp::Eq, v, Expr::Column(c))
                                if *c == k && !v.has_column() =>
                            {
                                Some(v.clone())
                            }
                            _ => None,
                        })
                    })
                    .collect();
                values.map_or(Access::Seq, Access::PrimaryKey)
            }
            _ => Access::Seq,
        };
        Ok(Filter { preds, access })
    }

    fn conjuncts(&mut self, e: &AstExpr, out: &mut Vec<Pred>) -> Result<()> {
        match e {
            AstExpr::Nested(inner) => self.conjuncts(inner, out),
            AstExpr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.conjuncts(left, out)?;
                self.conjuncts(right, out)
            }
            AstExpr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Eq => CmpOp::Eq,
                    BinaryOperator::NotEq => CmpOp::Ne,
                    BinaryOperator::Lt => CmpOp::Lt,
                    BinaryOperator::LtEq => CmpOp::Le,
                    BinaryOperator::Gt => CmpOp::Gt,
                    BinaryOperator::GtEq => CmpOp::Ge,
                    other => {
                        return Err(SqlError::unsupported(format!("operator {other} in WHERE")))
                    }
                };
                // Type the side that has a type of its own first; the other (a parameter
                // or a string literal) takes it.
                let (l, r) = if is_untyped(left) && !is_untyped(right) {
                    let (r, rt) = self.expr(right, None)?;
                    let (l, lt) = self.expr(left, Some(rt))?;
                    ((l, lt), (r, rt))
                } else {
                    let (l, lt) = self.expr(left, None)?;
                    let (r, rt) = self.expr(right, Some(lt))?;
                    ((l, lt), (r, rt))
                };
                let (l, r) = comparable(l, r)?;
                out.push(Pred::Cmp(op, l, r));
                Ok(())
            }
            AstExpr::IsNull(inner) => {
                let (e, _) = self.expr(inner, None)?;
                out.push(Pred::IsNull(e, false));
                Ok(())
            }
            AstExpr::IsNotNull(inner) => {
                let (e, _) = self.expr(inner, None)?;
                out.push(Pred::IsNull(e, true));
                Ok(())
            }
            other => Err(SqlError::unsupported(format!(
                "WHERE condition {other} (only AND of comparisons and IS [NOT] NULL)"
            ))),
        }
    }

    /// Binds an expression; `expected` types parameters and string literals.
    fn expr(&mut self, e: &AstExpr, expected: Option<SqlType>) -> Result<(Expr, SqlType)> {
        match e {
            AstExpr::Nested(inner) => self.expr(inner, expected),
            AstExpr::Identifier(id) => self.column(&ident_name(id)),
            AstExpr::CompoundIdentifier(ids) => match ids.as_slice() {
                [t, c]
                    if self
                        .table
                        .as_ref()
                        .is_some_and(|x| x.def.name == ident_name(t)) =>
                {
                    self.column(&ident_name(c))
                }
                _ => Err(SqlError::new(
                    "42P01",
                    format!("missing FROM-clause entry for \"{e}\""),
                )),
            },
            AstExpr::Value(v) => match &v.value {
                AstValue::Placeholder(p) => {
                    let n = p
                        .strip_prefix('$')
                        .and_then(|n| n.parse::<usize>().ok())
                        .filter(|n| (1..=MAX_PARAMS).contains(n))
                        .ok_or_else(|| {
                            SqlError::new("42P02", format!("there is no parameter {p}"))
                        })?;
                    Ok(self.param(n - 1, expected))
                }
                other => literal(other, expected),
            },
            AstExpr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => {
                if let AstExpr::Value(v) = &**expr {
                    if let AstValue::Number(n, _) = &v.value {
                        return number(&format!("-{n}"));
                    }
                }
                let (inner, ty) = self.expr(expr, expected)?;
                if !(ty.is_int() || ty.is_float()) {
                    return Err(SqlError::new(
                        "42883",
                        format!("operator does not exist: - {}", ty.name()),
                    ));
                }
                Ok((Expr::Neg(Box::new(inner)), ty))
            }
            AstExpr::UnaryOp {
                op: UnaryOperator::Plus,
                expr,
            } => self.expr(expr, expected),
            AstExpr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Plus => ArithOp::Add,
                    BinaryOperator::Minus => ArithOp::Sub,
                    BinaryOperator::Multiply => ArithOp::Mul,
                    BinaryOperator::Divide => ArithOp::Div,
                    BinaryOperator::Modulo => ArithOp::Mod,
                    other => return Err(SqlError::unsupported(format!("operator {other} here"))),
                };
                let (l, lt) = self.expr(left, None)?;
                let (r, rt) = self.expr(right, Some(lt))?;
                let lt = if lt == SqlType::Unknown {
                    self.retype(&l, rt)
                } else {
                    lt
                };
                let ty = arith_type(lt, rt)?;
                Ok((Expr::Arith(op, Box::new(l), Box::new(r)), ty))
            }
            AstExpr::Cast {
                kind: ast::CastKind::Cast | ast::CastKind::DoubleColon,
                expr,
                data_type,
                format: None,
            } => {
                let to = SqlType::from_ast(data_type)?;
                let (inner, from) = self.expr(expr, Some(to))?;
                if from == to {
                    return Ok((inner, to));
                }
                Ok((Expr::Cast(Box::new(inner), from, to), to))
            }
            other => Err(SqlError::unsupported(format!("expression {other}"))),
        }
    }

    fn column(&self, name: &str) -> Result<(Expr, SqlType)> {
        let t = self
            .table
            .as_ref()
            .ok_or_else(|| SqlError::new("42703", format!("column \"{name}\" does not exist")))?;
        let i = t.column(name)?;
        Ok((Expr::Column(i), t.columns[i].ty))
    }

    /// Gives an untyped parameter the type `ty` now that the other operand has one.
    fn retype(&mut self, e: &Expr, ty: SqlType) -> SqlType {
        if let Expr::Param(n) = e {
            if self.params[*n] == SqlType::Unknown {
                self.params[*n] = ty;
            }
            return self.params[*n];
        }
        SqlType::Unknown
    }
}

impl Binder {
    fn param(&mut self, n: usize, expected: Option<SqlType>) -> (Expr, SqlType) {
        if self.params.len() <= n {
            self.params.resize(n + 1, SqlType::Unknown);
        }
        if self.params[n] == SqlType::Unknown {
            if let Some(t) = expected {
                self.params[n] = t;
            }
        }
        (Expr::Param(n), self.params[n])
    }
}

/// A literal other than a placeholder (those go through the binder, which types them).
fn literal(v: &AstValue, expected: Option<SqlType>) -> Result<(Expr, SqlType)> {
    match v {
        AstValue::Number(n, _) => number(n),
        AstValue::SingleQuotedString(s) => match expected {
            Some(t) if t != SqlType::Unknown => Ok((Expr::Const(types::parse_text(t, s)?), t)),
            _ => Ok((Expr::Const(Value::Text(s.clone())), SqlType::Unknown)),
        },
        AstValue::Boolean(b) => Ok((Expr::Const(Value::Bool(*b)), SqlType::Bool)),
        AstValue::Null => Ok((
            Expr::Const(Value::Null),
            expected.unwrap_or(SqlType::Unknown),
        )),
        AstValue::Placeholder(p) => {
            Err(SqlError::new("42P02", format!("there is no parameter {p}")))
        }
        other => Err(SqlError::unsupported(format!("literal {other}"))),
    }
}

/// A numeric literal: integer if it fits (int4, else int8), else double precision.
fn number(n: &str) -> Result<(Expr, SqlType)> {
    if let Ok(i) = n.parse::<i64>() {
        let ty = if i32::try_from(i).is_ok() {
            SqlType::Int4
        } else {
            SqlType::Int8
        };
        return Ok((Expr::Const(Value::Int(i)), ty));
    }
    n.parse::<f64>()
        .map(|f| (Expr::Const(Value::Float(f)), SqlType::Float8))
        .map_err(|_| SqlError::syntax(format!("invalid number \"{n}\"")))
}

fn is_untyped(e: &AstExpr) -> bool {
    match e {
        AstExpr::Nested(inner) => is_untyped(inner),
        AstExpr::Value(v) => matches!(
            v.value,
            AstValue::Placeholder(_) | AstValue::SingleQuotedString(_) | AstValue::Null
        ),
        _ => false,
    }
}

fn arith_type(l: SqlType, r: SqlType) -> Result<SqlType> {
    let rank = |t: SqlType| match t {
        SqlType::Int2 => Some(0),
        SqlType::Int4 => Some(1),
        SqlType::Int8 => Some(2),
        SqlType::Float4 | SqlType::Float8 => Some(3),
        _ => None,
    };
    match (rank(l), rank(r)) {
        (Some(a), Some(b)) => Ok(match a.max(b) {
            // int2 arithmetic is int4 in PostgreSQL only through promotion; keep the wider.
            0 => SqlType::Int2,
            1 => SqlType::Int4,
            2 => SqlType::Int8,
            _ => SqlType::Float8,
        }),
        _ => Err(SqlError::new(
            "42883",
            format!("operator does not exist: {} + {}", l.name(), r.name()),
        )),
    }
}

/// Makes both sides of a comparison of one type family (or refuses: 42883).
fn comparable((l, lt): (Expr, SqlType), (r, rt): (Expr, SqlType)) -> Result<(Expr, Expr)> {
    let numeric = |t: SqlType| t.is_int() || t.is_float();
    let ok = lt == SqlType::Unknown
        || rt == SqlType::Unknown
        || (numeric(lt) && numeric(rt))
        || (lt.is_text() && rt.is_text())
        || lt.engine_type() == rt.engine_type();
    if !ok {
        return Err(SqlError::new(
            "42883",
            format!("operator does not exist: {} = {}", lt.name(), rt.name()),
        ));
    }
    Ok((l, r))
}

/// The expression of a value assigned to `col`: a cast where the types differ.
fn assign_expr(e: Expr, ty: SqlType, col: &ColumnInfo) -> Result<Expr> {
    if ty == col.ty {
        return Ok(e);
    }
    // Refuse at bind time what can never be assigned (bool into an integer, ...).
    let family_ok = ty == SqlType::Unknown
        || (ty.is_int() || ty.is_float()) && (col.ty.is_int() || col.ty.is_float())
        || ty.is_text() && col.ty.is_text()
        || ty.engine_type() == col.ty.engine_type();
    if !family_ok {
        return Err(SqlError::type_mismatch(format!(
            "column \"{}\" is of type {} but expression is of type {}",
            col.name,
            col.ty.name(),
            ty.name()
        )));
    }
    Ok(Expr::Cast(Box::new(e), ty, col.ty))
}

fn output_name(e: &AstExpr) -> String {
    match e {
        AstExpr::Identifier(i) => ident_name(i),
        AstExpr::CompoundIdentifier(ids) => {
            ids.last().map_or_else(|| "?column?".into(), ident_name)
        }
        AstExpr::Cast {
            data_type, expr, ..
        } => match &**expr {
            AstExpr::Identifier(i) => ident_name(i),
            _ => cast_name(data_type),
        },
        AstExpr::Nested(inner) => output_name(inner),
        _ => "?column?".into(),
    }
}

/// PostgreSQL names a cast's output column after the type's internal name.
fn cast_name(t: &ast::DataType) -> String {
    match SqlType::from_ast(t) {
        Ok(SqlType::Int2) => "int2".into(),
        Ok(SqlType::Int4) => "int4".into(),
        Ok(SqlType::Int8) => "int8".into(),
        Ok(SqlType::Bool) => "bool".into(),
        Ok(SqlType::Float4) => "float4".into(),
        Ok(SqlType::Float8) => "float8".into(),
        Ok(SqlType::Varchar(_)) => "varchar".into(),
        _ => t.to_string().to_lowercase(),
    }
}

fn multiple_pkeys(table: &str) -> SqlError {
    SqlError::new(
        "42P16",
        format!("multiple primary keys for table \"{table}\" are not allowed"),
    )
}

/// A statement's kind for the 0A000 message ("CREATE INDEX", "COPY", ...).
fn statement_kind(stmt: &Statement) -> String {
    let text = stmt.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    let kind = match words.as_slice() {
        [a, b] if ["CREATE", "DROP", "ALTER"].contains(&a.to_uppercase().as_str()) => {
            format!("{a} {b}")
        }
        [a, ..] => (*a).to_string(),
        [] => "this statement".into(),
    };
    kind.to_uppercase()
}

impl Expr {
    pub fn has_column(&self) -> bool {
        match self {
            Expr::Column(_) => true,
            Expr::Const(_) | Expr::Param(_) => false,
            Expr::Arith(_, l, r) => l.has_column() || r.has_column(),
            Expr::Neg(e) | Expr::Cast(e, ..) => e.has_column(),
        }
    }
}

#[cfg(test)]
mod tests {
    use quire_engine::{Column, Oid, RelFileLocator, TableDef, Type};

    use super::*;

    /// `t (a integer PRIMARY KEY, b text)`, as the catalog would describe it.
    fn table() -> TableInfo {
        TableInfo {
            def: TableDef {
                oid: Oid(16_384),
                name: "t".into(),
                rel: RelFileLocator::new(5, 16_384),
                columns: vec![Column::new("a", Type::Int), Column::new("b", Type::Text)],
            },
            columns: vec![
                ColumnInfo {
                    name: "a".into(),
                    ty: SqlType::Int4,
                    not_null: true,
                },
                ColumnInfo {
                    name: "b".into(),
                    ty: SqlType::Text,
                    not_null: false,
                },
            ],
            pkey: Some((Oid(16_385), vec![0])),
        }
    }

    fn filter_of(sql_where: &str) -> (Filter, Vec<SqlType>) {
        let stmt = crate::parse(&format!("SELECT * FROM t WHERE {sql_where}"))
            .unwrap()
            .pop()
            .unwrap();
        let sqlparser::ast::Statement::Query(q) = stmt.ast() else {
            panic!("a query")
        };
        let SetExpr::Select(sel) = &*q.body else {
            panic!("a select")
        };
        let mut b = Binder {
            params: Vec::new(),
            table: Some(table()),
        };
        let f = b.filter(sel.selection.as_ref()).unwrap();
        (f, b.params)
    }

    #[test]
    fn primary_key_equality_uses_the_index_and_types_the_parameter() {
        let (f, params) = filter_of("a = $1 AND b IS NOT NULL");
        assert!(
            matches!(f.access, Access::PrimaryKey(ref v) if matches!(v.as_slice(), [Expr::Param(0)]))
        );
        assert_eq!(params, [SqlType::Int4]);
        let (f, _) = filter_of("5 = a");
        assert!(matches!(f.access, Access::PrimaryKey(_)));
    }

    #[test]
    fn other_predicates_scan_sequentially() {
        for w in ["a > 1", "b = 'x'", "a = a", "a <> 1", "a IS NULL"] {
            let (f, _) = filter_of(w);
            assert!(matches!(f.access, Access::Seq), "{w}");
        }
    }
}
