//! CREATE INDEX on an existing table: sort the entries (an external merge sort through the
//! [`Vfs`] when they exceed the memory budget), then build the tree bottom-up from full
//! pages, as PostgreSQL's `nbtsort.c`. Every page is WAL-logged whole (`will_init`), eight
//! to a record, and the metapage last, so a crash after the build's WAL is flushed keeps the
//! index, and a crash before it leaves an index whose creator never committed.
//!
//! Sort runs are files `<data>/base/pgsql_tmp/quire_sort_<rel>_<n>_<run>`, removed when the
//! build ends (a crash leaves them behind: startup does not clean the directory yet). A run
//! holds a file descriptor only while it is written, and a merge opens each run for each
//! buffer it reads back (32 KiB), so a build holds two descriptors at most, however many
//! runs it merges: the engine's reserve covers them ([`crate::vfs::fd`]). PostgreSQL's
//! temporary files are virtual descriptors, closed under pressure, to the same end.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use super::key::{check_key, compare_keys, compare_tuples, display_key};
use super::page::{
    build_page, item_cost, minus_infinity, with_downlink, Meta, Special, Tuple, ITEM_SPACE_BYTES,
    LEAF, NO_BLOCK, ROOT,
};
use super::redo::{self, PAGES_PER_RECORD};
use super::{BTree, MAX_LEVELS};
use crate::buffer::{PageWriteGuard, ReadMode};
use crate::error::{Error, Result};
use crate::page::{Page, Tid};

use crate::types::{BlockNumber, BufferTag, Fork, PAGE_SIZE, Xid};
use crate::value::Value;
use crate::vfs::{OpenMode, Vfs, VfsFile};
use crate::wal::LoggedPage;

/// Leaf pages are filled to this share of their item space (PostgreSQL's `fillfactor` 90).
const LEAF_FILL_PERCENT: usize = 90;
/// Internal pages likewise (`BTREE_NONLEAF_FILLFACTOR`).
const INTERNAL_FILL_PERCENT: usize = 70;
/// The read and write buffer of one sort run.
const RUN_BUFFER_BYTES: usize = 32 * 1024;
/// Bookkeeping bytes per sorted tuple besides its own (its place in the arena).
const TUPLE_OVERHEAD_BYTES: u64 = 8;

/// What [`BTree::build`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    pub entries: u64,
    pub leaf_pages: u64,
    pub internal_pages: u64,
    /// Levels of the tree (1: the root is a leaf).
    pub levels: u16,
    /// Sorted runs written to temporary files (0: the sort fit in memory).
    pub runs: u64,
    /// Merge passes that wrote an intermediate run (the final merge not counted).
    pub merge_passes: u64,
    pub spilled_bytes: u64,
}

