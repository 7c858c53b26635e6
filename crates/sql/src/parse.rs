//! Parsing: a query string split into statements at top-level semicolons (outside quotes,
//! comments and dollar quotes), each parsed by `sqlparser` — except PostgreSQL's utility
//! commands that `sqlparser` does not know (PREPARE TRANSACTION, COMMIT/ROLLBACK PREPARED,
//! CHECKPOINT, VACUUM, COPY), which are recognized here by their leading keywords.
//!
//! ## Rules
//! - Before `sqlparser` sees a statement: its memory is estimated from its tokens (at most
//!   [`MAX_PARSE_MEMORY_BYTES`] for a query string, else 54000); its long lists of constants
//!   become one placeholder token each (`crate::literals`); the depth of the tree it would
//!   build is bounded from its tokens ([`syntax_depth`], at most [`MAX_SYNTAX_DEPTH`], else
//!   54001), since `sqlparser` builds operator chains in a loop and only its recursion is
//!   limited ([`MAX_PARSER_RECURSION`], also 54001). So every tree that leaves here can be
//!   dropped on a session's stack.
//! - `sqlparser` grows its own stack when it runs short (its `recursive` dependency); the
//!   red zone is set here ([`configure_parser_stack`]) large enough for its deepest stretch.
//! - Token spans are absolute: line 1, the column the 1-based character index of the
//!   whole query string, so that an error found later has PostgreSQL's position.

use crate::error::{Result, SqlError};
use quire_engine::SqlState;

/// A parsed statement.
#[derive(Clone, Debug)]
pub enum Statement {
    Sql(Box<sqlparser::ast::Statement>),
    PrepareTransaction(String),
    CommitPrepared(String),
    RollbackPrepared(String),
    Checkpoint,
    Vacuum(VacuumStmt),
    Copy(CopyStmt),
    /// CREATE/ALTER/DROP ROLE, GRANT/REVOKE of roles, SET ROLE and SET SESSION
    /// AUTHORIZATION ([`crate::roles`]).
    Role(crate::roles::RoleStmt),
    /// BEGIN, START TRANSACTION, SET TRANSACTION or SET SESSION CHARACTERISTICS with
    /// `[NOT] DEFERRABLE` among its modes (which `sqlparser` lacks): the statement without
    /// it, and whether DEFERRABLE.
    Deferrable(Box<sqlparser::ast::Statement>, bool),
    /// ALTER SEQUENCE (which `sqlparser` lacks).
    AlterSequence(AlterSequenceStmt),
    /// SET CONSTRAINTS {ALL | name, ...} {DEFERRED | IMMEDIATE} (which `sqlparser` lacks):
    /// the names (None for ALL), and whether DEFERRED.
    SetConstraints(Option<Vec<String>>, bool),
    /// FETCH and MOVE (`sqlparser` lacks MOVE, and FETCH without a direction).
    Fetch(FetchStmt),
    /// ALTER {TABLE | SEQUENCE | VIEW | INDEX | SCHEMA} ... OWNER TO role
    /// ([`crate::catalog::alter_owner`]).
    AlterOwner(crate::catalog::AlterOwnerStmt),
    /// ALTER TABLE ... ALTER [COLUMN] ... SET STORAGE ([`crate::catalog::set_storage`]).
    SetStorage(crate::catalog::SetStorageStmt),
    /// REINDEX (which `sqlparser` lacks).
    Reindex(ReindexStmt),
}

/// REINDEX \[(option, ...)] {INDEX | TABLE | SCHEMA | DATABASE | SYSTEM} \[CONCURRENTLY]
/// \[name].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReindexStmt {
    pub kind: ReindexKind,
    /// The object's name; DATABASE and SYSTEM may leave it out (the current database).
    pub name: Option<String>,
    pub verbose: bool,
    pub concurrently: bool,
}

/// What a REINDEX names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReindexKind {
    Index,
    Table,
    Schema,
    Database,
    System,
}

impl ReindexKind {
    /// The keyword, as PostgreSQL's messages spell it.
    pub fn keyword(self) -> &'static str {
        match self {
            ReindexKind::Index => "INDEX",
            ReindexKind::Table => "TABLE",
            ReindexKind::Schema => "SCHEMA",
            ReindexKind::Database => "DATABASE",
            ReindexKind::System => "SYSTEM",
        }
    }
}

/// FETCH [direction] [FROM | IN] cursor, or MOVE (which returns no rows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchStmt {
    pub cursor: String,
    pub count: FetchCount,
    pub is_move: bool,
}

/// How far a FETCH goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchCount {
    /// NEXT, FORWARD [n], n: this many rows forward.
    Forward(u64),
    /// ALL, FORWARD ALL.
    All,
    /// 0, FORWARD 0, RELATIVE 0: the current row again.
    Current,
    /// A direction that goes back or re-reads (PRIOR, FIRST, LAST, ABSOLUTE, RELATIVE,
    /// BACKWARD, a count of 0 or below): its words, for the error.
    Other(String),
}

/// ALTER SEQUENCE [IF EXISTS] name [options] [RESTART [[WITH] n]]: the options CREATE
/// SEQUENCE also takes (OWNED BY among them), as `sqlparser` reads them there.
#[derive(Clone, Debug)]
pub struct AlterSequenceStmt {
    pub if_exists: bool,
    pub name: String,
    pub options: Vec<sqlparser::ast::SequenceOptions>,
    pub restart: Option<Restart>,
}

/// ALTER SEQUENCE's RESTART: to the start value, or to a value given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    ToStart,
    To(i64),
}

#[derive(Clone, Debug, Default)]
pub struct VacuumStmt {
    pub verbose: bool,
    pub analyze: bool,
    pub tables: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Csv,
    /// PostgreSQL's binary COPY format (`crate::copy`'s binary section).
    Binary,
}

#[derive(Clone, Debug)]
pub struct CopyStmt {
    /// The table, empty for `COPY (query) TO`.
    pub table: String,
    /// `COPY (query) TO STDOUT`: the query (a SELECT, VALUES or WITH ... SELECT).
    pub query: Option<Box<sqlparser::ast::Statement>>,
    pub columns: Vec<String>,
    /// FROM STDIN (true) or TO STDOUT (false).
    pub from: bool,
    pub format: CopyFormat,
    pub delimiter: char,
    pub null: String,
    pub header: bool,
}

impl Statement {
    /// Whether it is a statement a failed transaction block accepts (COMMIT, ROLLBACK).
    /// Whether the statement may run in a failed block (PostgreSQL's
    /// `IsTransactionExitStmt`): COMMIT, ROLLBACK, ROLLBACK TO SAVEPOINT and PREPARE
    /// TRANSACTION.
    pub fn allowed_in_failed_block(&self) -> bool {
        self.ends_block()
            || matches!(self, Statement::PrepareTransaction(_))
            || matches!(
                self,
                Statement::Sql(s) if matches!(**s, sqlparser::ast::Statement::Rollback { savepoint: Some(_), .. })
            )
    }

    pub fn ends_block(&self) -> bool {
        matches!(
            self,
            Statement::Sql(s) if matches!(**s, sqlparser::ast::Statement::Commit { .. } | sqlparser::ast::Statement::Rollback { savepoint: None, .. })
        )
    }
}

/// Most statements one query string may hold (a bound on the work one message causes).
const MAX_STATEMENTS: usize = 10_000;

/// How deep `sqlparser` may recurse (nested parentheses, subqueries, CASE, prefix
/// operators); beyond it the statement fails with 54001, as PostgreSQL's own recursion does
/// (PostgreSQL stops nested CASE at about 2,000 levels and subqueries at 2,100 with its
/// default `max_stack_depth`). `sqlparser` grows its own stack as it recurses
/// ([`configure_parser_stack`]), so this bounds the memory that growth takes.
const MAX_PARSER_RECURSION: usize = 1_000;

/// The deepest syntax tree a statement may have, in the levels [`syntax_depth`] counts (an
/// upper bound of the real depth). `sqlparser` builds chains of infix operators (`1+1+...`,
/// `a AND b AND ...`, casts, `IS NULL`) and of UNIONs in a loop, left-deep, so its recursion
/// limit does not bound them; dropping such a tree recurses once per level, and so do the
/// binder's walks. Beyond this bound the statement fails with 54001 before it is parsed.
/// 200,000 levels: 100,000 `AND`ed or `OR`ed comparisons (which PostgreSQL accepts) pass;
/// dropping the deepest tree fits a session's stack ([`crate::stack::SESSION_STACK_BYTES`]).
/// On a thread with less stack left, the bound is what that stack can drop
/// ([`syntax_depth_limit`]).
pub(crate) const MAX_SYNTAX_DEPTH: usize = 200_000;

/// Stack a level of a `sqlparser` tree takes to drop, at most (measured: 96 bytes in a
/// debug build, 64 in a release build, for a chain of operators; a parenthesized level,
/// which counts [`GROUP_LEVELS`], at most 530).
const DROP_BYTES_PER_LEVEL: usize = 128;

/// The deepest tree a statement parsed on this thread may have: [`MAX_SYNTAX_DEPTH`], or
/// less on a thread whose stack left (less the slop) cannot drop that deep a tree. The
/// tree is dropped where it was parsed or nearer the thread's start.
fn syntax_depth_limit() -> usize {
    let droppable = stacker::remaining_stack().map_or(MAX_SYNTAX_DEPTH, |left| {
        left.saturating_sub(crate::stack::STACK_SLOP_BYTES) / DROP_BYTES_PER_LEVEL
    });
    MAX_SYNTAX_DEPTH.min(droppable)
}

