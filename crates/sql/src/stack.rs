//! The stack: PostgreSQL's `max_stack_depth` and `check_stack_depth()`. A statement is a
//! tree (of syntax, of bound expressions, of plan nodes) and this crate walks trees by
//! recursion; a client chooses the tree's depth. Recursion that goes too deep fails the
//! statement with 54001 `stack depth limit exceeded`, as in PostgreSQL, and never overflows
//! the thread's stack (which would abort the whole server).
//!
//! ## Rules
//! - Every recursive function of this crate (parse helpers, the binder's walk of a syntax
//!   tree, plan building, expression evaluation, plan execution, EXPLAIN, the catalog views)
//!   calls [`check_stack_depth`] first. A walk that cannot fail (`Expr::visit`) is written
//!   as a loop over an explicit stack instead.
//! - [`check_stack_depth`] measures the real stack twice: (1) the bytes used since the base
//!   the outermost [`enter`] of this thread recorded (PostgreSQL's `stack_base_ptr`), against
//!   the session's `max_stack_depth`; (2) the bytes left on the thread's own stack
//!   (`stacker::remaining_stack`, from the thread's bounds), against [`STACK_SLOP_BYTES`].
//!   The second holds on a thread of any size, whatever `max_stack_depth` says; on a
//!   thread of [`SESSION_STACK_BYTES`] the first fails first.
//! - Between two checks, code may use at most [`STACK_SLOP_BYTES`] (the engine's calls,
//!   `sqlparser`'s own recursion, which grows its own stack when it runs short, formatting,
//!   sorting, regular expressions).
//! - Trees are dropped without recursion: the bound [`crate::nodes::Expr`] and the plan
//!   [`crate::nodes::Node`] take their children apart on an explicit stack when dropped.
//!   `sqlparser`'s trees cannot be given that (they are its types): `crate::parse` bounds
//!   their depth before parsing (`MAX_SYNTAX_DEPTH`), so that dropping the deepest one it
//!   lets through fits the session's stack (see [`SESSION_STACK_BYTES`]).
//! - The server runs each session on a thread of [`SESSION_STACK_BYTES`]. In-process tests
//!   that send deep statements do the same ([`run_on_session_stack`]). On a smaller thread
//!   (the test harness's 2 MiB) every statement still ends without overflow, only sooner:
//!   check (2) answers 54001 before the stack runs out, and `crate::parse` bounds a tree's
//!   depth by what the stack left can drop (about 10,000 levels on 2 MiB, 200,000 on a
//!   session's stack).

use std::cell::Cell;

use crate::error::SqlError;
use quire_engine::SqlState;

/// PostgreSQL's default `max_stack_depth`: 2MB.
pub const DEFAULT_MAX_STACK_DEPTH_KB: u64 = 2048;

/// The smallest `max_stack_depth` SET accepts (PostgreSQL's).
pub const MIN_MAX_STACK_DEPTH_KB: u64 = 100;

/// Stack every check leaves unused for the code that runs until the next check (PostgreSQL
/// asks the platform's stack for 512kB more than `max_stack_depth`, its `STACK_DEPTH_SLOP`).
pub const STACK_SLOP_BYTES: usize = 512 << 10;

/// The stack of a session's thread. Its size covers the two things that may run deep on it,
/// never at the same time:
/// - checked recursion (binding, planning, execution) up to the largest `max_stack_depth`
///   ([`MAX_MAX_STACK_DEPTH_KB`]), plus [`STACK_SLOP_BYTES`] for what runs between checks;
/// - dropping the deepest `sqlparser` tree `crate::parse` accepts: at most
///   `MAX_SYNTAX_DEPTH` (200,000) levels at under 128 bytes each (measured: 96 bytes a level
///   in a debug build, 64 in a release build, for chains of operators, casts and UNIONs),
///   so under 25.6 MB, which happens when the statement is dropped, outside any recursion.
///
/// Both fit in 32 MiB. The stack is reserved address space: a session touches only the
/// pages it uses.
pub const SESSION_STACK_BYTES: usize = 32 << 20;

/// The largest `max_stack_depth` SET accepts: the session stack less the slop, as
/// PostgreSQL allows the platform's stack limit less its slop.
pub const MAX_MAX_STACK_DEPTH_KB: u64 = ((SESSION_STACK_BYTES - STACK_SLOP_BYTES) >> 10) as u64;

thread_local! {
    /// The address the outermost [`enter`] of this thread recorded; 0 outside one.
    static BASE: Cell<usize> = const { Cell::new(0) };
    /// The `max_stack_depth` of the session that entered, in bytes.
    static LIMIT_BYTES: Cell<usize> = const { Cell::new(0) };
}

/// The address of a local of the caller's frame (the stack grows down on every platform
/// quire runs on).
#[inline]
fn here() -> usize {
    let marker = 0u8;
    std::ptr::from_ref(std::hint::black_box(&marker)) as usize
}

