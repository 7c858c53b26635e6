//! A connection's thread follows its local client's CPU (`client_cpu_affinity`, on by
//! default).
//!
//! Why: a client and its connection take strict turns (the client sends, waits for the
//! reply, sends again). When the two run on different CPUs, every turn wakes the other CPU
//! (an interrupt between CPUs; on a virtual machine an exit to the hypervisor) and moves the
//! messages' cache lines across; on one CPU a turn is a switch between two threads that
//! would not have run at the same time anyway. Linux's scheduler does not see the pairing:
//! it sends a woken thread to an idle CPU when there is one, and where each thread lands
//! depends on the moment it connected. Measured with pgbench `-S -M prepared -c4 -j2` on 2
//! CPUs, the two pgbench threads pinned one per CPU and the four connections placed by hand:
//! each beside its client 75,000 tps, each on the other CPU 33,000, one of each pair on
//! each CPU 53,000, left to the scheduler 54,000; PostgreSQL's backends the same within 4%.
//! PostgreSQL's fast and slow rounds of that benchmark are its lucky and unlucky placements.
//!
//! ## Rules
//!
//! - Only a connection from a loopback address follows its client: its socket's
//!   `SO_INCOMING_CPU` is the CPU the client sent from. From a remote client it is the CPU
//!   that took the network card's interrupt, which says nothing about the client.
//! - A connection looks every [`FOLLOW_PERIOD_TURNS`] round trips (one `getsockopt`), just
//!   before it waits for its client, and moves its thread (`sched_setaffinity`) only when
//!   the client's CPU changed.
//! - A lone follower follows only while its round trips seldom wait for a WAL flush (fewer
//!   than one flush per [`LONE_TURNS_PER_FLUSH`] round trips): otherwise the disk's
//!   interrupts are the better guide, and the scheduler follows them (measured, see there).
//! - At most ⌈followers / CPUs⌉ connections are pinned to one CPU; a connection that would
//!   exceed it keeps the CPUs the server started with and the scheduler places it. So a
//!   client that drives many connections from one thread (pgbench `-j1 -c4`) still gets the
//!   other CPUs, and pinned threads are spread as evenly as the followers allow.
//! - Only the CPUs the server was allowed at start (its cpuset) are followed to.
//! - Every failure here (the option, the system call) only leaves the thread where the
//!   scheduler put it: affinity is a placement hint, never an error for the client.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// Round trips between two looks at the client's CPU: the look is one system call, cheap
/// beside a round trip, but a client seldom moves.
pub(crate) const FOLLOW_PERIOD_TURNS: u32 = 16;

/// From this many followers on, each follows its client whatever it does.
pub(crate) const MIN_FOLLOWERS: usize = 2;

/// A lone follower follows its client only while the WAL was flushed fewer than once per
/// this many round trips. Otherwise it is left to the scheduler, which tends to move it and
/// its client to the CPU where the disk's interrupts complete the flushes. Measured alone
/// with pgbench (`compare-postgres.sh`, 3 rounds each way): following gained TPC-B 1.76x
/// (one flush per seven round trips) but cost the two-phase script 20% (two flushes per
/// four round trips), pinned beside a client on a CPU the disk does not interrupt, where
/// each flush's end woke an idle CPU. From two followers on, following gained every
/// pgbench workload measured, the two-phase script too.
pub(crate) const LONE_TURNS_PER_FLUSH: u64 = 4;

/// The server's CPUs and how many connections are pinned to each.
#[derive(Debug)]
pub(crate) struct Affinity {
    /// The CPUs the server was allowed at start: an unpinned thread's set.
    allowed: CpuSet,
    allowed_count: usize,
    /// Connections pinned to each CPU, indexed by CPU number.
    pinned: Box<[AtomicUsize]>,
    /// Connections following their client, pinned or not.
    followers: AtomicUsize,
}

impl Affinity {
    /// `None` where there is nothing to choose: one allowed CPU, or the set unreadable.
    pub(crate) fn new() -> Option<Arc<Affinity>> {
        match sched_getaffinity(Pid::from_raw(0)) {
            Ok(allowed) => Self::within(allowed),
            Err(e) => {
                tracing::info!(error = %e, "cannot read the server's CPU set: connections will not follow their clients' CPUs");
                None
            }
        }
    }

