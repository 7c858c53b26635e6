//! A session's settings: the session-level parameters a client may SET (and their
//! defaults, PostgreSQL's), and the server's settings, which SHOW and `pg_settings` read
//! but SET may not change (55P02): the engine's configuration, and those the server that
//! runs the session hands it (`port`, `listen_addresses`, `ssl`, ...).
//!
//! Who the session acts as is a setting too, as in PostgreSQL: `role`,
//! `session_authorization` and `is_superuser` show the session's [`Identity`], which only
//! the role statements change (SET ROLE, SET SESSION AUTHORIZATION: [`crate::roles`]'s
//! rules); SET of `is_superuser` is refused (55P02), and like PostgreSQL's (GUC_NO_SHOW_ALL)
//! the three stay out of SHOW ALL and `pg_settings`, and out of RESET ALL.
//!
//! Reported parameters: PostgreSQL tells the client the new value of each GUC_REPORT
//! parameter a statement changed (ParameterStatus before ReadyForQuery).
//! [`Session::reported_parameters`] gives all of them (for the startup), and
//! [`Session::reported_parameters_changed`] those that changed since the last call or since
//! the login.
//!
//! Transactions: a SET inside one is undone by its rollback, SET LOCAL and `set_config(...,
//! true)` last to its end, and `transaction_isolation` / `_read_only` / `_deferrable` are
//! the running transaction's ([`xact`]'s rules). Startup values (the startup packet, `-c`
//! in `options`) are what RESET and RESET ALL return to. A qualified name (`myapp.user`)
//! is a custom parameter any SET may create, as PostgreSQL's placeholders.
//!
//! `max_stack_depth` (PostgreSQL's, in kB, shown as `2MB`) is checked as PostgreSQL checks
//! it: at least 100kB, at most what a session's stack allows
//! ([`crate::stack::MAX_MAX_STACK_DEPTH_KB`]), and only a superuser may SET it (42501).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use quire_engine::{Config, SqlState};

use crate::datetime::style::{self, Style};
use crate::datetime::zone::Zone;
use crate::error::{Result, SqlError};
use crate::roles::Identity;

mod xact;

pub(crate) use xact::{serializable_refused, Isolation, TxModes, Xact, ISOLATION_LEVELS};

/// The PostgreSQL version quire reports (`server_version`): clients such as pgbench and
/// psql choose their queries by it.
pub const SERVER_VERSION: &str = "16.0";

