//! `verify`: an amcheck-like structural check (PostgreSQL's `bt_index_parent_check`, without
//! the heap side). It walks every level left to right from its leftmost page.

use std::cmp::Ordering;
use std::collections::HashSet;

use super::key::{check_key, compare_tuples};
use super::page::{BtPage, Tuple, NO_BLOCK};
use super::BTree;
use crate::error::Result;
use crate::page::{Page, FIRST_OFFSET_NUMBER};
use crate::types::BlockNumber;

/// What [`BTree::verify`] found: counts of a structurally sound index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub root: BlockNumber,
    /// Levels of the tree (1: the root is a leaf).
    pub levels: u16,
    /// Pages per level, leaves first.
    pub pages_per_level: Vec<u64>,
    pub leaf_entries: u64,
    /// Downlinks in internal pages (minus-infinity ones included).
    pub internal_entries: u64,
    /// Pages that no parent points at: splits whose downlink a crash lost or that are still
    /// being finished; reached through their left sibling's right-link (tolerated).
    pub missing_downlinks: u64,
    /// Blocks never initialised (a split or build extended the file, then crashed before
    /// logging the page): unused, harmless.
    pub new_pages: u64,
    /// Initialised pages on no level: left by a build a crash interrupted (the index then
    /// belongs to a transaction that never committed).
    pub unreachable_pages: u64,
}

/// A downlink the walk of the level above expects to find, in order.
struct Expected {
    child: BlockNumber,
    /// The child's lower bound: the pivot (`None`: minus infinity, the leftmost page).
    lower: Option<Vec<u8>>,
    parent: BlockNumber,
}

impl BTree<'_> {
    /// Checks the whole structure (see the module header of `btree` for the invariants):
    /// entries ordered within pages and across siblings, high keys bounding their pages,
    /// right-links and levels consistent, one root, and every downlink pointing at a page
    /// of the next level whose lower bound is the downlink's key — so its keys lie in the
    /// parent's range. Missing downlinks are counted, not failed. Any violation is
    /// [`Error::CorruptIndex`](crate::Error::CorruptIndex) naming the block. Run it without
    /// concurrent writers (it reads one page at a time and does not follow their splits).
    pub fn verify(&self) -> Result<VerifyReport> {
        let meta = self.read_meta()?;
        let nblocks = self.nblocks()?;
        let mut report = VerifyReport {
            root: meta.root,
            levels: meta.level + 1,
            pages_per_level: vec![0; usize::from(meta.level) + 1],
            ..VerifyReport::default()
        };
        let mut visited = HashSet::new();
        visited.insert(super::page::META_BLOCK);
        let mut expected = vec![Expected {
            child: meta.root,
            lower: None,
            parent: super::page::META_BLOCK,
        }];
        for level in (0..=meta.level).rev() {
            let walk = LevelWalk {
                tree: self,
                level,
                top: meta.level,
                nblocks,
            };
            expected = walk.run(&expected, &mut visited, &mut report)?;
        }
        for block in 1..nblocks {
            if visited.contains(&block) {
                continue;
            }
            let buf = self.pin(block)?;
            let g = buf.read();
            if Page::new(&g).is_new() {
                report.new_pages += 1;
            } else {
                report.unreachable_pages += 1;
            }
        }
        Ok(report)
    }
}

impl BTree<'_> {
    /// The invariants of a split, checked in debug builds before its pages are logged (so
    /// corruption is caught where it would start): both halves ordered and below their high
    /// keys, the right half at or above the pivot (the left half's high key), and the byte
    /// bounds that redo checks too ([`split_bounds_hold`]).
    pub(super) fn check_split(
        &self,
        old: &BtPage<'_>,
        left: &BtPage<'_>,
        right: &BtPage<'_>,
    ) -> Result<()> {
        let level = old.special.level;
        let walk = LevelWalk {
            tree: self,
            level,
            top: level + 1,
            nblocks: BlockNumber::MAX,
        };
        let (mut below, mut report) = (Vec::new(), VerifyReport::default());
        let pivot = walk
            .check_page(left, None, &mut below, &mut report)?
            .ok_or_else(|| left.corrupt("the left half of a split has no high key"))?;
        walk.check_page(right, Some(&pivot), &mut below, &mut report)?;
        if !split_bounds_hold(old, left, right)? {
            return Err(right.corrupt("the right half of a split lost the page's high key"));
        }
        Ok(())
    }
}

