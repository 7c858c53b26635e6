//! DDL of a transaction: CREATE/TRUNCATE/DROP TABLE, ADD/DROP COLUMN and LOCK TABLE, as new
//! versions of catalog entries under the transaction's id (so DDL commits and rolls back with it), and
//! catalog look-ups under the transaction's snapshot.

use std::sync::Arc;

use super::Transaction;
use crate::catalog::{name_lock, Column, Entry, Storage, TableDef, TableId, USER_DB};
use crate::error::{Error, Result};
use crate::heap::{Looker, UpdateCheck};
use crate::page::Tid;

use crate::txn::lock::{LockMode, LockWait};
use crate::types::{Fork, Oid, RelFileLocator, PAGE_SIZE};

/// Most columns a table may have, dropped ones included (PostgreSQL's
/// `MaxHeapAttributeNumber`).
const MAX_COLUMNS: usize = 1600;

impl Transaction {
    /// A looker for catalog lookups: a fresh snapshot (the latest committed state, whatever
    /// the isolation level, as PostgreSQL's catalog scans use), and this transaction's own
    /// changes up to its current command.
    pub(super) fn catalog_lookup<T>(&self, f: impl FnOnce(&Looker<'_>) -> Result<T>) -> Result<T> {
        let snap = self.engine.txns.snapshot(self.proc);
        let (own, cid) = {
            let st = self.st.borrow();
            (st.own.clone(), st.cid)
        };
        f(&Looker {
            snapshot: &snap,
            own: &own,
            cid: cid + 1,
        })
    }

    /// The relation (table or index) named `name`.
    pub(super) fn lookup_name(&self, name: &str) -> Result<Option<Entry>> {
        self.catalog_lookup(|looker| {
            let e = self.engine.catalog.entry_by_name(
                &self.catalog_heap(),
                name,
                looker,
                &self.engine.txns,
            )?;
            Ok(e.map(|(_, e)| e))
        })
    }

    /// The relation (table or index) `oid`, with its catalog address.
    pub(super) fn lookup_oid(&self, oid: Oid) -> Result<Option<(Tid, Entry)>> {
        // The shared cache answers only for a transaction without catalog writes of its own
        // (the catalog module's rules); the generation is read before the lookup.
        let shared = !self.st.borrow().definitions_changed;
        let catalog = &self.engine.catalog;
        let generation = catalog.generation();
        if shared {
            if let Some(hit) = catalog.cached(oid, generation) {
                return Ok(Some(hit));
            }
        }
        let found = self.catalog_lookup(|looker| {
            catalog.entry(&self.catalog_heap(), oid, looker, &self.engine.txns)
        })?;
        if let (true, Some((tid, entry))) = (shared, &found) {
            catalog.remember(generation, *tid, entry);
        }
        Ok(found)
    }

    /// The relation (table or index) `oid` as this transaction sees the catalog now, or
    /// `None`: a lookup by oid without a lock, as PostgreSQL's syscache answers
    /// `pg_class` by oid (psql's `::regclass` and `pg_table_is_visible`).
    pub fn relation(&self, oid: Oid) -> Result<Option<Entry>> {
        self.call(|| Ok(self.lookup_oid(oid)?.map(|(_, e)| e)))
    }

    /// The size in bytes of fork `fork` of relation `oid` (0 if the fork has no file), or
    /// `None` if there is no such relation: `pg_relation_size` and its kin, without a lock.
    pub fn relation_fork_bytes(&self, oid: Oid, fork: Fork) -> Result<Option<u64>> {
        self.call(|| {
            let Some((_, entry)) = self.lookup_oid(oid)? else {
                return Ok(None);
            };
            let smgr = self.engine.pool.smgr();
            let rel = entry.rel();
            if !smgr.exists(rel, fork)? {
                return Ok(Some(0));
            }
            Ok(Some(u64::from(smgr.nblocks(rel, fork)?) * PAGE_SIZE as u64))
        })
    }

    /// The size in bytes of table `oid`'s TOAST relation, every fork (0 if it has none, or
    /// is not a table): `pg_table_size` counts it, as PostgreSQL's does.
    pub fn toast_bytes(&self, oid: Oid) -> Result<u64> {
        self.call(|| {
            let Some((_, Entry::Table(def))) = self.lookup_oid(oid)? else {
                return Ok(0);
            };
            let smgr = self.engine.pool.smgr();
            let toast = def.rel.toast();
            let mut bytes = 0;
            for fork in Fork::ALL {
                if smgr.exists(toast, fork)? {
                    bytes += u64::from(smgr.nblocks(toast, fork)?) * PAGE_SIZE as u64;
                }
            }
            Ok(bytes)
        })
    }

    /// The relation (table or index) named `name`, or `None`, without a lock.
    pub fn relation_named(&self, name: &str) -> Result<Option<Entry>> {
        self.call(|| self.lookup_name(name))
    }

    /// The table named `name`, as this transaction sees the catalog now.
    pub fn table(&self, name: &str) -> Result<TableId> {
        let found = self.find_table(name)?;
        // Through `call`, so that a missing table fails the transaction, as in PostgreSQL.
        self.call(|| {
            found.ok_or_else(|| Error::UndefinedTable {
                name: name.to_string(),
            })
        })
    }

    /// The table named `name` under the transaction's snapshot, or `None`: a missing table is
    /// no error here, so the transaction goes on (IF EXISTS, IF NOT EXISTS).
    pub fn find_table(&self, name: &str) -> Result<Option<TableId>> {
        self.call(|| {
            let found = self.catalog_lookup(|looker| {
                self.engine
                    .catalog
                    .by_name(&self.catalog_heap(), name, looker, &self.engine.txns)
            })?;
            Ok(found.map(|(_, d)| d.oid))
        })
    }

    /// The definition of a table.
    pub fn table_def(&self, table: TableId) -> Result<TableDef> {
        self.call(|| {
            self.lock_table_mode(table, LockMode::AccessShare, LockWait::Block)?;
            Ok(self.def(table)?.1)
        })
    }

    /// Every table this transaction can see, by name.
    pub fn tables(&self) -> Result<Vec<TableDef>> {
        self.call(|| {
            self.catalog_lookup(|looker| {
                self.engine
                    .catalog
                    .list(&self.catalog_heap(), looker, &self.engine.txns)
            })
        })
    }

    /// CREATE TABLE.
    pub fn create_table(&self, name: &str, columns: &[Column]) -> Result<TableId> {
        self.call(|| {
            self.command();
            let xid = self.ensure_xid()?;
            self.lock(name_lock(name), LockMode::Exclusive, LockWait::Block)?;
            if self.visible_name(name)? {
                return Err(Error::DuplicateTable { name: name.into() });
            }
            let oid = self.engine.new_oid();
            self.lock_table_mode(oid, LockMode::AccessExclusive, LockWait::NoWait)?;
            let def = TableDef {
                oid,
                name: name.into(),
                rel: RelFileLocator::new(USER_DB, oid.0),
                columns: Arc::new(columns.to_vec()),
            };
            self.heap(def.rel).create()?;
            self.st.borrow_mut().drop_at_abort.push(def.rel);
            let tid = self.insert_entry(xid, &Entry::Table(def.clone()))?;
            self.st.borrow_mut().defs.insert(oid, (tid, def));
            Ok(oid)
        })
    }

    /// CREATE of any kind: the new definition's catalog row, noted in the in-memory index,
    /// and the catalog generation moved.
    pub(super) fn insert_entry(&self, xid: crate::types::Xid, entry: &Entry) -> Result<Tid> {
        let cid = self.st.borrow().cid;
        let mut hint = None;
        let tid = self
            .catalog_heap()
            .insert(xid, cid, &entry.to_row(), &mut hint)?;
        self.engine.catalog.note_entry(tid, entry);
        self.note_definition_change();
        self.st.borrow_mut().cid_used = true;
        Ok(tid)
    }

    /// The definition `oid` with its catalog address, if `pick` takes its kind (`what`:
    /// the kind's name for the error, `"a sequence"`).
    pub(super) fn entry_of_kind<T>(
        &self,
        oid: Oid,
        what: &str,
        pick: impl FnOnce(Entry) -> Result<T, Entry>,
    ) -> Result<(Tid, T)> {
        match self.lookup_oid(oid)? {
            Some((tid, entry)) => pick(entry).map(|t| (tid, t)).map_err(|other| {
                Error::WrongObjectType {
                    what: format!("\"{}\" is not {what}", other.name()),
                }
            }),
            None => Err(Error::UndefinedTable {
                name: format!("with oid {oid}"),
            }),
        }
    }

    fn visible_name(&self, name: &str) -> Result<bool> {
        Ok(self.lookup_name(name)?.is_some())
    }

    /// Replaces the catalog row at `tid` by `new`'s (or deletes it), under ACCESS EXCLUSIVE.
    pub(super) fn rewrite_entry(&self, tid: Tid, new: Option<&Entry>) -> Result<()> {
        let xid = self.ensure_xid()?;
        let cid = self.st.borrow().cid;
        let heap = self.catalog_heap();
        let check = match new {
            Some(entry) => {
                let mut hint = None;
                let out = heap.update(
                    tid,
                    &entry.to_row(),
                    &self.writer(xid, cid, &self.own()),
                    true,
                    &mut hint,
                )?;
                if let Some(new_tid) = out.new_tid {
                    self.engine.catalog.note_entry(new_tid, entry);
                    if let Entry::Table(def) = entry {
                        self.st
                            .borrow_mut()
                            .defs
                            .insert(def.oid, (new_tid, def.clone()));
                    }
                }
                out.check
            }
            None => heap.delete(tid, &self.writer(xid, cid, &self.own()))?,
        };
        self.note_definition_change();
        self.st.borrow_mut().cid_used = true;
        match check {
            UpdateCheck::Ok => Ok(()),
            other => Err(Error::SerializationFailure {
                reason: format!("a concurrent change of a relation's definition ({other:?})"),
            }),
        }
    }

    /// TRUNCATE: the table gets a new, empty relation file; the old one (and its TOAST
    /// relation) is dropped at commit, the new one at abort.
    pub fn truncate(&self, table: TableId) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(table, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, def) = self.def(table)?;
            self.ensure_xid()?;
            let new_rel = RelFileLocator::new(USER_DB, self.engine.new_oid().0);
            self.heap(new_rel).create()?;
            self.st.borrow_mut().drop_at_abort.push(new_rel);
            let new_def = TableDef {
                rel: new_rel,
                ..def.clone()
            };
            self.rewrite_entry(tid, Some(&Entry::Table(new_def.clone())))?;
            self.truncate_indexes(&new_def)?;
            let files = self.table_files(def.rel)?;
            let mut st = self.st.borrow_mut();
            st.drop_at_commit.extend(files);
            st.targets.remove(&def.rel);
            Ok(())
        })
    }

    /// DROP TABLE: the definition is deleted; the file (and its TOAST relation's) is
    /// dropped at commit.
    pub fn drop_table(&self, table: TableId) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(table, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, def) = self.def(table)?;
            self.lock(name_lock(&def.name), LockMode::Exclusive, LockWait::Block)?;
            self.drop_indexes(table)?;
            self.rewrite_entry(tid, None)?;
            let files = self.table_files(def.rel)?;
            let mut st = self.st.borrow_mut();
            st.drop_at_commit.extend(files);
            st.defs.remove(&table);
            Ok(())
        })
    }

    /// ALTER TABLE ... ADD COLUMN: the column goes at the end; stored rows stay as they are
    /// and read it as NULL ([`TableDef::widen`]), so no row is rewritten.
    pub fn add_column(&self, table: TableId, column: Column) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(table, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, mut def) = self.def(table)?;
            if def.columns.iter().any(|c| c.name == column.name) {
                return Err(Error::DuplicateColumn {
                    what: format!(
                        "column \"{}\" of relation \"{}\" already exists",
                        column.name, def.name
                    ),
                });
            }
            if def.columns.len() >= MAX_COLUMNS {
                return Err(Error::ProgramLimitExceeded {
                    what: format!("tables can have at most {MAX_COLUMNS} columns"),
                });
            }
            Arc::make_mut(&mut def.columns).push(column);
            self.rewrite_entry(tid, Some(&Entry::Table(def)))
        })
    }

    /// ALTER TABLE ... DROP COLUMN: the column is marked dropped and renamed, as
    /// PostgreSQL's `attisdropped` (its place stays, so no row is rewritten), and every index
    /// over it is dropped. Returns the names of the dropped indexes.
    pub fn drop_column(&self, table: TableId, position: usize) -> Result<Vec<String>> {
        self.call(|| {
            self.command();
            self.lock_table_mode(table, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, mut def) = self.def(table)?;
            let col = live_column(&mut def, position)?;
            col.dropped = true;
            col.name = format!("........pg.dropped.{}........", position + 1);
            let mut dropped = Vec::new();
            for index in self.indexes(table)? {
                if index.columns.iter().any(|&c| usize::from(c) == position) {
                    self.drop_index_entry(index.oid)?;
                    dropped.push(index.name.to_string());
                }
            }
            self.rewrite_entry(tid, Some(&Entry::Table(def)))?;
            Ok(dropped)
        })
    }

    /// ALTER TABLE ... ALTER COLUMN ... SET STORAGE: how TOAST stores the column's values
    /// from now on (stored rows stay as they are, as in PostgreSQL).
    pub fn set_storage(&self, table: TableId, position: usize, storage: Storage) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(table, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, mut def) = self.def(table)?;
            live_column(&mut def, position)?.storage = storage;
            self.rewrite_entry(tid, Some(&Entry::Table(def)))
        })
    }

    /// LOCK TABLE: takes `mode` on the table until the end of the transaction; with
    /// `nowait`, fails at once (SQLSTATE 55P03) instead of waiting.
    pub fn lock_table(&self, table: TableId, mode: LockMode, nowait: bool) -> Result<()> {
        self.call(|| {
            let wait = if nowait {
                LockWait::NoWait
            } else {
                LockWait::Block
            };
            self.lock_table_mode(table, mode, wait)?;
            self.def(table).map(|_| ())
        })
    }
}

/// Column `position` of `def` to change, unless there is none or it is dropped (42703).
fn live_column(def: &mut TableDef, position: usize) -> Result<&mut Column> {
    let name = Arc::clone(&def.name);
    Arc::make_mut(&mut def.columns)
        .get_mut(position)
        .filter(|c| !c.dropped)
        .ok_or_else(|| Error::UndefinedColumn {
            name: format!("number {position} of relation \"{name}\""),
        })
}