/// One client's settings: the session-level parameters it may SET, and the server's.
pub struct Settings {
    /// Who the session acts as (`role`, `session_authorization`, `is_superuser`).
    pub(crate) identity: Identity,
    /// The reported parameters' values as the client last heard them.
    pub(crate) reported: Vec<(&'static str, String)>,
    pub(crate) session: BTreeMap<String, String>,
    pub(crate) config: Config,
    /// The settings of the server the session runs in, by name, as it shows them.
    pub(crate) server_level: Arc<[(&'static str, String)]>,
    /// How many times a parameter was set or reset, or the identity changed; and its value
    /// when the reported parameters were last compared. The comparison (which formats
    /// every reported value) runs only when the count moved: not once per statement.
    pub(crate) changes: u64,
    pub(crate) reported_at: u64,
    /// The running transaction's characteristics; `None` outside a block ([`xact`]).
    xact: Option<Xact>,
    /// The settings as the running transaction found them ([`xact`]'s rules).
    saved: Option<xact::Saved>,
    /// The values the client's startup packet and `options` gave: what RESET returns to.
    reset_values: BTreeMap<String, String>,
    /// `set_config` calls of the running statement, applied when it succeeds
    /// ([`Settings::apply_pending`]): name, value, and whether LOCAL. SHOW and
    /// `current_setting` see them at once.
    pending: std::sync::Mutex<Vec<(String, Option<String>, bool)>>,
    /// The date/time style last installed: `changes` when it was checked, the
    /// `DateStyle`, `IntervalStyle` and `TimeZone` values it was built from, and the style
    /// ([`Settings::install_datetime_style`]).
    datetime_style: Option<(u64, [String; 5], Arc<Style>)>,
}

/// Session parameters, their defaults, and whether SET may change them.
const SESSION_PARAMETERS: &[(&str, &str, bool)] = &[
    ("application_name", "", true),
    ("client_encoding", "UTF8", true),
    ("client_min_messages", "notice", true),
    ("datestyle", "ISO, MDY", true),
    ("idle_in_transaction_session_timeout", "0", true),
    ("idle_session_timeout", "0", true),
    ("integer_datetimes", "on", false),
    ("intervalstyle", "postgres", true),
    ("lc_collate", "C", false),
    ("lc_ctype", "C", false),
    ("lock_timeout", "0", true),
    // The limit of `crate::stack`'s check, in kB (PostgreSQL's unit), shown as SHOW shows it.
    ("max_stack_depth", "2MB", true),
    // What psql's \password asks before it sends a verifier (roles store only SCRAM).
    ("password_encryption", "scram-sha-256", false),
    ("search_path", "\"$user\", public", true),
    ("server_encoding", "UTF8", false),
    ("server_version", SERVER_VERSION, false),
    ("server_version_num", "160000", false),
    ("standard_conforming_strings", "on", true),
    ("statement_timeout", "0", true),
    ("timezone", "UTC", true),
    ("work_mem", "4MB", true),
];

/// How a typed parameter's value is checked and shown, as PostgreSQL's GUC kinds.
#[derive(Clone, Copy)]
enum Kind {
    /// `on`/`off` (and PostgreSQL's other spellings), shown as `on` or `off`.
    Bool,
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// A size counted in 8kB blocks (a number alone is blocks), in `min..=max` blocks,
    /// shown with its largest whole unit.
    Blocks { min: i64, max: i64 },
    /// A floating-point number of at least `min`.
    Real { min: f64 },
    /// One of these values, any case, shown in lower case.
    Enum(&'static [&'static str]),
    /// One of these values, exactly, as the only ones quire honours (locales, names).
    Only(&'static [&'static str]),
}

/// The planner's and the regression tests' typed parameters: name, PostgreSQL's default (as
/// SHOW shows it) and kind. The planner honours `enable_hashjoin`, `enable_indexscan`,
/// `enable_bitmapscan` and `enable_seqscan` ([`Settings::planner`]); the others are accepted
/// and shown, as quire has no choice they would change.
const TYPED_PARAMETERS: &[(&str, &str, Kind)] = &[
    ("bytea_output", "hex", Kind::Enum(&["escape", "hex"])),
    ("check_function_bodies", "on", Kind::Bool),
    ("cpu_index_tuple_cost", "0.005", Kind::Real { min: 0.0 }),
    ("cpu_operator_cost", "0.0025", Kind::Real { min: 0.0 }),
    ("cpu_tuple_cost", "0.01", Kind::Real { min: 0.0 }),
    (
        "default_statistics_target",
        "100",
        Kind::Int { min: 1, max: 10000 },
    ),
    ("default_table_access_method", "heap", Kind::Only(&["heap"])),
    // quire has one tablespace: the default one, which '' names.
    ("default_tablespace", "", Kind::Only(&[""])),
    // quire compresses toasted values with LZ4 whichever method this names (README).
    (
        "default_toast_compression",
        "lz4",
        Kind::Enum(&["pglz", "lz4"]),
    ),
    ("default_transaction_deferrable", "off", Kind::Bool),
    (
        "default_transaction_isolation",
        "read committed",
        Kind::Enum(ISOLATION_LEVELS),
    ),
    ("default_transaction_read_only", "off", Kind::Bool),
    (
        "effective_cache_size",
        "4GB",
        Kind::Blocks {
            min: 1,
            max: i32::MAX as i64,
        },
    ),
    ("enable_async_append", "on", Kind::Bool),
    ("enable_bitmapscan", "on", Kind::Bool),
    ("enable_distinct_reordering", "on", Kind::Bool),
    ("enable_gathermerge", "on", Kind::Bool),
    ("enable_group_by_reordering", "on", Kind::Bool),
    ("enable_hashagg", "on", Kind::Bool),
    ("enable_hashjoin", "on", Kind::Bool),
    ("enable_incremental_sort", "on", Kind::Bool),
    ("enable_indexonlyscan", "on", Kind::Bool),
    ("enable_indexscan", "on", Kind::Bool),
    ("enable_material", "on", Kind::Bool),
    ("enable_memoize", "on", Kind::Bool),
    ("enable_mergejoin", "on", Kind::Bool),
    ("enable_nestloop", "on", Kind::Bool),
    ("enable_parallel_append", "on", Kind::Bool),
    ("enable_parallel_hash", "on", Kind::Bool),
    ("enable_partition_pruning", "on", Kind::Bool),
    ("enable_partitionwise_aggregate", "off", Kind::Bool),
    ("enable_partitionwise_join", "off", Kind::Bool),
    ("enable_presorted_aggregate", "on", Kind::Bool),
    ("enable_self_join_elimination", "on", Kind::Bool),
    ("enable_seqscan", "on", Kind::Bool),
    ("enable_sort", "on", Kind::Bool),
    ("enable_tidscan", "on", Kind::Bool),
    ("extra_float_digits", "1", Kind::Int { min: -15, max: 3 }),
    (
        "from_collapse_limit",
        "8",
        Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
    ),
    ("geqo", "on", Kind::Bool),
    (
        "geqo_threshold",
        "12",
        Kind::Int {
            min: 2,
            max: i32::MAX as i64,
        },
    ),
    ("jit", "on", Kind::Bool),
    (
        "join_collapse_limit",
        "8",
        Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
    ),
    ("lc_messages", "C", Kind::Only(&["C", "POSIX"])),
    ("lc_monetary", "C", Kind::Only(&["C", "POSIX"])),
    ("lc_numeric", "C", Kind::Only(&["C", "POSIX"])),
    ("lc_time", "C", Kind::Only(&["C", "POSIX"])),
    ("max_parallel_workers", "8", Kind::Int { min: 0, max: 1024 }),
    (
        "max_parallel_workers_per_gather",
        "2",
        Kind::Int { min: 0, max: 1024 },
    ),
    (
        "min_parallel_index_scan_size",
        "512kB",
        Kind::Blocks {
            min: 0,
            max: 715_827_882,
        },
    ),
    (
        "min_parallel_table_scan_size",
        "8MB",
        Kind::Blocks {
            min: 0,
            max: 715_827_882,
        },
    ),
    ("parallel_setup_cost", "1000", Kind::Real { min: 0.0 }),
    ("parallel_tuple_cost", "0.1", Kind::Real { min: 0.0 }),
    (
        "plan_cache_mode",
        "auto",
        Kind::Enum(&["auto", "force_generic_plan", "force_custom_plan"]),
    ),
    ("random_page_cost", "4", Kind::Real { min: 0.0 }),
    ("row_security", "on", Kind::Bool),
    ("seq_page_cost", "1", Kind::Real { min: 0.0 }),
    // Scans always start at a table's first page in quire: `off` is what it does.
    ("synchronize_seqscans", "on", Kind::Bool),
    // PostgreSQL 17's; quire enforces none, so only 0 (no limit) is taken.
    ("transaction_timeout", "0", Kind::Only(&["0"])),
    // quire has no xml type: the setting changes nothing.
    ("xmloption", "content", Kind::Enum(&["content", "document"])),
    (
        "timezone_abbreviations",
        "Default",
        Kind::Only(&["Default"]),
    ),
];

/// `value` of typed parameter `name` as SHOW shows it, or PostgreSQL's error (22023).
fn typed_value(name: &str, kind: Kind, value: &str) -> Result<String> {
    let invalid = || {
        SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"{name}\": \"{value}\""),
        )
    };
    let out_of_range = |v: &str, min: &str, max: &str| {
        SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("{v} is outside the valid range for parameter \"{name}\" ({min} .. {max})"),
        )
    };
    let t = value.trim();
    match kind {
        Kind::Bool => parse_bool(t).map(on_off).ok_or_else(|| {
            SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                format!("parameter \"{name}\" requires a Boolean value"),
            )
        }),
        Kind::Int { min, max } => {
            let v: f64 = t.parse().map_err(|_| invalid())?;
            let v = v.round();
            if !(v >= min as f64 && v <= max as f64) {
                return Err(out_of_range(
                    &format!("{v}"),
                    &min.to_string(),
                    &max.to_string(),
                ));
            }
            Ok(format!("{v}"))
        }
        Kind::Blocks { min, max } => {
            let bytes = if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() {
                t.parse::<u64>().ok().and_then(|b| b.checked_mul(8192))
            } else {
                memory_bytes(t)
            };
            let bytes = bytes.ok_or_else(invalid)?;
            let blocks = i64::try_from((bytes + 4096) / 8192).unwrap_or(i64::MAX);
            if blocks < min || blocks > max {
                return Err(out_of_range(
                    &format!("{blocks} 8kB"),
                    &format!("{min} 8kB"),
                    &format!("{max} 8kB"),
                ));
            }
            Ok(if blocks == 0 {
                "0".into()
            } else {
                format_bytes(blocks.unsigned_abs() * 8192)
            })
        }
        Kind::Real { min } => {
            let v: f64 = t.parse().map_err(|_| invalid())?;
            if !(v >= min && v.is_finite()) {
                return Err(out_of_range(
                    &format_real(v),
                    &format_real(min),
                    "1.79769e+308",
                ));
            }
            Ok(format_real(v))
        }
        Kind::Enum(values) => {
            let v = t.to_lowercase();
            if values.contains(&v.as_str()) {
                return Ok(v);
            }
            Err(invalid().with_hint(format!("Available values: {}.", values.join(", "))))
        }
        Kind::Only(values) => values
            .iter()
            .find(|v| v.eq_ignore_ascii_case(t))
            .map(|v| (*v).to_string())
            .ok_or_else(invalid),
    }
}