/// `sqlparser` grows its stack onto the heap when fewer than this many bytes are left
/// (its `recursive` default is 128 KiB, less than some of its parse paths use between two
/// checks in a debug build, which then overflow): the slop of [`crate::stack`].
const PARSER_RED_ZONE_BYTES: usize = crate::stack::STACK_SLOP_BYTES;
/// The size of each stack segment `sqlparser` grows onto.
const PARSER_STACK_SEGMENT_BYTES: usize = 4 << 20;

/// Sets how `sqlparser`'s recursion (parsing, and formatting a tree as text) grows its
/// stack: a process-wide setting of its `recursive` dependency, set once.
fn configure_parser_stack() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        recursive::set_minimum_stack_size(PARSER_RED_ZONE_BYTES);
        recursive::set_stack_allocation_size(PARSER_STACK_SEGMENT_BYTES);
    });
}

/// Parses SQL text into statements (42601 on a syntax error). Never panics on any input,
/// and never builds a tree deeper than [`MAX_SYNTAX_DEPTH`] or recurses deeper than
/// [`MAX_PARSER_RECURSION`] (54001 instead). Positions in the trees (their spans) are the
/// 1-based character indexes of the whole of `sql`, as column numbers of line 1, so that an
/// error found later can report PostgreSQL's position.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    configure_parser_stack();
    let pieces = split(sql)?;
    if pieces.len() > MAX_STATEMENTS {
        return Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            format!("a query string may hold at most {MAX_STATEMENTS} statements"),
        ));
    }
    let mut out = Vec::new();
    // Characters of `sql` before the start of the piece at byte `at`, counted once.
    let mut at = 0;
    let mut chars_before = 0;
    let mut memory = ParseMemory::default();
    for p in pieces {
        let start = (p.as_ptr() as usize).saturating_sub(sql.as_ptr() as usize);
        chars_before += sql.get(at..start).map_or(0, |s| s.chars().count());
        at = start;
        if let Some((query, rest)) = copy_query(p) {
            let offset = (query.as_ptr() as usize).saturating_sub(p.as_ptr() as usize);
            let query_at = chars_before + p.get(..offset).map_or(0, |s| s.chars().count());
            let mut parsed = parse_piece(sql, query, query_at, &mut memory)?;
            let (Some(q), true) = (parsed.pop(), parsed.is_empty()) else {
                return Err(SqlError::syntax("COPY (query) takes one query"));
            };
            if !matches!(q, sqlparser::ast::Statement::Query(_)) {
                return Err(SqlError::unsupported(
                    "COPY of a statement other than a query",
                ));
            }
            let rest = words(rest);
            let mut c = copy_options(copy_stmt(String::new()), &rest)?;
            if c.from {
                let word = rest.first().map_or("FROM", String::as_str);
                return Err(SqlError::syntax(format!(
                    "syntax error at or near \"{word}\""
                )));
            }
            c.query = Some(Box::new(q));
            out.push(Statement::Copy(c));
            continue;
        }
        if let Some(s) = utility(p)? {
            out.push(s);
            continue;
        }
        if let Some(rest) = without_sequence_name(p)? {
            let parsed = parse_piece(&rest, &rest, chars_before, &mut memory)?;
            out.extend(parsed.into_iter().map(|s| Statement::Sql(Box::new(s))));
            continue;
        }
        if let Some((rest, deferrable)) = without_deferrable(p) {
            let mut parsed = parse_piece(&rest, &rest, chars_before, &mut memory)?;
            if let (Some(s), 1) = (parsed.pop(), parsed.len() + 1) {
                out.push(Statement::Deferrable(Box::new(s), deferrable));
                continue;
            }
            return Err(SqlError::syntax("syntax error at or near \"DEFERRABLE\""));
        }
        let parsed = parse_piece(sql, p, chars_before, &mut memory)?;
        out.extend(parsed.into_iter().map(|s| Statement::Sql(Box::new(s))));
    }
    Ok(out)
}

/// Most memory the trees of one query string may take, estimated from its text before
/// it is parsed ([`ParseMemory`]); beyond it the query string fails with 54000.
pub(crate) const MAX_PARSE_MEMORY_BYTES: u64 = 1 << 30;

/// Memory `sqlparser` takes per token, at most, for its token (88 bytes) and its share of
/// the tree: measured 508 bytes a token for a select list `select 1,1,...`, 371 for
/// `in (1+0,1+0,...)`, 373 for a row `values (1,1,...)`, 195 for CASE's WHENs.
const TOKEN_BYTES: u64 = 560;
/// A whitespace token (each space or newline is one): the token alone.
const SPACE_TOKEN_BYTES: u64 = 96;
/// Bytes a word, string or comment costs per byte of its text (in the token, then in the
/// tree).
const TEXT_BYTES_PER_BYTE: u64 = 2;
/// Memory a list of constants kept as text ([`crate::literals`]) takes per byte of text,
/// at most: its text again, and a bound expression of 48 bytes for each constant (24 per
/// byte of `1,`); measured 26 for `in (1,1,...)`, 28 for `values (1),(2),...` (of 20 MB).
const LIST_BYTES_PER_BYTE: u64 = 32;

/// The memory the statements of one query string will take once parsed, estimated from
/// their text before each is tokenized ([`MAX_PARSE_MEMORY_BYTES`]).
#[derive(Default)]
struct ParseMemory {
    bytes: u64,
}

impl ParseMemory {
    /// Counts the statement `piece`, its `lists` of constants kept as text; 54000 past the
    /// limit.
    fn add(&mut self, piece: &str, lists: &[(usize, usize)]) -> Result<()> {
        self.bytes = self.bytes.saturating_add(parse_cost(piece, lists));
        if self.bytes > MAX_PARSE_MEMORY_BYTES {
            return Err(SqlError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "statement too large: parsing it would take about {} MB of memory, more than {} MB",
                    self.bytes >> 20,
                    MAX_PARSE_MEMORY_BYTES >> 20
                ),
            )
            .with_hint(
                "Send long lists as plain constants (which take less), as an array parameter, or with COPY.",
            ));
        }
        Ok(())
    }
}

/// An upper bound of the memory parsing `piece` takes: its tokens, counted as `sqlparser`
/// would make them (every whitespace character one, a word, number, string or comment
/// one, any other character one at most), and its lists of constants kept as text.
fn parse_cost(piece: &str, lists: &[(usize, usize)]) -> u64 {
    let b = piece.as_bytes();
    let mut lists = lists.iter().peekable();
    let mut cost = 0u64;
    let mut i = 0;
    while i < b.len() {
        if let Some(&&(start, end)) = lists.peek() {
            if i >= start {
                cost = cost.saturating_add((end - start) as u64 * LIST_BYTES_PER_BYTE);
                i = end;
                lists.next();
                continue;
            }
        }
        let end = match b[i] {
            b'\'' | b'"' => skip_quoted(b, i, b[i]).unwrap_or(b.len()),
            b'-' if b.get(i + 1) == Some(&b'-') => {
                i + b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .unwrap_or(b.len() - i)
            }
            b'/' if b.get(i + 1) == Some(&b'*') => skip_block_comment(b, i).unwrap_or(b.len()),
            b'$' => skip_dollar(piece, i),
            c if is_word_byte(c) => i + b[i..].iter().take_while(|&&c| is_word_byte(c)).count(),
            _ => i + 1,
        };
        let end = end.max(i + 1);
        let token = if b[i].is_ascii_whitespace() {
            SPACE_TOKEN_BYTES
        } else if end - i > 1 {
            TOKEN_BYTES.saturating_add((end - i) as u64 * TEXT_BYTES_PER_BYTE)
        } else {
            TOKEN_BYTES
        };
        cost = cost.saturating_add(token);
        i = end;
    }
    cost
}

/// One statement's text, `chars_before` characters into `sql`.
fn parse_piece(
    sql: &str,
    piece: &str,
    chars_before: usize,
    memory: &mut ParseMemory,
) -> Result<Vec<sqlparser::ast::Statement>> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    let lists = constant_lists(piece);
    memory.add(piece, &lists)?;
    let tokens = tokenize_with_lists(piece, chars_before, &lists)?;
    if syntax_depth(&tokens) > syntax_depth_limit() {
        return Err(crate::stack::too_deep());
    }
    let table_statement = tokens
        .iter()
        .find(|t| !matches!(t.token, sqlparser::tokenizer::Token::Whitespace(_)))
        .is_some_and(|t| {
            matches!(&t.token, sqlparser::tokenizer::Token::Word(w)
                if w.keyword == sqlparser::keywords::Keyword::TABLE)
        });
    let mut tokens = tokens;
    if piece.len() >= 7
        && piece
            .as_bytes()
            .windows(7)
            .any(|w| w.eq_ignore_ascii_case(b"similar"))
    {
        substring_similar_as_for(&mut tokens);
    }
    let ctas_names = take_ctas_column_names(&mut tokens);
    let mut parser = sqlparser::parser::Parser::new(&dialect)
        .with_recursion_limit(MAX_PARSER_RECURSION)
        .with_tokens_with_locations(tokens);
    if table_statement {
        // `TABLE name [ORDER BY ...]`, a query `sqlparser` reads only inside one.
        return table_query(&mut parser).map_err(|e| parser_error(sql, &e));
    }
    let mut statements = parser
        .parse_statements()
        .map_err(|e| parser_error(sql, &e))?;
    if let (Some(names), [sqlparser::ast::Statement::CreateTable(ct)]) =
        (ctas_names, statements.as_mut_slice())
    {
        ct.columns = names
            .into_iter()
            .map(|name| sqlparser::ast::ColumnDef {
                name,
                data_type: sqlparser::ast::DataType::Unspecified,
                options: Vec::new(),
            })
            .collect();
    }
    Ok(statements)
}

