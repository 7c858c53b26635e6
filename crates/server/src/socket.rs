//! The message loop of one client connection: pgwire's `process_socket` (TLS negotiation,
//! the authentication timeout, each message through [`process_message`], errors through
//! [`process_error`]), with what quire adds: between two commands the loop also waits on
//! the session's [`IdleTimer`] and, when it expires, sends PostgreSQL's FATAL error (25P03
//! idle in transaction, 57P05 idle session) and closes the connection. Closing drops the
//! session's handle, so its thread rolls the open transaction back and its locks go.
//! Likewise when the server stops serving ([`Farewell`]): a client waiting between
//! commands gets PostgreSQL's FATAL (57P01 at shutdown, 57P02 after the engine failed).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pgwire::api::{ClientInfo, ErrorHandler, PgWireConnectionState, PgWireServerHandlers};
use pgwire::error::ErrorInfo;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{negotiate_tls, process_error, process_message};
use pgwire::tokio::TlsAcceptor;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::handler::Handlers;
use crate::session::IdleTimer;

/// PostgreSQL's `authentication_timeout` default: a client that has not finished its
/// startup by then is dropped.
const AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the server ends every connection, as the clients are told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Farewell {
    pub sqlstate: &'static str,
    pub message: &'static str,
}

pub(crate) const SHUTDOWN: Farewell = Farewell {
    sqlstate: "57P01",
    message: "terminating connection due to administrator command",
};

pub(crate) const ENGINE_FAILED: Farewell = Farewell {
    sqlstate: "57P02",
    message: "terminating connection because the engine failed (an I/O failure); the server restarts and recovers from the WAL",
};

/// Serves one connection until the client leaves, a FATAL error, its idle timer expires or
/// `stop` names a farewell. `idle` is `None` for a connection without a session (refused:
/// too many clients).
pub(crate) async fn serve(
    tcp: TcpStream,
    tls: Option<TlsAcceptor>,
    handlers: Handlers,
    idle: Option<Arc<IdleTimer>>,
    mut stop: watch::Receiver<Option<Farewell>>,
) -> io::Result<()> {
    let startup_timeout = tokio::time::sleep(AUTHENTICATION_TIMEOUT);
    tokio::pin!(startup_timeout);
    let socket = tokio::select! {
        () = &mut startup_timeout => return Ok(()),
        socket = negotiate_tls(tcp, tls) => socket?,
    };
    // A direct TLS handshake without a certificate configured: nothing to talk to.
    let Some(mut socket) = socket else {
        return Ok(());
    };
    let startup = handlers.startup_handler();
    let simple = handlers.simple_query_handler();
    let extended = handlers.extended_query_handler();
    let copy = handlers.copy_handler();
    let cancel = handlers.cancel_handler();
    let errors = handlers.error_handler();
    let never = Arc::new(IdleTimer::default());
    let idle = idle.unwrap_or(never);
    loop {
        let starting = matches!(
            socket.state(),
            PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        );
        let farewell = *stop.borrow_and_update();
        if let Some(f) = farewell {
            return fatal(&mut socket, f.sqlstate, f.message).await;
        }
        let msg = tokio::select! {
            () = &mut startup_timeout, if starting => None,
            limit = idle.expired(), if !starting => {
                tracing::info!(sqlstate = limit.sqlstate, "{}", limit.message);
                return fatal(&mut socket, limit.sqlstate, limit.message).await;
            }
            _ = stop.changed() => continue,
            msg = socket.next() => msg,
        };
        let Some(Ok(msg)) = msg else {
            return Ok(());
        };
        // Terminate: the client leaves and waits for the server to close the socket.
        if matches!(msg, PgWireFrontendMessage::Terminate(_)) {
            return Ok(());
        }
        let extended_query = match socket.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => msg.is_extended_query(),
        };
        let cancel_request = matches!(msg, PgWireFrontendMessage::CancelRequest(_));
        let processed = process_message(
            msg,
            &mut socket,
            Arc::clone(&startup),
            Arc::clone(&simple),
            Arc::clone(&extended),
            Arc::clone(&copy),
            Arc::clone(&cancel),
        )
        .await;
        if let Err(mut e) = processed {
            errors.on_error(&socket, &mut e);
            let fatal = e.is_fatal();
            process_error(&mut socket, e, extended_query).await?;
            if fatal {
                return Ok(());
            }
        }
        if cancel_request {
            return Ok(());
        }
    }
}

/// Sends a FATAL error; the caller then closes the connection.
async fn fatal<S>(socket: &mut S, sqlstate: &str, message: &str) -> io::Result<()>
where
    S: futures::Sink<PgWireBackendMessage> + Unpin,
    io::Error: From<S::Error>,
{
    let info = ErrorInfo::new("FATAL".into(), sqlstate.into(), message.into());
    socket
        .send(PgWireBackendMessage::ErrorResponse(info.into()))
        .await?;
    Ok(())
}
