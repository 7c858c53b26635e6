//! Roles (PostgreSQL's `pg_authid`): who may log in, who is a superuser, and each role's
//! SCRAM-SHA-256 verifier. They live in an ordinary engine table, `quire_roles` (one row per
//! role), so CREATE, ALTER and DROP ROLE are transactional and roll back with their block, as
//! the column table does ([`crate::catalog`]).
//!
//! - The table is created by [`bootstrap`] when missing, so a data directory made before roles
//!   existed gains it on its next start; the bootstrap superuser `postgres` (oid 10, LOGIN,
//!   SUPERUSER, no password) is its first row. It may not be dropped.
//! - A password is never stored: only its SCRAM-SHA-256 verifier in PostgreSQL's text form,
//!   `SCRAM-SHA-256$<iterations>:<salt b64>$<StoredKey b64>:<ServerKey b64>` ([`ScramVerifier`],
//!   the one encoder and decoder of that form). A password given already in that form (psql's
//!   `\password` sends one) is stored as given, once it parses.
//! - SQL: `CREATE ROLE|USER name [WITH] [LOGIN|NOLOGIN] [SUPERUSER|NOSUPERUSER]
//!   [PASSWORD 'pw' | PASSWORD NULL]` (CREATE USER implies LOGIN), `ALTER ROLE|USER name
//!   [WITH] option...`, `DROP ROLE|USER [IF EXISTS] name [, ...]`. Parsed here, not by
//!   sqlparser, whose role grammar follows other dialects. Errors: 42710 for a role that
//!   exists, 42704 for one that does not, 2BP01 for dropping `postgres`, 55006 for dropping
//!   the session's own role.
//! - Oids: `postgres` has PostgreSQL's 10; other roles get one above the highest in the table,
//!   starting at PostgreSQL's first normal oid (16384). A unique index on the name backs the
//!   42710 check against a concurrent CREATE (which then fails with 23505).

use std::fmt;
use std::num::NonZeroU32;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use quire_engine::{Column, Database, IsolationLevel, TableId, Tid, Transaction, Type, Value};
use ring::{digest, hmac, pbkdf2};

use crate::error::{Result, SqlError};

/// The roles table; its name is in quire's reserved namespace ([`crate::catalog`]).
pub(crate) const ROLES_TABLE: &str = "quire_roles";
const ROLES_NAME_INDEX: &str = "quire_roles_name";
/// The bootstrap superuser, created on first start.
pub const BOOTSTRAP_SUPERUSER: &str = "postgres";
/// PostgreSQL's oid for the bootstrap superuser.
const BOOTSTRAP_SUPERUSER_OID: u32 = 10;
/// PostgreSQL's FirstNormalObjectId: user-created roles get oids from here.
const FIRST_NORMAL_OID: u32 = 16_384;
/// PostgreSQL's `scram_iterations` default.
pub const SCRAM_ITERATIONS: u32 = 4096;
/// PostgreSQL's SCRAM_DEFAULT_SALT_LEN.
const SCRAM_SALT_BYTES: usize = 16;
/// SHA-256's output: the length of StoredKey and ServerKey.
const SCRAM_KEY_BYTES: usize = 32;
/// A bound on the iteration count a stored verifier may name: each login (and each
/// `password`-method check) costs that many HMACs, so an absurd count would be a way to hang
/// the server. PostgreSQL's own `scram_iterations` maximum is INT_MAX; 10 million is far above
/// any real setting.
const MAX_SCRAM_ITERATIONS: u32 = 10_000_000;
/// A role name's length limit (PostgreSQL's NAMEDATALEN - 1).
const MAX_NAME_BYTES: usize = 63;

// Column positions in `quire_roles`.
const COL_OID: usize = 0;
const COL_NAME: usize = 1;
const COL_SUPER: usize = 2;
const COL_LOGIN: usize = 3;
const COL_PASSWORD: usize = 4;

/// One role, as `pg_authid` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    pub oid: u32,
    pub name: String,
    pub superuser: bool,
    pub login: bool,
    /// The SCRAM verifier's text form (never a password); `None` without a password.
    pub password: Option<String>,
}

