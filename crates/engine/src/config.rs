//! Settings. Names, units and defaults follow PostgreSQL wherever PostgreSQL has the setting;
//! where quire differs, the reason is written next to the field. The seed switches
//! (`buffer_drop`, `relsize_cache`, ...) are ordinary settings whose default is the fast path;
//! the old behaviour exists so a benchmark can measure both in one process.
//!
//! ## Rules
//! - One `Config` per open database, fixed at `Database::open`: nothing reads a setting
//!   from anywhere else, and no setting changes on an open database except through an
//!   explicit engine call that says so (today only `twophase_state`, for transactions
//!   prepared from then on, so a benchmark can compare both behaviours on one database).
//! - [`Config::validate`] runs before anything is opened, and [`Config::set`] validates a
//!   copy before storing it, so an invalid configuration never exists in a running engine.
//!   Every refusal names the setting (SQLSTATE 22023).
//! - Settings that depend on each other are checked together there, and limits they derive
//!   from are defined once in [`crate::types`]: `wal_buffers` ≥
//!   `types::MIN_WAL_BUFFERS_BYTES` (four of the largest WAL record, so an inserter never
//!   waits for its own ring slot); `wal_segment_size` and `wal_buffers` multiples of the page
//!   size; the lock table sized by `max_locks_per_transaction` × (`max_connections` +
//!   `max_prepared_transactions`).

use crate::error::{Error, Result};
use crate::types::PAGE_SIZE;

/// How durability of data-file writes is achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// Requests go to the checkpointer, which fsyncs each file once per checkpoint.
    Checkpointer,
    /// Every write that needs durability fsyncs its file at once.
    Immediate,
}

impl SyncMode {
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Checkpointer => "checkpointer",
            SyncMode::Immediate => "immediate",
        }
    }
}

/// How the buffer pool finds the buffers of a relation being dropped or truncated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferDropMode {
    /// A per-relation index of cached buffers: cost proportional to the relation's buffers.
    Indexed,
    /// Scan every buffer descriptor, as PostgreSQL 13 and earlier do.
    FullScan,
    /// PostgreSQL 14-17: during recovery, when the relation sizes are cached and the blocks
    /// to drop are fewer than NBuffers/32, look each block up in the mapping table;
    /// otherwise (and always in normal running) scan every descriptor.
    Pg14,
}

impl BufferDropMode {
    pub fn name(self) -> &'static str {
        match self {
            BufferDropMode::Indexed => "indexed",
            BufferDropMode::FullScan => "full_scan",
            BufferDropMode::Pg14 => "pg14",
        }
    }
}

/// Whether relation sizes are cached in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelsizeCacheMode {
    /// Sizes are kept exact by extend/truncate/unlink; `nblocks()` makes no system call.
    On,
    /// Every `nblocks()` probes the file size (`lseek(SEEK_END)`), as PostgreSQL 13 and
    /// earlier do.
    Off,
    /// PostgreSQL 14-17: sizes are cached during recovery only; in normal running every
    /// `nblocks()` probes.
    RecoveryOnly,
}

impl RelsizeCacheMode {
    pub fn name(self) -> &'static str {
        match self {
            RelsizeCacheMode::On => "on",
            RelsizeCacheMode::Off => "off",
            RelsizeCacheMode::RecoveryOnly => "recovery_only",
        }
    }
}

/// Where a prepared transaction's state is found at COMMIT/ROLLBACK PREPARED (seed 003).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TwophaseStateMode {
    /// Kept in memory from PREPARE on (spilled to a state file at a checkpoint, and still
    /// kept in memory): COMMIT PREPARED opens no file and reads no WAL.
    Memory,
    /// Re-read from the prepare record in its WAL segment file, opened for the purpose, at
    /// every COMMIT/ROLLBACK PREPARED, as PostgreSQL does (`XlogReadTwoPhaseData`).
    RereadWal,
}

impl TwophaseStateMode {
    pub fn name(self) -> &'static str {
        match self {
            TwophaseStateMode::Memory => "memory",
            TwophaseStateMode::RereadWal => "reread_wal",
        }
    }
}

