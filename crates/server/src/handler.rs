//! The pgwire handlers of one connection: startup (the connection limit, then
//! authentication by the first matching `pg_hba.conf` rule: trust, SCRAM-SHA-256, password or
//! reject), simple query, and the extended protocol. They run on the connection's own thread
//! and call its session ([`SessionHandle`]) in place; the role lookup at startup reads the
//! roles table there too.
//!
//! Authentication answers as PostgreSQL's does, so that nothing tells whether a role exists:
//! under `scram-sha-256` or `password`, an unknown role, a role without a password and a wrong
//! password all end in FATAL 28P01 `password authentication failed for user "x"`, after a
//! full exchange (an unknown role gets a mock verifier whose salt is stable per name, as
//! PostgreSQL's `scram_mock_salt`). Only once the password is right does a role without LOGIN
//! hear 28000 `role "x" is not permitted to log in`.

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::SinkExt;
use futures::{stream, Sink};
use pgwire::api::auth::sasl::scram::{
    ScramSecret, ScramServerAuth, ScramServerAuthWaitingForClientFinal,
};
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata,
    DefaultServerParameterProvider, StartupHandler,
};
use pgwire::api::cancel::CancelHandler;
use pgwire::api::copy::{send_copy_in_response, send_copy_out_response, CopyHandler};
use pgwire::api::portal::{Format, Portal, PortalExecutionState};
use pgwire::api::query::{send_execution_response, ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeStatementResponse, FieldFormat, FieldInfo,
    QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::PgWireConnectionState;
use pgwire::api::{
    ClientInfo, ClientPortalStore, PidSecretKeyGenerator, RandomPidSecretKeyGenerator, Type,
    DEFAULT_NAME, METADATA_USER,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::{Execute, Sync as PgSync};
use pgwire::messages::response::{CommandComplete, ReadyForQuery};
use pgwire::messages::startup::{Authentication, PasswordMessageFamily};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use quire_sql::{
    Description, OutColumn, Outcome, OutcomeKind, Role, ScramVerifier, Session, SqlError, SqlType,
    Statement,
};

use crate::cancel::Registry;
use crate::hba::{Hba, Method};
use crate::session::SessionHandle;
use crate::wire;

/// The server's authentication state shared by every connection.
pub(crate) struct Auth {
    hba: Hba,
    /// The secret behind the mock salts of unknown roles. Per process: across a restart an
    /// unknown role's salt changes while a real one's does not (PostgreSQL keeps its
    /// `mock_auth_nonce` in pg_control for that reason).
    mock_secret: [u8; 32],
}

impl Auth {
    pub(crate) fn new(hba: Hba) -> Result<Auth, crate::ServerError> {
        use ring::rand::SecureRandom;
        let mut mock_secret = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut mock_secret)
            .map_err(|_| crate::ServerError::Random)?;
        Ok(Auth { hba, mock_secret })
    }
}

/// A connection's authentication between its startup and its last password message.
#[derive(Default)]
pub(crate) enum Pending {
    #[default]
    Nothing,
    /// SCRAM: `verifier` is the role's, or a mock one when there is no role or no password
    /// (`role` then says the exchange cannot succeed). `exchange` is set after the client's
    /// first message.
    Scram {
        user: String,
        role: Option<Role>,
        verifier: ScramVerifier,
        exchange: Option<Box<ScramServerAuthWaitingForClientFinal>>,
    },
    /// The `password` method: the next message is the password in clear.
    Password {
        user: String,
        role: Option<Role>,
        verifier: Option<ScramVerifier>,
    },
}

/// A connection slot under `max_connections`, released when the connection ends.
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Slot {
    pub(crate) fn acquire(count: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(count)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection's handlers.
pub(crate) struct Connection {
    /// `None` when the connection is over `max_connections`: startup refuses it (53300).
    pub session: Option<SessionHandle>,
    pub db: Arc<quire_engine::Database>,
    pub registry: Arc<Registry>,
    /// The process id the client was given, once registered for cancel requests.
    pub pid: std::sync::Mutex<Option<i32>>,
    pub auth: Arc<Auth>,
    pub pending: std::sync::Mutex<Pending>,
    pub _slot: Option<Slot>,
    pub parameters: Arc<DefaultServerParameterProvider>,
    pub pids: Arc<RandomPidSecretKeyGenerator>,
    pub parser: Arc<SqlParser>,
}

fn error_info(severity: &str, e: &SqlError) -> ErrorInfo {
    let mut info = ErrorInfo::new(
        severity.to_owned(),
        e.sqlstate().to_owned(),
        e.message().to_owned(),
    );
    info.detail = e.detail().map(str::to_owned);
    info.position = e.position().map(|p| p.to_string());
    info
}

fn user_error(e: &SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info("ERROR", e)))
}

fn fatal(code: &str, message: &str) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "FATAL".to_owned(),
        code.to_owned(),
        message.to_owned(),
    )))
}

