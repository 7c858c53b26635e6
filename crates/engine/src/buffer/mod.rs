//! # buffer — the shared buffer pool
//!
//! A fixed number of 8 KiB buffers (`shared_buffers`), each with a descriptor (an atomic state
//! word: pin count, usage count, flags; the tag of the page it holds; a content lock). A
//! partitioned mapping table finds a page's buffer; clock sweep picks victims.
//!
//! ## What a pin means
//! A pin ([`PinnedBuffer`]) keeps a buffer from being evicted or re-tagged: while you hold it,
//! the buffer holds the page you asked for. A pin is *not* a lock on the content: read the
//! page under [`PinnedBuffer::read`] (shared) and change it only under
//! [`PinnedBuffer::write`] (exclusive), then [`PageWriteGuard::mark_dirty`]. Pins are released
//! when the guard drops; hold them briefly. A *cleanup lock*
//! ([`PinnedBuffer::lock_for_cleanup`]) is the exclusive lock held while being the only
//! pinner: an index scan keeps its pin on a leaf while it returns entries copied from it, and
//! vacuum removes entries only under a cleanup lock.
//!
//! ## Lock order
//! mapping partition(s) (ascending index) → relation-index partition(s) (ascending) →
//! buffer header lock. Content locks are never taken while holding any of those; the header
//! lock is a spin bit held for a few instructions only, never across I/O or another lock.
//! A buffer's tag changes only while holding its old and new mapping partitions exclusively,
//! its relation-index partitions, its header lock, and being its only pinner.
//!
//! ## The WAL rule
//! A dirty page is written only after [`WriteBackHook::before_write`] returned for its LSN:
//! the WAL layer flushes WAL up to the page's LSN there, so no page reaches its file before
//! the WAL that describes it is durable.
//!
//! ## The background writer
//! [`bgwriter`] (PostgreSQL's bgwriter) writes, every `bgwriter_delay`, the dirty buffers the
//! clock sweep reaches next and would take as victims ([`BufferPool::clean_ahead`]), through
//! the same write-back path as everyone (so the WAL rule holds), pinning each as a checkpoint
//! does. It only moves writes earlier: a buffer it skips or that is dirtied again is written
//! by whoever takes it, as before. A miss that has to write its dirty victim itself pokes
//! it, so it runs its next round at once instead of after the delay: while misses keep
//! finding dirty victims (a VACUUM or a bulk load larger than the pool) its rounds follow one
//! another, and the writes move to its thread (another core) instead of the miss's.
//!
//! ## Extending a relation
//! [`BufferPool::extend`] appends a zeroed block to the file first; from then on the block is
//! everyone's (its size is published), so the extender's buffer for it is *read*, never
//! zeroed in memory: another thread may already have changed the block and had it written
//! back and evicted. Whoever initialises the page checks [`crate::page::Page::is_new`].
//!
//! ## Dropping a relation's buffers (seed 000)
//! [`BufferPool::drop_relation_buffers`] (truncate: blocks from `first_block` on) and
//! [`BufferPool::drop_relations`] (whole relations, many at once) discard buffers without
//! writing them. With `buffer_drop = indexed` (default) every tagged buffer is also filed in a
//! per-relation index (`(relation, fork) → block → buffer`, an ordered map), so a drop costs in
//! proportion to the buffers the dropped range has cached, whatever the pool's size. With
//! `buffer_drop = full_scan` the drop examines every descriptor, as PostgreSQL 13 does. With
//! `buffer_drop = pg14` it does what PostgreSQL 14-17 do: during startup redo, when every
//! fork's size is cached and fewer than NBuffers/32 blocks are dropped, it looks each block
//! up in the mapping table; otherwise, and always in normal running, it scans every
//! descriptor.
//! The caller must hold the relation exclusively: nobody may pin pages of the dropped range
//! during the drop (the pool's own write-back may, and the drop waits for it). After the drop
//! returns, no buffer holds a page of the range and no write of one is in flight.
//!
//! ## Never
//! Never hold a pin while waiting for a lock of another subsystem that a drop may hold; never
//! write a page without the hook; never read a page from disk without checksum verification
//! (smgr verifies every read).

pub mod bgwriter;
mod desc;

use crate::padded::{CachePadded, StripedCounter};
use crate::periodic::PokeSlot;
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use desc::{
    refcount, usage_count, BufferDesc, DIRTY, IO_ERROR, IO_IN_PROGRESS, MAX_USAGE_COUNT,
    ON_FREELIST, PIN_WAITER, REFCOUNT_MASK, REFCOUNT_ONE, TAG_VALID, USAGE_MASK, USAGE_ONE, VALID,
};

use crate::config::{BufferDropMode, Config};
use crate::error::{Error, Result};
use crate::hash::{hash_one, FxHashMap};

use crate::smgr::Smgr;
use crate::types::{BlockNumber, BufferTag, Fork, Lsn, RelFileLocator, PAGE_SIZE};

/// Called before a dirty page is written: the WAL layer flushes WAL up to `page_lsn`.
pub trait WriteBackHook: Send + Sync {
    fn before_write(&self, tag: BufferTag, page_lsn: Lsn) -> Result<()>;
}

/// The hook used before the WAL exists: nothing to flush.
struct NoWal;

impl WriteBackHook for NoWal {
    fn before_write(&self, _tag: BufferTag, _page_lsn: Lsn) -> Result<()> {
        Ok(())
    }
}

const MAPPING_PARTITIONS: usize = 128;
const INDEX_PARTITIONS: usize = 64;
const WAIT_SHARDS: usize = 64;
/// How often a waiter re-checks the state even without a wake-up (defence in depth).
const WAIT_RECHECK: Duration = Duration::from_millis(10);
/// How long [`BufferPool::check_invariants`] waits for a background write's pin to go.
const TRANSIENT_PIN_WAIT: Duration = Duration::from_secs(5);
/// A miss retries when it loses a race for its victim; bounded so a bug cannot spin forever.
const MAX_VICTIM_ATTEMPTS: usize = 10_000;

