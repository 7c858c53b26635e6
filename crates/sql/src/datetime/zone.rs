//! Time zones: the `TimeZone` setting's values, and the conversions between an instant
//! (a `timestamptz`, microseconds since 1970-01-01 UTC) and a zone's wall clock.
//!
//! ## Rules
//! - The rules come from the IANA database bundled in the `jiff` crate: no hand-written
//!   transition tables, and nothing read from the host, so a zone behaves the same on
//!   every machine.
//! - The setting takes what PostgreSQL's `check_timezone` takes: a number of hours east of
//!   UTC (`-8`, `5.5`), shown as PostgreSQL shows it (`<-08>+08`); a zone name, any case,
//!   shown in the database's spelling; or a POSIX TZ string (`EST5EDT`, `<+03>-3`).
//! - A wall-clock time that does not exist (a spring-forward gap) or exists twice (a
//!   fall-back fold) resolves as PostgreSQL's `DetermineTimeZoneOffset` does: in a gap, the
//!   offset before the transition; in a fold, the offset after it.
//! - Offsets are seconds east of UTC everywhere in quire (PostgreSQL keeps them west).
//! - Beyond the years the database covers (-9999 to 9999), a zone keeps the offset of its
//!   edge.

use std::fmt::Write as _;

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, Offset, TimeZone, TimeZoneDatabase};
use jiff::Timestamp;

use super::{civil_from_days, US_PER_DAY, US_PER_SEC};

/// PostgreSQL's largest zone offset: 15:59:59 either way.
pub(crate) const MAX_OFFSET_SECS: i32 = 15 * 3600 + 59 * 60 + 59;

/// A session's time zone.
#[derive(Clone, Debug)]
pub(crate) struct Zone {
    tz: TimeZone,
    /// The value as SHOW shows it.
    shown: String,
    /// A fixed offset's abbreviation (`-08`), as PostgreSQL names its `<-08>+08` zones.
    fixed_abbrev: Option<String>,
}

fn database() -> &'static TimeZoneDatabase {
    static DB: std::sync::OnceLock<TimeZoneDatabase> = std::sync::OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

impl Zone {
    pub(crate) fn utc() -> Zone {
        Zone {
            tz: TimeZone::UTC,
            shown: "UTC".into(),
            fixed_abbrev: None,
        }
    }

    /// The value of `SET TimeZone`, as PostgreSQL's `check_timezone` reads it; `None` when
    /// it is none of a number of hours, a zone name or a POSIX string.
    pub(crate) fn parse(value: &str) -> Option<Zone> {
        let v = value.trim();
        if v.is_empty() {
            return None;
        }
        if let Ok(hours) = v.parse::<f64>() {
            let secs = (hours * 3600.0).round();
            if !hours.is_finite() || secs.abs() > f64::from(MAX_OFFSET_SECS) {
                return None;
            }
            return Some(Zone::fixed(secs as i32));
        }
        // `+05:30`, `-8`... with a sign or a colon: POSIX's hours west of UTC.
        if v.starts_with(['+', '-']) || v.contains(':') {
            let secs = offset_text(v)?;
            return Some(Zone::fixed(-secs));
        }
        if let Some(zone) = Zone::named(v) {
            return Some(zone);
        }
        let posix_ok = v.bytes().any(|b| b.is_ascii_digit()) && v.len() <= 255;
        let tz = TimeZone::posix(v).ok().filter(|_| posix_ok)?;
        Some(Zone {
            tz,
            shown: v.to_string(),
            fixed_abbrev: None,
        })
    }

    /// A zone of the database by name, any case (`america/new_york`).
    pub(crate) fn named(name: &str) -> Option<Zone> {
        let tz = database().get(name).ok()?;
        let shown = tz.iana_name().unwrap_or(name).to_string();
        Some(Zone {
            tz,
            shown,
            fixed_abbrev: None,
        })
    }

