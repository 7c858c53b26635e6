//! The grammar of role statements, PostgreSQL 15's (`gram.y`), parsed here rather than by
//! sqlparser, whose role grammar follows other dialects:
//!
//! - `CREATE ROLE|USER|GROUP name [[WITH] option ...]`; `ALTER ROLE|USER role [[WITH]
//!   option ...]`; `ALTER ROLE|USER|GROUP name RENAME TO new`; `DROP ROLE|USER|GROUP [IF
//!   EXISTS] role [, ...]`. Options: `SUPERUSER`, `CREATEDB`, `CREATEROLE`, `INHERIT`,
//!   `LOGIN`, `REPLICATION`, `BYPASSRLS` and their `NO` forms, `CONNECTION LIMIT n`,
//!   `[ENCRYPTED] PASSWORD 'pw' | PASSWORD NULL`, `VALID UNTIL 'ts'`, and for CREATE only
//!   `IN ROLE|GROUP roles`, `ROLE|USER roles`, `ADMIN roles`, `SYSID n`. Each at most once
//!   (42601 "conflicting or redundant options").
//! - `GRANT role [, ...] TO role [, ...] [WITH ADMIN OPTION] [GRANTED BY role]`; `REVOKE
//!   [ADMIN OPTION FOR] role [, ...] FROM role [, ...] [GRANTED BY role] [CASCADE|RESTRICT]`.
//!   A GRANT or REVOKE with `ON` grants privileges on objects: not ours, it goes to sqlparser.
//! - `SET [SESSION] ROLE name|NONE`, `SET role TO|= ...`, `RESET ROLE`; `SET [SESSION]
//!   SESSION AUTHORIZATION name|DEFAULT`, `SET session_authorization TO|= ...`, `RESET
//!   SESSION AUTHORIZATION`. `SET LOCAL` of either is refused (0A000): quire's settings are
//!   not transactional.
//! - A role where PostgreSQL takes a `RoleSpec` may be `CURRENT_USER`, `CURRENT_ROLE` or
//!   `SESSION_USER` (unquoted); `public` names PUBLIC, which no role statement accepts;
//!   `none` is reserved (42939), as are those keywords where a new name is due.

use crate::error::{Result, SqlError};
use quire_engine::SqlState;

/// A role name's length limit (PostgreSQL's NAMEDATALEN - 1).
const MAX_NAME_BYTES: usize = 63;
/// Most tokens one role statement may have (a bound on the work of a huge role list).
const MAX_TOKENS: usize = 100_000;

/// A role where PostgreSQL's grammar takes a `RoleSpec`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleSpec {
    Name(String),
    CurrentUser,
    CurrentRole,
    SessionUser,
    Public,
}

/// PASSWORD 'pw' or PASSWORD NULL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordOption {
    Given(String),
    Null,
}

/// What CREATE and ALTER ROLE set; `None` leaves a setting as it is (ALTER) or at its default
/// (CREATE).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleOptions {
    pub superuser: Option<bool>,
    pub createdb: Option<bool>,
    pub createrole: Option<bool>,
    pub inherit: Option<bool>,
    pub login: Option<bool>,
    pub replication: Option<bool>,
    pub bypassrls: Option<bool>,
    /// CONNECTION LIMIT: -1 for none; below -1 is refused when the statement runs (22023).
    pub connection_limit: Option<i32>,
    pub password: Option<PasswordOption>,
    /// VALID UNTIL, as written (a timestamptz's text).
    pub valid_until: Option<String>,
    /// CREATE's IN ROLE / IN GROUP: the roles the new role joins.
    pub in_roles: Option<Vec<RoleSpec>>,
    /// CREATE's ROLE / USER: the new role's members.
    pub members: Option<Vec<RoleSpec>>,
    /// CREATE's ADMIN: the new role's members with the admin option.
    pub admins: Option<Vec<RoleSpec>>,
    /// SYSID n: accepted and ignored with a notice, as PostgreSQL does.
    pub sysid: bool,
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
        role: RoleSpec,
        options: RoleOptions,
    },
    Rename {
        name: String,
        to: String,
    },
    Drop {
        roles: Vec<RoleSpec>,
        if_exists: bool,
    },
    /// GRANT roles TO grantees; `admin`: WITH ADMIN OPTION.
    Grant {
        roles: Vec<String>,
        grantees: Vec<RoleSpec>,
        admin: bool,
        granted_by: Option<RoleSpec>,
    },
    /// REVOKE roles FROM grantees; `admin_only`: REVOKE ADMIN OPTION FOR.
    Revoke {
        roles: Vec<String>,
        grantees: Vec<RoleSpec>,
        admin_only: bool,
        granted_by: Option<RoleSpec>,
    },
    /// SET ROLE: `None` for NONE (and for RESET ROLE, `reset`).
    SetRole {
        role: Option<String>,
        reset: bool,
    },
    /// SET SESSION AUTHORIZATION: `None` for DEFAULT (and for RESET, `reset`).
    SetSessionAuthorization {
        user: Option<String>,
        reset: bool,
    },
}