type MappingTable = FxHashMap<BufferTag, u32>;
type RelIndex = FxHashMap<(RelFileLocator, Fork), BTreeMap<BlockNumber, u32>>;

static ZERO_PAGE: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

/// Counters of the pool's work, for tests and benchmarks.
#[derive(Debug, Default)]
pub struct BufferStats {
    pub hits: StripedCounter,
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub invalidated: AtomicU64,
    /// Descriptors examined by drops (the figure seed 000 is about).
    pub drop_descriptors_examined: AtomicU64,
    /// Buffers taken for a new page (from the free list or by clock sweep): what the
    /// background writer paces itself by (PostgreSQL's `buffers_alloc`).
    pub allocs: StripedCounter,
    /// Of [`BufferStats::writes`], those the background writer made (`buffers_clean`).
    pub cleaned: StripedCounter,
    /// Of [`BufferStats::writes`], those a miss made to reuse a dirty victim
    /// (`buffers_backend`): each pokes the background writer.
    pub victim_writes: StripedCounter,
    /// Background writer rounds that stopped at `bgwriter_lru_maxpages` writes
    /// (`maxwritten_clean`).
    pub cleaner_max_rounds: AtomicU64,
}

/// What the background writer keeps between its rounds (PostgreSQL's `BgBufferSync`).
#[derive(Debug, Default)]
pub struct Cleaner {
    /// The next buffer to look at, counted as the clock hand counts (never behind it).
    next_to_clean: u64,
    /// [`BufferStats::allocs`] at the last round.
    allocs_seen: u64,
    /// Allocations per round, smoothed.
    smoothed_allocs: f64,
}

/// What one round of the background writer did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanRound {
    pub scanned: u64,
    /// Buffers found reusable (unpinned, usage count 0), clean or made clean.
    pub reusable: u64,
    pub written: u64,
}

/// Rounds over which the allocation rate is smoothed (PostgreSQL's `smoothing_samples`).
const CLEANER_SMOOTHING_ROUNDS: f64 = 16.0;

/// How to get a page into a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Read it from disk unless cached.
    Normal,
    /// The caller sets the whole page itself (a full-page image in redo, a page a bulk build
    /// owns alone): zero it instead of reading. Not for a block just extended, which others
    /// can already reach (see [`BufferPool::extended_block`]).
    Zero,
    /// Read it, but a page that fails verification (torn, corrupt) or lies past the end of
    /// the file comes back zeroed instead of as an error (PostgreSQL's
    /// `RBM_ZERO_ON_ERROR`): for forks whose content is a rebuildable hint, such as the
    /// free-space map, which is not WAL-logged.
    ZeroOnError,
}

/// The shared buffer pool.
pub struct BufferPool {
    smgr: Arc<Smgr>,
    hook: Arc<dyn WriteBackHook>,
    drop_mode: BufferDropMode,
    descs: Box<[BufferDesc]>,
    /// Each partition on its own cache lines: every lookup write-shares its partition's lock
    /// word, and neighbours on one line made lookups of unrelated pages contend.
    mapping: Box<[CachePadded<RwLock<MappingTable>>]>,
    rel_index: Box<[Mutex<RelIndex>]>,
    free_list: ArrayQueue<u32>,
    clock_hand: AtomicU64,
    waits: Box<[(Mutex<()>, Condvar)]>,
    /// The running background writer's poke (see [`bgwriter`], which sets and clears it);
    /// empty when none runs.
    cleaner: PokeSlot,
    stats: BufferStats,
}

impl BufferPool {
    /// A pool of `config.nbuffers()` buffers over `smgr`, writing back through `hook`
    /// (`None`: no WAL yet).
    pub fn new(
        smgr: Arc<Smgr>,
        config: &Config,
        hook: Option<Arc<dyn WriteBackHook>>,
    ) -> Result<Self> {
        config.validate()?;
        let nbuffers = config.nbuffers();
        let descs: Box<[BufferDesc]> = (0..nbuffers).map(|_| BufferDesc::new()).collect();
        let free_list = ArrayQueue::new(nbuffers);
        for (id, d) in descs.iter().enumerate() {
            d.state.fetch_or(ON_FREELIST, Ordering::Relaxed);
            free_list
                .push(id as u32)
                .expect("the free list has room for every buffer");
        }
        Ok(BufferPool {
            smgr,
            hook: hook.unwrap_or_else(|| Arc::new(NoWal)),
            drop_mode: config.buffer_drop,
            descs,
            mapping: (0..MAPPING_PARTITIONS)
                .map(|_| CachePadded(RwLock::new(MappingTable::default())))
                .collect(),
            rel_index: (0..INDEX_PARTITIONS)
                .map(|_| Mutex::new(RelIndex::default()))
                .collect(),
            free_list,
            clock_hand: AtomicU64::new(0),
            waits: (0..WAIT_SHARDS)
                .map(|_| (Mutex::new(()), Condvar::new()))
                .collect(),
            cleaner: PokeSlot::default(),
            stats: BufferStats::default(),
        })
    }

    pub fn nbuffers(&self) -> usize {
        self.descs.len()
    }

    pub fn smgr(&self) -> &Arc<Smgr> {
        &self.smgr
    }

    pub fn stats(&self) -> &BufferStats {
        &self.stats
    }

    pub fn drop_mode(&self) -> BufferDropMode {
        self.drop_mode
    }

    fn mapping_partition(tag: &BufferTag) -> usize {
        (hash_one(tag) as usize) % MAPPING_PARTITIONS
    }

