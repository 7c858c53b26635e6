//! The session's plan cache: a statement sent through the extended protocol is bound once
//! and its plan kept (PostgreSQL's generic plan of a prepared statement), keyed by the
//! statement's text and the parameter types the client declared. The plan is generic in its
//! parameters: their values reach it only at execution.
//!
//! ## Rules
//! - A plan is valid while the catalog's generation
//!   ([`Database::catalog_generation`](quire_engine::Database::catalog_generation)) equals
//!   the one read *before* it was bound: a definition that changed meanwhile, in this session
//!   or another, makes the next execution bind again. The engine moves the generation when a
//!   DDL writes the catalog and again when its transaction ends, before its locks go.
//! - The cache holds at most [`MAX_CACHED_PLANS`]; beyond it the least recently used plan
//!   goes. Its memory is bounded by that count, not by what clients send.
//! - Only statements that bound without error are kept; transaction control and the
//!   utility commands are never bound, so never kept.
//! - Beside the plans, the table definitions binding read ([`TableCache`]), under the same
//!   rule of the generation read before binding.
//! - And the shapes of simple-protocol statements ([`crate::shape`]): each shape's parsed
//!   statement, or the refusal of a shape that does not bind as a prepared statement, both
//!   kept only while the generation stands still, as plans are (a changed definition may
//!   make a shape bind, or bind with other parameter types). At most [`MAX_CACHED_PLANS`]
//!   shapes; a full store starts over.

use std::cell::RefCell;

use crate::settings::PlannerSwitches;
use std::sync::Arc;

use quire_engine::FxHashMap;

use crate::analyze::Bound;
use crate::catalog::TableCache;
use crate::parse::Statement;
use crate::types::SqlType;

/// Most plans one session keeps.
pub(crate) const MAX_CACHED_PLANS: usize = 256;

struct Entry {
    hints: Vec<SqlType>,
    generation: u64,
    bound: Arc<Bound>,
    last_used: u64,
}

#[derive(Default)]
pub(crate) struct PlanCache {
    entries: FxHashMap<Arc<str>, Entry>,
    /// The tables binding has read, for statements bound anew (the simple protocol's).
    pub tables: RefCell<TableCache>,
    /// A counter of lookups and insertions, the entries' clock for least-recently-used eviction.
    clock: u64,
    /// Simple-protocol statement shapes, by shape text, with the generation they were
    /// learned at (see the rules).
    shapes: FxHashMap<String, (u64, KnownShape)>,
    /// The planner switches the kept plans were made with.
    switches: PlannerSwitches,
}

/// What the session learned of a shape.
#[derive(Clone)]
pub(crate) enum KnownShape {
    /// It binds as a prepared statement: this one.
    Parsed(Arc<Statement>),
    /// It does not bind so: the statement runs as written.
    Refused,
}

impl PlanCache {
    /// Plans from now on are made with `switches`: the kept ones go when they differ from
    /// those the plans were made with (SET enable_hashjoin = off plans again).
    pub fn use_switches(&mut self, switches: PlannerSwitches) {
        if self.switches != switches {
            self.switches = switches;
            self.entries.clear();
        }
    }

    /// Forgets every kept plan and shape (DISCARD PLANS).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.shapes.clear();
    }

    /// The plan kept for `text` with these parameter hints, if still valid at `generation`.
    pub fn get(&mut self, text: &str, hints: &[SqlType], generation: u64) -> Option<Arc<Bound>> {
        self.clock += 1;
        let e = self.entries.get_mut(text)?;
        if e.generation != generation || e.hints != hints {
            return None;
        }
        e.last_used = self.clock;
        Some(Arc::clone(&e.bound))
    }

    /// Keeps `bound`, bound at catalog generation `generation`.
    pub fn put(&mut self, text: &str, hints: &[SqlType], generation: u64, bound: Arc<Bound>) {
        self.clock += 1;
        if self.entries.len() >= MAX_CACHED_PLANS && !self.entries.contains_key(text) {
            self.evict_oldest();
        }
        let entry = Entry {
            hints: hints.to_vec(),
            generation,
            bound,
            last_used: self.clock,
        };
        self.entries.insert(Arc::from(text), entry);
        assert!(
            self.entries.len() <= MAX_CACHED_PLANS,
            "plan cache over its bound"
        );
    }

    /// What is known of shape `text` at catalog generation `generation`.
    pub fn shape(&self, text: &str, generation: u64) -> Option<KnownShape> {
        let (learned_at, known) = self.shapes.get(text)?;
        (*learned_at == generation).then(|| known.clone())
    }

    /// Keeps what was learned of shape `text` at catalog generation `generation` (read
    /// before it was learned).
    pub fn put_shape(&mut self, text: &str, generation: u64, known: KnownShape) {
        if self.shapes.len() >= MAX_CACHED_PLANS && !self.shapes.contains_key(text) {
            self.shapes.clear();
        }
        self.shapes.insert(text.to_string(), (generation, known));
        assert!(
            self.shapes.len() <= MAX_CACHED_PLANS,
            "shape store over its bound"
        );
    }

    fn evict_oldest(&mut self) {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, e)| e.last_used)
            .map(|(k, _)| Arc::clone(k));
        if let Some(k) = oldest {
            self.entries.remove(&k);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::Plan;

    fn bound() -> Arc<Bound> {
        Arc::new(Bound {
            plan: Plan::Show("all".into()),
            params: Vec::new(),
            out: Arc::new([]),
        })
    }

    #[test]
    fn a_plan_is_kept_per_text_hints_and_generation() {
        let mut c = PlanCache::default();
        c.put("select 1", &[], 7, bound());
        assert!(c.get("select 1", &[], 7).is_some());
        assert!(
            c.get("select 1", &[], 8).is_none(),
            "a new generation binds again"
        );
        assert!(c.get("select 1", &[SqlType::Int4], 7).is_none());
        assert!(c.get("select 2", &[], 7).is_none());
    }

    #[test]
    fn the_least_recently_used_plan_goes_beyond_the_bound() {
        let mut c = PlanCache::default();
        for i in 0..MAX_CACHED_PLANS {
            c.put(&format!("q{i}"), &[], 1, bound());
        }
        assert!(
            c.get("q0", &[], 1).is_some(),
            "q0 used: q1 is now the oldest"
        );
        c.put("new", &[], 1, bound());
        assert_eq!(c.len(), MAX_CACHED_PLANS);
        assert!(c.get("q0", &[], 1).is_some());
        assert!(c.get("q1", &[], 1).is_none());
        assert!(c.get("new", &[], 1).is_some());
    }
}