    /// A zone `secs` east of UTC, as PostgreSQL's `pg_tzset_offset` makes it.
    pub(crate) fn fixed(secs: i32) -> Zone {
        let abbrev = offset_name(secs);
        let west = offset_name(-secs);
        Zone {
            tz: TimeZone::fixed(Offset::from_seconds(secs).unwrap_or(Offset::UTC)),
            shown: format!("<{abbrev}>{west}"),
            fixed_abbrev: Some(abbrev),
        }
    }

    /// The value as SHOW shows it.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// The offset east of UTC in seconds at instant `utc_us`, and the zone's abbreviation
    /// then (`PST`, `LMT`, `-08`).
    pub(crate) fn offset_at(&self, utc_us: i64) -> (i32, String) {
        let info = self.tz.to_offset_info(instant(utc_us));
        let abbrev = match &self.fixed_abbrev {
            Some(a) => a.clone(),
            None => info.abbreviation().to_string(),
        };
        (info.offset().seconds(), abbrev)
    }

    /// The offset east of UTC in seconds at instant `utc_us`.
    pub(crate) fn offset_secs(&self, utc_us: i64) -> i32 {
        self.tz.to_offset(instant(utc_us)).seconds()
    }

    /// The offset that applies to wall-clock time `local_us` (microseconds since
    /// 1970-01-01 on the zone's clock), a gap or a fold resolved as PostgreSQL does.
    pub(crate) fn local_offset_secs(&self, local_us: i64) -> i32 {
        let Some(dt) = civil(local_us) else {
            // Beyond the database's years: the offset at its edge.
            return self.offset_secs(local_us);
        };
        match self.tz.to_ambiguous_timestamp(dt).offset() {
            AmbiguousOffset::Unambiguous { offset } => offset.seconds(),
            AmbiguousOffset::Gap { before, .. } => before.seconds(),
            AmbiguousOffset::Fold { after, .. } => after.seconds(),
        }
    }

    /// The instant of wall-clock time `local_us` in this zone.
    pub(crate) fn local_to_utc(&self, local_us: i64) -> i64 {
        if !super::ts_is_finite(local_us) {
            return local_us;
        }
        let off = i64::from(self.local_offset_secs(local_us));
        // Saturating at the extremes, which read as the infinities: only a wall-clock time
        // within a zone's offset of them gets there.
        local_us.saturating_sub(off * US_PER_SEC)
    }

    /// The wall-clock time (microseconds since 1970-01-01 on the zone's clock) of instant
    /// `utc_us`.
    pub(crate) fn utc_to_local(&self, utc_us: i64) -> i64 {
        if !super::ts_is_finite(utc_us) {
            return utc_us;
        }
        let off = i64::from(self.offset_secs(utc_us));
        utc_us.saturating_add(off * US_PER_SEC)
    }
}

/// A signed offset's text (`-08`, `+05:30`, `3`), seconds east of UTC.
pub(crate) fn offset_text(t: &str) -> Option<i32> {
    match t.as_bytes().first()? {
        b'-' => offset(&t[1..]).map(|s| -s),
        b'+' => offset(&t[1..]),
        _ => offset(t),
    }
}

/// An offset's digits: `hh`, `hhmm`, `hhmmss`, `hh:mm`, `hh:mm:ss` (seconds east).
pub(crate) fn offset(body: &str) -> Option<i32> {
    let (h, m, s) = if body.contains(':') {
        let mut p = body.split(':');
        let h = p.next()?;
        let m = p.next().unwrap_or("0");
        let s = p.next().unwrap_or("0");
        (h.to_string(), m.to_string(), s.to_string())
    } else {
        match body.len() {
            1 | 2 => (body.to_string(), "0".into(), "0".into()),
            3 | 4 => {
                let k = body.len() - 2;
                (body[..k].to_string(), body[k..].to_string(), "0".into())
            }
            5 | 6 => {
                let k = body.len() - 4;
                (
                    body[..k].to_string(),
                    body[k..k + 2].to_string(),
                    body[k + 2..].to_string(),
                )
            }
            _ => return None,
        }
    };
    let num = |s: &str| {
        (!s.is_empty() && s.len() <= 2)
            .then(|| s.parse::<i32>().ok())
            .flatten()
    };
    let (h, m, s) = (num(&h)?, num(&m)?, num(&s)?);
    (h <= 15 && m < 60 && s < 60).then_some(h * 3600 + m * 60 + s)
}