    fn index_partition(rel: RelFileLocator) -> usize {
        (hash_one(&rel) as usize) % INDEX_PARTITIONS
    }

    // ---------------------------------------------------------------- pins

    /// Pins a buffer found through the mapping table (the caller holds its partition, so the
    /// tag cannot change). Bumps the usage count, as every access does.
    fn pin_mapped(&self, id: u32) {
        let d = &self.descs[id as usize];
        d.update_state(|s| {
            assert!(refcount(s) < REFCOUNT_MASK, "buffer pin count overflow");
            let mut n = s + REFCOUNT_ONE;
            if usage_count(s) < MAX_USAGE_COUNT {
                n += USAGE_ONE;
            }
            n
        });
    }

    fn unpin(&self, id: u32) {
        let d = &self.descs[id as usize];
        let (old, _) = d.update_state(|s| {
            debug_assert!(refcount(s) > 0, "unpinning an unpinned buffer");
            let n = s - REFCOUNT_ONE;
            if refcount(n) == 0 {
                n & !PIN_WAITER
            } else {
                n
            }
        });
        // Waiters want the count at 0 (a drop) or at 1 (a cleanup lock, whose own pin
        // remains): wake them at both; each re-checks its own condition.
        if refcount(old) <= 2 && old & PIN_WAITER != 0 {
            self.wake(id);
        }
    }

    fn wait_shard(&self, id: u32) -> &(Mutex<()>, Condvar) {
        &self.waits[id as usize % WAIT_SHARDS]
    }

    fn wake(&self, id: u32) {
        let (m, cv) = self.wait_shard(id);
        let _g = m.lock();
        cv.notify_all();
    }

    /// Waits until `done(state)` holds for buffer `id`.
    fn wait_until(&self, id: u32, done: impl Fn(u64) -> bool) {
        let d = &self.descs[id as usize];
        let (m, cv) = self.wait_shard(id);
        let mut g = m.lock();
        while !done(d.state.load(Ordering::Acquire)) {
            cv.wait_for(&mut g, WAIT_RECHECK);
        }
    }

    /// Waits until `done(state)` holds for buffer `id` or `deadline` passes; returns whether
    /// `done` held.
    fn wait_until_deadline(&self, id: u32, done: impl Fn(u64) -> bool, deadline: Instant) -> bool {
        let d = &self.descs[id as usize];
        let (m, cv) = self.wait_shard(id);
        let mut g = m.lock();
        loop {
            if done(d.state.load(Ordering::Acquire)) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            cv.wait_for(&mut g, WAIT_RECHECK.min(deadline - now));
        }
    }

    // ---------------------------------------------------------------- I/O ownership

    /// Claims the right to do I/O on a pinned buffer (PostgreSQL's `StartBufferIO`): waits
    /// for I/O in progress, then returns false if there is nothing to do (for a read: the
    /// page is valid; for a write: it is not dirty).
    fn start_io(&self, id: u32, for_write: bool) -> bool {
        let d = &self.descs[id as usize];
        loop {
            let s = d.lock_header();
            if s & IO_IN_PROGRESS != 0 {
                d.unlock_header(s);
                self.wait_until(id, |s| s & IO_IN_PROGRESS == 0);
                continue;
            }
            let nothing_to_do = if for_write {
                s & DIRTY == 0
            } else {
                s & VALID != 0
            };
            if nothing_to_do {
                d.unlock_header(s);
                return false;
            }
            d.unlock_header(s | IO_IN_PROGRESS);
            return true;
        }
    }

    /// Ends I/O: on success a read sets VALID and a write clears DIRTY.
    fn terminate_io(&self, id: u32, for_write: bool, ok: bool) {
        let d = &self.descs[id as usize];
        let mut s = d.lock_header();
        debug_assert!(s & IO_IN_PROGRESS != 0);
        s &= !IO_IN_PROGRESS;
        if ok {
            s &= !IO_ERROR;
            s |= if for_write { 0 } else { VALID };
            if for_write {
                s &= !DIRTY;
            }
        } else {
            s |= IO_ERROR;
        }
        d.unlock_header(s);
        self.wake(id);
    }

    // ---------------------------------------------------------------- reading