/// How lazy vacuum stores the dead tuple ids it collects (seed 004).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadTidsMode {
    /// A compact TID store: per-block offset bitmaps under a radix of block numbers.
    Store,
    /// PostgreSQL's old sorted array of 6-byte item pointers, searched by bisection.
    Array,
}

impl DeadTidsMode {
    pub fn name(self) -> &'static str {
        match self {
            DeadTidsMode::Store => "store",
            DeadTidsMode::Array => "array",
        }
    }
}

/// Every setting of the engine.
#[derive(Clone, Debug)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "each is one of PostgreSQL's on/off settings"
)]
pub struct Config {
    /// `shared_buffers`: the size of the buffer pool. PostgreSQL's default, 128 MB.
    pub shared_buffers_bytes: u64,
    /// `segment_size`: blocks per relation segment file. PostgreSQL's default is 1 GiB
    /// (131072 blocks) and is fixed at build time; quire makes it a setting so tests can use
    /// tiny segments and exercise segment boundaries.
    pub segment_size_blocks: u32,
    /// `max_files_per_process`: open relation segment files kept cached; the least recently
    /// used are closed beyond it. PostgreSQL's default, 1000.
    pub max_files_per_process: usize,
    /// `wal_segment_size`: bytes per WAL segment file. PostgreSQL's default, 16 MB.
    pub wal_segment_size_bytes: u64,
    /// `wal_buffers`: the ring of WAL pages in memory. 16 MB, PostgreSQL's largest automatic
    /// value; at least 1 MB (four of the largest records).
    pub wal_buffers_bytes: u64,
    /// `checkpoint_timeout`: seconds between automatic checkpoints. PostgreSQL's default, 5 min.
    pub checkpoint_timeout_s: u64,
    /// `checkpoint_completion_target`: the share of the interval over which a timed
    /// checkpoint spreads its writes. PostgreSQL's default, 0.9.
    pub checkpoint_completion_target: f64,
    /// `max_wal_size`: WAL written since the last redo point that triggers a checkpoint.
    /// PostgreSQL's default, 1 GB.
    pub max_wal_size_bytes: u64,
    /// `synchronous_commit`: a commit returns once its record is durable (on), or at once
    /// (off: a crash may lose the last commits, never corrupt). PostgreSQL's default, on.
    pub synchronous_commit: bool,
    /// `commit_delay`: microseconds a group-commit leader waits before its flush, so more
    /// commits join it, when at least `commit_siblings` other transactions are active.
    /// PostgreSQL's meaning and default, 0 (off); at most 100,000 as in PostgreSQL.
    pub commit_delay_us: u64,
    /// `commit_siblings`: other active transactions needed before `commit_delay` applies.
    /// PostgreSQL's default, 5.
    pub commit_siblings: usize,
    /// `wal_writer_delay`: the background WAL writer flushes at least this often, so an
    /// asynchronous commit (`synchronous_commit = off`) is durable within about three times
    /// it, as in PostgreSQL. PostgreSQL's default, 200 ms.
    pub wal_writer_delay_ms: u64,
    /// `track_commit_timestamp`: record each commit's time. PostgreSQL's default, off.
    pub track_commit_timestamp: bool,
    /// `wal_init_zero`: new WAL segments are written full of zeros before WAL goes into them
    /// (the WAL writer prepares the next one ahead of need), so a commit's fdatasync does not
    /// also commit block allocations. PostgreSQL's default, on.
    pub wal_init_zero: bool,
    /// `wal_direct_io`: WAL segments are written with direct I/O (`O_DIRECT`) where the file
    /// system allows it, so a commit's write goes to the device without a copy in the page
    /// cache and its fdatasync has only the device's cache to flush: about 15 µs less per
    /// commit on the machine measured (`docs/design.md`). PostgreSQL writes WAL through the
    /// page cache unless `wal_level = minimal` with an `open_*sync` `wal_sync_method`.
    /// quire's default, on.
    pub wal_direct_io: bool,
    /// `bgwriter_delay`: time between the background writer's rounds. PostgreSQL's default,
    /// 200 ms (10 ms to 10 s).
    pub bgwriter_delay_ms: u64,
    /// `bgwriter_lru_maxpages`: buffers the background writer writes per round at most; 0
    /// turns it off. PostgreSQL's default, 100.
    pub bgwriter_lru_maxpages: u64,
    /// `bgwriter_lru_multiplier`: buffers made reusable per round, as a multiple of those
    /// taken in a recent round. PostgreSQL's default, 2.0 (0 to 10).
    pub bgwriter_lru_multiplier: f64,
    /// Seed 000 switch.
    pub buffer_drop: BufferDropMode,
    /// Seed 001 switch: `checkpointer` (fsyncs absorbed and done once per file per checkpoint)
    /// or `immediate` (every write that needs durability fsyncs at once).
    pub sync: SyncMode,
    /// Seed 002 switch.
    pub relsize_cache: RelsizeCacheMode,
    /// `max_connections`: sessions (embedded: concurrently open transactions) at most.
    /// PostgreSQL's default, 100. Sizes the lock table with the next two settings.
    pub max_connections: usize,
    /// `max_prepared_transactions`: prepared transactions at most. PostgreSQL's default, 0,
    /// which disables PREPARE TRANSACTION: a transaction manager must size it on purpose.
    pub max_prepared_transactions: usize,
    /// `max_locks_per_transaction`: the lock table holds this many locks per connection and
    /// prepared transaction (PostgreSQL's formula and default, 64).
    pub max_locks_per_transaction: usize,
    /// `deadlock_timeout`: how long a lock wait lasts before the deadlock check runs, in
    /// milliseconds. PostgreSQL's default, 1 s.
    pub deadlock_timeout_ms: u64,
    /// Seed 003 switch: `memory` (default) or `reread_wal` (PostgreSQL's behaviour).
    pub twophase_state: TwophaseStateMode,
    /// `maintenance_work_mem`: the memory vacuum may use for dead tuple ids before it must
    /// run an index pass. PostgreSQL's default, 64 MB; unlike PostgreSQL there is no 1 GB cap.
    pub maintenance_work_mem_bytes: u64,
    /// Seed 004 switch: `store` (default) or `array` (PostgreSQL's old dead-TID array).
    pub dead_tids: DeadTidsMode,
    /// `autovacuum`: run the autovacuum worker. PostgreSQL's default, on.
    pub autovacuum: bool,
    /// `autovacuum_naptime`: time between the worker's rounds, in milliseconds. PostgreSQL's
    /// default, 1 min.
    pub autovacuum_naptime_ms: u64,
    /// `autovacuum_vacuum_threshold`: dead tuples a table needs, beyond the scaled part,
    /// before the worker vacuums it. PostgreSQL's default, 50.
    pub autovacuum_vacuum_threshold: u64,
    /// `autovacuum_vacuum_scale_factor`: the share of live tuples added to the threshold.
    /// PostgreSQL's default, 0.2.
    pub autovacuum_vacuum_scale_factor: f64,
    /// `autovacuum_freeze_max_age`: when the oldest commit status kept is this many
    /// transactions behind the next id, the worker vacuums the whole database so that the
    /// commit logs can drop their old segments. With 64-bit ids nothing wraps: this bounds
    /// the logs' size (at PostgreSQL's default, 200,000,000: 48 MiB of statuses).
    pub autovacuum_freeze_max_age: u64,
    /// `vacuum_freeze_min_age`: the commit logs keep at least the statuses (and commit
    /// timestamps) of this many recent transactions, whatever vacuum froze. PostgreSQL's
    /// default, 50,000,000; at most half of `autovacuum_freeze_max_age` takes effect, as in
    /// PostgreSQL.
    pub vacuum_freeze_min_age: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            shared_buffers_bytes: 128 * 1024 * 1024,
            segment_size_blocks: 131_072,
            max_files_per_process: 1000,
            wal_segment_size_bytes: 16 * 1024 * 1024,
            wal_buffers_bytes: 16 * 1024 * 1024,
            checkpoint_timeout_s: 300,
            synchronous_commit: true,
            commit_delay_us: 0,
            commit_siblings: 5,
            wal_writer_delay_ms: 200,
            track_commit_timestamp: false,
            wal_init_zero: true,
            wal_direct_io: true,
            bgwriter_delay_ms: 200,
            bgwriter_lru_maxpages: 100,
            bgwriter_lru_multiplier: 2.0,
            checkpoint_completion_target: 0.9,
            max_wal_size_bytes: 1024 * 1024 * 1024,
            buffer_drop: BufferDropMode::Indexed,
            sync: SyncMode::Checkpointer,
            relsize_cache: RelsizeCacheMode::On,
            max_connections: 100,
            max_prepared_transactions: 0,
            max_locks_per_transaction: 64,
            deadlock_timeout_ms: 1000,
            twophase_state: TwophaseStateMode::Memory,
            maintenance_work_mem_bytes: 64 * 1024 * 1024,
            dead_tids: DeadTidsMode::Store,
            autovacuum: true,
            autovacuum_naptime_ms: 60_000,
            autovacuum_vacuum_threshold: 50,
            autovacuum_vacuum_scale_factor: 0.2,
            autovacuum_freeze_max_age: 200_000_000,
            vacuum_freeze_min_age: 50_000_000,
        }
    }
}

