//! Counting every file operation by kind.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The kinds of file operation that are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Open,
    Close,
    Read,
    Write,
    SizeProbe,
    Truncate,
    Fsync,
    Unlink,
    Rename,
    DirSync,
}

impl OpKind {
    /// Every kind, in display order.
    pub const ALL: [OpKind; 10] = [
        OpKind::Open,
        OpKind::Close,
        OpKind::Read,
        OpKind::Write,
        OpKind::SizeProbe,
        OpKind::Truncate,
        OpKind::Fsync,
        OpKind::Unlink,
        OpKind::Rename,
        OpKind::DirSync,
    ];

    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Open => "open",
            OpKind::Close => "close",
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::SizeProbe => "size_probe",
            OpKind::Truncate => "truncate",
            OpKind::Fsync => "fsync",
            OpKind::Unlink => "unlink",
            OpKind::Rename => "rename",
            OpKind::DirSync => "dir_sync",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Live counters, shared by a file system and its open files.
#[derive(Debug, Default)]
pub struct OpCounters {
    counts: [AtomicU64; OpKind::ALL.len()],
}

impl OpCounters {
    /// Counts one operation.
    pub fn bump(&self, kind: OpKind) {
        self.counts[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// A copy of the current counts.
    pub fn snapshot(&self) -> OpCounts {
        let mut counts = [0u64; OpKind::ALL.len()];
        for (dst, src) in counts.iter_mut().zip(&self.counts) {
            *dst = src.load(Ordering::Relaxed);
        }
        OpCounts { counts }
    }
}

/// A point-in-time copy of [`OpCounters`]; subtract two to count what happened in between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    counts: [u64; OpKind::ALL.len()],
}

impl OpCounts {
    /// How many operations of `kind`.
    pub fn get(&self, kind: OpKind) -> u64 {
        self.counts[kind.index()]
    }

    /// The operations counted in `self` but not in the earlier snapshot `before`.
    #[must_use]
    pub fn since(&self, before: &OpCounts) -> OpCounts {
        let mut counts = [0u64; OpKind::ALL.len()];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = self.counts[i].saturating_sub(before.counts[i]);
        }
        OpCounts { counts }
    }
}

impl fmt::Display for OpCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for kind in OpKind::ALL {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            write!(f, "{}={}", kind.name(), self.get(kind))?;
        }
        Ok(())
    }
}