    /// Pins the buffer holding `tag`, reading the page from disk if it is not cached.
    pub fn read_buffer(&self, tag: BufferTag) -> Result<PinnedBuffer<'_>> {
        self.read_buffer_mode(tag, ReadMode::Normal)
    }

    /// Pins the buffer for `tag`; with [`ReadMode::Zero`] a page not cached is zeroed rather
    /// than read (for a page the caller overwrites whole).
    pub fn read_buffer_mode(&self, tag: BufferTag, mode: ReadMode) -> Result<PinnedBuffer<'_>> {
        let id = self.pin_or_allocate(tag)?;
        let pinned = PinnedBuffer { pool: self, id };
        if self.start_io(id, false) {
            let result = self.load_page(id, tag, mode);
            self.terminate_io(id, false, result.is_ok());
            result?;
        }
        Ok(pinned)
    }

    fn load_page(&self, id: u32, tag: BufferTag, mode: ReadMode) -> Result<()> {
        let mut content = self.descs[id as usize].content.write();
        let page = content.get_or_insert_with(|| Box::new([0u8; PAGE_SIZE]));
        match mode {
            ReadMode::Zero => {
                page.copy_from_slice(&ZERO_PAGE);
                Ok(())
            }
            ReadMode::Normal => {
                self.stats.reads.fetch_add(1, Ordering::Relaxed);
                self.smgr.read(tag.rel, tag.fork, tag.block, page)
            }
            ReadMode::ZeroOnError => {
                self.stats.reads.fetch_add(1, Ordering::Relaxed);
                match self.smgr.read(tag.rel, tag.fork, tag.block, page) {
                    Err(
                        e @ (Error::CorruptPage { .. }
                        | Error::ShortRead { .. }
                        | Error::BlockOutOfRange { .. }),
                    ) => {
                        // Handled here: the hint is rebuilt from zero, so say so once.
                        tracing::warn!(error = %e, "zeroing an unreadable hint page");
                        page.copy_from_slice(&ZERO_PAGE);
                        Ok(())
                    }
                    other => other,
                }
            }
        }
    }

    /// Finds the buffer for `tag` and pins it, or takes a victim and gives it the tag (its
    /// page not yet valid). Returns the pinned buffer's id.
    fn pin_or_allocate(&self, tag: BufferTag) -> Result<u32> {
        let part = Self::mapping_partition(&tag);
        if let Some(&id) = self.mapping[part].read().get(&tag) {
            self.pin_mapped(id);
            self.stats.hits.add(1);
            return Ok(id);
        }
        for _ in 0..MAX_VICTIM_ATTEMPTS {
            let victim = self.get_victim()?;
            if let Err(e) = self.clean_victim(victim) {
                self.unpin(victim);
                return Err(e);
            }
            match self.retag(victim, tag, part) {
                Retag::Done => return Ok(victim),
                Retag::FoundExisting(id) => {
                    self.unpin(victim);
                    self.stats.hits.add(1);
                    return Ok(id);
                }
                Retag::VictimBusy => self.unpin(victim),
            }
        }
        Err(Error::NoFreeBuffers {
            nbuffers: self.nbuffers(),
        })
    }

    /// Writes a pinned victim back if it is dirty, and then pokes the background writer:
    /// misses are outrunning its rounds, so it runs the next one now (and, while misses keep
    /// finding dirty victims, one after another) instead of after `bgwriter_delay`.
    fn clean_victim(&self, id: u32) -> Result<()> {
        let s = self.descs[id as usize].state.load(Ordering::Acquire);
        if s & DIRTY != 0 && self.flush_pinned(id)? {
            self.stats.victim_writes.add(1);
            self.cleaner.poke();
        }
        Ok(())
    }

    /// A free buffer, pinned by us: from the free list, else by clock sweep.
    fn get_victim(&self) -> Result<u32> {
        self.stats.allocs.add(1);
        while let Some(id) = self.free_list.pop() {
            let d = &self.descs[id as usize];
            let s = d.lock_header();
            let s = s & !ON_FREELIST;
            if refcount(s) == 0 && usage_count(s) == 0 {
                d.unlock_header(s + REFCOUNT_ONE);
                return Ok(id);
            }
            d.unlock_header(s);
        }
        self.clock_sweep()
    }

    /// PostgreSQL's clock sweep: decrement usage counts until an unpinned buffer with usage
    /// zero comes by. Gives up after a full pass in which nothing could be decremented.
    fn clock_sweep(&self) -> Result<u32> {
        let n = self.nbuffers() as u64;
        let mut tries_left = n;
        loop {
            let id = (self.clock_hand.fetch_add(1, Ordering::Relaxed) % n) as u32;
            let d = &self.descs[id as usize];
            let s = d.lock_header();
            if refcount(s) == 0 {
                if usage_count(s) == 0 {
                    d.unlock_header(s + REFCOUNT_ONE);
                    return Ok(id);
                }
                d.unlock_header(s - USAGE_ONE);
                tries_left = n;
            } else {
                d.unlock_header(s);
                tries_left -= 1;
                if tries_left == 0 {
                    return Err(Error::NoFreeBuffers {
                        nbuffers: self.nbuffers(),
                    });
                }
            }
        }
    }

    /// Gives the pinned victim `id` the tag `tag` (whose mapping partition is `part`).
    fn retag(&self, id: u32, tag: BufferTag, part: usize) -> Retag {
        let d = &self.descs[id as usize];
        let s = d.state.load(Ordering::Acquire);
        // Stable: we hold a pin, and re-tagging requires being the only pinner.
        let old_tag = (s & TAG_VALID != 0).then(|| d.tag());
        let old_part = old_tag.as_ref().map_or(part, Self::mapping_partition);
        let mut maps = LockedPair::write(&self.mapping, part, old_part);
        if let Some(&existing) = maps.get(part).get(&tag) {
            self.pin_mapped(existing);
            return Retag::FoundExisting(existing);
        }
        let new_ix = Self::index_partition(tag.rel);
        let old_ix = old_tag.map_or(new_ix, |t| Self::index_partition(t.rel));
        let mut index = LockedPair::lock(&self.rel_index, new_ix, old_ix);
        let s = d.lock_header();
        if refcount(s) != 1 || s & (DIRTY | IO_IN_PROGRESS) != 0 {
            // Someone pinned or dirtied it after we chose it: choose again.
            d.unlock_header(s);
            return Retag::VictimBusy;
        }
        if let Some(old) = old_tag {
            debug_assert!(s & TAG_VALID != 0 && d.tag() == old);
            let removed = maps.get(old_part).remove(&old);
            debug_assert_eq!(removed, Some(id), "mapping and descriptor disagree");
            index_remove(index.get(old_ix), old, id);
        }
        maps.get(part).insert(tag, id);
        index
            .get(new_ix)
            .entry((tag.rel, tag.fork))
            .or_default()
            .insert(tag.block, id);
        d.set_tag(tag);
        let flags_cleared = s & !(VALID | DIRTY | IO_ERROR | USAGE_MASK);
        d.unlock_header(flags_cleared | TAG_VALID | USAGE_ONE);
        Retag::Done
    }

    // ---------------------------------------------------------------- extension

    /// Appends a new, zeroed block to a fork and returns it pinned. Initialise it under
    /// [`PinnedBuffer::write`] (if it is still new: see [`BufferPool::extended_block`]) and
    /// mark it dirty.
    pub fn extend(&self, rel: RelFileLocator, fork: Fork) -> Result<PinnedBuffer<'_>> {
        let block = self.smgr.extend(rel, fork, &ZERO_PAGE)?;
        self.extended_block(BufferTag::new(rel, fork, block))
    }

    /// The buffer of a block [`Smgr::extend`] has just appended. Read, never zeroed in the
    /// buffer: from the extension on, the block is part of the fork for everyone, so another
    /// thread may have read it, changed it, and had its buffer written back and evicted
    /// before this call; a zeroed buffer would then hide that change and write zeros over it
    /// (a commit-log page lost the status of a committed transaction this way, found by a
    /// 30-minute soak). Reading costs one read of a page the kernel has just been given.
    pub(crate) fn extended_block(&self, tag: BufferTag) -> Result<PinnedBuffer<'_>> {
        self.read_buffer_mode(tag, ReadMode::Normal)
    }

    // ---------------------------------------------------------------- write-back

    /// Writes a pinned buffer if it is dirty, obeying the WAL rule; whether it wrote (not
    /// if the buffer was clean by then, or another write of it was under way).
    fn flush_pinned(&self, id: u32) -> Result<bool> {
        if !self.start_io(id, true) {
            return Ok(false);
        }
        let d = &self.descs[id as usize];
        let tag = d.tag();
        // Shared content lock, held until DIRTY is cleared: nobody can change the page (and
        // re-dirty it) between the copy we write and the clearing, so no change is lost.
        let content = d.content.read();
        let page = content.as_ref().expect("a dirty buffer has a page");
        let result = self
            .hook
            .before_write(tag, page_lsn(page))
            .and_then(|()| self.smgr.write(tag.rel, tag.fork, tag.block, page));
        if result.is_ok() {
            self.stats.writes.fetch_add(1, Ordering::Relaxed);
        }
        self.terminate_io(id, true, result.is_ok());
        drop(content);
        result.map(|()| true)
    }

    /// One round of the background writer (PostgreSQL's LRU scan in `BgBufferSync`): looks
    /// at the buffers the clock hand reaches next and writes the dirty ones it would take as
    /// victims (unpinned, usage count 0), so that misses find clean victims and do not write
    /// in the foreground. It goes until it has found as many reusable buffers as
    /// `multiplier` times the allocations of a recent round, or written `max_pages`, or
    /// scanned `min_scan` (so an idle pool is still cleaned, a lap every two minutes),
    /// never more than one lap ahead of the hand.
    pub fn clean_ahead(
        &self,
        cleaner: &mut Cleaner,
        max_pages: u64,
        multiplier: f64,
        min_scan: u64,
    ) -> Result<CleanRound> {
        let n = self.nbuffers() as u64;
        let allocs = self.stats.allocs.get();
        let recent = allocs.saturating_sub(cleaner.allocs_seen) as f64;
        cleaner.allocs_seen = allocs;
        // A burst is followed at once; a lull only slowly (as PostgreSQL smooths it).
        if recent >= cleaner.smoothed_allocs {
            cleaner.smoothed_allocs = recent;
        } else {
            cleaner.smoothed_allocs +=
                (recent - cleaner.smoothed_allocs) / CLEANER_SMOOTHING_ROUNDS;
        }
        let wanted = ((cleaner.smoothed_allocs * multiplier).ceil() as u64).max(1);
        let hand = self.clock_hand.load(Ordering::Relaxed);
        cleaner.next_to_clean = cleaner.next_to_clean.max(hand);
        let end = hand + n;
        let mut round = CleanRound::default();
        while cleaner.next_to_clean < end
            && round.written < max_pages
            && (round.reusable < wanted || round.scanned < min_scan)
        {
            let id = (cleaner.next_to_clean % n) as u32;
            cleaner.next_to_clean += 1;
            round.scanned += 1;
            let s = self.descs[id as usize].state.load(Ordering::Acquire);
            if refcount(s) != 0 || usage_count(s) != 0 {
                continue;
            }
            round.reusable += 1;
            if s & DIRTY != 0 && self.pin_if(id, |_| true) {
                let result = self.flush_pinned(id);
                self.unpin(id);
                if result? {
                    round.written += 1;
                    self.stats.cleaned.add(1);
                }
            }
        }
        if max_pages > 0 && round.written >= max_pages {
            self.stats.cleaner_max_rounds.fetch_add(1, Ordering::Relaxed);
        }
        Ok(round)
    }

    /// Pins buffer `id` if it still holds a page that `matches`; for work on buffers found
    /// by scanning rather than through the mapping table.
    fn pin_if(&self, id: u32, matches: impl Fn(&BufferTag) -> bool) -> bool {
        let d = &self.descs[id as usize];
        let s = d.lock_header();
        if s & TAG_VALID == 0 || !matches(&d.tag()) {
            d.unlock_header(s);
            return false;
        }
        d.unlock_header(s + REFCOUNT_ONE);
        true
    }

    /// Writes every dirty buffer of a relation (all forks).
    pub fn flush_relation(&self, rel: RelFileLocator) -> Result<()> {
        for fork in Fork::ALL {
            for id in self.candidates(&[rel], Some(fork), 0) {
                if self.pin_if(id, |t| t.rel == rel && t.fork == fork) {
                    let result = self.flush_pinned(id);
                    self.unpin(id);
                    result?;
                }
            }
        }
        Ok(())
    }

    /// Writes every dirty buffer of the pool (a checkpoint's job, at once).
    pub fn flush_all(&self) -> Result<()> {
        self.flush_all_paced(|_, _| {}).map(drop)
    }

    /// Writes every buffer that is dirty now, calling `after_write(done, total)` after each
    /// write so a checkpoint can pace itself. Buffers dirtied after the call starts are not
    /// waited for: a checkpoint needs only what was dirty at its redo point. Returns how
    /// many buffers it wrote (others may have written some of them first).
    pub fn flush_all_paced(&self, mut after_write: impl FnMut(usize, usize)) -> Result<u64> {
        let dirty: Vec<u32> = (0..self.descs.len() as u32)
            .filter(|&id| self.descs[id as usize].state.load(Ordering::Relaxed) & DIRTY != 0)
            .collect();
        let mut written = 0;
        for (done, &id) in dirty.iter().enumerate() {
            if self.pin_if(id, |_| true) {
                let result = self.flush_pinned(id);
                self.unpin(id);
                written += u64::from(result?);
            }
            after_write(done + 1, dirty.len());
        }
        Ok(written)
    }

    // ---------------------------------------------------------------- dropping

    /// Discards (without writing) the buffers of `fork` of `rel` from `first_block` on, for a
    /// truncation. See the module header for the caller's obligations.
    pub fn drop_relation_buffers(&self, rel: RelFileLocator, fork: Fork, first_block: BlockNumber) {
        let matches = |t: &BufferTag| t.rel == rel && t.fork == fork && t.block >= first_block;
        for id in self.candidates(&[rel], Some(fork), first_block) {
            self.invalidate(id, &matches);
        }
    }

    /// Discards (without writing) every buffer of every fork of `rels`, for DROP or TRUNCATE.
    pub fn drop_relations(&self, rels: &[RelFileLocator]) {
        let mut sorted = rels.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let matches = |t: &BufferTag| sorted.binary_search(&t.rel).is_ok();
        for id in self.candidates(&sorted, None, 0) {
            self.invalidate(id, &matches);
        }
    }

    /// Drops relation files whose drop a commit or abort (or its redo) decided: buffers
    /// first, through the fast path, then the files (which also forgets their sync requests),
    /// as PostgreSQL's `smgrdounlinkall` does.
    pub fn drop_relation_files(&self, rels: &[RelFileLocator]) -> Result<()> {
        if rels.is_empty() {
            return Ok(());
        }
        self.drop_relations(rels);
        for r in rels {
            self.smgr().unlink(*r)?;
        }
        Ok(())
    }

    /// The buffers that may hold pages of `rels` (one fork, or all) from `first_block` on.
    /// Indexed mode asks the relation index; full-scan mode reads every descriptor's tag
    /// without locking (a hint, re-checked under the header lock), as PostgreSQL 13 does;
    /// pg14 mode looks blocks up where PostgreSQL 14-17 would, and scans elsewhere.
    fn candidates(
        &self,
        rels: &[RelFileLocator],
        fork: Option<Fork>,
        first_block: BlockNumber,
    ) -> Vec<u32> {
        let forks: &[Fork] = match &fork {
            Some(f) => std::slice::from_ref(f),
            None => &Fork::ALL,
        };
        match self.drop_mode {
            BufferDropMode::Indexed => self.indexed_buffers(rels, forks, first_block),
            BufferDropMode::Pg14 => self
                .lookup_blocks(rels, forks, first_block)
                .unwrap_or_else(|| self.scan_descriptors(rels, forks, first_block)),
            BufferDropMode::FullScan => self.scan_descriptors(rels, forks, first_block),
        }
    }

    /// The buffers the relation index files under the relations' forks.
    fn indexed_buffers(
        &self,
        rels: &[RelFileLocator],
        forks: &[Fork],
        first_block: BlockNumber,
    ) -> Vec<u32> {
        let mut ids = Vec::new();
        for &rel in rels {
            let index = self.rel_index[Self::index_partition(rel)].lock();
            for &f in forks {
                if let Some(blocks) = index.get(&(rel, f)) {
                    ids.extend(blocks.range(first_block..).map(|(_, &id)| id));
                }
            }
        }
        self.stats
            .drop_descriptors_examined
            .fetch_add(ids.len() as u64, Ordering::Relaxed);
        ids
    }

    /// PostgreSQL 14-17's drop by lookup (`FindAndDropRelationBuffers`): during recovery,
    /// when every fork's size is cached and the blocks to drop are fewer than NBuffers/32
    /// (`BUF_DROP_FULL_SCAN_THRESHOLD`), each block's tag is looked up in the mapping table.
    /// `None` when that does not apply.
    fn lookup_blocks(
        &self,
        rels: &[RelFileLocator],
        forks: &[Fork],
        first_block: BlockNumber,
    ) -> Option<Vec<u32>> {
        let smgr = self.smgr();
        if !smgr.in_recovery() {
            return None;
        }
        let threshold = (self.descs.len() / 32) as u64;
        let mut ranges = Vec::new();
        let mut total = 0u64;
        for &rel in rels {
            for &f in forks {
                let Some(n) = smgr.cached_nblocks(rel, f) else {
                    // A fork that does not exist has nothing to drop (PostgreSQL asks
                    // smgrexists); one whose size is unknown means a full scan.
                    if smgr.exists(rel, f).unwrap_or(true) {
                        return None;
                    }
                    continue;
                };
                total += u64::from(n.saturating_sub(first_block));
                if total >= threshold {
                    return None;
                }
                ranges.push((rel, f, n));
            }
        }
        let mut ids = Vec::new();
        for (rel, f, n) in ranges {
            for block in first_block..n {
                let tag = BufferTag::new(rel, f, block);
                if let Some(&id) = self.mapping[Self::mapping_partition(&tag)].read().get(&tag) {
                    ids.push(id);
                }
            }
        }
        self.stats
            .drop_descriptors_examined
            .fetch_add(total, Ordering::Relaxed);
        Some(ids)
    }

    /// Every descriptor whose tag (read without locking: a hint, checked again under the
    /// header lock) matches, as PostgreSQL 13's `DropRelFileNodeBuffers`.
    fn scan_descriptors(
        &self,
        rels: &[RelFileLocator],
        forks: &[Fork],
        first_block: BlockNumber,
    ) -> Vec<u32> {
        let mut ids = Vec::new();
        let single = (rels.len() == 1).then(|| rels[0]);
        for (id, d) in self.descs.iter().enumerate() {
            let t = d.tag();
            let rel_matches = match single {
                Some(r) => t.rel == r,
                None => rels.binary_search(&t.rel).is_ok(),
            };
            if rel_matches && forks.contains(&t.fork) && t.block >= first_block {
                ids.push(id as u32);
            }
        }
        self.stats
            .drop_descriptors_examined
            .fetch_add(self.descs.len() as u64, Ordering::Relaxed);
        ids
    }

    /// Invalidates buffer `id` if it holds a page that `matches`: removes it from the mapping
    /// table and the relation index and forgets its contents, dirty or not. Waits for pins
    /// (the pool's own write-back) to go away first (PostgreSQL's `InvalidateBuffer`).
    fn invalidate(&self, id: u32, matches: &dyn Fn(&BufferTag) -> bool) {
        let d = &self.descs[id as usize];
        loop {
            let s = d.lock_header();
            let tag = d.tag();
            d.unlock_header(s);
            if s & TAG_VALID == 0 || !matches(&tag) {
                return;
            }
            let part = Self::mapping_partition(&tag);
            let ix = Self::index_partition(tag.rel);
            let mut map = self.mapping[part].write();
            let mut index = self.rel_index[ix].lock();
            let s = d.lock_header();
            if s & TAG_VALID == 0 || d.tag() != tag {
                // Evicted and re-used meanwhile: nothing of ours is left in it.
                d.unlock_header(s);
                return;
            }
            if refcount(s) > 0 {
                d.unlock_header(s | PIN_WAITER);
                drop(index);
                drop(map);
                self.wait_until(id, |s| refcount(s) == 0);
                continue;
            }
            let removed = map.remove(&tag);
            debug_assert_eq!(removed, Some(id), "mapping and descriptor disagree");
            index_remove(&mut index, tag, id);
            let free = s & !(TAG_VALID | VALID | DIRTY | IO_ERROR | USAGE_MASK | PIN_WAITER);
            let push = free & ON_FREELIST == 0;
            d.unlock_header(if push { free | ON_FREELIST } else { free });
            drop(index);
            drop(map);
            self.stats.invalidated.fetch_add(1, Ordering::Relaxed);
            if push {
                self.free_list
                    .push(id)
                    .expect("each buffer is on the free list at most once");
            }
            return;
        }
    }

    // ---------------------------------------------------------------- checking

    /// Checks the pool's invariants; call only when no statement uses the pool. A background
    /// write (the background writer's, a checkpoint's) may still hold a pin for one page
    /// write: the check waits up to [`TRANSIENT_PIN_WAIT`] for each pin before it calls it a
    /// leak. Returns a description of the first violation.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let mut tagged = 0usize;
        for (id, d) in self.descs.iter().enumerate() {
            let deadline = Instant::now() + TRANSIENT_PIN_WAIT;
            let mut s = d.state.load(Ordering::Acquire);
            // Bounded by the deadline.
            while refcount(s) != 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
                s = d.state.load(Ordering::Acquire);
            }
            if refcount(s) != 0 {
                return Err(format!("buffer {id} is still pinned ({})", refcount(s)));
            }
            if s & TAG_VALID == 0 {
                if s & (VALID | DIRTY) != 0 {
                    return Err(format!("buffer {id} is valid or dirty without a tag"));
                }
                continue;
            }
            tagged += 1;
            let tag = d.tag();
            let mapped = self.mapping[Self::mapping_partition(&tag)]
                .read()
                .get(&tag)
                .copied();
            if mapped != Some(id as u32) {
                return Err(format!(
                    "buffer {id} holds {tag:?} but the mapping says {mapped:?}"
                ));
            }
            let indexed = self.rel_index[Self::index_partition(tag.rel)]
                .lock()
                .get(&(tag.rel, tag.fork))
                .and_then(|m| m.get(&tag.block).copied());
            if indexed != Some(id as u32) {
                return Err(format!(
                    "buffer {id} holds {tag:?} but the index says {indexed:?}"
                ));
            }
        }
        let mapped: usize = self.mapping.iter().map(|p| p.read().len()).sum();
        let indexed: usize = self
            .rel_index
            .iter()
            .map(|p| p.lock().values().map(BTreeMap::len).sum::<usize>())
            .sum();
        if mapped != tagged || indexed != tagged {
            return Err(format!(
                "{tagged} tagged buffers, {mapped} mapping entries, {indexed} index entries: \
                 some buffer holds two tags or an entry is stale"
            ));
        }
        Ok(())
    }

    /// How many buffers hold a page of `rel` (any fork); for tests and benchmarks.
    pub fn cached_buffers_of(&self, rel: RelFileLocator) -> usize {
        Fork::ALL
            .into_iter()
            .map(|f| self.cached_buffers_of_fork(rel, f))
            .sum()
    }

    /// How many buffers hold a page of one fork of `rel`; for tests and benchmarks.
    pub fn cached_buffers_of_fork(&self, rel: RelFileLocator, fork: Fork) -> usize {
        self.rel_index[Self::index_partition(rel)]
            .lock()
            .get(&(rel, fork))
            .map_or(0, BTreeMap::len)
    }
}