/// PostgreSQL's `parse_bool`: `on`, `off`, `1`, `0`, and any unambiguous prefix of `true`,
/// `false`, `yes`, `no` (`of` for off), in any case.
fn parse_bool(value: &str) -> Option<bool> {
    let v = value.to_lowercase();
    let prefix_of = |word: &str, min: usize| v.len() >= min && word.starts_with(v.as_str());
    if prefix_of("true", 1) || prefix_of("yes", 1) || v == "on" || v == "1" {
        Some(true)
    } else if prefix_of("false", 1) || prefix_of("no", 1) || prefix_of("off", 2) || v == "0" {
        Some(false)
    } else {
        None
    }
}

/// A real parameter's value as PostgreSQL shows it (C's `%g`: six significant digits).
fn format_real(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let s = format!("{v:.5e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", e.abs());
    }
    let decimals = usize::try_from(5 - exp).unwrap_or(0);
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// PostgreSQL's bounds on `work_mem`, in kB: 64kB to `MAX_KILOBYTES` (INT_MAX).
const WORK_MEM_KB: std::ops::RangeInclusive<u64> = 64..=2_147_483_647;

/// A memory parameter's value in bytes: a number alone is in kB, as PostgreSQL's memory
/// parameters are; else a number with its unit.
fn memory_bytes(value: &str) -> Option<u64> {
    let v = value.trim();
    if v.bytes().all(|b| b.is_ascii_digit()) {
        return v.parse::<u64>().ok()?.checked_mul(1024);
    }
    quire_engine::config::parse_bytes(v).ok()
}