impl BTree<'_> {
    /// Builds the index from `entries` (any order) into the empty index [`BTree::create`]
    /// made, using at most about `maintenance_work_mem_bytes` of memory for sorting. A
    /// unique index refuses two entries with equal keys (without NULLs): the caller passes
    /// the rows that must be unique, i.e. the live ones.
    pub fn build(
        &self,
        entries: impl Iterator<Item = Result<(Vec<Value>, Tid)>>,
        maintenance_work_mem_bytes: u64,
        xid: Xid,
    ) -> Result<BuildStats> {
        self.check_empty()?;
        let mut stats = BuildStats::default();
        let mut sorter = Sorter::new(self, maintenance_work_mem_bytes)?;
        for entry in entries {
            let (key, tid) = entry?;
            self.check_key(&key, false)?;
            sorter.push(&self.leaf_tuple(&key, tid)?)?;
            stats.entries += 1;
        }
        let sorted = sorter.finish(&mut stats)?;
        let mut loader = Loader::new(self, xid);
        let mut previous: Option<Vec<u8>> = None;
        for tuple in sorted {
            let tuple = tuple?;
            if let Some(prev) = &previous {
                self.check_build_order(prev, &tuple)?;
            }
            loader.add(0, &tuple)?;
            previous = Some(tuple);
        }
        loader.finish(&mut stats)?;
        Ok(stats)
    }

    /// A build needs the index as `create` left it: the metapage and an empty root leaf.
    fn check_empty(&self) -> Result<()> {
        let meta = self.read_meta()?;
        let buf = self.pin(meta.root)?;
        let g = buf.read();
        let p = self.view(&g, meta.root)?;
        if meta.level != 0 || p.item_count() != 0 || self.nblocks()? != 2 {
            return Err(Error::NotInPrerequisiteState {
                what: format!(
                    "index \"{}\" is not empty: build it right after creating it",
                    self.desc.name
                ),
            });
        }
        Ok(())
    }

    /// Adjacent sorted tuples: strictly increasing, and for a unique index no equal keys.
    fn check_build_order(&self, prev: &[u8], next: &[u8]) -> Result<()> {
        let ncols = self.ncols();
        let bad = || self.corrupt(0, "a sort run holds a malformed tuple");
        let (a, b) = (
            Tuple::parse(prev).ok_or_else(bad)?,
            Tuple::parse(next).ok_or_else(bad)?,
        );
        if compare_tuples(&a, &b, ncols).map_err(|_| bad())? != Ordering::Less {
            return Err(Error::InvalidParameter {
                what: format!(
                    "index \"{}\": the entry at {} is given twice",
                    self.desc.name, b.tid
                ),
            });
        }
        if self.desc.unique && compare_keys(&a, &b, ncols).map_err(|_| bad())? == Ordering::Equal {
            let key = self.decode_key(&b, 0)?;
            if !key.iter().any(Value::is_null) {
                return Err(Error::UniqueViolation {
                    index: self.desc.name.clone(),
                    key: display_key(&key),
                });
            }
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------ sorting

/// Distinguishes the sort files of concurrent builds in one process.
static NEXT_SORT: AtomicU64 = AtomicU64::new(0);

/// A sorted run in a temporary file: `len u32 | tuple`, repeated. Removed when dropped;
/// open only while its [`RunWriter`] writes it, or a [`RunReader`] reads a buffer of it.
struct Run {
    vfs: Arc<dyn Vfs>,
    path: PathBuf,
    len_bytes: u64,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Err(e) = self.vfs.remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "could not remove a sort run");
        }
    }
}

/// Tuples in memory: one arena, and `(start, len)` per tuple.
struct Sorter<'t> {
    tree: &'t BTree<'t>,
    budget_bytes: u64,
    arena: Vec<u8>,
    tuples: Vec<(u32, u32)>,
    runs: Vec<Run>,
    dir: PathBuf,
    sort_id: u64,
    next_run: u64,
}

impl<'t> Sorter<'t> {
    fn new(tree: &'t BTree<'t>, budget_bytes: u64) -> Result<Self> {
        let segment = tree.pool.smgr().segment_path(tree.rel(), Fork::Main, 0);
        // <data>/base/<db>/<rel> → <data>/base/pgsql_tmp
        let base = segment
            .parent()
            .and_then(std::path::Path::parent)
            .ok_or_else(|| tree.corrupt(0, "the relation has no data directory"))?;
        Ok(Sorter {
            tree,
            budget_bytes: budget_bytes.max(RUN_BUFFER_BYTES as u64),
            arena: Vec::new(),
            tuples: Vec::new(),
            runs: Vec::new(),
            dir: base.join("pgsql_tmp"),
            sort_id: NEXT_SORT.fetch_add(1, AtomicOrdering::Relaxed),
            next_run: 0,
        })
    }

    fn memory_bytes(&self) -> u64 {
        self.arena.len() as u64 + self.tuples.len() as u64 * TUPLE_OVERHEAD_BYTES
    }

    fn push(&mut self, tuple: &[u8]) -> Result<()> {
        if self.memory_bytes() + tuple.len() as u64 > self.budget_bytes && !self.tuples.is_empty() {
            self.spill()?;
        }
        let start = u32::try_from(self.arena.len()).map_err(|_| Error::ProgramLimitExceeded {
            what: "a sort run of 4 GiB or more".into(),
        })?;
        self.arena.extend_from_slice(tuple);
        self.tuples.push((start, tuple.len() as u32));
        Ok(())
    }

