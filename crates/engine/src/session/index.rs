//! Indexes as a transaction sees them: CREATE INDEX (an existing table's entries sorted and
//! built bottom-up), DROP INDEX, the entries that inserts and non-HOT updates add (with the
//! unique check, which waits for a conflicting inserter that is still running), and index
//! scans, which read each entry's row in the heap.
//!
//! ## Rules
//! - An index entry points at the root of a HOT chain; a scan follows the chain to the version
//!   its snapshot sees and returns it only if that version's key is the entry's (a *recheck*):
//!   an index built after some HOT updates has one entry per distinct key of a chain, and the
//!   recheck makes each row come back once, from the entry with its own key.
//! - CREATE INDEX holds SHARE on the table (reads go on, writes wait), and indexes every
//!   version some snapshot may still see, so that old snapshots find their rows through it.
//!   A unique index is checked after the build, on the rows visible now.

use std::ops::Bound;

use super::{Sees, Transaction, MAX_CHANGE_ROUNDS};
use crate::btree::{BTree, HeapProbe, IndexDesc, IndexScan, InsertOutcome, Probe};
use crate::catalog::{name_lock, Entry, IndexDef, IndexId, TableDef, TableId, USER_DB};
use crate::error::{Error, Result};
use crate::heap::freeze::xmin_committed;
use crate::heap::{Heap, HeapTuple, Looker, XidOracle};
use crate::page::Tid;

use crate::txn::lock::{LockMode, LockWait};
use crate::txn::{OwnXids, Snapshot};
use crate::types::{RelFileLocator, Xid};
use crate::toast::Toast;
use crate::value::{Row, Value};

/// Are two keys equal, value by value (NaN equal to itself, as index order has it)?
pub(super) fn same_key(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.compare(y).is_eq())
}

/// The key of index `def` in a table's version `t`: only the key's columns are read back
/// from TOAST.
fn key_of_version(toast: &Toast<'_>, def: &IndexDef, t: &HeapTuple) -> Result<Vec<Value>> {
    let row = toast.row_of(t, |i| def.columns.iter().any(|&c| usize::from(c) == i))?;
    Ok(def.key_of(&row))
}

/// The unique check's view of the heap: is some version of the chain at an entry's address,
/// with the same key, alive or about to be?
struct UniqueProbe<'a> {
    heap: Heap<'a>,
    toast: Toast<'a>,
    def: &'a IndexDef,
    key: &'a [Value],
    me: &'a OwnXids,
    oracle: &'a dyn XidOracle,
}

impl HeapProbe for UniqueProbe<'_> {
    fn probe(&self, tid: Tid) -> Result<Probe> {
        for v in self.heap.chain_versions(tid)? {
            if !same_key(&key_of_version(&self.toast, self.def, &v)?, self.key) {
                continue; // another key of the chain (an index built after HOT updates)
            }
            let h = v.header;
            if !self.me.contains(h.xmin) {
                if self.oracle.is_running(h.xmin) {
                    return Ok(Probe::InProgress { xid: h.xmin });
                }
                if !xmin_committed(&h, self.oracle)? {
                    continue; // inserted by an aborted transaction
                }
            }
            if h.xmax_is_deleter() && !self.me.contains(h.xmax) {
                if self.oracle.is_running(h.xmax) {
                    return Ok(Probe::InProgress { xid: h.xmax });
                }
                if self.oracle.did_commit(h.xmax)? {
                    continue; // deleted
                }
            } else if h.xmax_is_deleter() {
                continue; // deleted by this transaction
            }
            return Ok(Probe::Live);
        }
        Ok(Probe::Dead)
    }
}

/// An index scan's rows: each entry's row as the scan's snapshot sees it, in key order.
pub struct IndexRows<'t> {
    tx: &'t Transaction,
    entries: IndexScan<'t>,
    def: IndexDef,
    rel: RelFileLocator,
    /// How stored rows read ([`crate::catalog::RowShape`]).
    shape: crate::catalog::RowShape,
    snapshot: Snapshot,
    own: OwnXids,
    cid: u32,
}