    /// Following within the CPUs of `allowed`.
    fn within(allowed: CpuSet) -> Option<Arc<Affinity>> {
        let allowed_count = (0..CpuSet::count())
            .filter(|&cpu| allowed.is_set(cpu).unwrap_or(false))
            .count();
        if allowed_count < 2 {
            return None;
        }
        Some(Arc::new(Affinity {
            allowed,
            allowed_count,
            pinned: (0..CpuSet::count()).map(|_| AtomicUsize::new(0)).collect(),
            followers: AtomicUsize::new(0),
        }))
    }

    /// A new connection's follower; it counts among the followers until dropped.
    /// `wal_flushes` reads the database's count of WAL flushes (fsyncs).
    pub(crate) fn follower(
        self: &Arc<Self>,
        wal_flushes: impl Fn() -> u64 + Send + Sync + 'static,
    ) -> Follower {
        self.followers.fetch_add(1, Ordering::Relaxed);
        Follower {
            shared: Arc::clone(self),
            pinned: None,
            turns_to_look: 0,
            // The first look alone counts every flush before it, so it may leave the thread
            // where it is; the next counts its period's.
            flushes_at_look: 0,
            wal_flushes: Box::new(wal_flushes),
        }
    }

    /// Whether a follower follows its client ([`MIN_FOLLOWERS`], [`LONE_TURNS_PER_FLUSH`]);
    /// `flushes` counts the WAL flushes of its last [`FOLLOW_PERIOD_TURNS`] round trips,
    /// asked only of a lone follower (the count takes the WAL's insert lock).
    fn following(&self, flushes: impl FnOnce() -> u64) -> bool {
        self.followers.load(Ordering::Relaxed) >= MIN_FOLLOWERS
            || flushes() * LONE_TURNS_PER_FLUSH < u64::from(FOLLOW_PERIOD_TURNS)
    }

    /// Whether the connections pinned to `cpu` are within the limit (which falls as
    /// connections end).
    fn within_limit(&self, cpu: usize) -> bool {
        self.pinned[cpu].load(Ordering::Relaxed) <= self.per_cpu_limit()
    }

    /// The most connections one CPU may hold pinned now.
    fn per_cpu_limit(&self) -> usize {
        self.followers
            .load(Ordering::Relaxed)
            .div_ceil(self.allowed_count)
    }

    /// Takes a place on `cpu` if it has one free under the limit.
    fn take(&self, cpu: usize) -> bool {
        let counter = &self.pinned[cpu];
        if counter.fetch_add(1, Ordering::Relaxed) < self.per_cpu_limit() {
            return true;
        }
        counter.fetch_sub(1, Ordering::Relaxed);
        false
    }

    fn release(&self, cpu: usize) {
        let before = self.pinned[cpu].fetch_sub(1, Ordering::Relaxed);
        assert!(before > 0, "CPU {cpu} released more often than taken");
    }
}

/// One connection's place: the CPU its thread is pinned to, if any. Used only on the
/// connection's own thread (its runtime is single-threaded), which it moves.
pub(crate) struct Follower {
    shared: Arc<Affinity>,
    pinned: Option<usize>,
    /// Round trips until the next look at the client's CPU.
    turns_to_look: u32,
    /// `wal_flushes` at the last look alone.
    flushes_at_look: u64,
    wal_flushes: Box<dyn Fn() -> u64 + Send + Sync>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("pinned", &self.pinned)
            .field("turns_to_look", &self.turns_to_look)
            .finish_non_exhaustive()
    }
}

