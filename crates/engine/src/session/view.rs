//! Views of a transaction: CREATE, CREATE OR REPLACE and DROP VIEW are catalog changes under
//! the transaction, as every definition is. A view has no relation file; what it means (its
//! query) is the SQL layer's, kept in the definition's body ([`ViewDef`]).

use super::Transaction;
use crate::catalog::{name_lock, Entry, ViewDef};
use crate::error::{Error, Result};
use crate::page::Tid;
use crate::txn::lock::{LockMode, LockWait};
use crate::types::Oid;

impl Transaction {
    /// CREATE VIEW: a catalog entry named `name` with `body`; 42P07 if the name is taken.
    pub fn create_view(&self, name: &str, body: &[u8]) -> Result<Oid> {
        self.call(|| {
            self.command();
            let xid = self.ensure_xid()?;
            self.lock(name_lock(name), LockMode::Exclusive, LockWait::Block)?;
            if self.lookup_name(name)?.is_some() {
                return Err(Error::DuplicateTable { name: name.into() });
            }
            let oid = self.engine.new_oid();
            self.lock_table_mode(oid, LockMode::AccessExclusive, LockWait::NoWait)?;
            let entry = Entry::View(ViewDef {
                oid,
                name: name.to_string(),
                body: body.to_vec(),
            });
            self.insert_entry(xid, &entry)?;
            Ok(oid)
        })
    }

    /// CREATE OR REPLACE VIEW of an existing view: its body replaced, under ACCESS EXCLUSIVE.
    pub fn replace_view(&self, view: Oid, body: &[u8]) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(view, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, mut def) = self.view_entry(view)?;
            def.body = body.to_vec();
            self.rewrite_entry(tid, Some(&Entry::View(def)))
        })
    }

    /// DROP VIEW: the entry goes (there is no file).
    pub fn drop_view(&self, view: Oid) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(view, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, def) = self.view_entry(view)?;
            self.lock(name_lock(&def.name), LockMode::Exclusive, LockWait::Block)?;
            self.rewrite_entry(tid, None)
        })
    }

    /// The definition of view `view`, under ACCESS SHARE (so that no DROP or REPLACE runs
    /// under the caller): what a query that reads the view takes.
    pub fn view_def(&self, view: Oid) -> Result<ViewDef> {
        self.call(|| {
            self.lock_table_mode(view, LockMode::AccessShare, LockWait::Block)?;
            Ok(self.view_entry(view)?.1)
        })
    }

    /// Every view this transaction can see, by name.
    pub fn views(&self) -> Result<Vec<ViewDef>> {
        let all = self.entries()?;
        Ok(all
            .into_iter()
            .filter_map(|e| match e {
                Entry::View(v) => Some(v),
                _ => None,
            })
            .collect())
    }

    /// Every definition this transaction can see, by name.
    pub(super) fn entries(&self) -> Result<Vec<Entry>> {
        self.call(|| {
            self.catalog_lookup(|looker| {
                self.engine
                    .catalog
                    .list_entries(&self.catalog_heap(), looker, &self.engine.txns)
            })
        })
    }

    fn view_entry(&self, view: Oid) -> Result<(Tid, ViewDef)> {
        self.entry_of_kind(view, "a view", |e| match e {
            Entry::View(def) => Ok(def),
            other => Err(other),
        })
    }
}