/// PostgreSQL's SCRAM-SHA-256 secret: what a server needs to check a client's proof and prove
/// itself, and nothing from which the password follows directly.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramVerifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: [u8; SCRAM_KEY_BYTES],
    pub server_key: [u8; SCRAM_KEY_BYTES],
}

impl fmt::Debug for ScramVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys are password-equivalent for SCRAM (StoredKey and a stolen exchange give
        // a login): never in logs.
        f.debug_struct("ScramVerifier")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; SCRAM_KEY_BYTES] {
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data);
    let mut out = [0; SCRAM_KEY_BYTES];
    out.copy_from_slice(tag.as_ref());
    out
}

fn sha256(data: &[u8]) -> [u8; SCRAM_KEY_BYTES] {
    let d = digest::digest(&digest::SHA256, data);
    let mut out = [0; SCRAM_KEY_BYTES];
    out.copy_from_slice(d.as_ref());
    out
}

/// Equality in time that does not depend on where the inputs differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl ScramVerifier {
    /// The verifier of `password` with `salt` (RFC 5802: SaltedPassword = Hi(SASLprep(pw),
    /// salt, i); StoredKey = H(HMAC(SaltedPassword, "Client Key")); ServerKey =
    /// HMAC(SaltedPassword, "Server Key")). A password SASLprep refuses is used as is, as
    /// PostgreSQL does.
    pub fn from_password(password: &str, salt: &[u8], iterations: u32) -> ScramVerifier {
        assert!(
            (1..=MAX_SCRAM_ITERATIONS).contains(&iterations),
            "iterations {iterations} out of range"
        );
        let prepared = stringprep::saslprep(password)
            .map_or_else(|_| password.to_string(), std::borrow::Cow::into_owned);
        let mut salted = [0u8; SCRAM_KEY_BYTES];
        let n = NonZeroU32::new(iterations).expect("checked above");
        pbkdf2::derive(
            pbkdf2::PBKDF2_HMAC_SHA256,
            n,
            salt,
            prepared.as_bytes(),
            &mut salted,
        );
        ScramVerifier {
            iterations,
            salt: salt.to_vec(),
            stored_key: sha256(&hmac_sha256(&salted, b"Client Key")),
            server_key: hmac_sha256(&salted, b"Server Key"),
        }
    }

    /// A verifier of `password` with a fresh random salt and PostgreSQL's iteration count.
    pub fn new_random(password: &str) -> Result<ScramVerifier> {
        use ring::rand::SecureRandom;
        let mut salt = [0u8; SCRAM_SALT_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut salt)
            .map_err(|_| SqlError::new("XX000", "could not generate a random salt"))?;
        Ok(Self::from_password(password, &salt, SCRAM_ITERATIONS))
    }

    /// A verifier that no password matches, with a salt made from `secret` and `user`, so
    /// that an unknown user gets the same salt on every attempt, as a real one does
    /// (PostgreSQL's `scram_mock_salt`): the exchange looks the same either way.
    pub fn mock(user: &str, secret: &[u8]) -> ScramVerifier {
        let mut input = secret.to_vec();
        input.extend_from_slice(user.as_bytes());
        let salt = sha256(&input)[..SCRAM_SALT_BYTES].to_vec();
        // Keys from a hash of the salt with a different label: no proof ever hashes to it.
        input.extend_from_slice(b"mock keys");
        let key = sha256(&input);
        ScramVerifier {
            iterations: SCRAM_ITERATIONS,
            salt,
            stored_key: key,
            server_key: key,
        }
    }

    /// Whether `password` is the one this verifier was made from (the `password` method,
    /// which receives the password in clear).
    pub fn matches_password(&self, password: &str) -> bool {
        let v = Self::from_password(password, &self.salt, self.iterations);
        same_bytes(&v.stored_key, &self.stored_key)
    }

    /// Parses PostgreSQL's text form; `None` for anything else (a plain password, md5).
    pub fn parse(text: &str) -> Option<ScramVerifier> {
        let rest = text.strip_prefix("SCRAM-SHA-256$")?;
        let (params, keys) = rest.split_once('$')?;
        let (iterations, salt) = params.split_once(':')?;
        let (stored, server) = keys.split_once(':')?;
        let iterations: u32 = iterations.parse().ok()?;
        if !(1..=MAX_SCRAM_ITERATIONS).contains(&iterations) {
            return None;
        }
        let salt = B64.decode(salt).ok()?;
        let stored_key = B64.decode(stored).ok()?.try_into().ok()?;
        let server_key = B64.decode(server).ok()?.try_into().ok()?;
        if salt.is_empty() {
            return None;
        }
        Some(ScramVerifier {
            iterations,
            salt,
            stored_key,
            server_key,
        })
    }
}