impl Connection {
    fn session(&self) -> Result<&SessionHandle, SqlError> {
        self.session
            .as_ref()
            .ok_or_else(|| SqlError::new("53300", "sorry, too many clients already"))
    }
}

/// The mechanism quire offers (no channel binding: SCRAM-SHA-256-PLUS is not offered).
const SCRAM_SHA_256: &str = "SCRAM-SHA-256";

fn password_failed(user: &str) -> PgWireError {
    fatal(
        "28P01",
        &format!("password authentication failed for user \"{user}\""),
    )
}

fn protocol_violation(what: &str) -> PgWireError {
    fatal("08P01", what)
}

impl Connection {
    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Startup message: the first matching rule chooses how the client authenticates.
    async fn start_authentication<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let user = client
            .metadata()
            .get(METADATA_USER)
            .cloned()
            .unwrap_or_default();
        if user.is_empty() {
            return Err(fatal(
                "28000",
                "no PostgreSQL user name specified in startup packet",
            ));
        }
        let database = client
            .metadata()
            .get(pgwire::api::METADATA_DATABASE)
            .cloned()
            .unwrap_or_else(|| user.clone());
        let peer = client.socket_addr().ip().to_canonical();
        let ssl = client.is_secure();
        let encryption = if ssl {
            "SSL encryption"
        } else {
            "no encryption"
        };
        let Some(rule) = self.auth.hba.matching(peer, ssl, &user, &database) else {
            return Err(fatal(
                "28000",
                &format!(
                    "no pg_hba.conf entry for host \"{peer}\", user \"{user}\", database \"{database}\", {encryption}"
                ),
            ));
        };
        tracing::debug!(%peer, user, database, line = rule.line, method = ?rule.method, "pg_hba.conf rule");
        let lookup = |name: &str| -> PgWireResult<Option<Role>> {
            quire_sql::lookup_role(&self.db, name)
                .map_err(|e| PgWireError::UserError(Box::new(error_info("FATAL", &e))))
        };
        match rule.method {
            Method::Reject => Err(fatal(
                "28000",
                &format!(
                    "pg_hba.conf rejects connection for host \"{peer}\", user \"{user}\", database \"{database}\", {encryption}"
                ),
            )),
            Method::Trust => {
                let Some(role) = lookup(&user)? else {
                    return Err(fatal("28000", &format!("role \"{user}\" does not exist")));
                };
                self.log_in(client, &role).await
            }
            Method::ScramSha256 => {
                let role = lookup(&user)?;
                let verifier = role
                    .as_ref()
                    .and_then(|r| r.password.as_deref())
                    .and_then(ScramVerifier::parse);
                // No role, or no SCRAM secret: the exchange goes on with a mock one and fails
                // at its end, as a wrong password does.
                let (role, verifier) = match verifier {
                    Some(v) => (role, v),
                    None => (None, ScramVerifier::mock(&user, &self.auth.mock_secret)),
                };
                *self.lock_pending() = Pending::Scram {
                    user,
                    role,
                    verifier,
                    exchange: None,
                };
                client.set_state(PgWireConnectionState::AuthenticationInProgress);
                client
                    .send(PgWireBackendMessage::Authentication(Authentication::SASL(
                        vec![SCRAM_SHA_256.to_string()],
                    )))
                    .await?;
                Ok(())
            }
            Method::Password => {
                let role = lookup(&user)?;
                let verifier = role
                    .as_ref()
                    .and_then(|r| r.password.as_deref())
                    .and_then(ScramVerifier::parse);
                *self.lock_pending() = Pending::Password {
                    user,
                    role,
                    verifier,
                };
                client.set_state(PgWireConnectionState::AuthenticationInProgress);
                client
                    .send(PgWireBackendMessage::Authentication(
                        Authentication::CleartextPassword,
                    ))
                    .await?;
                Ok(())
            }
        }
    }

    /// A password message (SASLInitialResponse, SASLResponse or a password in clear).
    async fn continue_authentication<C>(
        &self,
        client: &mut C,
        message: PasswordMessageFamily,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let pending = std::mem::take(&mut *self.lock_pending());
        match pending {
            Pending::Nothing => Err(protocol_violation(
                "a password message arrived with no authentication in progress",
            )),
            Pending::Scram {
                user,
                role,
                verifier,
                exchange: None,
            } => {
                let initial = message
                    .into_sasl_initial_response()
                    .map_err(|_| protocol_violation("expected a SASLInitialResponse message"))?;
                if initial.auth_method != SCRAM_SHA_256 {
                    return Err(protocol_violation(
                        "client selected an invalid SASL authentication mechanism",
                    ));
                }
                let data = initial
                    .data
                    .ok_or_else(|| protocol_violation("malformed SCRAM message (empty)"))?;
                let secret = ScramSecret::Verifier {
                    salt: verifier.salt.clone(),
                    iterations: verifier.iterations as usize,
                    stored_key: verifier.stored_key.to_vec(),
                    server_key: verifier.server_key.to_vec(),
                };
                let (server_first, exchange) = ScramServerAuth::new()
                    .on_client_first_message_with_secret(&data, secret)
                    .map_err(|e| protocol_violation(&format!("malformed SCRAM message: {e}")))?;
                *self.lock_pending() = Pending::Scram {
                    user,
                    role,
                    verifier,
                    exchange: Some(Box::new(exchange)),
                };
                client
                    .send(PgWireBackendMessage::Authentication(
                        Authentication::SASLContinue(Bytes::from(server_first)),
                    ))
                    .await?;
                Ok(())
            }
            Pending::Scram {
                user,
                role,
                exchange: Some(exchange),
                ..
            } => {
                let response = message
                    .into_sasl_response()
                    .map_err(|_| protocol_violation("expected a SASLResponse message"))?;
                let server_final = match exchange.on_client_final_message(&response.data) {
                    Ok(f) => f,
                    Err(PgWireError::InvalidPassword(_)) => return Err(password_failed(&user)),
                    Err(e) => {
                        return Err(protocol_violation(&format!("malformed SCRAM message: {e}")))
                    }
                };
                // A mock verifier matches no proof; this is the belt to that brace.
                let Some(role) = role else {
                    return Err(password_failed(&user));
                };
                client
                    .feed(PgWireBackendMessage::Authentication(
                        Authentication::SASLFinal(Bytes::from(server_final)),
                    ))
                    .await?;
                self.log_in(client, &role).await
            }
            Pending::Password {
                user,
                role,
                verifier,
            } => {
                let password = message
                    .into_password()
                    .map_err(|_| protocol_violation("expected a password message"))?;
                let password = password.password.trim_end_matches('\0');
                let ok = verifier.is_some_and(|v| v.matches_password(password));
                match role {
                    Some(role) if ok => self.log_in(client, &role).await,
                    _ => Err(password_failed(&user)),
                }
            }
        }
    }

    /// The client is who it says: the role must be allowed to log in; then the session is
    /// its, and the startup ends (BackendKeyData, ReadyForQuery).
    async fn log_in<C>(&self, client: &mut C, role: &Role) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !role.login {
            return Err(fatal(
                "28000",
                &format!("role \"{}\" is not permitted to log in", role.name),
            ));
        }
        let (pid, secret) = self.pids.generate(client);
        if let Some(session) = &self.session {
            let interrupt = session.call(|s| {
                s.set_user(&role.name);
                s.interrupt()
            });
            self.registry.register(pid, secret.clone(), interrupt);
            *self
                .pid
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(pid);
        }
        client.set_pid_and_secret_key(pid, secret);
        finish_authentication(client, self.parameters.as_ref()).await?;
        tracing::debug!(peer = %client.socket_addr(), pid, role = role.name, "connection authenticated");
        Ok(())
    }
}