/// A token of a role statement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    /// An unquoted word or number, ASCII letters lowercased as PostgreSQL folds identifiers.
    Word(String),
    /// A "quoted" identifier, as written.
    Quoted(String),
    /// A 'string' literal.
    Str(String),
    /// Punctuation: `,`, `=`, `(`, `)`.
    Punct(char),
}

impl Tok {
    /// The token as PostgreSQL's "syntax error at or near" quotes it.
    fn near(&self) -> String {
        match self {
            Tok::Word(w) => w.clone(),
            Tok::Quoted(q) => format!("\"{q}\""),
            Tok::Str(s) => format!("'{s}'"),
            Tok::Punct(c) => c.to_string(),
        }
    }
}

/// The first words of `sql` (ASCII-lowercased), after whitespace and comments, up to the
/// first character that is not part of a word: enough to tell a role statement.
fn leading_words(sql: &str, most: usize) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = sql;
    while words.len() < most {
        rest = skip_blank(rest);
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        words.push(rest[..end].to_ascii_lowercase());
        rest = &rest[end..];
    }
    words
}

/// `s` after leading whitespace and comments (`-- ...` to the line's end, `/* ... */`).
fn skip_blank(mut s: &str) -> &str {
    loop {
        s = s.trim_start();
        if let Some(r) = s.strip_prefix("--") {
            s = r.split_once('\n').map_or("", |(_, r)| r);
        } else if s.starts_with("/*") {
            s = &s[block_comment_len(s)..];
        } else {
            return s;
        }
    }
}

/// The length of the (nested) block comment `s` starts with; all of `s` if unterminated.
fn block_comment_len(s: &str) -> usize {
    let b = s.as_bytes();
    let (mut depth, mut i) = (0usize, 0);
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

fn tokens(sql: &str) -> Result<Vec<Tok>> {
    let mut out = Vec::new();
    let mut rest = skip_blank(sql);
    while let Some(c) = rest.chars().next() {
        if out.len() >= MAX_TOKENS {
            return Err(SqlError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                format!("a role statement may have at most {MAX_TOKENS} tokens"),
            ));
        }
        let (tok, len) = if c == '\'' || c == '"' {
            quoted(rest, c)?
        } else if c.is_alphanumeric() || c == '_' || (c == '-' && starts_digit(&rest[1..])) {
            let end = rest[1..]
                .find(|d: char| !(d.is_alphanumeric() || d == '_' || d == '$'))
                .map_or(rest.len(), |e| e + 1);
            (Tok::Word(rest[..end].to_ascii_lowercase()), end)
        } else if ",=()".contains(c) {
            (Tok::Punct(c), 1)
        } else {
            return Err(SqlError::syntax(format!("syntax error at or near \"{c}\"")));
        };
        out.push(tok);
        rest = skip_blank(&rest[len..]);
    }
    Ok(out)
}

fn starts_digit(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit())
}

/// The quoted token `s` starts with (`q` its quote; a doubled quote stands for one) and the
/// bytes it takes.
fn quoted(s: &str, q: char) -> Result<(Tok, usize)> {
    let mut text = String::new();
    let mut chars = s.char_indices().skip(1).peekable();
    while let Some((i, d)) = chars.next() {
        if d != q {
            text.push(d);
            continue;
        }
        if chars.peek().is_some_and(|&(_, e)| e == q) {
            chars.next();
            text.push(q);
            continue;
        }
        let tok = if q == '\'' {
            Tok::Str(text)
        } else {
            Tok::Quoted(text)
        };
        return Ok((tok, i + 1));
    }
    Err(SqlError::syntax(if q == '\'' {
        "unterminated quoted string"
    } else {
        "unterminated quoted identifier"
    }))
}