/// `SUBSTRING(s SIMILAR p ESCAPE e)`, which `sqlparser` does not read, as the
/// `SUBSTRING(s FROM p FOR e)` it is the same as (gram.y makes both `substring(s, p, e)`).
fn substring_similar_as_for(tokens: &mut [sqlparser::tokenizer::TokenWithSpan]) {
    use sqlparser::keywords::Keyword as K;
    use sqlparser::tokenizer::Token;
    let is_word =
        |t: &Token, k: K| matches!(t, Token::Word(w) if w.keyword == k && w.quote_style.is_none());
    // The paren depth of each open `substring(` call, innermost last, and whether its
    // SIMILAR was met (then its ESCAPE is the third argument).
    let mut calls: Vec<(usize, bool)> = Vec::new();
    let mut depth = 0usize;
    let mut after_substring = false;
    for i in 0..tokens.len() {
        match &tokens[i].token {
            Token::Whitespace(_) => continue,
            Token::LParen => {
                depth += 1;
                if after_substring {
                    calls.push((depth, false));
                }
            }
            Token::RParen => {
                if calls.last().is_some_and(|c| c.0 == depth) {
                    calls.pop();
                }
                depth = depth.saturating_sub(1);
            }
            t if calls.last().is_some_and(|c| c.0 == depth) && is_word(t, K::SIMILAR) => {
                let next = tokens[i + 1..]
                    .iter()
                    .find(|t| !matches!(t.token, Token::Whitespace(_)));
                if !next.is_some_and(|n| is_word(&n.token, K::TO)) {
                    tokens[i].token = Token::make_keyword("FROM");
                    if let Some(c) = calls.last_mut() {
                        c.1 = true;
                    }
                }
            }
            t if calls.last() == Some(&(depth, true)) && is_word(t, K::ESCAPE) => {
                tokens[i].token = Token::make_keyword("FOR");
            }
            _ => {}
        }
        after_substring = is_word(&tokens[i].token, K::SUBSTRING);
    }
}

/// `CREATE [TEMP | UNLOGGED] TABLE [IF NOT EXISTS] name (a, b) AS ...`: CREATE TABLE AS with
/// its columns named, which `sqlparser` reads only with types. The names are taken out of
/// `tokens` (the statement then reads as CREATE TABLE AS without them) and returned.
fn take_ctas_column_names(
    tokens: &mut Vec<sqlparser::tokenizer::TokenWithSpan>,
) -> Option<Vec<sqlparser::ast::Ident>> {
    use sqlparser::keywords::Keyword as K;
    use sqlparser::tokenizer::Token;
    let first = tokens
        .iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)));
    if !matches!(first, Some(t) if matches!(&t.token, Token::Word(w) if w.keyword == K::CREATE)) {
        return None;
    }
    let real: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let token = |k: usize| real.get(k).map(|&i| &tokens[i].token);
    let keyword = |k: usize| match token(k) {
        Some(Token::Word(w)) => Some(w.keyword),
        _ => None,
    };
    if keyword(0) != Some(K::CREATE) {
        return None;
    }
    let mut k = 1;
    while matches!(
        keyword(k),
        Some(K::GLOBAL | K::LOCAL | K::TEMP | K::TEMPORARY | K::UNLOGGED)
    ) {
        k += 1;
    }
    if keyword(k) != Some(K::TABLE) {
        return None;
    }
    k += 1;
    if keyword(k) == Some(K::IF) {
        k += 3;
    }
    // The table's name: words joined by dots.
    k += 1;
    while token(k) == Some(&Token::Period) {
        k += 2;
    }
    if token(k) != Some(&Token::LParen) {
        return None;
    }
    let open = k;
    let mut names = Vec::new();
    loop {
        let Some(Token::Word(w)) = token(k + 1) else {
            return None;
        };
        names.push(w.clone().into_ident(tokens[real[k + 1]].span));
        k += 2;
        match token(k) {
            Some(Token::Comma) => {}
            Some(Token::RParen) => break,
            _ => return None,
        }
    }
    if keyword(k + 1) != Some(K::AS) {
        return None;
    }
    tokens.drain(real[open]..=real[k]);
    Some(names)
}

/// A statement that begins with `TABLE`: a query, then an optional `;`.
fn table_query(
    parser: &mut sqlparser::parser::Parser,
) -> std::result::Result<Vec<sqlparser::ast::Statement>, sqlparser::parser::ParserError> {
    let query = parser.parse_query()?;
    let _ = parser.consume_token(&sqlparser::tokenizer::Token::SemiColon);
    parser.expect_token(&sqlparser::tokenizer::Token::EOF)?;
    Ok(vec![sqlparser::ast::Statement::Query(query)])
}

/// Parses a type's name as SQL writes it (`numeric(7,4)`, `int4[]`, `timestamp with time
/// zone`): PostgreSQL's `parseTypeString`, for a type named in a text value. 42601 on a
/// syntax error, 42704 for no such type.
pub(crate) fn type_name(sql: &str) -> Result<crate::types::SqlType> {
    let mut parser = bounded_parser(sql)?;
    let ty = parser
        .parse_data_type()
        .map_err(|e| parser_error(sql, &e))?;
    parser
        .expect_token(&sqlparser::tokenizer::Token::EOF)
        .map_err(|e| parser_error(sql, &e))?;
    crate::types::SqlType::from_ast(&ty)
}

/// Parses one SQL expression (a column's stored DEFAULT), 42601 on a syntax error, under
/// the bounds of [`parse`].
pub(crate) fn expression(sql: &str) -> Result<sqlparser::ast::Expr> {
    bounded_parser(sql)?
        .parse_expr()
        .map_err(|e| parser_error(sql, &e))
}

/// A parser over `sql`'s tokens under [`parse`]'s bounds (stack, nesting depth, recursion).
fn bounded_parser(sql: &str) -> Result<sqlparser::parser::Parser<'static>> {
    static DIALECT: sqlparser::dialect::PostgreSqlDialect =
        sqlparser::dialect::PostgreSqlDialect {};
    configure_parser_stack();
    let tokens = tokenize(sql, 0)?;
    if syntax_depth(&tokens) > syntax_depth_limit() {
        return Err(crate::stack::too_deep());
    }
    Ok(sqlparser::parser::Parser::new(&DIALECT)
        .with_recursion_limit(MAX_PARSER_RECURSION)
        .with_tokens_with_locations(tokens))
}

/// The tokens of `piece` (see [`tokenize_into`]), each of its `lists` of constants (byte
/// ranges, in order; [`constant_lists`]) one placeholder token holding its text
/// ([`crate::literals`]).
fn tokenize_with_lists(
    piece: &str,
    chars_before: usize,
    lists: &[(usize, usize)],
) -> Result<Vec<sqlparser::tokenizer::TokenWithSpan>> {
    use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan};
    let mut tokens = Vec::new();
    let mut at = 0;
    let mut chars_at = chars_before;
    for &(start, end) in lists {
        let before = &piece[at..start];
        tokenize_into(before, chars_at, &mut tokens)?;
        chars_at += before.chars().count();
        let list = &piece[start..end];
        let list_chars = list.chars().count();
        let column = |c: usize| Location {
            line: 1,
            column: c as u64 + 1,
        };
        tokens.push(TokenWithSpan {
            token: Token::Placeholder(crate::literals::placeholder(list)),
            span: Span::new(column(chars_at), column(chars_at + list_chars)),
        });
        chars_at += list_chars;
        at = end;
    }
    tokenize_into(&piece[at..], chars_at, &mut tokens)?;
    Ok(tokens)
}

/// The tokens of `piece` (a part of the query string `chars_before` characters in), their
/// spans made absolute: line 1, the column the 1-based character index in the query string.
fn tokenize(piece: &str, chars_before: usize) -> Result<Vec<sqlparser::tokenizer::TokenWithSpan>> {
    let mut tokens = Vec::new();
    tokenize_into(piece, chars_before, &mut tokens)?;
    Ok(tokens)
}

/// [`tokenize`], appending to `tokens`.
fn tokenize_into(
    piece: &str,
    chars_before: usize,
    tokens: &mut Vec<sqlparser::tokenizer::TokenWithSpan>,
) -> Result<()> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    let mut cursor = LineCursor::new(piece, chars_before);
    let r = sqlparser::tokenizer::Tokenizer::new(&dialect, piece)
        .with_unescape(true)
        .tokenize_with_location_into_buf_with_mapper(tokens, |mut t| {
            t.span.start = cursor.absolute(t.span.start);
            t.span.end = cursor.absolute(t.span.end);
            t
        });
    match r {
        Ok(()) => Ok(()),
        Err(e) => {
            let at = cursor.absolute(e.location);
            let mut err = SqlError::syntax(e.message.clone());
            if at.line != 0 {
                err = err.with_position(usize::try_from(at.column).unwrap_or(usize::MAX));
            }
            Err(err)
        }
    }
}

/// Converts the (line, column) locations of a piece, met in increasing order, into
/// absolute character indexes (see [`tokenize`]).
struct LineCursor<'a> {
    chars: std::str::Chars<'a>,
    /// The piece's line the cursor is on (1-based) and the characters before its start.
    line: u64,
    line_start: u64,
    /// Characters of the piece consumed so far.
    consumed: u64,
    /// Characters of the whole text before the piece.
    base: u64,
}