#[async_trait]
impl StartupHandler for Connection {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                if self.session.is_none() {
                    return Err(fatal("53300", "sorry, too many clients already"));
                }
                self.start_authentication(client).await
            }
            PgWireFrontendMessage::PasswordMessageFamily(m) => {
                self.continue_authentication(client, m).await
            }
            _ => Ok(()),
        }
    }
}

fn pg_type(t: SqlType) -> Type {
    Type::from_oid(t.oid()).unwrap_or(Type::UNKNOWN)
}

/// Whether each of `columns` result columns goes out in binary, as Bind's result format
/// codes say. A list of one code per column must have one per column: else PostgreSQL's
/// 08P01 (pgwire's `Format::format_for` would index past the list).
fn column_formats(format: &Format, columns: usize) -> PgWireResult<Vec<bool>> {
    if let Format::Individual(codes) = format {
        if codes.len() != columns {
            return Err(user_error(&SqlError::new(
                "08P01",
                format!(
                    "bind message has {} result formats but query has {columns} columns",
                    codes.len()
                ),
            )));
        }
    }
    Ok((0..columns).map(|i| format.is_binary(i)).collect())
}

fn fields(columns: &[OutColumn], binary: &[bool]) -> Vec<FieldInfo> {
    columns
        .iter()
        .zip(binary)
        .map(|(c, &binary)| {
            let format = if binary {
                FieldFormat::Binary
            } else {
                FieldFormat::Text
            };
            FieldInfo::new(c.name.clone(), None, None, pg_type(c.ty), format)
        })
        .collect()
}

