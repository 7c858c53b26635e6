//! Settings and transactions, as PostgreSQL's GUC stack has them:
//!
//! - The running transaction's characteristics ([`Xact`]: `transaction_isolation`,
//!   `transaction_read_only`, `transaction_deferrable`) start from the `default_transaction_*`
//!   settings when the transaction begins, and BEGIN's modes, SET TRANSACTION or SET of
//!   those three parameters change them. The isolation level, read-write mode and
//!   deferrable mode may change only before the transaction's first query (25001); read
//!   only may be chosen at any time. Outside a transaction block they show the defaults.
//! - A SET inside a transaction lasts if the transaction commits and is undone if it rolls
//!   back; SET LOCAL (and `set_config(..., true)`) lasts to the end of the transaction either
//!   way. [`Settings::end_xact`] is called at every end of a transaction the session runs
//!   (block, implicit block, a statement's own), with whether it committed.
//! - SERIALIZABLE is refused (0A000): the engine has READ COMMITTED and REPEATABLE READ
//!   only, and a weaker level is never run in its place. READ UNCOMMITTED is shown as
//!   chosen and runs as READ COMMITTED, as in PostgreSQL.

use std::collections::BTreeMap;

use quire_engine::{IsolationLevel, SqlState};

use super::Settings;
use crate::error::{Result, SqlError};

/// The values of `default_transaction_isolation` and `transaction_isolation`, in the order
/// PostgreSQL's hint lists them.
pub(crate) const ISOLATION_LEVELS: &[&str] = &[
    "serializable",
    "repeatable read",
    "read committed",
    "read uncommitted",
];

/// An isolation level as SQL names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isolation {
    ReadUncommitted,
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    /// The level named `text` (any case), as `default_transaction_isolation` takes it.
    pub(crate) fn named(text: &str) -> Option<Isolation> {
        Some(match text.trim().to_lowercase().as_str() {
            "read uncommitted" => Isolation::ReadUncommitted,
            "read committed" => Isolation::ReadCommitted,
            "repeatable read" => Isolation::RepeatableRead,
            "serializable" => Isolation::Serializable,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Isolation::ReadUncommitted => "read uncommitted",
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
            Isolation::Serializable => "serializable",
        }
    }

    /// The engine's level this one runs at; SERIALIZABLE has none (0A000).
    pub(crate) fn engine(self) -> Result<IsolationLevel> {
        match self {
            Isolation::ReadUncommitted | Isolation::ReadCommitted => {
                Ok(IsolationLevel::ReadCommitted)
            }
            Isolation::RepeatableRead => Ok(IsolationLevel::RepeatableRead),
            Isolation::Serializable => Err(serializable_refused()),
        }
    }
}

/// 0A000 for SERIALIZABLE, which the engine does not have.
pub(crate) fn serializable_refused() -> SqlError {
    SqlError::new(
        SqlState::FEATURE_NOT_SUPPORTED,
        "SERIALIZABLE isolation is not supported yet",
    )
    .with_hint("quire runs READ COMMITTED and REPEATABLE READ; choose one of them.")
}

/// Transaction modes as BEGIN, START TRANSACTION, SET TRANSACTION and SET SESSION
/// CHARACTERISTICS give them: each `None` where the statement leaves it as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TxModes {
    pub isolation: Option<Isolation>,
    pub read_only: Option<bool>,
    pub deferrable: Option<bool>,
}

/// The running transaction's characteristics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Xact {
    pub isolation: Isolation,
    pub read_only: bool,
    pub deferrable: bool,
    /// A query ran in the transaction (PostgreSQL's first snapshot): the isolation level,
    /// read-write mode and deferrable mode are fixed from here on.
    pub queried: bool,
}

/// What the settings were when the transaction's first SET ran, and what they will be if
/// it commits (its SETs without LOCAL).
#[derive(Clone, Debug)]
pub(super) struct Saved {
    before: BTreeMap<String, String>,
    at_commit: BTreeMap<String, String>,
}

impl Settings {
    /// The characteristics a transaction begins with: the `default_transaction_*` settings.
    pub(crate) fn default_xact(&self) -> Xact {
        let on = |name: &str| self.show(name).is_some_and(|v| v == "on");
        let isolation = self
            .show("default_transaction_isolation")
            .and_then(|v| Isolation::named(&v))
            .unwrap_or(Isolation::ReadCommitted);
        Xact {
            isolation,
            read_only: on("default_transaction_read_only"),
            deferrable: on("default_transaction_deferrable"),
            queried: false,
        }
    }