impl<'a> LineCursor<'a> {
    fn new(piece: &'a str, chars_before: usize) -> Self {
        LineCursor {
            chars: piece.chars(),
            line: 1,
            line_start: 0,
            consumed: 0,
            base: chars_before as u64,
        }
    }

    fn absolute(&mut self, loc: sqlparser::tokenizer::Location) -> sqlparser::tokenizer::Location {
        if loc.line == 0 {
            return loc; // an empty span
        }
        while self.line < loc.line {
            match self.chars.next() {
                Some('\n') => {
                    self.consumed += 1;
                    self.line += 1;
                    self.line_start = self.consumed;
                }
                Some(_) => self.consumed += 1,
                None => break,
            }
        }
        sqlparser::tokenizer::Location {
            line: 1,
            column: self.base + self.line_start + loc.column,
        }
    }
}

/// An upper bound of the depth of the tree `sqlparser` builds from `tokens`, in levels of
/// nesting (each costs under 128 bytes of stack to drop; see
/// [`crate::stack::SESSION_STACK_BYTES`]). Computed in one pass, without recursion:
///
/// - Each parenthesis, bracket, brace and CASE ... END opens a group that adds
///   [`GROUP_LEVELS`] to its own depth (the tree's nodes between an expression and a
///   parenthesized one: a subquery's query, body, select, item; a function's arguments).
/// - Inside a group, commas (and a CASE's WHEN, THEN and ELSE) separate items no operator
///   chain spans: the group's depth is that of its deepest item. So do UNION, EXCEPT and
///   INTERSECT, each of which adds one level to the whole group (their chain is left-deep).
/// - In an item, each AND, OR and XOR adds one level, and splits the item into operands
///   that no other operator spans (but BETWEEN's own AND, which counts as an operator):
///   the item's depth is the number of those plus its deepest operand.
/// - An operand's depth is the number of its operators (every token that is neither a
///   literal, nor a name, nor punctuation: symbols and keywords) plus its deepest group.
///
/// The bound is what a left-deep chain of `sqlparser`'s infix loop can build: every node
/// of such a chain consumes one operator token.
pub(crate) fn syntax_depth(tokens: &[sqlparser::tokenizer::TokenWithSpan]) -> usize {
    let mut groups = vec![DepthGroup::new(GroupKind::Root)];
    for t in tokens {
        depth_step(&mut groups, &t.token);
    }
    while groups.len() > 1 {
        close_group(&mut groups);
    }
    groups.pop().map_or(0, |g| g.depth())
}

/// Levels each group adds to the depth of what it holds (see [`syntax_depth`]): measured,
/// a nested subquery costs 530 bytes of stack to drop, a function call 400, a CASE 240 (in
/// a debug build), all under 8 levels of 128 bytes.
const GROUP_LEVELS: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum GroupKind {
    Root,
    Paren,
    Bracket,
    Brace,
    Case,
}

/// One open group of [`syntax_depth`]'s pass.
struct DepthGroup {
    kind: GroupKind,
    /// UNION, EXCEPT, INTERSECT seen in the group.
    set_ops: usize,
    /// The deepest item finished.
    deepest_item: usize,
    /// The current item: its ANDs and ORs, its deepest finished operand, and the current
    /// operand's operators and deepest group.
    logic: usize,
    deepest_operand: usize,
    operators: usize,
    deepest_child: usize,
    /// BETWEENs of the current operand still waiting for their AND.
    betweens: usize,
}

impl DepthGroup {
    fn new(kind: GroupKind) -> Self {
        DepthGroup {
            kind,
            set_ops: 0,
            deepest_item: 0,
            logic: 0,
            deepest_operand: 0,
            operators: 0,
            deepest_child: 0,
            betweens: 0,
        }
    }

    fn end_operand(&mut self) {
        let operand = self.operators.saturating_add(self.deepest_child);
        self.deepest_operand = self.deepest_operand.max(operand);
        self.operators = 0;
        self.deepest_child = 0;
        self.betweens = 0;
    }

    fn end_item(&mut self) {
        self.end_operand();
        let item = self.logic.saturating_add(self.deepest_operand);
        self.deepest_item = self.deepest_item.max(item);
        self.logic = 0;
        self.deepest_operand = 0;
    }

    /// The group's depth so far, as if it ended here.
    fn depth(&self) -> usize {
        let operand = self.operators.saturating_add(self.deepest_child);
        let item = self.logic.saturating_add(self.deepest_operand.max(operand));
        GROUP_LEVELS
            .saturating_add(self.set_ops)
            .saturating_add(self.deepest_item.max(item))
    }
}

/// Closes the innermost group, its depth going to the operand of the group around it.
fn close_group(groups: &mut Vec<DepthGroup>) {
    debug_assert!(groups.len() > 1, "the root group never closes");
    if let Some(g) = groups.pop() {
        let depth = g.depth();
        if let Some(outer) = groups.last_mut() {
            outer.deepest_child = outer.deepest_child.max(depth);
        }
    }
}

/// Closes groups up to and including the innermost one of `kind`; a closing token that
/// opened nothing (a syntax error `sqlparser` reports) counts as an operator.
fn close_groups(groups: &mut Vec<DepthGroup>, kind: GroupKind) {
    if !groups.iter().any(|g| g.kind == kind) {
        if let Some(g) = groups.last_mut() {
            g.operators = g.operators.saturating_add(1);
        }
        return;
    }
    while let Some(top) = groups.last().map(|g| g.kind) {
        close_group(groups);
        if top == kind {
            return;
        }
    }
}

fn depth_step(groups: &mut Vec<DepthGroup>, token: &sqlparser::tokenizer::Token) {
    use sqlparser::keywords::Keyword as K;
    use sqlparser::tokenizer::Token as T;
    let open = |groups: &mut Vec<DepthGroup>, kind| {
        if let Some(g) = groups.last_mut() {
            g.operators = g.operators.saturating_add(1);
        }
        groups.push(DepthGroup::new(kind));
    };
    match token {
        T::Whitespace(_) | T::EOF => {}
        T::LParen => open(groups, GroupKind::Paren),
        T::LBracket => open(groups, GroupKind::Bracket),
        T::LBrace => open(groups, GroupKind::Brace),
        T::RParen => close_groups(groups, GroupKind::Paren),
        T::RBracket => close_groups(groups, GroupKind::Bracket),
        T::RBrace => close_groups(groups, GroupKind::Brace),
        T::Word(w) if w.quote_style.is_none() && w.keyword == K::CASE => {
            open(groups, GroupKind::Case);
        }
        T::Word(w) if w.quote_style.is_none() && w.keyword == K::END => {
            if groups.last().is_some_and(|g| g.kind == GroupKind::Case) {
                close_group(groups);
            } else if let Some(g) = groups.last_mut() {
                g.operators = g.operators.saturating_add(1);
            }
        }
        _ => {
            if let Some(g) = groups.last_mut() {
                depth_step_in(g, token);
            }
        }
    }
}

/// A token that neither opens nor closes a group.
fn depth_step_in(g: &mut DepthGroup, token: &sqlparser::tokenizer::Token) {
    use sqlparser::keywords::Keyword as K;
    use sqlparser::tokenizer::Token as T;
    match token {
        T::Comma | T::SemiColon => g.end_item(),
        T::Word(w) if w.quote_style.is_some() || w.keyword == K::NoKeyword => {}
        T::Word(w) => match w.keyword {
            K::UNION | K::EXCEPT | K::INTERSECT | K::MINUS => {
                g.end_item();
                g.set_ops = g.set_ops.saturating_add(1);
            }
            K::WHEN | K::THEN | K::ELSE if g.kind == GroupKind::Case => {
                g.operators = g.operators.saturating_add(1);
                g.end_item();
            }
            K::AND if g.betweens > 0 => {
                g.betweens -= 1;
                g.operators = g.operators.saturating_add(1);
            }
            K::AND | K::OR | K::XOR => {
                g.end_operand();
                g.logic = g.logic.saturating_add(1);
            }
            K::BETWEEN => {
                g.betweens += 1;
                g.operators = g.operators.saturating_add(1);
            }
            _ => g.operators = g.operators.saturating_add(1),
        },
        T::Number(..)
        | T::Char(_)
        | T::SingleQuotedString(_)
        | T::DoubleQuotedString(_)
        | T::TripleSingleQuotedString(_)
        | T::TripleDoubleQuotedString(_)
        | T::DollarQuotedString(_)
        | T::SingleQuotedByteStringLiteral(_)
        | T::DoubleQuotedByteStringLiteral(_)
        | T::NationalStringLiteral(_)
        | T::EscapedStringLiteral(_)
        | T::UnicodeStringLiteral(_)
        | T::HexStringLiteral(_)
        | T::Placeholder(_) => {}
        _ => g.operators = g.operators.saturating_add(1),
    }
}