/// The largest pool quire accepts: 2^31 buffers would overflow the 31-bit buffer ids.
const MAX_SHARED_BUFFERS_BYTES: u64 = (1 << 30) * PAGE_SIZE as u64;

impl Config {
    /// The recent transactions whose statuses the commit logs keep: `vacuum_freeze_min_age`,
    /// at most half of `autovacuum_freeze_max_age` (PostgreSQL clamps it the same way).
    pub fn effective_freeze_min_age(&self) -> u64 {
        self.vacuum_freeze_min_age
            .min(self.autovacuum_freeze_max_age / 2)
    }

    /// The number of buffers in the pool.
    pub fn nbuffers(&self) -> usize {
        (self.shared_buffers_bytes / PAGE_SIZE as u64) as usize
    }

    /// The lock table's capacity in locks (PostgreSQL's `max_locks_per_transaction *
    /// (max_connections + max_prepared_transactions)`).
    pub fn lock_table_capacity(&self) -> usize {
        self.max_locks_per_transaction
            .saturating_mul(self.max_connections + self.max_prepared_transactions)
    }

    /// Sets one setting by its PostgreSQL-style name from its text form (as in a TOML file,
    /// a `-c name=value` flag or an environment variable). A value that fails to parse or to
    /// validate leaves the configuration as it was.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let mut next = self.clone();
        next.assign(name, value)?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Parses and stores one setting, unvalidated.
    fn assign(&mut self, name: &str, value: &str) -> Result<()> {
        let bad = |reason: String| Error::Config {
            name: name.to_string(),
            reason,
        };
        match name {
            "shared_buffers" => self.shared_buffers_bytes = parse_bytes(value).map_err(bad)?,
            "segment_size" => {
                let bytes = parse_bytes(value).map_err(bad)?;
                if bytes % PAGE_SIZE as u64 != 0 {
                    return Err(bad(format!("{value} is not a multiple of the 8 kB page")));
                }
                self.segment_size_blocks = u32::try_from(bytes / PAGE_SIZE as u64)
                    .map_err(|_| bad(format!("{value} is too large")))?;
            }
            "max_files_per_process" => {
                self.max_files_per_process = value
                    .trim()
                    .parse()
                    .map_err(|e| bad(format!("\"{value}\" is not a whole number: {e}")))?;
            }
            "wal_segment_size" => self.wal_segment_size_bytes = parse_bytes(value).map_err(bad)?,
            "wal_buffers" => self.wal_buffers_bytes = parse_bytes(value).map_err(bad)?,
            "checkpoint_timeout" => {
                self.checkpoint_timeout_s = parse_seconds(value).map_err(bad)?;
            }
            "synchronous_commit" => self.synchronous_commit = parse_on_off(value).map_err(bad)?,
            "wal_init_zero" => self.wal_init_zero = parse_on_off(value).map_err(bad)?,
            "wal_direct_io" => self.wal_direct_io = parse_on_off(value).map_err(bad)?,
            "commit_delay" => self.commit_delay_us = parse_micros(value).map_err(bad)?,
            "commit_siblings" => self.commit_siblings = parse_count(value).map_err(bad)?,
            "wal_writer_delay" => self.wal_writer_delay_ms = parse_millis(value).map_err(bad)?,
            "bgwriter_delay" => self.bgwriter_delay_ms = parse_millis(value).map_err(bad)?,
            "bgwriter_lru_maxpages" => {
                self.bgwriter_lru_maxpages = parse_count(value).map_err(bad)? as u64;
            }
            "bgwriter_lru_multiplier" => {
                self.bgwriter_lru_multiplier = parse_number(value).map_err(bad)?;
            }
            "track_commit_timestamp" => {
                self.track_commit_timestamp = parse_on_off(value).map_err(bad)?;
            }
            "max_wal_size" => self.max_wal_size_bytes = parse_bytes(value).map_err(bad)?,
            "checkpoint_completion_target" => {
                self.checkpoint_completion_target = parse_number(value).map_err(bad)?;
            }
            "buffer_drop" => {
                self.buffer_drop = match value.trim() {
                    "indexed" => BufferDropMode::Indexed,
                    "full_scan" => BufferDropMode::FullScan,
                    "pg14" => BufferDropMode::Pg14,
                    other => {
                        return Err(bad(format!(
                            "\"{other}\" is not indexed, full_scan or pg14"
                        )))
                    }
                }
            }
            "sync" => {
                self.sync = match value.trim() {
                    "checkpointer" => SyncMode::Checkpointer,
                    "immediate" => SyncMode::Immediate,
                    other => {
                        return Err(bad(format!("\"{other}\" is not checkpointer or immediate")))
                    }
                }
            }
            "relsize_cache" => {
                self.relsize_cache = if value.trim() == "recovery_only" {
                    RelsizeCacheMode::RecoveryOnly
                } else if parse_on_off(value).map_err(bad)? {
                    RelsizeCacheMode::On
                } else {
                    RelsizeCacheMode::Off
                };
            }
            "max_connections" => self.max_connections = parse_count(value).map_err(bad)?,
            "max_prepared_transactions" => {
                self.max_prepared_transactions = parse_count(value).map_err(bad)?;
            }
            "max_locks_per_transaction" => {
                self.max_locks_per_transaction = parse_count(value).map_err(bad)?;
            }
            "deadlock_timeout" => self.deadlock_timeout_ms = parse_millis(value).map_err(bad)?,
            "twophase_state" => {
                self.twophase_state = match value.trim() {
                    "memory" => TwophaseStateMode::Memory,
                    "reread_wal" => TwophaseStateMode::RereadWal,
                    other => return Err(bad(format!("\"{other}\" is not memory or reread_wal"))),
                }
            }
            "maintenance_work_mem" => {
                self.maintenance_work_mem_bytes = parse_bytes(value).map_err(bad)?;
            }
            "autovacuum" => self.autovacuum = parse_on_off(value).map_err(bad)?,
            "autovacuum_naptime" => {
                // PostgreSQL's unit for a bare number is seconds here.
                self.autovacuum_naptime_ms = if value.trim().bytes().all(|b| b.is_ascii_digit()) {
                    parse_seconds(value).map_err(bad)? * 1000
                } else {
                    parse_millis(value).map_err(bad)?
                };
            }
            "autovacuum_vacuum_threshold" => {
                self.autovacuum_vacuum_threshold = parse_count(value).map_err(bad)? as u64;
            }
            "vacuum_freeze_min_age" => {
                self.vacuum_freeze_min_age = parse_count(value).map_err(bad)? as u64;
            }
            "autovacuum_freeze_max_age" => {
                self.autovacuum_freeze_max_age = parse_count(value).map_err(bad)? as u64;
            }
            "autovacuum_vacuum_scale_factor" => {
                self.autovacuum_vacuum_scale_factor = parse_number(value).map_err(bad)?;
            }
            "dead_tids" => {
                self.dead_tids = match value.trim() {
                    "store" => DeadTidsMode::Store,
                    "array" => DeadTidsMode::Array,
                    other => return Err(bad(format!("\"{other}\" is not store or array"))),
                }
            }
            _ => {
                return Err(Error::Config {
                    name: name.to_string(),
                    reason: "unrecognized configuration parameter".to_string(),
                })
            }
        }
        Ok(())
    }