/// PostgreSQL's GUC_REPORT parameters that a session can change, by the names PostgreSQL
/// reports them under, and the names SHOW knows them by. (`server_version`,
/// `server_encoding` and `integer_datetimes` cannot change after the startup.)
const REPORTED_PARAMETERS: &[(&str, &str)] = &[
    ("application_name", "application_name"),
    ("client_encoding", "client_encoding"),
    ("DateStyle", "datestyle"),
    ("IntervalStyle", "intervalstyle"),
    ("TimeZone", "timezone"),
    ("standard_conforming_strings", "standard_conforming_strings"),
    ("is_superuser", "is_superuser"),
    ("session_authorization", "session_authorization"),
];

/// Parameters only a superuser may SET (PostgreSQL's `PGC_SUSET`).
const SUPERUSER_PARAMETERS: &[&str] = &["max_stack_depth"];

fn format_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "kB")];
    for (size, unit) in UNITS {
        if b >= size && b.is_multiple_of(size) {
            return format!("{}{unit}", b / size);
        }
    }
    format!("{b}B")
}

/// The planner switches quire has a choice for ([`Settings::planner`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlannerSwitches {
    pub hashjoin: bool,
    pub seqscan: bool,
    /// `enable_indexscan` or `enable_bitmapscan`: an index path without the sequential
    /// scan's penalty (quire's index scan serves both).
    pub indexscan: bool,
}

/// PostgreSQL's defaults: every switch on.
impl Default for PlannerSwitches {
    fn default() -> Self {
        PlannerSwitches {
            hashjoin: true,
            seqscan: true,
            indexscan: true,
        }
    }
}

fn on_off(b: bool) -> String {
    quire_engine::config::on_off(b).into()
}

impl Settings {
    pub(crate) fn new(config: Config) -> Settings {
        let mut settings = Settings {
            identity: Identity::bootstrap(),
            reported: Vec::new(),
            session: BTreeMap::new(),
            config,
            server_level: Arc::new([]),
            changes: 0,
            reported_at: 0,
            xact: None,
            saved: None,
            reset_values: BTreeMap::new(),
            pending: std::sync::Mutex::new(Vec::new()),
            datetime_style: None,
        };
        settings.reported = settings.reported();
        settings
    }

    /// Who the session acts as.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The values of the reported parameters now.
    pub(crate) fn reported(&self) -> Vec<(&'static str, String)> {
        REPORTED_PARAMETERS
            .iter()
            .map(|(reported, name)| (*reported, self.show(name).unwrap_or_default()))
            .collect()
    }