    fn tuple(&self, (start, len): (u32, u32)) -> &[u8] {
        &self.arena[start as usize..(start + len) as usize]
    }

    /// Sorts the tuples in memory (they were built by us, so they parse).
    fn sort(&mut self) {
        let ncols = self.tree.ncols();
        let mut tuples = std::mem::take(&mut self.tuples);
        tuples.sort_unstable_by(|&a, &b| order(self.tuple(a), self.tuple(b), ncols));
        self.tuples = tuples;
    }

    fn new_run(&mut self) -> Result<(PathBuf, Arc<dyn VfsFile>)> {
        let vfs = self.tree.pool.smgr().vfs();
        vfs.create_dir_all(&self.dir)
            .map_err(|e| Error::file("create directory", &self.dir, e))?;
        let name = format!(
            "quire_sort_{}_{}_{}",
            self.tree.rel().rel_number,
            self.sort_id,
            self.next_run
        );
        self.next_run += 1;
        let path = self.dir.join(name);
        let file = vfs
            .open(&path, OpenMode::CreateNew)
            .map_err(|e| Error::file("create", &path, e))?;
        Ok((path, file))
    }

    /// Writes the tuples in memory, sorted, as a new run.
    fn spill(&mut self) -> Result<()> {
        self.sort();
        let mut w = self.run_writer()?;
        for &t in &self.tuples {
            w.write(&self.arena[t.0 as usize..(t.0 + t.1) as usize])?;
        }
        self.runs.push(w.finish()?);
        self.arena.clear();
        self.tuples.clear();
        Ok(())
    }

    fn run_writer(&mut self) -> Result<RunWriter> {
        let (path, file) = self.new_run()?;
        Ok(RunWriter {
            run: Run {
                vfs: Arc::clone(self.tree.pool.smgr().vfs()),
                path,
                len_bytes: 0,
            },
            file,
            buf: Vec::with_capacity(RUN_BUFFER_BYTES),
        })
    }

    /// The sorted stream of every tuple pushed.
    fn finish(
        mut self,
        stats: &mut BuildStats,
    ) -> Result<Box<dyn Iterator<Item = Result<Vec<u8>>> + 't>> {
        if self.runs.is_empty() {
            self.sort();
            let Sorter { arena, tuples, .. } = self;
            return Ok(Box::new(tuples.into_iter().map(move |(s, l)| {
                Ok(arena[s as usize..(s + l) as usize].to_vec())
            })));
        }
        if !self.tuples.is_empty() {
            self.spill()?;
        }
        stats.runs = self.runs.len() as u64;
        stats.spilled_bytes = self.runs.iter().map(|r| r.len_bytes).sum();
        // Each run being merged needs a read buffer: merge at most that many at a time.
        let fan_in = (self.budget_bytes as usize / RUN_BUFFER_BYTES).max(2);
        // Bounded: each pass replaces `fan_in >= 2` runs by one.
        while self.runs.len() > fan_in {
            let rest = self.runs.split_off(fan_in);
            let first = std::mem::replace(&mut self.runs, rest);
            let mut w = self.run_writer()?;
            for t in Merge::new(first, self.tree)? {
                w.write(&t?)?;
            }
            let merged = w.finish()?;
            stats.spilled_bytes += merged.len_bytes;
            self.runs.push(merged);
            stats.merge_passes += 1;
        }
        Ok(Box::new(Merge::new(
            std::mem::take(&mut self.runs),
            self.tree,
        )?))
    }
}

/// The sort order of tuples built from checked keys (they always parse).
fn order(a: &[u8], b: &[u8], ncols: usize) -> Ordering {
    match (Tuple::parse(a), Tuple::parse(b)) {
        (Some(x), Some(y)) => compare_tuples(&x, &y, ncols).unwrap_or(Ordering::Equal),
        _ => Ordering::Equal,
    }
}

