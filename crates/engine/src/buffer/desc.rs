//! Buffer descriptors: the atomic state word, the tag, and the header lock.
//!
//! The state word packs the pin count, the usage count and the flags so that pinning is one
//! compare-and-swap. The header lock is a bit in the same word (PostgreSQL's `BM_LOCKED`):
//! while it is set, nobody else changes the state, and the tag may be changed.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::types::{BufferTag, PAGE_SIZE};
use crate::types::{Fork, RelFileLocator};

pub(super) const REFCOUNT_ONE: u64 = 1;
pub(super) const REFCOUNT_MASK: u64 = (1 << 18) - 1;
pub(super) const USAGE_SHIFT: u32 = 18;
pub(super) const USAGE_ONE: u64 = 1 << USAGE_SHIFT;
pub(super) const USAGE_MASK: u64 = 0xF << USAGE_SHIFT;
/// PostgreSQL's `BM_MAX_USAGE_COUNT`.
pub(super) const MAX_USAGE_COUNT: u64 = 5;

pub(super) const LOCKED: u64 = 1 << 22;
pub(super) const DIRTY: u64 = 1 << 23;
pub(super) const VALID: u64 = 1 << 24;
pub(super) const TAG_VALID: u64 = 1 << 25;
pub(super) const IO_IN_PROGRESS: u64 = 1 << 26;
pub(super) const IO_ERROR: u64 = 1 << 27;
/// Someone waits for the pin count to reach zero (a drop).
pub(super) const PIN_WAITER: u64 = 1 << 28;
/// The buffer is on the free list (so it is pushed at most once).
pub(super) const ON_FREELIST: u64 = 1 << 29;

pub(super) fn refcount(state: u64) -> u64 {
    state & REFCOUNT_MASK
}

pub(super) fn usage_count(state: u64) -> u64 {
    (state & USAGE_MASK) >> USAGE_SHIFT
}

/// How long a header lock may spin before we call it stuck (PostgreSQL's `s_lock_stuck`):
/// header critical sections are a few instructions, so this only fires on a bug.
const STUCK_HEADER_LOCK: Duration = Duration::from_secs(60);

/// One buffer descriptor. Padded to a cache line so that pins of neighbouring buffers do not
/// contend.
#[repr(align(64))]
pub(super) struct BufferDesc {
    pub(super) state: AtomicU64,
    tag_db: AtomicU32,
    tag_rel: AtomicU64,
    /// `fork << 32 | block`.
    tag_fork_block: AtomicU64,
    /// The page. Allocated the first time the buffer is used, so that a large pool costs
    /// memory only as it fills; never freed, so the pool's memory stays bounded by its size.
    pub(super) content: RwLock<Option<Box<[u8; PAGE_SIZE]>>>,
}

impl BufferDesc {
    pub(super) fn new() -> Self {
        BufferDesc {
            state: AtomicU64::new(0),
            tag_db: AtomicU32::new(0),
            tag_rel: AtomicU64::new(0),
            tag_fork_block: AtomicU64::new(0),
            content: RwLock::new(None),
        }
    }

    /// The tag. Stable only while the caller holds a pin or the header lock; otherwise it
    /// is a racy hint (used by the full-scan drop as PostgreSQL does, then re-checked).
    pub(super) fn tag(&self) -> BufferTag {
        let fork_block = self.tag_fork_block.load(Ordering::Relaxed);
        let fork = match fork_block >> 32 {
            0 => Fork::Main,
            1 => Fork::Fsm,
            _ => Fork::Vm,
        };
        BufferTag {
            rel: RelFileLocator {
                db_oid: self.tag_db.load(Ordering::Relaxed),
                rel_number: self.tag_rel.load(Ordering::Relaxed),
            },
            fork,
            block: fork_block as u32,
        }
    }

    /// Sets the tag; only under the header lock.
    pub(super) fn set_tag(&self, tag: BufferTag) {
        debug_assert!(self.state.load(Ordering::Relaxed) & LOCKED != 0);
        self.tag_db.store(tag.rel.db_oid, Ordering::Relaxed);
        self.tag_rel.store(tag.rel.rel_number, Ordering::Relaxed);
        self.tag_fork_block.store(
            ((tag.fork as u64) << 32) | u64::from(tag.block),
            Ordering::Relaxed,
        );
    }

    /// Takes the header lock; returns the state (with `LOCKED` set).
    pub(super) fn lock_header(&self) -> u64 {
        let mut spins = 0u32;
        let mut started: Option<Instant> = None;
        loop {
            let old = self.state.fetch_or(LOCKED, Ordering::Acquire);
            if old & LOCKED == 0 {
                return old | LOCKED;
            }
            backoff(&mut spins, &mut started);
        }
    }

    /// Releases the header lock, storing `state` (without `LOCKED`).
    pub(super) fn unlock_header(&self, state: u64) {
        debug_assert!(state & LOCKED != 0, "unlocking a header that is not locked");
        self.state.store(state & !LOCKED, Ordering::Release);
    }

    /// Waits until the header is unlocked and returns the state.
    pub(super) fn wait_unlocked(&self) -> u64 {
        let mut spins = 0u32;
        let mut started: Option<Instant> = None;
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & LOCKED == 0 {
                return s;
            }
            backoff(&mut spins, &mut started);
        }
    }

    /// Applies `f` to the state with a compare-and-swap, waiting out the header lock.
    /// Returns (old, new).
    pub(super) fn update_state(&self, f: impl Fn(u64) -> u64) -> (u64, u64) {
        let mut old = self.wait_unlocked();
        loop {
            let new = f(old);
            match self
                .state
                .compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return (old, new),
                Err(actual) => {
                    old = if actual & LOCKED != 0 {
                        self.wait_unlocked()
                    } else {
                        actual
                    };
                }
            }
        }
    }
}

fn backoff(spins: &mut u32, started: &mut Option<Instant>) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
        return;
    }
    std::thread::yield_now();
    if (*spins).is_multiple_of(1024) {
        let t0 = *started.get_or_insert_with(Instant::now);
        assert!(
            t0.elapsed() < STUCK_HEADER_LOCK,
            "stuck buffer header lock: held for over {STUCK_HEADER_LOCK:?}"
        );
    }
}
