//! SQLSTATEs: the five-character error codes clients read, PostgreSQL's. They come from one
//! table, `errcodes.txt` beside this file, from which the build makes a constant per code
//! (`SqlState::UNIQUE_VIOLATION`); code names a SQLSTATE only through them, never as a
//! string of its own, so a code quire reports is always one PostgreSQL defines.

/// A SQLSTATE. Only the generated constants make one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SqlState(&'static str);

include!(concat!(env!("OUT_DIR"), "/errcodes.rs"));

impl SqlState {
    /// The five characters (`23505`).
    pub const fn code(self) -> &'static str {
        self.0
    }

    /// The condition name PL/pgSQL knows it by (`unique_violation`).
    pub fn condition_name(self) -> Option<&'static str> {
        ALL.iter().find(|(s, _)| *s == self).map(|(_, n)| *n)
    }

    /// The SQLSTATE whose five characters are `code`, if PostgreSQL defines one.
    pub fn from_code(code: &str) -> Option<SqlState> {
        ALL.iter().map(|(s, _)| *s).find(|s| s.0 == code)
    }

    /// Its class: the first two characters (`23`, integrity constraint violation).
    pub fn class(self) -> &'static str {
        &self.0[..2]
    }
}

/// A SQLSTATE equals its five characters: tests and clients' code compare with `"23505"`.
impl PartialEq<&str> for SqlState {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<str> for SqlState {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl std::fmt::Display for SqlState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_postgresqls_codes_and_names() {
        assert_eq!(SqlState::UNIQUE_VIOLATION.code(), "23505");
        assert_eq!(
            SqlState::UNIQUE_VIOLATION.condition_name(),
            Some("unique_violation")
        );
        assert_eq!(
            SqlState::from_code("40P01"),
            Some(SqlState::T_R_DEADLOCK_DETECTED)
        );
        assert_eq!(SqlState::from_code("XXAGG"), None);
        assert_eq!(SqlState::INTERNAL_ERROR.class(), "XX");
        // A code with two names is one SQLSTATE.
        assert_eq!(
            SqlState::DATETIME_VALUE_OUT_OF_RANGE,
            SqlState::DATETIME_FIELD_OVERFLOW
        );
        // Every code is five digits or capitals, and listed once with a condition name.
        let mut codes: Vec<&str> = ALL.iter().map(|(s, _)| s.code()).collect();
        let n = codes.len();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), n, "a code with two condition names");
        assert!(n > 250, "{n} codes");
    }
}
