//! Pruning a heap page: removing the versions no snapshot can see any more (PostgreSQL's
//! `heap_page_prune`).
//!
//! A version is *dead to all* when its inserter aborted, or when a committed transaction
//! below the horizon (the oldest transaction any snapshot may still treat as running) deleted
//! or updated it. Versions are removed chain by chain. A HOT chain starts at a *root* — a
//! version indexes point at, or a redirect left by an earlier pruning — and continues through
//! heap-only versions on the same page. When the chain's first versions are dead:
//!
//! - all of it dead: the root's line pointer becomes *dead* (no storage; vacuum's index pass
//!   removes the index entries pointing at it, then marks it unused), its heap-only versions
//!   become unused at once (no index points at them);
//! - a dead prefix: the root becomes a *redirect* to the first live version, so index
//!   entries keep working; the dead heap-only versions become unused.
//!
//! Heap-only versions no chain reaches (the new version of an update that aborted) become
//! unused when dead. Then the page is compacted; item numbers never change.
//!
//! ## Hints
//! Deciding, pruning learns whether the first live version of each chain was inserted by a
//! committed transaction. When it was, below the horizon, and the version lacks the
//! `XMIN_COMMITTED` hint, the decision sets it ([`Prune::hinted`]), as freezing does: the
//! next pruning of the page (an update of a full page prunes it every time) and every reader
//! then skip the commit-log lookup for it. Hints ride in the pruning's own record, so redo
//! sets them too and the page stays the same byte for byte; a decision that prunes nothing
//! logs nothing and sets no hint (a page change needs a record: every page has a checksum).
//!
//! ## Rules
//! - Under the page's exclusive content lock. No cleanup lock (PostgreSQL's) is needed:
//!   quire's readers copy what they need out of a page before releasing its content lock,
//!   and nobody keeps a pointer into a heap page.
//! - The changes are decided first ([`Prune`]), then applied by [`apply`], the same function
//!   redo runs, so the page redo rebuilds is the same byte for byte.

use super::tuple::{add_hints, TupleHeader, HEAP_ONLY, HOT_UPDATED, XMIN_COMMITTED};
use super::XidOracle;
use crate::error::Result;
use crate::page::{ItemState, OffsetNumber, Page, PageMut};
use crate::types::{PAGE_SIZE, Xid};

/// What pruning a page changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prune {
    /// (root, first live version): the root becomes a redirect.
    pub redirected: Vec<(OffsetNumber, OffsetNumber)>,
    /// Roots whose whole chain died: their line pointers become dead.
    pub dead: Vec<OffsetNumber>,
    /// Heap-only versions that died: their line pointers become unused.
    pub unused: Vec<OffsetNumber>,
    /// Live versions whose inserter committed below the horizon: they get `XMIN_COMMITTED`.
    pub hinted: Vec<OffsetNumber>,
}

impl Prune {
    /// Whether the decision removes nothing (hints alone are not worth a record).
    pub fn is_empty(&self) -> bool {
        self.redirected.is_empty() && self.dead.is_empty() && self.unused.is_empty()
    }
}

/// What pruning makes of one version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Dead,
    /// Some snapshot may see it; `hint`: its inserter committed below the horizon and the
    /// version lacks `XMIN_COMMITTED`.
    Live { hint: bool },
}

/// Whether transactions have finished, and how, as seen from `horizon`.
struct Judge<'a> {
    oracle: &'a dyn XidOracle,
    horizon: Xid,
}

impl Judge<'_> {
    /// `Some(committed)` for a finished transaction, `None` for a running one. Below the
    /// horizon nothing runs, so the process array is asked only above it.
    fn finished(&self, xid: Xid) -> Result<Option<bool>> {
        if xid >= self.horizon && self.oracle.is_running(xid) {
            return Ok(None);
        }
        Ok(Some(self.oracle.did_commit(xid)?))
    }

    fn dead_to_all(&self, h: &TupleHeader) -> Result<bool> {
        Ok(self.fate(h)? == Fate::Dead)
    }

    /// Whether `h` is dead to all, and if not, whether it may get the `XMIN_COMMITTED`
    /// hint (its inserter committed below the horizon): one status lookup per id for both.
    fn fate(&self, h: &TupleHeader) -> Result<Fate> {
        let hinted = h.infomask & XMIN_COMMITTED != 0;
        let inserter = if hinted {
            Some(true) // frozen: committed below an earlier horizon
        } else {
            self.finished(h.xmin)?
        };
        let live = Fate::Live {
            hint: !hinted && h.xmin < self.horizon,
        };
        match inserter {
            None => return Ok(Fate::Live { hint: false }),
            Some(false) => return Ok(Fate::Dead), // inserted by an aborted transaction
            Some(true) => {}
        }
        if !h.xmax_is_deleter() || h.xmax >= self.horizon {
            return Ok(live);
        }
        Ok(if self.finished(h.xmax)? == Some(true) {
            Fate::Dead
        } else {
            live
        })
    }

    /// Did the updater of `h` abort (so its new version is garbage, not a chain member)?
    fn updater_aborted(&self, h: &TupleHeader) -> Result<bool> {
        Ok(self.finished(h.xmax)? == Some(false))
    }
}

