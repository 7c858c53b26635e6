//! # catalog — tables, stored transactionally
//!
//! Table, index, sequence and view definitions are rows of a system heap table, `quire_class` (relation file
//! `base/0/3`), one version per definition: `(oid, name, relation file number, columns)`.
//! Because it is an ordinary MVCC heap, DDL is transactional for free: CREATE TABLE inserts a
//! row, DROP TABLE deletes it, TRUNCATE updates it to point at a new relation file (as
//! PostgreSQL's `RelationSetNewRelfilenumber`), and an abort makes the change vanish.
//!
//! An in-memory index maps oids and names to the addresses of their catalog versions (all of
//! them, visible or not: visibility is decided at lookup), rebuilt at startup by one scan of
//! the catalog. Lookups use a fresh snapshot, as PostgreSQL's catalog snapshot: a transaction
//! sees the latest committed definitions (and its own), whatever its isolation level.
//!
//! ## Rules
//! - A definition is looked up only after the table lock the operation needs is held
//!   (PostgreSQL's "lock, then look up again"): DDL holds ACCESS EXCLUSIVE, so a definition
//!   cannot change under a transaction that holds any lock on the table.
//! - Creating or dropping a table name takes the name's lock ([`name_lock`]) until the end of
//!   the transaction, standing in for PostgreSQL's unique index on `pg_class(relname)`.
//! - Relation numbers below 16384 are the engine's: 1 and 2 the commit logs, 3 the catalog.
//! - The generation ([`Catalog::generation`]) moves at every catalog write, again when the
//!   writing transaction ends (before its locks go), and at the end of a prepared
//!   transaction that may have written one. Plan caches above keep a plan only while it
//!   stands still, as PostgreSQL's backends drop plans on invalidation messages.
//! - The definition cache ([`Catalog::cached`], PostgreSQL's relcache) keeps what a lookup by
//!   oid found, across transactions, under the generation read *before* that lookup, and
//!   serves it only while the generation is unchanged. Only a transaction that has not
//!   written the catalog itself reads or fills it: its own uncommitted definitions must
//!   reach no one else, and it must see them. At most [`MAX_CACHED_DEFINITIONS`] entries,
//!   none of a table with more than [`MAX_CACHED_COLUMNS`] columns. A table's indexes are
//!   looked up through it too, by the oids the in-memory index lists for the table.
//! - Each thread keeps copies of the definitions it used last ([`LOCAL_DEFINITIONS`] at
//!   most), under the same rule as the shared cache (the generation they were read at), in
//!   front of it: a hit touches no lock and no reference count another core writes. The
//!   copies share nothing with other threads' (their `Arc`s are the thread's own), because
//!   an `Arc` every connection clones is a cache line every statement fights over.
//! - The descriptor cache ([`Catalog::index_desc`]) keeps each index's B-tree descriptor,
//!   per thread likewise; every use compares it with the caller's definition first, so it
//!   needs no generation. Definitions share their names and column lists (`Arc`), so
//!   copying one into a transaction allocates nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::btree::IndexDesc;
use crate::buffer::BufferPool;
use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::hash::{FxBuildHasher, FxHashMap};
use crate::heap::{Heap, Looker, XidOracle};
use crate::padded::CachePadded;
use crate::page::Tid;
pub use crate::sequence::{SeqOptions, SequenceDef};
pub use crate::toast::Storage;

use crate::txn::lock::LockTag;
use crate::types::{Fork, Oid, RelFileLocator};
use crate::value::{Row, Type, Value};
use crate::wal::Wal;

/// The catalog's relation.
pub const CATALOG_REL: RelFileLocator = RelFileLocator {
    db_oid: 0,
    rel_number: 3,
};
/// The database of user tables.
pub const USER_DB: u32 = 1;
/// The first oid (and relation file number) handed out, as in PostgreSQL.
pub const FIRST_USER_OID: Oid = Oid(16384);

/// A table's identity: its oid, which outlives TRUNCATE (the relation file does not). Tables
/// and indexes share one oid space (the catalog finds either by oid), as in PostgreSQL.
pub type TableId = Oid;

/// A column of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub ty: Type,
    /// Dropped (PostgreSQL's `attisdropped`): it keeps its place, so that stored rows need
    /// no rewrite; its values are never read again, and new rows hold NULL there.
    pub dropped: bool,
    /// How TOAST may store its values (PostgreSQL's `attstorage`).
    pub storage: Storage,
}

