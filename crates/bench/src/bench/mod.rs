//! `quire-bench`: the seed experiments, each measuring PostgreSQL's behaviour and quire's in
//! the same process on the same data, following `shared/BENCH.md`: a header line (experiment,
//! parameters, build profile, machine), one table with a row per mode, the ratios, and the
//! file-layer call counts the experiment is about; `--json` writes the same figures.

mod buffer_drop;
pub mod plot;
mod recovery;
mod relsize;
mod slru_sync;
mod tidstore;
mod truncate_recovery;
mod twophase;
mod wal;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use quire_engine::vfs::{OpCounts, OpKind};
use serde_json::{json, Map, Value};

/// Flags every benchmark accepts, plus the experiment-specific ones.
#[derive(Args, Debug, Clone)]
#[allow(clippy::struct_excessive_bools)] // command-line switches, each its own flag
pub struct BenchArgs {
    /// Which experiment; without one, every experiment runs in turn.
    #[arg(value_enum, value_name = "EXPERIMENT")]
    pub name: Option<BenchName>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A reduced size that finishes in under a minute on a 2-core machine.
    #[arg(long)]
    pub quick: bool,
    /// Where files go (default: a fresh temporary directory, removed afterwards).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Seed for anything random.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Number of relations.
    #[arg(long)]
    pub relations: Option<u64>,
    /// Pages per relation.
    #[arg(long)]
    pub pages: Option<u32>,
    /// Buffer pool size in bytes (suffixes KiB, MiB, GiB, or PostgreSQL's kB, MB, GB).
    #[arg(long, value_parser = parse_size)]
    pub pool: Option<u64>,
    /// Number of page reads to time (relsize).
    #[arg(long)]
    pub reads: Option<u64>,
    /// wal: run the commit rows on the simulated file system with this fsync latency;
    /// slru-sync: the fsync latency of recovery (default 2.5).
    #[arg(long)]
    pub fsync_latency_ms: Option<f64>,
    /// Records or transactions to run (wal: records per insert run).
    #[arg(long)]
    pub transactions: Option<u64>,
    /// Rows of the table (twophase).
    #[arg(long)]
    pub rows: Option<u64>,
    /// twophase, truncate-recovery, wal: rounds in which the modes take turns
    /// (truncate-recovery, and wal for insertion, report each figure's median over them).
    #[arg(long)]
    pub rounds: Option<u64>,
    /// truncate-recovery: run on the real file system (in --data-dir) instead of the
    /// simulated one.
    #[arg(long)]
    pub real_fs: bool,
    /// twophase: run on the simulated file system with this cost per open().
    #[arg(long)]
    pub open_latency_ms: Option<f64>,
    /// buffer-drop: repeat both modes at pool sizes 128 MiB, 1 GiB, 4 GiB and 16 GiB.
    #[arg(long)]
    pub sweep: bool,
    /// tidstore: tables of 10,000,000 blocks instead of 1,000,000 (the seed's second run).
    #[arg(long)]
    pub x10: bool,
    /// tidstore: shuffled lookups to time per structure (default 20,000,000; quick 1,000,000).
    #[arg(long)]
    pub lookups: Option<u64>,
    /// Also draw the experiment's figure as SVG to this file (with several experiments, each
    /// gets its name appended: FILE-buffer-drop.svg, ...).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchName {
    /// Seed 000: dropping a relation's buffers, full scan vs. per-relation index.
    BufferDrop,
    /// Seed 002: relation-size probes per page read, size cache off vs. on.
    Relsize,
    /// WAL insert throughput by thread count, and the group-commit gain.
    Wal,
    /// Crash recovery of a large WAL: redo rate and file-layer calls per record.
    Recovery,
    /// Seed 001: commit-log fsyncs during recovery, immediate vs. via the checkpointer.
    SlruSync,
    /// Seed 004: vacuum's dead-TID store against PostgreSQL's array (and roaring): memory,
    /// build time, shuffled lookups.
    Tidstore,
    /// Seed 003: COMMIT PREPARED with the prepared state in memory vs. re-read from WAL.
    Twophase,
    /// Seed 000 end to end: VACUUM truncating thousands of tables, then crash recovery.
    TruncateRecovery,
}

