//! # heap — MVCC heap tables
//!
//! A table is a relation whose main-fork pages hold tuples ([`mod@tuple`]): each row version
//! carries the id of the transaction that inserted it (`xmin`) and of the one that deleted,
//! updated or locked it (`xmax`), and `ctid`, the address of the next version. An update
//! writes a new version — on the same page when there is room (a HOT update: the new version
//! is heap-only and indexes need no new entry when no indexed column changed) — and points
//! the old one at it. A free-space map fork ([`crate::fsm`]) finds a page with room.
//!
//! This module makes single attempts: [`Heap::delete`], [`Heap::update`] and
//! [`Heap::lock_row`] check the version with [`visibility::check_update`] under the page's
//! exclusive lock and either make the change or return why not (being modified: wait for the
//! holder's transaction; updated by a committed transaction: follow or fail). Waiting and the
//! isolation rules are the caller's (the session layer).
//!
//! ## Rules
//! - Every change is WAL-logged through [`Wal::log_page_change`] under the exclusive content
//!   lock of every page it touches ([`redo`] replays it); two pages are locked in block order.
//! - A page proposed by the free-space map (a hint) is re-checked under its lock; when it has
//!   less room than recorded, the truth is recorded and the search goes on (bounded).
//! - Reading a tuple never panics on page contents: a malformed tuple is
//!   [`Error::CorruptTuple`] naming relation and tuple.
//! - A tuple is at most [`MAX_TUPLE_BYTES`]; a larger one is refused (SQLSTATE 54000) before
//!   anything changes. Rows of tables come here through TOAST ([`crate::toast`]), which
//!   compresses and moves out of line what would not fit; the heap stores what it is given.
//! - Whether an inserter committed is read from the tuple's `XMIN_COMMITTED` hint first
//!   ([`freeze::xmin_committed`]): vacuum sets it ([`freeze`]) so that old commit-log
//!   segments can go, and pruning sets it on the versions it keeps ([`prune`]) so that the
//!   next pruning of the page and its readers need not ask; below the commit log's oldest id
//!   the hint is the only answer.

pub mod freeze;
pub mod prune;
pub mod redo;
pub mod tuple;
pub mod visibility;

use crate::buffer::{BufferPool, PageWriteGuard, PinnedBuffer};
use crate::error::{Error, Result};
use crate::fsm;
use crate::page::{
    OffsetNumber, Page, PageMut, Tid, ALL_VISIBLE, FIRST_OFFSET_NUMBER, MAXALIGN, MAX_ITEM_SIZE,
};

use crate::txn::OwnXids;
use crate::types::{BlockNumber, BufferTag, Fork, RelFileLocator, Xid};
use crate::value::{EncodeRow, Row};
use crate::vm;
use crate::wal::{LoggedPage, Wal};
use redo::HeapRecord;
use tuple::{TupleHeader, HEADER_BYTES, HEAP_ONLY, HOT_UPDATED, XMAX_INVALID, XMAX_LOCK_ONLY};
pub use visibility::{check_update, Looker, Remembering, UpdateCheck, XidOracle};

/// The largest tuple, header included (one item on an empty page).
pub const MAX_TUPLE_BYTES: usize = MAX_ITEM_SIZE;
/// Pages tried (hint, free-space map proposals) before extending the relation.
const MAX_PAGE_TRIES: usize = 64;

fn aligned(len: usize) -> usize {
    len.div_ceil(MAXALIGN) * MAXALIGN
}

/// Does an item of `len` bytes fit on the page?
fn fits(page: Page<'_>, len: usize) -> bool {
    !page.is_new() && aligned(len) <= page.free_space_bytes()
}

/// A heap relation, as the operations on it see it.
#[derive(Clone, Copy)]
pub struct Heap<'a> {
    pub pool: &'a BufferPool,
    pub wal: &'a Wal,
    pub rel: RelFileLocator,
}

/// A version read from the heap: its address, header and bytes (header included).
#[derive(Clone, Debug)]
pub struct HeapTuple {
    pub tid: Tid,
    pub header: TupleHeader,
    pub bytes: Vec<u8>,
}

impl HeapTuple {
    /// The row it holds.
    pub fn row(&self, rel: RelFileLocator) -> Result<Row> {
        tuple::row_of(&self.bytes).map_err(|e| Error::CorruptTuple {
            rel,
            tid: self.tid,
            reason: e.to_string(),
        })
    }
}