enum Retag {
    Done,
    FoundExisting(u32),
    VictimBusy,
}

fn index_remove(index: &mut RelIndex, tag: BufferTag, id: u32) {
    let key = (tag.rel, tag.fork);
    if let Some(blocks) = index.get_mut(&key) {
        let removed = blocks.remove(&tag.block);
        debug_assert_eq!(removed, Some(id), "relation index and descriptor disagree");
        if blocks.is_empty() {
            index.remove(&key);
        }
    } else {
        debug_assert!(
            false,
            "buffer {id} with {tag:?} missing from the relation index"
        );
    }
}

/// The LSN in a page header (bytes 0..8, little-endian; see `page`).
fn page_lsn(page: &[u8; PAGE_SIZE]) -> Lsn {
    crate::page::Page::new(page).lsn()
}

/// One or two partitions of a table locked in ascending order (the lock-order rule).
struct LockedPair<G> {
    first: (usize, G),
    second: Option<(usize, G)>,
}

impl<'a, T> LockedPair<RwLockWriteGuard<'a, T>> {
    fn write(locks: &'a [CachePadded<RwLock<T>>], a: usize, b: usize) -> Self {
        LockedPair::acquire(a, b, |i| locks[i].write())
    }
}

impl<'a, T> LockedPair<MutexGuard<'a, T>> {
    fn lock(locks: &'a [Mutex<T>], a: usize, b: usize) -> Self {
        LockedPair::acquire(a, b, |i| locks[i].lock())
    }
}

