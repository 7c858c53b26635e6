//! The `quire` binary's one global allocator: mimalloc, which counts the bytes it hands out
//! while [`counted`] runs (for `quire bench tidstore`'s memory figures).
//!
//! mimalloc rather than glibc's malloc: the server allocates and frees small buffers for
//! every statement on many threads, and glibc's malloc and free (with its consolidation of
//! freed chunks) were about a tenth of the server's time per simple query.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use mimalloc::MiMalloc;

/// Whether allocations are being counted (only around a structure's build).
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed while counting.
static NET_BYTES: AtomicI64 = AtomicI64::new(0);

/// The process's allocator (mimalloc: see the dependency's note in Cargo.toml), counting
/// requested bytes while [`COUNTING`] is on. The one global allocator of the `quire` binary.
struct CountingAllocator;

/// A size as a signed count (sizes never exceed `isize::MAX`, so this is exact).
fn signed(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

fn count(delta: i64) {
    if COUNTING.load(Ordering::Relaxed) {
        NET_BYTES.fetch_add(delta, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `MiMalloc` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract is `MiMalloc`'s; the counting touches only two atomics and never
// allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { MiMalloc.alloc(layout) };
        if !p.is_null() {
            count(signed(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            count(signed(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is (see the impl).
        unsafe { MiMalloc.dealloc(ptr, layout) };
        count(-signed(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(signed(new_size) - signed(layout.size()));
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs `build` with allocation counting on; returns its result and the net bytes it kept.
pub fn counted<T>(build: impl FnOnce() -> T) -> (T, i64) {
    NET_BYTES.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let value = build();
    COUNTING.store(false, Ordering::SeqCst);
    (value, NET_BYTES.load(Ordering::SeqCst))
}
