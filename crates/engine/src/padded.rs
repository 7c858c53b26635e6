//! [`CachePadded`]: a value alone on its cache lines.

/// A value alone on its cache lines (128 bytes: adjacent lines are prefetched in pairs), so
/// that two cores working on neighbouring values (lock partitions, WAL insertion state) do
/// not fight over one line. PostgreSQL pads its LWLocks and WAL insertion locks alike.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
