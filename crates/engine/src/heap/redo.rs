//! Heap WAL records and their redo. Layouts of the main data (little-endian):
//!
//! ```text
//! INSERT  | offset u16 | flags u8 | tuple bytes ...
//! DELETE  | offset u16 | xmax u64 | cmax u32 | infomask u16 |
//! LOCK    (as DELETE)
//! PRUNE   | n u16 | n × (root u16, target u16) | n u16 | n × dead u16 | n u16 | n × unused u16 |
//! VISIBLE | (nothing) |   the page is all-visible; redo also sets the visibility map's bit
//! FREE    | n u16 | n × offset u16 |   dead line pointers become unused (vacuum's 2nd pass)
//! FREEZE  | n u16 | n × (offset u16, infomask u16, flags u8) |   hints (see heap::freeze)
//! UPDATE  | old offset u16 | xmax u64 | cmax u32 | infomask u16 | ctid block u32 | ctid
//!           offset u16 | new offset u16 | flags u8 | new tuple bytes ...
//! ```
//! Block 0 is the page changed (for UPDATE the old version's page); an UPDATE whose new
//! version went to another page has that page as block 1. Flag `INIT`: the page is new and
//! redo formats it before adding the tuple (the record needs no page image for it).

use super::tuple::TupleHeader;
use crate::error::{Error, Result};
use crate::page::{PageMut, Tid, ALL_VISIBLE};
use crate::recovery::{redo_block, rmid, RecordCursor, RedoContext, ResourceManager};
use crate::types::Xid;
use crate::wal::record::record_types;
use crate::wal::DecodedRecord;

record_types! {
    /// Heap record types (layouts above).
    pub enum HeapRecord for rmid::HEAP {
        Insert = 1,
        Delete = 2,
        Update = 3,
        Lock = 4,
        Prune = 5,
        Visible = 6,
        Free = 7,
        Freeze = 8,
    }
}

/// Vacuum's second heap pass on a page: the dead line pointers `offsets` (whose index
/// entries are gone) become unused, and unused pointers at the end of the array go. `false`
/// if one is not dead. The same for the primary and redo.
pub fn apply_free(page: &mut [u8; crate::types::PAGE_SIZE], offsets: &[u16]) -> bool {
    let mut p = PageMut::new(page);
    for &off in offsets {
        if p.as_page().item_id(off).map(|id| id.state) != Some(crate::page::ItemState::Dead) {
            return false;
        }
        p.mark_unused(off);
    }
    p.truncate_line_pointers();
    true
}

const INIT: u8 = 0x1;

pub(super) fn insert_record(off: u16, init: bool, tuple: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(3 + tuple.len());
    m.extend_from_slice(&off.to_le_bytes());
    m.push(if init { INIT } else { 0 });
    m.extend_from_slice(tuple);
    m
}

fn put_xmax(m: &mut Vec<u8>, h: &TupleHeader) {
    m.extend_from_slice(&h.xmax.0.to_le_bytes());
    m.extend_from_slice(&h.cmax.to_le_bytes());
    m.extend_from_slice(&h.infomask.to_le_bytes());
}

pub(super) fn xmax_record(off: u16, h: &TupleHeader) -> Vec<u8> {
    let mut m = Vec::with_capacity(16);
    m.extend_from_slice(&off.to_le_bytes());
    put_xmax(&mut m, h);
    m
}

pub(super) fn update_record(
    old_off: u16,
    old: &TupleHeader,
    new_off: u16,
    init: bool,
    tuple: &[u8],
) -> Vec<u8> {
    let mut m = Vec::with_capacity(27 + tuple.len());
    m.extend_from_slice(&old_off.to_le_bytes());
    put_xmax(&mut m, old);
    m.extend_from_slice(&old.ctid.block.to_le_bytes());
    m.extend_from_slice(&old.ctid.offset.to_le_bytes());
    m.extend_from_slice(&new_off.to_le_bytes());
    m.push(if init { INIT } else { 0 });
    m.extend_from_slice(tuple);
    m
}

/// The fields an xmax change sets.
struct XmaxChange {
    xmax: Xid,
    cmax: u32,
    infomask: u16,
}

impl XmaxChange {
    fn read(c: &mut RecordCursor<'_>) -> Result<Self> {
        Ok(XmaxChange {
            xmax: Xid(c.u64()?),
            cmax: c.u32()?,
            infomask: c.u16()?,
        })
    }
}

fn corrupt(rec: &DecodedRecord, reason: &str) -> Error {
    Error::WalCorrupt {
        lsn: rec.lsn,
        reason: format!("heap record: {reason}"),
    }
}

fn apply_xmax(
    rec: &DecodedRecord,
    page: &mut [u8; crate::types::PAGE_SIZE],
    off: u16,
    x: &XmaxChange,
    ctid: Option<Tid>,
) -> Result<()> {
    let item = PageMut::new(page)
        .item_mut(off)
        .ok_or_else(|| corrupt(rec, "no live tuple to change"))?;
    let old = TupleHeader::read(item).ok_or_else(|| corrupt(rec, "tuple too short"))?;
    let mut h = old;
    h.xmax = x.xmax;
    h.cmax = x.cmax;
    h.infomask = x.infomask;
    if let Some(t) = ctid {
        h.ctid = t;
    }
    // The same transition the primary checked where it made the change.
    if !old.is_xmax_change_to(&h) {
        return Err(corrupt(
            rec,
            "the record is not a valid xmax change of the tuple",
        ));
    }
    h.write(item);
    PageMut::new(page).set_flag(ALL_VISIBLE, false);
    Ok(())
}

