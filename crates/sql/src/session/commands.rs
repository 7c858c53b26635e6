//! The session commands that need no plan: BEGIN with its transaction modes, SET
//! TRANSACTION, SET SESSION CHARACTERISTICS, PREPARE / EXECUTE / DEALLOCATE, DISCARD; and
//! the read-only transaction's check of a plan (25006).
//!
//! ## Rules
//! - Prepared statements are the session's, named, as PostgreSQL's: PREPARE analyzes the
//!   statement at once (its errors are PREPARE's), EXECUTE binds it with its arguments
//!   evaluated and cast to the parameter types, and its plan is kept in the plan cache like
//!   a protocol-level statement's. A prepared statement outlives the transaction that made
//!   it, also one that rolls back, as in PostgreSQL.
//! - The protocol's named statements (Parse) are the server's; the session hears of each
//!   ([`Session::protocol_statement`]) so that `pg_prepared_statements` shows them
//!   (`from_sql` false) and DEALLOCATE drops them too: the server takes the names to drop
//!   with [`Session::take_deallocated`] after each statement.
//! - DISCARD ALL is RESET ALL, DEALLOCATE ALL, DISCARD PLANS, TEMP and SEQUENCES, and
//!   may not run inside a transaction block (25001).

use std::sync::Arc;

use quire_engine::{SqlState, Value};
use sqlparser::ast::{self, TransactionMode};

use super::{command, in_block_error, Collect, Outcome, Output, Protocol, Session, State};
use crate::context::PreparedInfo;
use crate::error::{Notice, Result, SqlError};
use crate::nodes::Plan;
use crate::parse::Statement;
use crate::settings::{Isolation, TxModes};
use crate::types::SqlType;

/// Most named prepared statements one session keeps (SQL and protocol ones together).
pub(crate) const MAX_PREPARED_STATEMENTS: usize = 100_000;