    /// The settings of the server this session runs in (see [`Settings::server_level`]).
    pub(crate) fn set_server_level(&mut self, settings: Arc<[(&'static str, String)]>) {
        self.server_level = settings;
    }

    /// The server's settings (the engine's configuration), by PostgreSQL's names.
    fn server(&self) -> Vec<(&'static str, String)> {
        let c = &self.config;
        vec![
            ("shared_buffers", format_bytes(c.shared_buffers_bytes)),
            ("wal_buffers", format_bytes(c.wal_buffers_bytes)),
            ("wal_segment_size", format_bytes(c.wal_segment_size_bytes)),
            ("max_wal_size", format_bytes(c.max_wal_size_bytes)),
            ("checkpoint_timeout", format!("{}s", c.checkpoint_timeout_s)),
            (
                "checkpoint_completion_target",
                c.checkpoint_completion_target.to_string(),
            ),
            ("synchronous_commit", on_off(c.synchronous_commit)),
            ("track_commit_timestamp", on_off(c.track_commit_timestamp)),
            ("wal_init_zero", on_off(c.wal_init_zero)),
            ("wal_direct_io", on_off(c.wal_direct_io)),
            ("max_connections", c.max_connections.to_string()),
            (
                "max_prepared_transactions",
                c.max_prepared_transactions.to_string(),
            ),
            (
                "max_locks_per_transaction",
                c.max_locks_per_transaction.to_string(),
            ),
            ("deadlock_timeout", format!("{}ms", c.deadlock_timeout_ms)),
            (
                "maintenance_work_mem",
                format_bytes(c.maintenance_work_mem_bytes),
            ),
            ("max_files_per_process", c.max_files_per_process.to_string()),
            ("autovacuum", on_off(c.autovacuum)),
            ("fsync", "on".into()),
            ("full_page_writes", "on".into()),
            ("buffer_drop", c.buffer_drop.name().into()),
            ("relsize_cache", c.relsize_cache.name().into()),
            ("twophase_state", c.twophase_state.name().into()),
            ("dead_tids", c.dead_tids.name().into()),
            ("sync", c.sync.name().into()),
        ]
        .into_iter()
        .chain(self.server_level.iter().cloned())
        .collect()
    }

    /// The schemas of `search_path` that exist, in order (PostgreSQL's
    /// `current_schemas(false)`): `"$user"` names a schema only where one has the user's
    /// name, which quire's two schemas never are for a role that may log in.
    pub(crate) fn search_schemas(&self) -> Vec<&'static str> {
        let path = self.show("search_path").unwrap_or_default();
        let mut out = Vec::new();
        for item in path.split(',') {
            let item = item.trim();
            let name = item
                .strip_prefix('"')
                .and_then(|i| i.strip_suffix('"'))
                .map_or_else(|| item.to_lowercase(), |q| q.replace("\"\"", "\""));
            let schema = match name.as_str() {
                "public" => "public",
                "pg_catalog" => "pg_catalog",
                "information_schema" => "information_schema",
                _ => continue,
            };
            if !out.contains(&schema) {
                out.push(schema);
            }
        }
        out
    }

    /// Whether `public` is on the search path: if not, definitions name their relations
    /// with it (`pg_get_expr`, `pg_get_constraintdef`), as PostgreSQL's deparser does.
    pub(crate) fn sees_public(&self) -> bool {
        self.search_schemas().contains(&"public")
    }

    /// SHOW `name`: `None` for an unknown parameter.
    pub fn show(&self, name: &str) -> Option<String> {
        let name = canonical_name(name);
        if let Some(v) = self.pending_value(&name) {
            return Some(v);
        }
        if let Some(v) = self.xact_value(&name) {
            return Some(v);
        }
        if let Some(v) = self.session.get(&name) {
            return Some(v.clone());
        }
        if let Some((_, d, _)) = SESSION_PARAMETERS.iter().find(|(n, _, _)| *n == name) {
            return Some((*d).to_string());
        }
        if let Some((_, d, _)) = TYPED_PARAMETERS.iter().find(|(n, _, _)| *n == name) {
            return Some((*d).to_string());
        }
        match name.as_str() {
            "is_superuser" => return Some(on_off(self.identity.is_superuser())),
            "session_authorization" => return Some(self.identity.session_user().into()),
            "role" => return Some(self.identity.role().into()),
            _ => {}
        }
        self.server()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    /// Installs the session's `DateStyle`, `IntervalStyle` and `TimeZone` as this thread's
    /// date/time style ([`crate::datetime::style`]), with `extra_float_digits` and
    /// `bytea_output` for values sent to the client. A statement that follows no change of
    /// any setting (`changes` did not move) reads none of them; the style is rebuilt only
    /// when one of the three changed.
    pub(crate) fn install_datetime_style(&mut self) {
        if let Some((at, _, style)) = &self.datetime_style {
            if *at == self.changes {
                return style::install(Arc::clone(style));
            }
        }
        let shown = |name: &str| self.show(name).unwrap_or_default();
        let key = [
            shown("datestyle"),
            shown("intervalstyle"),
            shown("timezone"),
            shown("extra_float_digits"),
            shown("bytea_output"),
        ];
        let style = match self.datetime_style.take() {
            Some((_, k, style)) if k == key => style,
            _ => Arc::new(Style::of(&key[0], &key[1], &key[2]).with_output(&key[3], &key[4])),
        };
        self.datetime_style = Some((self.changes, key, Arc::clone(&style)));
        style::install(style);
    }

    /// The planner switches ([`PlannerSwitches`]) as the session set them.
    pub(crate) fn planner(&self) -> PlannerSwitches {
        let on = |name: &str| self.show(name).is_none_or(|v| v == "on");
        PlannerSwitches {
            hashjoin: on("enable_hashjoin"),
            seqscan: on("enable_seqscan"),
            indexscan: on("enable_indexscan") || on("enable_bitmapscan"),
        }
    }

    /// `work_mem` in bytes: the memory a query step may use before it spills to a temp file.
    pub fn work_mem_bytes(&self) -> u64 {
        let value = self.show("work_mem").unwrap_or_default();
        memory_bytes(&value).unwrap_or(4 << 20)
    }

    /// `lock_timeout`, if set (zero is none).
    pub fn lock_timeout(&self) -> Option<Duration> {
        self.duration("lock_timeout")
    }

    /// `statement_timeout`, if set (zero is none).
    pub fn statement_timeout(&self) -> Option<Duration> {
        self.duration("statement_timeout")
    }

    /// `max_stack_depth` in bytes ([`crate::stack`]).
    pub(crate) fn max_stack_depth_bytes(&self) -> usize {
        let default = crate::stack::DEFAULT_MAX_STACK_DEPTH_KB << 10;
        let bytes = self
            .session
            .get("max_stack_depth")
            .and_then(|v| quire_engine::config::parse_bytes(v).ok())
            .unwrap_or(default);
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }

    /// Whether the session's role may SET a superuser-only parameter (PostgreSQL checks
    /// the current role: a superuser after SET ROLE to a plain role may not).
    fn role_is_superuser(&self) -> bool {
        self.identity.is_superuser()
    }

    /// A duration parameter (milliseconds unless it names its unit), if set and not zero.
    pub(crate) fn duration(&self, name: &str) -> Option<Duration> {
        let ms = self
            .session
            .get(name)
            .and_then(|v| quire_engine::config::parse_millis(v).ok())
            .unwrap_or(0);
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    /// Every parameter: name, value, and where its value comes from.
    pub(crate) fn all(&self) -> Vec<(String, String, &'static str)> {
        let source = |n: &str| {
            let value = self.show(n).unwrap_or_default();
            let from = match self.session.get(n) {
                Some(v) if self.reset_values.get(n) == Some(v) => "client",
                Some(_) => "session",
                None => "default",
            };
            (n.to_string(), value, from)
        };
        let mut v: Vec<(String, String, &'static str)> = SESSION_PARAMETERS
            .iter()
            .map(|(n, _, _)| source(n))
            .chain(TYPED_PARAMETERS.iter().map(|(n, _, _)| source(n)))
            .collect();
        v.extend(
            [
                "transaction_deferrable",
                "transaction_isolation",
                "transaction_read_only",
            ]
            .iter()
            .map(|n| {
                (
                    (*n).to_string(),
                    self.xact_value(n).unwrap_or_default(),
                    "override",
                )
            }),
        );
        v.extend(
            self.server()
                .into_iter()
                .map(|(n, s)| (n.to_string(), s, "configuration file")),
        );
        v.sort();
        v
    }

    /// SET `name` (RESET with no value), as a session-level SET: it lasts if the
    /// transaction commits ([`xact`]'s rules).
    pub(crate) fn set(&mut self, name: &str, value: Option<String>) -> Result<()> {
        self.set_scoped(name, value, false)
    }

    /// SET or SET LOCAL (`local`) `name`; RESET with no value; RESET ALL as `all`.
    pub(crate) fn set_scoped(
        &mut self,
        name: &str,
        value: Option<String>,
        local: bool,
    ) -> Result<()> {
        let name = name.to_lowercase();
        if name == "all" && value.is_none() {
            let values = self.reset_values.clone();
            self.store_all(values);
            return Ok(());
        }
        if let Some(modes) = self.xact_parameter(&name, value.as_deref())? {
            if self.xact.is_none() {
                // Outside a block the statement is its own transaction: nothing to change.
                return Ok(());
            }
            self.set_xact_modes(modes)?;
            self.changes += 1;
            return Ok(());
        }
        let value = self.checked(&name, value)?;
        let value = value.or_else(|| self.reset_values.get(&name).cloned());
        // A placeholder (`myapp.user`) reset is empty, not gone, as PostgreSQL's.
        let value = match value {
            None if name.contains('.') => Some(String::new()),
            v => v,
        };
        self.store(name, value, local);
        Ok(())
    }

    /// A parameter the client's startup packet or `options` set: set now, and what RESET
    /// returns to.
    pub(crate) fn set_startup(&mut self, name: &str, value: &str) -> Result<()> {
        let name = name.to_lowercase();
        if let Some(v) = self.checked(&name, Some(value.to_string()))? {
            self.session.insert(name.clone(), v.clone());
            self.reset_values.insert(name, v);
            self.changes += 1;
        }
        Ok(())
    }

    /// `set_config(name, value, is_local)` during a statement: checked now, seen by SHOW
    /// and `current_setting` at once, and applied when the statement succeeds
    /// ([`Settings::apply_pending`]). Returns the value as SHOW shows it.
    pub(crate) fn set_config(
        &self,
        name: &str,
        value: Option<&str>,
        local: bool,
    ) -> Result<String> {
        let name = name.to_lowercase();
        if self.xact_parameter(&name, value)?.is_some() {
            return Err(SqlError::unsupported(format!(
                "set_config of \"{name}\" (use SET TRANSACTION)"
            )));
        }
        if name == "all" {
            return Err(unrecognized(&name));
        }
        let value = self.checked(&name, value.map(str::to_string))?;
        if let Ok(mut pending) = self.pending.lock() {
            pending.push((name.clone(), value, local));
        }
        Ok(self.show(&name).unwrap_or_default())
    }

    /// What `set_config` left pending, applied (the statement succeeded) or dropped.
    pub(crate) fn apply_pending(&mut self, succeeded: bool) {
        let pending = match self.pending.lock() {
            Ok(mut p) if !p.is_empty() => std::mem::take(&mut *p),
            _ => return,
        };
        if succeeded {
            for (name, value, local) in pending {
                let value = value.or_else(|| self.reset_values.get(&name).cloned());
                self.store(name, value, local);
            }
        }
    }

    /// The value a pending `set_config` gave `name` (its reset value for one reset).
    fn pending_value(&self, name: &str) -> Option<String> {
        let pending = self.pending.lock().ok()?;
        let (_, value, _) = pending.iter().rev().find(|(n, _, _)| n == name)?;
        match value {
            Some(v) => Some(v.clone()),
            None => self
                .reset_values
                .get(name)
                .cloned()
                .or_else(|| default_of(name))
                .or_else(|| Some(String::new())),
        }
    }

    /// `transaction_isolation`, `transaction_read_only` or `transaction_deferrable`.
    fn xact_value(&self, name: &str) -> Option<String> {
        Some(match name {
            "transaction_isolation" => self.xact().isolation.name().into(),
            "transaction_read_only" => on_off(self.xact().read_only),
            "transaction_deferrable" => on_off(self.xact().deferrable),
            _ => return None,
        })
    }

    /// SET of `transaction_isolation`, `transaction_read_only` or `transaction_deferrable`
    /// as the transaction modes it sets (RESET sets none); `None` for another parameter.
    fn xact_parameter(&self, name: &str, value: Option<&str>) -> Result<Option<TxModes>> {
        let mut modes = TxModes::default();
        let Some(v) = value else {
            return Ok(self.xact_value(name).map(|_| modes));
        };
        match name {
            "transaction_isolation" => {
                let shown = typed_value(name, Kind::Enum(ISOLATION_LEVELS), v)?;
                modes.isolation = Isolation::named(&shown);
            }
            "transaction_read_only" => {
                modes.read_only = Some(typed_value(name, Kind::Bool, v)? == "on");
            }
            "transaction_deferrable" => {
                modes.deferrable = Some(typed_value(name, Kind::Bool, v)? == "on");
            }
            _ => return Ok(None),
        }
        Ok(Some(modes))
    }

    /// SET `name` checked as PostgreSQL checks it: the value to keep as SHOW shows it, or
    /// `None` for RESET (the default). Changes nothing.
    fn checked(&self, name: &str, value: Option<String>) -> Result<Option<String>> {
        if name == "is_superuser" {
            return Err(SqlError::new(
                SqlState::CANT_CHANGE_RUNTIME_PARAM,
                "parameter \"is_superuser\" cannot be changed",
            ));
        }
        // SET ROLE and SET SESSION AUTHORIZATION are role statements ([`crate::roles`]),
        // which check who may take which role; a form their grammar does not know (a quoted
        // parameter name) must not slip past those checks.
        if name == "role" || name == "session_authorization" {
            return Err(SqlError::unsupported(format!(
                "SET {name} in this form (use SET ROLE or SET SESSION AUTHORIZATION)"
            )));
        }
        if let Some(&(_, _, kind)) = TYPED_PARAMETERS.iter().find(|(n, _, _)| *n == name) {
            let Some(v) = value else {
                return Ok(None);
            };
            let shown = typed_value(name, kind, &v)?;
            if name == "default_transaction_isolation" && shown == "serializable" {
                return Err(serializable_refused());
            }
            return Ok(Some(shown));
        }
        if is_placeholder(name) {
            return Ok(value);
        }
        let Some((_, _, settable)) = SESSION_PARAMETERS.iter().find(|(n, _, _)| *n == name) else {
            return Err(self.not_settable(name));
        };
        if !settable {
            return Err(SqlError::new(
                SqlState::CANT_CHANGE_RUNTIME_PARAM,
                format!("parameter \"{name}\" cannot be changed"),
            ));
        }
        if SUPERUSER_PARAMETERS.contains(&name) && !self.role_is_superuser() {
            return Err(SqlError::new(
                SqlState::INSUFFICIENT_PRIVILEGE,
                format!("permission denied to set parameter \"{name}\""),
            ));
        }
        let Some(value) = value else {
            return Ok(None);
        };
        if name == "max_stack_depth" {
            return Ok(Some(format_bytes(stack_depth_kb(&value)? << 10)));
        }
        Ok(Some(self.session_value(name, value)?))
    }

    /// The error for SET of a parameter that is not a session's: a server setting (55P02)
    /// or none at all (42704).
    fn not_settable(&self, name: &str) -> SqlError {
        if self.server().iter().any(|(n, _)| *n == name) {
            return SqlError::new(
                SqlState::CANT_CHANGE_RUNTIME_PARAM,
                format!(
                    "parameter \"{name}\" cannot be changed now (a server setting: start quire serve with -c {name}=... or QUIRE_{})",
                    name.to_uppercase()
                ),
            );
        }
        unrecognized(name)
    }
}

/// The parameter SHOW's `name` means, lower case: SQL's spellings of some (`SHOW
/// TRANSACTION ISOLATION LEVEL`, `SHOW TIME ZONE`) by their parameter names.
pub(crate) fn canonical_name(name: &str) -> String {
    let name = name.to_lowercase();
    match name.as_str() {
        "transaction isolation level" => "transaction_isolation".into(),
        "time zone" => "timezone".into(),
        "session authorization" => "session_authorization".into(),
        // `SHOW myapp.user` comes as its two words.
        _ => name.replace(' ', "."),
    }
}

fn unrecognized(name: &str) -> SqlError {
    SqlError::new(
        SqlState::UNDEFINED_OBJECT,
        format!("unrecognized configuration parameter \"{name}\""),
    )
}

/// A custom parameter (PostgreSQL's placeholder): a qualified name such as `myapp.user`,
/// which any SET may create.
fn is_placeholder(name: &str) -> bool {
    name.split_once('.')
        .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
}

/// The default of a session or typed parameter, as SHOW shows it.
fn default_of(name: &str) -> Option<String> {
    SESSION_PARAMETERS
        .iter()
        .map(|(n, d, _)| (n, d))
        .chain(TYPED_PARAMETERS.iter().map(|(n, d, _)| (n, d)))
        .find(|(n, _)| **n == name)
        .map(|(_, d)| (*d).to_string())
}

/// A `max_stack_depth` value in kB, checked as PostgreSQL checks it: a number of kB or of
/// the unit it names (`B`, `kB`, `MB`, `GB`, `TB`; a fraction is rounded to a whole kB), at
/// least 100kB and at most what a session's stack allows
/// ([`crate::stack::MAX_MAX_STACK_DEPTH_KB`]).
fn stack_depth_kb(value: &str) -> Result<u64> {
    let invalid = || {
        SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"max_stack_depth\": \"{value}\""),
        )
    };
    let t = value.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| invalid())?;
    let kb_per_unit = match unit.trim() {
        "" | "kB" => 1.0,
        "B" => 1.0 / 1024.0,
        "MB" => 1024.0,
        "GB" => 1024.0 * 1024.0,
        "TB" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(invalid().with_hint(
                "Valid units for this parameter are \"B\", \"kB\", \"MB\", \"GB\", and \"TB\".",
            ))
        }
    };
    let kb = (number * kb_per_unit).round();
    if !(kb.is_finite() && kb <= f64::from(i32::MAX)) {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"max_stack_depth\": \"{value}\""),
        )
        .with_hint("Value exceeds integer range."));
    }
    let kb = kb as u64;
    if kb < crate::stack::MIN_MAX_STACK_DEPTH_KB {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!(
                "{kb} kB is outside the valid range for parameter \"max_stack_depth\" ({} .. {})",
                crate::stack::MIN_MAX_STACK_DEPTH_KB,
                i32::MAX
            ),
        ));
    }
    let max = crate::stack::MAX_MAX_STACK_DEPTH_KB;
    if kb > max {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"max_stack_depth\": {kb}"),
        )
        .with_detail(format!("\"max_stack_depth\" must not exceed {max}kB.")));
    }
    Ok(kb)
}