struct RunWriter {
    run: Run,
    /// Closed by [`RunWriter::finish`].
    file: Arc<dyn VfsFile>,
    buf: Vec<u8>,
}

impl RunWriter {
    fn write(&mut self, tuple: &[u8]) -> Result<()> {
        self.buf
            .extend_from_slice(&(tuple.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(tuple);
        if self.buf.len() >= RUN_BUFFER_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.file
            .write_at(&self.buf, self.run.len_bytes)
            .map_err(|e| Error::file("write", &self.run.path, e))?;
        self.run.len_bytes += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<Run> {
        self.flush()?;
        let RunWriter { run, file, .. } = self;
        drop(file);
        Ok(run)
    }
}

/// Reads a run back, a buffer at a time.
struct RunReader {
    run: Run,
    pos: u64,
    buf: Vec<u8>,
    at: usize,
}

impl RunReader {
    fn fill(&mut self, need: usize) -> Result<bool> {
        if self.buf.len() - self.at >= need {
            return Ok(true);
        }
        self.buf.drain(..self.at);
        self.at = 0;
        if self.pos == self.run.len_bytes {
            return Ok(self.buf.len() >= need);
        }
        // Opened for this buffer only (see the module header), closed when this returns.
        let file = self
            .run
            .vfs
            .open(&self.run.path, OpenMode::Existing)
            .map_err(|e| Error::file("open", &self.run.path, e))?;
        // Bounded: each turn reads at least a byte or stops.
        while self.buf.len() < RUN_BUFFER_BYTES.max(need) && self.pos < self.run.len_bytes {
            let want = (RUN_BUFFER_BYTES.max(need) - self.buf.len()) as u64;
            let n = (self.run.len_bytes - self.pos).min(want) as usize;
            let old = self.buf.len();
            self.buf.resize(old + n, 0);
            let read = file
                .read_at(&mut self.buf[old..], self.pos)
                .map_err(|e| Error::file("read", &self.run.path, e))?;
            self.buf.truncate(old + read);
            self.pos += read as u64;
            if read == 0 {
                break; // the file is shorter than we wrote: reported by the caller
            }
        }
        Ok(self.buf.len() >= need)
    }

    fn next_tuple(&mut self, tree: &BTree<'_>) -> Result<Option<Vec<u8>>> {
        if self.pos == self.run.len_bytes && self.at == self.buf.len() {
            return Ok(None);
        }
        let path = self.run.path.display().to_string();
        let bad = || tree.corrupt(0, format!("sort run {path} is corrupt"));
        if !self.fill(4)? {
            return Err(bad());
        }
        let len = crate::bytes::u32_at(&self.buf, self.at).ok_or_else(bad)? as usize;
        if len > super::page::MAX_TUPLE_BYTES || !self.fill(4 + len)? {
            return Err(bad());
        }
        let tuple = self.buf[self.at + 4..self.at + 4 + len].to_vec();
        self.at += 4 + len;
        // Temporary files carry no checksum: a tuple read back is checked before the sort
        // order or the tree trusts it.
        let t = Tuple::parse(&tuple).ok_or_else(bad)?;
        check_key(&t, &tree.desc.key_types).map_err(|_| bad())?;
        Ok(Some(tuple))
    }
}

/// One run's current tuple in the merge heap.
struct Head {
    tuple: Vec<u8>,
    run: usize,
    ncols: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        order(&self.tuple, &other.tuple, self.ncols).then(self.run.cmp(&other.run))
    }
}

/// A k-way merge of sorted runs.
struct Merge<'t> {
    tree: &'t BTree<'t>,
    readers: Vec<RunReader>,
    heap: BinaryHeap<Reverse<Head>>,
    failed: bool,
}

impl<'t> Merge<'t> {
    fn new(runs: Vec<Run>, tree: &'t BTree<'t>) -> Result<Self> {
        let mut m = Merge {
            tree,
            readers: runs
                .into_iter()
                .map(|run| RunReader {
                    run,
                    pos: 0,
                    buf: Vec::new(),
                    at: 0,
                })
                .collect(),
            heap: BinaryHeap::new(),
            failed: false,
        };
        for run in 0..m.readers.len() {
            m.refill(run)?;
        }
        Ok(m)
    }