/// A statement of this module's, read from the syntax tree.
pub(super) enum Command<'a> {
    Begin(TxModes),
    SetTransaction {
        modes: TxModes,
        session: bool,
    },
    Prepare(&'a ast::Ident, &'a [ast::DataType], &'a ast::Statement),
    Execute(String, &'a [ast::Expr]),
    /// DEALLOCATE name, or ALL (`None`).
    Deallocate(Option<String>),
    Discard(ast::DiscardObject),
    /// DECLARE ... CURSOR FOR ... ([`super::cursors`]).
    Declare(&'a ast::Declare),
    Close(&'a ast::CloseCursor),
}

/// `stmt` as one of this module's commands, if it is one.
pub(super) fn command_of(stmt: &ast::Statement) -> Result<Option<Command<'_>>> {
    Ok(Some(match stmt {
        ast::Statement::StartTransaction {
            modes, statements, ..
        } if statements.is_empty() => Command::Begin(tx_modes(modes)?),
        ast::Statement::Set(ast::Set::SetTransaction {
            modes,
            snapshot: None,
            session,
        }) => Command::SetTransaction {
            modes: tx_modes(modes)?,
            session: *session,
        },
        ast::Statement::Prepare {
            name,
            data_types,
            statement,
        } => Command::Prepare(name, data_types, statement),
        ast::Statement::Execute {
            name: Some(name),
            parameters,
            immediate: false,
            into,
            using,
            ..
        } if into.is_empty() && using.is_empty() => Command::Execute(object_name(name), parameters),
        ast::Statement::Deallocate { name, .. } => Command::Deallocate(
            (name.quote_style.is_some() || !name.value.eq_ignore_ascii_case("all"))
                .then(|| ident(name)),
        ),
        ast::Statement::Discard { object_type } => Command::Discard(*object_type),
        ast::Statement::Declare { stmts, .. } if stmts.len() == 1 => Command::Declare(&stmts[0]),
        ast::Statement::Close { cursor } => Command::Close(cursor),
        _ => return Ok(None),
    }))
}

fn ident(i: &ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

fn object_name(n: &ast::ObjectName) -> String {
    n.0.iter()
        .filter_map(|p| p.as_ident().map(ident))
        .collect::<Vec<_>>()
        .join(".")
}

/// BEGIN's or SET TRANSACTION's modes; the last of each kind counts, as in PostgreSQL.
fn tx_modes(modes: &[TransactionMode]) -> Result<TxModes> {
    let mut m = TxModes::default();
    for mode in modes {
        match mode {
            TransactionMode::IsolationLevel(level) => {
                m.isolation = Some(match level {
                    ast::TransactionIsolationLevel::ReadUncommitted => Isolation::ReadUncommitted,
                    ast::TransactionIsolationLevel::ReadCommitted => Isolation::ReadCommitted,
                    ast::TransactionIsolationLevel::RepeatableRead => Isolation::RepeatableRead,
                    ast::TransactionIsolationLevel::Serializable => Isolation::Serializable,
                    ast::TransactionIsolationLevel::Snapshot => {
                        return Err(SqlError::syntax("syntax error at or near \"SNAPSHOT\""))
                    }
                });
            }
            TransactionMode::AccessMode(a) => {
                m.read_only = Some(matches!(a, ast::TransactionAccessMode::ReadOnly));
            }
        }
    }
    Ok(m)
}

/// 25006 when `plan` writes, as PostgreSQL refuses it in a read-only transaction: DML on a
/// table other than a temporary one, DDL, SELECT FOR UPDATE.
pub(super) fn check_writable(plan: &Plan) -> Result<()> {
    let temp = |t: &crate::catalog::TableInfo| t.temp;
    let what = match plan {
        Plan::Insert { table, .. } if !temp(table) => "INSERT",
        Plan::Update { table, .. } if !temp(table) => "UPDATE",
        Plan::Delete { table, .. } if !temp(table) => "DELETE",
        Plan::SelectForUpdate { .. } => "SELECT FOR UPDATE",
        Plan::CreateTable { .. } => "CREATE TABLE",
        Plan::CreateTableAs { .. } => "CREATE TABLE AS",
        Plan::DropTable { .. } => "DROP TABLE",
        Plan::CreateView { .. } => "CREATE VIEW",
        Plan::DropView { .. } => "DROP VIEW",
        Plan::Truncate { .. } => "TRUNCATE TABLE",
        Plan::CreateSequence { .. } => "CREATE SEQUENCE",
        Plan::DropSequence { .. } => "DROP SEQUENCE",
        Plan::CreateIndex { .. } => "CREATE INDEX",
        Plan::DropIndex { .. } => "DROP INDEX",
        Plan::Comment { .. } => "COMMENT",
        Plan::AddColumn { .. }
        | Plan::DropColumns { .. }
        | Plan::SetDefault { .. }
        | Plan::AddKey { .. }
        | Plan::AddCheck { .. }
        | Plan::SetNotNull { .. }
        | Plan::AlterSteps(_)
        | Plan::AddIdentity { .. }
        | Plan::ValidateCheck { .. }
        | Plan::AddForeignKey { .. }
        | Plan::SetColumnType { .. }
        | Plan::ValidateForeignKey { .. }
        | Plan::RenameConstraint { .. }
        | Plan::DropConstraint { .. } => "ALTER TABLE",
        _ => return Ok(()),
    };
    Err(read_only_error(what))
}

/// 25006: `what` cannot run in a read-only transaction.
pub(super) fn read_only_error(what: &str) -> SqlError {
    SqlError::new(
        SqlState::READ_ONLY_SQL_TRANSACTION,
        format!("cannot execute {what} in a read-only transaction"),
    )
}

fn no_such_statement(name: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_SQL_STATEMENT_NAME,
        format!("prepared statement \"{name}\" does not exist"),
    )
}

/// A prepared statement of SQL's PREPARE.
pub(super) struct SqlPrepared {
    stmt: Arc<Statement>,
    /// The key its plan is kept under (its text).
    key: String,
    hints: Vec<SqlType>,
}

impl Session {
    /// BEGIN / START TRANSACTION with `modes`.
    pub(super) fn begin_with(&mut self, modes: TxModes) -> Result<Outcome> {
        let mut notices = Vec::new();
        if matches!(self.state, State::Idle) {
            let mut xact = self.settings.default_xact();
            xact.isolation = modes.isolation.unwrap_or(xact.isolation);
            xact.read_only = modes.read_only.unwrap_or(xact.read_only);
            xact.deferrable = modes.deferrable.unwrap_or(xact.deferrable);
            let tx = self.begin_tx(xact.isolation.engine()?)?;
            self.state = State::Block(Box::new(tx));
            self.settings.begin_xact(xact);
        } else if self.implicit {
            // A BEGIN inside a simple query's implicit transaction makes it an ordinary
            // block (the statements before it are part of it), with BEGIN's modes.
            self.settings.set_xact_modes(modes)?;
            self.match_isolation()?;
        } else {
            // In a block already: PostgreSQL warns and carries on.
            notices.push(Notice::warning(
                SqlState::ACTIVE_SQL_TRANSACTION,
                "there is already a transaction in progress",
            ));
        }
        self.implicit = false;
        let mut out = super::outcome("BEGIN", super::OutcomeKind::BlockStart);
        out.notices = notices;
        Ok(out)
    }

    /// BEGIN, SET TRANSACTION or SET SESSION CHARACTERISTICS with `[NOT] DEFERRABLE`
    /// among its modes.
    pub(super) fn with_deferrable(
        &mut self,
        ast: &ast::Statement,
        deferrable: bool,
        out: &mut dyn Output,
    ) -> Result<Outcome> {
        let cmd = match command_of(ast)? {
            Some(Command::Begin(mut modes)) => {
                modes.deferrable = Some(deferrable);
                Command::Begin(modes)
            }
            Some(Command::SetTransaction { mut modes, session }) => {
                modes.deferrable = Some(deferrable);
                Command::SetTransaction { modes, session }
            }
            _ => return Err(SqlError::syntax("syntax error at or near \"DEFERRABLE\"")),
        };
        self.session_command(cmd, &[], &|_| Ok(Vec::new()), out)
    }

    /// SET TRANSACTION (the block's modes) or SET SESSION CHARACTERISTICS (the defaults).
    pub(super) fn set_transaction(&mut self, modes: TxModes, session: bool) -> Result<Outcome> {
        if session {
            if modes.isolation == Some(Isolation::Serializable) {
                return Err(crate::settings::serializable_refused());
            }
            self.settings.set_default_modes(modes)?;
            return Ok(command("SET"));
        }
        if !matches!(self.state, State::Block(_)) {
            // PostgreSQL warns and does nothing: the statement is its own transaction.
            if modes.isolation == Some(Isolation::Serializable) {
                return Err(crate::settings::serializable_refused());
            }
            let mut out = command("SET");
            out.notices.push(Notice::warning(
                SqlState::NO_ACTIVE_SQL_TRANSACTION,
                "SET TRANSACTION can only be used in transaction blocks",
            ));
            return Ok(out);
        }
        self.settings.set_xact_modes(modes)?;
        self.match_isolation()?;
        Ok(command("SET"))
    }

    /// The block's engine transaction at the isolation level its settings now name: begun
    /// again when SET TRANSACTION changed the level before the first query (nothing ran in
    /// it yet: no snapshot, no xid).
    pub(super) fn match_isolation(&mut self) -> Result<()> {
        let (State::Block(tx), Some(xact)) = (&self.state, self.settings.block_xact()) else {
            return Ok(());
        };
        let want = xact.isolation.engine()?;
        if tx.isolation() == want {
            return Ok(());
        }
        if tx.xid().is_some() || xact.queried {
            return Err(SqlError::new(
                SqlState::ACTIVE_SQL_TRANSACTION,
                "SET TRANSACTION ISOLATION LEVEL must be called before any query",
            ));
        }
        // The old one ends first: the two would share the session's lock owner.
        if let State::Block(old) = std::mem::replace(&mut self.state, State::Idle) {
            old.rollback()?;
        }
        match self.begin_tx(want) {
            Ok(fresh) => {
                self.state = State::Block(Box::new(fresh));
                Ok(())
            }
            Err(e) => {
                self.state = State::Failed;
                Err(e)
            }
        }
    }

    /// PREPARE name [(types)] AS statement: analyzed now, kept under its name.
    pub(super) fn prepare(
        &mut self,
        name: &ast::Ident,
        types: &[ast::DataType],
        stmt: &ast::Statement,
    ) -> Result<Outcome> {
        let name = ident(name);
        if !matches!(
            stmt,
            ast::Statement::Query(_)
                | ast::Statement::Insert(_)
                | ast::Statement::Update(_)
                | ast::Statement::Delete(_)
        ) {
            return Err(SqlError::syntax(format!(
                "syntax error at or near \"{}\"",
                stmt.to_string().split_whitespace().next().unwrap_or("")
            )));
        }
        if self.prepared.contains_key(&name) {
            return Err(SqlError::new(
                SqlState::DUPLICATE_PSTATEMENT,
                format!("prepared statement \"{name}\" already exists"),
            ));
        }
        if self.prepared.len() >= MAX_PREPARED_STATEMENTS {
            return Err(SqlError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                format!("too many prepared statements (at most {MAX_PREPARED_STATEMENTS})"),
            ));
        }
        let hints = types
            .iter()
            .map(crate::types::SqlType::from_ast)
            .collect::<Result<Vec<_>>>()?;
        let key = stmt.to_string();
        let parsed = Arc::new(Statement::Sql(Box::new(stmt.clone())));
        let described = self.describe(&key, &parsed, &hints)?;
        let info = PreparedInfo {
            statement: format!("PREPARE {name} AS {key}"),
            prepare_time_us: super::now_us(),
            parameter_types: described.params.clone(),
            result_types: described.columns.iter().map(|c| c.ty).collect(),
            from_sql: true,
            generic_plans: 0,
        };
        self.prepared.insert(name.clone(), info);
        self.sql_prepared.insert(
            name,
            SqlPrepared {
                stmt: parsed,
                key,
                hints: described.params,
            },
        );
        Ok(command("PREPARE"))
    }

    /// EXECUTE name [(arguments)]: the prepared statement run with its arguments.
    pub(super) fn execute_prepared(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        out: &mut dyn Output,
    ) -> Result<Outcome> {
        let Some(p) = self.sql_prepared.get(name) else {
            return Err(no_such_statement(name));
        };
        let (stmt, key, types) = (Arc::clone(&p.stmt), p.key.clone(), p.hints.clone());
        if args.len() != types.len() {
            return Err(SqlError::syntax(format!(
                "wrong number of parameters for prepared statement \"{name}\""
            ))
            .with_detail(format!(
                "Expected {} parameters but got {}.",
                types.len(),
                args.len()
            )));
        }
        let values = self.argument_values(args, &types)?;
        if let Some(info) = self.prepared.get_mut(name) {
            info.generic_plans += 1;
        }
        let Statement::Sql(ast) = &*stmt else {
            return Err(no_such_statement(name));
        };
        let decode = |_: &[SqlType]| Ok(values.clone());
        self.execute_sql(Some(&key), Protocol::Simple, ast, &types, &decode, out)
    }

    /// EXECUTE's arguments, each cast to its parameter's type, evaluated as one SELECT.
    fn argument_values(&mut self, args: &[ast::Expr], types: &[SqlType]) -> Result<Vec<Value>> {
        if args.is_empty() {
            return Ok(Vec::new());
        }
        let list = args
            .iter()
            .zip(types)
            .map(|(a, t)| format!("CAST(({a}) AS {})", t.name()))
            .collect::<Vec<_>>()
            .join(", ");
        let parsed = crate::parse::parse(&format!("SELECT {list}"))?;
        let [Statement::Sql(select)] = parsed.as_slice() else {
            return Err(SqlError::new(
                SqlState::INTERNAL_ERROR,
                "EXECUTE's arguments did not parse as one SELECT",
            ));
        };
        let mut rows = Collect::default();
        let decode = |_: &[SqlType]| Ok(Vec::new());
        let r = self.execute_sql(None, Protocol::Simple, select, &[], &decode, &mut rows);
        match rows.fill(r)?.kind {
            super::OutcomeKind::Rows { mut rows, .. } if rows.len() == 1 => Ok(rows.remove(0)),
            _ => Err(SqlError::new(
                SqlState::INTERNAL_ERROR,
                "EXECUTE's arguments gave no row",
            )),
        }
    }

    /// DEALLOCATE name | ALL: SQL's prepared statements and the protocol's named ones.
    pub(super) fn deallocate(&mut self, name: Option<String>) -> Result<Outcome> {
        let Some(name) = name else {
            self.deallocate_all();
            return Ok(command("DEALLOCATE ALL"));
        };
        let info = self
            .prepared
            .remove(&name)
            .ok_or_else(|| no_such_statement(&name))?;
        self.sql_prepared.remove(&name);
        if !info.from_sql {
            self.deallocated.push(name);
        }
        Ok(command("DEALLOCATE"))
    }

    fn deallocate_all(&mut self) {
        let protocol = self
            .prepared
            .iter()
            .filter(|(_, i)| !i.from_sql)
            .map(|(n, _)| n.clone());
        self.deallocated.extend(protocol);
        self.prepared.clear();
        self.sql_prepared.clear();
    }

    /// DISCARD ALL | PLANS | SEQUENCES | TEMP.
    pub(super) fn discard(&mut self, what: ast::DiscardObject) -> Result<Outcome> {
        let all = matches!(what, ast::DiscardObject::ALL);
        if all && !matches!(self.state, State::Idle) {
            return Err(in_block_error("DISCARD ALL"));
        }
        if all {
            self.settings.set("all", None)?;
            self.deallocate_all();
            self.cursors.close_all();
        }
        if all || matches!(what, ast::DiscardObject::PLANS) {
            self.plans.clear();
        }
        if all || matches!(what, ast::DiscardObject::SEQUENCES) {
            self.sequences = crate::sequence::SessionSequences::default();
        }
        if all || matches!(what, ast::DiscardObject::TEMP) {
            self.discard_temp()?;
        }
        Ok(command(match what {
            ast::DiscardObject::ALL => "DISCARD ALL",
            ast::DiscardObject::PLANS => "DISCARD PLANS",
            ast::DiscardObject::SEQUENCES => "DISCARD SEQUENCES",
            ast::DiscardObject::TEMP => "DISCARD TEMP",
        }))
    }

    /// The session's temporary tables dropped: in the block's transaction inside one, else
    /// in a transaction of their own.
    fn discard_temp(&mut self) -> Result<()> {
        let temp = &mut self.plans.tables.get_mut().temp;
        match &self.state {
            State::Block(tx) => temp.drop_in(tx),
            _ => temp.drop_all(&self.db),
        }
    }

    /// The server's named statement `name` (Parse), as `pg_prepared_statements` shows it;
    /// `None` when the server closed it (Close).
    pub fn protocol_statement(&mut self, name: &str, statement: Option<(&str, &[SqlType])>) {
        if name.is_empty() {
            return;
        }
        match statement {
            Some((text, params)) if self.prepared.len() < MAX_PREPARED_STATEMENTS => {
                let info = PreparedInfo {
                    statement: text.to_string(),
                    prepare_time_us: super::now_us(),
                    parameter_types: params.to_vec(),
                    result_types: Vec::new(),
                    from_sql: false,
                    generic_plans: 0,
                };
                self.prepared.insert(name.to_string(), info);
            }
            Some(_) => {}
            None => {
                if self.prepared.get(name).is_some_and(|i| !i.from_sql) {
                    self.prepared.remove(name);
                }
            }
        }
    }

    /// The description of a command of this module (Describe through the extended protocol):
    /// EXECUTE's is its prepared statement's; the others return no rows.
    pub(super) fn describe_command(
        &mut self,
        cmd: &Command,
        hints: &[SqlType],
    ) -> Result<super::Description> {
        let none = || super::Description {
            params: Vec::new(),
            columns: Arc::new([]),
        };
        if let Command::Declare(d) = cmd {
            // DECLARE's parameters are its query's; it returns no rows itself.
            let Some(q) = &d.for_query else {
                return Ok(none());
            };
            let stmt = Statement::Sql(Box::new(ast::Statement::Query(q.clone())));
            let params = self.describe(&q.to_string(), &stmt, hints)?.params;
            return Ok(super::Description {
                params,
                columns: Arc::new([]),
            });
        }
        let Command::Execute(name, _) = cmd else {
            return Ok(none());
        };
        let p = self
            .sql_prepared
            .get(name)
            .ok_or_else(|| no_such_statement(name))?;
        let (stmt, key, hints) = (Arc::clone(&p.stmt), p.key.clone(), p.hints.clone());
        let d = self.describe(&key, &stmt, &hints)?;
        Ok(super::Description {
            params: Vec::new(),
            columns: d.columns,
        })
    }

    /// Whether a named prepared statement `name` exists (SQL's or the protocol's).
    pub fn has_prepared(&self, name: &str) -> bool {
        self.prepared.contains_key(name)
    }

    /// The protocol's named statements DEALLOCATE or DISCARD ALL dropped since the last call:
    /// the server forgets them.
    pub fn take_deallocated(&mut self) -> Vec<String> {
        std::mem::take(&mut self.deallocated)
    }
}