/// `sqlparser`'s error as PostgreSQL words it: `syntax error at or near "Y"` (or `at end of
/// input`) with the position of `Y` in the whole query string (the absolute column of the
/// token spans, see [`tokenize`]); `sqlparser`'s own words become the detail. Its recursion
/// limit is PostgreSQL's 54001.
fn parser_error(sql: &str, e: &sqlparser::parser::ParserError) -> SqlError {
    use sqlparser::parser::ParserError as P;
    let text = match e {
        P::RecursionLimitExceeded => return crate::stack::too_deep(),
        P::TokenizerError(t) | P::ParserError(t) => t.as_str(),
    };
    let (what, location) = match text.rsplit_once(" at Line: ") {
        Some((w, l)) => (w, Some(l)),
        None => (text, None),
    };
    let found = what.rsplit_once("found: ").map(|(_, f)| f.trim());
    let message = match found {
        Some("EOF") => "syntax error at end of input".to_string(),
        Some(token) => format!("syntax error at or near \"{token}\""),
        None => return SqlError::syntax(text),
    };
    let e = SqlError::syntax(message).with_detail(what);
    let position = match (found, location.and_then(line_column)) {
        (Some("EOF"), _) => Some(sql.chars().count() + 1),
        (_, Some((1, column))) => Some(column),
        _ => None,
    };
    match position {
        Some(p) => e.with_position(p),
        None => e,
    }
}

/// `1, Column: 8` → (1, 8).
fn line_column(location: &str) -> Option<(usize, usize)> {
    let (line, column) = location.split_once(", Column: ")?;
    Some((line.trim().parse().ok()?, column.trim().parse().ok()?))
}

/// The lists of constants of `piece` kept as text ([`crate::literals`]): byte ranges, in
/// order, of the constants of an `IN (...)` and of the rows after a `VALUES`, found
/// outside quotes, comments and dollar quotes.
fn constant_lists(piece: &str) -> Vec<(usize, usize)> {
    let b = piece.as_bytes();
    let mut lists = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' => i = skip_quoted(b, i, b[i]).unwrap_or(b.len()),
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_block_comment(b, i).unwrap_or(b.len()),
            b'$' => i = skip_dollar(piece, i),
            b'(' if word_before(piece, i).eq_ignore_ascii_case("in") => {
                match crate::literals::in_list_at(&piece[i + 1..]) {
                    Some(len) => {
                        lists.push((i + 1, i + 1 + len));
                        i += 1 + len;
                    }
                    None => i += 1,
                }
            }
            c if c.is_ascii_alphabetic() && (i == 0 || !is_word_byte(b[i - 1])) => {
                let end = i + b[i..].iter().take_while(|&&c| is_word_byte(c)).count();
                let open = end + piece[end..].len() - piece[end..].trim_start().len();
                if piece[i..end].eq_ignore_ascii_case("values") && b.get(open) == Some(&b'(') {
                    if let Some(len) = crate::literals::values_rows_at(&piece[open + 1..]) {
                        lists.push((open + 1, open + 1 + len));
                        i = open + 1 + len;
                        continue;
                    }
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    lists
}

/// Letters, digits, `_`, `$` and the bytes of non-ASCII characters continue a word.
fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// The word just before byte `i` of `s` (spaces between them skipped).
fn word_before(s: &str, i: usize) -> &str {
    let head = s[..i].trim_end();
    let start = head
        .bytes()
        .rposition(|c| !is_word_byte(c))
        .map_or(0, |p| p + 1);
    &head[start..]
}

/// The statements of `sql`: non-empty pieces between top-level semicolons.
fn split(sql: &str) -> Result<Vec<&str>> {
    let b = sql.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' => i = skip_quoted(b, i, b[i])?,
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_block_comment(b, i)?,
            b'$' => i = skip_dollar(sql, i),
            b';' => {
                pieces.push(&sql[start..i]);
                start = i + 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    pieces.push(&sql[start..]);
    Ok(pieces.into_iter().filter(|p| !is_blank(p)).collect())
}

/// Whether a piece holds only whitespace and comments.
fn is_blank(p: &str) -> bool {
    let mut rest = p.trim_start();
    loop {
        if rest.is_empty() {
            return true;
        }
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, r)| r).trim_start();
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, r)| r).trim_start();
        } else {
            return false;
        }
    }
}

fn unterminated(what: &str) -> SqlError {
    SqlError::syntax(format!("unterminated {what}"))
}

/// The index after a quoted string or identifier starting at `i` (doubled quotes escape).
fn skip_quoted(b: &[u8], mut i: usize, q: u8) -> Result<usize> {
    i += 1;
    while i < b.len() {
        if b[i] == q {
            if b.get(i + 1) == Some(&q) {
                i += 2;
                continue;
            }
            return Ok(i + 1);
        }
        if b[i] == b'\\' && q == b'\'' && i > 0 {
            // E'...' strings escape with a backslash; in standard strings a backslash is
            // an ordinary character, and skipping it does no harm unless it ends the
            // string, which the check below covers.
            if b.get(i + 1) == Some(&q) && escape_string_before(b, i) {
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    Err(unterminated("quoted string"))
}

/// Whether the string containing position `i` is an E'...' string.
fn escape_string_before(b: &[u8], i: usize) -> bool {
    let mut j = i;
    while j > 0 && b[j] != b'\'' {
        j -= 1;
    }
    j > 0 && matches!(b[j - 1], b'E' | b'e')
}

fn skip_block_comment(b: &[u8], mut i: usize) -> Result<usize> {
    let mut depth = 0usize;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return Ok(i);
            }
        } else {
            i += 1;
        }
    }
    Err(unterminated("/* comment"))
}

/// After a `$tag$ ... $tag$` string starting at `i`, or `i + 1` if `$` starts none (a
/// parameter such as `$1`).
fn skip_dollar(sql: &str, i: usize) -> usize {
    let rest = &sql[i + 1..];
    let tag_len = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let tag = &rest[..tag_len];
    if !rest[tag_len..].starts_with('$') || tag.starts_with(|c: char| c.is_ascii_digit()) {
        return i + 1;
    }
    let delim = format!("${tag}$");
    let body = i + delim.len();
    match sql[body..].find(&delim) {
        Some(end) => body + end + delim.len(),
        None => sql.len(),
    }
}

/// A transaction statement with `[NOT] DEFERRABLE` among its modes: its text without the
/// last such mode (and a comma that separated it), and whether DEFERRABLE. `None` for any
/// other statement.
fn without_deferrable(p: &str) -> Option<(String, bool)> {
    let head = p.trim_start().get(..5)?;
    if !["begin", "start", "set t", "set s"]
        .iter()
        .any(|k| head.eq_ignore_ascii_case(k))
    {
        return None;
    }
    let w = words(p.trim_end().trim_end_matches(';'));
    let at = w
        .iter()
        .rposition(|x| x.eq_ignore_ascii_case("deferrable"))?;
    let starts = kw(w.first(), "begin")
        || (kw(w.first(), "start") && kw(w.get(1), "transaction"))
        || (kw(w.first(), "set") && kw(w.get(1), "transaction"))
        || (kw(w.first(), "set") && kw(w.get(1), "session") && kw(w.get(2), "characteristics"));
    if !starts || w.iter().any(|x| x.starts_with('\'') || x.starts_with('"')) {
        return None;
    }
    let not = at > 0 && kw(w.get(at - 1), "not");
    let from = if not { at - 1 } else { at };
    let mut kept: Vec<&String> = w[..from].iter().chain(&w[at + 1..]).collect();
    // The comma before the mode, or else the one after it.
    if from > 0 && w.get(from - 1).is_some_and(|x| x == ",") {
        kept.remove(from - 1);
    } else if w.get(at + 1).is_some_and(|x| x == ",") {
        kept.remove(from);
    }
    let text = kept
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    Some((text, !not))
}

/// `ALTER TABLE t ALTER [COLUMN] c ADD GENERATED ... AS IDENTITY (SEQUENCE NAME s ...)`
/// (how pg_dump writes an identity column; `sqlparser` lacks SEQUENCE NAME): the text
/// without `SEQUENCE NAME s`. quire names the sequence `t_c_seq` as PostgreSQL does by
/// default, so `s` must be that name (0A000 otherwise). `None` for any other statement.
fn without_sequence_name(p: &str) -> Result<Option<String>> {
    let head = p.trim_start();
    if !head
        .get(..5)
        .is_some_and(|h| h.eq_ignore_ascii_case("alter"))
    {
        return Ok(None);
    }
    let w = words(p.trim_end().trim_end_matches(';'));
    let Some(at) = w
        .windows(2)
        .position(|x| kw(Some(&x[0]), "sequence") && kw(Some(&x[1]), "name"))
    else {
        return Ok(None);
    };
    let generated = w.iter().any(|x| kw(Some(x), "generated"));
    if !kw(w.get(1), "table") || !generated || w.iter().any(|x| x.starts_with('\'')) {
        return Ok(None);
    }
    let Some(given) = w.get(at + 2) else {
        return Err(SqlError::syntax("syntax error at end of input"));
    };
    // ALTER TABLE [IF EXISTS] [ONLY] t ALTER [COLUMN] c ...
    let (_, rest) = if_exists(&w[2..]);
    let rest = match rest {
        [only, after @ ..] if kw(Some(only), "only") => after,
        _ => rest,
    };
    let table = rest
        .first()
        .map(|t| ident(t.strip_prefix("public.").unwrap_or(t)));
    let rest = rest.get(2..).unwrap_or_default();
    let rest = match rest {
        [column, after @ ..] if kw(Some(column), "column") => after,
        _ => rest,
    };
    let column = rest.first().map(|c| ident(c));
    let expected = format!(
        "{}_{}_seq",
        table.unwrap_or_default(),
        column.unwrap_or_default()
    );
    let given = ident(given.strip_prefix("public.").unwrap_or(given));
    if given != expected {
        return Err(SqlError::unsupported(format!(
            "SEQUENCE NAME {given} (an identity column's sequence is named {expected})"
        )));
    }
    let kept: Vec<&str> = w[..at]
        .iter()
        .chain(&w[at + 3..])
        .map(String::as_str)
        .collect();
    Ok(Some(kept.join(" ")))
}