/// Encodes result rows of `columns` as DataRow messages, each column in its format.
fn row_encoder<'a>(
    columns: &[OutColumn],
    binary: &'a [bool],
) -> impl Fn(&quire_engine::Row) -> PgWireResult<DataRow> + 'a {
    let types: Vec<SqlType> = columns.iter().map(|c| c.ty).collect();
    move |row| wire::encode_row(row, &types, |i| binary[i]).map_err(|e| user_error(&e))
}

/// COPY FROM STDIN's answer: CopyInResponse, then the client sends its data.
fn copy_in(columns: usize) -> CopyResponse {
    CopyResponse::new(0, columns, stream::empty())
}

/// COPY TO STDOUT's answer: its lines as CopyData.
fn copy_out(columns: usize, lines: Vec<Vec<u8>>) -> CopyResponse {
    let data: Vec<PgWireResult<CopyData>> = lines
        .into_iter()
        .map(|l| Ok(CopyData::new(Bytes::from(l))))
        .collect();
    CopyResponse::new(0, columns, stream::iter(data))
}

/// The response of one executed statement.
fn response(outcome: Outcome, format: &Format) -> PgWireResult<Response> {
    Ok(match outcome.kind {
        OutcomeKind::Command => Response::Execution(Tag::new(&outcome.tag)),
        OutcomeKind::BlockStart => Response::TransactionStart(Tag::new(&outcome.tag)),
        OutcomeKind::BlockEnd => Response::TransactionEnd(Tag::new(&outcome.tag)),
        OutcomeKind::CopyIn { columns } => Response::CopyIn(copy_in(columns)),
        OutcomeKind::CopyOut { columns, lines } => Response::CopyOut(copy_out(columns, lines)),
        OutcomeKind::Rows { columns, rows } => {
            let binary = column_formats(format, columns.len())?;
            let schema = Arc::new(fields(&columns, &binary));
            let data: Vec<PgWireResult<_>> =
                rows.iter().map(row_encoder(&columns, &binary)).collect();
            Response::Query(QueryResponse::new(schema, stream::iter(data)))
        }
    })
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let session = match self.session() {
            Ok(s) => s,
            Err(e) => return Ok(vec![Response::Error(Box::new(error_info("ERROR", &e)))]),
        };
        // All statements of the message in one call: one implicit transaction, the first
        // error ending the message, as in PostgreSQL.
        let results = session.call(|s| s.execute_query(query));
        // Before the results: VACUUM, the one statement with notices, runs alone in its
        // message (never in a block or an implicit transaction).
        for outcome in results.iter().flatten() {
            send_notices(client, &outcome.notices).await?;
        }
        Ok(results
            .into_iter()
            .map(|r| match r {
                // Text throughout: no result format to get wrong.
                Ok(o) => response(o, &Format::UnifiedText)
                    .unwrap_or_else(|e| Response::Error(Box::new(e.into()))),
                Err(e) => Response::Error(Box::new(error_info("ERROR", &e))),
            })
            .collect())
    }
}

