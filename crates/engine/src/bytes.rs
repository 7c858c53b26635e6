//! # bytes — reading little-endian fields out of bytes
//!
//! Every on-disk and WAL format of the engine is little-endian (`docs/design.md`); this is
//! the one place that turns bytes into integers. It is a leaf: it names no other module.
//!
//! ## Rules
//! - Reading never panics. A field that runs past the end is `None`, and the caller turns
//!   that into its own error, with the context only it knows (the LSN of a WAL record, the
//!   path of a file), or into an `expect` when an invariant makes it impossible (a header
//!   field at a constant offset of an 8 KiB page).
//! - Fields read in order (records, files, rows) go through a [`Reader`]; a field at a
//!   fixed offset of a page or header through [`u16_at`], [`u32_at`], [`u64_at`].
//! - Writing needs no helper, so there is none: `out.extend_from_slice(&x.to_le_bytes())`
//!   appends a field, `b[at..at + N].copy_from_slice(&x.to_le_bytes())` sets one in place.

// Every function here is `#[inline]`: they sit on hot paths (tuple headers, B-tree keys,
// the dead-TID store) in other codegen units, which would otherwise call them.

/// The `N` bytes at `at`, if all of them are there.
#[inline]
fn array_at<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The u16 at byte `at`; `None` if it runs past the end.
#[inline]
pub(crate) fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    array_at(bytes, at).map(u16::from_le_bytes)
}

/// The u32 at byte `at`; `None` if it runs past the end.
#[inline]
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    array_at(bytes, at).map(u32::from_le_bytes)
}

/// The u64 at byte `at`; `None` if it runs past the end.
#[inline]
pub(crate) fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    array_at(bytes, at).map(u64::from_le_bytes)
}

/// A cursor that reads fields in order. A read that runs past the end returns `None` and
/// leaves the cursor where it was.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    /// The next `n` bytes.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    /// The next `N` bytes, as an array.
    #[inline]
    pub(crate) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let a = array_at(self.bytes, self.at)?;
        self.at += N;
        Some(a)
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.array().map(u8::from_le_bytes)
    }

    #[inline]
    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    #[inline]
    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    #[inline]
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    #[inline]
    pub(crate) fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_le_bytes)
    }

    /// A byte string prefixed by its length as a u16 (the engine's one length-prefixed
    /// form: global transaction ids, tuples in B-tree records, names in catalog rows).
    #[inline]
    pub(crate) fn bytes_u16(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        let n = self.u16()?;
        let s = self.take(usize::from(n));
        if s.is_none() {
            self.at = start;
        }
        s
    }

    /// Everything not read yet.
    #[inline]
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.at..];
        self.at = self.bytes.len();
        s
    }

    /// How many bytes are left.
    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// `Some` if every byte was read: a format that ends where its fields end uses it to
    /// refuse trailing bytes.
    #[inline]
    pub(crate) fn done(&self) -> Option<()> {
        (self.remaining() == 0).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_in_order_little_endian() {
        let b = [
            7, 0x02, 0x01, 0x04, 0x03, 0x02, 0x01, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
            0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 2, 0, b'h', b'i', 9,
        ];
        let mut r = Reader::new(&b);
        assert_eq!(r.u8(), Some(7));
        assert_eq!(r.u16(), Some(0x0102));
        assert_eq!(r.u32(), Some(0x0102_0304));
        assert_eq!(r.u64(), Some(0x0102_0304_0506_0708));
        assert_eq!(r.i64(), Some(-2));
        assert_eq!(r.bytes_u16(), Some(&b"hi"[..]));
        assert_eq!((r.remaining(), r.done()), (1, None));
        assert_eq!(r.rest(), &[9]);
        assert_eq!((r.remaining(), r.done()), (0, Some(())));
        assert_eq!(r.rest(), &[] as &[u8]);
    }

    #[test]
    fn a_short_read_is_none_and_moves_nothing() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u32(), None);
        assert_eq!(r.take(4), None);
        assert_eq!(r.take(usize::MAX), None);
        assert_eq!(r.remaining(), 3);
        // The length says 0x0201 bytes, one is there.
        assert_eq!(r.bytes_u16(), None);
        assert_eq!(r.remaining(), 3);
        assert_eq!(r.u16(), Some(0x0201));
        assert_eq!(r.array::<1>(), Some([3]));
        assert_eq!(r.u8(), None);
    }

    #[test]
    fn fixed_offsets_read_inside_and_refuse_past_the_end() {
        let b = [0xAA, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08];
        assert_eq!(u16_at(&b, 1), Some(0x0201));
        assert_eq!(u32_at(&b, 5), Some(0x0807_0605));
        assert_eq!(u64_at(&b, 1), Some(0x0807_0605_0403_0201));
        assert_eq!(u16_at(&b, 8), None);
        assert_eq!(u32_at(&b, 6), None);
        assert_eq!(u64_at(&b, 2), None);
        assert_eq!(u64_at(&b, usize::MAX), None);
    }
}
