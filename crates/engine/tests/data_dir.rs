//! The data directory's permissions, as PostgreSQL's: what the engine creates is its user's
//! alone (directories `0700`, files `0600`, whatever the umask), and it refuses to start on
//! a directory that others may write into or read, or that another user owns
//! (PostgreSQL 15's `checkDataDir`, with its messages and SQLSTATE 55000); a new directory
//! that others may only read is set to `0700` first, as initdb does.
//!
//! On the operating system's file system (the simulator has no owners or modes).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Column, Config, Database, IsolationLevel, Type, Value};

fn config() -> Config {
    Config {
        shared_buffers_bytes: 4 << 20,
        max_prepared_transactions: 2,
        autovacuum: false,
        // The least PostgreSQL allows: the index build below spills sort runs.
        maintenance_work_mem_bytes: 1 << 20,
        ..Config::default()
    }
}

fn open(dir: &Path) -> quire_engine::Result<Database> {
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    Database::open(&vfs, dir, config())
}

/// Every directory and file under `dir` (itself included), with its permission bits.
fn modes_under(dir: &Path) -> Vec<(PathBuf, bool, u32)> {
    let mut out = vec![(dir.to_path_buf(), true, mode_of(dir))];
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(modes_under(&path));
        } else {
            out.push((path.clone(), false, mode_of(&path)));
        }
    }
    out
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn a_new_data_directory_is_0700_and_every_file_in_it_0600() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let db = open(&dir).unwrap();
    // Files of every kind: relations and their forks, an index built from sort runs, the
    // WAL, the commit log, a prepared transaction's state file (written at a checkpoint),
    // the control file and the lock file.
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let columns = [Column::new("id", Type::Int), Column::new("v", Type::Int)];
    let t = tx.create_table("t", &columns).unwrap();
    for id in 0..50_000 {
        tx.insert(t, &[Value::Int(id), Value::Int(id)]).unwrap();
    }
    tx.commit().unwrap();
    db.vacuum(t).unwrap();
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    tx.create_index("t_id", t, &["id"], true).unwrap();
    tx.insert(t, &[Value::Int(-1), Value::Int(-1)]).unwrap();
    tx.prepare("gid-1").unwrap();
    db.checkpointer().checkpoint().unwrap();
    let modes = modes_under(&dir);
    db.commit_prepared("gid-1").unwrap();
    db.close().unwrap();

    let (dirs, files): (Vec<_>, Vec<_>) = modes.iter().partition(|(_, is_dir, _)| *is_dir);
    assert!(dirs.len() >= 4, "{dirs:?}");
    assert!(files.len() >= 6, "{files:?}");
    assert!(
        files
            .iter()
            .any(|(p, _, _)| p.starts_with(dir.join("pg_twophase"))),
        "a two-phase state file was written: {files:?}"
    );
    assert!(
        dirs.iter().any(|(p, _, _)| p.ends_with("pgsql_tmp")),
        "the index build spilled sort runs: {dirs:?}"
    );
    for (path, is_dir, mode) in modes {
        let want = if is_dir { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{} is {mode:o}", path.display());
    }
}

/// What opening a directory of `mode` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Opens, leaving the mode as it was.
    Opens,
    /// Opens a new directory after setting it to 0700 (initdb's fix).
    Fixed,
    /// Refuses, with PostgreSQL's message, before creating anything.
    Refused,
}

/// Opens `dir` after setting it to `mode`, and checks the outcome.
fn open_with_mode(dir: &Path, mode: u32, want: Outcome) {
    fs::set_permissions(dir, fs::Permissions::from_mode(mode)).unwrap();
    let entries_before = fs::read_dir(dir).unwrap().count();
    match (open(dir), want) {
        (Ok(db), Outcome::Opens | Outcome::Fixed) => {
            db.close().unwrap();
            let now = if want == Outcome::Fixed { 0o700 } else { mode };
            assert_eq!(mode_of(dir), now, "{mode:o}");
        }
        (Err(e), Outcome::Refused) => {
            assert_eq!(e.sqlstate(), "55000", "{e}");
            assert_eq!(
                e.to_string(),
                format!(
                    "data directory \"{}\" has invalid permissions (DETAIL: Permissions \
                     should be u=rwx (0700) or u=rwx,g=rx (0750).)",
                    dir.display()
                )
            );
            let entries = fs::read_dir(dir).unwrap().count();
            assert_eq!(
                entries, entries_before,
                "{mode:o}: refused before creating anything"
            );
            assert_eq!(mode_of(dir), mode, "{mode:o}: left as it was");
        }
        (Ok(_), _) => panic!("{mode:o} was accepted, expected {want:?}"),
        (Err(e), _) => panic!("{mode:o} was refused ({e}), expected {want:?}"),
    }
}

/// PostgreSQL 15's rule is a mask: no group write, nothing for others. A data directory
/// that holds a database is refused otherwise, as postgres refuses it.
#[test]
fn open_refuses_a_database_others_may_write_into_or_read() {
    use Outcome::{Opens, Refused};
    let cases = [
        (0o700, Opens),
        (0o750, Opens),
        (0o710, Opens),
        (0o740, Opens),
        (0o770, Refused),
        (0o777, Refused),
        (0o755, Refused),
        (0o705, Refused),
        (0o701, Refused),
        (0o720, Refused),
    ];
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    open(&dir).unwrap().close().unwrap();
    for (mode, want) in cases {
        open_with_mode(&dir, mode, want);
    }
}

/// A new data directory is quire's initdb: one that others may only read (`mkdir`'s and
/// `tempfile`'s 0755) is set to 0700, as initdb fixes an existing directory; one that others
/// may write into is refused, since anybody may have put a file in it.
#[test]
fn a_new_data_directory_others_may_read_is_fixed_and_one_they_may_write_is_refused() {
    use Outcome::{Fixed, Opens, Refused};
    let cases = [
        (0o700, Opens),
        (0o750, Opens),
        (0o755, Fixed),
        (0o705, Fixed),
        (0o711, Fixed),
        (0o770, Refused),
        (0o777, Refused),
        (0o775, Refused),
        (0o702, Refused),
        (0o720, Refused),
    ];
    for (mode, want) in cases {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        fs::create_dir(&dir).unwrap();
        open_with_mode(&dir, mode, want);
    }
}

#[test]
fn open_refuses_a_data_directory_another_user_owns() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    let me = fs::metadata(&dir).unwrap().uid();
    // Giving a directory away takes root (CAP_CHOWN); as anyone else there is nothing to try.
    if std::os::unix::fs::chown(&dir, Some(me.wrapping_add(4242)), None).is_err() {
        eprintln!("cannot give a directory to another user here: skipped");
        return;
    }
    let e = open(&dir).err().expect("another user's directory");
    assert_eq!(e.sqlstate(), "55000", "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "data directory \"{}\" has wrong ownership (HINT: The server must be started by \
             the user that owns the data directory.)",
            dir.display()
        )
    );
}
