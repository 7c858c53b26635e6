//! The three operating-system calls the standard library does not wrap: reading and raising
//! the process's limit on open file descriptors (`getrlimit`/`setrlimit` of
//! `RLIMIT_NOFILE`) and the effective user id (`geteuid`). With the WAL ring, the only
//! module of the engine allowed `unsafe`: each call is a plain system call on values this
//! module owns, with its `SAFETY:` argument next to it.
#![allow(unsafe_code)]

use std::io;

/// `RLIMIT_NOFILE`: how many file descriptors the process may have open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorLimit {
    /// The soft limit: an `open` or `accept` that would go past it fails with EMFILE.
    pub soft: u64,
    /// The hard limit: how far the process may raise its soft limit.
    pub hard: u64,
}

fn getrlimit_nofile() -> io::Result<DescriptorLimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a live, writable `rlimit` owned by this frame; getrlimit writes only it.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut rl) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(DescriptorLimit {
        soft: rl.rlim_cur,
        hard: rl.rlim_max,
    })
}

fn setrlimit_nofile(limit: DescriptorLimit) -> io::Result<()> {
    let rl = libc::rlimit {
        rlim_cur: limit.soft,
        rlim_max: limit.hard,
    };
    // SAFETY: `rl` is a live `rlimit` owned by this frame; setrlimit only reads it.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const rl) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the soft limit on open descriptors to the hard limit (as PostgreSQL 18 does at
/// start, and most servers do: the soft limit of 1024 many systems default to is there for
/// programs that use `select`, which quire does not), then returns the limit in force.
/// Where the raise is refused (a hard limit of "unlimited", which Linux's `nr_open` caps),
/// the soft limit stays as it was.
pub fn raise_descriptor_limit() -> io::Result<DescriptorLimit> {
    let limit = getrlimit_nofile()?;
    if limit.soft < limit.hard {
        let raised = DescriptorLimit {
            soft: limit.hard,
            hard: limit.hard,
        };
        if let Err(e) = setrlimit_nofile(raised) {
            tracing::info!(soft = limit.soft, hard = limit.hard, error = %e, "could not raise the soft limit on open files");
        }
    }
    getrlimit_nofile()
}

/// The effective user id of the process (the one file permissions are checked against).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing, touches no memory of ours, and cannot fail.
    unsafe { libc::geteuid() }
}

/// How many descriptors the process has open now (the entries of `/proc/self/fd`, less the
/// one reading it); `None` where there is no `/proc` to ask.
pub fn open_descriptors() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    let listed = entries.flatten().count() as u64;
    Some(listed.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_limit() {
        let limit = raise_descriptor_limit().unwrap();
        assert!(limit.soft <= limit.hard, "{limit:?}");
        assert!(limit.soft >= 64, "{limit:?}");
        // Raised, unless the hard limit is one Linux cannot grant (RLIM_INFINITY).
        if limit.hard != libc::RLIM_INFINITY {
            assert_eq!(limit.soft, limit.hard, "{limit:?}");
        }
        // Idempotent.
        assert_eq!(raise_descriptor_limit().unwrap(), limit);
    }

    #[test]
    fn open_descriptors_counts_the_files_held_and_the_owner_is_the_effective_user() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let Some(before) = open_descriptors() else {
            return; // no /proc on this system
        };
        assert!(before >= 3, "stdin, stdout and stderr at least: {before}");
        let files: Vec<_> = (0..200)
            .map(|i| std::fs::File::create(dir.path().join(i.to_string())).unwrap())
            .collect();
        // Other tests open and close files meanwhile: ours, held, are counted at least.
        let during = open_descriptors().unwrap();
        assert!(during >= 200, "{during} open while holding 200");
        drop(files);
        let owner = std::fs::metadata(dir.path()).unwrap().uid();
        assert_eq!(
            effective_uid(),
            owner,
            "a directory this process made is its own"
        );
    }
}