impl Column {
    pub fn new(name: &str, ty: Type) -> Self {
        Column {
            name: name.to_string(),
            ty,
            dropped: false,
            storage: Storage::default_for(ty),
        }
    }
}

/// Marks a dropped column in the type byte of a catalog row's column list.
const COLUMN_DROPPED: u8 = 0x80;
/// The bits of the type byte that hold a storage other than the type's default (0).
const COLUMN_STORAGE: u8 = 0x70;
const STORAGE_SHIFT: u8 = 4;
/// The storages by their code in [`COLUMN_STORAGE`] (1 and up).
const STORAGES: [Storage; 4] = [
    Storage::Plain,
    Storage::Main,
    Storage::External,
    Storage::Extended,
];

/// The code of `c`'s storage in its type byte: 0 for its type's default.
fn storage_bits(c: &Column) -> u8 {
    if c.storage == Storage::default_for(c.ty) {
        return 0;
    }
    let code = STORAGES.iter().position(|s| *s == c.storage).unwrap_or(0) as u8 + 1;
    code << STORAGE_SHIFT
}

/// A table's definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDef {
    pub oid: TableId,
    /// Shared, as `columns`: cloning a definition allocates nothing.
    pub name: Arc<str>,
    /// Where its rows are now.
    pub rel: RelFileLocator,
    /// Shared: a definition is copied into every transaction that uses it, so its columns
    /// are counted, not copied (change them with `Arc::make_mut`).
    pub columns: Arc<Vec<Column>>,
}

impl TableDef {
    /// The catalog row of this definition.
    pub fn to_row(&self) -> Row {
        let mut cols = Vec::new();
        for c in self.columns.iter() {
            let dropped = if c.dropped { COLUMN_DROPPED } else { 0 };
            cols.push(c.ty.to_u8() | dropped | storage_bits(c));
            cols.extend_from_slice(&(c.name.len() as u16).to_le_bytes());
            cols.extend_from_slice(c.name.as_bytes());
        }
        vec![
            Value::Int(self.oid.0.cast_signed()),
            Value::Text(self.name.to_string()),
            Value::Int(self.rel.rel_number.cast_signed()),
            Value::Bytea(cols),
        ]
    }

    /// Decodes a catalog row; `None` if it is not one.
    pub fn from_row(row: &[Value]) -> Option<TableDef> {
        let [Value::Int(oid), Value::Text(name), Value::Int(number), Value::Bytea(cols)] = row
        else {
            return None;
        };
        let mut columns = Vec::new();
        let mut r = Reader::new(cols);
        // Bounded by the bytes: each column takes at least three.
        while r.remaining() > 0 {
            let byte = r.u8()?;
            let ty = Type::from_u8(byte & !(COLUMN_DROPPED | COLUMN_STORAGE))?;
            let name = std::str::from_utf8(r.bytes_u16()?).ok()?;
            let storage = match (byte & COLUMN_STORAGE) >> STORAGE_SHIFT {
                0 => Storage::default_for(ty),
                code => *STORAGES.get(usize::from(code) - 1)?,
            };
            columns.push(Column {
                dropped: byte & COLUMN_DROPPED != 0,
                storage,
                ..Column::new(name, ty)
            });
        }
        Some(TableDef {
            oid: Oid(u64::try_from(*oid).ok()?),
            name: name.as_str().into(),
            rel: RelFileLocator::new(USER_DB, u64::try_from(*number).ok()?),
            columns: Arc::new(columns),
        })
    }

    /// A stored row as the table reads it now ([`RowShape::apply`]).
    pub fn widen(&self, row: Row) -> Row {
        self.shape().apply(row)
    }

    /// How stored rows of this table are read.
    pub fn shape(&self) -> RowShape {
        RowShape {
            width: self.columns.len(),
            dropped: (0..self.columns.len())
                .filter(|&i| self.columns[i].dropped)
                .collect(),
        }
    }

