//! Range scans: a leaf at a time, entries copied under the shared lock, the pin kept while
//! they are returned (see "Scans and vacuum" in the module header).

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::ops::Bound;

use super::key::{compare_prefix, SearchKey};
use super::page::{BtPage, NO_BLOCK};
use super::{BTree, HopLimit};
use crate::buffer::PinnedBuffer;
use crate::error::Result;
use crate::page::Tid;

use crate::value::Value;
use crate::types::BlockNumber;

/// An index scan: the entries `(key, heap TID)` within the bounds, in key order. Entries are
/// returned whatever the visibility of their rows; the caller checks the heap.
pub struct IndexScan<'a> {
    tree: BTree<'a>,
    lower: Bound<Vec<Value>>,
    upper: Bound<Vec<Value>>,
    /// Entries copied from the current leaf, not yet returned.
    batch: VecDeque<(Vec<Value>, Tid)>,
    /// The pin on the leaf `batch` came from, held until the batch is returned.
    pin: Option<PinnedBuffer<'a>>,
    /// The leaf to read next (the right-link read with the current batch).
    next: Option<BlockNumber>,
    /// Every entry from here on is above the lower bound: stop looking for where they start.
    past_lower: bool,
    hops: HopLimit,
    failed: bool,
}

impl<'a> BTree<'a> {
    /// Scans the entries between `lower` and `upper`, each a bound on the first `k` key
    /// columns (any `k` up to the column count; an empty prefix bounds nothing).
    pub fn scan(&self, lower: Bound<&[Value]>, upper: Bound<&[Value]>) -> Result<IndexScan<'a>> {
        for b in [lower, upper] {
            if let Bound::Included(k) | Bound::Excluded(k) = b {
                self.check_key(k, true)?;
            }
        }
        let (cols, equal_goes_right): (&[Value], bool) = match lower {
            Bound::Included(k) => (k, false),
            Bound::Excluded(k) => (k, true),
            Bound::Unbounded => (&[], false),
        };
        let sk = SearchKey {
            cols,
            tid: None,
            equal_goes_right,
        };
        let (buf, _) = self.descend(&sk, 0)?;
        Ok(IndexScan {
            tree: self.clone(),
            lower: lower.map(<[Value]>::to_vec),
            upper: upper.map(<[Value]>::to_vec),
            batch: VecDeque::new(),
            next: Some(buf.tag().block),
            pin: Some(buf),
            past_lower: matches!(lower, Bound::Unbounded),
            hops: HopLimit::default(),
            failed: false,
        })
    }
}

impl IndexScan<'_> {
    /// Reads the next leaf into the batch, keeping its pin (and dropping the previous one).
    fn read_next_leaf(&mut self, block: BlockNumber) -> Result<()> {
        self.hops.step(&self.tree, block)?;
        let buf = match self.pin.take() {
            Some(buf) if buf.tag().block == block => buf,
            _ => self.tree.pin(block)?,
        };
        {
            let g = buf.read();
            let p = self.tree.view(&g, block)?;
            if !p.special.is_leaf() {
                return Err(p.corrupt("a scan reached a page that is not a leaf"));
            }
            self.copy_matching(&p)?;
        }
        self.pin = Some(buf);
        Ok(())
    }

    /// Copies the page's entries within the bounds into the batch; sets `next` to the right-
    /// link read under the same lock, or `None` when the scan is past the upper bound.
    fn copy_matching(&mut self, p: &BtPage<'_>) -> Result<()> {
        let bad = self.tree.bad_key(p.block);
        self.next = (p.special.right_link != NO_BLOCK).then_some(p.special.right_link);
        let mut start = p.first_data();
        if !self.past_lower {
            // Until the first entry within the bounds, find where they start by bisection.
            let (cols, equal_goes_right) = match &self.lower {
                Bound::Included(k) => (k.as_slice(), false),
                Bound::Excluded(k) => (k.as_slice(), true),
                Bound::Unbounded => (&[][..], false),
            };
            let sk = SearchKey {
                cols,
                tid: None,
                equal_goes_right,
            };
            start = self.tree.lower_bound(p, &sk)?;
            self.past_lower = start <= p.item_count();
        }
        for off in start..=p.item_count() {
            let t = p.tuple(off)?;
            let above = match &self.upper {
                Bound::Included(k) => compare_prefix(&t, k).map_err(&bad)? == Ordering::Greater,
                Bound::Excluded(k) => compare_prefix(&t, k).map_err(&bad)? != Ordering::Less,
                Bound::Unbounded => false,
            };
            if above {
                self.next = None;
                return Ok(());
            }
            let key = self.tree.decode_key(&t, p.block)?;
            self.batch.push_back((key, t.tid));
        }
        Ok(())
    }
}

impl Iterator for IndexScan<'_> {
    type Item = Result<(Vec<Value>, Tid)>;

    fn next(&mut self) -> Option<Self::Item> {
        // Bounded: each turn reads one leaf, and `hops` fails a walk longer than the index.
        loop {
            if let Some(entry) = self.batch.pop_front() {
                return Some(Ok(entry));
            }
            let block = match self.next {
                Some(block) if !self.failed => block,
                _ => {
                    self.pin = None; // done: let vacuum have the last leaf
                    return None;
                }
            };
            if let Err(e) = self.read_next_leaf(block) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}