impl<G> LockedPair<G> {
    fn acquire(a: usize, b: usize, lock: impl Fn(usize) -> G) -> Self {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let first = (lo, lock(lo));
        let second = (hi != lo).then(|| (hi, lock(hi)));
        LockedPair { first, second }
    }

    fn get<T>(&mut self, i: usize) -> &mut T
    where
        G: DerefMut<Target = T>,
    {
        if self.first.0 == i {
            return &mut self.first.1;
        }
        match &mut self.second {
            Some((j, g)) if *j == i => g,
            _ => unreachable!("partition {i} is not locked by this pair"),
        }
    }
}

/// A pinned buffer; unpinned on drop.
pub struct PinnedBuffer<'a> {
    pool: &'a BufferPool,
    id: u32,
}

impl PinnedBuffer<'_> {
    /// The buffer's number in the pool.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The page this buffer holds (stable while pinned).
    pub fn tag(&self) -> BufferTag {
        self.pool.descs[self.id as usize].tag()
    }

    /// Takes the content lock shared.
    pub fn read(&self) -> PageReadGuard<'_> {
        PageReadGuard {
            guard: self.pool.descs[self.id as usize].content.read(),
        }
    }

    /// Takes the content lock exclusive.
    pub fn write(&self) -> PageWriteGuard<'_> {
        PageWriteGuard {
            guard: self.pool.descs[self.id as usize].content.write(),
            pool: self.pool,
            id: self.id,
        }
    }

    /// Takes a *cleanup lock* (PostgreSQL's `LockBufferForCleanup`): the content lock
    /// exclusive while this pin is the buffer's only one. Nobody else can then be looking at
    /// items copied from the page under an earlier lock (a scan keeps its pin while it returns
    /// them), so items may be removed. Pins taken after the lock is granted wait for the
    /// content lock like any reader. Waits (sleeping on the pool's wait machinery, woken by
    /// unpins) at most `max_wait`, then fails with [`Error::LockNotAvailable`] — a waiter that
    /// itself holds a second pin on the buffer would otherwise wait forever.
    pub fn lock_for_cleanup(&self, max_wait: Duration) -> Result<PageWriteGuard<'_>> {
        let deadline = Instant::now() + max_wait;
        let d = &self.pool.descs[self.id as usize];
        // Bounded by the deadline: each turn ends in success, a wait, or the error.
        loop {
            let guard = self.write();
            let s = d.lock_header();
            if refcount(s) == 1 {
                d.unlock_header(s);
                return Ok(guard);
            }
            d.unlock_header(s | PIN_WAITER);
            drop(guard);
            if !self
                .pool
                .wait_until_deadline(self.id, |s| refcount(s) <= 1, deadline)
            {
                return Err(Error::LockNotAvailable {
                    what: format!(
                        "cleanup lock on block {} of relation {} within {max_wait:?}: \
                         the page stayed pinned",
                        self.tag().block,
                        self.tag().rel
                    ),
                });
            }
        }
    }
}

