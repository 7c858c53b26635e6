//! # btree — B+tree indexes (PostgreSQL's nbtree, simplified)
//!
//! An index is a relation whose main fork holds a Lehman-Yao B+tree of entries
//! `(key, heap TID)`: block 0 is the metapage (root block and level), every other block a
//! tree page. Entries are ordered by key (column by column with [`Value::compare`], NULLs
//! last) and then by heap TID, so every entry is unique and duplicates of a key are ordered
//! by TID (PostgreSQL 12+). Pivots (high keys and internal separators) are full `(key, TID)`
//! copies of the entry they were split at: no suffix truncation. Layouts are in [`page`] and
//! `docs/design.md`; WAL records in [`redo`].
//!
//! ## The Lehman-Yao invariants
//! - Every page but the rightmost of its level has a right-link to its right sibling and a
//!   high key (item 1). Its entries are `>=` its lower bound (the left sibling's high key,
//!   minus infinity on the leftmost page) and `<` its high key.
//! - An internal entry `(K_i, C_i)` points at the page whose lower bound is `K_i`; the first
//!   entry of an internal page has no key (minus infinity) and points at the page whose lower
//!   bound is the parent's. So a search for `x` that lands on a page whose high key is `<= x`
//!   (the page split after its parent was read) finds `x` by moving right.
//! - Splits move the upper half of a page to a *new* page on its right; pages are never
//!   deleted, merged or recycled (PostgreSQL's page deletion is left out): a page emptied by
//!   [`BTree::bulk_delete`] stays in place, and a right-link always leads to a live page.
//! - A split and its parent's downlink are separate WAL records. Between them, and forever if
//!   a crash falls between them, the new page has no downlink: it is reached through its left
//!   sibling's right-link. This is **tolerated everywhere** — search (by moving right),
//!   [`BTree::verify`] (which counts such pages instead of failing), and downlink insertion
//!   (which is idempotent: a parent that already points at the page — by the pivot, or by
//!   its minus-infinity entry if the parent split there since — is left alone). An insert
//!   that moves right across a page to reach its key inserts that page's downlink after its
//!   own insert, so a missing downlink is repaired lazily (PostgreSQL finishes an
//!   `INCOMPLETE_SPLIT` in the same spirit; quire needs no flag). A root split is one record
//!   (both halves, the new root and the metapage), so the root level never lacks a parent.
//!
//! ## Lock order
//! 1. Readers and descending writers hold **one content lock at a time**: read the downlink
//!    or right-link under the page's shared lock, release it, then lock the next page. No
//!    existing parent is ever locked while holding a child: a split releases both halves
//!    before it looks for the parent (only a root split locks a parent, the new root, which
//!    nobody else can reach yet).
//! 2. Within a level, **left before right**: an inserter may hold its leaf while it locks
//!    pages to the right (the unique check reads the right siblings' entries shared; the
//!    insert position may lie right of the first page where the key could be). Nobody waits
//!    for a page while holding a page to its right.
//! 3. A split holds the page being split, then locks the new right page (just allocated,
//!    unreachable by anyone else); the old right sibling is not locked (there are no left-
//!    links to fix). A root split also locks the new root (also new) and **then the
//!    metapage, always last**; descents read the metapage holding nothing else. A descent
//!    usually starts at the root cached in [`roots`] (PostgreSQL's `rd_amcache`) and reads
//!    the metapage only when that page no longer says it is the root at the cached level
//!    (a root split clears the old root's flag under its lock).
//! 4. Vacuum ([`BTree::bulk_delete`]) takes one cleanup lock at a time.
//!
//! Heap probes of the unique check run under the leaf lock(s) of the key's range only (so a
//! [`HeapProbe`] must not wait for anything: it reports [`Probe::InProgress`] instead), and a
//! `MustWait` releases everything before it returns. Buffer I/O (a pin that misses, a split's
//! extension) may happen under these locks: victims are unpinned, hence unlocked, pages.
//!
//! ## Scans and vacuum
//! A scan copies the matching entries of one leaf under its shared lock, remembers the right-
//! link *read with them* (so entries a later split moves right are not returned twice), keeps
//! the pin while it returns them, then moves on. `bulk_delete` takes a cleanup lock
//! ([`PinnedBuffer::lock_for_cleanup`](crate::buffer::PinnedBuffer::lock_for_cleanup)) on
//! every leaf, in block order: it cannot remove an entry a scan still holds a copy of (the
//! scan's pin blocks it), and entries only ever move to new, higher-numbered blocks, which
//! the pass reaches later.
//!
//! ## The WAL rule
//! Every page change is logged through [`Wal::log_page_change`] under the exclusive content
//! locks of every page it touches, after the change: a leaf or internal insert, a split (both
//! halves; the new right half is `will_init`; with a root split also the new root and the
//! metapage), a bulk delete of one page's entries, a build's new pages (whole pages,
//! `will_init`), the metapage. A page rebuilt in memory keeps its LSN until it is logged, so
//! the full-page-image decision sees the real one. [`redo::BTreeRedo`] replays them,
//! idempotently by page LSN, and refuses a malformed record with [`Error::WalCorrupt`].
//!
//! ## Never
//! Never panic on page contents: a page or tuple that is not what it should be is
//! [`Error::CorruptIndex`] naming the block. Never follow more right-links than the relation
//! has blocks (a cycle is corruption).