fn parse_size(text: &str) -> Result<u64, String> {
    quire_engine::config::parse_bytes(text)
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let names: Vec<BenchName> = match args.name {
        Some(n) => vec![n],
        None => BenchName::value_variants().to_vec(),
    };
    let mut reports = Vec::new();
    for name in names {
        let dir = DataDir::new(args.data_dir.as_deref(), name)?;
        let report = match name {
            BenchName::BufferDrop => buffer_drop::run(args, dir.path())?,
            BenchName::Relsize => relsize::run(args, dir.path())?,
            BenchName::Wal => wal::run_bench(args, dir.path())?,
            BenchName::Recovery => recovery::run_bench(args, dir.path())?,
            BenchName::SlruSync => slru_sync::run_bench(args)?,
            BenchName::Tidstore => tidstore::run_bench(args)?,
            BenchName::Twophase => twophase::run_bench(args, dir.path())?,
            BenchName::TruncateRecovery => truncate_recovery::run_bench(args, dir.path())?,
        };
        print!("{}", report.render());
        println!();
        if let (Some(path), Some(figure)) = (&args.plot, &report.figure) {
            let path = if args.name.is_some() {
                path.clone()
            } else {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plot");
                path.with_file_name(format!("{stem}-{}.svg", report.bench))
            };
            plot::write_svg(figure, &path)?;
            println!("figure: {}", path.display());
        }
        reports.push(report.to_json());
    }
    if let Some(path) = &args.json {
        let value = if reports.len() == 1 {
            reports.pop().expect("one report")
        } else {
            Value::Array(reports)
        };
        std::fs::write(path, serde_json::to_string_pretty(&value)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The benchmark's working directory: `--data-dir/<bench>` (kept), or a temporary one
/// (removed when dropped).
struct DataDir {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl DataDir {
    fn new(base: Option<&Path>, name: BenchName) -> anyhow::Result<Self> {
        let sub = name
            .to_possible_value()
            .expect("no skipped variants")
            .get_name()
            .to_string();
        if let Some(base) = base {
            let path = base.join(sub);
            if path.exists() {
                std::fs::remove_dir_all(&path)
                    .with_context(|| format!("clearing {}", path.display()))?;
            }
            std::fs::create_dir_all(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            return Ok(DataDir { path, _temp: None });
        }
        let temp = tempfile::Builder::new().prefix("quire-bench-").tempdir()?;
        Ok(DataDir {
            path: temp.path().to_path_buf(),
            _temp: Some(temp),
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A figure in a table cell.
#[derive(Clone, Debug)]
pub enum Cell {
    Int(u64),
    Float(f64),
    Text(String),
}

impl Cell {
    /// The figure's value of a numeric cell.
    fn number(&self) -> Option<f64> {
        match self {
            Cell::Int(n) => Some(*n as f64),
            Cell::Float(x) => Some(*x),
            Cell::Text(_) => None,
        }
    }

    fn text(&self) -> String {
        match self {
            Cell::Int(n) => n.to_string(),
            Cell::Float(x) if x.abs() >= 100.0 => format!("{x:.1}"),
            Cell::Float(x) if x.abs() >= 1.0 => format!("{x:.2}"),
            Cell::Float(x) => format!("{x:.4}"),
            Cell::Text(s) => s.clone(),
        }
    }

    fn json(&self) -> Value {
        match self {
            Cell::Int(n) => json!(n),
            Cell::Float(x) => json!(x),
            Cell::Text(s) => json!(s),
        }
    }
}

/// One benchmark's results, printed as a table and written as JSON.
pub struct Report {
    pub bench: &'static str,
    pub quick: bool,
    pub params: Vec<(&'static str, Value)>,
    pub columns: Vec<&'static str>,
    /// Each row: the mode, then one cell per column.
    pub rows: Vec<(String, Vec<Cell>)>,
    pub ratios: Vec<(String, f64)>,
    /// File-layer calls per mode, during the measured phase.
    pub syscalls: Vec<(String, OpCounts)>,
    pub notes: Vec<String>,
    /// The figure `--plot` draws, if the experiment has one.
    pub figure: Option<plot::Figure>,
}

impl Report {
    pub fn new(bench: &'static str, quick: bool, columns: Vec<&'static str>) -> Self {
        Report {
            bench,
            quick,
            params: Vec::new(),
            columns,
            rows: Vec::new(),
            ratios: Vec::new(),
            syscalls: Vec::new(),
            notes: Vec::new(),
            figure: None,
        }
    }

    fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| *c == name)
    }

    /// The distinct row labels, in order: a figure's series.
    fn labels(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (label, _) in &self.rows {
            if !out.contains(label) {
                out.push(label.clone());
            }
        }
        out
    }

    /// A panel of `y` against the numeric column `x`, a line per row label kept by `keep`.
    pub fn lines_panel(
        &self,
        title: &str,
        x: &str,
        y: &str,
        log_x: bool,
        keep: impl Fn(&str) -> bool,
    ) -> plot::Panel {
        let (xi, yi) = (self.column(x), self.column(y));
        let series = self
            .labels()
            .into_iter()
            .filter(|l| keep(l))
            .map(|label| plot::Series {
                points: self
                    .rows
                    .iter()
                    .filter(|(l, _)| *l == label)
                    .filter_map(|(_, cells)| {
                        Some((cells.get(xi?)?.number()?, cells.get(yi?)?.number()?))
                    })
                    .collect(),
                name: label,
            })
            .collect();
        plot::Panel {
            title: title.to_string(),
            x_label: x.to_string(),
            y_label: y.to_string(),
            kind: plot::PanelKind::Lines { log_x },
            series,
        }
    }

    /// A panel of bars of `y`, grouped by the column `category` (each row its own group
    /// when `None`), a bar per row label.
    pub fn bars_panel(&self, title: &str, category: Option<&str>, y: &str) -> plot::Panel {
        let ci = category.and_then(|c| self.column(c));
        let yi = self.column(y);
        let cat_of = |i: usize, cells: &[Cell]| match ci {
            Some(c) => cells.get(c).map_or_else(String::new, Cell::text),
            None => self.rows[i].0.clone(),
        };
        let mut categories: Vec<String> = Vec::new();
        for (i, (_, cells)) in self.rows.iter().enumerate() {
            let c = cat_of(i, cells);
            if !categories.contains(&c) {
                categories.push(c);
            }
        }
        let labels = if ci.is_some() {
            self.labels()
        } else {
            vec![y.to_string()]
        };
        let series = labels
            .into_iter()
            .map(|label| plot::Series {
                points: self
                    .rows
                    .iter()
                    .enumerate()
                    .filter(|(_, (l, _))| ci.is_none() || *l == label)
                    .filter_map(|(i, (_, cells))| {
                        let c = cat_of(i, cells);
                        let at = categories.iter().position(|x| *x == c)?;
                        Some((at as f64, cells.get(yi?)?.number()?))
                    })
                    .collect(),
                name: label,
            })
            .collect();
        plot::Panel {
            title: title.to_string(),
            x_label: category.unwrap_or("").to_string(),
            y_label: y.to_string(),
            kind: plot::PanelKind::Bars { categories },
            series,
        }
    }

    fn header(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
            .collect();
        let profile = if cfg!(debug_assertions) {
            "DEBUG BUILD (figures are not representative; use --release)"
        } else {
            "release"
        };
        format!(
            "quire-bench {}{} | {} | build: {} | machine: {} cores, {} memory",
            self.bench,
            if self.quick { " (QUICK RUN)" } else { "" },
            params.join(" "),
            profile,
            std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
            memory_total().unwrap_or_else(|| "unknown".to_string()),
        )
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.header());
        let mut widths: Vec<usize> = std::iter::once("mode".len())
            .chain(self.columns.iter().map(|c| c.len()))
            .collect();
        let texts: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|(mode, cells)| {
                std::iter::once(mode.clone())
                    .chain(cells.iter().map(Cell::text))
                    .collect()
            })
            .collect();
        for row in &texts {
            for (w, t) in widths.iter_mut().zip(row) {
                *w = (*w).max(t.len());
            }
        }
        let line = |cells: Vec<&str>| {
            let mut s = String::new();
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                if i == 0 {
                    let _ = write!(s, "{c:<w$}");
                } else {
                    let _ = write!(s, "  {c:>w$}");
                }
            }
            s
        };
        let head: Vec<&str> = std::iter::once("mode")
            .chain(self.columns.iter().copied())
            .collect();
        let _ = writeln!(out, "{}", line(head));
        let _ = writeln!(
            out,
            "{}",
            "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1))
        );
        for row in &texts {
            let _ = writeln!(out, "{}", line(row.iter().map(String::as_str).collect()));
        }
        if !self.ratios.is_empty() {
            let _ = writeln!(out, "ratios:");
            for (k, v) in &self.ratios {
                let _ = writeln!(out, "  {k} = {v:.2}");
            }
        }
        if !self.syscalls.is_empty() {
            let _ = writeln!(out, "file-layer calls during the measured phase:");
            for (mode, c) in &self.syscalls {
                let _ = writeln!(out, "  {mode}: {c}");
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }

    pub fn to_json(&self) -> Value {
        let params: Map<String, Value> = self
            .params
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect();
        let results: Vec<Value> = self
            .rows
            .iter()
            .map(|(mode, cells)| {
                let mut m = Map::new();
                m.insert("mode".into(), json!(mode));
                for (col, cell) in self.columns.iter().zip(cells) {
                    m.insert((*col).to_string(), cell.json());
                }
                Value::Object(m)
            })
            .collect();
        let ratios: Map<String, Value> = self
            .ratios
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let syscalls: Map<String, Value> = self
            .syscalls
            .iter()
            .map(|(mode, c)| {
                let kinds: Map<String, Value> = OpKind::ALL
                    .iter()
                    .map(|k| (k.name().to_string(), json!(c.get(*k))))
                    .collect();
                (mode.clone(), Value::Object(kinds))
            })
            .collect();
        json!({
            "bench": self.bench,
            "quick": self.quick,
            "release_build": !cfg!(debug_assertions),
            "params": params,
            "results": results,
            "ratios": ratios,
            "syscalls": syscalls,
            "notes": self.notes,
        })
    }
}

/// Total memory from /proc/meminfo, e.g. "23.4 GiB".
fn memory_total() -> Option<String> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: f64 = text
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(format!("{:.1} GiB", kib / (1024.0 * 1024.0)))
}

/// The three behaviours the size-cache experiments compare (issue 14): PostgreSQL 13 and
/// earlier, PostgreSQL 14-17, quire.
pub const RELSIZE_BASELINES: [quire_engine::RelsizeCacheMode; 3] = [
    quire_engine::RelsizeCacheMode::Off,
    quire_engine::RelsizeCacheMode::RecoveryOnly,
    quire_engine::RelsizeCacheMode::On,
];

/// The three behaviours the buffer-drop experiments compare.
pub const DROP_BASELINES: [quire_engine::BufferDropMode; 3] = [
    quire_engine::BufferDropMode::FullScan,
    quire_engine::BufferDropMode::Pg14,
    quire_engine::BufferDropMode::Indexed,
];

/// Whose behaviour a `relsize_cache` mode is, for a row's label.
pub fn relsize_behaviour(mode: quire_engine::RelsizeCacheMode) -> String {
    use quire_engine::RelsizeCacheMode as M;
    let who = match mode {
        M::Off => "PostgreSQL <=13",
        M::RecoveryOnly => "PostgreSQL 14-17",
        M::On => "quire",
    };
    format!("{who} (relsize_cache={})", mode.name())
}

/// Whose behaviour a `buffer_drop` mode is, for a row's label.
pub fn drop_behaviour(mode: quire_engine::BufferDropMode) -> String {
    use quire_engine::BufferDropMode as M;
    let who = match mode {
        M::FullScan => "PostgreSQL <=13",
        M::Pg14 => "PostgreSQL 14-17",
        M::Indexed => "quire",
    };
    format!("{who} (buffer_drop={})", mode.name())
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>28} [{bar:40}] {pos}/{len} {eta}")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// Creates each relation with `pages` initialised, dirty pages in the buffer pool (a progress
/// bar says `what`).
pub fn populate(
    db: &quire_engine::Database,
    rels: &[quire_engine::RelFileLocator],
    pages: u32,
    what: &str,
) -> anyhow::Result<()> {
    use quire_engine::page::PageMut;
    use quire_engine::Fork;
    let bar = progress(rels.len() as u64, what);
    for &rel in rels {
        db.smgr().create(rel, Fork::Main)?;
        for _ in 0..pages {
            let buf = db.buffer_pool().extend(rel, Fork::Main)?;
            let mut page = buf.write();
            PageMut::new(&mut page).init(0);
            page.mark_dirty();
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Human form of a byte count: 128MiB, 1GiB.
pub fn bytes_name(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if bytes.is_multiple_of(GIB) {
        format!("{}GiB", bytes / GIB)
    } else if bytes.is_multiple_of(MIB) {
        format!("{}MiB", bytes / MIB)
    } else {
        format!("{bytes}B")
    }
}

/// Refuses a pool larger than the machine can hold, with the reason.
pub fn check_pool_fits(pool_bytes: u64) -> anyhow::Result<()> {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let available_kib: Option<u64> = text
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
    if let Some(kib) = available_kib {
        // Descriptors are 64 bytes per 8 KiB buffer; pages are allocated as they fill.
        let needed = pool_bytes / 128;
        if needed > kib * 1024 {
            bail!(
                "a {} pool needs {} of descriptors, more than the {} MiB available",
                bytes_name(pool_bytes),
                bytes_name(needed),
                kib / 1024
            );
        }
    }
    Ok(())
}