fn conflicting() -> SqlError {
    SqlError::syntax("conflicting or redundant options")
}

fn reserved(name: &str) -> SqlError {
    SqlError::new(
        SqlState::RESERVED_NAME,
        format!("role name \"{name}\" is reserved"),
    )
}

/// Sets an option that may be given once.
fn once<T>(slot: &mut Option<T>, value: T) -> Result<()> {
    if slot.is_some() {
        return Err(conflicting());
    }
    *slot = Some(value);
    Ok(())
}

/// A cursor over a statement's tokens.
struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn peek_word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(x)) if x == w)
    }

    /// Takes the word `w` if it comes next.
    fn eat(&mut self, w: &str) -> bool {
        let hit = self.peek_word(w);
        self.at += usize::from(hit);
        hit
    }

    fn eat_punct(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(&Tok::Punct(c));
        self.at += usize::from(hit);
        hit
    }

    /// The syntax error at the next token.
    fn error(&self) -> SqlError {
        match self.peek() {
            Some(t) => SqlError::syntax(format!("syntax error at or near \"{}\"", t.near())),
            None => SqlError::syntax("syntax error at end of input"),
        }
    }

    fn expect(&mut self, w: &str) -> Result<()> {
        if self.eat(w) {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn end(&self) -> Result<()> {
        if self.peek().is_some() {
            return Err(self.error());
        }
        Ok(())
    }

    /// A role: PostgreSQL's `RoleSpec`.
    fn spec(&mut self) -> Result<RoleSpec> {
        let spec = match self.peek() {
            Some(Tok::Word(w)) => match w.as_str() {
                "current_user" => RoleSpec::CurrentUser,
                "current_role" => RoleSpec::CurrentRole,
                "session_user" => RoleSpec::SessionUser,
                _ => word_spec(w)?,
            },
            Some(Tok::Quoted(q)) => word_spec(q)?,
            _ => return Err(self.error()),
        };
        self.at += 1;
        Ok(spec)
    }

    /// A new role's name: PostgreSQL's `RoleId`, a `RoleSpec` that names a role.
    fn role_id(&mut self) -> Result<String> {
        match self.spec()? {
            RoleSpec::Name(n) => Ok(n),
            RoleSpec::Public => Err(reserved("public")),
            RoleSpec::CurrentUser => Err(not_a_name_here("CURRENT_USER")),
            RoleSpec::CurrentRole => Err(not_a_name_here("CURRENT_ROLE")),
            RoleSpec::SessionUser => Err(not_a_name_here("SESSION_USER")),
        }
    }

    fn spec_list(&mut self) -> Result<Vec<RoleSpec>> {
        let mut list = vec![self.spec()?];
        while self.eat_punct(',') {
            list.push(self.spec()?);
        }
        Ok(list)
    }

    /// A plain name (an identifier), as GRANT's granted roles are.
    fn name(&mut self) -> Result<String> {
        let name = match self.peek() {
            Some(Tok::Word(w)) if !w.starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
                w.clone()
            }
            Some(Tok::Quoted(q)) => q.clone(),
            _ => return Err(self.error()),
        };
        self.at += 1;
        check_name(&name)?;
        Ok(name)
    }

    /// A setting's value: a name or a string (`NonReservedWord_or_Sconst`).
    fn word_or_string(&mut self) -> Result<String> {
        let v = match self.peek() {
            Some(Tok::Word(w) | Tok::Quoted(w) | Tok::Str(w)) => w.clone(),
            _ => return Err(self.error()),
        };
        self.at += 1;
        Ok(v)
    }

    fn string(&mut self) -> Result<String> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.error()),
        }
    }

    /// A signed integer constant (CONNECTION LIMIT, SYSID).
    fn integer(&mut self) -> Result<i32> {
        match self.peek().cloned() {
            Some(Tok::Word(w)) => {
                let v = w.parse().map_err(|_| self.error())?;
                self.at += 1;
                Ok(v)
            }
            _ => Err(self.error()),
        }
    }
}

