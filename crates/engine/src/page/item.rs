//! Line pointers: PostgreSQL's `ItemIdData`, a C bitfield `lp_off:15, lp_flags:2, lp_len:15`,
//! stored here explicitly as one little-endian `u32` so the layout does not depend on a
//! compiler's bitfield order.

/// Mask of a 15-bit field (offset or length).
const FIELD_MASK: u32 = 0x7FFF;
const STATE_SHIFT: u32 = 15;
const LEN_SHIFT: u32 = 17;

/// The state of a line pointer (PostgreSQL's `LP_*` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemState {
    /// Free for reuse; has no storage (`LP_UNUSED`).
    Unused = 0,
    /// Points at a live item (`LP_NORMAL`).
    Normal = 1,
    /// Points at another line pointer of the same page, whose number is in `offset`; has no
    /// storage (`LP_REDIRECT`, left by HOT pruning).
    Redirect = 2,
    /// The item is dead; its storage, if any, is reclaimed by the next repair (`LP_DEAD`).
    Dead = 3,
}

impl ItemState {
    fn from_bits(bits: u32) -> Self {
        match bits & 0x3 {
            0 => ItemState::Unused,
            1 => ItemState::Normal,
            2 => ItemState::Redirect,
            _ => ItemState::Dead,
        }
    }
}

/// A decoded line pointer: where an item is, how long, and in what state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemId {
    /// Byte offset of the item in the page (for [`ItemState::Redirect`], the target item's
    /// offset number instead). Below 2^15.
    pub offset: u16,
    pub state: ItemState,
    /// Length of the item in bytes, unaligned; 0 means "no storage". Below 2^15.
    pub len_bytes: u16,
}

impl ItemId {
    /// An unused line pointer (all bits zero, as PostgreSQL's `ItemIdSetUnused`).
    pub const UNUSED: ItemId = ItemId {
        offset: 0,
        state: ItemState::Unused,
        len_bytes: 0,
    };

    /// A line pointer to a live item of `len_bytes` bytes at byte `offset`.
    pub fn normal(offset: u16, len_bytes: u16) -> Self {
        ItemId {
            offset,
            state: ItemState::Normal,
            len_bytes,
        }
    }

    /// Decodes a line pointer; every `u32` is some line pointer, so this cannot fail (whether
    /// it points anywhere sensible is checked by the page accessors).
    pub fn from_raw(word: u32) -> Self {
        ItemId {
            offset: (word & FIELD_MASK) as u16,
            state: ItemState::from_bits(word >> STATE_SHIFT),
            len_bytes: ((word >> LEN_SHIFT) & FIELD_MASK) as u16,
        }
    }

    /// Encodes a line pointer.
    pub fn to_raw(self) -> u32 {
        debug_assert!(
            u32::from(self.offset) <= FIELD_MASK && u32::from(self.len_bytes) <= FIELD_MASK,
            "line pointer fields are 15 bits: {self:?}"
        );
        (u32::from(self.offset) & FIELD_MASK)
            | ((self.state as u32) << STATE_SHIFT)
            | ((u32::from(self.len_bytes) & FIELD_MASK) << LEN_SHIFT)
    }

    /// Whether the line pointer is in use (anything but unused), as `ItemIdIsUsed`.
    pub fn is_used(self) -> bool {
        self.state != ItemState::Unused
    }

    /// Whether the line pointer owns item bytes, as `ItemIdHasStorage`.
    pub fn has_storage(self) -> bool {
        self.len_bytes != 0
    }
}