impl Follower {
    /// Called once per round trip, before the connection waits for its client;
    /// `client_cpu` reads the socket's `SO_INCOMING_CPU`.
    pub(crate) fn turn(&mut self, client_cpu: impl FnOnce() -> Option<usize>) {
        if self.turns_to_look > 0 {
            self.turns_to_look -= 1;
            return;
        }
        self.turns_to_look = FOLLOW_PERIOD_TURNS - 1;
        let following = self.shared.following(|| {
            let now = (self.wal_flushes)();
            // Since the last look alone: after a spell with company, more than one period.
            let flushes = now.saturating_sub(self.flushes_at_look);
            self.flushes_at_look = now;
            flushes
        });
        let wanted = if following {
            // A socket that has received nothing yet answers -1, read as a huge number.
            client_cpu().filter(|&cpu| {
                cpu < CpuSet::count() && self.shared.allowed.is_set(cpu).unwrap_or(false)
            })
        } else {
            None
        };
        if let Some(cpu) = wanted.filter(|&cpu| self.pinned == Some(cpu)) {
            if self.shared.within_limit(cpu) {
                return;
            }
        }
        self.unpin();
        if let Some(cpu) = wanted.filter(|&cpu| self.shared.take(cpu)) {
            let mut set = CpuSet::new();
            if set.set(cpu).is_ok() && sched_setaffinity(Pid::from_raw(0), &set).is_ok() {
                self.pinned = Some(cpu);
            } else {
                self.shared.release(cpu);
            }
        }
    }