impl fmt::Display for ScramVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(self.stored_key),
            B64.encode(self.server_key)
        )
    }
}

fn role_row(role: &Role) -> Vec<Value> {
    vec![
        Value::Int(i64::from(role.oid)),
        Value::Text(role.name.clone()),
        Value::Bool(role.superuser),
        Value::Bool(role.login),
        role.password.clone().map_or(Value::Null, Value::Text),
    ]
}

fn corrupt() -> SqlError {
    SqlError::new("XX000", format!("a row of {ROLES_TABLE} is malformed"))
}

fn row_role(row: &[Value]) -> Result<Role> {
    let (Some(oid), Some(name), Value::Bool(superuser), Value::Bool(login)) = (
        row.get(COL_OID).and_then(Value::as_int),
        row.get(COL_NAME).and_then(Value::as_text),
        row.get(COL_SUPER).ok_or_else(corrupt)?,
        row.get(COL_LOGIN).ok_or_else(corrupt)?,
    ) else {
        return Err(corrupt());
    };
    let password = match row.get(COL_PASSWORD).ok_or_else(corrupt)? {
        Value::Null => None,
        Value::Text(t) => Some(t.clone()),
        _ => return Err(corrupt()),
    };
    Ok(Role {
        oid: u32::try_from(oid).map_err(|_| corrupt())?,
        name: name.to_string(),
        superuser: *superuser,
        login: *login,
        password,
    })
}

/// Creates the roles table and the bootstrap superuser when the table is missing (a new data
/// directory, or one made before roles existed).
pub fn bootstrap(db: &Database) -> Result<()> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    if tx.find_table(ROLES_TABLE)?.is_some() {
        return Ok(tx.rollback()?);
    }
    let table = tx.create_table(
        ROLES_TABLE,
        &[
            Column::new("oid", Type::Int),
            Column::new("rolname", Type::Text),
            Column::new("rolsuper", Type::Bool),
            Column::new("rolcanlogin", Type::Bool),
            Column::new("rolpassword", Type::Text),
        ],
    )?;
    tx.create_index(ROLES_NAME_INDEX, table, &["rolname"], true)?;
    tx.insert(
        table,
        &role_row(&Role {
            oid: BOOTSTRAP_SUPERUSER_OID,
            name: BOOTSTRAP_SUPERUSER.into(),
            superuser: true,
            login: true,
            password: None,
        }),
    )?;
    tx.commit()?;
    Ok(())
}

/// Every role `tx` sees, by oid.
pub(crate) fn all(tx: &Transaction) -> Result<Vec<Role>> {
    let Some(table) = tx.find_table(ROLES_TABLE)? else {
        return Ok(Vec::new());
    };
    let mut roles = Vec::new();
    for row in tx.scan(table)? {
        let (_, row) = row?;
        roles.push(row_role(&row)?);
    }
    roles.sort_by_key(|r| r.oid);
    Ok(roles)
}

/// The role named `name` and where its row is.
fn find(tx: &Transaction, name: &str) -> Result<Option<(TableId, Tid, Role)>> {
    let table = tx.table(ROLES_TABLE)?;
    let index = tx.index(ROLES_NAME_INDEX)?;
    let key = [Value::Text(name.to_string())];
    let bound = std::ops::Bound::Included(&key[..]);
    if let Some(hit) = tx.index_scan(index, bound, bound)?.next() {
        let (tid, row) = hit?;
        return Ok(Some((table, tid, row_role(&row)?)));
    }
    Ok(None)
}

/// The role named `name` as committed now (for authentication, outside any session).
pub fn lookup_role(db: &Database, name: &str) -> Result<Option<Role>> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    let r = find(&tx, name);
    let _ = tx.rollback();
    Ok(r?.map(|(_, _, role)| role))
}

