//! COPY FROM STDIN data, in text and CSV format, into a table of many types: line splitting,
//! escapes, quoting, every column type's input, and the insert. The first byte picks the
//! format and where the data is cut into two CopyData messages.
#![no_main]
use std::sync::{Arc, Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use quire_engine::vfs::{SimVfs, Vfs};
use quire_engine::{Config, Database};
use quire_sql::{OutcomeKind, Session};

/// One database and session for the whole run (a database per input would be slow); the
/// table is emptied now and then so that memory stays bounded.
struct State {
    session: Session,
    runs: u64,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        let vfs: Arc<dyn Vfs> = Arc::new(SimVfs::new(1));
        let config = Config {
            shared_buffers_bytes: 4 << 20,
            autovacuum: false,
            ..Config::default()
        };
        let db = Database::open(&vfs, std::path::Path::new("/data"), config).expect("open");
        Session::bootstrap(&db).expect("bootstrap");
        let mut session = Session::new(Arc::new(db));
        let create = "CREATE TABLE t (a int, b bigint, c text, d numeric(10, 2), e boolean, \
                      f date, g timestamp, h double precision, i bytea, j uuid, k varchar(5), \
                      l smallint, m real, n timestamptz, o char(3))";
        for r in session.execute_query(create) {
            r.expect("the table is made");
        }
        Mutex::new(State { session, runs: 0 })
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, data)) = data.split_first() else {
        return;
    };
    let mut state = state().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    state.runs += 1;
    if state.runs % 1000 == 0 {
        let _ = state.session.execute_query("TRUNCATE t");
    }
    let format = if control & 1 == 0 { "" } else { " WITH (FORMAT csv)" };
    let started = state.session.execute_query(&format!("COPY t FROM STDIN{format}"));
    if !matches!(started.as_slice(), [Ok(o)] if matches!(o.kind, OutcomeKind::CopyIn { .. })) {
        return;
    }
    let cut = usize::from(control >> 1).min(data.len());
    state.session.copy_data(&data[..cut]);
    state.session.copy_data(&data[cut..]);
    let _ = state.session.copy_done();
});