/// An offset as PostgreSQL names a fixed zone: `+05`, `-08`, `+05:30`, `-00:00:30`.
fn offset_name(secs: i32) -> String {
    let mut s = String::with_capacity(9);
    push_offset(&mut s, secs);
    s
}

/// PostgreSQL's `EncodeTimezone`: `+HH`, `+HH:MM` or `+HH:MM:SS`, seconds east of UTC.
pub(crate) fn push_offset(s: &mut String, offset_secs: i32) {
    let sign = if offset_secs < 0 { '-' } else { '+' };
    let a = offset_secs.unsigned_abs();
    let (h, m, sec) = (a / 3600, a / 60 % 60, a % 60);
    let _ = if sec != 0 {
        write!(s, "{sign}{h:02}:{m:02}:{sec:02}")
    } else if m != 0 {
        write!(s, "{sign}{h:02}:{m:02}")
    } else {
        write!(s, "{sign}{h:02}")
    };
}

/// The instant `utc_us`, clamped to the years jiff knows.
fn instant(utc_us: i64) -> Timestamp {
    let lo = Timestamp::MIN.as_microsecond();
    let hi = Timestamp::MAX.as_microsecond();
    Timestamp::from_microsecond(utc_us.clamp(lo, hi)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Wall-clock microseconds as a jiff civil time; `None` beyond years -9999..=9999.
fn civil(local_us: i64) -> Option<DateTime> {
    let (y, m, d) = civil_from_days(local_us.div_euclid(US_PER_DAY));
    let in_day = local_us.rem_euclid(US_PER_DAY);
    let secs = in_day / US_PER_SEC;
    let year = i16::try_from(y)
        .ok()
        .filter(|y| (-9999..=9999).contains(y))?;
    DateTime::new(
        year,
        i8::try_from(m).ok()?,
        i8::try_from(d).ok()?,
        i8::try_from(secs / 3600).ok()?,
        i8::try_from(secs / 60 % 60).ok()?,
        i8::try_from(secs % 60).ok()?,
        i32::try_from(in_day % US_PER_SEC * 1000).ok()?,
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datetime::{days_from_civil, US_PER_HOUR};

    fn local(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> i64 {
        days_from_civil(y, mo, d) * US_PER_DAY + h * US_PER_HOUR + mi * 60 * US_PER_SEC
    }

    #[test]
    fn settings_values() {
        assert_eq!(
            Zone::parse("america/new_york").unwrap().shown(),
            "America/New_York"
        );
        assert_eq!(Zone::parse("-8").unwrap().shown(), "<-08>+08");
        assert_eq!(Zone::parse("5.5").unwrap().shown(), "<+05:30>-05:30");
        assert_eq!(Zone::parse("EST5EDT").unwrap().shown(), "EST5EDT");
        assert!(Zone::parse("Mars/Olympus").is_none());
        assert!(Zone::parse("16").is_none());
        assert!(Zone::parse("").is_none());
    }

    #[test]
    fn gaps_and_folds_resolve_as_postgresql() {
        let ny = Zone::parse("America/New_York").unwrap();
        // 2:30 on 2024-03-10 does not exist: read with the offset before (-5), 07:30 UTC.
        let gap = local(2024, 3, 10, 2, 30);
        assert_eq!(ny.local_to_utc(gap), gap + 5 * US_PER_HOUR);
        // 1:30 on 2024-11-03 happens twice: the offset after (-5) wins.
        let fold = local(2024, 11, 3, 1, 30);
        assert_eq!(ny.local_to_utc(fold), fold + 5 * US_PER_HOUR);
        let summer = local(2024, 7, 1, 12, 0);
        assert_eq!(ny.local_to_utc(summer), summer + 4 * US_PER_HOUR);
        assert_eq!(ny.offset_at(summer).1, "EDT");
        // Far beyond the database's years, the edge's offset.
        let far = local(200_000, 1, 1, 0, 0);
        assert_eq!(ny.utc_to_local(ny.local_to_utc(far)), far);
    }
}