    /// Checks the settings against each other and their limits.
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &str, reason: String| {
            Err(Error::Config {
                name: name.to_string(),
                reason,
            })
        };
        if self.nbuffers() < 16 {
            return bad(
                "shared_buffers",
                format!(
                    "{} bytes is less than 16 buffers",
                    self.shared_buffers_bytes
                ),
            );
        }
        if self.shared_buffers_bytes > MAX_SHARED_BUFFERS_BYTES {
            return bad(
                "shared_buffers",
                format!(
                    "{} bytes is more than the maximum of 8 TiB",
                    self.shared_buffers_bytes
                ),
            );
        }
        if self.segment_size_blocks == 0 {
            return bad("segment_size", "must be at least one block".to_string());
        }
        let page = PAGE_SIZE as u64;
        if self.wal_segment_size_bytes < 2 * page
            || !self.wal_segment_size_bytes.is_multiple_of(page)
        {
            return bad(
                "wal_segment_size",
                format!(
                    "{} bytes is not a multiple of 8 kB of at least 16 kB",
                    self.wal_segment_size_bytes
                ),
            );
        }
        let min_wal_buffers = crate::types::MIN_WAL_BUFFERS_BYTES as u64;
        if self.wal_buffers_bytes < min_wal_buffers || !self.wal_buffers_bytes.is_multiple_of(page)
        {
            return bad(
                "wal_buffers",
                format!(
                    "{} bytes is not a multiple of 8 kB of at least {min_wal_buffers} bytes",
                    self.wal_buffers_bytes
                ),
            );
        }
        check_range(
            "checkpoint_completion_target",
            self.checkpoint_completion_target,
            0.0,
            1.0,
        )?;
        check_range("checkpoint_timeout", self.checkpoint_timeout_s, 1, u64::MAX)?;
        check_range(
            "max_files_per_process",
            self.max_files_per_process,
            4,
            usize::MAX,
        )?;
        check_range("max_connections", self.max_connections, 1, usize::MAX)?;
        check_range(
            "max_locks_per_transaction",
            self.max_locks_per_transaction,
            10,
            usize::MAX,
        )?;
        check_range("deadlock_timeout", self.deadlock_timeout_ms, 1, u64::MAX)?;
        check_range("commit_delay", self.commit_delay_us, 0, 100_000)?;
        check_range("commit_siblings", self.commit_siblings, 0, 1000)?;
        check_range("wal_writer_delay", self.wal_writer_delay_ms, 1, 10_000)?;
        check_range("bgwriter_delay", self.bgwriter_delay_ms, 10, 10_000)?;
        check_range(
            "bgwriter_lru_maxpages",
            self.bgwriter_lru_maxpages,
            0,
            1_073_741_823,
        )?;
        check_range(
            "bgwriter_lru_multiplier",
            self.bgwriter_lru_multiplier,
            0.0,
            10.0,
        )?;
        check_range(
            "autovacuum_naptime",
            self.autovacuum_naptime_ms,
            1,
            u64::MAX,
        )?;
        check_range(
            "autovacuum_vacuum_scale_factor",
            self.autovacuum_vacuum_scale_factor,
            0.0,
            100.0,
        )?;
        check_range(
            "autovacuum_freeze_max_age",
            self.autovacuum_freeze_max_age,
            100_000,
            2_000_000_000,
        )?;
        check_range(
            "vacuum_freeze_min_age",
            self.vacuum_freeze_min_age,
            0,
            1_000_000_000,
        )?;
        if self.maintenance_work_mem_bytes < 1024 * 1024 {
            return bad(
                "maintenance_work_mem",
                format!(
                    "{} bytes is less than 1 MB",
                    self.maintenance_work_mem_bytes
                ),
            );
        }
        Ok(())
    }
}