impl Settings {
    /// A session parameter's new value as SHOW will show it, checked as PostgreSQL checks
    /// it (the date/time ones read as [`crate::datetime::style`] does).
    fn session_value(&self, name: &str, value: String) -> Result<String> {
        let invalid = |detail: Option<String>| {
            let e = SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                format!(
                    "invalid value for parameter \"{}\": \"{value}\"",
                    reported_name(name)
                ),
            );
            match detail {
                Some(d) => e.with_detail(d),
                None => e,
            }
        };
        match name {
            "timezone" => match Zone::parse(&value) {
                Some(zone) => Ok(zone.shown().to_string()),
                None => Err(invalid(None)),
            },
            "datestyle" => {
                let now = self.show("datestyle").unwrap_or_default();
                style::datestyle_value(&value, &now).map_err(|d| invalid(Some(d)))
            }
            "intervalstyle" => match style::interval_style(&value) {
                Some(_) => Ok(value.trim().to_ascii_lowercase()),
                None => Err(invalid(None).with_hint(
                    "Available values: postgres, postgres_verbose, sql_standard, iso_8601.",
                )),
            },
            _ => {
                check_session_value(name, &value)?;
                Ok(value)
            }
        }
    }
}

/// The column name of `SHOW name`: the parameter's name as PostgreSQL spells it
/// (`TimeZone`, `DateStyle`), else its lower-case name.
pub(crate) fn display_name(name: &str) -> String {
    let canonical = canonical_name(name);
    match REPORTED_PARAMETERS.iter().find(|(_, n)| *n == canonical) {
        Some((shown, _)) => (*shown).to_string(),
        None => canonical,
    }
}