/// Words and quoted strings of a utility command.
fn words(p: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = p.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '\'' {
            chars.next();
            let mut s = String::from("'");
            while let Some(c) = chars.next() {
                if c == '\'' {
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                        s.push('\'');
                        continue;
                    }
                    break;
                }
                s.push(c);
            }
            out.push(s);
        } else if "(),".contains(c) {
            out.push(c.to_string());
            chars.next();
        } else {
            let mut w = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || "(),'".contains(c) {
                    break;
                }
                w.push(c);
                chars.next();
            }
            out.push(w);
        }
    }
    out
}

fn kw(w: Option<&String>, k: &str) -> bool {
    w.is_some_and(|w| w.eq_ignore_ascii_case(k))
}

/// A quoted string's contents (`'p_1'` gives `p_1`).
fn string_arg(w: Option<&String>, what: &str) -> Result<String> {
    w.and_then(|w| w.strip_prefix('\'').map(str::to_string))
        .ok_or_else(|| SqlError::syntax(format!("{what} needs a quoted string")))
}

fn utility(p: &str) -> Result<Option<Statement>> {
    if let Some(r) = crate::roles::parse(p)? {
        return Ok(Some(Statement::Role(r)));
    }
    // The words of every statement would cost a string each: only those that may be one
    // of these are split.
    let head = p.trim_start();
    let head = &head[..head.bytes().take_while(u8::is_ascii_alphabetic).count()];
    let candidate = [
        "prepare",
        "commit",
        "rollback",
        "checkpoint",
        "vacuum",
        "copy",
        "alter",
        "set",
        "fetch",
        "move",
        "reindex",
    ]
    .iter()
    .any(|k| head.eq_ignore_ascii_case(k));
    if !candidate {
        return Ok(None);
    }
    let w = words(p);
    let first = w.first();
    let second = w.get(1);
    if kw(first, "prepare") && kw(second, "transaction") {
        return Ok(Some(Statement::PrepareTransaction(string_arg(
            w.get(2),
            "PREPARE TRANSACTION",
        )?)));
    }
    if kw(first, "commit") && kw(second, "prepared") {
        return Ok(Some(Statement::CommitPrepared(string_arg(
            w.get(2),
            "COMMIT PREPARED",
        )?)));
    }
    if kw(first, "rollback") && kw(second, "prepared") {
        return Ok(Some(Statement::RollbackPrepared(string_arg(
            w.get(2),
            "ROLLBACK PREPARED",
        )?)));
    }
    if kw(first, "checkpoint") {
        if w.len() > 1 {
            return Err(SqlError::syntax("syntax error at or near after CHECKPOINT"));
        }
        return Ok(Some(Statement::Checkpoint));
    }
    if kw(first, "vacuum") {
        return vacuum(&w[1..]).map(|v| Some(Statement::Vacuum(v)));
    }
    if kw(first, "reindex") {
        return reindex(&w[1..]).map(|r| Some(Statement::Reindex(r)));
    }
    if kw(first, "copy") {
        return copy(&w[1..]).map(|c| Some(Statement::Copy(c)));
    }
    if kw(first, "alter") {
        if let Some(a) = alter_owner(&w) {
            return Ok(Some(Statement::AlterOwner(a)));
        }
        if let Some(s) = set_storage(&w) {
            return Ok(Some(Statement::SetStorage(s)));
        }
    }
    if kw(first, "alter") && kw(second, "sequence") {
        return alter_sequence(&w[2..]).map(|a| Some(Statement::AlterSequence(a)));
    }
    if kw(first, "set") && kw(second, "constraints") {
        return set_constraints(&w[2..]).map(Some);
    }
    if kw(first, "fetch") || kw(first, "move") {
        return fetch(&w[1..], kw(first, "move")).map(|f| Some(Statement::Fetch(f)));
    }
    Ok(None)
}

/// The words of FETCH or MOVE after the first: `[direction] [FROM | IN] cursor`.
fn fetch(w: &[String], is_move: bool) -> Result<FetchStmt> {
    let mut w: Vec<&str> = w
        .iter()
        .map(|x| x.trim_end_matches(';'))
        .filter(|x| !x.is_empty())
        .collect();
    let Some(name) = w.pop() else {
        return Err(SqlError::syntax("syntax error at end of input"));
    };
    if w.last()
        .is_some_and(|x| x.eq_ignore_ascii_case("from") || x.eq_ignore_ascii_case("in"))
    {
        w.pop();
    }
    let lower: Vec<String> = w.iter().map(|x| x.to_ascii_lowercase()).collect();
    let words: Vec<&str> = lower.iter().map(String::as_str).collect();
    let count = |n: &str| -> Result<FetchCount> {
        let n: i64 = n
            .parse()
            .map_err(|_| SqlError::syntax(format!("syntax error at or near \"{n}\"")))?;
        Ok(match u64::try_from(n) {
            Ok(0) => FetchCount::Current,
            Ok(k) => FetchCount::Forward(k),
            Err(_) => FetchCount::Other(n.to_string()),
        })
    };
    let count = match words.as_slice() {
        [] | ["next" | "forward"] => FetchCount::Forward(1),
        ["all"] | ["forward", "all"] => FetchCount::All,
        ["forward" | "relative" | "backward", "0"] => FetchCount::Current,
        ["forward", n] => count(n)?,
        [n] if n.parse::<i64>().is_ok() => count(n)?,
        [d, ..]
            if matches!(
                *d,
                "prior" | "first" | "last" | "absolute" | "relative" | "backward"
            ) =>
        {
            FetchCount::Other(words.join(" ").to_uppercase())
        }
        [other, ..] => {
            return Err(SqlError::syntax(format!(
                "syntax error at or near \"{other}\""
            )))
        }
    };
    Ok(FetchStmt {
        cursor: ident(name),
        count,
        is_move,
    })
}

/// The words of SET CONSTRAINTS after its first two: `ALL` or names (each as an
/// identifier: folded to lower case unless quoted), then DEFERRED or IMMEDIATE.
fn set_constraints(w: &[String]) -> Result<Statement> {
    let w: Vec<&String> = w.iter().filter(|x| x.as_str() != ";").collect();
    let Some((mode, names)) = w.split_last() else {
        return Err(SqlError::syntax("syntax error at end of input"));
    };
    let deferred = match mode.to_ascii_lowercase().trim_end_matches(';') {
        "deferred" => true,
        "immediate" => false,
        _ => {
            return Err(SqlError::syntax(format!(
                "syntax error at or near \"{mode}\""
            )))
        }
    };
    if let [all] = names {
        if all.eq_ignore_ascii_case("all") {
            return Ok(Statement::SetConstraints(None, deferred));
        }
    }
    let mut out = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if i % 2 == 1 {
            if n.as_str() != "," {
                return Err(SqlError::syntax(format!("syntax error at or near \"{n}\"")));
            }
            continue;
        }
        let name = match n.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            Some(q) => q.replace("\"\"", "\""),
            None if n
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '$') =>
            {
                n.to_lowercase()
            }
            None => return Err(SqlError::syntax(format!("syntax error at or near \"{n}\""))),
        };
        out.push(name);
    }
    if out.is_empty() || names.len() % 2 == 0 {
        return Err(SqlError::syntax(format!(
            "syntax error at or near \"{mode}\""
        )));
    }
    Ok(Statement::SetConstraints(Some(out), deferred))
}

/// `[IF EXISTS] rest`: whether the words start with IF EXISTS, and the words after it.
fn if_exists(w: &[String]) -> (bool, &[String]) {
    match w {
        [i, e, rest @ ..] if kw(Some(i), "if") && kw(Some(e), "exists") => (true, rest),
        _ => (false, w),
    }
}

/// `ALTER TABLE [IF EXISTS] [ONLY] name ALTER [COLUMN] column SET STORAGE kind`, if the
/// words are that.
fn set_storage(words: &[String]) -> Option<crate::catalog::SetStorageStmt> {
    let [_, table_kw, rest @ .., set_kw, storage_kw, storage] = words else {
        return None;
    };
    let keywords = [
        (table_kw, "table"),
        (set_kw, "set"),
        (storage_kw, "storage"),
    ];
    if !keywords.iter().all(|(w, k)| kw(Some(w), k)) {
        return None;
    }
    let (if_exists, rest) = if_exists(rest);
    let rest = match rest {
        [only, after @ ..] if kw(Some(only), "only") => after,
        _ => rest,
    };
    let [name, alter, rest @ ..] = rest else {
        return None;
    };
    if !kw(Some(alter), "alter") {
        return None;
    }
    let column = match rest {
        [c, column] if kw(Some(c), "column") => column,
        [column] => column,
        _ => return None,
    };
    Some(crate::catalog::SetStorageStmt {
        if_exists,
        table: ident(name.strip_prefix("public.").unwrap_or(name)),
        column: ident(column),
        storage: storage.to_ascii_lowercase(),
    })
}

