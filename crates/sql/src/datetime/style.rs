//! The session's date/time style: `DateStyle` (output format and field order), `IntervalStyle`
//! and `TimeZone`, as one value the input and output functions read.
//!
//! ## Rules
//! - PostgreSQL keeps these settings in process globals; quire keeps them in a thread-local
//!   [`Style`], installed by the session at the start of each statement
//!   (`Settings::install_datetime_style`) and rebuilt only when one of the three settings
//!   changed. A session runs on its own thread, so rows the server prints after the
//!   statement (and COPY data that follows it) see the same style.
//! - A thread that never installed one has PostgreSQL's defaults: `ISO, MDY`, `postgres`,
//!   `UTC`.
//! - The settings' values are checked and shown as PostgreSQL's `check_datestyle` and
//!   `check_timezone` do ([`datestyle_value`], [`Zone::parse`]).

use std::cell::RefCell;
use std::sync::Arc;

use super::zone::Zone;

/// `DateStyle`'s output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DateFormat {
    Iso,
    Sql,
    Postgres,
    German,
}

/// `DateStyle`'s field order, for input and for the SQL and Postgres output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DateOrder {
    Mdy,
    Dmy,
    Ymd,
}

/// `IntervalStyle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntervalStyle {
    Postgres,
    PostgresVerbose,
    SqlStandard,
    Iso8601,
}

/// The three settings together, and the two that shape other types' output to a client
/// (`extra_float_digits`, `bytea_output`).
#[derive(Clone, Debug)]
pub(crate) struct Style {
    pub format: DateFormat,
    pub order: DateOrder,
    pub interval: IntervalStyle,
    pub zone: Zone,
    /// `extra_float_digits`: above 0, floats print their shortest exact form; at or below,
    /// 15 (`real`: 6) plus this many significant digits.
    pub extra_float_digits: i32,
    /// `bytea_output = escape`.
    pub bytea_escape: bool,
}

impl Default for Style {
    fn default() -> Style {
        Style {
            format: DateFormat::Iso,
            order: DateOrder::Mdy,
            interval: IntervalStyle::Postgres,
            zone: Zone::utc(),
            extra_float_digits: 1,
            bytea_escape: false,
        }
    }
}

impl Style {
    /// The style of the settings' shown values (each already checked by SET; a value that
    /// does not read falls back to the default's part).
    pub(crate) fn of(datestyle: &str, intervalstyle: &str, timezone: &str) -> Style {
        let (format, order) = datestyle_parts(datestyle, (DateFormat::Iso, DateOrder::Mdy))
            .unwrap_or((DateFormat::Iso, DateOrder::Mdy));
        Style {
            format,
            order,
            interval: interval_style(intervalstyle).unwrap_or(IntervalStyle::Postgres),
            zone: Zone::parse(timezone).unwrap_or_else(Zone::utc),
            extra_float_digits: 1,
            bytea_escape: false,
        }
    }