/// Fails with an [`Error::Config`] naming the setting unless `lo <= value <= hi`.
fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
    name: &str,
    value: T,
    lo: T,
    hi: T,
) -> Result<()> {
    let reason = if value < lo {
        format!("{value} is less than the minimum of {lo}")
    } else if value > hi {
        format!("{value} is more than the maximum of {hi}")
    } else {
        return Ok(());
    };
    Err(Error::Config {
        name: name.to_string(),
        reason,
    })
}

/// Parses a boolean setting as PostgreSQL reads them: `on`/`off`, `true`/`false`, `yes`/`no`
/// or `1`/`0`, in any case.
pub fn parse_on_off(text: &str) -> std::result::Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("\"{}\" is not on or off", text.trim())),
    }
}

/// A boolean setting as PostgreSQL shows it (SHOW, `pg_settings`): `on` or `off`.
pub fn on_off(value: bool) -> &'static str {
    if value {
        "on"
    } else {
        "off"
    }
}

/// Parses a number (a fraction or a multiplier).
pub fn parse_number(text: &str) -> std::result::Result<f64, String> {
    text.trim()
        .parse()
        .map_err(|e| format!("\"{text}\" is not a number: {e}"))
}

/// Parses a whole number (a count).
pub fn parse_count(text: &str) -> std::result::Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|e| format!("\"{text}\" is not a whole number: {e}"))
}