fn not_a_name_here(keyword: &str) -> SqlError {
    SqlError::new(
        SqlState::RESERVED_NAME,
        format!("{keyword} cannot be used as a role name here"),
    )
}

/// A word or quoted identifier as a `RoleSpec`: `public` is PUBLIC, `none` reserved.
fn word_spec(w: &str) -> Result<RoleSpec> {
    match w {
        "public" => Ok(RoleSpec::Public),
        "none" => Err(reserved("none")),
        _ => {
            check_name(w)?;
            Ok(RoleSpec::Name(w.to_string()))
        }
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(SqlError::new(
            SqlState::INVALID_NAME,
            "zero-length delimited identifier",
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(SqlError::new(
            SqlState::NAME_TOO_LONG,
            format!("role name \"{name}\" is longer than {MAX_NAME_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// One option of CREATE or ALTER ROLE (`create`: CREATE's too) into `o`.
fn option(p: &mut Parser, o: &mut RoleOptions, create: bool) -> Result<()> {
    let Some(Tok::Word(w)) = p.peek().cloned() else {
        return Err(p.error());
    };
    p.at += 1;
    let flag = |slot: &mut Option<bool>, v: bool| once(slot, v);
    match w.as_str() {
        "superuser" | "nosuperuser" => flag(&mut o.superuser, w == "superuser"),
        "createdb" | "nocreatedb" => flag(&mut o.createdb, w == "createdb"),
        "createrole" | "nocreaterole" => flag(&mut o.createrole, w == "createrole"),
        "inherit" | "noinherit" => flag(&mut o.inherit, w == "inherit"),
        "login" | "nologin" => flag(&mut o.login, w == "login"),
        "replication" | "noreplication" => flag(&mut o.replication, w == "replication"),
        "bypassrls" | "nobypassrls" => flag(&mut o.bypassrls, w == "bypassrls"),
        "connection" => {
            p.expect("limit")?;
            let n = p.integer()?;
            once(&mut o.connection_limit, n)
        }
        "encrypted" | "password" => {
            if w == "encrypted" {
                p.expect("password")?;
            }
            let pw = if w == "password" && p.eat("null") {
                PasswordOption::Null
            } else {
                PasswordOption::Given(p.string()?)
            };
            once(&mut o.password, pw)
        }
        "unencrypted" => Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "UNENCRYPTED PASSWORD is no longer supported",
        )
        .with_detail("Remove UNENCRYPTED to store the password in encrypted form instead.")),
        "valid" => {
            p.expect("until")?;
            let ts = p.string()?;
            once(&mut o.valid_until, ts)
        }
        "user" | "role" if create => once(&mut o.members, p.spec_list()?),
        "admin" if create => once(&mut o.admins, p.spec_list()?),
        "in" if create => {
            if !p.eat("role") {
                p.expect("group")?;
            }
            once(&mut o.in_roles, p.spec_list()?)
        }
        "sysid" if create => {
            p.integer()?;
            o.sysid = true;
            Ok(())
        }
        // CREATE's options (matched above for CREATE) are not ALTER's; ALTER ROLE r IN
        // DATABASE d SET ... is, so PostgreSQL stumbles on the word after IN.
        "in" => Err(p.error()),
        _ if is_ident(&w) && !["user", "role", "admin", "in", "sysid"].contains(&w.as_str()) => {
            Err(unrecognized(&w))
        }
        _ => {
            p.at -= 1;
            Err(p.error())
        }
    }
}

fn is_ident(w: &str) -> bool {
    w.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

fn unrecognized(w: &str) -> SqlError {
    SqlError::syntax(format!("unrecognized role option \"{w}\""))
}

fn options(p: &mut Parser, create: bool) -> Result<RoleOptions> {
    let mut o = RoleOptions::default();
    p.eat("with");
    while p.peek().is_some() {
        option(p, &mut o, create)?;
    }
    Ok(o)
}

/// A role statement, if `sql` is one: `Ok(None)` for anything else, which goes to sqlparser.
pub(crate) fn parse(sql: &str) -> Result<Option<RoleStmt>> {
    let head = leading_words(sql, 3);
    let word = |i: usize| head.get(i).map_or("", String::as_str);
    let ours = match word(0) {
        "create" | "alter" | "drop" => {
            ["role", "user", "group"].contains(&word(1)) && word(2) != "mapping"
        }
        "grant" | "revoke" => true,
        "set" => match word(1) {
            "role" | "session_authorization" => true,
            "session" | "local" => ["role", "session", "authorization"].contains(&word(2)),
            _ => false,
        },
        "reset" => ["role", "session_authorization", "session"].contains(&word(1)),
        _ => false,
    };
    if !ours {
        return Ok(None);
    }
    let toks = match tokens(sql) {
        Ok(t) => t,
        // A GRANT or REVOKE of privileges may hold what this grammar does not know.
        Err(_) if matches!(word(0), "grant" | "revoke") => return Ok(None),
        Err(e) => return Err(e),
    };
    if matches!(word(0), "grant" | "revoke") && toks.contains(&Tok::Word("on".into())) {
        return Ok(None);
    }
    let mut p = Parser { toks, at: 1 };
    let stmt = match word(0) {
        "create" => create(&mut p)?,
        "alter" => alter(&mut p)?,
        "drop" => drop(&mut p)?,
        "grant" => grant(&mut p)?,
        "revoke" => revoke(&mut p)?,
        "set" => set(&mut p)?,
        _ => reset(&mut p)?,
    };
    p.end()?;
    Ok(Some(stmt))
}

fn create(p: &mut Parser) -> Result<RoleStmt> {
    let user = p.peek_word("user");
    p.at += 1;
    let name = p.role_id()?;
    let options = options(p, true)?;
    Ok(RoleStmt::Create {
        name,
        user,
        options,
    })
}

fn alter(p: &mut Parser) -> Result<RoleStmt> {
    let group = p.peek_word("group");
    p.at += 1;
    if p.peek_word("all") {
        return Err(SqlError::unsupported("ALTER ROLE ALL ... SET"));
    }
    let at_name = p.at;
    let role = p.spec()?;
    if p.eat("rename") {
        p.expect("to")?;
        p.at = at_name;
        let name = p.role_id()?;
        p.at += 2;
        let to = p.role_id()?;
        return Ok(RoleStmt::Rename { name, to });
    }
    let in_database =
        p.peek_word("in") && matches!(p.toks.get(p.at + 1), Some(Tok::Word(w)) if w == "database");
    if p.peek_word("set") || p.peek_word("reset") || in_database {
        return Err(SqlError::unsupported(
            "ALTER ROLE ... SET and RESET (per-role settings)",
        ));
    }
    if group && (p.peek_word("add") || p.peek_word("drop")) {
        return Err(SqlError::unsupported(
            "ALTER GROUP ... ADD|DROP USER (use GRANT or REVOKE)",
        ));
    }
    let options = options(p, false)?;
    Ok(RoleStmt::Alter { role, options })
}

fn drop(p: &mut Parser) -> Result<RoleStmt> {
    p.at += 1;
    let if_exists = p.eat("if");
    if if_exists {
        p.expect("exists")?;
    }
    let roles = p.spec_list()?;
    Ok(RoleStmt::Drop { roles, if_exists })
}

/// The granted roles of GRANT and REVOKE, up to `end` (TO or FROM).
fn granted_roles(p: &mut Parser, end: &str) -> Result<Vec<String>> {
    let mut roles = Vec::new();
    loop {
        roles.push(p.name()?);
        if p.peek() == Some(&Tok::Punct('(')) {
            return Err(SqlError::new(
                SqlState::INVALID_GRANT_OPERATION,
                "column names cannot be included in GRANT/REVOKE ROLE",
            ));
        }
        if !p.eat_punct(',') {
            break;
        }
    }
    p.expect(end)?;
    Ok(roles)
}

fn granted_by(p: &mut Parser) -> Result<Option<RoleSpec>> {
    if !p.eat("granted") {
        return Ok(None);
    }
    p.expect("by")?;
    p.spec().map(Some)
}

fn grant(p: &mut Parser) -> Result<RoleStmt> {
    let roles = granted_roles(p, "to")?;
    let grantees = p.spec_list()?;
    let admin = p.eat("with");
    if admin {
        p.expect("admin")?;
        p.expect("option")?;
    }
    let granted_by = granted_by(p)?;
    Ok(RoleStmt::Grant {
        roles,
        grantees,
        admin,
        granted_by,
    })
}

fn revoke(p: &mut Parser) -> Result<RoleStmt> {
    let admin_only =
        p.peek_word("admin") && matches!(p.toks.get(p.at + 1), Some(Tok::Word(w)) if w == "option");
    if admin_only {
        p.at += 2;
        p.expect("for")?;
    }
    let roles = granted_roles(p, "from")?;
    let grantees = p.spec_list()?;
    let granted_by = granted_by(p)?;
    if !p.eat("cascade") {
        p.eat("restrict");
    }
    Ok(RoleStmt::Revoke {
        roles,
        grantees,
        admin_only,
        granted_by,
    })
}

/// SET ROLE and SET SESSION AUTHORIZATION in their keyword and parameter forms.
fn set(p: &mut Parser) -> Result<RoleStmt> {
    if p.eat("local") {
        return Err(SqlError::unsupported(
            "SET LOCAL ROLE and SET LOCAL SESSION AUTHORIZATION",
        ));
    }
    // SET SESSION (the scope, which is the default) unless it starts SESSION AUTHORIZATION.
    let scope = p.peek_word("session")
        && !matches!(p.toks.get(p.at + 1), Some(Tok::Word(w)) if w == "authorization");
    p.at += usize::from(scope);
    let authorization = if p.eat("session_authorization") {
        true
    } else if p.eat("session") {
        p.expect("authorization")?;
        true
    } else {
        p.expect("role")?;
        false
    };
    let assigned = p.eat("to") || p.eat_punct('=');
    let value = if (assigned || authorization) && p.eat("default") {
        None
    } else {
        Some(p.word_or_string()?)
    };
    Ok(if authorization {
        RoleStmt::SetSessionAuthorization {
            user: value,
            reset: false,
        }
    } else {
        // "none" in any form (a word, 'none', "none") is NONE, as check_role reads it.
        let role = value.filter(|v| v != "none");
        RoleStmt::SetRole { role, reset: false }
    })
}

fn reset(p: &mut Parser) -> Result<RoleStmt> {
    if p.eat("role") {
        return Ok(RoleStmt::SetRole {
            role: None,
            reset: true,
        });
    }
    if !p.eat("session_authorization") {
        p.expect("session")?;
        p.expect("authorization")?;
    }
    Ok(RoleStmt::SetSessionAuthorization {
        user: None,
        reset: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<RoleStmt> {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> (String, String) {
        let e = parse(s).expect_err(s);
        (e.sqlstate().to_string(), e.message().to_string())
    }

    fn name(n: &str) -> RoleSpec {
        RoleSpec::Name(n.into())
    }

    #[test]
    fn other_statements_are_not_ours() {
        for s in [
            "select 1",
            "SET search_path = public",
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "set local statement_timeout = 5",
            "GRANT SELECT ON t TO alice",
            "revoke all on table t from alice",
            "reset all",
            "create user mapping for alice server s",
            "create table role (a int)",
        ] {
            assert_eq!(p(s), None, "{s}");
        }
    }

    #[test]
    fn create_and_alter_take_postgresql_options() {
        assert_eq!(
            p("/* c */ CREATE USER Alice WITH PASSWORD 'it''s' CREATEDB CONNECTION LIMIT -1"),
            Some(RoleStmt::Create {
                name: "alice".into(),
                user: true,
                options: RoleOptions {
                    password: Some(PasswordOption::Given("it's".into())),
                    createdb: Some(true),
                    connection_limit: Some(-1),
                    ..RoleOptions::default()
                }
            })
        );
        assert_eq!(
            p(
                "create role r noinherit replication in role a, \"B\" role c admin current_user \
               valid until '2030-01-01' sysid 5 encrypted password 'x' bypassrls"
            ),
            Some(RoleStmt::Create {
                name: "r".into(),
                user: false,
                options: RoleOptions {
                    inherit: Some(false),
                    replication: Some(true),
                    in_roles: Some(vec![name("a"), name("B")]),
                    members: Some(vec![name("c")]),
                    admins: Some(vec![RoleSpec::CurrentUser]),
                    valid_until: Some("2030-01-01".into()),
                    sysid: true,
                    password: Some(PasswordOption::Given("x".into())),
                    bypassrls: Some(true),
                    ..RoleOptions::default()
                }
            })
        );
        assert_eq!(
            p("alter role \"Bob\" nologin password null"),
            Some(RoleStmt::Alter {
                role: name("Bob"),
                options: RoleOptions {
                    login: Some(false),
                    password: Some(PasswordOption::Null),
                    ..RoleOptions::default()
                }
            })
        );
        assert_eq!(
            p("ALTER USER current_user PASSWORD 'x'"),
            Some(RoleStmt::Alter {
                role: RoleSpec::CurrentUser,
                options: RoleOptions {
                    password: Some(PasswordOption::Given("x".into())),
                    ..RoleOptions::default()
                }
            })
        );
        assert_eq!(
            p("alter group g rename to h"),
            Some(RoleStmt::Rename {
                name: "g".into(),
                to: "h".into()
            })
        );
    }

    #[test]
    fn bad_role_statements_fail_as_postgresql_does() {
        let syntax = "42601".to_string();
        assert_eq!(
            err("create role x login nologin"),
            (syntax.clone(), "conflicting or redundant options".into())
        );
        assert_eq!(
            err("create role x createuser"),
            (
                syntax.clone(),
                "unrecognized role option \"createuser\"".into()
            )
        );
        assert_eq!(
            err("create role r password"),
            (syntax.clone(), "syntax error at end of input".into())
        );
        assert_eq!(
            err("alter role r in role g"),
            (syntax.clone(), "syntax error at or near \"role\"".into())
        );
        assert_eq!(err("drop role").0, syntax);
        assert_eq!(
            err("create role public"),
            ("42939".into(), "role name \"public\" is reserved".into())
        );
        assert_eq!(
            err("create role none"),
            ("42939".into(), "role name \"none\" is reserved".into())
        );
        assert_eq!(
            err("create role current_user"),
            (
                "42939".into(),
                "CURRENT_USER cannot be used as a role name here".into()
            )
        );
        assert_eq!(err("create role r unencrypted password 'x'").0, "0A000");
        assert_eq!(err("grant g(a) to r").0, "0LP01");
        assert_eq!(err("set local role r").0, "0A000");
        assert_eq!(err("alter role r set work_mem = 1").0, "0A000");
    }

    #[test]
    fn grant_revoke_and_set_parse() {
        assert_eq!(
            p("GRANT a, b TO c, session_user WITH ADMIN OPTION GRANTED BY d"),
            Some(RoleStmt::Grant {
                roles: vec!["a".into(), "b".into()],
                grantees: vec![name("c"), RoleSpec::SessionUser],
                admin: true,
                granted_by: Some(name("d")),
            })
        );
        assert_eq!(
            p("revoke admin option for a from public cascade"),
            Some(RoleStmt::Revoke {
                roles: vec!["a".into()],
                grantees: vec![RoleSpec::Public],
                admin_only: true,
                granted_by: None,
            })
        );
        let set_role = |r: Option<&str>, reset| RoleStmt::SetRole {
            role: r.map(String::from),
            reset,
        };
        assert_eq!(p("SET ROLE Alice"), Some(set_role(Some("alice"), false)));
        assert_eq!(p("set session role 'A'"), Some(set_role(Some("A"), false)));
        assert_eq!(p("set role = 'a'"), Some(set_role(Some("a"), false)));
        assert_eq!(p("set role to default"), Some(set_role(None, false)));
        assert_eq!(p("SET ROLE NONE"), Some(set_role(None, false)));
        assert_eq!(p("reset role"), Some(set_role(None, true)));
        let auth = |u: Option<&str>, reset| RoleStmt::SetSessionAuthorization {
            user: u.map(String::from),
            reset,
        };
        assert_eq!(
            p("SET SESSION AUTHORIZATION 'bob'"),
            Some(auth(Some("bob"), false))
        );
        assert_eq!(
            p("set session session authorization default"),
            Some(auth(None, false))
        );
        assert_eq!(
            p("set session_authorization to bob"),
            Some(auth(Some("bob"), false))
        );
        assert_eq!(p("RESET SESSION AUTHORIZATION"), Some(auth(None, true)));
    }
}