pub mod build;
mod insert;
pub mod key;
pub mod page;
pub mod redo;
pub mod roots;
mod scan;
mod vacuum;
mod verify;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_crash;

use std::cmp::Ordering;

use crate::buffer::{BufferPool, PinnedBuffer};
use crate::error::{Error, Result};
use crate::page::{OffsetNumber, Tid};

use crate::types::{BlockNumber, BufferTag, Fork, PAGE_SIZE, RelFileLocator, Xid};
use crate::value::{Type, Value};
use crate::wal::{LoggedPage, Wal};
use key::{BadKey, SearchKey};
use page::{encode_tuple, BtPage, Meta, Special, Tuple, LEAF, META_BLOCK, NO_BLOCK, ROOT};
use roots::{Root, RootCache};

pub use build::BuildStats;
pub use scan::IndexScan;
pub use vacuum::BulkDeleteStats;
pub use verify::VerifyReport;

/// An index's definition: its relation, name (for error messages), uniqueness and key types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDesc {
    pub rel: RelFileLocator,
    pub name: String,
    pub unique: bool,
    pub key_types: Vec<Type>,
}

/// One index, as the operations on it see it. The definition is shared (`Arc`), so that a
/// scan can own what it reads by.
#[derive(Clone)]
pub struct BTree<'a> {
    pub pool: &'a BufferPool,
    pub wal: &'a Wal,
    /// The engine's cache of index roots ([`roots`]).
    pub roots: &'a RootCache,
    pub desc: std::sync::Arc<IndexDesc>,
}

/// What the heap says about the row an existing entry points at (for unique checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Deleted by a committed transaction (or never committed): not a conflict.
    Dead,
    /// Visible, or deleted by a transaction that is still running: a conflict.
    Live,
    /// Inserted (or deleted) by a transaction that is still running: wait for it.
    InProgress { xid: Xid },
}

/// The heap side of a unique check.
pub trait HeapProbe {
    fn probe(&self, tid: Tid) -> Result<Probe>;
}

/// The result of [`BTree::insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertOutcome {
    Inserted,
    /// A conflicting inserter is still running: nothing was inserted and no lock is held;
    /// the caller waits for `xid` (its transaction lock) and calls `insert` again.
    MustWait {
        xid: Xid,
    },
}

/// The most levels a tree may have: far more than 2^32 blocks can fill (each level multiplies
/// the entries by at least 2), so exceeding it means a corrupt metapage or a cycle.
const MAX_LEVELS: u16 = 40;

