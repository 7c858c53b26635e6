//! A session's thread: made once a client is authenticated ([`crate::startup`]), it owns
//! the client's [`Session`] and socket and runs the protocol ([`crate::conn`]). A statement
//! that waits for a row lock or for I/O blocks only this thread.
//!
//! ## Rules
//! - The session registers in the server's registry of sessions (its process id and
//!   secret key for cancel requests and `pg_terminate_backend`) before the client hears
//!   its key, and leaves it when the thread ends.
//! - The client's `options` (`-c name=value`, `--name=value`) and startup parameters are
//!   applied as SET would apply them, before the first ReadyForQuery: an error in `options`
//!   or an unknown parameter ends the connection (FATAL), as in PostgreSQL; a startup
//!   parameter with a value the parameter does not take (`TimeZone=Mars/Base`) is a WARNING
//!   and the default stays.
//! - The thread's stack holds the deepest statement `max_stack_depth` allows, and a margin.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use quire_engine::{Database, SqlState};
use quire_sql::{Alarm, Backends, Session, SqlError, SESSION_STACK_BYTES};

use crate::affinity::Follower;
use crate::conn::Conn;
use crate::protocol::backend;
use crate::startup::Authenticated;
use crate::transport::{Stream, Transport, Wakeup, TERMINATED};
use crate::watchdog::Watchdog;

