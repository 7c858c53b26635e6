//! Freezing a heap page: vacuum's hints that let the commit log forget old transactions
//! (PostgreSQL's `heap_prepare_freeze_tuple` / `heap_freeze_execute_prepared`).
//!
//! With 64-bit transaction ids nothing wraps around, so quire never replaces an id with a
//! frozen one; it only records, on the tuple, what the commit log said about it, so that the
//! commit log need not be asked again and its old segments can be removed
//! ([`crate::txn::TransactionManager::truncate_logs`]). For every version that pruning left,
//! with `horizon` the oldest id any snapshot may still treat as running:
//!
//! - `xmin` below the horizon, committed: the `XMIN_COMMITTED` hint is set;
//! - `xmax` below the horizon that deletes nothing (a finished locker, an aborted deleter or
//!   updater): `xmax` is cleared (0, `XMAX_INVALID`, not HOT-updated, `ctid` back to the
//!   version itself), as a version that was never deleted.
//!
//! An id below the horizon that neither rule covers (an aborted inserter, a committed
//! deleter: pruning removes both, so only a damaged page has one) is reported as *unfrozen*,
//! and the table's frozen bound stays below it.
//!
//! ## Rules
//! - Under the page's exclusive content lock, after pruning, WAL-logged (record `FREEZE`) with
//!   the same [`apply`] for the primary and redo.
//! - Before the page is marked all-visible: an all-visible page has every version frozen
//!   (a version's xmax may still name a locker, which the commit log is never asked about),
//!   so vacuum may skip it and still count the table frozen.

use super::tuple::{
    TupleHeader, HOT_UPDATED, XMAX_COMMITTED, XMAX_INVALID, XMAX_LOCK_ONLY, XMIN_COMMITTED,
};
use super::XidOracle;
use crate::error::Result;
use crate::page::{ItemState, OffsetNumber, Page, PageMut, Tid, FIRST_OFFSET_NUMBER};
use crate::types::{PAGE_SIZE, Xid};

/// One version's change: its new infomask, and whether its xmax is cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreezeTuple {
    pub offset: OffsetNumber,
    pub infomask: u16,
    pub clear_xmax: bool,
}

/// What freezing a page changes, and the oldest id below the horizon it could not cover.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Freeze {
    pub tuples: Vec<FreezeTuple>,
    pub oldest_unfrozen: Option<Xid>,
}

/// Did the inserter of `h` commit? The hint answers without the commit log.
pub fn xmin_committed(h: &TupleHeader, oracle: &dyn XidOracle) -> Result<bool> {
    if h.infomask & XMIN_COMMITTED != 0 {
        return Ok(true);
    }
    oracle.did_commit(h.xmin)
}

/// Decides the freezing of page `page` against `horizon` (see the module header).
pub fn decide(page: &[u8; PAGE_SIZE], horizon: Xid, oracle: &dyn XidOracle) -> Result<Freeze> {
    fn unfrozen(xid: Xid, out: &mut Freeze) {
        out.oldest_unfrozen = Some(out.oldest_unfrozen.map_or(xid, |o| o.min(xid)));
    }
    let p = Page::new(page);
    let mut out = Freeze::default();
    for offset in FIRST_OFFSET_NUMBER..=p.item_count() {
        if p.item_id(offset).map(|id| id.state) != Some(ItemState::Normal) {
            continue;
        }
        let Some(h) = p.item(offset).and_then(TupleHeader::read) else {
            continue; // not a tuple: the scan that follows reports it
        };
        let mut infomask = h.infomask;
        if h.xmin < horizon && h.infomask & XMIN_COMMITTED == 0 {
            if oracle.did_commit(h.xmin)? {
                infomask |= XMIN_COMMITTED;
            } else {
                unfrozen(h.xmin, &mut out);
            }
        }
        let mut clear_xmax = false;
        if h.xmax.is_valid() && h.xmax < horizon {
            // Below the horizon nothing runs: a locker is done, a deleter decided.
            if !h.xmax_is_deleter() || !oracle.did_commit(h.xmax)? {
                clear_xmax = true;
                infomask &= !(XMAX_LOCK_ONLY | XMAX_COMMITTED | HOT_UPDATED);
                infomask |= XMAX_INVALID;
            } else {
                unfrozen(h.xmax, &mut out);
            }
        }
        if infomask != h.infomask || clear_xmax {
            out.tuples.push(FreezeTuple {
                offset,
                infomask,
                clear_xmax,
            });
        }
    }
    Ok(out)
}

/// Applies the changes to page `block`; the same for the primary and redo. `false` if one
/// does not fit the page (a malformed record).
pub fn apply(page: &mut [u8; PAGE_SIZE], block: u32, tuples: &[FreezeTuple]) -> bool {
    for t in tuples {
        let Some(item) = PageMut::new(page).item_mut(t.offset) else {
            return false;
        };
        let Some(mut h) = TupleHeader::read(item) else {
            return false;
        };
        h.infomask = t.infomask;
        if t.clear_xmax {
            h.xmax = Xid::INVALID;
            h.ctid = Tid::new(block, t.offset);
        }
        // Freezing sets hints; it never makes a pair contradict itself.
        if !h.hints_are_consistent() || !h.fits() {
            return false;
        }
        h.write(item);
    }
    true
}

