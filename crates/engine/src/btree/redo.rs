//! B-tree WAL records (`rmid` 5) and their redo. Main-data layouts (little-endian):
//!
//! ```text
//! CREATE    | metapage contents ...                  blocks: 0 metapage, 1 root leaf (both init)
//! INSERT    | offset u16 | tuple ...                 block 0: the leaf or internal page
//! SPLIT     | flags u8 | level u16 | new index u16 | nleft u16 |
//!           | new tuple len u16 | new tuple | pivot len u16 | pivot |
//!           | right's right-link u32 | right's high key len u16 (0: none) | high key |
//!           | nright u16 | nright × (len u16, tuple) |
//!           blocks: 0 left (changed), 1 right (init); with ROOT_SPLIT also 2 new root (init),
//!           3 metapage (changed)
//! DELETE    | n u16 | n × offset u16 (ascending) |      block 0: the leaf
//! NEW_PAGES | n × 8192 page bytes |                   blocks 0..n: the pages (init)
//! META      | metapage contents ...                  block 0: the metapage (init)
//! ```
//!
//! A split is described, not imaged: the left page is rebuilt from its contents before the
//! split (the data items, the new tuple inserted at `new index` among them, the first `nleft`
//! kept) with `pivot` as its high key; the right page is built from the record alone. Both the
//! primary and redo build pages with the same functions ([`left_after_split`],
//! [`right_after_split`], [`new_root`]), so they produce the same bytes.

use super::page::{
    build_page, minus_infinity, with_downlink, BtPage, Meta, Special, NO_BLOCK, ROOT,
};
use super::verify::split_bounds_hold;
use crate::error::{Error, Result};
use crate::page::PageMut;
use crate::recovery::{redo_block, rmid, RecordCursor, RedoContext, ResourceManager};

use crate::wal::record::record_types;
use crate::wal::DecodedRecord;
use crate::types::{BlockNumber, PAGE_SIZE, RelFileLocator};

record_types! {
    /// B-tree record types (layouts above).
    pub enum BTreeRecord for rmid::BTREE {
        Create = 1,
        Insert = 2,
        Split = 3,
        Delete = 4,
        NewPages = 5,
        Meta = 6,
    }
}

/// SPLIT flag: the split page was the root; the record also makes the new root.
pub const ROOT_SPLIT: u8 = 0x1;

/// Pages per NEW_PAGES record: the record (main data plus the worst case the WAL reserves
/// for block references) stays far below the WAL's record limit.
pub const PAGES_PER_RECORD: usize = 8;

/// A split, as logged: everything redo needs besides the left page's old contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitPlan {
    pub root_split: bool,
    pub level: u16,
    /// Where the new tuple goes among the old data items (0-based).
    pub new_index: u16,
    /// Data items that stay on the left page, counted with the new tuple.
    pub nleft: u16,
    pub new_tuple: Vec<u8>,
    /// The left page's new high key (the key and TID of the right page's first item).
    pub pivot: Vec<u8>,
    /// The right page's right-link and high key: the left page's old ones.
    pub right_link: BlockNumber,
    pub right_high_key: Option<Vec<u8>>,
    pub right_items: Vec<Vec<u8>>,
}

fn put_bytes(m: &mut Vec<u8>, b: &[u8]) {
    m.extend_from_slice(&(b.len() as u16).to_le_bytes());
    m.extend_from_slice(b);
}

impl SplitPlan {
    pub fn encode(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(
            32 + self.new_tuple.len()
                + self.pivot.len()
                + self.right_items.iter().map(|i| 2 + i.len()).sum::<usize>(),
        );
        m.push(if self.root_split { ROOT_SPLIT } else { 0 });
        m.extend_from_slice(&self.level.to_le_bytes());
        m.extend_from_slice(&self.new_index.to_le_bytes());
        m.extend_from_slice(&self.nleft.to_le_bytes());
        put_bytes(&mut m, &self.new_tuple);
        put_bytes(&mut m, &self.pivot);
        m.extend_from_slice(&self.right_link.to_le_bytes());
        put_bytes(&mut m, self.right_high_key.as_deref().unwrap_or(&[]));
        m.extend_from_slice(&(self.right_items.len() as u16).to_le_bytes());
        for item in &self.right_items {
            put_bytes(&mut m, item);
        }
        m
    }

    fn decode(c: &mut RecordCursor<'_>) -> Result<SplitPlan> {
        let flags = c.u8()?;
        let level = c.u16()?;
        let new_index = c.u16()?;
        let nleft = c.u16()?;
        let new_tuple = c.bytes()?.to_vec();
        let pivot = c.bytes()?.to_vec();
        let right_link = c.u32()?;
        let hk = c.bytes()?;
        let right_high_key = (!hk.is_empty()).then(|| hk.to_vec());
        let n = c.u16()?;
        let right_items = (0..n)
            .map(|_| c.bytes().map(<[u8]>::to_vec))
            .collect::<Result<Vec<_>>>()?;
        Ok(SplitPlan {
            root_split: flags & ROOT_SPLIT != 0,
            level,
            new_index,
            nleft,
            new_tuple,
            pivot,
            right_link,
            right_high_key,
            right_items,
        })
    }
}