fn apply_insert(
    rec: &DecodedRecord,
    page: &mut [u8; crate::types::PAGE_SIZE],
    off: u16,
    init: bool,
    tuple: &[u8],
) -> Result<()> {
    let mut p = PageMut::new(page);
    if init {
        p.init(0);
    }
    if p.add_item(tuple, Some(off)) != Some(off) {
        return Err(corrupt(rec, "the tuple does not go where the record says"));
    }
    p.set_flag(ALL_VISIBLE, false);
    Ok(())
}

/// The heap's resource manager.
pub struct HeapRedo;

impl ResourceManager for HeapRedo {
    fn name(&self) -> &'static str {
        "heap"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let record_type = rec.record_type()?;
        if record_type == HeapRecord::Visible {
            return redo_visible(ctx, rec);
        }
        redo_change(ctx, rec, record_type)?;
        // Whatever the page's state, a changed block is not all-visible (see `crate::vm`).
        for b in &rec.blocks {
            crate::vm::clear(ctx.pool, b.tag.rel, b.tag.block)?;
        }
        Ok(())
    }
}

/// Redo of VISIBLE: the page is all-visible, and so says the map.
fn redo_visible(ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
    redo_block(ctx, rec, 0, false, |page, _| {
        PageMut::new(page).set_flag(ALL_VISIBLE, true);
        Ok(())
    })?;
    let tag = rec.blocks[0].tag;
    crate::vm::set(ctx.pool, tag.rel, tag.block, rec.end_lsn)
}

/// Redo of the records that change tuples or line pointers.
fn redo_change(ctx: &RedoContext<'_>, rec: &DecodedRecord, record_type: HeapRecord) -> Result<()> {
    let mut c = RecordCursor::new(rec, "heap");
    match record_type {
        HeapRecord::Insert => {
            let off = c.u16()?;
            let init = c.u8()? & INIT != 0;
            let tuple = c.rest();
            redo_block(ctx, rec, 0, init, |page, _| {
                apply_insert(rec, page, off, init, tuple)
            })
        }
        HeapRecord::Delete | HeapRecord::Lock => {
            let off = c.u16()?;
            let x = XmaxChange::read(&mut c)?;
            redo_block(ctx, rec, 0, false, |page, _| {
                apply_xmax(rec, page, off, &x, None)
            })
        }
        HeapRecord::Update => {
            let old_off = c.u16()?;
            let x = XmaxChange::read(&mut c)?;
            let ctid = Tid::new(c.u32()?, c.u16()?);
            let new_off = c.u16()?;
            let init = c.u8()? & INIT != 0;
            let tuple = c.rest();
            if rec.blocks.len() == 1 {
                redo_block(ctx, rec, 0, false, |page, _| {
                    apply_insert(rec, page, new_off, false, tuple)?;
                    apply_xmax(rec, page, old_off, &x, Some(ctid))
                })
            } else {
                redo_block(ctx, rec, 0, false, |page, _| {
                    apply_xmax(rec, page, old_off, &x, Some(ctid))
                })?;
                redo_block(ctx, rec, 1, init, |page, _| {
                    apply_insert(rec, page, new_off, init, tuple)
                })
            }
        }
        HeapRecord::Free => {
            let offsets: Vec<u16> = (0..c.u16()?).map(|_| c.u16()).collect::<Result<_>>()?;
            redo_block(ctx, rec, 0, false, |page, _| {
                if apply_free(page, &offsets) {
                    Ok(())
                } else {
                    Err(corrupt(rec, "a line pointer to free is not dead"))
                }
            })
        }
        HeapRecord::Freeze => {
            let tuples =
                super::freeze::decode(&rec.main).ok_or_else(|| corrupt(rec, "bad freezing"))?;
            let block = rec
                .blocks
                .first()
                .ok_or_else(|| corrupt(rec, "no page"))?
                .tag
                .block;
            redo_block(ctx, rec, 0, false, |page, _| {
                if super::freeze::apply(page, block, &tuples) {
                    Ok(())
                } else {
                    Err(corrupt(rec, "the freezing does not fit the page"))
                }
            })
        }
        HeapRecord::Prune => {
            let decision =
                super::prune::decode(&rec.main).ok_or_else(|| corrupt(rec, "bad pruning"))?;
            redo_block(ctx, rec, 0, false, |page, _| {
                if super::prune::apply(page, &decision) {
                    Ok(())
                } else {
                    Err(corrupt(rec, "the pruning does not fit the page"))
                }
            })
        }
        // Redone by `redo_visible`: it changes no tuple.
        HeapRecord::Visible => Err(corrupt(rec, "an all-visible record read as a change")),
    }
}
