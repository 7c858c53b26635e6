//! # vacuum — lazy vacuum
//!
//! Lazy vacuum ([`lazy`]): prune, freeze, collect dead tuple ids, bulk-delete them from each
//! index, the second heap pass, truncation of empty tail pages: the heap's part of VACUUM
//! (PostgreSQL's `access/heap/vacuumlazy.c`). The command that takes the locks and drives
//! the heap and its indexes is above the session layer ([`crate::commands::vacuum`]). And
//! the piece that seed 004 is about: the store of dead tuple ids ([`tidstore`]) that the
//! first heap pass fills and the index pass probes.
//!
//! ## Rules
//!
//! - **Fill in block order.** The heap pass hands over one block's dead offsets at a time, in
//!   strictly increasing block order and sorted offset order ([`DeadTids::add_block`]). Out of
//!   order input is a caller bug: it fails a debug assertion, and in release builds is refused
//!   with a [`TidStoreError`] that leaves the store unchanged.
//! - **Bounded memory.** The store is built with a budget (`maintenance_work_mem`); when
//!   [`DeadTids::is_full`] says so, vacuum runs an index pass and the second heap pass over
//!   what it holds, [`DeadTids::clear`]s it, and goes on with the heap.
//! - **Read-only while probed.** The index pass only calls [`DeadTids::contains`] and
//!   [`DeadTids::offsets_of`] (`&self`, through a per-pass [`DeadTidProbe`]), so
//!   index-vacuum workers may share one store across threads (`DeadTids: Send + Sync`).
//! - **Old behaviour behind the switch.** `dead_tids = array` selects PostgreSQL's sorted
//!   array ([`TidArray`]), capped at 1 GB like PostgreSQL's; the default is [`TidStore`].

pub mod lazy;
pub mod tidstore;

pub use lazy::{IndexCleaner, VacuumStats};
pub(crate) use tidstore::new_dead_tids;
pub use tidstore::{BlockCursor, DeadTidProbe, DeadTids, TidArray, TidStore, TidStoreError};