/// What a session thread starts from.
pub(crate) struct SessionStart {
    pub auth: Authenticated,
    pub db: Arc<Database>,
    pub backends: Arc<Backends>,
    pub watchdog: Arc<Watchdog>,
    pub follower: Option<Follower>,
    /// The server's own settings, as SHOW shows them.
    pub settings: Arc<[(&'static str, String)]>,
    pub max_message_bytes: usize,
    /// The connection's slot under `max_connections`, released when the thread ends.
    pub slot: crate::Slot,
}

/// Starts a session's thread. Returns it with the wakeup that ends it.
pub(crate) fn spawn(
    start: SessionStart,
    id: u64,
) -> std::io::Result<(JoinHandle<()>, Arc<Wakeup>)> {
    let wakeup = Arc::new(Wakeup::new()?);
    let w = Arc::clone(&wakeup);
    let thread = std::thread::Builder::new()
        .name(format!("quire-conn-{id}"))
        .stack_size(SESSION_STACK_BYTES)
        .spawn(move || run(start, &w))?;
    Ok((thread, wakeup))
}

fn run(start: SessionStart, wakeup: &Arc<Wakeup>) {
    let SessionStart {
        auth,
        db,
        backends,
        watchdog,
        follower,
        settings,
        max_message_bytes,
        slot,
    } = start;
    let peer = auth.peer;
    let follower = follower.filter(|_| matches!(auth.stream, Stream::Plain(_)));
    let mut io = Transport::new(auth.stream, Arc::clone(wakeup), follower);
    io.push_input(&auth.leftover);
    let session = match open_session(&db, &backends, &watchdog, wakeup, &auth.role, settings) {
        Ok(s) => s,
        Err(e) => return refuse(io, &e),
    };
    let mut conn = Conn::new(io, session, Arc::clone(&db), max_message_bytes);
    let warnings = match apply_parameters(conn.session_mut(), &auth.params) {
        Ok(w) => w,
        Err(e) => return conn.refuse(&e),
    };
    tracing::debug!(%peer, pid = conn.pid(), role = auth.role.name, "session starts");
    conn.serve(&warnings);
    drop(slot);
    tracing::debug!(%peer, "session ends");
}

/// The session, registered, its user set and its wakeups wired.
fn open_session(
    db: &Arc<Database>,
    backends: &Arc<Backends>,
    watchdog: &Arc<Watchdog>,
    wakeup: &Arc<Wakeup>,
    role: &quire_sql::Role,
    settings: Arc<[(&'static str, String)]>,
) -> Result<Session, SqlError> {
    let mut session = Session::attached(Arc::clone(db), backends)?;
    session.set_server_settings(settings);
    session.set_user(&role.name);
    session
        .interrupt()
        .set_alarm(Arc::clone(watchdog) as Arc<dyn Alarm>);
    let w = Arc::clone(wakeup);
    session
        .backend()
        .set_waker(Box::new(move || w.end(TERMINATED)));
    Ok(session)
}

/// Ends a connection that cannot have a session: FATAL, then close.
fn refuse(mut io: Transport, e: &SqlError) {
    backend::error_response(
        &mut io.out,
        &backend::Notice {
            detail: e.detail(),
            ..backend::Notice::new("FATAL", e.sqlstate(), e.message())
        },
    );
    io.close();
}

/// The startup parameters that are not settings.
const NOT_SETTINGS: &[&str] = &["user", "database", "options", "replication"];

/// Applies the client's `options` and other startup parameters; returns the warnings for
/// values quire does not support yet.
fn apply_parameters(
    session: &mut Session,
    params: &[(String, String)],
) -> Result<Vec<String>, SqlError> {
    let mut warnings = Vec::new();
    for (name, value) in params {
        if NOT_SETTINGS.contains(&name.as_str()) || name.starts_with("_pq_.") {
            continue;
        }
        match session.set_parameter(name, value) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.sqlstate(),
                    SqlState::INVALID_PARAMETER_VALUE | SqlState::FEATURE_NOT_SUPPORTED
                ) =>
            {
                warnings.push(format!(
                    "startup parameter \"{name}\" = \"{value}\" ignored: {}",
                    e.message()
                ));
            }
            Err(e) => return Err(e),
        }
    }
    if let Some((_, options)) = params.iter().find(|(n, _)| n == "options") {
        for (name, value) in command_line_settings(options)? {
            session.set_parameter(&name, &value)?;
        }
    }
    Ok(warnings)
}

/// The settings in an `options` string, as PostgreSQL's `pg_split_opts` and
/// `process_postgres_switches` read it: words split at unescaped white space (`\` escapes
/// the next character), each setting `-c name=value`, `-cname=value` or `--name=value`,
/// dashes in names read as underscores.
pub(crate) fn command_line_settings(options: &str) -> Result<Vec<(String, String)>, SqlError> {
    let words = split_options(options);
    let mut settings = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        let setting = if word == "-c" {
            i += 1;
            words.get(i).map(String::as_str)
        } else if let Some(s) = word.strip_prefix("-c") {
            Some(s)
        } else {
            word.strip_prefix("--")
        };
        let Some((name, value)) = setting.and_then(|s| s.split_once('=')) else {
            let e = match setting {
                Some(s) if !s.is_empty() => {
                    SqlError::new(SqlState::SYNTAX_ERROR, format!("-c {s} requires a value"))
                }
                _ => SqlError::new(
                    SqlState::SYNTAX_ERROR,
                    format!("invalid command-line argument for server process: {word}"),
                )
                .with_detail("Try \"postgres --help\" for more information."),
            };
            return Err(e);
        };
        settings.push((name.replace('-', "_"), value.to_string()));
        i += 1;
    }
    Ok(settings)
}

/// Words of an `options` string: white space separates, `\` makes the next character
/// ordinary.
fn split_options(options: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    let mut in_word = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The peer a follower may pin this thread beside: loopback only (see `affinity`).
pub(crate) fn follows(peer: &SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_split_and_read_as_postgresql_reads_them() {
        let s = |o: &str| command_line_settings(o).map_err(|e| e.message().to_string());
        assert_eq!(
            s("-c statement_timeout=300 -cwork_mem=64MB --lock-timeout=5s"),
            Ok(vec![
                ("statement_timeout".into(), "300".into()),
                ("work_mem".into(), "64MB".into()),
                ("lock_timeout".into(), "5s".into()),
            ])
        );
        assert_eq!(
            s(r"-c search_path=a\ b"),
            Ok(vec![("search_path".into(), "a b".into())])
        );
        assert_eq!(s("  "), Ok(vec![]));
        assert!(s("-d 5")
            .unwrap_err()
            .contains("invalid command-line argument"));
        assert!(s("-c statement_timeout").is_err());
    }
}