    /// Checks a row against the columns: arity and types (NULL fits every column; a
    /// dropped column takes nothing else).
    pub fn check_row(&self, row: &[Value]) -> Result<()> {
        if row.len() != self.columns.len() {
            return Err(Error::DatatypeMismatch {
                what: format!(
                    "table \"{}\" has {} columns, the row has {} values",
                    self.name,
                    self.columns.len(),
                    row.len()
                ),
            });
        }
        for (v, c) in row.iter().zip(self.columns.iter()) {
            if c.dropped && !v.is_null() {
                return Err(Error::DatatypeMismatch {
                    what: format!("a value for a dropped column of table \"{}\"", self.name),
                });
            }
            if let Some(t) = v.type_of() {
                if t != c.ty {
                    return Err(Error::DatatypeMismatch {
                        what: format!(
                            "column \"{}\" is of type {} but the value is of type {}",
                            c.name,
                            c.ty.name(),
                            t.name()
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

/// How a table's stored rows are read: a row stored before ADD COLUMN lacks the columns
/// added since, which read as NULL (PostgreSQL's tuples shorter than their relation's
/// `natts`); a dropped column reads as NULL whatever a row stored there.
#[derive(Clone, Debug, Default)]
pub struct RowShape {
    width: usize,
    /// Positions of dropped columns (empty, and unallocated, for most tables).
    dropped: Vec<usize>,
}

impl RowShape {
    pub fn apply(&self, mut row: Row) -> Row {
        if row.len() < self.width {
            row.resize(self.width, Value::Null);
        }
        for &i in &self.dropped {
            if let Some(v) = row.get_mut(i) {
                *v = Value::Null;
            }
        }
        row
    }
}

/// An index's identity: its oid.
pub type IndexId = Oid;

/// An index's definition: a B+tree over some columns of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    pub oid: IndexId,
    /// Shared, as `columns`: cloning a definition allocates nothing.
    pub name: Arc<str>,
    /// Where its pages are now.
    pub rel: RelFileLocator,
    pub table: TableId,
    /// The key: positions of the table's columns, in key order.
    pub columns: Arc<[u16]>,
    pub unique: bool,
}

const INDEX_UNIQUE: u8 = 0x1;

impl IndexDef {
    /// The catalog row of this definition (five values: tables have four).
    pub fn to_row(&self) -> Row {
        let mut spec = vec![if self.unique { INDEX_UNIQUE } else { 0 }];
        for c in self.columns.iter() {
            spec.extend_from_slice(&c.to_le_bytes());
        }
        vec![
            Value::Int(self.oid.0.cast_signed()),
            Value::Text(self.name.to_string()),
            Value::Int(self.rel.rel_number.cast_signed()),
            Value::Int(self.table.0.cast_signed()),
            Value::Bytea(spec),
        ]
    }

    /// Decodes a catalog row; `None` if it is not an index's.
    pub fn from_row(row: &[Value]) -> Option<IndexDef> {
        let [Value::Int(oid), Value::Text(name), Value::Int(number), Value::Int(table), Value::Bytea(spec)] =
            row
        else {
            return None;
        };
        let mut r = Reader::new(spec);
        let flags = r.u8()?;
        if !r.remaining().is_multiple_of(2) || r.remaining() == 0 {
            return None;
        }
        let columns = (0..r.remaining() / 2)
            .map(|_| r.u16())
            .collect::<Option<_>>()?;
        Some(IndexDef {
            oid: Oid(u64::try_from(*oid).ok()?),
            name: name.as_str().into(),
            rel: RelFileLocator::new(USER_DB, u64::try_from(*number).ok()?),
            table: Oid(u64::try_from(*table).ok()?),
            columns,
            unique: flags & INDEX_UNIQUE != 0,
        })
    }

    /// The key of `row` (a row of the table) in this index.
    pub fn key_of(&self, row: &[Value]) -> Vec<Value> {
        self.columns
            .iter()
            .map(|&c| row.get(usize::from(c)).cloned().unwrap_or(Value::Null))
            .collect()
    }
}

/// The fourth value of a sequence's catalog row (an index has its table's oid there).
const SEQUENCE_KIND: &str = "S";

impl SequenceDef {
    /// The catalog row of this definition: `(oid, name, relation file number, "S",
    /// options)`.
    pub fn to_row(&self) -> Row {
        vec![
            Value::Int(self.oid.0.cast_signed()),
            Value::Text(self.name.clone()),
            Value::Int(self.rel.rel_number.cast_signed()),
            Value::Text(SEQUENCE_KIND.into()),
            Value::Bytea(self.options.encode()),
        ]
    }

    /// Decodes a catalog row; `None` if it is not a sequence's.
    pub fn from_row(row: &[Value]) -> Option<SequenceDef> {
        let [Value::Int(oid), Value::Text(name), Value::Int(number), Value::Text(kind), Value::Bytea(options)] =
            row
        else {
            return None;
        };
        if kind != SEQUENCE_KIND {
            return None;
        }
        Some(SequenceDef {
            oid: Oid(u64::try_from(*oid).ok()?),
            name: name.clone(),
            rel: RelFileLocator::new(USER_DB, u64::try_from(*number).ok()?),
            options: SeqOptions::decode(options)?,
        })
    }
}

/// The fourth value of a view's catalog row.
const VIEW_KIND: &str = "V";

/// A view's definition: a name in the relations' namespace, with no relation file. Its
/// body is the SQL layer's (the query and its columns, in that layer's own encoding); the
/// engine only stores it, transactionally, as it stores every definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewDef {
    pub oid: Oid,
    pub name: String,
    pub body: Vec<u8>,
}

impl ViewDef {
    /// The catalog row of this definition: `(oid, name, 0, "V", body)`.
    pub fn to_row(&self) -> Row {
        vec![
            Value::Int(self.oid.0.cast_signed()),
            Value::Text(self.name.clone()),
            Value::Int(0),
            Value::Text(VIEW_KIND.into()),
            Value::Bytea(self.body.clone()),
        ]
    }

    /// Decodes a catalog row; `None` if it is not a view's.
    pub fn from_row(row: &[Value]) -> Option<ViewDef> {
        let [Value::Int(oid), Value::Text(name), Value::Int(0), Value::Text(kind), Value::Bytea(body)] =
            row
        else {
            return None;
        };
        if kind != VIEW_KIND {
            return None;
        }
        Some(ViewDef {
            oid: Oid(u64::try_from(*oid).ok()?),
            name: name.clone(),
            body: body.clone(),
        })
    }
}

/// A catalog row: a table's, an index's, a sequence's or a view's definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Table(TableDef),
    Index(IndexDef),
    Sequence(SequenceDef),
    View(ViewDef),
}

impl Entry {
    pub fn from_row(row: &[Value]) -> Option<Entry> {
        TableDef::from_row(row)
            .map(Entry::Table)
            .or_else(|| IndexDef::from_row(row).map(Entry::Index))
            .or_else(|| SequenceDef::from_row(row).map(Entry::Sequence))
            .or_else(|| ViewDef::from_row(row).map(Entry::View))
    }

    pub fn oid(&self) -> Oid {
        match self {
            Entry::Table(t) => t.oid,
            Entry::Index(i) => i.oid,
            Entry::Sequence(s) => s.oid,
            Entry::View(v) => v.oid,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Entry::Table(t) => &t.name,
            Entry::Index(i) => &i.name,
            Entry::Sequence(s) => &s.name,
            Entry::View(v) => &v.name,
        }
    }

    pub fn rel(&self) -> RelFileLocator {
        match self {
            Entry::Table(t) => t.rel,
            Entry::Index(i) => i.rel,
            Entry::Sequence(s) => s.rel,
            // No file: relation number 0 is none (the engine's own start at 1).
            Entry::View(_) => RelFileLocator::new(USER_DB, 0),
        }
    }

    pub fn to_row(&self) -> Row {
        match self {
            Entry::Table(t) => t.to_row(),
            Entry::Index(i) => i.to_row(),
            Entry::Sequence(s) => s.to_row(),
            Entry::View(v) => v.to_row(),
        }
    }
}

/// The lock that serialises creating and dropping one table name.
pub fn name_lock(name: &str) -> LockTag {
    LockTag::Relation {
        db_oid: u32::MAX,
        rel_oid: Oid(crate::hash::hash_one(&name)),
    }
}

#[derive(Default)]
struct Index {
    versions: FxHashMap<Oid, Vec<Tid>>,
    names: HashMap<String, Vec<Oid>>,
    /// A table's indexes (every oid ever noted; visibility decides at lookup).
    table_indexes: FxHashMap<TableId, Vec<IndexId>>,
}

/// A definition as a lookup found it: the generation it was read at, its version, itself.
type Cached = (u64, Tid, Entry);

/// The catalog's in-memory index.
pub struct Catalog {
    /// Tells this catalog's entries in a thread's caches from another's (tests open many
    /// databases on one thread, each with its own generations).
    id: u64,
    index: RwLock<Index>,
    /// Bumped whenever a definition may have changed for some transaction: when a DDL
    /// writes a catalog row (its own transaction sees it at once) and again when that
    /// transaction ends (everyone else sees it then). Plan caches compare it, as
    /// PostgreSQL's backends take invalidation messages. Read by every statement, written
    /// only by DDL: on a line of its own, away from the lock words below that every
    /// statement writes when it read-locks them.
    generation: CachePadded<AtomicU64>,
    /// Definitions by oid with the generation they were looked up at (see the rules).
    cache: CachePadded<RwLock<FxHashMap<Oid, Cached>>>,
}

/// The next catalog's [`Catalog::id`].
static NEXT_CATALOG_ID: AtomicU64 = AtomicU64::new(0);

/// Most definitions, and most index descriptors, a thread keeps (see the rules).
pub const LOCAL_DEFINITIONS: usize = 64;

/// A thread's copies of definitions and descriptors, by catalog and oid.
#[derive(Default)]
struct Local {
    definitions: FxHashMap<(u64, Oid), Cached>,
    descs: FxHashMap<(u64, IndexId), Arc<IndexDesc>>,
}

std::thread_local! {
    static LOCAL: std::cell::RefCell<Local> = std::cell::RefCell::default();
}

/// Reads the thread's caches; `None` once the thread is tearing down its locals (nothing is
/// cached then).
fn with_local<R>(f: impl FnOnce(&mut Local) -> Option<R>) -> Option<R> {
    LOCAL
        .try_with(|l| l.try_borrow_mut().ok().and_then(|mut l| f(&mut l)))
        .ok()
        .flatten()
}

/// Inserts into a thread's bounded map, starting it over when it is full.
fn keep_local<K: std::hash::Hash + Eq, V>(map: &mut FxHashMap<K, V>, key: K, value: V) {
    if map.len() >= LOCAL_DEFINITIONS && !map.contains_key(&key) {
        map.clear();
    }
    map.insert(key, value);
    assert!(map.len() <= LOCAL_DEFINITIONS, "a thread's cache over its bound");
}

impl Entry {
    /// A copy that shares no `Arc` with `self`: for a thread's own cache.
    fn unshared(&self) -> Entry {
        match self {
            Entry::Table(t) => Entry::Table(TableDef {
                name: Arc::from(&*t.name),
                columns: Arc::new(t.columns.as_ref().clone()),
                ..t.clone()
            }),
            Entry::Index(i) => Entry::Index(IndexDef {
                name: Arc::from(&*i.name),
                columns: Arc::from(&*i.columns),
                ..i.clone()
            }),
            Entry::Sequence(q) => Entry::Sequence(q.clone()),
            Entry::View(v) => Entry::View(v.clone()),
        }
    }
}

/// Most definitions [`Catalog::cached`] keeps: a full cache first drops what is stale,
/// else starts over.
pub const MAX_CACHED_DEFINITIONS: usize = 4096;
/// A table of more columns is not kept (looked up each time instead), so that the cache's
/// memory stays bounded (a few tens of bytes per column: at most some 20 MB) whatever the
/// definitions.
pub const MAX_CACHED_COLUMNS: usize = 100;

impl Catalog {
    /// The catalog's heap.
    pub fn heap<'a>(pool: &'a BufferPool, wal: &'a Wal) -> Heap<'a> {
        Heap::new(pool, wal, CATALOG_REL)
    }

    /// Creates the catalog's file if missing (a new data directory) and indexes every
    /// version in it. Returns the catalog and one past the largest oid it mentions.
    pub fn load(pool: &BufferPool, wal: &Wal) -> Result<(Catalog, Oid)> {
        let smgr = pool.smgr();
        if !smgr.exists(CATALOG_REL, Fork::Main)? {
            Self::heap(pool, wal).create()?;
        }
        let heap = Self::heap(pool, wal);
        let catalog = Catalog {
            id: NEXT_CATALOG_ID.fetch_add(1, Ordering::Relaxed),
            index: RwLock::new(Index::default()),
            generation: CachePadded(AtomicU64::new(0)),
            cache: CachePadded(RwLock::new(FxHashMap::default())),
        };
        let mut next_oid = FIRST_USER_OID;
        for block in 0..heap.nblocks()? {
            for t in heap.all_in_block(block)? {
                let entry =
                    Entry::from_row(&t.row(CATALOG_REL)?).ok_or_else(|| Error::CorruptTuple {
                        rel: CATALOG_REL,
                        tid: t.tid,
                        reason: "not a catalog row".into(),
                    })?;
                next_oid = next_oid
                    .max(entry.oid().next())
                    .max(Oid(entry.rel().rel_number + 1));
                catalog.note_entry(t.tid, &entry);
            }
        }
        Ok((catalog, next_oid))
    }

    /// The definitions' generation: unchanged means no definition changed for anyone since
    /// it was read.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Announces that definitions may have changed (a catalog write, or the end of a
    /// transaction that made one).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The definition of `oid` as a lookup at `generation` (the current one, just read by
    /// the caller) found it, if it was kept. For transactions that wrote no catalog row.
    pub fn cached(&self, oid: Oid, generation: u64) -> Option<(Tid, Entry)> {
        let key = (self.id, oid);
        let local = with_local(|l| match l.definitions.get(&key) {
            Some((g, tid, entry)) if *g == generation => Some((*tid, entry.clone())),
            _ => None,
        });
        if local.is_some() {
            return local;
        }
        let (tid, entry) = {
            let cache = self.cache.read();
            let (g, tid, entry) = cache.get(&oid)?;
            (*g == generation).then(|| (*tid, entry.unshared()))?
        };
        self.keep_locally(generation, tid, &entry);
        Some((tid, entry))
    }

    /// Keeps a thread's copy of a definition (`entry` must share nothing: see
    /// [`Entry::unshared`]).
    fn keep_locally(&self, generation: u64, tid: Tid, entry: &Entry) {
        let key = (self.id, entry.oid());
        with_local(|l| {
            keep_local(&mut l.definitions, key, (generation, tid, entry.clone()));
            Some(())
        });
    }

    /// Keeps what a lookup of `entry.oid()` found, `generation` read before the lookup
    /// began (so a definition changed meanwhile is never served: the generation moved).
    pub fn remember(&self, generation: u64, tid: Tid, entry: &Entry) {
        if matches!(entry, Entry::Table(t) if t.columns.len() > MAX_CACHED_COLUMNS) {
            return;
        }
        let mut cache = self.cache.write();
        if cache.len() >= MAX_CACHED_DEFINITIONS && !cache.contains_key(&entry.oid()) {
            let now = self.generation();
            cache.retain(|_, (g, _, _)| *g == now);
            if cache.len() >= MAX_CACHED_DEFINITIONS {
                cache.clear();
            }
        }
        cache.insert(entry.oid(), (generation, tid, entry.clone()));
        assert!(
            cache.len() <= MAX_CACHED_DEFINITIONS,
            "definition cache over its bound"
        );
        drop(cache);
        self.keep_locally(generation, tid, &entry.unshared());
    }

    /// The B-tree descriptor of index `oid`: the one this thread kept, if `matches` accepts
    /// it (it agrees with the caller's definition), else one `build` makes, kept for the
    /// thread's next scan. Saves each index scan the descriptor's allocations. At most
    /// [`LOCAL_DEFINITIONS`] are kept per thread.
    pub fn index_desc(
        &self,
        oid: IndexId,
        matches: impl Fn(&IndexDesc) -> bool,
        build: impl FnOnce() -> Result<IndexDesc>,
    ) -> Result<Arc<IndexDesc>> {
        let key = (self.id, oid);
        let kept = with_local(|l| l.descs.get(&key).filter(|d| matches(d)).cloned());
        if let Some(d) = kept {
            return Ok(d);
        }
        let desc = Arc::new(build()?);
        with_local(|l| {
            keep_local(&mut l.descs, key, Arc::clone(&desc));
            Some(())
        });
        Ok(desc)
    }

    /// Records that a version of a table's definition lies at `tid`.
    pub fn note(&self, tid: Tid, def: &TableDef) {
        self.note_entry(tid, &Entry::Table(def.clone()));
    }

    /// Records that a version of a definition lies at `tid`.
    pub fn note_entry(&self, tid: Tid, entry: &Entry) {
        let mut g = self.index.write();
        let oid = entry.oid();
        let tids = g.versions.entry(oid).or_default();
        if !tids.contains(&tid) {
            tids.push(tid);
        }
        let oids = g.names.entry(entry.name().to_string()).or_default();
        if !oids.contains(&oid) {
            oids.push(oid);
        }
        if let Entry::Index(i) = entry {
            let of_table = g.table_indexes.entry(i.table).or_default();
            if !of_table.contains(&oid) {
                of_table.push(oid);
            }
        }
    }

    /// After a vacuum of the catalog: forgets the addresses that no longer lead to a version
    /// of their definition (vacuum freed them; a new row may reuse them), and the oids left
    /// with none, so that the index holds no more than the catalog does. Returns how many
    /// addresses it forgot and how many it keeps.
    pub fn forget_vacuumed(&self, heap: &Heap<'_>) -> Result<(usize, usize)> {
        // Under the write lock throughout: a definition noted meanwhile could otherwise reuse
        // an address judged stale. DDL notes after its heap change, never holding a page.
        let mut g = self.index.write();
        let mut kept: FxHashMap<Oid, Vec<Tid>> =
            FxHashMap::with_capacity_and_hasher(g.versions.len(), FxBuildHasher::default());
        let mut forgotten = 0;
        for (&oid, tids) in &g.versions {
            let mut keep = Vec::with_capacity(tids.len());
            for &tid in tids {
                let holds_oid = match heap.fetch(tid)? {
                    Some(t) => {
                        Entry::from_row(&t.row(CATALOG_REL)?).is_some_and(|e| e.oid() == oid)
                    }
                    None => false,
                };
                if holds_oid {
                    keep.push(tid);
                } else {
                    forgotten += 1;
                }
            }
            if !keep.is_empty() {
                kept.insert(oid, keep);
            }
        }
        let kept_addresses = kept.values().map(Vec::len).sum();
        g.versions = kept;
        let Index {
            versions,
            names,
            table_indexes,
        } = &mut *g;
        for oids in names.values_mut() {
            oids.retain(|oid| versions.contains_key(oid));
        }
        names.retain(|_, oids| !oids.is_empty());
        for oids in table_indexes.values_mut() {
            oids.retain(|oid| versions.contains_key(oid));
        }
        table_indexes.retain(|table, oids| !oids.is_empty() && versions.contains_key(table));
        Ok((forgotten, kept_addresses))
    }

    /// The definition (table or index) of `oid` that `looker` sees, with its address.
    pub fn entry(
        &self,
        heap: &Heap<'_>,
        oid: Oid,
        looker: &Looker<'_>,
        oracle: &dyn XidOracle,
    ) -> Result<Option<(Tid, Entry)>> {
        let tids = self
            .index
            .read()
            .versions
            .get(&oid)
            .cloned()
            .unwrap_or_default();
        for tid in tids {
            let Some(t) = heap.fetch(tid)? else { continue };
            if !looker.sees(&t.header, oracle)? {
                continue;
            }
            // A line pointer reused by another relation's row is not ours. The address is
            // the version's own (a redirect left by pruning leads to it).
            if let Some(e) = Entry::from_row(&t.row(CATALOG_REL)?).filter(|e| e.oid() == oid) {
                return Ok(Some((t.tid, e)));
            }
        }
        Ok(None)
    }

    /// Every index oid ever recorded for `table`, visible to a given transaction or not:
    /// the candidates a lookup by oid then checks.
    pub fn index_oids(&self, table: TableId) -> Vec<IndexId> {
        self.index
            .read()
            .table_indexes
            .get(&table)
            .cloned()
            .unwrap_or_default()
    }

    /// The definition (table or index: they share one namespace, as in PostgreSQL) named
    /// `name` that `looker` sees.
    pub fn entry_by_name(
        &self,
        heap: &Heap<'_>,
        name: &str,
        looker: &Looker<'_>,
        oracle: &dyn XidOracle,
    ) -> Result<Option<(Tid, Entry)>> {
        let oids = self
            .index
            .read()
            .names
            .get(name)
            .cloned()
            .unwrap_or_default();
        for oid in oids {
            if let Some((tid, e)) = self.entry(heap, oid, looker, oracle)? {
                if e.name() == name {
                    return Ok(Some((tid, e)));
                }
            }
        }
        Ok(None)
    }

    /// The table named `name` that `looker` sees.
    pub fn by_name(
        &self,
        heap: &Heap<'_>,
        name: &str,
        looker: &Looker<'_>,
        oracle: &dyn XidOracle,
    ) -> Result<Option<(Tid, TableDef)>> {
        Ok(match self.entry_by_name(heap, name, looker, oracle)? {
            Some((tid, Entry::Table(t))) => Some((tid, t)),
            _ => None,
        })
    }

    /// Every table definition `looker` sees, by name.
    pub fn list(
        &self,
        heap: &Heap<'_>,
        looker: &Looker<'_>,
        oracle: &dyn XidOracle,
    ) -> Result<Vec<TableDef>> {
        Ok(self
            .list_entries(heap, looker, oracle)?
            .into_iter()
            .filter_map(|e| match e {
                Entry::Table(t) => Some(t),
                _ => None,
            })
            .collect())
    }

    /// Every definition (tables, indexes, sequences) `looker` sees, by name.
    pub fn list_entries(
        &self,
        heap: &Heap<'_>,
        looker: &Looker<'_>,
        oracle: &dyn XidOracle,
    ) -> Result<Vec<Entry>> {
        let oids: Vec<Oid> = self.index.read().versions.keys().copied().collect();
        let mut out = Vec::new();
        for oid in oids {
            if let Some((_, e)) = self.entry(heap, oid, looker, oracle)? {
                out.push(e);
            }
        }
        out.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_definitions_round_trip_and_differ_from_tables() {
        let def = IndexDef {
            oid: Oid(16500),
            name: "accounts_pkey".into(),
            rel: RelFileLocator::new(USER_DB, 16501),
            table: Oid(16400),
            columns: vec![0, 2].into(),
            unique: true,
        };
        let row = def.to_row();
        assert_eq!(IndexDef::from_row(&row), Some(def.clone()));
        assert_eq!(TableDef::from_row(&row), None);
        assert_eq!(Entry::from_row(&row), Some(Entry::Index(def.clone())));
        assert_eq!(
            def.key_of(&[Value::Int(1), Value::Null, Value::Text("x".into())]),
            vec![Value::Int(1), Value::Text("x".into())]
        );
        let mut bad = row.clone();
        bad[4] = Value::Bytea(vec![1, 0]);
        assert_eq!(IndexDef::from_row(&bad), None, "an odd column list");
    }

    #[test]
    fn sequence_definitions_round_trip_and_differ_from_the_others() {
        let def = SequenceDef {
            oid: Oid(16600),
            name: "t_id_seq".into(),
            rel: RelFileLocator::new(USER_DB, 16600),
            options: SeqOptions {
                cycle: true,
                ..SeqOptions::default()
            },
        };
        let row = def.to_row();
        assert_eq!(Entry::from_row(&row), Some(Entry::Sequence(def.clone())));
        let view = ViewDef {
            oid: Oid(16600),
            name: "v".into(),
            body: vec![1, 2, 3],
        };
        assert_eq!(Entry::from_row(&view.to_row()), Some(Entry::View(view.clone())));
        assert_eq!(SequenceDef::from_row(&view.to_row()), None, "a view is no sequence");
        assert_eq!(IndexDef::from_row(&row), None);
        assert_eq!(TableDef::from_row(&row), None);
        let mut bad = row.clone();
        bad[3] = Value::Text("X".into());
        assert_eq!(Entry::from_row(&bad), None, "another kind");
        let mut bad = row;
        bad[4] = Value::Bytea(vec![1, 2, 3]);
        assert_eq!(Entry::from_row(&bad), None, "options too short");
    }

    #[test]
    fn definitions_round_trip_through_catalog_rows() {
        let def = TableDef {
            oid: Oid(16400),
            name: "accounts".into(),
            rel: RelFileLocator::new(USER_DB, 16420),
            columns: Arc::new(vec![
                Column::new("id", Type::Int),
                Column::new("owner", Type::Text),
            ]),
        };
        assert_eq!(TableDef::from_row(&def.to_row()), Some(def.clone()));
        // A dropped column keeps its place and its flag; its value reads as NULL and a
        // row shorter than the table reads NULL for the columns added since.
        let mut with_dropped = def.clone();
        let columns = Arc::make_mut(&mut with_dropped.columns);
        columns[1].dropped = true;
        columns.push(Column::new("added", Type::Int));
        assert_eq!(
            TableDef::from_row(&with_dropped.to_row()),
            Some(with_dropped.clone())
        );
        assert_eq!(
            with_dropped.widen(vec![Value::Int(1), Value::Text("x".into())]),
            vec![Value::Int(1), Value::Null, Value::Null]
        );
        assert!(with_dropped
            .check_row(&[Value::Int(1), Value::Text("x".into()), Value::Null])
            .is_err());
        let mut row = def.to_row();
        row[3] = Value::Bytea(vec![2, 9, 0]);
        assert_eq!(TableDef::from_row(&row), None);
        assert!(def.check_row(&[Value::Int(1), Value::Null]).is_ok());
        assert_eq!(
            def.check_row(&[Value::Int(1)]).unwrap_err().sqlstate(),
            "42804"
        );
        assert!(def
            .check_row(&[Value::Text("x".into()), Value::Null])
            .is_err());
    }
}
