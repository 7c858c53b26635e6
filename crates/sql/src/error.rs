//! The SQL layer's one error type: a SQLSTATE, a message, and where PostgreSQL gives them a
//! detail, a hint and a position (a 1-based character index into the query string), as the
//! client sees them (ErrorResponse's D, H and P fields).
//!
//! ## Rules
//! - The SQLSTATE is always one PostgreSQL defines: a [`SqlState`], which only the constants
//!   generated from its `errcodes.txt` make (never a string literal), so no code of this
//!   crate's own can reach a client. An error that is this crate's fault (a bound plan that
//!   does not hold what binding promised) is XX000 with a message saying what was wrong
//!   ([`SqlError::internal`]).

use quire_engine::SqlState;

/// A message beside a statement's result (NoticeResponse): PostgreSQL's severity, a
/// SQLSTATE and the text. A client sees those at or above its `client_min_messages`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub severity: Severity,
    pub code: SqlState,
    pub message: String,
    /// PostgreSQL's DETAIL (`drop cascades to ...` lists the objects there).
    pub detail: Option<String>,
}

/// The severities of PostgreSQL's non-error messages that quire sends, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Notice,
    Info,
}

impl Severity {
    /// The name NoticeResponse's S and V fields carry.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Warning => "WARNING",
            Severity::Notice => "NOTICE",
            Severity::Info => "INFO",
        }
    }

    /// Whether a client with `client_min_messages = level` receives it (INFO always, as in
    /// PostgreSQL); an unknown level lets everything through.
    pub fn reaches(self, level: &str) -> bool {
        let rank = match level.to_ascii_lowercase().as_str() {
            "error" | "fatal" | "panic" => 0,
            "warning" => 1,
            "notice" => 2,
            _ => 3,
        };
        match self {
            Severity::Info => true,
            Severity::Warning => rank >= 1,
            Severity::Notice => rank >= 2,
        }
    }
}

impl Notice {
    /// NOTICE, 00000: what most statements say ("... does not exist, skipping").
    pub fn new(message: impl Into<String>) -> Notice {
        Notice {
            severity: Severity::Notice,
            code: SqlState::SUCCESSFUL_COMPLETION,
            message: message.into(),
            detail: None,
        }
    }

    /// The same notice with a DETAIL.
    #[must_use]
    pub fn with_detail(self, detail: impl Into<String>) -> Notice {
        Notice {
            detail: Some(detail.into()),
            ..self
        }
    }

    /// INFO, 00000: what was asked for (VACUUM VERBOSE's report).
    pub fn info(message: impl Into<String>) -> Notice {
        Notice {
            severity: Severity::Info,
            ..Notice::new(message)
        }
    }

    /// WARNING with its own SQLSTATE (`there is no transaction in progress`, 25P01).
    pub fn warning(code: SqlState, message: impl Into<String>) -> Notice {
        Notice {
            severity: Severity::Warning,
            code,
            ..Notice::new(message)
        }
    }
}

impl From<String> for Notice {
    fn from(message: String) -> Notice {
        Notice::new(message)
    }
}

/// An error of a SQL statement, with its PostgreSQL SQLSTATE.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqlError {
    code: SqlState,
    message: String,
    detail: Option<Box<str>>,
    hint: Option<Box<str>>,
    position: Option<usize>,
    /// PostgreSQL's CONTEXT: where inside the data the error is (`JSON data, line 1: ...`).
    context: Option<Box<str>>,
}

impl SqlError {
    pub fn new(code: SqlState, message: impl Into<String>) -> Self {
        SqlError {
            code,
            message: message.into(),
            detail: None,
            hint: None,
            position: None,
            context: None,
        }
    }

    /// XX000: something this crate got wrong (a bound plan holding what binding never
    /// makes); `what` says what, for the bug report.
    pub fn internal(what: impl std::fmt::Display) -> Self {
        Self::new(SqlState::INTERNAL_ERROR, format!("internal error: {what}"))
    }

    /// PostgreSQL's HINT: what the user might do about it.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into().into_boxed_str());
        self
    }

    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into().into_boxed_str());
        self
    }

    /// `position`: the 1-based character index of the error in the query string.
    #[must_use]
    pub fn with_position(mut self, position: usize) -> Self {
        self.position = Some(position);
        self
    }

    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    #[must_use]
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into().into_boxed_str());
        self
    }

    pub fn context(&self) -> Option<&str> {
        self.context.as_deref()
    }

    pub fn position(&self) -> Option<usize> {
        self.position
    }

    /// 42601: the statement does not parse.
    pub fn syntax(message: impl Into<String>) -> Self {
        Self::new(SqlState::SYNTAX_ERROR, message)
    }

    /// 0A000: valid SQL that quire does not do yet; `feature` names it for the user.
    pub fn unsupported(feature: impl std::fmt::Display) -> Self {
        Self::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("{feature} is not supported yet"),
        )
    }

    /// 22P02: a value's text form does not parse as its type.
    pub fn bad_input(type_name: &str, text: &str) -> Self {
        Self::new(
            SqlState::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type {type_name}: \"{text}\""),
        )
    }

    /// 42804: a value of one type where another is needed.
    pub fn type_mismatch(message: impl Into<String>) -> Self {
        Self::new(SqlState::DATATYPE_MISMATCH, message)
    }

    /// 25P02: a statement inside a transaction block that an error aborted.
    pub fn in_failed_transaction() -> Self {
        Self::new(
            SqlState::IN_FAILED_SQL_TRANSACTION,
            "current transaction is aborted, commands ignored until end of transaction block",
        )
    }

    pub fn sqlstate(&self) -> SqlState {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The engine's errors keep their SQLSTATE; those PostgreSQL reports with a DETAIL get one.
impl From<quire_engine::Error> for SqlError {
    fn from(e: quire_engine::Error) -> Self {
        match &e {
            quire_engine::Error::UniqueViolation { index, key } => SqlError::new(
                e.sqlstate(),
                format!("duplicate key value violates unique constraint \"{index}\""),
            )
            .with_detail(format!("Key ({key}) already exists.")),
            quire_engine::Error::UniqueIndexBuild {
                index,
                columns,
                key,
            } => SqlError::new(
                e.sqlstate(),
                format!("could not create unique index \"{index}\""),
            )
            .with_detail(format!("Key ({columns})=({key}) is duplicated.")),
            quire_engine::Error::Deadlock { detail } => {
                SqlError::new(e.sqlstate(), "deadlock detected").with_detail(detail.clone())
            }
            _ => SqlError::new(e.sqlstate(), e.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, SqlError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_min_messages_filters_notices_as_postgresql_does() {
        let all = [Severity::Warning, Severity::Notice, Severity::Info];
        let seen = |level: &str| -> Vec<Severity> {
            all.iter().copied().filter(|s| s.reaches(level)).collect()
        };
        assert_eq!(seen("notice"), all);
        assert_eq!(seen("DEBUG1"), all);
        assert_eq!(seen("warning"), [Severity::Warning, Severity::Info]);
        assert_eq!(
            seen("error"),
            [Severity::Info],
            "INFO always reaches the client"
        );
        assert_eq!(Notice::from("x".to_string()).severity, Severity::Notice);
        assert_eq!(Notice::info("x").code, SqlState::SUCCESSFUL_COMPLETION);
    }
}