/// What vacuum's first pass found on a page.
#[derive(Clone, Copy, Debug, Default)]
pub struct PageCensus {
    /// Versions visible to someone, not deleted.
    pub live: usize,
    /// Deleted versions some snapshot may still see.
    pub recently_dead: usize,
    /// Line pointers pruning changed.
    pub pruned_versions: usize,
    pub free_bytes: usize,
    pub set_all_visible: bool,
    /// Versions whose headers freezing changed.
    pub frozen: usize,
    /// The oldest id below the horizon that freezing could not cover (see [`freeze`]).
    pub oldest_unfrozen: Option<Xid>,
}

/// Who changes a row: the transaction, its command, and how to ask about other
/// transactions.
#[derive(Clone, Copy)]
pub struct Writer<'o> {
    /// The id the change is stamped with: the current subtransaction's, or the top-level one.
    pub xid: Xid,
    pub cid: u32,
    pub oracle: &'o dyn XidOracle,
    /// The transaction's own ids (`xid` among them): versions they changed are its own.
    pub own: &'o OwnXids,
}

/// The result of a change attempt: the check, and where the new version went (updates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub check: UpdateCheck,
    pub new_tid: Option<Tid>,
    /// The new version is heap-only (HOT): indexes need no entry for it.
    pub hot: bool,
}

impl Outcome {
    /// The change was not made: `check` says why.
    fn refused(check: UpdateCheck) -> Self {
        Outcome {
            check,
            new_tid: None,
            hot: false,
        }
    }
}

impl<'a> Heap<'a> {
    pub fn new(pool: &'a BufferPool, wal: &'a Wal, rel: RelFileLocator) -> Self {
        Heap { pool, wal, rel }
    }

    /// Creates the relation's main fork: the file first, then its WAL record (so a checkpoint
    /// whose redo point follows the record has seen the directory entry to make durable).
    pub fn create(&self) -> Result<()> {
        self.pool.smgr().create(self.rel, Fork::Main)?;
        crate::recovery::storage::log_create(self.wal, self.rel, Fork::Main)?;
        Ok(())
    }

    pub fn nblocks(&self) -> Result<BlockNumber> {
        self.pool.smgr().nblocks(self.rel, Fork::Main)
    }

    fn tag(&self, block: BlockNumber) -> BufferTag {
        BufferTag::new(self.rel, Fork::Main, block)
    }

    fn corrupt(&self, tid: Tid, reason: impl Into<String>) -> Error {
        Error::CorruptTuple {
            rel: self.rel,
            tid,
            reason: reason.into(),
        }
    }

    /// The encoded tuple for `row`, checked against the size limit.
    fn encode<R: EncodeRow + ?Sized>(header: &TupleHeader, row: &R) -> Result<Vec<u8>> {
        let len = HEADER_BYTES + row.encoded_len();
        if len > MAX_TUPLE_BYTES {
            return Err(Error::ProgramLimitExceeded {
                what: format!("row is too big: size {len}, maximum size {MAX_TUPLE_BYTES}"),
            });
        }
        let natts = u16::try_from(row.natts()).map_err(|_| Error::ProgramLimitExceeded {
            what: format!("tables can have at most {} columns", u16::MAX),
        })?;
        let mut values = Vec::with_capacity(len - HEADER_BYTES);
        row.encode_into(&mut values);
        Ok(tuple::build(&TupleHeader { natts, ..*header }, &values))
    }

    // ------------------------------------------------------------------ finding room