    fn refill(&mut self, run: usize) -> Result<()> {
        if let Some(tuple) = self.readers[run].next_tuple(self.tree)? {
            self.heap.push(Reverse(Head {
                tuple,
                run,
                ncols: self.tree.ncols(),
            }));
        }
        Ok(())
    }
}

impl Iterator for Merge<'_> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let Reverse(head) = self.heap.pop()?;
        if let Err(e) = self.refill(head.run) {
            self.failed = true;
            return Some(Err(e));
        }
        Some(Ok(head.tuple))
    }
}

// ------------------------------------------------------------------------------ loading

/// The page being filled on one level.
struct LevelPage {
    block: BlockNumber,
    items: Vec<Vec<u8>>,
    bytes: usize,
    /// The pivot that is this page's lower bound (`None` on the leftmost page).
    lower: Option<Vec<u8>>,
    /// Pages finished on this level so far.
    finished: u64,
}

/// Builds the tree bottom-up: one open page per level, finished pages logged in batches.
struct Loader<'t> {
    tree: &'t BTree<'t>,
    xid: Xid,
    levels: Vec<LevelPage>,
    /// Finished pages not yet written: (block, page).
    pending: Vec<(BlockNumber, Box<[u8; PAGE_SIZE]>)>,
}

impl<'t> Loader<'t> {
    fn new(tree: &'t BTree<'t>, xid: Xid) -> Self {
        Loader {
            tree,
            xid,
            // The first leaf reuses the empty root's block.
            levels: vec![LevelPage {
                block: 1,
                items: Vec::new(),
                bytes: 0,
                lower: None,
                finished: 0,
            }],
            pending: Vec::new(),
        }
    }

    fn new_block(&self) -> Result<BlockNumber> {
        Ok(self
            .tree
            .pool
            .extend(self.tree.rel(), Fork::Main)?
            .tag()
            .block)
    }

    /// Adds a tuple (an entry on level 0, a downlink above) to the open page of `level`,
    /// finishing the page first if it is full: its last item then moves to the new page and
    /// a copy of it becomes the old page's high key, which takes exactly the room the item
    /// took, so the old page still fits (PostgreSQL's `_bt_buildadd`).
    fn add(&mut self, level: usize, tuple: &[u8]) -> Result<()> {
        let fill = if level == 0 {
            LEAF_FILL_PERCENT
        } else {
            INTERNAL_FILL_PERCENT
        };
        let target = ITEM_SPACE_BYTES * fill / 100;
        let cost = item_cost(tuple.len());
        let page = &self.levels[level];
        if page.bytes + cost > target && page.items.len() >= 2 {
            let next = self.new_block()?;
            let mut page = std::mem::replace(
                &mut self.levels[level],
                LevelPage {
                    block: next,
                    items: Vec::new(),
                    bytes: 0,
                    lower: None,
                    finished: 0,
                },
            );
            let last = page.items.pop().expect("a full page has items");
            let pivot = with_downlink(&last, NO_BLOCK);
            let first = if level == 0 {
                last
            } else {
                let t = Tuple::parse(&last)
                    .ok_or_else(|| self.tree.corrupt(next, "a malformed downlink"))?;
                minus_infinity(t.downlink)
            };
            let new = &mut self.levels[level];
            new.bytes = item_cost(first.len());
            new.items.push(first);
            new.lower = Some(pivot.clone());
            new.finished = page.finished + 1;
            self.finish_page(level, &mut page, Some((&pivot, next)), false)?;
        }
        let page = &mut self.levels[level];
        page.bytes += cost;
        page.items.push(tuple.to_vec());
        Ok(())
    }