    /// Back to the server's CPUs.
    fn unpin(&mut self) {
        if let Some(cpu) = self.pinned.take() {
            self.shared.release(cpu);
            if let Err(e) = sched_setaffinity(Pid::from_raw(0), &self.shared.allowed) {
                tracing::debug!(error = %e, "cannot unpin a connection thread");
            }
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        // The thread ends with its connection: no need to unpin it, only to give the
        // place back.
        if let Some(cpu) = self.pinned.take() {
            self.shared.release(cpu);
        }
        self.shared.followers.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    /// The calling thread's CPUs.
    fn my_cpus() -> Vec<usize> {
        let set = sched_getaffinity(Pid::from_raw(0)).expect("a thread can read its CPU set");
        (0..CpuSet::count())
            .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
            .collect()
    }

    /// The first two CPUs this process may use, both as a set, and the followers' state
    /// within them; `None` (the test skipped) on a machine with one CPU.
    fn two_cpus() -> Option<(usize, usize, CpuSet, Arc<Affinity>)> {
        let cpus = my_cpus();
        let (Some(&a), Some(&b)) = (cpus.first(), cpus.get(1)) else {
            eprintln!("skipped: fewer than two CPUs");
            return None;
        };
        let mut set = CpuSet::new();
        set.set(a)
            .expect("a CPU the thread may use is below CpuSet::count()");
        set.set(b)
            .expect("a CPU the thread may use is below CpuSet::count()");
        let affinity = Affinity::within(set).expect("two CPUs");
        Some((a, b, set, affinity))
    }

    /// A follower moves its thread to its client's CPU, follows the client to another,
    /// ignores a CPU outside the server's set (or none known), stops following once it is
    /// alone and its round trips often wait for a WAL flush, and gives its place back.
    #[test]
    fn a_follower_moves_its_thread_to_the_clients_cpu() {
        let Some((a, b, _, affinity)) = two_cpus() else {
            return;
        };
        let flushes = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&flushes);
        std::thread::spawn(move || {
            let mut follower = affinity.follower(move || counter.load(Ordering::Relaxed));
            // Alone, with one flush per four round trips: left to the scheduler.
            flushes.fetch_add(
                u64::from(FOLLOW_PERIOD_TURNS) / LONE_TURNS_PER_FLUSH,
                Ordering::Relaxed,
            );
            follower.turn(|| panic!("a lone follower of a flushing client looked at it"));
            assert_eq!(my_cpus(), vec![a, b], "alone and flushing: not pinned");
            // With company, flushes do not matter (and are not counted).
            let other = affinity.follower(|| panic!("counted the flushes with company"));
            flushes.fetch_add(100, Ordering::Relaxed);
            follower.turns_to_look = 0;
            follower.turn(|| Some(a));
            assert_eq!(my_cpus(), vec![a]);
            // Looked at only every FOLLOW_PERIOD_TURNS round trips.
            for _ in 1..FOLLOW_PERIOD_TURNS {
                follower.turn(|| panic!("looked before its period"));
            }
            follower.turn(|| Some(b));
            assert_eq!(my_cpus(), vec![b]);
            assert_eq!(affinity.pinned[a].load(Ordering::Relaxed), 0);
            assert_eq!(affinity.pinned[b].load(Ordering::Relaxed), 1);
            for client_cpu in [None, Some(CpuSet::count() + 5), Some(usize::MAX)] {
                for _ in 1..FOLLOW_PERIOD_TURNS {
                    follower.turn(|| None);
                }
                follower.turn(|| client_cpu);
                assert_eq!(my_cpus(), vec![a, b], "client CPU {client_cpu:?}: unpinned");
            }
            follower.turns_to_look = 0;
            follower.turn(|| Some(b));
            assert_eq!(my_cpus(), vec![b]);
            drop(other);
            flushes.fetch_add(
                u64::from(FOLLOW_PERIOD_TURNS) / LONE_TURNS_PER_FLUSH,
                Ordering::Relaxed,
            );
            follower.turns_to_look = 0;
            follower.turn(|| panic!("a lone follower of a flushing client looked at it"));
            assert_eq!(my_cpus(), vec![a, b], "alone and flushing: unpinned");
            // Alone with fewer flushes: it follows.
            flushes.fetch_add(
                u64::from(FOLLOW_PERIOD_TURNS) / LONE_TURNS_PER_FLUSH - 1,
                Ordering::Relaxed,
            );
            follower.turns_to_look = 0;
            follower.turn(|| Some(a));
            assert_eq!(my_cpus(), vec![a]);
            drop(follower);
            assert_eq!(affinity.followers.load(Ordering::Relaxed), 0);
            assert_eq!(affinity.pinned[b].load(Ordering::Relaxed), 0);
        })
        .join()
        .expect("the follower's thread");
    }

    /// Four followers whose clients all sit on one of two CPUs: two are pinned there (the
    /// limit, ⌈4 / 2⌉), the other two stay on both CPUs; when one pinned connection ends,
    /// the next to look takes its place; when two more end, the limit falls to one and a
    /// pinned one over it leaves at its next look.
    #[test]
    fn one_cpu_holds_at_most_its_share_of_the_followers() {
        let Some((a, b, set, affinity)) = two_cpus() else {
            return;
        };
        let mut followers: Vec<Follower> = (0..4).map(|_| affinity.follower(|| 0)).collect();
        // Each turn pins the calling thread; here all run on this test's own thread,
        // which the last statement unpins again.
        let pinned: Vec<bool> = followers
            .iter_mut()
            .map(|f| {
                f.turn(|| Some(a));
                f.pinned.is_some()
            })
            .collect();
        assert_eq!(pinned, vec![true, true, false, false]);
        assert_eq!(affinity.pinned[a].load(Ordering::Relaxed), 2);
        assert_eq!(affinity.pinned[b].load(Ordering::Relaxed), 0);
        followers.remove(0);
        let third = &mut followers[1];
        third.turns_to_look = 0;
        third.turn(|| Some(a));
        assert_eq!(third.pinned, Some(a));
        assert_eq!(affinity.pinned[a].load(Ordering::Relaxed), 2);
        followers.remove(2); // unpinned
        let [first, third] = &mut followers[..] else {
            panic!("two followers left");
        };
        assert_eq!((first.pinned, third.pinned), (Some(a), Some(a)));
        first.turns_to_look = 0;
        first.turn(|| Some(a));
        assert_eq!(first.pinned, None, "over the limit of one: unpinned");
        assert_eq!(affinity.pinned[a].load(Ordering::Relaxed), 1);
        third.turns_to_look = 0;
        third.turn(|| Some(a));
        assert_eq!(third.pinned, Some(a), "within the limit: stays");
        drop(followers);
        assert_eq!(affinity.pinned[a].load(Ordering::Relaxed), 0);
        assert_eq!(affinity.followers.load(Ordering::Relaxed), 0);
        sched_setaffinity(Pid::from_raw(0), &set).expect("unpin the test thread");
    }
}