/// Parses a duration in milliseconds: a bare number is milliseconds (PostgreSQL's unit for
/// `deadlock_timeout`); `ms`, `s`, `min` and `h` suffixes as in PostgreSQL.
pub fn parse_millis(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("\"{text}\" does not start with a whole number"))?;
    let mult = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1000,
        "min" => 60_000,
        "h" => 3_600_000,
        other => return Err(format!("\"{other}\" is not a unit (use ms, s, min, h)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("\"{text}\" is too large"))
}

/// Parses a duration in microseconds: a bare number is microseconds (PostgreSQL's unit for
/// `commit_delay`); `us`, `ms` and `s` suffixes.
pub fn parse_micros(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("\"{text}\" does not start with a whole number"))?;
    let mult = match unit.trim() {
        "" | "us" => 1,
        "ms" => 1000,
        "s" => 1_000_000,
        other => return Err(format!("\"{other}\" is not a unit (use us, ms, s)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("\"{text}\" is too large"))
}

/// Parses a duration in seconds: a bare number is seconds; `s`, `min` and `h` suffixes as in
/// PostgreSQL.
pub fn parse_seconds(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("\"{text}\" does not start with a whole number"))?;
    let mult = match unit.trim() {
        "" | "s" => 1,
        "min" => 60,
        "h" => 3600,
        other => return Err(format!("\"{other}\" is not a unit (use s, min, h)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("\"{text}\" is too large"))
}