/// A statement's messages to the client (VACUUM VERBOSE's report), as PostgreSQL sends
/// them: NoticeResponse at level INFO.
async fn send_notices<C>(client: &mut C, notices: &[String]) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    for n in notices {
        let info = ErrorInfo::new("INFO".into(), "00000".into(), n.clone());
        client
            .feed(PgWireBackendMessage::NoticeResponse(info.into()))
            .await?;
    }
    Ok(())
}

/// Parses a Parse message's SQL (syntax only: binding needs the session's transaction).
#[derive(Debug, Default)]
pub(crate) struct SqlParser;

/// A statement of the extended protocol: its source (the session's plan cache key) and its
/// parse, shared so that pgwire's statement and portal stores copy two pointers.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    text: Arc<str>,
    stmt: Arc<Statement>,
}

#[async_trait]
impl QueryParser for SqlParser {
    type Statement = Prepared;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<Prepared>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut statements = quire_sql::parse(sql).map_err(|e| user_error(&e))?;
        match statements.len() {
            0 => Ok(None),
            1 => Ok(statements.pop().map(|stmt| Prepared {
                text: Arc::from(sql),
                stmt: Arc::new(stmt),
            })),
            _ => Err(user_error(&SqlError::syntax(
                "cannot insert multiple commands into a prepared statement",
            ))),
        }
    }

    fn get_parameter_types(&self, _stmt: &Prepared) -> PgWireResult<Vec<Type>> {
        // Parameter types need the catalog: `Connection::do_describe_statement` asks the
        // session instead.
        Ok(Vec::new())
    }

    fn get_result_schema(
        &self,
        _stmt: &Prepared,
        _format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(Vec::new())
    }
}

/// The client's declared parameter types (`Unknown` where it left the type to the server).
fn hints(declared: &[Option<Type>]) -> Result<Vec<SqlType>, SqlError> {
    declared
        .iter()
        .map(|t| match t {
            None => Ok(SqlType::Unknown),
            Some(t) => SqlType::from_oid(t.oid())
                .ok_or_else(|| SqlError::unsupported(format!("parameter type {}", t.name()))),
        })
        .collect()
}