/// `ALTER kind [IF EXISTS] [ONLY] name OWNER TO role`, if the words are that.
fn alter_owner(words: &[String]) -> Option<crate::catalog::AlterOwnerStmt> {
    let [_, kind, rest @ .., owner_kw, to_kw, role] = words else {
        return None;
    };
    if !kw(Some(owner_kw), "owner") || !kw(Some(to_kw), "to") {
        return None;
    }
    let kind = ["table", "sequence", "view", "index", "schema"]
        .into_iter()
        .find(|k| kind.eq_ignore_ascii_case(k))?;
    let (if_exists, rest) = if_exists(rest);
    let rest = match rest {
        [only, after @ ..] if kw(Some(only), "only") && kind == "table" => after,
        _ => rest,
    };
    let [name] = rest else { return None };
    let name = ident(name.strip_prefix("public.").unwrap_or(name));
    let owner = match role.to_ascii_lowercase().as_str() {
        s @ ("current_user" | "current_role" | "session_user") => s.to_uppercase(),
        _ => ident(role),
    };
    Some(crate::catalog::AlterOwnerStmt {
        kind: match kind {
            "table" => "TABLE",
            "sequence" => "SEQUENCE",
            "view" => "VIEW",
            "index" => "INDEX",
            _ => "SCHEMA",
        },
        if_exists,
        name,
        owner,
    })
}

/// The words of ALTER SEQUENCE after its first two. RESTART is taken out; the rest is read
/// as CREATE SEQUENCE's options by `sqlparser`.
fn alter_sequence(w: &[String]) -> Result<AlterSequenceStmt> {
    let (if_exists, w) = if_exists(w);
    let Some((name, rest)) = w.split_first() else {
        return Err(SqlError::syntax("syntax error at end of input"));
    };
    let mut kept: Vec<&str> = Vec::with_capacity(rest.len());
    let mut restart = None;
    let mut i = 0;
    while i < rest.len() {
        if !kw(rest.get(i), "restart") {
            kept.push(&rest[i]);
            i += 1;
            continue;
        }
        i += 1;
        if kw(rest.get(i), "with") {
            i += 1;
        }
        restart = Some(match rest.get(i).and_then(|v| v.parse::<i64>().ok()) {
            Some(v) => {
                i += 1;
                Restart::To(v)
            }
            None => Restart::ToStart,
        });
    }
    let sql = format!("CREATE SEQUENCE s {}", kept.join(" "));
    let parsed =
        sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, &sql)
            .map_err(|e| SqlError::syntax(e.to_string()))?;
    let options = match parsed.as_slice() {
        [sqlparser::ast::Statement::CreateSequence {
            sequence_options, ..
        }] => sequence_options.clone(),
        _ => return Err(SqlError::syntax("syntax error in ALTER SEQUENCE")),
    };
    Ok(AlterSequenceStmt {
        if_exists,
        name: ident(name),
        options,
        restart,
    })
}

fn ident(w: &str) -> String {
    match w.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
        Some(q) => q.to_string(),
        None => w.to_lowercase(),
    }
}

/// REINDEX's words after the keyword (gram.y's `ReindexStmt`).
fn reindex(w: &[String]) -> Result<ReindexStmt> {
    let near = |w: Option<&String>| match w {
        Some(w) => SqlError::syntax(format!("syntax error at or near \"{w}\"")),
        None => SqlError::syntax("syntax error at end of input"),
    };
    let (mut verbose, mut concurrently) = (false, false);
    let mut i = 0;
    if w.first().is_some_and(|x| x == "(") {
        i = 1;
        while i < w.len() && w[i] != ")" {
            let option = w[i].to_lowercase();
            // An option may have a boolean after it.
            let value = match w.get(i + 1).map(|v| v.to_lowercase()) {
                Some(v) if v != "," && v != ")" => {
                    i += 1;
                    !matches!(v.as_str(), "false" | "off" | "0")
                }
                _ => true,
            };
            match option.as_str() {
                "verbose" => verbose = value,
                "concurrently" => concurrently = value,
                "," => {}
                "tablespace" => return Err(SqlError::unsupported("REINDEX (TABLESPACE)")),
                other => {
                    return Err(SqlError::syntax(format!(
                        "unrecognized REINDEX option \"{other}\""
                    )))
                }
            }
            i += 1;
        }
        if i >= w.len() {
            return Err(near(None));
        }
        i += 1;
    }
    let kind = match w.get(i).map(|k| k.to_lowercase()).as_deref() {
        Some("index") => ReindexKind::Index,
        Some("table") => ReindexKind::Table,
        Some("schema") => ReindexKind::Schema,
        Some("database") => ReindexKind::Database,
        Some("system") => ReindexKind::System,
        _ => return Err(near(w.get(i))),
    };
    i += 1;
    if kw(w.get(i), "concurrently") {
        concurrently = true;
        i += 1;
    }
    let name = w.get(i).map(|n| ident(n));
    if w.len() > i + 1 {
        return Err(near(w.get(i + 1)));
    }
    if name.is_none()
        && matches!(
            kind,
            ReindexKind::Index | ReindexKind::Table | ReindexKind::Schema
        )
    {
        return Err(near(None));
    }
    Ok(ReindexStmt {
        kind,
        name,
        verbose,
        concurrently,
    })
}

/// VACUUM [ (option, ...) ] [ FULL ] [ FREEZE ] [ VERBOSE ] [ ANALYZE ] [ table, ... ]
fn vacuum(w: &[String]) -> Result<VacuumStmt> {
    let mut v = VacuumStmt::default();
    let mut i = 0;
    if w.first().is_some_and(|x| x == "(") {
        i = 1;
        while i < w.len() && w[i] != ")" {
            match w[i].to_lowercase().as_str() {
                "verbose" => v.verbose = true,
                "analyze" | "analyse" => v.analyze = true,
                "," | "true" | "on" | "1" | "freeze" | "skip_locked" | "index_cleanup"
                | "truncate" | "auto" => {}
                "full" => return Err(SqlError::unsupported("VACUUM FULL")),
                other => {
                    return Err(SqlError::syntax(format!(
                        "unrecognized VACUUM option \"{other}\""
                    )))
                }
            }
            i += 1;
        }
        i += 1;
    }
    while i < w.len() {
        match w[i].to_lowercase().as_str() {
            "verbose" => v.verbose = true,
            "analyze" | "analyse" => v.analyze = true,
            "full" => return Err(SqlError::unsupported("VACUUM FULL")),
            "," | "freeze" => {}
            _ => {
                let name = ident(w[i].trim_start_matches("public."));
                if w.get(i + 1).is_some_and(|x| x == "(") {
                    return Err(SqlError::unsupported("VACUUM of a column list"));
                }
                v.tables.push(name);
            }
        }
        i += 1;
    }
    Ok(v)
}

/// COPY table [ (columns) ] FROM STDIN | TO STDOUT [ [WITH] (options) | old-style options ]
#[allow(clippy::many_single_char_names)] // c: the statement, w: the words, i/j: positions
fn copy(w: &[String]) -> Result<CopyStmt> {
    let Some(table) = w.first() else {
        return Err(SqlError::syntax("COPY needs a table"));
    };
    if table == "(" {
        // A query that does not close (`COPY (query; ...`): copy_query found none.
        return Err(SqlError::syntax("syntax error at end of input"));
    }
    let mut c = copy_stmt(ident(table.trim_start_matches("public.")));
    let mut i = 1;
    if w.get(i).is_some_and(|x| x == "(") {
        i += 1;
        while i < w.len() && w[i] != ")" {
            if w[i] != "," {
                c.columns.push(ident(&w[i]));
            }
            i += 1;
        }
        i += 1;
    }
    copy_options(c, &w[i..])
}

/// A COPY of `table` with the defaults: FROM STDIN, text format.
fn copy_stmt(table: String) -> CopyStmt {
    CopyStmt {
        table,
        query: None,
        columns: Vec::new(),
        from: true,
        format: CopyFormat::Text,
        delimiter: '\t',
        null: "\\N".into(),
        header: false,
    }
}