/// Parses a size in bytes: a bare number is bytes; suffixes `kB`/`MB`/`GB`/`TB` (PostgreSQL's,
/// powers of 1024) and `KiB`/`MiB`/`GiB`/`TiB` are accepted.
pub fn parse_bytes(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("\"{text}\" does not start with a whole number"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "kB" | "KB" | "KiB" | "k" | "K" => 1 << 10,
        "MB" | "MiB" | "M" => 1 << 20,
        "GB" | "GiB" | "G" => 1 << 30,
        "TB" | "TiB" | "T" => 1 << 40,
        other => return Err(format!("\"{other}\" is not a unit (use kB, MB, GB, TB)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("\"{text}\" is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes_with_units() {
        assert_eq!(parse_bytes("8192").unwrap(), 8192);
        assert_eq!(parse_bytes("128MB").unwrap(), 128 << 20);
        assert_eq!(parse_bytes("16 GiB").unwrap(), 16 << 30);
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("MB").is_err());
        assert!(parse_bytes("99999999999999TB").is_err());
    }

    #[test]
    fn set_validates_and_names_the_setting() {
        let mut c = Config::default();
        c.set("shared_buffers", "1GB").unwrap();
        assert_eq!(c.nbuffers(), 131_072);
        c.set("buffer_drop", "full_scan").unwrap();
        assert_eq!(c.buffer_drop, BufferDropMode::FullScan);
        let err = c.set("shared_buffers", "8kB").unwrap_err().to_string();
        assert!(err.contains("shared_buffers"), "{err}");
        let err = c.set("no_such_thing", "1").unwrap_err().to_string();
        assert!(err.contains("unrecognized"), "{err}");
        assert!(c.set("segment_size", "1000").is_err());
    }

    #[test]
    fn transaction_settings_parse_with_postgres_units() {
        let mut c = Config::default();
        c.set("deadlock_timeout", "250ms").unwrap();
        assert_eq!(c.deadlock_timeout_ms, 250);
        c.set("deadlock_timeout", "2s").unwrap();
        assert_eq!(c.deadlock_timeout_ms, 2000);
        c.set("max_prepared_transactions", "10").unwrap();
        c.set("twophase_state", "reread_wal").unwrap();
        assert_eq!(c.twophase_state, TwophaseStateMode::RereadWal);
        c.set("dead_tids", "array").unwrap();
        assert_eq!(c.dead_tids, DeadTidsMode::Array);
        c.set("maintenance_work_mem", "1GB").unwrap();
        assert_eq!(c.maintenance_work_mem_bytes, 1 << 30);
        assert_eq!(c.lock_table_capacity(), 64 * 110);
        c.set("autovacuum_naptime", "2").unwrap();
        assert_eq!(c.autovacuum_naptime_ms, 2000);
        c.set("autovacuum_naptime", "150ms").unwrap();
        assert_eq!(c.autovacuum_naptime_ms, 150);
        c.set("autovacuum", "off").unwrap();
        assert!(!c.autovacuum);
        assert!(c.set("autovacuum_vacuum_scale_factor", "-1").is_err());
        assert!(c.set("twophase_state", "disk").is_err());
        assert!(c.set("deadlock_timeout", "0").is_err());
        assert!(c.set("max_locks_per_transaction", "-1").is_err());
    }

    #[test]
    fn background_writer_settings_take_postgres_names_defaults_and_bounds() {
        let mut c = Config::default();
        assert_eq!(
            (
                c.bgwriter_delay_ms,
                c.bgwriter_lru_maxpages,
                c.bgwriter_lru_multiplier
            ),
            (200, 100, 2.0)
        );
        c.set("bgwriter_delay", "50ms").unwrap();
        c.set("bgwriter_lru_maxpages", "0").unwrap();
        c.set("bgwriter_lru_multiplier", "4.5").unwrap();
        assert_eq!(
            (
                c.bgwriter_delay_ms,
                c.bgwriter_lru_maxpages,
                c.bgwriter_lru_multiplier
            ),
            (50, 0, 4.5)
        );
        assert!(c.set("bgwriter_delay", "5ms").is_err());
        assert!(c.set("bgwriter_lru_multiplier", "11").is_err());
        assert!(c.set("bgwriter_lru_maxpages", "-1").is_err());
    }

    #[test]
    fn group_commit_settings_parse_with_postgres_units_and_default_off() {
        let mut c = Config::default();
        assert_eq!((c.commit_delay_us, c.commit_siblings), (0, 5));
        assert_eq!(c.wal_writer_delay_ms, 200);
        c.set("commit_delay", "250").unwrap();
        assert_eq!(c.commit_delay_us, 250);
        c.set("commit_delay", "2ms").unwrap();
        assert_eq!(c.commit_delay_us, 2000);
        c.set("commit_siblings", "0").unwrap();
        assert_eq!(c.commit_siblings, 0);
        c.set("wal_writer_delay", "50ms").unwrap();
        assert_eq!(c.wal_writer_delay_ms, 50);
        let err = c.set("commit_delay", "100001").unwrap_err().to_string();
        assert!(
            err.contains("commit_delay") && err.contains("maximum"),
            "{err}"
        );
        assert!(c.set("commit_siblings", "1001").is_err());
        assert!(c.set("wal_writer_delay", "0").is_err());
        assert!(c.set("commit_delay", "1min").is_err());
        assert_eq!(
            c.commit_delay_us, 2000,
            "a refused value leaves the setting"
        );
    }

    #[test]
    fn out_of_range_settings_name_the_setting_and_the_bound() {
        let mut c = Config::default();
        let err = c.set("max_connections", "0").unwrap_err().to_string();
        assert!(
            err.contains("max_connections") && err.contains("minimum of 1"),
            "{err}"
        );
        let err = c
            .set("autovacuum_freeze_max_age", "99999")
            .unwrap_err()
            .to_string();
        assert!(err.contains("minimum of 100000"), "{err}");
        let err = c
            .set("vacuum_freeze_min_age", "1000000001")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("vacuum_freeze_min_age") && err.contains("maximum"),
            "{err}"
        );
        let err = c
            .set("checkpoint_completion_target", "1.5")
            .unwrap_err()
            .to_string();
        assert!(err.contains("maximum of 1"), "{err}");
        // A refused value leaves the configuration as it was.
        assert_eq!(c.max_connections, Config::default().max_connections);
        c.set("vacuum_freeze_min_age", "1000000000").unwrap();
        c.set("max_locks_per_transaction", "10").unwrap();
    }
}
