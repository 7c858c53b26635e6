//! [`Periodic`]: the one way the engine runs a background worker (the WAL writer, the
//! background writer, autovacuum): a named thread that sleeps a period, runs a round, and
//! again, until its handle is dropped; dropping it wakes the thread, stops it and joins it.
//! A round that runs long checks [`Stop::requested`] to end early. A [`Poke`] runs the
//! next round at once instead of after the period: for a worker that others call on when
//! there is work (PostgreSQL sets the worker's latch).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

/// The stop request a round can look at.
#[derive(Default)]
pub struct Stop {
    requested: Mutex<bool>,
    wake: Condvar,
    /// A poke not yet seen by the sleeper. Checked under `requested`'s mutex by the sleeper,
    /// and the poker takes that mutex before notifying, so no poke is lost.
    poked: AtomicBool,
}

impl Stop {
    /// Whether the worker's handle was dropped.
    pub fn requested(&self) -> bool {
        *self.requested.lock()
    }

    /// Sleeps `period` unless a stop is requested or a poke comes first (or came during
    /// the last round); returns whether a stop was requested.
    fn sleep(&self, period: Duration) -> bool {
        let mut requested = self.requested.lock();
        if !*requested && !self.poked.swap(false, Ordering::AcqRel) {
            self.wake.wait_for(&mut requested, period);
            self.poked.store(false, Ordering::Release);
        }
        *requested
    }
}

/// Runs a worker's next round now (or, if one is running, another right after it).
#[derive(Clone)]
pub struct Poke(Arc<Stop>);

impl Poke {
    /// Cheap while a poke is pending: one atomic swap, no lock.
    pub fn poke(&self) {
        if !self.0.poked.swap(true, Ordering::AcqRel) {
            let _held = self.0.requested.lock();
            self.0.wake.notify_one();
        }
    }
}

/// Where those who call on a worker find its [`Poke`]: set while the worker runs, empty
/// otherwise (they then do the work themselves). Read-locked on every poke, so callers on a
/// hot path do not serialise on it.
#[derive(Default)]
pub struct PokeSlot(RwLock<Option<Poke>>);

impl PokeSlot {
    /// Sets (or, with `None`, clears) the worker's poke.
    pub fn set(&self, poke: Option<Poke>) {
        *self.0.write() = poke;
    }

    /// Pokes the worker; false if none runs.
    pub fn poke(&self) -> bool {
        match &*self.0.read() {
            Some(poke) => {
                poke.poke();
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.0.read().is_none()
    }
}

/// A running worker; dropping it stops and joins the thread.
pub struct Periodic {
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

impl Periodic {
    /// Starts thread `name`, which runs `round` every `period` (the first after one period).
    pub fn start(
        name: &str,
        period: Duration,
        mut round: impl FnMut(&Stop) + Send + 'static,
    ) -> std::io::Result<Periodic> {
        assert!(
            !period.is_zero(),
            "a worker's period is at least a millisecond"
        );
        let stop = Arc::new(Stop::default());
        let seen = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                while !seen.sleep(period) {
                    round(&seen);
                }
            })?;
        Ok(Periodic {
            stop,
            thread: Some(thread),
        })
    }

    /// A handle that runs the next round at once.
    pub fn poke_handle(&self) -> Poke {
        Poke(Arc::clone(&self.stop))
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        *self.stop.requested.lock() = true;
        self.stop.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let name = t.thread().name().unwrap_or("a worker").to_string();
            if t.join().is_err() {
                tracing::error!(thread = name, "a background thread panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Periodic;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn rounds_run_every_period_and_a_drop_stops_at_once() {
        let rounds = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&rounds);
        let worker = Periodic::start("quire-test", Duration::from_millis(5), move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while rounds.load(Ordering::Relaxed) < 3 {
            assert!(Instant::now() < deadline, "no rounds ran");
            std::thread::sleep(Duration::from_millis(1));
        }
        // A long period does not hold up the drop: the stop wakes the sleeper.
        let slow = Periodic::start("quire-test", Duration::from_secs(3600), |_| {}).unwrap();
        let t = Instant::now();
        drop(slow);
        drop(worker);
        assert!(t.elapsed() < Duration::from_secs(60));
        let after = rounds.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            rounds.load(Ordering::Relaxed),
            after,
            "a round ran after the drop"
        );
    }

    #[test]
    fn a_poke_runs_the_next_round_at_once_and_a_poke_during_a_round_runs_one_more() {
        let rounds = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&rounds);
        let worker = Periodic::start("quire-test", Duration::from_secs(3600), move |_| {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 1 {
                // Long enough for the poke below to land while this round runs.
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .unwrap();
        let poke = worker.poke_handle();
        let wait_for = |n: u64| {
            let deadline = Instant::now() + Duration::from_secs(30);
            while rounds.load(Ordering::SeqCst) < n {
                assert!(Instant::now() < deadline, "round {n} never ran");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        poke.poke();
        wait_for(1);
        poke.poke();
        poke.poke();
        wait_for(2);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            2,
            "pokes that land during one round run one more round, not one each"
        );
        drop(worker);
    }
}