/// `COPY ( query ) rest`: the query's text and the rest, when statement `p` is one. The
/// query ends at the parenthesis that closes the first, outside quotes.
fn copy_query(p: &str) -> Option<(&str, &str)> {
    let t = p.trim_start();
    let after = t
        .get(..4)
        .filter(|k| k.eq_ignore_ascii_case("copy"))
        .and_then(|_| t.get(4..))?
        .trim_start();
    let inner = after.strip_prefix('(')?;
    let mut depth = 1usize;
    let mut quote: Option<char> = None;
    for (i, ch) in inner.char_indices() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(ch),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return Some((&inner[..i], &inner[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// COPY's direction and options, after its table and columns.
#[allow(clippy::many_single_char_names)] // c: the statement, w: the words, i/j: positions
fn copy_options(mut c: CopyStmt, w: &[String]) -> Result<CopyStmt> {
    let mut i = 0;
    match (
        w.get(i).map(|x| x.to_lowercase()),
        w.get(i + 1).map(|x| x.to_lowercase()),
    ) {
        (Some(d), Some(s)) if d == "from" && s == "stdin" => c.from = true,
        (Some(d), Some(s)) if d == "to" && s == "stdout" => c.from = false,
        (Some(d), Some(_)) if d == "from" || d == "to" => {
            return Err(SqlError::new(
                SqlState::INSUFFICIENT_PRIVILEGE,
                "COPY to or from a file is not supported: use STDIN or STDOUT (psql's \\copy)",
            ))
        }
        _ => return Err(SqlError::syntax("COPY needs FROM STDIN or TO STDOUT")),
    }
    i += 2;
    if kw(w.get(i), "with") {
        i += 1;
    }
    let opts = &w[i..];
    let mut j = 0;
    let parenthesized = opts.first().is_some_and(|x| x == "(");
    if parenthesized {
        j = 1;
    }
    let mut explicit_delimiter = false;
    let mut explicit_null = false;
    while j < opts.len() {
        let o = opts[j].to_lowercase();
        let arg = opts.get(j + 1).filter(|a| *a != "," && *a != ")");
        match o.as_str() {
            "," | ")" => {}
            "csv" => c.format = CopyFormat::Csv,
            "binary" => c.format = CopyFormat::Binary,
            "format" => {
                let name = arg.map(|a| a.trim_start_matches('\'').to_lowercase());
                match name.as_deref() {
                    Some("csv") => c.format = CopyFormat::Csv,
                    Some("text") => c.format = CopyFormat::Text,
                    Some("binary") => c.format = CopyFormat::Binary,
                    other => {
                        return Err(SqlError::syntax(format!(
                            "COPY format \"{}\" not recognized",
                            other.unwrap_or("")
                        )))
                    }
                }
                j += 1;
            }
            "header" => {
                c.header = !matches!(
                    arg.map(|a| a.to_lowercase()).as_deref(),
                    Some("false" | "off" | "0")
                );
                if arg.is_some_and(|a| {
                    ["true", "false", "on", "off", "0", "1", "match"]
                        .contains(&a.to_lowercase().as_str())
                }) {
                    j += 1;
                }
            }
            "delimiter" => {
                let d = string_arg(arg, "DELIMITER")?;
                let mut chars = d.chars();
                match (chars.next(), chars.next()) {
                    (Some(ch), None) => c.delimiter = ch,
                    _ => {
                        return Err(SqlError::new(
                            SqlState::FEATURE_NOT_SUPPORTED,
                            "COPY delimiter must be a single one-byte character",
                        ))
                    }
                }
                explicit_delimiter = true;
                j += 1;
            }
            "null" => {
                c.null = string_arg(arg, "NULL")?;
                explicit_null = true;
                j += 1;
            }
            "freeze" => {
                if arg.is_some_and(|a| {
                    ["true", "false", "on", "off", "0", "1"].contains(&a.to_lowercase().as_str())
                }) {
                    j += 1;
                }
            }
            "encoding" => {
                let e = string_arg(arg, "ENCODING")?;
                if !e.eq_ignore_ascii_case("utf8") && !e.eq_ignore_ascii_case("utf-8") {
                    return Err(SqlError::unsupported(format!("COPY encoding {e}")));
                }
                j += 1;
            }
            other => {
                return Err(SqlError::syntax(format!(
                    "option \"{other}\" not recognized"
                )))
            }
        }
        j += 1;
    }
    if c.format == CopyFormat::Binary {
        let set = [
            (explicit_delimiter, "DELIMITER"),
            (explicit_null, "NULL"),
            (c.header, "HEADER"),
        ];
        if let Some((_, what)) = set.iter().find(|(on, _)| *on) {
            return Err(SqlError::syntax(format!(
                "cannot specify {what} in BINARY mode"
            )));
        }
    }
    if c.format == CopyFormat::Csv {
        if !explicit_delimiter {
            c.delimiter = ',';
        }
        if !explicit_null {
            c.null = String::new();
        }
    }
    Ok(c)
}

/// An identifier quoted where PostgreSQL would quote it.
pub(crate) fn quote_ident(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        return s.to_string();
    }
    let mut q = String::from("\"");
    for c in s.chars() {
        if c == '"' {
            q.push('"');
        }
        q.push(c);
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deepest nesting of brackets in `text` (a tree's `Debug` form): one or more a
    /// level of the tree.
    fn nesting(text: &str) -> usize {
        let (mut depth, mut deepest) = (0usize, 0);
        let mut quoted = false;
        let mut escaped = false;
        for c in text.chars() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                '(' | '[' | '{' if !quoted => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ')' | ']' | '}' if !quoted => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        deepest
    }

    fn bound_and_nesting(sql: &str) -> (usize, usize) {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let tokens = tokenize(sql, 0).unwrap();
        let bound = syntax_depth(&tokens);
        let ast = sqlparser::parser::Parser::new(&dialect)
            .with_recursion_limit(MAX_PARSER_RECURSION)
            .with_tokens_with_locations(tokens)
            .parse_statements()
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        (bound, nesting(&format!("{ast:?}")))
    }

    /// Each construct, repeated: the bound grows at least as fast as the tree's real depth
    /// (its `Debug` nesting, which counts a few brackets a level).
    #[test]
    fn the_depth_bound_grows_with_every_construct_that_nests() {
        // A statement: the head, `open` n times, the core, `close` n times.
        let cases: &[(&str, &str, &str, &str)] = &[
            ("select 1", "+1", "", ""),
            ("select 1", "::int", "", ""),
            ("select 1", " is null", "", ""),
            ("select 1", " is not distinct from 1", "", ""),
            ("select 1", " collate \"C\"", "", ""),
            ("select 1", " at time zone 'utc'", "", ""),
            ("select 1", " between 1 and 2", "", ""),
            ("select 1", " in (1, 2)", "", ""),
            ("select 1", " like 'a'", "", ""),
            ("select 1", " -> 'a'", "", ""),
            ("select 1", " = any(array[1])", "", ""),
            ("select a", "[1]", "", ""),
            ("select a", "[1:2]", "", ""),
            ("select 1 where true", " and true", "", ""),
            ("select 1 where true", " or a = 1 and b = 2", "", ""),
            ("select 1", " union select 1", "", ""),
            ("select 1", " intersect all select 1", "", ""),
            ("select 1", " except (select 1)", "", ""),
            ("select ", "(", "1", ")"),
            ("select ", "f(", "1", ")"),
            ("select ", "f(1, ", "1", ")"),
            ("select ", "- ", "1", ""),
            ("select ", "not ", "true", ""),
            ("select ", "case when true then ", "1", " end"),
            ("select ", "case 1 when 1 then 1 else ", "1", " end"),
            ("select ", "(select ", "1", ")"),
            ("select ", "exists (select ", "1", ")"),
            ("select ", "array[", "1", "]"),
            ("select ", "cast(", "1", " as int)"),
            ("select ", "1 in (select ", "1", ")"),
            ("select * from ", "(select * from ", "t", ") x"),
            ("select * from ", "(t join ", "t", " on true)"),
            (
                "select * from t where a = 1 and ",
                "(b = 1 or ",
                "c = 1",
                ")",
            ),
            ("select ", "(", "1", ") + 1"),
            ("select ", "(", "1", ")::int"),
            ("select ", "(select 1 union select ", "1", ")"),
            ("select ", "row(", "1", ", 2)"),
            ("select ", "coalesce(1, ", "1", ")"),
            ("select ", "1 + case when true then ", "1", " end"),
            ("values ", "((", "1", "))"),
            (
                "select * from t where ",
                "exists (select * from t where ",
                "true",
                ")",
            ),
        ];
        for (head, open, core, close) in cases {
            let sql = |n: usize| format!("{head}{}{core}{}", open.repeat(n), close.repeat(n));
            let (b10, d10) = bound_and_nesting(&sql(10));
            let (b40, d40) = bound_and_nesting(&sql(40));
            assert!(
                d40 - d10 <= b40 - b10 && d40 <= b40 + 32,
                "{}: bound {b10} -> {b40}, nesting {d10} -> {d40}",
                sql(1)
            );
        }
    }

    #[test]
    fn statements_split_at_top_level_semicolons_only() {
        let p =
            split("select 'a;b'; select \"x;\" from t -- c;\n; /* ; */ select $$;$$;;").unwrap();
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(split("select 'open").is_err());
        assert!(split("-- only a comment").unwrap().is_empty());
    }

    #[test]
    fn syntax_errors_say_where_as_postgresql_does() {
        let e = parse("SELECT 1; SELEC 2").unwrap_err();
        assert_eq!(e.message(), "syntax error at or near \"SELEC\"");
        assert_eq!(e.sqlstate(), "42601");
        assert_eq!(e.position(), Some(11), "{e:?}");
        let e = parse("SELECT 1 +").unwrap_err();
        assert_eq!(e.message(), "syntax error at end of input");
        assert_eq!(e.position(), Some(11));
        let e = parse("SELECT a\nFROM t WHERE )").unwrap_err();
        assert_eq!(e.message(), "syntax error at or near \")\"", "{e:?}");
        assert_eq!(e.position(), Some(23), "{e:?}");
    }

    #[test]
    fn utility_commands_are_recognized() {
        let s = parse("PREPARE TRANSACTION 'p_1'; commit prepared 'p_1'; CHECKPOINT").unwrap();
        assert!(matches!(&s[0], Statement::PrepareTransaction(g) if g == "p_1"));
        assert!(matches!(&s[1], Statement::CommitPrepared(g) if g == "p_1"));
        assert!(matches!(s[2], Statement::Checkpoint));
        let Statement::Vacuum(v) = &parse("vacuum (verbose, analyze) pgbench_accounts").unwrap()[0]
        else {
            panic!()
        };
        assert!(v.verbose && v.analyze);
        assert_eq!(v.tables, ["pgbench_accounts"]);
        let Statement::Copy(c) =
            &parse("copy pgbench_accounts from stdin with (freeze on)").unwrap()[0]
        else {
            panic!()
        };
        assert!(c.from);
        assert_eq!(c.format, CopyFormat::Text);
        let Statement::Copy(c) = &parse("COPY t (a, b) TO STDOUT WITH CSV HEADER").unwrap()[0]
        else {
            panic!()
        };
        assert!(!c.from && c.header && c.delimiter == ',');
        assert_eq!(c.columns, ["a", "b"]);
        assert_eq!(
            parse("copy t from '/etc/passwd'").unwrap_err().sqlstate(),
            "42501"
        );
    }
}