fn header(page: Page<'_>, off: OffsetNumber) -> Option<TupleHeader> {
    page.item(off).and_then(TupleHeader::read)
}

/// The versions of the chain whose root line pointer is `root`, in order, into `out`
/// (cleared first: one buffer serves every chain of a page, so pruning does not allocate per
/// chain).
fn chain(
    page: Page<'_>,
    block: u32,
    root: OffsetNumber,
    judge: &Judge<'_>,
    out: &mut Vec<OffsetNumber>,
) -> Result<()> {
    out.clear();
    let Some(id) = page.item_id(root) else {
        return Ok(());
    };
    let mut cur = match id.state {
        ItemState::Redirect => id.offset,
        ItemState::Normal => root,
        ItemState::Dead | ItemState::Unused => return Ok(()),
    };
    // Bounded: a chain visits each item of the page at most once.
    for _ in 0..=page.item_count() {
        let Some(h) = header(page, cur) else { break };
        let is_member = if cur == root {
            h.infomask & HEAP_ONLY == 0
        } else {
            h.infomask & HEAP_ONLY != 0
        };
        if !is_member || out.contains(&cur) {
            break;
        }
        out.push(cur);
        if h.infomask & HOT_UPDATED == 0 || h.ctid.block != block || judge.updater_aborted(&h)? {
            break;
        }
        let next = h.ctid.offset;
        match header(page, next) {
            Some(n) if n.xmin == h.xmax => cur = next,
            _ => break,
        }
    }
    Ok(())
}

/// Every chain root of page `block` with its versions not dead to all below `horizon`
/// (those some snapshot may still see), in chain order; chains with none are left out.
pub fn live_chains(
    page: &[u8; PAGE_SIZE],
    block: u32,
    oracle: &dyn XidOracle,
    horizon: Xid,
) -> Result<Vec<(OffsetNumber, Vec<OffsetNumber>)>> {
    let page = Page::new(page);
    let judge = Judge { oracle, horizon };
    let mut out = Vec::new();
    let mut members = Vec::new();
    for off in 1..=page.item_count() {
        let Some(id) = page.item_id(off) else { break };
        let is_root = match id.state {
            ItemState::Redirect => true,
            ItemState::Normal => header(page, off).is_some_and(|h| h.infomask & HEAP_ONLY == 0),
            ItemState::Dead | ItemState::Unused => false,
        };
        if !is_root {
            continue;
        }
        let mut live = Vec::new();
        chain(page, block, off, &judge, &mut members)?;
        for &m in &members {
            let h = header(page, m).expect("chain members are tuples");
            if !judge.dead_to_all(&h)? {
                live.push(m);
            }
        }
        if !live.is_empty() {
            out.push((off, live));
        }
    }
    Ok(out)
}

/// Decides what pruning page `block` removes, given the horizon.
pub fn decide(
    page: &[u8; PAGE_SIZE],
    block: u32,
    oracle: &dyn XidOracle,
    horizon: Xid,
) -> Result<Prune> {
    let page = Page::new(page);
    let judge = Judge { oracle, horizon };
    let n = page.item_count();
    let mut reached = vec![false; usize::from(n) + 1];
    let mut members = Vec::new();
    let mut prune = Prune::default();
    for off in 1..=n {
        let Some(id) = page.item_id(off) else { break };
        let is_root = match id.state {
            ItemState::Redirect => true,
            ItemState::Normal => header(page, off).is_some_and(|h| h.infomask & HEAP_ONLY == 0),
            ItemState::Dead | ItemState::Unused => false,
        };
        if !is_root {
            continue;
        }
        chain(page, block, off, &judge, &mut members)?;
        for &m in &members {
            reached[usize::from(m)] = true;
        }
        let mut dead_prefix = 0;
        for &m in &members {
            let h = header(page, m).expect("chain members are tuples");
            if let Fate::Live { hint } = judge.fate(&h)? {
                if hint {
                    prune.hinted.push(m);
                }
                break;
            }
            dead_prefix += 1;
        }
        if members.is_empty() {
            // A redirect whose target vanished: nothing lives behind it any more.
            prune.dead.push(off);
            continue;
        }
        if dead_prefix == 0 {
            continue;
        }
        let heap_only_dead = members[..dead_prefix].iter().filter(|&&m| m != off);
        prune.unused.extend(heap_only_dead);
        if dead_prefix == members.len() {
            prune.dead.push(off);
        } else if members[dead_prefix] != off {
            prune.redirected.push((off, members[dead_prefix]));
        }
    }
    // Heap-only versions no chain reached: leftovers of aborted updates.
    for off in 1..=n {
        if reached[usize::from(off)] {
            continue;
        }
        if let Some(h) = header(page, off) {
            if h.infomask & HEAP_ONLY != 0 && judge.dead_to_all(&h)? {
                prune.unused.push(off);
            }
        }
    }
    Ok(prune)
}

