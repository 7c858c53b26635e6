//! [`CachePadded`]: a value alone on its cache lines; [`StripedCounter`]: a statistic many
//! threads add to without sharing a line.

/// A value alone on its cache lines (128 bytes: adjacent lines are prefetched in pairs), so
/// that two cores working on neighbouring values (lock partitions, WAL insertion state) do
/// not fight over one line. PostgreSQL pads its LWLocks and WAL insertion locks alike.
#[repr(align(128))]
#[derive(Default)]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Stripes of a [`StripedCounter`]: more than the cores a counter is shared by, so that two
/// threads rarely add to one stripe.
const STRIPES: usize = 16;

std::thread_local! {
    /// This thread's stripe, handed out round-robin at its first count.
    static STRIPE: usize = {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % STRIPES
    };
}

/// A statistics counter that every thread adds to on a hot path (buffer hits, lock
/// acquisitions): each thread adds to its own stripe, on its own cache line, so the count
/// costs no cache-line transfer between cores (one shared atomic cost one on every
/// statement). Reading sums the stripes: exact once the adders are done, a moment's
/// approximation while they run, which is all a statistic needs. PostgreSQL counts in each
/// backend and publishes the sums alike.
#[derive(Default)]
pub struct StripedCounter {
    stripes: [CachePadded<std::sync::atomic::AtomicU64>; STRIPES],
}

impl StripedCounter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        let stripe = STRIPE.with(|s| *s);
        self.stripes[stripe].fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// The sum of what was added.
    pub fn get(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }
}

impl std::fmt::Debug for StripedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

#[cfg(test)]
mod tests {
    use super::StripedCounter;

    #[test]
    fn a_striped_counter_sums_what_every_thread_added() {
        let c = StripedCounter::default();
        std::thread::scope(|s| {
            for _ in 0..40 {
                s.spawn(|| (0..1000).for_each(|_| c.add(1)));
            }
        });
        c.add(5);
        assert_eq!(c.get(), 40_005);
        assert_eq!(format!("{c:?}"), "40005");
    }
}