/// The work of a session starts on this thread (a statement, a Parse, a Describe):
/// `max_stack_depth_bytes` applies to what runs until the returned guard drops. The
/// outermost call records the base the stack's use is measured from; a nested call (a
/// statement inside a query string) keeps the outer base and limit.
#[must_use = "the base is forgotten when the guard drops"]
pub(crate) fn enter(max_stack_depth_bytes: usize) -> StackBase {
    let outermost = BASE.with(Cell::get) == 0;
    if outermost {
        BASE.with(|b| b.set(here()));
        LIMIT_BYTES.with(|l| l.set(max_stack_depth_bytes));
    }
    StackBase { outermost }
}

/// Forgets the base recorded by the outermost [`enter`] when dropped.
pub(crate) struct StackBase {
    outermost: bool,
}

impl Drop for StackBase {
    fn drop(&mut self) {
        if self.outermost {
            BASE.with(|b| b.set(0));
            LIMIT_BYTES.with(|l| l.set(0));
        }
    }
}

/// PostgreSQL's `check_stack_depth()`: fails with 54001 when the stack used since the
/// session's base exceeds `max_stack_depth`, or when less than [`STACK_SLOP_BYTES`] of the
/// thread's stack is left.
#[inline]
pub(crate) fn check_stack_depth() -> Result<(), SqlError> {
    let base = BASE.with(Cell::get);
    let limit = LIMIT_BYTES.with(Cell::get);
    let used = if base == 0 {
        0
    } else {
        base.saturating_sub(here())
    };
    let short = stacker::remaining_stack().is_some_and(|left| left < STACK_SLOP_BYTES);
    if (base != 0 && used > limit) || short {
        return Err(too_deep());
    }
    Ok(())
}

/// 54001 with PostgreSQL's words and the `max_stack_depth` in force.
pub(crate) fn too_deep() -> SqlError {
    let limit = match LIMIT_BYTES.with(Cell::get) {
        0 => DEFAULT_MAX_STACK_DEPTH_KB,
        bytes => (bytes >> 10) as u64,
    };
    SqlError::new(SqlState::STATEMENT_TOO_COMPLEX, "stack depth limit exceeded").with_hint(format!(
        "Increase the configuration parameter \"max_stack_depth\" (currently {limit}kB), after ensuring the platform's stack depth limit is adequate."
    ))
}

/// Runs `f` on a new thread with a session's stack ([`SESSION_STACK_BYTES`]), as the server
/// runs a session: for tools and tests that run statements in-process.
pub fn run_on_session_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("quire-session".into())
            .stack_size(SESSION_STACK_BYTES)
            .spawn_scoped(s, f)
            .expect("a thread for the session")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recurses until the check fails, noting the deepest address reached.
    fn probe(deepest: &mut usize) -> Result<(), SqlError> {
        check_stack_depth()?;
        *deepest = (*deepest).min(here());
        let pad = std::hint::black_box([0u8; 256]);
        probe(deepest)?;
        std::hint::black_box(pad);
        Ok(())
    }

    #[test]
    fn recursion_stops_at_max_stack_depth_on_a_session_stack() {
        let (e, used_kb) = run_on_session_stack(|| {
            let _base = enter(1 << 20);
            let start = here();
            let mut deepest = start;
            let e = probe(&mut deepest).unwrap_err();
            (e, (start - deepest) >> 10)
        });
        assert_eq!(e.sqlstate(), "54001");
        assert_eq!(
            e.hint(),
            Some("Increase the configuration parameter \"max_stack_depth\" (currently 1024kB), after ensuring the platform's stack depth limit is adequate.")
        );
        assert!((900..=1024).contains(&used_kb), "{used_kb}kB used");
    }

    #[test]
    fn a_small_thread_stops_before_its_end_whatever_the_limit() {
        // 1 MiB of stack (or the larger one the C library hands out again), max_stack_depth
        // far above it: the remaining-stack check answers, with the slop left.
        let (e, left_kb) = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(|| {
                let _base = enter(MAX_MAX_STACK_DEPTH_KB as usize * 1024);
                let mut deepest = here();
                let e = probe(&mut deepest).unwrap_err();
                let left = stacker::remaining_stack().unwrap_or(0);
                (e, (left - (here() - deepest)) >> 10)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(e.sqlstate(), "54001");
        let slop_kb = STACK_SLOP_BYTES >> 10;
        assert!(
            (slop_kb - 8..=slop_kb).contains(&left_kb),
            "{left_kb}kB left"
        );
    }

    #[test]
    fn the_outermost_entry_owns_the_base() {
        let outer = enter(4096);
        let before = BASE.with(Cell::get);
        {
            let _inner = enter(1);
            assert_eq!(BASE.with(Cell::get), before);
            assert_eq!(LIMIT_BYTES.with(Cell::get), 4096);
        }
        assert_eq!(BASE.with(Cell::get), before);
        drop(outer);
        assert_eq!(BASE.with(Cell::get), 0);
    }
}