    /// Writes a finished page (with a high key and right-link unless it ends its level) and
    /// adds its downlink to the level above.
    fn finish_page(
        &mut self,
        level: usize,
        page: &mut LevelPage,
        right: Option<(&[u8], BlockNumber)>,
        root: bool,
    ) -> Result<()> {
        let lvl = level as u16;
        let flags = if root { ROOT } else { 0 } | if level == 0 { LEAF } else { 0 };
        let special = Special {
            right_link: right.map_or(NO_BLOCK, |(_, b)| b),
            level: lvl,
            flags,
        };
        let items: Vec<&[u8]> = page.items.iter().map(Vec::as_slice).collect();
        let bytes = build_page(special, right.map(|(hk, _)| hk), &items)
            .map_err(|e| self.tree.corrupt(page.block, e))?;
        self.pending.push((page.block, bytes));
        if self.pending.len() >= PAGES_PER_RECORD {
            self.write_pending()?;
        }
        if root {
            return Ok(());
        }
        let downlink = match &page.lower {
            Some(pivot) => with_downlink(pivot, page.block),
            None => minus_infinity(page.block),
        };
        if level + 1 == self.levels.len() {
            if self.levels.len() >= usize::from(MAX_LEVELS) {
                return Err(self
                    .tree
                    .corrupt(page.block, "a build made too many levels"));
            }
            let block = self.new_block()?;
            self.levels.push(LevelPage {
                block,
                items: Vec::new(),
                bytes: 0,
                lower: None,
                finished: 0,
            });
        }
        self.add(level + 1, &downlink)
    }

    /// Logs the finished pages, whole, in one record.
    fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let rel = self.tree.rel();
        let bufs = self
            .pending
            .iter()
            .map(|(block, _)| {
                self.tree
                    .pool
                    .read_buffer_mode(BufferTag::new(rel, Fork::Main, *block), ReadMode::Zero)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut guards: Vec<PageWriteGuard<'_>> = bufs.iter().map(|b| b.write()).collect();
        let mut main = Vec::with_capacity(self.pending.len() * PAGE_SIZE);
        for (g, (_, bytes)) in guards.iter_mut().zip(&self.pending) {
            g.copy_from_slice(&bytes[..]);
            main.extend_from_slice(&bytes[..]);
        }
        let mut logged: Vec<LoggedPage<'_, '_>> =
            guards.iter_mut().map(LoggedPage::will_init).collect();
        self.tree
            .wal
            .log_page_change(self.xid, redo::BTreeRecord::NewPages, &main, &mut logged)?;
        self.pending.clear();
        Ok(())
    }

    /// Ends every level bottom-up, logs the last pages and then the metapage.
    fn finish(mut self, stats: &mut BuildStats) -> Result<()> {
        let mut level = 0;
        // Bounded: finishing level `l` adds at most one level above it, up to MAX_LEVELS.
        while level < self.levels.len() {
            let mut page = std::mem::replace(
                &mut self.levels[level],
                LevelPage {
                    block: NO_BLOCK,
                    items: Vec::new(),
                    bytes: 0,
                    lower: None,
                    finished: 0,
                },
            );
            let root = level + 1 == self.levels.len() && page.finished == 0;
            let pages = page.finished + 1;
            if level == 0 {
                stats.leaf_pages = pages;
            } else {
                stats.internal_pages += pages;
            }
            self.finish_page(level, &mut page, None, root)?;
            if root {
                stats.levels = level as u16 + 1;
                self.write_pending()?;
                return self.write_meta(page.block, level as u16);
            }
            level += 1;
        }
        Err(self.tree.corrupt(0, "a build ended without a root"))
    }

    fn write_meta(&self, root: BlockNumber, level: u16) -> Result<()> {
        let meta = Meta {
            root,
            level,
            key_types: self.tree.desc.key_types.clone(),
        };
        let buf = self.tree.pin(super::page::META_BLOCK)?;
        let mut g = buf.write();
        let lsn = Page::new(&g).lsn();
        g.copy_from_slice(&meta.page()[..]);
        crate::page::PageMut::new(&mut g).set_lsn(lsn);
        self.tree.wal.log_page_change(
            self.xid,
            redo::BTreeRecord::Meta,
            &meta.encode(),
            &mut [LoggedPage::will_init(&mut g)],
        )?;
        Ok(())
    }
}