    /// The style with the output settings' shown values.
    #[must_use]
    pub(crate) fn with_output(self, extra_float_digits: &str, bytea_output: &str) -> Style {
        Style {
            extra_float_digits: extra_float_digits.trim().parse().unwrap_or(1),
            bytea_escape: bytea_output.eq_ignore_ascii_case("escape"),
            ..self
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Arc<Style>> = RefCell::new(Arc::new(Style::default()));
}

/// Makes `style` the one this thread's input and output functions read.
pub(crate) fn install(style: Arc<Style>) {
    CURRENT.with(|c| *c.borrow_mut() = style);
}

/// The style this thread's session installed.
pub(crate) fn current() -> Arc<Style> {
    CURRENT.with(|c| Arc::clone(&c.borrow()))
}

/// `IntervalStyle`'s values, any case.
pub(crate) fn interval_style(value: &str) -> Option<IntervalStyle> {
    Some(match value.trim().to_ascii_lowercase().as_str() {
        "postgres" => IntervalStyle::Postgres,
        "postgres_verbose" => IntervalStyle::PostgresVerbose,
        "sql_standard" => IntervalStyle::SqlStandard,
        "iso_8601" => IntervalStyle::Iso8601,
        _ => return None,
    })
}

/// `SET DateStyle = value` over the current `shown` value, as PostgreSQL's
/// `check_datestyle`: the new value as SHOW shows it (`Postgres, MDY`), or the DETAIL of
/// why it is refused.
pub(crate) fn datestyle_value(value: &str, current: &str) -> Result<String, String> {
    let now = datestyle_parts(current, (DateFormat::Iso, DateOrder::Mdy))
        .unwrap_or((DateFormat::Iso, DateOrder::Mdy));
    let (format, order) = datestyle_parts(value, now)?;
    let f = match format {
        DateFormat::Iso => "ISO",
        DateFormat::Sql => "SQL",
        DateFormat::Postgres => "Postgres",
        DateFormat::German => "German",
    };
    let o = match order {
        DateOrder::Mdy => "MDY",
        DateOrder::Dmy => "DMY",
        DateOrder::Ymd => "YMD",
    };
    Ok(format!("{f}, {o}"))
}

/// The words of a `DateStyle` value over `base`, as `check_datestyle` reads them.
fn datestyle_parts(
    value: &str,
    base: (DateFormat, DateOrder),
) -> Result<(DateFormat, DateOrder), String> {
    let (mut format, mut order) = base;
    let (mut have_format, mut have_order) = (None, None);
    let conflict = || "Conflicting \"datestyle\" specifications.".to_string();
    for word in value.split([',', ' ', '\t']).filter(|w| !w.is_empty()) {
        let w = word.to_ascii_lowercase();
        let f = match w.as_str() {
            "iso" => Some(DateFormat::Iso),
            "sql" => Some(DateFormat::Sql),
            "postgres" => Some(DateFormat::Postgres),
            "german" => Some(DateFormat::German),
            _ => None,
        };
        let o = match w.as_str() {
            "ymd" => Some(DateOrder::Ymd),
            "dmy" | "euro" | "european" => Some(DateOrder::Dmy),
            "mdy" | "us" | "noneuro" | "noneuropean" => Some(DateOrder::Mdy),
            _ => None,
        };
        match (f, o) {
            (Some(f), _) => {
                if have_format.is_some_and(|h| h != f) {
                    return Err(conflict());
                }
                have_format = Some(f);
                format = f;
                // GERMAN also sets DMY, unless an order is given.
                if f == DateFormat::German && have_order.is_none() {
                    order = DateOrder::Dmy;
                }
            }
            (None, Some(o)) => {
                if have_order.is_some_and(|h| h != o) {
                    return Err(conflict());
                }
                have_order = Some(o);
                order = o;
            }
            (None, None) if w == "default" => {
                // DEFAULT is the boot value, `ISO, MDY`, for what is not given.
                if have_format.is_none() {
                    format = DateFormat::Iso;
                }
                if have_order.is_none() {
                    order = DateOrder::Mdy;
                }
            }
            (None, None) => return Err(format!("Unrecognized key word: \"{word}\".")),
        }
    }
    Ok((format, order))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datestyle_words() {
        assert_eq!(
            datestyle_value("postgres, mdy", "ISO, MDY").unwrap(),
            "Postgres, MDY"
        );
        assert_eq!(
            datestyle_value("German", "ISO, MDY").unwrap(),
            "German, DMY"
        );
        assert_eq!(datestyle_value("ymd", "SQL, DMY").unwrap(), "SQL, YMD");
        assert_eq!(datestyle_value("euro", "ISO, MDY").unwrap(), "ISO, DMY");
        assert!(datestyle_value("iso, sql", "ISO, MDY").is_err());
        assert!(datestyle_value("foo", "ISO, MDY").is_err());
    }
}
