//! The faults [`SimVfs`](super::SimVfs) injects: what disks and kernels do to a program, each
//! drawn from the file system's seed and each counted.
//!
//! A fault is either *armed* (the next operation of its kind on a matching path fails, once)
//! or given a *rate* (each operation of its kind on a matching path fails with that
//! probability, drawn from a generator seeded by the file system's seed, apart from the one
//! crashes use, so that setting a rate does not change what a crash keeps). Every injected
//! fault is counted in [`FaultCounts`], so a test can say how many of each it survived.

use std::fmt;
use std::io;
use std::path::Path;

use crate::rng::SplitMix64;

/// Linux's EIO.
pub(super) const EIO: i32 = 5;
/// Linux's ENOSPC.
pub(super) const ENOSPC: i32 = 28;
/// Linux's EMFILE.
pub(super) const EMFILE: i32 = 24;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// A write within the file's current size fails with ENOSPC; nothing is written.
    WriteNoSpace,
    /// A write within the file's current size fails with EIO; nothing is written.
    WriteIo,
    /// A write past the end, or a `set_len` that grows the file, fails with ENOSPC.
    ExtendNoSpace,
    /// A write past the end, or a `set_len` that grows the file, fails with EIO.
    ExtendIo,
    /// A write of more than one byte writes only a prefix of its bytes (a random length),
    /// then fails with ENOSPC, as a disk that fills up in the middle of a `write` does.
    ShortWrite,
    /// A read fails with EIO.
    ReadIo,
    /// An open fails with EIO.
    OpenIo,
    /// An open fails with EMFILE (too many open files).
    TooManyFiles,
    /// An fsync fails with EIO and the file's unsynced writes are dropped: they stay readable
    /// until a crash but never become durable. On a directory (`sync_dir`, matched by the
    /// directory's path) none of its changes becomes durable.
    FsyncIo,
    /// One bit of a file flips, in the page cache and on disk ([`SimVfs::flip_bit`],
    /// [`SimVfs::flip_random_bit`]); never injected by a rate.
    ///
    /// [`SimVfs::flip_bit`]: super::SimVfs::flip_bit
    /// [`SimVfs::flip_random_bit`]: super::SimVfs::flip_random_bit
    BitFlip,
    /// A directory change (create, rename, unlink, mkdir) not made durable by an fsync of its
    /// directory was lost at a crash; counted by the crash, never armed.
    LostNameChange,
}

impl Fault {
    /// Every kind, in display order.
    pub const ALL: [Fault; 11] = [
        Fault::WriteNoSpace,
        Fault::WriteIo,
        Fault::ExtendNoSpace,
        Fault::ExtendIo,
        Fault::ShortWrite,
        Fault::ReadIo,
        Fault::OpenIo,
        Fault::TooManyFiles,
        Fault::FsyncIo,
        Fault::BitFlip,
        Fault::LostNameChange,
    ];

    /// The name used in tables.
    pub fn name(self) -> &'static str {
        match self {
            Fault::WriteNoSpace => "write_enospc",
            Fault::WriteIo => "write_eio",
            Fault::ExtendNoSpace => "extend_enospc",
            Fault::ExtendIo => "extend_eio",
            Fault::ShortWrite => "short_write",
            Fault::ReadIo => "read_eio",
            Fault::OpenIo => "open_eio",
            Fault::TooManyFiles => "open_emfile",
            Fault::FsyncIo => "fsync_eio",
            Fault::BitFlip => "bit_flip",
            Fault::LostNameChange => "lost_name_change",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The error an operation that hit this fault returns.
    pub(super) fn error(self) -> io::Error {
        let errno = match self {
            Fault::WriteNoSpace | Fault::ExtendNoSpace | Fault::ShortWrite => ENOSPC,
            Fault::TooManyFiles => EMFILE,
            Fault::WriteIo
            | Fault::ExtendIo
            | Fault::ReadIo
            | Fault::OpenIo
            | Fault::FsyncIo
            | Fault::BitFlip
            | Fault::LostNameChange => EIO,
        };
        io::Error::from_raw_os_error(errno)
    }
}

/// How many faults of each kind were injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    counts: [u64; Fault::ALL.len()],
}

