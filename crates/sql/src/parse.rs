//! Parsing: a query string split into statements at top-level semicolons (outside quotes,
//! comments and dollar quotes), each parsed by `sqlparser` — except PostgreSQL's utility
//! commands that `sqlparser` does not know (PREPARE TRANSACTION, COMMIT/ROLLBACK PREPARED,
//! CHECKPOINT, VACUUM, COPY), which are recognized here by their leading keywords.

use crate::error::{Result, SqlError};

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
}

#[derive(Clone, Debug)]
pub struct CopyStmt {
    pub table: String,
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
    pub fn ends_block(&self) -> bool {
        matches!(
            self,
            Statement::Sql(s) if matches!(**s, sqlparser::ast::Statement::Commit { .. } | sqlparser::ast::Statement::Rollback { .. })
        )
    }
}

/// Most statements one query string may hold (a bound on the work one message causes).
const MAX_STATEMENTS: usize = 10_000;

/// Parses SQL text into statements (42601 on a syntax error). Never panics on any input:
/// sqlparser bounds its recursion depth.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    let pieces = split(sql)?;
    if pieces.len() > MAX_STATEMENTS {
        return Err(SqlError::new(
            "54000",
            format!("a query string may hold at most {MAX_STATEMENTS} statements"),
        ));
    }
    let mut out = Vec::new();
    for p in pieces {
        if let Some(s) = utility(p)? {
            out.push(s);
            continue;
        }
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let parsed = sqlparser::parser::Parser::parse_sql(&dialect, p)
            .map_err(|e| syntax_error(sql, p, &e.to_string()))?;
        out.extend(parsed.into_iter().map(|s| Statement::Sql(Box::new(s))));
    }
    Ok(out)
}

/// Parses one SQL expression (a column's stored DEFAULT), 42601 on a syntax error.
pub(crate) fn expression(sql: &str) -> Result<sqlparser::ast::Expr> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| syntax_error(sql, sql, &e.to_string()))
}

/// sqlparser's error (`Expected: X, found: Y at Line: 1, Column: 8`) as PostgreSQL words
/// it: `syntax error at or near "Y"` (or `at end of input`) with the position of `Y` in the
/// whole query string; sqlparser's own words become the detail.
fn syntax_error(sql: &str, piece: &str, parser_message: &str) -> SqlError {
    let text = parser_message
        .strip_prefix("sql parser error: ")
        .unwrap_or(parser_message);
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
    let mut e = SqlError::syntax(message).with_detail(what);
    let piece_start = (piece.as_ptr() as usize).saturating_sub(sql.as_ptr() as usize);
    let before_piece = sql.get(..piece_start).map_or(0, |s| s.chars().count());
    let position = match (found, location.and_then(line_column)) {
        (Some("EOF"), _) => Some(sql.chars().count() + 1),
        (_, Some((line, column))) => char_index(piece, line, column).map(|i| before_piece + i),
        _ => None,
    };
    if let Some(p) = position {
        e = e.with_position(p);
    }
    e
}

/// `1, Column: 8` → (1, 8).
fn line_column(location: &str) -> Option<(usize, usize)> {
    let (line, column) = location.split_once(", Column: ")?;
    Some((line.trim().parse().ok()?, column.trim().parse().ok()?))
}

/// The 1-based character index of 1-based `line` and `column` in `s`.
fn char_index(s: &str, line: usize, column: usize) -> Option<usize> {
    let mut index = 0;
    for (n, l) in s.split('\n').enumerate() {
        if n + 1 == line {
            return (column >= 1).then_some(index + column);
        }
        index += l.chars().count() + 1;
    }
    None
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
    if kw(first, "copy") {
        return copy(&w[1..]).map(|c| Some(Statement::Copy(c)));
    }
    Ok(None)
}

fn ident(w: &str) -> String {
    match w.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
        Some(q) => q.to_string(),
        None => w.to_lowercase(),
    }
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
        return Err(SqlError::unsupported("COPY (query) TO"));
    }
    let mut c = CopyStmt {
        table: ident(table.trim_start_matches("public.")),
        columns: Vec::new(),
        from: true,
        format: CopyFormat::Text,
        delimiter: '\t',
        null: "\\N".into(),
        header: false,
    };
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
    match (
        w.get(i).map(|x| x.to_lowercase()),
        w.get(i + 1).map(|x| x.to_lowercase()),
    ) {
        (Some(d), Some(s)) if d == "from" && s == "stdin" => c.from = true,
        (Some(d), Some(s)) if d == "to" && s == "stdout" => c.from = false,
        (Some(d), Some(_)) if d == "from" || d == "to" => {
            return Err(SqlError::new(
                "42501",
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
            "binary" => return Err(SqlError::unsupported("COPY in binary format")),
            "format" => {
                match arg.map(|a| a.to_lowercase()).as_deref() {
                    Some("csv") => c.format = CopyFormat::Csv,
                    Some("text") => c.format = CopyFormat::Text,
                    Some("binary") => return Err(SqlError::unsupported("COPY in binary format")),
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
                            "0A000",
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

#[cfg(test)]
mod tests {
    use super::*;

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
