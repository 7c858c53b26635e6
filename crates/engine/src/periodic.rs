//! [`Periodic`]: the one way the engine runs a background worker (the WAL writer, the
//! background writer, autovacuum): a named thread that sleeps a period, runs a round, and
//! again, until its handle is dropped; dropping it wakes the thread, stops it and joins it.
//! A round that runs long checks [`Stop::requested`] to end early.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// The stop request a round can look at.
#[derive(Default)]
pub struct Stop {
    requested: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    /// Whether the worker's handle was dropped.
    pub fn requested(&self) -> bool {
        *self.requested.lock()
    }

    /// Sleeps `period` unless a stop is requested first; returns whether it was.
    fn sleep(&self, period: Duration) -> bool {
        let mut requested = self.requested.lock();
        if !*requested {
            self.wake.wait_for(&mut requested, period);
        }
        *requested
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
}