/// What CREATE and ALTER ROLE set; `None` leaves a setting as it is (ALTER) or at its default
/// (CREATE).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleOptions {
    pub login: Option<bool>,
    pub superuser: Option<bool>,
    pub password: Option<PasswordOption>,
}

/// PASSWORD 'pw' or PASSWORD NULL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordOption {
    Given(String),
    Null,
}

/// A role statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleStmt {
    /// `user`: CREATE USER, whose default is LOGIN.
    Create {
        name: String,
        user: bool,
        options: RoleOptions,
    },
    Alter {
        name: String,
        options: RoleOptions,
    },
    Drop {
        names: Vec<String>,
        if_exists: bool,
    },
}

/// A token of a role statement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    /// An unquoted word, lowercased as PostgreSQL folds identifiers and keywords.
    Word(String),
    /// A "quoted" identifier, as written.
    Quoted(String),
    /// A 'string' literal.
    Str(String),
    Comma,
}

fn tokens(sql: &str) -> Result<Vec<Tok>> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == ',' {
            chars.next();
            out.push(Tok::Comma);
        } else if c == '\'' || c == '"' {
            chars.next();
            let mut s = String::new();
            let mut closed = false;
            while let Some(d) = chars.next() {
                if d == c {
                    if chars.peek() == Some(&c) {
                        chars.next();
                        s.push(c);
                        continue;
                    }
                    closed = true;
                    break;
                }
                s.push(d);
            }
            if !closed {
                return Err(SqlError::syntax("unterminated quoted string"));
            }
            out.push(if c == '\'' {
                Tok::Str(s)
            } else {
                Tok::Quoted(s)
            });
        } else if c.is_alphanumeric() || c == '_' {
            let mut w = String::new();
            while let Some(&d) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_' || d == '$') {
                    break;
                }
                w.push(d);
                chars.next();
            }
            out.push(Tok::Word(w.to_lowercase()));
        } else {
            return Err(SqlError::syntax(format!("syntax error at or near \"{c}\"")));
        }
    }
    Ok(out)
}

fn is_word(t: Option<&Tok>, w: &str) -> bool {
    matches!(t, Some(Tok::Word(x)) if x == w)
}