/// A split that still needs its downlink in the parent level.
#[derive(Clone, Debug)]
struct Downlink {
    /// The level of the split page (the downlink goes to `level + 1`).
    level: u16,
    /// The pivot, with the new page as its downlink.
    tuple: Vec<u8>,
}

/// Counts right-link hops and fails once they exceed the relation's size: a longer chain
/// must repeat a page, i.e. the right-links form a cycle.
struct HopLimit {
    hops: u64,
    allowed: u64,
}

impl Default for HopLimit {
    fn default() -> Self {
        // Most walks take a few hops: the relation's size is asked only past these.
        HopLimit {
            hops: 0,
            allowed: 64,
        }
    }
}

impl HopLimit {
    fn step(&mut self, tree: &BTree<'_>, block: BlockNumber) -> Result<()> {
        self.hops += 1;
        if self.hops > self.allowed {
            self.allowed = u64::from(tree.nblocks()?) + 1;
            if self.hops > self.allowed {
                return Err(tree.corrupt(block, "the right-links form a cycle"));
            }
        }
        Ok(())
    }
}

/// What a descent does next on a page.
enum Step {
    Right(BlockNumber),
    Down(BlockNumber),
    Arrived,
    /// The cached root is no longer the root: start again from the metapage.
    StaleRoot,
}

impl<'a> BTree<'a> {
    pub fn new(
        pool: &'a BufferPool,
        wal: &'a Wal,
        roots: &'a RootCache,
        desc: std::sync::Arc<IndexDesc>,
    ) -> Self {
        BTree {
            pool,
            wal,
            roots,
            desc,
        }
    }

    fn rel(&self) -> RelFileLocator {
        self.desc.rel
    }

    fn ncols(&self) -> usize {
        self.desc.key_types.len()
    }

    fn nblocks(&self) -> Result<BlockNumber> {
        self.pool.smgr().nblocks(self.rel(), Fork::Main)
    }