/// The WAL form: `n u16 | n × (offset u16, infomask u16, flags u8)`, flag 1 = xmax cleared.
pub fn encode(tuples: &[FreezeTuple]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 5 * tuples.len());
    out.extend_from_slice(&(tuples.len() as u16).to_le_bytes());
    for t in tuples {
        out.extend_from_slice(&t.offset.to_le_bytes());
        out.extend_from_slice(&t.infomask.to_le_bytes());
        out.push(u8::from(t.clear_xmax));
    }
    out
}

/// Decodes [`encode`]; `None` on anything malformed.
pub fn decode(b: &[u8]) -> Option<Vec<FreezeTuple>> {
    let mut r = crate::bytes::Reader::new(b);
    let n = r.u16()?;
    let tuples = (0..n)
        .map(|_| {
            let (offset, infomask, flags) = (r.u16()?, r.u16()?, r.u8()?);
            (flags <= 1 && infomask & !super::tuple::INFOMASK_BITS == 0).then_some(FreezeTuple {
                offset,
                infomask,
                clear_xmax: flags == 1,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    r.done()?;
    Some(tuples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::tuple::{build, HEAP_ONLY};
    use crate::heap::visibility::tests::header;
    use std::collections::HashMap;

    /// Ids below 100 have ended: even ones committed, odd ones aborted.
    struct Ended(HashMap<Xid, bool>);

    impl XidOracle for Ended {
        fn did_commit(&self, xid: Xid) -> Result<bool> {
            Ok(*self.0.get(&xid).expect("asked only about ended ids"))
        }
        fn is_running(&self, _: Xid) -> bool {
            false
        }
        fn horizon(&self) -> Xid {
            Xid(100)
        }
    }

    fn oracle() -> Ended {
        Ended((1..100).map(|x| (Xid(x), x % 2 == 0)).collect())
    }

    fn page_of(headers: &[TupleHeader]) -> [u8; PAGE_SIZE] {
        let mut page = [0u8; PAGE_SIZE];
        let mut p = PageMut::new(&mut page);
        p.init(0);
        for (i, h) in headers.iter().enumerate() {
            let mut h = *h;
            h.ctid = Tid::new(3, i as u16 + 1);
            p.add_item(&build(&h, &[]), None).expect("room");
        }
        page
    }

    #[test]
    fn old_ids_get_hints_and_old_non_deleters_are_cleared() {
        let mut page = page_of(&[
            header(10, 0, XMAX_INVALID),                  // 1: committed insert
            header(10, 21, XMAX_LOCK_ONLY),               // 2: a finished locker
            header(10, 23, HOT_UPDATED),                  // 3: an aborted updater
            header(10, 40, 0),                            // 4: a committed deleter (unfrozen)
            header(12, 150, 0),                           // 5: a deleter above the horizon
            header(150, 0, XMAX_INVALID | HEAP_ONLY),     // 6: inserted above the horizon
            header(10, 0, XMAX_INVALID | XMIN_COMMITTED), // 7: frozen already
        ]);
        let f = decide(&page, Xid(100), &oracle()).unwrap();
        assert_eq!(f.oldest_unfrozen, Some(Xid(40)));
        let changed: Vec<OffsetNumber> = f.tuples.iter().map(|t| t.offset).collect();
        assert_eq!(changed, vec![1, 2, 3, 4, 5]);
        assert!(apply(&mut page, 3, &f.tuples));
        let h = |off| TupleHeader::read(Page::new(&page).item(off).unwrap()).unwrap();
        assert_eq!(h(1).infomask, XMIN_COMMITTED | XMAX_INVALID);
        for off in [2, 3] {
            assert_eq!(
                (h(off).xmax, h(off).infomask),
                (Xid::INVALID, XMIN_COMMITTED | XMAX_INVALID)
            );
            assert_eq!(h(off).ctid, Tid::new(3, off));
        }
        assert_eq!((h(4).xmax, h(4).infomask), (Xid(40), XMIN_COMMITTED));
        assert_eq!((h(5).xmax, h(5).infomask), (Xid(150), XMIN_COMMITTED));
        assert_eq!(h(6).infomask, XMAX_INVALID | HEAP_ONLY);
        // Frozen, a second pass has nothing left to do but report the committed deleter.
        let again = decide(&page, Xid(100), &oracle()).unwrap();
        assert!(again.tuples.is_empty(), "{again:?}");
        assert_eq!(again.oldest_unfrozen, Some(Xid(40)));
        // An aborted inserter below the horizon (pruning removes it) is reported too.
        let page = page_of(&[header(11, 0, XMAX_INVALID)]);
        assert_eq!(
            decide(&page, Xid(100), &oracle()).unwrap().oldest_unfrozen,
            Some(Xid(11))
        );
    }

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let tuples = vec![
            FreezeTuple {
                offset: 1,
                infomask: XMIN_COMMITTED | XMAX_INVALID,
                clear_xmax: false,
            },
            FreezeTuple {
                offset: 7,
                infomask: XMIN_COMMITTED | XMAX_INVALID,
                clear_xmax: true,
            },
        ];
        let b = encode(&tuples);
        assert_eq!(decode(&b), Some(tuples));
        for cut in 0..b.len() {
            assert_eq!(decode(&b[..cut]), None, "cut at {cut}");
        }
        let mut bad_flag = b.clone();
        *bad_flag.last_mut().expect("not empty") = 9;
        assert_eq!(decode(&bad_flag), None);
    }
}