/// The left page after a split: its old data items with the new tuple inserted, the first
/// `nleft` of them, under the pivot as high key, linked to `right_block`. Keeps `old`'s LSN
/// (the full-page-image decision is made against it). `Err` names what is inconsistent.
pub fn left_after_split(
    old: &BtPage<'_>,
    plan: &SplitPlan,
    right_block: BlockNumber,
) -> std::result::Result<Box<[u8; PAGE_SIZE]>, String> {
    let mut items = old.data_items().map_err(|e| e.to_string())?;
    let index = usize::from(plan.new_index);
    if index > items.len() || usize::from(plan.nleft) > items.len() + 1 || plan.nleft == 0 {
        return Err(format!(
            "split of a page with {} items at {index} keeping {}",
            items.len(),
            plan.nleft
        ));
    }
    items.insert(index, &plan.new_tuple);
    items.truncate(usize::from(plan.nleft));
    let special = Special {
        right_link: right_block,
        level: plan.level,
        flags: Special::flags_for(plan.level),
    };
    let mut page = build_page(special, Some(&plan.pivot), &items)?;
    PageMut::new(&mut page).set_lsn(old.page.lsn());
    Ok(page)
}

/// The right page of a split, from the plan alone.
pub fn right_after_split(plan: &SplitPlan) -> std::result::Result<Box<[u8; PAGE_SIZE]>, String> {
    let items: Vec<&[u8]> = plan.right_items.iter().map(Vec::as_slice).collect();
    let special = Special {
        right_link: plan.right_link,
        level: plan.level,
        flags: Special::flags_for(plan.level),
    };
    Ok(build_page(special, plan.right_high_key.as_deref(), &items)?)
}

/// A new root over `left` and `right`, split at `pivot`.
pub fn new_root(
    level: u16,
    left: BlockNumber,
    right: BlockNumber,
    pivot: &[u8],
) -> std::result::Result<Box<[u8; PAGE_SIZE]>, String> {
    let special = Special {
        right_link: NO_BLOCK,
        level,
        flags: ROOT,
    };
    let down_left = minus_infinity(left);
    let down_right = with_downlink(pivot, right);
    Ok(build_page(special, None, &[&down_left, &down_right])?)
}

/// The metapage with a new root, keeping `old`'s LSN.
pub fn meta_with_root(
    old: &[u8; PAGE_SIZE],
    rel: RelFileLocator,
    root: BlockNumber,
    level: u16,
) -> Result<Box<[u8; PAGE_SIZE]>> {
    let mut meta = Meta::read(old, rel)?;
    meta.root = root;
    meta.level = level;
    let mut page = meta.page();
    PageMut::new(&mut page).set_lsn(crate::page::Page::new(old).lsn());
    Ok(page)
}

/// The main data of an INSERT.
pub fn insert_record(offset: u16, tuple: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(2 + tuple.len());
    m.extend_from_slice(&offset.to_le_bytes());
    m.extend_from_slice(tuple);
    m
}

/// The main data of a DELETE.
pub fn delete_record(offsets: &[u16]) -> Vec<u8> {
    let mut m = Vec::with_capacity(2 + 2 * offsets.len());
    m.extend_from_slice(&(offsets.len() as u16).to_le_bytes());
    for o in offsets {
        m.extend_from_slice(&o.to_le_bytes());
    }
    m
}

fn corrupt(rec: &DecodedRecord, reason: &str) -> Error {
    Error::WalCorrupt {
        lsn: rec.lsn,
        reason: format!("B-tree record: {reason}"),
    }
}

fn block_number(rec: &DecodedRecord, index: usize) -> Result<BlockNumber> {
    rec.blocks
        .get(index)
        .map(|b| b.tag.block)
        .ok_or_else(|| corrupt(rec, &format!("no block {index}")))
}