impl Drop for PinnedBuffer<'_> {
    fn drop(&mut self) {
        self.pool.unpin(self.id);
    }
}

/// A page under a shared content lock.
pub struct PageReadGuard<'a> {
    guard: RwLockReadGuard<'a, Option<Box<[u8; PAGE_SIZE]>>>,
}

impl Deref for PageReadGuard<'_> {
    type Target = [u8; PAGE_SIZE];
    fn deref(&self) -> &Self::Target {
        self.guard.as_ref().expect("a valid buffer has a page")
    }
}

/// A page under an exclusive content lock.
pub struct PageWriteGuard<'a> {
    guard: RwLockWriteGuard<'a, Option<Box<[u8; PAGE_SIZE]>>>,
    pool: &'a BufferPool,
    id: u32,
}

impl PageWriteGuard<'_> {
    /// The page this buffer holds (stable: the guard's pin keeps it).
    pub fn tag(&self) -> BufferTag {
        self.pool.descs[self.id as usize].tag()
    }

    /// Marks the buffer dirty: it will be written back before it is evicted. Only under the
    /// exclusive content lock, which this guard is.
    pub fn mark_dirty(&mut self) {
        let d = &self.pool.descs[self.id as usize];
        d.update_state(|s| {
            debug_assert!(s & VALID != 0, "dirtying a page that is not valid");
            s | DIRTY
        });
    }
}

impl Deref for PageWriteGuard<'_> {
    type Target = [u8; PAGE_SIZE];
    fn deref(&self) -> &Self::Target {
        self.guard.as_ref().expect("a valid buffer has a page")
    }
}

impl DerefMut for PageWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.guard.as_mut().expect("a valid buffer has a page")
    }
}

#[cfg(test)]
mod tests;