impl IndexRows<'_> {
    fn next_row(&mut self) -> Result<Option<(Tid, Row)>> {
        let heap = self.tx.heap(self.rel);
        let looker = Looker {
            snapshot: &self.snapshot,
            own: &self.own,
            cid: self.cid,
        };
        // Bounded by the index's entries.
        for entry in self.entries.by_ref() {
            let (key, root) = entry?;
            let Some(t) = heap.fetch_chain(root, &looker, &self.tx.engine.txns)? else {
                continue;
            };
            let row = self.shape.apply(self.tx.read_row(self.rel, &t)?);
            if same_key(&self.def.key_of(&row), &key) {
                return Ok(Some((t.tid, row)));
            }
        }
        Ok(None)
    }
}

impl Iterator for IndexRows<'_> {
    type Item = Result<(Tid, Row)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_row() {
            Ok(r) => r.map(Ok),
            Err(e) => {
                self.tx.st.borrow_mut().failed = true;
                Some(Err(e))
            }
        }
    }
}

impl Transaction {
    /// The indexes of table `table` (the caller holds a lock on it).
    pub(super) fn indexes(&self, table: TableId) -> Result<Vec<IndexDef>> {
        if let Some(v) = self.st.borrow().index_defs.get(&table) {
            return Ok(v.clone());
        }
        // By oid, through the shared definition cache (`lookup_oid`), so that a transaction
        // does not read the catalog's rows again for what an earlier one found.
        let mut found = Vec::new();
        for oid in self.engine.catalog.index_oids(table) {
            if let Some((_, Entry::Index(def))) = self.lookup_oid(oid)? {
                if def.table == table {
                    found.push(def);
                }
            }
        }
        found.sort_by_key(|d| d.oid);
        self.st.borrow_mut().index_defs.insert(table, found.clone());
        Ok(found)
    }