fn redo_split(ctx: &RedoContext<'_>, rec: &DecodedRecord, plan: &SplitPlan) -> Result<()> {
    let want_blocks = if plan.root_split { 4 } else { 2 };
    if rec.blocks.len() != want_blocks {
        return Err(corrupt(rec, "a split names the wrong number of blocks"));
    }
    if plan.level >= super::MAX_LEVELS {
        return Err(corrupt(rec, &format!("a split at level {}", plan.level)));
    }
    let (left, right) = (block_number(rec, 0)?, block_number(rec, 1)?);
    // Built once: block 1's contents, and the right half the bounds check compares with.
    let right_page = right_after_split(plan).map_err(|e| corrupt(rec, &e))?;
    redo_block(ctx, rec, 0, false, |page, tag| {
        let old =
            BtPage::new(page, tag.rel, tag.block).map_err(|e| corrupt(rec, &e.to_string()))?;
        if old.special.level != plan.level {
            return Err(corrupt(
                rec,
                "the split page is not on the level the record says",
            ));
        }
        let new = left_after_split(&old, plan, right).map_err(|e| corrupt(rec, &e))?;
        // The bounds the primary checked before logging the split (`check_split`).
        let view = |bytes, block| BtPage::new(bytes, tag.rel, block);
        let bounds = split_bounds_hold(&old, &view(&new, tag.block)?, &view(&right_page, right)?);
        if !bounds.map_err(|e| corrupt(rec, &e.to_string()))? {
            return Err(corrupt(
                rec,
                "the split's halves do not keep the page's bounds",
            ));
        }
        page.copy_from_slice(&new[..]);
        Ok(())
    })?;
    redo_block(ctx, rec, 1, true, |page, _| {
        page.copy_from_slice(&right_page[..]);
        Ok(())
    })?;
    if plan.root_split {
        let root = block_number(rec, 2)?;
        redo_block(ctx, rec, 2, true, |page, _| {
            let new =
                new_root(plan.level + 1, left, right, &plan.pivot).map_err(|e| corrupt(rec, &e))?;
            page.copy_from_slice(&new[..]);
            Ok(())
        })?;
        redo_block(ctx, rec, 3, false, |page, tag| {
            let new = meta_with_root(page, tag.rel, root, plan.level + 1)
                .map_err(|e| corrupt(rec, &e.to_string()))?;
            page.copy_from_slice(&new[..]);
            Ok(())
        })?;
    }
    Ok(())
}

fn redo_meta(ctx: &RedoContext<'_>, rec: &DecodedRecord, index: usize) -> Result<()> {
    let meta = Meta::decode(&rec.main).ok_or_else(|| corrupt(rec, "bad metapage contents"))?;
    redo_block(ctx, rec, index, true, |page, _| {
        page.copy_from_slice(&meta.page()[..]);
        Ok(())
    })
}

/// The B-tree resource manager.
pub struct BTreeRedo;

impl ResourceManager for BTreeRedo {
    fn name(&self) -> &'static str {
        "btree"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let mut c = RecordCursor::new(rec, "B-tree");
        match rec.record_type()? {
            BTreeRecord::Create => {
                redo_meta(ctx, rec, 0)?;
                let meta = Meta::decode(&rec.main).ok_or_else(|| corrupt(rec, "bad metapage"))?;
                redo_block(ctx, rec, 1, true, |page, tag| {
                    if tag.block != meta.root {
                        return Err(corrupt(rec, "the root is not the block the record names"));
                    }
                    let special = Special {
                        right_link: NO_BLOCK,
                        level: 0,
                        flags: super::page::LEAF | ROOT,
                    };
                    let new = build_page(special, None, &[]).map_err(|e| corrupt(rec, e))?;
                    page.copy_from_slice(&new[..]);
                    Ok(())
                })
            }
            BTreeRecord::Insert => {
                let off = c.u16()?;
                let tuple = c.rest();
                redo_block(ctx, rec, 0, false, |page, tag| {
                    BtPage::new(page, tag.rel, tag.block)
                        .map_err(|e| corrupt(rec, &e.to_string()))?;
                    if PageMut::new(page).insert_item(tuple, off) != Some(off) {
                        return Err(corrupt(rec, "the tuple does not go where the record says"));
                    }
                    Ok(())
                })
            }
            BTreeRecord::Split => {
                let plan = SplitPlan::decode(&mut c)?;
                c.done()?;
                redo_split(ctx, rec, &plan)
            }
            BTreeRecord::Delete => {
                let n = c.u16()?;
                let offs = (0..n).map(|_| c.u16()).collect::<Result<Vec<_>>>()?;
                c.done()?;
                redo_block(ctx, rec, 0, false, |page, tag| {
                    BtPage::new(page, tag.rel, tag.block)
                        .map_err(|e| corrupt(rec, &e.to_string()))?;
                    PageMut::new(page)
                        .delete_items(&offs)
                        .map_err(|e| corrupt(rec, &format!("cannot delete the items: {e}")))
                })
            }
            BTreeRecord::NewPages => {
                if rec.main.len() != rec.blocks.len() * PAGE_SIZE || rec.blocks.is_empty() {
                    return Err(corrupt(rec, "page images and blocks disagree"));
                }
                for (i, image) in rec.main.chunks_exact(PAGE_SIZE).enumerate() {
                    redo_block(ctx, rec, i, true, |page, tag| {
                        page.copy_from_slice(image);
                        BtPage::new(page, tag.rel, tag.block)
                            .map_err(|e| corrupt(rec, &e.to_string()))?;
                        Ok(())
                    })?;
                }
                Ok(())
            }
            BTreeRecord::Meta => redo_meta(ctx, rec, 0),
        }
    }
}
