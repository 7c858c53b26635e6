//! PostgreSQL's advisory lock functions (`pg_advisory_lock` and its `_shared`, `try_` and
//! `_xact_` forms, `pg_advisory_unlock[_shared]`, `pg_advisory_unlock_all`), on the engine's
//! lock table ([`quire_engine::Transaction::advisory_lock`]).

use quire_engine::{AdvisoryKey, AdvisoryRequest, Value};

use crate::context::Cx;
use crate::error::Result;
use crate::types::SqlType as T;

/// Which advisory function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Advisory {
    /// `pg_[try_]advisory[_xact]_lock[_shared]`.
    Lock {
        shared: bool,
        session: bool,
        try_only: bool,
    },
    /// `pg_advisory_unlock[_shared]`.
    Unlock { shared: bool },
    /// `pg_advisory_unlock_all()`.
    UnlockAll,
}

/// The function `name` with `n` arguments, if it is an advisory one: what it is, its
/// argument types (one `bigint` key or two `int4` keys) and its result type.
pub(crate) fn lookup(name: &str, n: usize) -> Option<(Advisory, Vec<Option<T>>, T)> {
    if name == "pg_advisory_unlock_all" {
        return (n == 0).then(|| (Advisory::UnlockAll, vec![], T::Void));
    }
    let args = match n {
        1 => vec![Some(T::Int8)],
        2 => vec![Some(T::Int4), Some(T::Int4)],
        _ => return None,
    };
    let rest = name.strip_prefix("pg_")?;
    let (try_only, rest) = match rest.strip_prefix("try_") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let rest = rest.strip_prefix("advisory_")?;
    let (shared, rest) = match rest.strip_suffix("_shared") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let f = match (rest, try_only) {
        ("lock", _) => Advisory::Lock {
            shared,
            session: true,
            try_only,
        },
        ("xact_lock", _) => Advisory::Lock {
            shared,
            session: false,
            try_only,
        },
        ("unlock", false) => Advisory::Unlock { shared },
        _ => return None,
    };
    let result = match f {
        Advisory::Lock {
            try_only: false, ..
        } => T::Void,
        _ => T::Bool,
    };
    Some((f, args, result))
}

/// Runs `f` on `args` (strict: a NULL key gives NULL).
pub(crate) fn call(cx: &Cx, f: Advisory, args: &[Value]) -> Result<Value> {
    let void = || Value::Text(String::new());
    if f == Advisory::UnlockAll {
        cx.tx.advisory_unlock_all();
        return Ok(void());
    }
    let Some(key) = key(args) else {
        return Ok(Value::Null);
    };
    Ok(match f {
        Advisory::Lock {
            shared,
            session,
            try_only,
        } => {
            let req = AdvisoryRequest {
                key,
                shared,
                session,
                try_only,
            };
            let got = cx.tx.advisory_lock(req)?;
            if try_only {
                Value::Bool(got)
            } else {
                void()
            }
        }
        // PostgreSQL also warns "you don't own a lock of type ..." when it returns false.
        Advisory::Unlock { shared } => Value::Bool(cx.tx.advisory_unlock(key, shared)),
        Advisory::UnlockAll => void(),
    })
}

/// The key from one `bigint` or two `int4` arguments; `None` if one is NULL.
fn key(args: &[Value]) -> Option<AdvisoryKey> {
    match args {
        [k] => k.as_int().map(AdvisoryKey::Bigint),
        [hi, lo] => {
            let hi = i32::try_from(hi.as_int()?).ok()?;
            let lo = i32::try_from(lo.as_int()?).ok()?;
            Some(AdvisoryKey::Pair(hi, lo))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_their_forms() {
        let (f, args, result) = lookup("pg_try_advisory_xact_lock_shared", 2).unwrap();
        assert_eq!(
            f,
            Advisory::Lock {
                shared: true,
                session: false,
                try_only: true
            }
        );
        assert_eq!(args.len(), 2);
        assert_eq!(result, T::Bool);
        let (f, _, result) = lookup("pg_advisory_lock", 1).unwrap();
        assert_eq!(
            f,
            Advisory::Lock {
                shared: false,
                session: true,
                try_only: false
            }
        );
        assert_eq!(result, T::Void);
        assert_eq!(
            lookup("pg_advisory_unlock_shared", 1).map(|l| l.0),
            Some(Advisory::Unlock { shared: true })
        );
        assert!(lookup("pg_try_advisory_unlock", 1).is_none());
        assert!(lookup("pg_advisory_lock", 3).is_none());
        assert!(lookup("pg_advisory_unlock_all", 1).is_none());
        assert!(lookup("pg_advisory_locks", 1).is_none());
    }
}