    /// A pinned page that had room for `len` bytes when looked at (not locked: the caller
    /// locks and re-checks). Tries `hint` (the caller's last target), then the free-space
    /// map, then extends the relation. Never returns block `avoid`.
    fn page_with_room(
        &self,
        len: usize,
        hint: &mut Option<BlockNumber>,
        avoid: Option<BlockNumber>,
    ) -> Result<PinnedBuffer<'a>> {
        let nblocks = self.nblocks()?;
        let mut candidate = hint
            .filter(|&b| b < nblocks)
            .or_else(|| nblocks.checked_sub(1));
        for _ in 0..MAX_PAGE_TRIES {
            let Some(block) = candidate else { break };
            if block >= nblocks {
                // The map outlived a truncation (it is not WAL-logged): correct it.
                fsm::record(self.pool, self.rel, block, 0)?;
            } else if Some(block) != avoid {
                let buf = self.pool.read_buffer(self.tag(block))?;
                let (room, free) = {
                    let page = buf.read();
                    let p = Page::new(&page);
                    (p.is_new() || fits(p, len), p.free_space_bytes())
                };
                if room {
                    *hint = Some(block);
                    return Ok(buf);
                }
                drop(buf);
                // The map was wrong (or never told): tell it the truth.
                fsm::record(self.pool, self.rel, block, free)?;
            }
            candidate = fsm::search(self.pool, self.rel, aligned(len), block.saturating_add(1))?;
            if candidate == Some(block) {
                break; // the only block with room by the map is the one to avoid
            }
        }
        let buf = self.pool.extend(self.rel, Fork::Main)?;
        *hint = Some(buf.tag().block);
        Ok(buf)
    }

    // ------------------------------------------------------------------ insert

    /// Inserts `row` as a new version by `xid` in command `cid`. `hint` is the caller's
    /// insertion target, updated to where the row went.
    pub fn insert<R: EncodeRow + ?Sized>(
        &self,
        xid: Xid,
        cid: u32,
        row: &R,
        hint: &mut Option<BlockNumber>,
    ) -> Result<Tid> {
        let bytes = Self::encode(&TupleHeader::new(xid, cid, 0), row)?;
        for _ in 0..MAX_PAGE_TRIES {
            let buf = self.page_with_room(bytes.len(), hint, None)?;
            let mut page = buf.write();
            let is_new = Page::new(&page).is_new();
            if is_new {
                PageMut::new(&mut page).init(0);
            } else if !fits(Page::new(&page), bytes.len()) {
                continue; // filled meanwhile
            }
            return self.insert_locked(&mut page, is_new, xid, bytes);
        }
        Err(Error::NoFreeBuffers {
            nbuffers: self.pool.nbuffers(),
        })
    }

    fn insert_locked(
        &self,
        page: &mut PageWriteGuard<'_>,
        init: bool,
        xid: Xid,
        mut bytes: Vec<u8>,
    ) -> Result<Tid> {
        let clear_vm = unset_all_visible(page, init);
        let tid = add_version(page, &mut bytes);
        let main = redo::insert_record(tid.offset, init, &bytes);
        let logged = if init {
            LoggedPage::will_init(page)
        } else {
            LoggedPage::changed(page)
        };
        self.wal
            .log_page_change(xid, HeapRecord::Insert, &main, &mut [logged])?;
        self.after_change(tid.block, clear_vm)?;
        Ok(tid)
    }

    // ------------------------------------------------------------------ reading

    /// The version at `tid`, whatever its visibility (at a redirect: the version it points
    /// at); `None` if there is no live item there.
    pub fn fetch(&self, tid: Tid) -> Result<Option<HeapTuple>> {
        if tid.block >= self.nblocks()? {
            return Ok(None);
        }
        let buf = self.pool.read_buffer(self.tag(tid.block))?;
        let page = buf.read();
        let p = Page::new(&page);
        // A redirect (left by pruning) stands for the first live version of its chain.
        let tid = match p.item_id(tid.offset) {
            Some(id) if id.state == crate::page::ItemState::Redirect => {
                Tid::new(tid.block, id.offset)
            }
            _ => tid,
        };
        let Some(item) = p.item(tid.offset) else {
            return Ok(None);
        };
        let header = TupleHeader::read(item).ok_or_else(|| self.corrupt(tid, "too short"))?;
        Ok(Some(HeapTuple {
            tid,
            header,
            bytes: item.to_vec(),
        }))
    }

    /// The version of the HOT chain at `root` (an address an index gave) that `looker` sees,
    /// following a redirect and the chain's heap-only versions on the page.
    pub fn fetch_chain(
        &self,
        root: Tid,
        looker: &Looker<'_>,
        oracle: &dyn XidOracle,
    ) -> Result<Option<HeapTuple>> {
        if root.block >= self.nblocks()? {
            return Ok(None);
        }
        let buf = self.pool.read_buffer(self.tag(root.block))?;
        let page = buf.read();
        let p = Page::new(&page);
        let mut off = match p.item_id(root.offset) {
            Some(id) if id.state == crate::page::ItemState::Redirect => id.offset,
            Some(id) if id.state == crate::page::ItemState::Normal => root.offset,
            _ => return Ok(None),
        };
        let mut prev_xmax = None;
        // Bounded: a chain visits each item of the page at most once.
        for _ in 0..=p.item_count() {
            let Some(item) = p.item(off) else { break };
            let tid = Tid::new(root.block, off);
            let header = TupleHeader::read(item).ok_or_else(|| self.corrupt(tid, "too short"))?;
            if prev_xmax.is_some_and(|x| x != header.xmin) {
                break; // not the successor: the slot was reused
            }
            if looker.sees(&header, oracle)? {
                return Ok(Some(HeapTuple {
                    tid,
                    header,
                    bytes: item.to_vec(),
                }));
            }
            if header.infomask & HOT_UPDATED == 0 || header.ctid.block != root.block {
                break;
            }
            prev_xmax = Some(header.xmax);
            off = header.ctid.offset;
        }
        Ok(None)
    }

    /// The HOT chains of block `block` with the versions of each that some snapshot may
    /// still see (not dead to all below `horizon`), as (chain root, versions): what an index
    /// built now must point at — every root once per distinct key of those versions.
    pub fn chains_in_block(
        &self,
        block: BlockNumber,
        horizon: Xid,
        oracle: &dyn XidOracle,
    ) -> Result<Vec<(Tid, Vec<HeapTuple>)>> {
        let buf = self.pool.read_buffer(self.tag(block))?;
        let page = buf.read();
        let chains = prune::live_chains(&page, block, oracle, horizon)?;
        let p = Page::new(&page);
        let mut out = Vec::with_capacity(chains.len());
        for (root, members) in chains {
            let mut versions = Vec::with_capacity(members.len());
            for off in members {
                let tid = Tid::new(block, off);
                let item = p.item(off).ok_or_else(|| self.corrupt(tid, "no item"))?;
                let header =
                    TupleHeader::read(item).ok_or_else(|| self.corrupt(tid, "too short"))?;
                versions.push(HeapTuple {
                    tid,
                    header,
                    bytes: item.to_vec(),
                });
            }
            out.push((Tid::new(block, root), versions));
        }
        Ok(out)
    }

    /// Every version of the HOT chain whose root is `root` (an index's address), whatever
    /// their visibility, in chain order.
    pub fn chain_versions(&self, root: Tid) -> Result<Vec<HeapTuple>> {
        if root.block >= self.nblocks()? {
            return Ok(Vec::new());
        }
        let buf = self.pool.read_buffer(self.tag(root.block))?;
        let page = buf.read();
        let p = Page::new(&page);
        let mut off = match p.item_id(root.offset) {
            Some(id) if id.state == crate::page::ItemState::Redirect => id.offset,
            Some(id) if id.state == crate::page::ItemState::Normal => root.offset,
            _ => return Ok(Vec::new()),
        };
        let mut out: Vec<HeapTuple> = Vec::new();
        // Bounded: a chain visits each item of the page at most once.
        for _ in 0..=p.item_count() {
            let Some(item) = p.item(off) else { break };
            let tid = Tid::new(root.block, off);
            let header = TupleHeader::read(item).ok_or_else(|| self.corrupt(tid, "too short"))?;
            if out
                .last()
                .is_some_and(|prev| prev.header.xmax != header.xmin)
            {
                break; // not the successor: the slot was reused
            }
            let next = (header.infomask & HOT_UPDATED != 0 && header.ctid.block == root.block)
                .then_some(header.ctid.offset);
            out.push(HeapTuple {
                tid,
                header,
                bytes: item.to_vec(),
            });
            match next {
                Some(n) if !out.iter().any(|v| v.tid.offset == n) => off = n,
                _ => break,
            }
        }
        Ok(out)
    }

    /// Every live version of block `block`, visible or not.
    pub fn all_in_block(&self, block: BlockNumber) -> Result<Vec<HeapTuple>> {
        let mut out = Vec::new();
        self.collect_block(block, &mut out, |_| Ok(true))?;
        Ok(out)
    }

    /// The versions of block `block` that `looker` sees (copied out under the page's shared
    /// lock), appended to `out`.
    pub fn visible_in_block(
        &self,
        block: BlockNumber,
        looker: &Looker<'_>,
        oracle: &dyn XidOracle,
        out: &mut Vec<HeapTuple>,
    ) -> Result<()> {
        self.collect_block(block, out, |h| looker.sees(h, oracle))
    }

    fn collect_block(
        &self,
        block: BlockNumber,
        out: &mut Vec<HeapTuple>,
        mut keep: impl FnMut(&TupleHeader) -> Result<bool>,
    ) -> Result<()> {
        let buf = self.pool.read_buffer(self.tag(block))?;
        let page = buf.read();
        let p = Page::new(&page);
        for off in FIRST_OFFSET_NUMBER..=p.item_count() {
            let Some(item) = p.item(off) else { continue };
            let tid = Tid::new(block, off);
            let header = TupleHeader::read(item).ok_or_else(|| self.corrupt(tid, "too short"))?;
            if keep(&header)? {
                out.push(HeapTuple {
                    tid,
                    header,
                    bytes: item.to_vec(),
                });
            }
        }
        Ok(())
    }

    /// After a logged change of `block`: clears its visibility-map bit when the change made
    /// an all-visible page otherwise (see [`crate::vm`]).
    fn after_change(&self, block: BlockNumber, clear_vm: bool) -> Result<()> {
        if clear_vm {
            vm::clear(self.pool, self.rel, block)?;
        }
        Ok(())
    }

    // ------------------------------------------------------------------ pruning

    /// Prunes a page held exclusively (see [`prune`]): removes the versions dead to all
    /// below `horizon`, WAL-logged. Returns what it changed (nothing logged if nothing).
    pub fn prune_page(
        &self,
        page: &mut PageWriteGuard<'_>,
        horizon: Xid,
        oracle: &dyn XidOracle,
    ) -> Result<prune::Prune> {
        let block = page.tag().block;
        let mut decision = prune::decide(page, block, oracle, horizon)?;
        if decision.is_empty() {
            // Hints alone are not worth a record (see `prune`'s header): none is set.
            decision.hinted.clear();
            return Ok(decision);
        }
        if !prune::apply(page, &decision) {
            return Err(Error::PageUnrepairable {
                rel: self.rel,
                fork: Fork::Main,
                block,
                reason: "its line pointers do not allow the pruning they call for".into(),
            });
        }
        let mut main = Vec::new();
        prune::encode(&decision, &mut main);
        self.wal.log_page_change(
            Xid::INVALID,
            HeapRecord::Prune,
            &main,
            &mut [LoggedPage::changed(page)],
        )?;
        Ok(decision)
    }

    // ------------------------------------------------------------------ vacuum

    /// Vacuum's first pass over one page: prunes it, appends its dead line pointers to
    /// `dead` (sorted), and marks it all-visible (page flag, WAL record, visibility map) when
    /// every tuple on it is visible to every snapshot.
    pub fn vacuum_scan_page(
        &self,
        block: BlockNumber,
        horizon: Xid,
        oracle: &dyn XidOracle,
        dead: &mut Vec<OffsetNumber>,
    ) -> Result<PageCensus> {
        let buf = self.pool.read_buffer(self.tag(block))?;
        let mut page = buf.write();
        if Page::new(&page).is_new() {
            // Extended but never initialised (a crash after the extension): empty.
            return Ok(PageCensus {
                free_bytes: crate::types::PAGE_SIZE - crate::page::HEADER_SIZE,
                ..PageCensus::default()
            });
        }
        let pruned = self.prune_page(&mut page, horizon, oracle)?;
        let frozen = self.freeze_page(&mut page, block, horizon, oracle)?;
        let mut census = PageCensus {
            pruned_versions: pruned.unused.len() + pruned.dead.len() + pruned.redirected.len(),
            // Pruning's hints freeze too (the same hint, in the pruning's record).
            frozen: frozen.tuples.len() + pruned.hinted.len(),
            oldest_unfrozen: frozen.oldest_unfrozen,
            ..PageCensus::default()
        };
        let mut all_visible = true;
        let p = Page::new(&page);
        for off in FIRST_OFFSET_NUMBER..=p.item_count() {
            let Some(id) = p.item_id(off) else { break };
            match id.state {
                crate::page::ItemState::Dead => {
                    dead.push(off);
                    all_visible = false;
                }
                crate::page::ItemState::Normal => {
                    let tid = Tid::new(block, off);
                    let h = p
                        .item(off)
                        .and_then(TupleHeader::read)
                        .ok_or_else(|| self.corrupt(tid, "too short"))?;
                    // Pruning left no version dead to all; a committed deleter here is above
                    // the horizon: some snapshot may still see the version.
                    let deleted = h.xmax_is_deleter() && oracle.did_commit(h.xmax)?;
                    if deleted {
                        census.recently_dead += 1;
                    } else {
                        census.live += 1;
                    }
                    // Visible to all: inserted below the horizon by a committed transaction,
                    // and not deleted (or by a transaction below the horizon that aborted).
                    let undeleted_for_all = !h.xmax_is_deleter() || (!deleted && h.xmax < horizon);
                    all_visible &= h.xmin < horizon
                        && undeleted_for_all
                        && freeze::xmin_committed(&h, oracle)?;
                }
                crate::page::ItemState::Redirect | crate::page::ItemState::Unused => {}
            }
        }
        census.free_bytes = p.free_space_bytes();
        if all_visible && !p.has_flag(ALL_VISIBLE) && p.item_count() > 0 {
            PageMut::new(&mut page).set_flag(ALL_VISIBLE, true);
            let lsn = self.wal.log_page_change(
                Xid::INVALID,
                HeapRecord::Visible,
                &[],
                &mut [LoggedPage::changed(&mut page)],
            )?;
            vm::set(self.pool, self.rel, block, lsn)?;
            census.set_all_visible = true;
        }
        Ok(census)
    }

    /// Freezes the versions of a locked page (see [`freeze`]), WAL-logged.
    fn freeze_page(
        &self,
        page: &mut PageWriteGuard<'_>,
        block: BlockNumber,
        horizon: Xid,
        oracle: &dyn XidOracle,
    ) -> Result<freeze::Freeze> {
        let decided = freeze::decide(page, horizon, oracle)?;
        if decided.tuples.is_empty() {
            return Ok(decided);
        }
        let applied = freeze::apply(page, block, &decided.tuples);
        assert!(
            applied,
            "freezing changes only the versions it found on the locked page"
        );
        self.wal.log_page_change(
            Xid::INVALID,
            HeapRecord::Freeze,
            &freeze::encode(&decided.tuples),
            &mut [LoggedPage::changed(page)],
        )?;
        Ok(decided)
    }

    /// Vacuum's second pass over one page: its dead line pointers `offsets`, whose index
    /// entries are gone, become unused. Returns the page's free space after.
    pub fn vacuum_free_page(&self, block: BlockNumber, offsets: &[OffsetNumber]) -> Result<usize> {
        let buf = self.pool.read_buffer(self.tag(block))?;
        let mut page = buf.write();
        let mut main = Vec::with_capacity(2 + 2 * offsets.len());
        main.extend_from_slice(&(offsets.len() as u16).to_le_bytes());
        for off in offsets {
            main.extend_from_slice(&off.to_le_bytes());
        }
        if !redo::apply_free(&mut page, offsets) {
            return Err(Error::PageUnrepairable {
                rel: self.rel,
                fork: Fork::Main,
                block,
                reason: "a line pointer vacuum collected as dead is not dead any more".into(),
            });
        }
        self.wal.log_page_change(
            Xid::INVALID,
            HeapRecord::Free,
            &main,
            &mut [LoggedPage::changed(&mut page)],
        )?;
        Ok(Page::new(&page).free_space_bytes())
    }

    /// Is block `block` empty (no line pointer in use, or never initialised)?
    pub fn page_is_empty(&self, block: BlockNumber) -> Result<bool> {
        let buf = self.pool.read_buffer(self.tag(block))?;
        let page = buf.read();
        let p = Page::new(&page);
        Ok(p.is_new()
            || (FIRST_OFFSET_NUMBER..=p.item_count())
                .all(|off| p.item_id(off).is_some_and(|id| !id.is_used())))
    }

    // ------------------------------------------------------------------ changes

    /// Replaces the header at `tid` on a locked page (an xmax change: DELETE or LOCK), with
    /// its WAL record, and clears the page's all-visible bits.
    fn set_header(
        &self,
        page: &mut PageWriteGuard<'_>,
        tid: Tid,
        new: &TupleHeader,
        record_type: HeapRecord,
        xid: Xid,
    ) -> Result<()> {
        let clear_vm = unset_all_visible(page, false);
        write_header(page, tid.offset, new);
        let main = redo::xmax_record(tid.offset, new);
        self.wal
            .log_page_change(xid, record_type, &main, &mut [LoggedPage::changed(page)])?;
        self.after_change(tid.block, clear_vm)
    }

    /// Reads the header at `tid` on a locked page, or says the tuple is gone.
    fn header_at(&self, page: &[u8; crate::types::PAGE_SIZE], tid: Tid) -> Result<TupleHeader> {
        let item = Page::new(page)
            .item(tid.offset)
            .ok_or_else(|| self.corrupt(tid, "no live tuple at this address"))?;
        TupleHeader::read(item).ok_or_else(|| self.corrupt(tid, "too short"))
    }

    /// Deletes the version at `tid` if `xid` (command `cid`) may; else says why not.
    pub fn delete(&self, tid: Tid, w: &Writer<'_>) -> Result<UpdateCheck> {
        let Writer {
            xid,
            cid,
            oracle,
            own,
        } = *w;
        let buf = self.pool.read_buffer(self.tag(tid.block))?;
        let mut page = buf.write();
        let h = self.header_at(&page, tid)?;
        let check = check_update(&h, tid, own, cid, oracle)?;
        if check != UpdateCheck::Ok {
            return Ok(check);
        }
        let new = set_xmax(&h, xid, cid, false);
        self.set_header(&mut page, tid, &new, HeapRecord::Delete, xid)?;
        Ok(UpdateCheck::Ok)
    }

    /// Locks the version at `tid` for `xid` (SELECT ... FOR UPDATE) if it may; else says why.
    pub fn lock_row(&self, tid: Tid, w: &Writer<'_>) -> Result<UpdateCheck> {
        let Writer {
            xid,
            cid,
            oracle,
            own,
        } = *w;
        let buf = self.pool.read_buffer(self.tag(tid.block))?;
        let mut page = buf.write();
        let h = self.header_at(&page, tid)?;
        let check = check_update(&h, tid, own, cid, oracle)?;
        if check != UpdateCheck::Ok || (own.contains(h.xmax) && h.infomask & XMAX_INVALID == 0) {
            return Ok(check); // not lockable, or locked or updated by us already
        }
        let new = set_xmax(&h, xid, h.cmax, true);
        self.set_header(&mut page, tid, &new, HeapRecord::Lock, xid)?;
        Ok(UpdateCheck::Ok)
    }

    /// Replaces the version at `tid` by a new version holding `row`, if `xid` (command `cid`)
    /// may; else says why not. `hot_ok`: no indexed column changed, so a same-page update may
    /// be heap-only. `hint` is the caller's insertion target for a new page.
    pub fn update<R: EncodeRow + ?Sized>(
        &self,
        tid: Tid,
        row: &R,
        w: &Writer<'_>,
        hot_ok: bool,
        hint: &mut Option<BlockNumber>,
    ) -> Result<Outcome> {
        let Writer {
            xid,
            cid,
            oracle,
            own,
        } = *w;
        let new_bytes = Self::encode(&TupleHeader::new(xid, cid, 0), row)?;
        {
            let buf = self.pool.read_buffer(self.tag(tid.block))?;
            let mut page = buf.write();
            let h = self.header_at(&page, tid)?;
            let check = check_update(&h, tid, own, cid, oracle)?;
            if check != UpdateCheck::Ok {
                return Ok(Outcome::refused(check));
            }
            if !fits(Page::new(&page), new_bytes.len()) {
                // Full: versions no snapshot sees any more may be in the way (PostgreSQL's
                // opportunistic `heap_page_prune_opt`), which keeps HOT chains on one page.
                self.prune_page(&mut page, oracle.horizon(), oracle)?;
            }
            if fits(Page::new(&page), new_bytes.len()) {
                let new_tid = self.update_locked(&mut page, None, tid, &h, new_bytes, hot_ok)?;
                return Ok(Outcome {
                    check,
                    new_tid: Some(new_tid),
                    hot: hot_ok,
                });
            }
        }
        // Another page: find one with room, then lock both in block order and look again.
        for _ in 0..MAX_PAGE_TRIES {
            let other = self.page_with_room(new_bytes.len(), hint, Some(tid.block))?;
            let old = self.pool.read_buffer(self.tag(tid.block))?;
            let (mut old_page, mut new_page) = if other.tag().block < tid.block {
                let n = other.write();
                (old.write(), n)
            } else {
                let o = old.write();
                (o, other.write())
            };
            let h = self.header_at(&old_page, tid)?;
            let check = check_update(&h, tid, own, cid, oracle)?;
            if check != UpdateCheck::Ok {
                return Ok(Outcome::refused(check));
            }
            let is_new = Page::new(&new_page).is_new();
            if is_new {
                PageMut::new(&mut new_page).init(0);
            } else if !fits(Page::new(&new_page), new_bytes.len()) {
                continue;
            }
            let new_tid = self.update_locked(
                &mut old_page,
                Some((&mut new_page, is_new)),
                tid,
                &h,
                new_bytes,
                false,
            )?;
            return Ok(Outcome {
                check,
                new_tid: Some(new_tid),
                hot: false,
            });
        }
        Err(Error::NoFreeBuffers {
            nbuffers: self.pool.nbuffers(),
        })
    }

    /// The update itself, both pages locked (`new_page` `None`: the same page).
    fn update_locked<'g>(
        &self,
        old_page: &mut PageWriteGuard<'g>,
        new_page: Option<(&mut PageWriteGuard<'g>, bool)>,
        tid: Tid,
        old: &TupleHeader,
        mut bytes: Vec<u8>,
        hot_ok: bool,
    ) -> Result<Tid> {
        let new = TupleHeader::read(&bytes).expect("built above");
        let hot = new_page.is_none() && hot_ok;
        if hot {
            TupleHeader {
                infomask: new.infomask | HEAP_ONLY,
                ..new
            }
            .write(&mut bytes);
        }
        let mut old_new = set_xmax(old, new.xmin, new.cmin, false);
        if hot {
            old_new.infomask |= HOT_UPDATED;
        }
        let clear_old = unset_all_visible(old_page, false);
        match new_page {
            None => {
                let new_tid = add_version(old_page, &mut bytes);
                old_new.ctid = new_tid;
                write_header(old_page, tid.offset, &old_new);
                let main = redo::update_record(tid.offset, &old_new, new_tid.offset, false, &bytes);
                self.wal.log_page_change(
                    new.xmin,
                    HeapRecord::Update,
                    &main,
                    &mut [LoggedPage::changed(old_page)],
                )?;
                self.after_change(tid.block, clear_old)?;
                Ok(new_tid)
            }
            Some((target, init)) => {
                let clear_new = unset_all_visible(target, init);
                let new_tid = add_version(target, &mut bytes);
                old_new.ctid = new_tid;
                write_header(old_page, tid.offset, &old_new);
                let main = redo::update_record(tid.offset, &old_new, new_tid.offset, init, &bytes);
                let target = if init {
                    LoggedPage::will_init(target)
                } else {
                    LoggedPage::changed(target)
                };
                self.wal.log_page_change(
                    new.xmin,
                    HeapRecord::Update,
                    &main,
                    &mut [LoggedPage::changed(old_page), target],
                )?;
                self.after_change(tid.block, clear_old)?;
                self.after_change(new_tid.block, clear_new)?;
                Ok(new_tid)
            }
        }
    }
}