    fn pin(&self, block: BlockNumber) -> Result<PinnedBuffer<'a>> {
        self.pool
            .read_buffer(BufferTag::new(self.rel(), Fork::Main, block))
    }

    fn corrupt(&self, block: BlockNumber, reason: impl Into<String>) -> Error {
        page::corrupt(self.rel(), block, reason)
    }

    fn view<'p>(&self, bytes: &'p [u8; PAGE_SIZE], block: BlockNumber) -> Result<BtPage<'p>> {
        BtPage::new(bytes, self.rel(), block)
    }

    /// [`BadKey`] as the corruption of a page.
    fn bad_key(&self, block: BlockNumber) -> impl Fn(BadKey) -> Error + '_ {
        move |BadKey| self.corrupt(block, "a key on the page is malformed")
    }

    /// Creates the index: the relation file (the file first, then its WAL record, as
    /// [`crate::heap::Heap::create`]), then the metapage and an empty root leaf in one record.
    pub fn create(&self) -> Result<()> {
        let ncols = self.ncols();
        if ncols == 0 || ncols > usize::from(u8::MAX) {
            return Err(Error::ProgramLimitExceeded {
                what: format!("an index must have 1 to 255 key columns, not {ncols}"),
            });
        }
        self.pool.smgr().create(self.rel(), Fork::Main)?;
        crate::recovery::storage::log_create(self.wal, self.rel(), Fork::Main)?;
        // A tree made again in the same file: no descent may start from the old one's root.
        self.roots.forget(self.rel());
        let meta_buf = self.pool.extend(self.rel(), Fork::Main)?;
        let root_buf = self.pool.extend(self.rel(), Fork::Main)?;
        let meta = Meta {
            root: root_buf.tag().block,
            level: 0,
            key_types: self.desc.key_types.clone(),
        };
        if meta_buf.tag().block != META_BLOCK {
            return Err(self.corrupt(META_BLOCK, "a new index file is not empty"));
        }
        let root_special = Special {
            right_link: NO_BLOCK,
            level: 0,
            flags: LEAF | ROOT,
        };
        let root_page =
            page::build_page(root_special, None, &[]).map_err(|e| self.corrupt(meta.root, e))?;
        let mut meta_guard = meta_buf.write();
        let mut root_guard = root_buf.write();
        meta_guard.copy_from_slice(&meta.page()[..]);
        root_guard.copy_from_slice(&root_page[..]);
        self.wal.log_page_change(
            Xid::INVALID,
            redo::BTreeRecord::Create,
            &meta.encode(),
            &mut [
                LoggedPage::will_init(&mut meta_guard),
                LoggedPage::will_init(&mut root_guard),
            ],
        )?;
        Ok(())
    }

    /// The metapage's contents.
    fn read_meta(&self) -> Result<Meta> {
        let buf = self.pin(META_BLOCK)?;
        let g = buf.read();
        let meta = Meta::read(&g, self.rel())?;
        if meta.key_types != self.desc.key_types {
            return Err(self.corrupt(
                META_BLOCK,
                format!(
                    "the metapage's key types {:?} are not the index's {:?}",
                    meta.key_types, self.desc.key_types
                ),
            ));
        }
        if meta.level > MAX_LEVELS {
            return Err(self.corrupt(META_BLOCK, format!("root level {} is absurd", meta.level)));
        }
        Ok(meta)
    }

    /// Checks that `key` has one value of the right type (or NULL) per key column.
    fn check_key(&self, key: &[Value], prefix: bool) -> Result<()> {
        let n = self.ncols();
        if key.len() > n || (!prefix && key.len() != n) {
            return Err(Error::DatatypeMismatch {
                what: format!(
                    "index \"{}\" has {n} key columns, the key has {}",
                    self.desc.name,
                    key.len()
                ),
            });
        }
        for (i, (v, ty)) in key.iter().zip(&self.desc.key_types).enumerate() {
            if v.type_of().is_some_and(|t| t != *ty) {
                return Err(Error::DatatypeMismatch {
                    what: format!(
                        "key column {} of index \"{}\" is of type {}, the value is {:?}",
                        i + 1,
                        self.desc.name,
                        ty.name(),
                        v
                    ),
                });
            }
        }
        Ok(())
    }

    /// The leaf tuple for `(key, tid)`, checked against the size limit.
    fn leaf_tuple(&self, key: &[Value], tid: Tid) -> Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(crate::value::encoded_row_len(key));
        crate::value::encode_row(key, &mut bytes);
        let t = encode_tuple(tid, key.len() as u8, NO_BLOCK, &bytes);
        if t.len() > page::MAX_TUPLE_BYTES {
            return Err(Error::ProgramLimitExceeded {
                what: format!(
                    "index row size {} exceeds btree maximum, {} (index \"{}\")",
                    t.len(),
                    page::MAX_TUPLE_BYTES,
                    self.desc.name
                ),
            });
        }
        Ok(t)
    }

    /// The key values of a tuple.
    fn decode_key(&self, t: &Tuple<'_>, block: BlockNumber) -> Result<Vec<Value>> {
        crate::value::decode_row(t.key, usize::from(t.natts))
            .map_err(|e| self.corrupt(block, format!("a key on the page is malformed: {e}")))
    }

    /// The first data item that is not below `sk` (`item_count + 1` if none): binary search.
    fn lower_bound(&self, p: &BtPage<'_>, sk: &SearchKey<'_>) -> Result<OffsetNumber> {
        let (mut lo, mut hi) = (p.first_data(), p.item_count() + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if sk.compare(&p.tuple(mid)?).map_err(self.bad_key(p.block))? == Ordering::Greater {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The right sibling to move to if `sk` lies beyond this page's high key.
    fn move_right_to(&self, p: &BtPage<'_>, sk: &SearchKey<'_>) -> Result<Option<BlockNumber>> {
        let Some(hk) = p.high_key()? else {
            return Ok(None);
        };
        let beyond = sk.compare(&hk).map_err(self.bad_key(p.block))? == Ordering::Greater;
        Ok(beyond.then_some(p.special.right_link))
    }

    /// The child of an internal page to descend to for `sk`.
    fn child_for(&self, p: &BtPage<'_>, sk: &SearchKey<'_>) -> Result<BlockNumber> {
        let pos = self.lower_bound(p, sk)?;
        if pos <= p.first_data() {
            return Err(p.corrupt("an internal page without a minus-infinity first entry"));
        }
        let t = p.tuple(pos - 1)?;
        if t.downlink == NO_BLOCK {
            return Err(p.corrupt(format!("internal entry {} has no downlink", pos - 1)));
        }
        Ok(t.downlink)
    }

    /// Descends from the root to the page of `level` where `sk` belongs, holding one shared
    /// lock at a time, and returns it pinned but unlocked (the caller locks it and moves
    /// right again if it split meanwhile). Also returns the first page it reached by moving
    /// right, as a downlink that may be missing (for the lazy repair, see the module header).
    fn descend(
        &self,
        sk: &SearchKey<'_>,
        level: u16,
    ) -> Result<(PinnedBuffer<'a>, Option<Downlink>)> {
        // The cached root, checked on its page below; the metapage when none is cached (or
        // the cached one is not high enough for `level`).
        let mut cached = self.roots.get(self.rel()).filter(|r| r.level >= level);
        let mut top = match cached {
            Some(root) => root,
            None => self.root_from_meta(level)?,
        };
        let mut buf = self.pin(top.block)?;
        let mut expected = top.level;
        let mut repair = None;
        let mut hops = HopLimit::default();
        loop {
            let block = buf.tag().block;
            hops.step(self, block)?;
            let step = {
                let g = buf.read();
                let p = self.view(&g, block)?;
                if cached.take().is_some()
                    && !(p.special.is_root() && p.special.level == top.level)
                {
                    Step::StaleRoot
                } else if p.special.level != expected {
                    return Err(p.corrupt(format!(
                        "page at level {} where level {expected} was expected",
                        p.special.level
                    )));
                } else if let Some(right) = self.move_right_to(&p, sk)? {
                    if repair.is_none() && expected < top.level {
                        repair = Some(downlink_for_right_sibling(&p)?);
                    }
                    Step::Right(right)
                } else if expected == level {
                    Step::Arrived
                } else {
                    Step::Down(self.child_for(&p, sk)?)
                }
            };
            match step {
                Step::Arrived => return Ok((buf, repair)),
                Step::Right(next) => buf = self.pin(next)?,
                Step::Down(child) => {
                    expected -= 1;
                    buf = self.pin(child)?;
                }
                Step::StaleRoot => {
                    top = self.root_from_meta(level)?;
                    expected = top.level;
                    buf = self.pin(top.block)?;
                }
            }
        }
    }

    /// The root as the metapage says, checked to reach `level`, and cached for the next
    /// descents.
    fn root_from_meta(&self, level: u16) -> Result<Root> {
        let meta = self.read_meta()?;
        if meta.level < level {
            return Err(self.corrupt(
                META_BLOCK,
                format!("no level {level}: the root is at level {}", meta.level),
            ));
        }
        let root = Root {
            block: meta.root,
            level: meta.level,
        };
        self.roots.set(self.rel(), root);
        Ok(root)
    }
}

/// The downlink of `p`'s right sibling: `p`'s high key (the sibling's lower bound) with the
/// right-link as its downlink, both read under the same lock.
fn downlink_for_right_sibling(p: &BtPage<'_>) -> Result<Downlink> {
    let hk = p.item_bytes(crate::page::FIRST_OFFSET_NUMBER)?;
    Ok(Downlink {
        level: p.special.level,
        tuple: page::with_downlink(hk, p.special.right_link),
    })
}