    /// The B+tree of index `def` on `table`.
    pub(super) fn btree(&self, def: &IndexDef, table: &TableDef) -> Result<BTree<'_>> {
        let key_type = |&c: &u16| table.columns.get(usize::from(c)).map(|col| col.ty);
        let matches = |d: &IndexDesc| {
            d.rel == def.rel
                && d.unique == def.unique
                && *d.name == *def.name
                && d.key_types.len() == def.columns.len()
                && def
                    .columns
                    .iter()
                    .zip(&d.key_types)
                    .all(|(c, &ty)| key_type(c) == Some(ty))
        };
        let build = || {
            let key_types = def
                .columns
                .iter()
                .map(key_type)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::CorruptIndex {
                    rel: def.rel,
                    block: 0,
                    reason: format!("index \"{}\" names a column its table lacks", def.name),
                })?;
            Ok(IndexDesc {
                rel: def.rel,
                name: def.name.to_string(),
                unique: def.unique,
                key_types,
            })
        };
        let desc = self.engine.catalog.index_desc(def.oid, matches, build)?;
        Ok(BTree::new(
            &self.engine.pool,
            &self.engine.wal,
            &self.engine.roots,
            desc,
        ))
    }

    /// Adds the entries of the version at `tid` holding `row` to every index in `indexes`.
    pub(super) fn add_index_entries(
        &self,
        table: &TableDef,
        indexes: &[IndexDef],
        row: &[Value],
        tid: Tid,
        xid: Xid,
    ) -> Result<()> {
        for def in indexes {
            let tree = self.btree(def, table)?;
            let key = def.key_of(row);
            let own = self.st.borrow().own.clone();
            let probe = UniqueProbe {
                heap: self.heap(table.rel),
                toast: self.toast(table.rel),
                def,
                key: &key,
                me: &own,
                oracle: &self.engine.txns,
            };
            let mut inserted = false;
            for _ in 0..MAX_CHANGE_ROUNDS {
                match tree.insert(&key, tid, xid, Some(&probe))? {
                    InsertOutcome::Inserted => {
                        inserted = true;
                        break;
                    }
                    // A conflicting inserter still runs: its outcome decides ours.
                    InsertOutcome::MustWait { xid: other } => self.wait_for(other)?,
                }
            }
            if !inserted {
                return Err(Error::ProgramLimitExceeded {
                    what: format!("the unique check of \"{}\" kept waiting", def.name),
                });
            }
        }
        Ok(())
    }

    /// The B+trees of a table's indexes (for vacuum's index pass).
    pub(crate) fn index_btrees(&self, table: TableId) -> Result<Vec<BTree<'_>>> {
        self.call(|| {
            let (_, tdef) = self.def(table)?;
            self.indexes(table)?
                .iter()
                .map(|d| self.btree(d, &tdef))
                .collect()
        })
    }

    /// The index named `name`, as this transaction sees the catalog now.
    pub fn index(&self, name: &str) -> Result<IndexId> {
        self.call(|| match self.lookup_name(name)? {
            Some(Entry::Index(i)) => Ok(i.oid),
            _ => Err(Error::UndefinedTable {
                name: name.to_string(),
            }),
        })
    }

    /// The index named `name`, or `None`: a missing index is no error here, so the
    /// transaction goes on (DROP INDEX IF EXISTS).
    pub fn find_index(&self, name: &str) -> Result<Option<IndexId>> {
        self.call(|| match self.lookup_name(name)? {
            Some(Entry::Index(i)) => Ok(Some(i.oid)),
            _ => Ok(None),
        })
    }

    /// The indexes of a table.
    pub fn table_indexes(&self, table: TableId) -> Result<Vec<IndexDef>> {
        self.call(|| {
            self.lock_table_mode(table, LockMode::AccessShare, LockWait::Block)?;
            self.def(table)?;
            self.indexes(table)
        })
    }

    /// CREATE \[UNIQUE\] INDEX `name` ON `table` (`columns`).
    pub fn create_index(
        &self,
        name: &str,
        table: TableId,
        columns: &[&str],
        unique: bool,
    ) -> Result<IndexId> {
        self.call(|| {
            self.command();
            self.lock_table_mode(table, LockMode::Share, LockWait::Block)?;
            let (_, tdef) = self.def(table)?;
            let xid = self.ensure_xid()?;
            self.lock(name_lock(name), LockMode::Exclusive, LockWait::Block)?;
            if self.lookup_name(name)?.is_some() {
                return Err(Error::DuplicateTable { name: name.into() });
            }
            let key = columns
                .iter()
                .map(|c| {
                    let pos = tdef.columns.iter().position(|col| col.name == *c);
                    pos.map(|p| p as u16)
                        .ok_or_else(|| Error::UndefinedColumn { name: (*c).into() })
                })
                .collect::<Result<Vec<u16>>>()?;
            if key.is_empty() {
                return Err(Error::InvalidParameter {
                    what: "an index needs at least one column".into(),
                });
            }
            let oid = self.engine.new_oid();
            let def = IndexDef {
                oid,
                name: name.into(),
                rel: RelFileLocator::new(USER_DB, oid.0),
                table,
                columns: key.into(),
                unique,
            };
            self.build_index(&tdef, &def, xid)?;
            let cid = self.st.borrow().cid;
            let mut hint = None;
            let tid = self
                .catalog_heap()
                .insert(xid, cid, &def.to_row(), &mut hint)?;
            self.engine.catalog.note_entry(tid, &Entry::Index(def));
            self.note_definition_change();
            let mut st = self.st.borrow_mut();
            st.cid_used = true;
            st.index_defs.remove(&table);
            Ok(oid)
        })
    }

    /// Creates index `def`'s file and fills it from `table`'s heap; checks uniqueness.
    fn build_index(&self, table: &TableDef, def: &IndexDef, xid: Xid) -> Result<()> {
        // Built as non-unique: versions only old snapshots see may share a key with live ones.
        let plain = IndexDef {
            unique: false,
            ..def.clone()
        };
        let tree = self.btree(&plain, table)?;
        tree.create()?;
        self.st.borrow_mut().drop_at_abort.push(def.rel);
        let heap = self.heap(table.rel);
        let toast = self.toast(table.rel);
        let horizon = self.engine.txns.global_xmin();
        let nblocks = heap.nblocks()?;
        let mut block = 0;
        let mut pending = std::collections::VecDeque::<(Vec<Value>, Tid)>::new();
        // A page at a time: memory is one page's entries plus the sort's budget.
        let entries = std::iter::from_fn(|| loop {
            if let Some(e) = pending.pop_front() {
                return Some(Ok(e));
            }
            if block >= nblocks {
                return None;
            }
            let chains = match heap.chains_in_block(block, horizon, &self.engine.txns) {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            block += 1;
            for (root, versions) in chains {
                let mut keys: Vec<Vec<Value>> = Vec::new();
                for v in versions {
                    let key = match key_of_version(&toast, def, &v) {
                        Ok(k) => k,
                        Err(e) => return Some(Err(e)),
                    };
                    if !keys.iter().any(|k| same_key(k, &key)) {
                        keys.push(key);
                    }
                }
                pending.extend(keys.into_iter().map(|k| (k, root)));
            }
        });
        tree.build(entries, self.engine.config.maintenance_work_mem_bytes, xid)?;
        if def.unique {
            self.check_unique(table, def, &tree)?;
        }
        Ok(())
    }

    /// A unique index just built: no two rows visible now (or being written by this
    /// transaction) may share a key without NULLs.
    fn check_unique(&self, table: &TableDef, def: &IndexDef, tree: &BTree<'_>) -> Result<()> {
        self.catalog_lookup(|looker| self.check_unique_as(table, def, tree, looker))
    }

    /// [`Self::check_unique`] with the rows `looker` sees.
    fn check_unique_as(
        &self,
        table: &TableDef,
        def: &IndexDef,
        tree: &BTree<'_>,
        looker: &Looker<'_>,
    ) -> Result<()> {
        let heap = self.heap(table.rel);
        let mut last: Option<Vec<Value>> = None;
        for entry in tree.scan(Bound::Unbounded, Bound::Unbounded)? {
            let (key, root) = entry?;
            let Some(t) = heap.fetch_chain(root, looker, &self.engine.txns)? else {
                continue;
            };
            if !same_key(&key_of_version(&self.toast(table.rel), def, &t)?, &key) {
                continue;
            }
            if key.iter().any(Value::is_null) {
                continue; // NULLs are distinct
            }
            if last.as_deref().is_some_and(|l| same_key(l, &key)) {
                let columns = def.columns.iter().filter_map(|&c| table.columns.get(usize::from(c)));
                return Err(Error::UniqueIndexBuild {
                    index: def.name.to_string(),
                    columns: columns.map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
                    key: key
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            last = Some(key);
        }
        Ok(())
    }

    /// TRUNCATE's part for the indexes of `table` (whose definition now names its new,
    /// empty file): each gets a new, empty file too; the old ones are dropped at commit.
    pub(super) fn truncate_indexes(&self, table: &TableDef) -> Result<()> {
        for def in self.indexes(table.oid)? {
            let Some((tid, _)) = self.lookup_oid(def.oid)? else {
                continue;
            };
            let new = IndexDef {
                rel: RelFileLocator::new(USER_DB, self.engine.new_oid().0),
                ..def.clone()
            };
            self.btree(&new, table)?.create()?;
            self.st.borrow_mut().drop_at_abort.push(new.rel);
            self.rewrite_entry(tid, Some(&Entry::Index(new)))?;
            self.st.borrow_mut().drop_at_commit.push(def.rel);
        }
        self.st.borrow_mut().index_defs.remove(&table.oid);
        Ok(())
    }

    /// DROP TABLE's part for the indexes of `table`: their definitions are deleted and their
    /// files dropped at commit.
    pub(super) fn drop_indexes(&self, table: TableId) -> Result<()> {
        for def in self.indexes(table)? {
            if let Some((tid, _)) = self.lookup_oid(def.oid)? {
                self.rewrite_entry(tid, None)?;
                self.st.borrow_mut().drop_at_commit.push(def.rel);
            }
        }
        self.st.borrow_mut().index_defs.remove(&table);
        Ok(())
    }

    /// REINDEX: the index is built again from its table into a new file, which the
    /// definition then names; the old file is dropped at commit, the new one at abort (so a
    /// bloated or damaged index is replaced whole, as PostgreSQL's `reindex_index`). The
    /// table is locked ACCESS EXCLUSIVE, as TRUNCATE locks it: no reader can still be in the
    /// old file when commit drops it. A unique index whose table holds a duplicate is 23505,
    /// as CREATE UNIQUE INDEX.
    pub fn reindex(&self, index: IndexId) -> Result<()> {
        self.call(|| {
            self.command();
            let Some((_, Entry::Index(def))) = self.lookup_oid(index)? else {
                return Err(Error::UndefinedTable {
                    name: format!("index with oid {index}"),
                });
            };
            self.lock_table_mode(def.table, LockMode::AccessExclusive, LockWait::Block)?;
            // Looked up again under the lock: a concurrent DROP or REINDEX may have committed.
            let Some((tid, Entry::Index(def))) = self.lookup_oid(index)? else {
                return Err(Error::UndefinedTable {
                    name: format!("index with oid {index}"),
                });
            };
            let (_, table) = self.def(def.table)?;
            let xid = self.ensure_xid()?;
            let new = IndexDef {
                rel: RelFileLocator::new(USER_DB, self.engine.new_oid().0),
                ..def.clone()
            };
            self.build_index(&table, &new, xid)?;
            self.rewrite_entry(tid, Some(&Entry::Index(new)))?;
            let mut st = self.st.borrow_mut();
            st.drop_at_commit.push(def.rel);
            st.index_defs.remove(&def.table);
            Ok(())
        })
    }

    /// DROP INDEX: the definition is deleted; the file is dropped at commit.
    pub fn drop_index(&self, index: IndexId) -> Result<()> {
        self.call(|| {
            self.command();
            self.drop_index_entry(index)
        })
    }

    /// DROP INDEX's work, for DROP INDEX and for what drops indexes with it (DROP COLUMN).
    pub(super) fn drop_index_entry(&self, index: IndexId) -> Result<()> {
        let Some((tid, Entry::Index(def))) = self.lookup_oid(index)? else {
            return Err(Error::UndefinedTable {
                name: format!("index with oid {index}"),
            });
        };
        self.lock_table_mode(def.table, LockMode::AccessExclusive, LockWait::Block)?;
        self.lock(name_lock(&def.name), LockMode::Exclusive, LockWait::Block)?;
        self.rewrite_entry(tid, None)?;
        let mut st = self.st.borrow_mut();
        st.drop_at_commit.push(def.rel);
        st.index_defs.remove(&def.table);
        Ok(())
    }

    /// Rows through an index: those whose key lies within the bounds (each a bound on the
    /// first key columns), in key order, as this transaction sees them.
    pub fn index_scan(
        &self,
        index: IndexId,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
    ) -> Result<IndexRows<'_>> {
        self.index_scan_as(index, lower, upper, Sees::Transaction)
    }

    /// [`Transaction::index_scan`] through the snapshot `sees` chooses.
    pub fn index_scan_as(
        &self,
        index: IndexId,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
        sees: Sees,
    ) -> Result<IndexRows<'_>> {
        self.call(|| {
            let (snapshot, cid) = self.command_as(sees);
            let Some((_, Entry::Index(def))) = self.lookup_oid(index)? else {
                return Err(Error::UndefinedTable {
                    name: format!("index with oid {index}"),
                });
            };
            self.lock_table_mode(def.table, LockMode::AccessShare, LockWait::Block)?;
            let (_, table) = self.def(def.table)?;
            let entries = self.btree(&def, &table)?.scan(lower, upper)?;
            Ok(IndexRows {
                tx: self,
                entries,
                rel: table.rel,
                shape: table.shape(),
                def,
                snapshot,
                own: self.st.borrow().own.clone(),
                cid,
            })
        })
    }

    /// Every version of `table` some snapshot may see, checked against every index (PostgreSQL's
    /// `amcheck` with `heapallindexed`): each has an entry with its key pointing at its chain,
    /// and each index's structure is sound (`BTree::verify`). Returns the entries checked.
    pub fn verify_indexes(&self, table: TableId) -> Result<u64> {
        self.call(|| {
            self.lock_table_mode(table, LockMode::Share, LockWait::Block)?;
            let (_, tdef) = self.def(table)?;
            let heap = self.heap(tdef.rel);
            let horizon = self.engine.txns.global_xmin();
            let mut checked = 0;
            for def in self.indexes(table)? {
                let tree = self.btree(&def, &tdef)?;
                tree.verify()?;
                for block in 0..heap.nblocks()? {
                    for (root, versions) in
                        heap.chains_in_block(block, horizon, &self.engine.txns)?
                    {
                        for v in versions {
                            Self::check_entry(&tree, &def, &self.toast(tdef.rel), root, &v)?;
                            checked += 1;
                        }
                    }
                }
            }
            Ok(checked)
        })
    }

    fn check_entry(
        tree: &BTree<'_>,
        def: &IndexDef,
        toast: &Toast<'_>,
        root: Tid,
        v: &HeapTuple,
    ) -> Result<()> {
        let key = key_of_version(toast, def, v)?;
        let found = tree
            .scan(Bound::Included(&key), Bound::Included(&key))?
            .any(|e| e.is_ok_and(|(_, tid)| tid == root));
        if found {
            Ok(())
        } else {
            Err(Error::CorruptIndex {
                rel: def.rel,
                block: 0,
                reason: format!(
                    "index \"{}\" lacks the entry of heap version {} (chain {root}) of relation {}",
                    def.name, v.tid, toast.table()
                ),
            })
        }
    }
}