/// The bounds a split keeps, compared as bytes (redo knows no key types): the right half
/// has the split page's high key (none if the page was the rightmost), and the left half
/// has one, which is the right half's lower bound. Checked by the primary before logging a
/// split and by redo after replaying it.
pub(super) fn split_bounds_hold(
    old: &BtPage<'_>,
    left: &BtPage<'_>,
    right: &BtPage<'_>,
) -> Result<bool> {
    let bytes = |p: &BtPage<'_>| -> Result<Option<Vec<u8>>> {
        p.high_key()?
            .map(|_| p.item_bytes(FIRST_OFFSET_NUMBER).map(<[u8]>::to_vec))
            .transpose()
    };
    let left_high = bytes(left)?;
    Ok(left_high.is_some()
        && !left.special.is_rightmost()
        && bytes(old)? == bytes(right)?
        && old.special.is_rightmost() == right.special.is_rightmost())
}

/// The walk of one level.
struct LevelWalk<'t> {
    tree: &'t BTree<'t>,
    level: u16,
    top: u16,
    nblocks: BlockNumber,
}

impl LevelWalk<'_> {
    /// Walks the level from the first expected page along the right-links; returns the
    /// downlinks its pages hold, for the level below.
    fn run(
        &self,
        expected: &[Expected],
        visited: &mut HashSet<BlockNumber>,
        report: &mut VerifyReport,
    ) -> Result<Vec<Expected>> {
        let tree = self.tree;
        let Some(first) = expected.first() else {
            return Err(tree.corrupt(0, format!("level {} has no downlinks above it", self.level)));
        };
        let mut next_expected = 0;
        let mut below = Vec::new();
        let mut lower: Option<Vec<u8>> = None;
        let mut block = first.child;
        // Bounded: every page is visited once (a repeat is a cycle, reported below).
        for _ in 0..=self.nblocks {
            if block >= self.nblocks || !visited.insert(block) {
                return Err(tree.corrupt(
                    block,
                    format!(
                        "level {} leads to block {block} twice or past the end",
                        self.level
                    ),
                ));
            }
            report.pages_per_level[usize::from(self.level)] += 1;
            match expected.get(next_expected) {
                Some(e) if e.child == block => {
                    if !same_bound(e.lower.as_deref(), lower.as_deref(), tree.ncols()) {
                        return Err(tree.corrupt(
                            e.parent,
                            format!("the downlink to block {block} does not carry its lower bound"),
                        ));
                    }
                    next_expected += 1;
                }
                _ if lower.is_none() => {
                    return Err(tree.corrupt(block, "the leftmost page of a level has no downlink"));
                }
                _ => report.missing_downlinks += 1,
            }
            let buf = tree.pin(block)?;
            let g = buf.read();
            let p = tree.view(&g, block)?;
            let high_key = self.check_page(&p, lower.as_deref(), &mut below, report)?;
            if p.special.is_rightmost() {
                if let Some(e) = expected.get(next_expected) {
                    return Err(tree.corrupt(
                        e.parent,
                        format!(
                            "a downlink to block {}, which is not on level {}",
                            e.child, self.level
                        ),
                    ));
                }
                return Ok(below);
            }
            lower = high_key;
            block = p.special.right_link;
        }
        Err(tree.corrupt(block, "the right-links form a cycle"))
    }

    /// Checks one page given its lower bound; collects its downlinks; returns its high key.
    fn check_page(
        &self,
        p: &BtPage<'_>,
        lower: Option<&[u8]>,
        below: &mut Vec<Expected>,
        report: &mut VerifyReport,
    ) -> Result<Option<Vec<u8>>> {
        let tree = self.tree;
        let ncols = tree.ncols();
        p.page
            .check_items()
            .map_err(|e| p.corrupt(format!("bad line pointers: {e}")))?;
        let s = p.special;
        if s.level != self.level {
            return Err(p.corrupt(format!(
                "page at level {}, reached on level {}",
                s.level, self.level
            )));
        }
        let is_top = self.level == self.top;
        if s.is_root() != is_top || (is_top && !s.is_rightmost()) {
            return Err(p.corrupt("the root flag or the top level is wrong"));
        }
        let bad = |_| p.corrupt("a key on the page is malformed");
        let high_key = p.high_key()?;
        if let Some(hk) = &high_key {
            self.check_tuple(p, hk, true)?;
            let above_lower = match lower.map(Tuple::parse) {
                Some(Some(lo)) => compare_tuples(&lo, hk, ncols).map_err(bad)? == Ordering::Less,
                Some(None) => false,
                None => true,
            };
            if !above_lower {
                return Err(p.corrupt("the high key is not above the page's lower bound"));
            }
        }
        let mut prev: Option<Tuple<'_>> = lower.and_then(Tuple::parse);
        if lower.is_some() && prev.is_none() {
            return Err(p.corrupt("the left sibling's high key is malformed"));
        }
        for off in p.first_data()..=p.item_count() {
            let t = p.tuple(off)?;
            let first_internal = !s.is_leaf() && off == p.first_data();
            if first_internal {
                if !t.is_minus_infinity() {
                    return Err(p.corrupt("the first entry of an internal page has a key"));
                }
            } else {
                self.check_tuple(p, &t, false)?;
                if let Some(prev) = &prev {
                    // Entries are unique; a leaf's first entry may equal its lower bound.
                    let ord = compare_tuples(prev, &t, ncols).map_err(bad)?;
                    let leaf_first = s.is_leaf() && off == p.first_data();
                    if ord == Ordering::Greater || (ord == Ordering::Equal && !leaf_first) {
                        return Err(p.corrupt(format!("item {off} is out of order")));
                    }
                }
                prev = Some(t);
            }
            if let Some(hk) = &high_key {
                if !first_internal && compare_tuples(&t, hk, ncols).map_err(bad)? != Ordering::Less
                {
                    return Err(p.corrupt(format!("item {off} is not below the high key")));
                }
            }
            if s.is_leaf() {
                report.leaf_entries += 1;
            } else {
                report.internal_entries += 1;
                below.push(Expected {
                    child: t.downlink,
                    lower: if first_internal {
                        lower.map(<[u8]>::to_vec)
                    } else {
                        Some(p.item_bytes(off)?.to_vec())
                    },
                    parent: p.block,
                });
            }
        }
        if !s.is_leaf() && p.data_count() == 0 {
            return Err(p.corrupt("an internal page without entries"));
        }
        high_key
            .map(|_| p.item_bytes(1).map(<[u8]>::to_vec))
            .transpose()
    }

    /// One tuple's own checks: key columns and types, downlink present exactly on internal
    /// entries (not on high keys).
    fn check_tuple(&self, p: &BtPage<'_>, t: &Tuple<'_>, high_key: bool) -> Result<()> {
        check_key(t, &self.tree.desc.key_types)
            .map_err(|e| p.corrupt(format!("a bad key: {e}")))?;
        let wants_downlink = !high_key && !p.special.is_leaf();
        if (t.downlink != NO_BLOCK) != wants_downlink {
            return Err(p.corrupt("a downlink where none belongs, or none where one does"));
        }
        Ok(())
    }
}

/// Whether two lower bounds (pivots, `None` for minus infinity) are the same (key and TID).
fn same_bound(a: Option<&[u8]>, b: Option<&[u8]>, ncols: usize) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => match (Tuple::parse(x), Tuple::parse(y)) {
            (Some(x), Some(y)) => compare_tuples(&x, &y, ncols).ok() == Some(Ordering::Equal),
            _ => false,
        },
        _ => false,
    }
}
