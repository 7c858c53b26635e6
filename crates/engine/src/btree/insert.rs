//! Insertion: the unique check, the insert itself, page splits, and downlinks into parents.

use std::cmp::Ordering;

use super::key::{display_key, SearchKey};
use super::page::{
    item_cost, minus_infinity, with_downlink, BtPage, Tuple, ITEM_SPACE_BYTES, META_BLOCK,
    NO_BLOCK, TUPLE_HEADER_SIZE,
};
use super::redo::{self, left_after_split, meta_with_root, new_root, right_after_split, SplitPlan};
use super::{BTree, Downlink, HeapProbe, HopLimit, InsertOutcome, Probe, MAX_LEVELS};
use crate::buffer::{PageWriteGuard, PinnedBuffer};
use crate::error::{Error, Result};
use crate::page::{OffsetNumber, PageMut, Tid};

use crate::types::{Fork, Xid};
use crate::value::Value;
use crate::wal::LoggedPage;

/// Leaf pages split on the right edge of the tree keep this share of the bytes on the left
/// (PostgreSQL's default leaf `fillfactor`), so ascending inserts leave full pages.
const LEAF_FILL_PERCENT: usize = 90;
/// The same for internal pages (PostgreSQL's `BTREE_NONLEAF_FILLFACTOR`).
const INTERNAL_FILL_PERCENT: usize = 70;