    /// A transaction block (or implicit block) begins with `xact`.
    pub(crate) fn begin_xact(&mut self, xact: Xact) {
        self.xact = Some(xact);
    }

    /// The block's characteristics; `None` outside one.
    pub(crate) fn block_xact(&self) -> Option<Xact> {
        self.xact
    }

    /// The running transaction's characteristics (the defaults outside a block).
    pub(crate) fn xact(&self) -> Xact {
        self.xact.unwrap_or_else(|| self.default_xact())
    }

    /// Notes that a query ran in the block: SET TRANSACTION ISOLATION LEVEL is too late now.
    pub(crate) fn note_query(&mut self) {
        if let Some(x) = &mut self.xact {
            x.queried = true;
        }
    }

    /// Whether writes are refused now (`transaction_read_only`).
    pub(crate) fn read_only(&self) -> bool {
        self.xact().read_only
    }

    /// SET TRANSACTION's `modes` applied to the running block, with PostgreSQL's checks.
    /// Returns the block's characteristics before and after.
    pub(crate) fn set_xact_modes(&mut self, modes: TxModes) -> Result<(Xact, Xact)> {
        let Some(now) = self.xact else {
            return Err(SqlError::new(
                SqlState::NO_ACTIVE_SQL_TRANSACTION,
                "there is no transaction in progress",
            ));
        };
        let mut next = now;
        if let Some(i) = modes.isolation {
            if now.queried && i != now.isolation {
                return Err(too_late("SET TRANSACTION ISOLATION LEVEL must be called"));
            }
            i.engine()?;
            next.isolation = i;
        }
        if let Some(ro) = modes.read_only {
            if now.queried && !ro && now.read_only {
                return Err(too_late("transaction read-write mode must be set"));
            }
            next.read_only = ro;
        }
        if let Some(d) = modes.deferrable {
            if now.queried && d != now.deferrable {
                return Err(too_late("SET TRANSACTION [NOT] DEFERRABLE must be called"));
            }
            next.deferrable = d;
        }
        self.xact = Some(next);
        Ok((now, next))
    }

    /// SET SESSION CHARACTERISTICS AS TRANSACTION `modes`: the `default_transaction_*`
    /// settings.
    pub(crate) fn set_default_modes(&mut self, modes: TxModes) -> Result<()> {
        if let Some(i) = modes.isolation {
            self.set("default_transaction_isolation", Some(i.name().into()))?;
        }
        if let Some(ro) = modes.read_only {
            self.set("default_transaction_read_only", Some(super::on_off(ro)))?;
        }
        if let Some(d) = modes.deferrable {
            self.set("default_transaction_deferrable", Some(super::on_off(d)))?;
        }
        Ok(())
    }

    /// Records a SET's result in the transaction's scope: the settings before the
    /// transaction's first SET are kept for a rollback, and a SET without LOCAL is what a
    /// commit keeps.
    pub(super) fn store(&mut self, name: String, value: Option<String>, local: bool) {
        self.changes += 1;
        let saved = self.saved.get_or_insert_with(|| Saved {
            before: self.session.clone(),
            at_commit: self.session.clone(),
        });
        if let Some(v) = value {
            if !local {
                saved.at_commit.insert(name.clone(), v.clone());
            }
            self.session.insert(name, v);
        } else {
            if !local {
                saved.at_commit.remove(&name);
            }
            self.session.remove(&name);
        }
    }

    /// RESET ALL: every parameter back to its value at the session's start.
    pub(super) fn store_all(&mut self, values: BTreeMap<String, String>) {
        self.changes += 1;
        let saved = self.saved.get_or_insert_with(|| Saved {
            before: self.session.clone(),
            at_commit: self.session.clone(),
        });
        saved.at_commit.clone_from(&values);
        self.session = values;
    }

    /// The transaction ended: SET LOCAL's values go; a rollback undoes every SET of the
    /// transaction. Also what `set_config` left pending goes.
    pub(crate) fn end_xact(&mut self, committed: bool) {
        self.xact = None;
        if let Ok(mut pending) = self.pending.lock() {
            pending.clear();
        }
        let Some(saved) = self.saved.take() else {
            return;
        };
        self.changes += 1;
        self.session = if committed {
            saved.at_commit
        } else {
            saved.before
        };
    }
}

fn too_late(what: &str) -> SqlError {
    SqlError::new(
        SqlState::ACTIVE_SQL_TRANSACTION,
        format!("{what} before any query"),
    )
}