impl FaultCounts {
    /// How many faults of `fault`'s kind.
    pub fn get(&self, fault: Fault) -> u64 {
        self.counts[fault.index()]
    }

    /// Every kind's count added up.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The faults counted in `self` but not in the earlier `before`.
    #[must_use]
    pub fn since(&self, before: &FaultCounts) -> FaultCounts {
        let mut counts = self.counts;
        for (c, b) in counts.iter_mut().zip(before.counts) {
            *c = c.saturating_sub(b);
        }
        FaultCounts { counts }
    }
}

impl std::ops::AddAssign for FaultCounts {
    fn add_assign(&mut self, other: FaultCounts) {
        for (c, o) in self.counts.iter_mut().zip(other.counts) {
            *c += o;
        }
    }
}

impl fmt::Display for FaultCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for fault in Fault::ALL {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            write!(f, "{}={}", fault.name(), self.get(fault))?;
        }
        Ok(())
    }
}

/// A path filter: `None` matches every path, `Some(part)` the paths containing `part`.
type Filter = Option<String>;

fn matches(filter: &Filter, path: &Path) -> bool {
    filter
        .as_deref()
        .is_none_or(|part| path.to_string_lossy().contains(part))
}

/// The fault state of one file system (kept under its lock).
pub(super) struct Faults {
    rng: SplitMix64,
    /// One-shot faults, used in the order armed.
    armed: Vec<(Fault, Filter)>,
    /// Standing rates: each matching operation fails with the probability.
    rates: Vec<(Fault, f64, Filter)>,
    counts: FaultCounts,
}

/// Mixed into the seed so that the fault draws do not repeat the crash draws.
const FAULT_SEED_SALT: u64 = 0xFA17_FA17_FA17_FA17;

impl Faults {
    pub(super) fn new(seed: u64) -> Self {
        Faults {
            rng: SplitMix64::new(seed ^ FAULT_SEED_SALT),
            armed: Vec::new(),
            rates: Vec::new(),
            counts: FaultCounts::default(),
        }
    }

    pub(super) fn arm(&mut self, fault: Fault, path_contains: Option<&str>) {
        self.armed.push((fault, path_contains.map(str::to_owned)));
    }

    /// Sets (or with 0.0 removes) the rate of `fault` on paths matching the filter.
    pub(super) fn set_rate(&mut self, fault: Fault, probability: f64, path_contains: Option<&str>) {
        let filter = path_contains.map(str::to_owned);
        self.rates
            .retain(|(f, _, p)| !(*f == fault && *p == filter));
        let probability = if probability.is_nan() {
            0.0
        } else {
            probability.clamp(0.0, 1.0)
        };
        if probability > 0.0 {
            self.rates.push((fault, probability, filter));
        }
    }

    /// Does the operation of kind `fault` on `path` fail? Counts it if so. Draws from the
    /// generator only when a rate applies, so that rates set on other kinds or paths do not
    /// change this operation's outcome.
    pub(super) fn hit(&mut self, fault: Fault, path: &Path) -> bool {
        let armed = self
            .armed
            .iter()
            .position(|(f, filter)| *f == fault && matches(filter, path));
        let hit = if let Some(index) = armed {
            self.armed.remove(index);
            true
        } else {
            let rate = self
                .rates
                .iter()
                .find(|(f, _, filter)| *f == fault && matches(filter, path))
                .map(|(_, p, _)| *p);
            rate.is_some_and(|p| self.rng.chance(p))
        };
        if hit {
            self.count(fault, 1);
        }
        hit
    }

    pub(super) fn count(&mut self, fault: Fault, n: u64) {
        self.counts.counts[fault.index()] += n;
    }

    pub(super) fn counts(&self) -> FaultCounts {
        self.counts
    }

    /// A value in `0..n` from the fault generator (where a short write stops, which bit flips).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }
}