fn role_name(t: Option<&Tok>) -> Result<String> {
    let name = match t {
        Some(Tok::Word(w) | Tok::Quoted(w)) => w.clone(),
        Some(t) => return Err(SqlError::syntax(format!("syntax error at or near {t:?}"))),
        None => return Err(SqlError::syntax("syntax error at end of input")),
    };
    if name.is_empty() {
        return Err(SqlError::new("42602", "zero-length delimited identifier"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(SqlError::new(
            "42622",
            format!("role name \"{name}\" is longer than {MAX_NAME_BYTES} bytes"),
        ));
    }
    Ok(name)
}

fn options(toks: &[Tok]) -> Result<RoleOptions> {
    let mut o = RoleOptions::default();
    let mut i = usize::from(is_word(toks.first(), "with"));
    while let Some(t) = toks.get(i) {
        let Tok::Word(w) = t else {
            return Err(SqlError::syntax(format!("syntax error at or near {t:?}")));
        };
        match w.as_str() {
            "login" => o.login = Some(true),
            "nologin" => o.login = Some(false),
            "superuser" => o.superuser = Some(true),
            "nosuperuser" => o.superuser = Some(false),
            "encrypted" if is_word(toks.get(i + 1), "password") => {}
            "password" => {
                i += 1;
                o.password = Some(match toks.get(i) {
                    Some(Tok::Str(s)) => PasswordOption::Given(s.clone()),
                    Some(Tok::Word(n)) if n == "null" => PasswordOption::Null,
                    _ => return Err(SqlError::syntax("PASSWORD needs a quoted string or NULL")),
                });
            }
            "inherit" | "noinherit" | "createdb" | "nocreatedb" | "createrole" | "nocreaterole"
            | "replication" | "noreplication" | "bypassrls" | "nobypassrls" | "connection"
            | "valid" | "in" | "role" | "admin" | "user" | "sysid" => {
                return Err(SqlError::unsupported(format!(
                    "the role option {}",
                    w.to_uppercase()
                )));
            }
            _ => return Err(SqlError::syntax(format!("syntax error at or near \"{w}\""))),
        }
        i += 1;
    }
    Ok(o)
}

/// A role statement, if `sql` is one: `Ok(None)` for anything else, which goes to sqlparser.
pub(crate) fn parse(sql: &str) -> Result<Option<RoleStmt>> {
    // Cheap test first: most statements are not role statements.
    let head: Vec<String> = sql
        .split_whitespace()
        .take(2)
        .map(str::to_lowercase)
        .collect();
    let is_role = matches!(
        head.as_slice(),
        [a, b] if ["create", "alter", "drop"].contains(&a.as_str())
            && (b == "role" || b == "user")
    );
    if !is_role {
        return Ok(None);
    }
    let toks = tokens(sql)?;
    let verb = &toks[0];
    let user = is_word(toks.get(1), "user");
    let rest = &toks[2..];
    Ok(Some(if *verb == Tok::Word("drop".into()) {
        let (if_exists, mut rest) = if is_word(rest.first(), "if") && is_word(rest.get(1), "exists")
        {
            (true, &rest[2..])
        } else {
            (false, rest)
        };
        let mut names = Vec::new();
        loop {
            names.push(role_name(rest.first())?);
            match rest.get(1) {
                None => break,
                Some(Tok::Comma) => rest = &rest[2..],
                Some(t) => return Err(SqlError::syntax(format!("syntax error at or near {t:?}"))),
            }
        }
        RoleStmt::Drop { names, if_exists }
    } else {
        let name = role_name(rest.first())?;
        let options = options(&rest[1..])?;
        if *verb == Tok::Word("create".into()) {
            RoleStmt::Create {
                name,
                user,
                options,
            }
        } else {
            RoleStmt::Alter { name, options }
        }
    }))
}

/// The verifier to store for a PASSWORD option: one given in SCRAM form as is, otherwise
/// the password's. An empty password is no password, as in PostgreSQL (which warns).
fn verifier(password: Option<&PasswordOption>) -> Result<Option<String>> {
    let Some(PasswordOption::Given(pw)) = password else {
        return Ok(None);
    };
    if pw.is_empty() {
        return Ok(None);
    }
    if pw.starts_with("SCRAM-SHA-256$") {
        return match ScramVerifier::parse(pw) {
            Some(v) => Ok(Some(v.to_string())),
            None => Err(SqlError::new(
                "22023",
                "the password looks like a SCRAM-SHA-256 verifier but does not parse as one",
            )),
        };
    }
    Ok(Some(ScramVerifier::new_random(pw)?.to_string()))
}

fn duplicate(name: &str) -> SqlError {
    SqlError::new("42710", format!("role \"{name}\" already exists"))
}

fn missing(name: &str) -> SqlError {
    SqlError::new("42704", format!("role \"{name}\" does not exist"))
}

/// Runs a role statement in `tx`; `current_user` is the session's role. Returns the command
/// tag.
pub(crate) fn execute(tx: &Transaction, stmt: &RoleStmt, current_user: &str) -> Result<String> {
    match stmt {
        RoleStmt::Create {
            name,
            user,
            options,
        } => {
            if find(tx, name)?.is_some() {
                return Err(duplicate(name));
            }
            let roles = all(tx)?;
            let oid = roles
                .iter()
                .map(|r| r.oid)
                .max()
                .unwrap_or(0)
                .max(FIRST_NORMAL_OID - 1)
                .checked_add(1)
                .ok_or_else(|| SqlError::new("54000", "out of role oids"))?;
            let role = Role {
                oid,
                name: name.clone(),
                superuser: options.superuser.unwrap_or(false),
                login: options.login.unwrap_or(*user),
                password: verifier(options.password.as_ref())?,
            };
            let table = tx.table(ROLES_TABLE)?;
            tx.insert(table, &role_row(&role)).map_err(|e| match e {
                quire_engine::Error::UniqueViolation { .. } => duplicate(name),
                e => e.into(),
            })?;
            // CREATE USER too, as PostgreSQL tags it.
            Ok("CREATE ROLE".into())
        }
        RoleStmt::Alter { name, options } => {
            let (table, tid, mut role) = find(tx, name)?.ok_or_else(|| missing(name))?;
            if let Some(l) = options.login {
                role.login = l;
            }
            if let Some(s) = options.superuser {
                if !s && role.name == BOOTSTRAP_SUPERUSER {
                    return Err(SqlError::new(
                        "0A000",
                        "the bootstrap superuser must keep SUPERUSER",
                    ));
                }
                role.superuser = s;
            }
            if let Some(p) = &options.password {
                role.password = verifier(Some(p))?;
            }
            match tx.update(table, tid, &role_row(&role))? {
                quire_engine::Changed::Done(..) => {}
                quire_engine::Changed::Skipped => {
                    // The row changed under us after the lookup (READ COMMITTED): say so
                    // rather than report an ALTER that did nothing.
                    return Err(SqlError::new(
                        "40001",
                        format!("could not alter role \"{name}\" due to a concurrent change"),
                    ));
                }
            }
            Ok("ALTER ROLE".into())
        }
        RoleStmt::Drop { names, if_exists } => {
            for name in names {
                if name == BOOTSTRAP_SUPERUSER {
                    return Err(SqlError::new(
                        "2BP01",
                        format!(
                            "cannot drop role {name} because it is required by the database system"
                        ),
                    ));
                }
                if name == current_user {
                    return Err(SqlError::new("55006", "current user cannot be dropped"));
                }
                match find(tx, name)? {
                    Some((table, tid, _)) => {
                        tx.delete(table, tid)?;
                    }
                    None if *if_exists => {}
                    None => return Err(missing(name)),
                }
            }
            Ok("DROP ROLE".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_matches_postgresql() {
        // From PostgreSQL 16: SET password_encryption = 'scram-sha-256' with a fixed salt is
        // not exposed, so check against RFC 7677's SCRAM-SHA-256 test vector instead:
        // user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations.
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let v = ScramVerifier::from_password("pencil", &salt, 4096);
        // ServerSignature in the RFC is HMAC(ServerKey, AuthMessage); the keys themselves
        // are checked through the text form's round trip and a known ServerKey.
        let text = v.to_string();
        assert!(text.starts_with("SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$"));
        assert_eq!(ScramVerifier::parse(&text), Some(v.clone()));
        let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        assert_eq!(
            B64.encode(hmac_sha256(&v.server_key, auth.as_bytes())),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        assert!(v.matches_password("pencil"));
        assert!(!v.matches_password("pencil "));
    }

    #[test]
    fn malformed_verifiers_do_not_parse() {
        for t in [
            "pencil",
            "SCRAM-SHA-256$",
            "SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA",
            "SCRAM-SHA-256$0:c2FsdA==$AAAA:AAAA",
            "SCRAM-SHA-256$99999999999:c2FsdA==$AAAA:AAAA",
            "md5abc",
        ] {
            assert_eq!(ScramVerifier::parse(t), None, "{t}");
        }
    }

    #[test]
    fn mock_salt_is_stable_per_user() {
        let a = ScramVerifier::mock("alice", b"secret");
        assert_eq!(a, ScramVerifier::mock("alice", b"secret"));
        assert_ne!(a.salt, ScramVerifier::mock("bob", b"secret").salt);
        assert!(!a.matches_password(""));
    }

    #[test]
    fn role_statements_parse() {
        let p = |s: &str| parse(s).unwrap();
        assert_eq!(p("select 1"), None);
        assert_eq!(
            p("CREATE USER Alice WITH PASSWORD 'it''s'"),
            Some(RoleStmt::Create {
                name: "alice".into(),
                user: true,
                options: RoleOptions {
                    password: Some(PasswordOption::Given("it's".into())),
                    ..RoleOptions::default()
                }
            })
        );
        assert_eq!(
            p("alter role \"Bob\" nologin password null"),
            Some(RoleStmt::Alter {
                name: "Bob".into(),
                options: RoleOptions {
                    login: Some(false),
                    password: Some(PasswordOption::Null),
                    ..RoleOptions::default()
                }
            })
        );
        assert_eq!(
            p("drop role if exists a, b"),
            Some(RoleStmt::Drop {
                names: vec!["a".into(), "b".into()],
                if_exists: true
            })
        );
        assert_eq!(
            parse("create role r createdb").unwrap_err().sqlstate(),
            "0A000"
        );
        assert_eq!(
            parse("create role r password").unwrap_err().sqlstate(),
            "42601"
        );
        assert_eq!(parse("drop role").unwrap_err().sqlstate(), "42601");
    }
}