/// Adds a new version to a locked page that has room; sets its `ctid` to itself, in the page
/// and in `bytes` (the copy the WAL record carries). Returns its address.
fn add_version(page: &mut PageWriteGuard<'_>, bytes: &mut [u8]) -> Tid {
    let block = page.tag().block;
    let off = PageMut::new(page)
        .add_item(bytes, None)
        .expect("the page was checked for room under its lock");
    let tid = Tid::new(block, off);
    set_ctid(bytes, tid);
    set_ctid(PageMut::new(page).item_mut(off).expect("just added"), tid);
    tid
}

/// Clears the page's all-visible flag before a change; returns whether the visibility map's
/// bit must be cleared after it (the page was all-visible, or is being initialised and the
/// map may hold a stale bit of a block that was cut off and grew back).
fn unset_all_visible(page: &mut [u8; crate::types::PAGE_SIZE], init: bool) -> bool {
    let was = Page::new(page).has_flag(ALL_VISIBLE);
    if was {
        PageMut::new(page).set_flag(ALL_VISIBLE, false);
    }
    was || init
}

/// The header with `xmax` set to `xid` (deleter or updater, or only a locker).
fn set_xmax(h: &TupleHeader, xid: Xid, cmax: u32, lock_only: bool) -> TupleHeader {
    let mut n = *h;
    n.xmax = xid;
    n.cmax = cmax;
    n.infomask &= !(XMAX_INVALID | XMAX_LOCK_ONLY | tuple::XMAX_COMMITTED | HOT_UPDATED);
    if lock_only {
        n.infomask |= XMAX_LOCK_ONLY;
    }
    n
}

fn set_ctid(item: &mut [u8], tid: Tid) {
    let mut h = TupleHeader::read(item).expect("a tuple has a header");
    h.ctid = tid;
    h.write(item);
}

/// Writes a new header over live item `off` of a locked page: an xmax change.
fn write_header(page: &mut [u8; crate::types::PAGE_SIZE], off: OffsetNumber, h: &TupleHeader) {
    let item = PageMut::new(page)
        .item_mut(off)
        .expect("the item was read under the same lock");
    debug_assert!(
        TupleHeader::read(item).is_some_and(|old| old.is_xmax_change_to(h)),
        "not an xmax change: {:?} -> {h:?}",
        TupleHeader::read(item)
    );
    h.write(item);
}