/// Applies a pruning decision to a page and compacts it; the same for the primary and redo.
/// `false` if the decision does not fit the page (a malformed record).
pub fn apply(page: &mut [u8; PAGE_SIZE], prune: &Prune) -> bool {
    let mut p = PageMut::new(page);
    let ok = prune
        .redirected
        .iter()
        .all(|&(from, to)| p.set_redirect(from, to))
        && prune.dead.iter().all(|&off| p.set_dead(off))
        && prune.unused.iter().all(|&off| p.mark_unused(off));
    let ok = ok && prune.hinted.iter().all(|&off| set_xmin_committed(page, off));
    ok && PageMut::new(page).repair_fragmentation().is_ok()
}

/// Sets the `XMIN_COMMITTED` hint of the version at `off`; `false` if there is none, or it
/// is marked as inserted by an aborted transaction (`XMIN_INVALID`).
fn set_xmin_committed(page: &mut [u8; PAGE_SIZE], off: OffsetNumber) -> bool {
    if Page::new(page).item_id(off).map(|id| id.state) != Some(ItemState::Normal) {
        return false;
    }
    PageMut::new(page)
        .item_mut(off)
        .is_some_and(|item| add_hints(item, XMIN_COMMITTED))
}

/// The WAL form of a decision: four counted lists of item numbers (redirected pairs, dead,
/// unused, hinted). Records written before hints existed end after the third list.
pub fn encode(prune: &Prune, out: &mut Vec<u8>) {
    out.extend_from_slice(&(prune.redirected.len() as u16).to_le_bytes());
    for (from, to) in &prune.redirected {
        out.extend_from_slice(&from.to_le_bytes());
        out.extend_from_slice(&to.to_le_bytes());
    }
    for list in [&prune.dead, &prune.unused, &prune.hinted] {
        out.extend_from_slice(&(list.len() as u16).to_le_bytes());
        for off in list {
            out.extend_from_slice(&off.to_le_bytes());
        }
    }
}

/// Decodes [`encode`]; `None` on anything malformed.
pub fn decode(b: &[u8]) -> Option<Prune> {
    let mut r = crate::bytes::Reader::new(b);
    let mut prune = Prune::default();
    let n = r.u16()?;
    for _ in 0..n {
        prune.redirected.push((r.u16()?, r.u16()?));
    }
    let before_hints = |r: &crate::bytes::Reader<'_>| r.remaining() == 0;
    for (i, list) in [&mut prune.dead, &mut prune.unused, &mut prune.hinted]
        .into_iter()
        .enumerate()
    {
        if i == 2 && before_hints(&r) {
            break; // a record written before hints existed
        }
        let n = r.u16()?;
        for _ in 0..n {
            list.push(r.u16()?);
        }
    }
    r.done()?;
    Some(prune)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::tuple::build;
    use crate::heap::visibility::tests::header;
    use crate::page::Tid;

    #[test]
    fn records_from_before_hints_decode_without_them() {
        let decision = Prune {
            redirected: vec![(1, 3)],
            dead: vec![2],
            unused: vec![4, 5],
            hinted: vec![3],
        };
        let mut bytes = Vec::new();
        encode(&decision, &mut bytes);
        assert_eq!(decode(&bytes), Some(decision.clone()));
        // The old form ends after the unused list (its count was the last field).
        let old = &bytes[..bytes.len() - 4];
        let expected = Prune {
            hinted: Vec::new(),
            ..decision
        };
        assert_eq!(decode(old), Some(expected));
        // A hint list cut short is malformed, not old.
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
    }

    #[test]
    fn a_hint_must_name_a_version() {
        let mut page = [0u8; PAGE_SIZE];
        let mut p = PageMut::new(&mut page);
        p.init(0);
        let mut h = header(10, 0, 0);
        h.ctid = Tid::new(0, 1);
        p.add_item(&build(&h, &[]), None).expect("room");
        let hint = |off| Prune {
            hinted: vec![off],
            ..Prune::default()
        };
        let mut bad = page;
        assert!(!apply(&mut bad, &hint(2)), "no item 2");
        let dead_and_hinted = Prune {
            dead: vec![1],
            hinted: vec![1],
            ..Prune::default()
        };
        assert!(!apply(&mut bad, &dead_and_hinted), "a dead pointer has no version");
        assert!(apply(&mut page, &hint(1)));
        let item = Page::new(&page).item(1).expect("item 1");
        let hinted = TupleHeader::read(item).expect("a version");
        assert_eq!(hinted.infomask & XMIN_COMMITTED, XMIN_COMMITTED);
    }
}