impl Connection {
    /// Runs a bound portal on the session: its parameters decode once binding has given
    /// their types.
    fn run_portal(&self, portal: &Portal<Prepared>) -> PgWireResult<Outcome> {
        let hints = hints(&portal.statement.parameter_types).map_err(|e| user_error(&e))?;
        let p = &portal.statement.statement;
        let raw = &portal.parameters;
        self.session()
            .map_err(|e| user_error(&e))?
            .call(|s| {
                s.execute_with(&p.text, &p.stmt, &hints, &|types| {
                    if types.len() != raw.len() {
                        return Err(SqlError::new(
                            "08P01",
                            format!(
                                "bind message supplies {} parameters, but prepared statement requires {}",
                                raw.len(),
                                types.len()
                            ),
                        ));
                    }
                    raw.iter()
                        .zip(types)
                        .enumerate()
                        .map(|(i, (b, t))| {
                            let binary = portal.parameter_format.is_binary(i);
                            wire::decode_param(b.as_deref(), binary, *t, i + 1)
                        })
                        .collect()
                })
            })
            .map_err(|e| user_error(&e))
    }

    fn describe(&self, stmt: &StoredStatement<Prepared>) -> PgWireResult<Description> {
        let hints = hints(&stmt.parameter_types).map_err(|e| user_error(&e))?;
        let p = &stmt.statement;
        self.session()
            .map_err(|e| user_error(&e))?
            .call(|s| s.describe(&p.text, &p.stmt, &hints))
            .map_err(|e| user_error(&e))
    }
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = Prepared;
    type QueryParser = SqlParser;

    fn query_parser(&self) -> Arc<SqlParser> {
        Arc::clone(&self.parser)
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Prepared>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let outcome = self.run_portal(portal)?;
        send_notices(client, &outcome.notices).await?;
        response(outcome, &portal.result_column_format)
    }

    /// Execute. A portal run to completion the first time it is executed (`max_rows` 0, what
    /// libpq and pgbench send) takes a direct path: its rows are encoded straight into
    /// DataRow messages, without pgwire's row stream, its waits on the portal's state lock
    /// and its 256-row fetch buffer. Any other Execute (a row limit, a suspended or finished
    /// portal, an empty one) is pgwire's.
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Prepared>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let portal = match client
            .portal_store()
            .get_portal(message.name.as_deref().unwrap_or(DEFAULT_NAME))
        {
            Some(Entry::Value(portal))
                if message.max_rows == 0
                    && matches!(client.state(), PgWireConnectionState::ReadyForQuery) =>
            {
                portal
            }
            _ => return self._on_execute(client, message).await,
        };
        let state = portal.state();
        // The connection's thread is the only one that touches its portals: the lock is
        // free unless pgwire holds it, and then pgwire's path is the one to take.
        let Ok(mut state) = state.try_lock() else {
            return self._on_execute(client, message).await;
        };
        if !matches!(*state, PortalExecutionState::Initial) {
            drop(state);
            return self._on_execute(client, message).await;
        }
        let outcome = self.run_portal(&portal)?;
        send_notices(client, &outcome.notices).await?;
        let mut status = client.transaction_status();
        match outcome.kind {
            OutcomeKind::Rows { columns, rows } => {
                let binary = column_formats(&portal.result_column_format, columns.len())?;
                let encode = row_encoder(&columns, &binary);
                for row in &rows {
                    client
                        .feed(PgWireBackendMessage::DataRow(encode(row)?))
                        .await?;
                }
                // Executed again, the portal answers as pgwire's finished one: no rows.
                *state = PortalExecutionState::Finished;
                let tag = Tag::new("SELECT").with_rows(rows.len());
                send_execution_response(client, tag).await?;
            }
            OutcomeKind::Command => {
                send_execution_response(client, Tag::new(&outcome.tag)).await?;
            }
            OutcomeKind::BlockStart => {
                send_execution_response(client, Tag::new(&outcome.tag)).await?;
                status = status.to_in_transaction_state();
            }
            OutcomeKind::BlockEnd => {
                send_execution_response(client, Tag::new(&outcome.tag)).await?;
                status = status.to_idle_state();
                drop(state);
                client.portal_store().rm_portal(DEFAULT_NAME);
            }
            OutcomeKind::CopyIn { columns } => {
                client.set_state(PgWireConnectionState::CopyInProgress(true));
                send_copy_in_response(client, copy_in(columns)).await?;
            }
            OutcomeKind::CopyOut { columns, lines } => {
                send_copy_out_response(client, copy_out(columns, lines)).await?;
            }
        }
        if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
            client.set_transaction_status(status);
        }
        Ok(())
    }

    /// Sync: commits the implicit transaction of the writes executed since the last Sync
    /// (a failed commit is reported here, as PostgreSQL does), then pgwire's own Sync.
    async fn on_sync<C>(&self, client: &mut C, _message: PgSync) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Prepared>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(session) = self.session.as_ref().filter(|s| s.awaits_sync()) {
            let committed = session.call(Session::sync);
            if let Err(e) = committed {
                client
                    .feed(PgWireBackendMessage::ErrorResponse(
                        error_info("ERROR", &e).into(),
                    ))
                    .await?;
            }
        }
        client.portal_store().rm_portal(DEFAULT_NAME);
        client
            .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
                client.transaction_status(),
            )))
            .await?;
        client.flush().await?;
        Ok(())
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        stmt: &StoredStatement<Prepared>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let d = self.describe(stmt)?;
        let params = d.params.iter().map(|t| pg_type(*t)).collect();
        // Formats are not known before Bind; text is what PostgreSQL reports here too.
        Ok(DescribeStatementResponse::new(
            params,
            fields(&d.columns, &vec![false; d.columns.len()]),
        ))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Prepared>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let d = self.describe(&portal.statement)?;
        let binary = column_formats(&portal.result_column_format, d.columns.len())?;
        Ok(DescribePortalResponse::new(fields(&d.columns, &binary)))
    }
}