/// A parameter's name as PostgreSQL spells it in messages (`TimeZone`, `DateStyle`).
fn reported_name(name: &str) -> &str {
    REPORTED_PARAMETERS
        .iter()
        .find(|(_, n)| *n == name)
        .map_or(name, |(shown, _)| shown)
}

/// Values quire can honour for the parameters whose other values it does not implement.
fn check_session_value(name: &str, value: &str) -> Result<()> {
    let v = value.to_lowercase();
    let ok = match name {
        "client_encoding" => ["utf8", "utf-8", "unicode"].contains(&v.as_str()),
        "statement_timeout"
        | "lock_timeout"
        | "idle_in_transaction_session_timeout"
        | "idle_session_timeout" => {
            quire_engine::config::parse_millis(value).is_ok()
        }
        "work_mem" => {
            return match memory_bytes(value) {
                Some(b) if WORK_MEM_KB.contains(&(b / 1024)) => Ok(()),
                Some(b) => Err(SqlError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!(
                        "{} kB is outside the valid range for parameter \"work_mem\" (64 .. 2147483647)",
                        b / 1024
                    ),
                )),
                None => Err(SqlError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!("invalid value for parameter \"work_mem\": \"{value}\""),
                )
                .with_detail("Valid units for this parameter are \"B\", \"kB\", \"MB\", \"GB\", and \"TB\".")),
            }
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"{name}\": \"{value}\" (quire supports only the default here)"),
        ))
    }
}
