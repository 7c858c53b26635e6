//! The SQL layer's one error type: a SQLSTATE and a message, as the client sees them.

/// An error of a SQL statement, with its PostgreSQL SQLSTATE.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqlError {
    code: &'static str,
    message: String,
}

impl SqlError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        SqlError {
            code,
            message: message.into(),
        }
    }

    /// 42601: the statement does not parse.
    pub fn syntax(message: impl Into<String>) -> Self {
        Self::new("42601", message)
    }

    /// 0A000: valid SQL that quire does not do yet; `feature` names it for the user.
    pub fn unsupported(feature: impl std::fmt::Display) -> Self {
        Self::new("0A000", format!("{feature} is not supported yet"))
    }

    /// 22P02: a value's text form does not parse as its type.
    pub fn bad_input(type_name: &str, text: &str) -> Self {
        Self::new(
            "22P02",
            format!("invalid input syntax for type {type_name}: \"{text}\""),
        )
    }

    /// 42804: a value of one type where another is needed.
    pub fn type_mismatch(message: impl Into<String>) -> Self {
        Self::new("42804", message)
    }

    /// 25P02: a statement inside a transaction block that an error aborted.
    pub fn in_failed_transaction() -> Self {
        Self::new(
            "25P02",
            "current transaction is aborted, commands ignored until end of transaction block",
        )
    }

    pub fn sqlstate(&self) -> &'static str {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The engine's errors keep their SQLSTATE.
impl From<quire_engine::Error> for SqlError {
    fn from(e: quire_engine::Error) -> Self {
        SqlError::new(e.sqlstate(), e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, SqlError>;