#[cfg(test)]
thread_local! {
    /// Test hook: stop after a (non-root) split is logged, before the parent's downlink, as
    /// a crash at that moment would.
    pub(super) static SKIP_DOWNLINK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl<'a> BTree<'a> {
    /// Inserts the entry `(key, tid)` on behalf of transaction `xid`. With `unique` (and a
    /// unique index, and no NULL in the key), first checks that no live entry has an equal
    /// key (PostgreSQL's `_bt_check_unique`): a live one fails with
    /// [`Error::UniqueViolation`] (SQLSTATE 23505), one whose inserter still runs returns
    /// [`InsertOutcome::MustWait`] with nothing held, dead ones are ignored. Inserting an
    /// entry that is already there (same key and TID) changes nothing.
    pub fn insert(
        &self,
        key: &[Value],
        tid: Tid,
        xid: Xid,
        unique: Option<&dyn HeapProbe>,
    ) -> Result<InsertOutcome> {
        self.check_key(key, false)?;
        let tuple = self.leaf_tuple(key, tid)?;
        let probe = unique.filter(|_| self.desc.unique && !key.iter().any(Value::is_null));
        let exact = SearchKey {
            cols: key,
            tid: Some(tid),
            equal_goes_right: true,
        };
        // A unique check starts at the first page where the key could be, so that all its
        // inserters meet on that page's exclusive lock.
        let first = SearchKey {
            cols: key,
            tid: None,
            equal_goes_right: false,
        };
        let start = if probe.is_some() { first } else { exact };
        let (buf, repair) = self.descend(&start, 0)?;
        let result = self.with_exclusive(buf, &start, |aguard| {
            if let Some(probe) = probe {
                if let Some(wait) = self.check_unique(&aguard, key, tid, probe)? {
                    return Ok(Err(wait));
                }
            }
            let block = aguard.tag().block;
            let right = self.move_right_to(&self.view(&aguard, block)?, &exact)?;
            let Some(right) = right else {
                return self.insert_locked(aguard, &exact, &tuple, xid).map(Ok);
            };
            // The entry goes further right: keep the first page locked (left before right)
            // so that no other inserter of the key passes its check meanwhile.
            let tbuf = self.pin(right)?;
            let split = self.with_exclusive(tbuf, &exact, |tguard| {
                self.insert_locked(tguard, &exact, &tuple, xid)
            })?;
            drop(aguard);
            Ok(Ok(split))
        })?;
        let split = match result {
            Ok(split) => split,
            Err(wait) => return Ok(wait),
        };
        self.finish_split(split, xid)?;
        if let Some(repair) = repair {
            self.finish_split(Some(repair), xid)?;
        }
        Ok(InsertOutcome::Inserted)
    }

    /// Locks `buf` exclusively, moves right while `sk` lies beyond the high key, and calls
    /// `f` with the page where `sk` belongs.
    pub(super) fn with_exclusive<T>(
        &self,
        mut buf: PinnedBuffer<'a>,
        sk: &SearchKey<'_>,
        f: impl FnOnce(PageWriteGuard<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut hops = HopLimit::default();
        loop {
            let block = buf.tag().block;
            hops.step(self, block)?;
            let guard = buf.write();
            let right = self.move_right_to(&self.view(&guard, block)?, sk)?;
            match right {
                None => return f(guard),
                Some(right) => {
                    drop(guard);
                    buf = self.pin(right)?;
                }
            }
        }
    }

    /// The unique check, under the exclusive lock of the first leaf where `key` could be:
    /// probes every entry with an equal key there and on the right siblings (read under
    /// shared locks, the first leaf still held). `Some(MustWait)` if an inserter still runs.
    fn check_unique(
        &self,
        first: &PageWriteGuard<'_>,
        key: &[Value],
        tid: Tid,
        probe: &dyn HeapProbe,
    ) -> Result<Option<InsertOutcome>> {
        let sk = SearchKey {
            cols: key,
            tid: None,
            equal_goes_right: false,
        };
        let block = first.tag().block;
        let p = self.view(first, block)?;
        let start = self.lower_bound(&p, &sk)?;
        let mut next = match self.check_unique_on(&p, start, &sk, tid, probe)? {
            Continue::Right(right) => right,
            Continue::Done(outcome) => return Ok(outcome),
        };
        let mut hops = HopLimit::default();
        loop {
            hops.step(self, next)?;
            let buf = self.pin(next)?;
            let g = buf.read();
            let p = self.view(&g, next)?;
            match self.check_unique_on(&p, p.first_data(), &sk, tid, probe)? {
                Continue::Right(right) => next = right,
                Continue::Done(outcome) => return Ok(outcome),
            }
        }
    }

    /// Probes the entries equal to `sk` on one page from `start`.
    fn check_unique_on(
        &self,
        p: &BtPage<'_>,
        start: OffsetNumber,
        sk: &SearchKey<'_>,
        tid: Tid,
        probe: &dyn HeapProbe,
    ) -> Result<Continue> {
        for off in start..=p.item_count() {
            let t = p.tuple(off)?;
            if sk.compare_raw(&t).map_err(self.bad_key(p.block))? != Ordering::Equal {
                return Ok(Continue::Done(None));
            }
            if t.tid == tid {
                continue; // this very entry, inserted before: not a conflict with itself
            }
            match probe.probe(t.tid)? {
                Probe::Dead => {}
                Probe::Live => {
                    return Err(Error::UniqueViolation {
                        index: self.desc.name.clone(),
                        key: display_key(sk.cols),
                    })
                }
                Probe::InProgress { xid } => {
                    return Ok(Continue::Done(Some(InsertOutcome::MustWait { xid })))
                }
            }
        }
        // Equal keys may go on past the high key (it is itself a copy of an entry).
        match p.high_key()? {
            Some(hk) if sk.compare_raw(&hk).map_err(self.bad_key(p.block))? == Ordering::Equal => {
                Ok(Continue::Right(p.special.right_link))
            }
            _ => Ok(Continue::Done(None)),
        }
    }

    /// Inserts `tuple` where `sk` (its own key and TID) belongs on a locked page, splitting it
    /// if it is full, and releases the page. Returns the downlink a (non-root) split leaves
    /// for the parent level. An equal tuple already there means the insert was done before:
    /// nothing changes.
    pub(super) fn insert_locked(
        &self,
        mut guard: PageWriteGuard<'_>,
        sk: &SearchKey<'_>,
        tuple: &[u8],
        xid: Xid,
    ) -> Result<Option<Downlink>> {
        let block = guard.tag().block;
        let (pos, exists, fits) = {
            let p = self.view(&guard, block)?;
            let pos = self.lower_bound(&p, sk)?;
            let exists = pos > p.first_data() && self.already_there(&p, pos - 1, sk, tuple)?;
            let fits = p.page.free_space_bytes() >= super::page::align(tuple.len());
            (pos, exists, fits)
        };
        if exists {
            return Ok(None);
        }
        if !fits {
            return self.split(guard, pos, tuple, xid);
        }
        PageMut::new(&mut guard)
            .insert_item(tuple, pos)
            .ok_or_else(|| self.corrupt(block, "no room for an item that fits"))?;
        self.wal.log_page_change(
            xid,
            redo::BTreeRecord::Insert,
            &redo::insert_record(pos, tuple),
            &mut [LoggedPage::changed(&mut guard)],
        )?;
        Ok(None)
    }

    /// Whether item `before` (just before where `tuple` would go) is `tuple` already. On an
    /// internal page that includes a downlink to the same child whose key a split of this
    /// page has since stripped (the first entry, minus infinity, whose lower bound is the
    /// key): downlinks are inserted idempotently (see the module header), and a late second
    /// insert of one must not add a second downlink to the child.
    fn already_there(
        &self,
        p: &BtPage<'_>,
        before: OffsetNumber,
        sk: &SearchKey<'_>,
        tuple: &[u8],
    ) -> Result<bool> {
        let t = p.tuple(before)?;
        if !p.special.is_leaf() {
            let new = Tuple::parse(tuple).ok_or_else(|| p.corrupt("a malformed downlink"))?;
            if t.downlink == new.downlink {
                return Ok(true);
            }
        }
        Ok(sk.compare_raw(&t).map_err(self.bad_key(p.block))? == Ordering::Equal)
    }

    /// Splits the locked, full page, inserting `tuple` at `pos`, and releases it; see the
    /// module header for the protocol. Returns the downlink for the parent unless this was a
    /// root split (which makes the new root and updates the metapage in the same record).
    fn split(
        &self,
        guard: PageWriteGuard<'_>,
        pos: OffsetNumber,
        tuple: &[u8],
        xid: Xid,
    ) -> Result<Option<Downlink>> {
        let left = guard.tag().block;
        let plan = plan_split(&self.view(&guard, left)?, pos, tuple)?;
        let rbuf = self.pool.extend(self.rel(), Fork::Main)?;
        let right = rbuf.tag().block;
        let left_page = left_after_split(&self.view(&guard, left)?, &plan, right)
            .map_err(|e| self.corrupt(left, e))?;
        let right_page = right_after_split(&plan).map_err(|e| self.corrupt(left, e))?;
        if cfg!(debug_assertions) {
            let old = self.view(&guard, left)?;
            let halves = (self.view(&left_page, left)?, self.view(&right_page, right)?);
            if let Err(e) = self.check_split(&old, &halves.0, &halves.1) {
                panic!("a split would break the B-tree's invariants: {e}");
            }
        }
        if plan.root_split && plan.level >= MAX_LEVELS {
            return Err(self.corrupt(left, format!("a root split at level {}", plan.level)));
        }
        // A root split's new root and the metapage (pinned before any guard below, which
        // all share one lifetime, the caller's guard shortened to it).
        let (root_buf, meta_buf) = if plan.root_split {
            (
                Some(self.pool.extend(self.rel(), Fork::Main)?),
                Some(self.pin(META_BLOCK)?),
            )
        } else {
            (None, None)
        };
        let mut guard: PageWriteGuard<'_> = guard;
        let mut rguard = rbuf.write();
        if !plan.root_split {
            guard.copy_from_slice(&left_page[..]);
            rguard.copy_from_slice(&right_page[..]);
            self.wal.log_page_change(
                xid,
                redo::BTreeRecord::Split,
                &plan.encode(),
                &mut [
                    LoggedPage::changed(&mut guard),
                    LoggedPage::will_init(&mut rguard),
                ],
            )?;
            return Ok(Some(Downlink {
                level: plan.level,
                tuple: with_downlink(&plan.pivot, right),
            }));
        }
        let (Some(root_buf), Some(meta_buf)) = (&root_buf, &meta_buf) else {
            unreachable!("pinned above for a root split");
        };
        let root = root_buf.tag().block;
        let root_page = new_root(plan.level + 1, left, right, &plan.pivot)
            .map_err(|e| self.corrupt(root, e))?;
        let mut root_guard = root_buf.write();
        // The metapage last (lock order).
        let mut meta_guard = meta_buf.write();
        let meta_page = meta_with_root(&meta_guard, self.rel(), root, plan.level + 1)?;
        guard.copy_from_slice(&left_page[..]);
        rguard.copy_from_slice(&right_page[..]);
        root_guard.copy_from_slice(&root_page[..]);
        meta_guard.copy_from_slice(&meta_page[..]);
        self.wal.log_page_change(
            xid,
            redo::BTreeRecord::Split,
            &plan.encode(),
            &mut [
                LoggedPage::changed(&mut guard),
                LoggedPage::will_init(&mut rguard),
                LoggedPage::will_init(&mut root_guard),
                LoggedPage::changed(&mut meta_guard),
            ],
        )?;
        Ok(None)
    }

    /// Inserts the downlinks a split leaves, level by level up (each may split in turn).
    fn finish_split(&self, mut pending: Option<Downlink>, xid: Xid) -> Result<()> {
        #[cfg(test)]
        if SKIP_DOWNLINK.with(std::cell::Cell::get) {
            return Ok(());
        }
        for _ in 0..=MAX_LEVELS {
            let Some(d) = pending else { return Ok(()) };
            pending = self.insert_downlink(&d, xid)?;
        }
        Err(self.corrupt(META_BLOCK, "downlink insertion climbed past the top level"))
    }

    /// Inserts one downlink into level `d.level + 1` (moving right as needed; nothing if the
    /// pivot is there already). Returns the downlink of a split it caused.
    pub(super) fn insert_downlink(&self, d: &Downlink, xid: Xid) -> Result<Option<Downlink>> {
        let t =
            Tuple::parse(&d.tuple).ok_or_else(|| self.corrupt(META_BLOCK, "a malformed pivot"))?;
        let cols = self.decode_key(&t, META_BLOCK)?;
        let sk = SearchKey {
            cols: &cols,
            tid: Some(t.tid),
            equal_goes_right: true,
        };
        let (buf, _) = self.descend(&sk, d.level + 1)?;
        self.with_exclusive(buf, &sk, |g| self.insert_locked(g, &sk, &d.tuple, xid))
    }
}

/// Decides a split of page `p` with `tuple` inserted at `pos`.
fn plan_split(p: &BtPage<'_>, pos: OffsetNumber, tuple: &[u8]) -> Result<SplitPlan> {
    let mut items = p.data_items()?;
    let new_index = usize::from(pos - p.first_data());
    items.insert(new_index, tuple);
    let is_leaf = p.special.is_leaf();
    let high_key = p.high_key()?.map(|_| p.item_bytes(1)).transpose()?;
    // Appending at the right edge of the tree: keep the left page nearly full.
    let fill_percent = match (
        p.special.is_rightmost() && new_index + 1 == items.len(),
        is_leaf,
    ) {
        (false, _) => 50,
        (true, true) => LEAF_FILL_PERCENT,
        (true, false) => INTERNAL_FILL_PERCENT,
    };
    let nleft = choose_split(&items, is_leaf, high_key.map(<[u8]>::len), fill_percent)
        .ok_or_else(|| p.corrupt("no split point leaves both halves within a page"))?;
    let pivot = with_downlink(items[nleft], NO_BLOCK);
    let mut right_items: Vec<Vec<u8>> = items[nleft..].iter().map(|i| i.to_vec()).collect();
    if !is_leaf {
        // The right page's first downlink covers everything from its lower bound on.
        let first =
            Tuple::parse(&right_items[0]).ok_or_else(|| p.corrupt("a malformed internal entry"))?;
        right_items[0] = minus_infinity(first.downlink);
    }
    Ok(SplitPlan {
        root_split: p.special.is_root(),
        level: p.special.level,
        new_index: new_index as u16,
        nleft: nleft as u16,
        new_tuple: tuple.to_vec(),
        pivot,
        right_link: p.special.right_link,
        right_high_key: high_key.map(<[u8]>::to_vec),
        right_items,
    })
}

/// Where the unique check goes on.
enum Continue {
    Right(crate::types::BlockNumber),
    Done(Option<InsertOutcome>),
}

/// The number of items to keep on the left so both halves fit (the left page with the
/// pivot as high key, the right with the old high key; on internal pages the right page's
/// first entry loses its key), closest to `fill_percent` of the bytes on the left.
fn choose_split(
    items: &[&[u8]],
    is_leaf: bool,
    high_key_len: Option<usize>,
    fill_percent: usize,
) -> Option<usize> {
    let costs: Vec<usize> = items.iter().map(|i| item_cost(i.len())).collect();
    let total: usize = costs.iter().sum();
    let target = total * fill_percent / 100;
    let right_fixed = high_key_len.map_or(0, item_cost);
    let mut best: Option<(usize, usize)> = None;
    let mut left_bytes = 0;
    for nleft in 1..items.len() {
        left_bytes += costs[nleft - 1];
        let left = left_bytes + costs[nleft]; // the pivot is a copy of the first right item
        let first_right = if is_leaf {
            costs[nleft]
        } else {
            item_cost(TUPLE_HEADER_SIZE)
        };
        let right = right_fixed + first_right + (total - left_bytes - costs[nleft]);
        if left > ITEM_SPACE_BYTES || right > ITEM_SPACE_BYTES {
            continue;
        }
        let score = left_bytes.abs_diff(target);
        if best.is_none_or(|(s, _)| score < s) {
            best = Some((score, nleft));
        }
    }
    best.map(|(_, nleft)| nleft)
}
