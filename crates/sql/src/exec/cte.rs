//! Common table expressions: [`Node::With`] materializes its CTEs, [`Node::CteScan`] reads
//! one, and [`Node::RecursiveUnion`] evaluates a recursive one over its working table as
//! PostgreSQL's nodeRecursiveunion.c does.
//!
//! ## Rules
//! - An initplan (a subquery that reads no enclosing row) is computed once per statement,
//!   at its first read, and kept in the same store.
//! - A materialized CTE is computed once per run of its query level, to completion, before
//!   the level's rows are read; its rows live in the statement's [`crate::context::CteStore`]
//!   and each scan reads them from the start.
//! - A recursive union gives its rows as they are made (a LIMIT over an endless recursion
//!   stops it). Its working table and the rows a UNION remembers are bounded by
//!   `MAX_MATERIALIZED_ROWS`; each row checks the interrupt, so cancel and
//!   `statement_timeout` stop an endless one.

use std::collections::HashSet;
use std::rc::Rc;

use quire_engine::Row;

use super::run::{collect, open, too_many_rows, RowKey, Rows};
use crate::context::Cx;
use crate::error::{Result, SqlError};
use crate::nodes::{Cte, Node, MAX_MATERIALIZED_ROWS};

/// Computes each CTE of a query level in order (a CTE reads those before it), then opens
/// the level's rows.
pub(super) fn with<'a>(ctes: &'a [Cte], input: &'a Node, cx: &'a Cx<'a>) -> Result<Rows<'a>> {
    for cte in ctes {
        let rows = collect(open(&cte.plan, cx)?)?;
        cx.ctes.set(cte.id, Rc::new(rows));
    }
    open(input, cx)
}

/// An initplan's rows: `input`'s, computed at the statement's first read and replayed
/// from the store after.
pub(super) fn init_plan<'a>(id: usize, input: &'a Node, cx: &'a Cx<'a>) -> Result<Rows<'a>> {
    if cx.ctes.get(id).is_none() {
        let rows = collect(open(input, cx)?)?;
        cx.ctes.set(id, Rc::new(rows));
    }
    stored(id, cx)
}

/// The rows of CTE or working table `id`, as they were set.
pub(super) fn stored<'a>(id: usize, cx: &'a Cx<'a>) -> Result<Rows<'a>> {
    let rows = cx
        .ctes
        .get(id)
        .ok_or_else(|| SqlError::internal("a CTE scan ran before its CTE"))?;
    let mut next = 0;
    Ok(Box::new(std::iter::from_fn(move || {
        let row = rows.get(next)?.clone();
        next += 1;
        Some(cx.interrupt.check().map(|()| row))
    })))
}

/// A recursive union's rows, made as they are read.
struct Recursion<'a> {
    id: usize,
    step: &'a Node,
    cx: &'a Cx<'a>,
    /// The rows of the term running now (the non-recursive one first).
    current: Rows<'a>,
    /// The rows the running term gave, the next working table.
    next: Vec<Row>,
    /// Every row given so far, when UNION discards duplicates.
    seen: Option<HashSet<RowKey>>,
    done: bool,
}

pub(super) fn recursive_union<'a>(
    id: usize,
    distinct: bool,
    base: &'a Node,
    step: &'a Node,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let current = open(base, cx)?;
    Ok(Box::new(Recursion {
        id,
        step,
        cx,
        current,
        next: Vec::new(),
        seen: distinct.then(HashSet::new),
        done: false,
    }))
}

impl Recursion<'_> {
    /// The next row of the running term that is new, or `None` when the term is over.
    fn next_of_term(&mut self) -> Result<Option<Row>> {
        for row in self.current.by_ref() {
            let row = row?;
            self.cx.interrupt.check()?;
            if let Some(seen) = &mut self.seen {
                if seen.len() >= MAX_MATERIALIZED_ROWS {
                    return Err(too_many_rows());
                }
                if !seen.insert(RowKey(row.clone())) {
                    continue;
                }
            }
            if self.next.len() >= MAX_MATERIALIZED_ROWS {
                return Err(too_many_rows());
            }
            self.next.push(row.clone());
            return Ok(Some(row));
        }
        Ok(None)
    }

    /// Starts the recursive term over the rows the last one gave; false when it gave none.
    fn start_step(&mut self) -> Result<bool> {
        if self.next.is_empty() {
            return Ok(false);
        }
        let working = std::mem::take(&mut self.next);
        self.cx.ctes.set(self.id, Rc::new(working));
        self.current = open(self.step, self.cx)?;
        Ok(true)
    }
}

impl Iterator for Recursion<'_> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        while !self.done {
            match self.next_of_term() {
                Ok(Some(row)) => return Some(Ok(row)),
                Ok(None) => match self.start_step() {
                    Ok(true) => {}
                    Ok(false) => self.done = true,
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                },
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}
