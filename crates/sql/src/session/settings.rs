//! SET ROLE, SET SESSION AUTHORIZATION and the reported parameters: the session side of
//! [`crate::settings`].

use quire_engine::Transaction;

use super::{command, IsolationLevel, Outcome, Session, State};
use crate::error::{Notice, Result};
use crate::roles::{Identity, RoleStmt};

/// Who the session acts as, and the role statements that change it.
impl Session {
    /// The role the client logged in as: the session's authenticated role, session user and
    /// current role from now on, with its superuser attribute as committed now (PostgreSQL's
    /// InitializeSessionUserId). A role that is not there (dropped since the server checked
    /// it) has no privileges. What the client has been told starts over from here
    /// ([`Session::reported_parameters_changed`]).
    pub fn set_user(&mut self, user: &str) {
        let role = crate::roles::lookup_role(&self.db, user).ok().flatten();
        let identity = match &role {
            Some(role) => Identity::logged_in(role),
            None => Identity::unknown(user),
        };
        self.backend
            .set_user(user, role.as_ref().is_some_and(|r| r.superuser));
        self.settings.identity = identity;
        self.settings.changes += 1;
        self.settings.reported = self.settings.reported();
        self.settings.reported_at = self.settings.changes;
    }

    /// `is_superuser`: whether the current role was a superuser when the session took it
    /// (at login, SET ROLE or SET SESSION AUTHORIZATION).
    pub fn is_superuser(&self) -> bool {
        self.settings.identity.is_superuser()
    }

    /// `current_user`: the role whose privileges apply (SET ROLE's, else the session user).
    pub fn current_user(&self) -> &str {
        self.settings.identity.current_user()
    }

    /// `session_user`: the role logged in, or the one SET SESSION AUTHORIZATION chose.
    pub fn session_user(&self) -> &str {
        self.settings.identity.session_user()
    }

    /// Every parameter PostgreSQL reports to the client (GUC_REPORT) that a session can
    /// change, by its reported name (`DateStyle`, `is_superuser`, ...) with its value now:
    /// the ParameterStatus messages of the startup, beside the server's fixed ones
    /// (`server_version`, `server_encoding`, `integer_datetimes`).
    pub fn reported_parameters(&self) -> Vec<(&'static str, String)> {
        self.settings.reported()
    }

    /// The reported parameters whose values changed since the last call (or since the
    /// login, [`Session::set_user`]), with their new values: after each statement (SET,
    /// SET ROLE, SET SESSION AUTHORIZATION, RESET ...), the server sends one ParameterStatus
    /// for each before ReadyForQuery, as PostgreSQL does. Empty when nothing changed.
    pub fn reported_parameters_changed(&mut self) -> Vec<(&'static str, String)> {
        if self.settings.reported_at == self.settings.changes {
            return Vec::new();
        }
        self.settings.reported_at = self.settings.changes;
        let now = self.settings.reported();
        let changed = now
            .iter()
            .zip(&self.settings.reported)
            .filter(|(new, old)| new.1 != old.1)
            .map(|(new, _)| new.clone())
            .collect();
        self.settings.reported = now;
        changed
    }

    /// A role statement, in the open block or as its own transaction. Who the session acts
    /// as changes only once the statement succeeded (and, outside a block, committed).
    pub(super) fn role(&mut self, stmt: &RoleStmt) -> Result<Outcome> {
        let writes = match stmt {
            RoleStmt::Create { .. } => Some("CREATE ROLE"),
            RoleStmt::Alter { .. } | RoleStmt::Rename { .. } => Some("ALTER ROLE"),
            RoleStmt::Drop { .. } => Some("DROP ROLE"),
            _ => None,
        };
        if let Some(what) = writes.filter(|_| self.settings.read_only()) {
            return Err(super::commands::read_only_error(what));
        }
        let mut who = self.settings.identity.clone();
        let done = self.in_block_or_own(|tx| crate::roles::execute(tx, stmt, &mut who))?;
        self.settings.identity = who;
        self.settings.changes += 1;
        let mut out = command(done.tag);
        out.notices = done.notices.into_iter().map(Notice::from).collect();
        Ok(out)
    }

    /// Runs `f` in the open block's transaction, or in one of its own that commits when `f`
    /// succeeds and rolls back when it fails.
    pub(super) fn in_block_or_own<T>(
        &self,
        f: impl FnOnce(&Transaction) -> Result<T>,
    ) -> Result<T> {
        if let State::Block(tx) = &self.state {
            return f(tx);
        }
        let tx = self.begin_tx(IsolationLevel::ReadCommitted)?;
        match f(&tx) {
            Ok(v) => {
                tx.commit()?;
                Ok(v)
            }
            Err(e) => {
                let _ = tx.rollback();
                Err(e)
            }
        }
    }

    /// ALTER TABLE ... SET STORAGE, in the open block or as its own transaction.
    pub(super) fn set_storage(&mut self, stmt: &crate::catalog::SetStorageStmt) -> Result<Outcome> {
        if self.settings.read_only() {
            return Err(super::commands::read_only_error("ALTER TABLE"));
        }
        let notices = self.in_block_or_own(|tx| {
            let table = self.plans.tables.borrow().temp.resolve(tx, &stmt.table)?;
            crate::catalog::set_storage(tx, stmt, &table)
        })?;
        let mut out = command("ALTER TABLE");
        out.notices = notices.into_iter().map(Notice::new).collect();
        Ok(out)
    }

    /// ALTER SEQUENCE, in the open block or as its own transaction.
    pub(super) fn alter_sequence(
        &mut self,
        stmt: &crate::parse::AlterSequenceStmt,
    ) -> Result<Outcome> {
        if self.settings.read_only() {
            return Err(super::commands::read_only_error("ALTER SEQUENCE"));
        }
        let notices = self.in_block_or_own(|tx| crate::sequence::alter(tx, stmt))?;
        let mut out = command("ALTER SEQUENCE");
        out.notices = notices.into_iter().map(Notice::new).collect();
        Ok(out)
    }
}