/// The ParameterStatus values sent at startup.
pub(crate) fn server_parameters() -> DefaultServerParameterProvider {
    let mut p = DefaultServerParameterProvider::default();
    p.server_version = format!(
        "{} (quire {})",
        quire_sql::SERVER_VERSION,
        env!("CARGO_PKG_VERSION")
    );
    p.server_encoding = "UTF8".into();
    p.client_encoding = Some("UTF8".into());
    p.date_style = "ISO, MDY".into();
    p.integer_datetimes = true;
    p.standard_conforming_strings = true;
    p.time_zone = "UTC".into();
    p.application_name = None;
    p
}

/// COPY FROM STDIN: the data goes to the session as it arrives; the session inserts
/// complete lines and keeps the first error for CopyDone.
#[async_trait]
impl CopyHandler for Connection {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let data = copy_data.data;
        self.session()
            .map_err(|e| user_error(&e))?
            .call(|s| s.copy_data(&data));
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let outcome = self
            .session()
            .map_err(|e| user_error(&e))?
            .call(Session::copy_done)
            .map_err(|e| user_error(&e))?;
        client
            .send(PgWireBackendMessage::CommandComplete(CommandComplete::new(
                outcome.tag,
            )))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let message = fail.message;
        let e = match self.session() {
            Ok(s) => s.call(|s| s.copy_fail(&message)),
            Err(e) => e,
        };
        user_error(&e)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let pid = self
            .pid
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(pid) = pid {
            self.registry.deregister(pid);
        }
    }
}

/// A CancelRequest arrives on a connection of its own; it stops the statement of the
/// session whose process id and secret key it names (and nothing if they do not match).
#[async_trait]
impl CancelHandler for Connection {
    async fn on_cancel_request(&self, req: pgwire::messages::cancel::CancelRequest) {
        let stopped = self.registry.cancel(&self.db, req.pid, &req.secret_key);
        tracing::debug!(pid = req.pid, stopped, "cancel request");
    }
}
