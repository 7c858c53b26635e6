//! # quire-engine
//!
//! quire's storage engine as a synchronous Rust library: no async runtime, no SQL. It stores
//! data the way PostgreSQL does (8 KiB pages, relations split into segment files, a shared
//! buffer pool) and is built so that the slow paths named in `shared/seeds/` are fast by
//! design. Layers, bottom to top, each in its own module with its rules in its `//!` header:
//!
//! 1. [`vfs`]: the only code that touches files (OS and a crash-simulating implementation).
//! 2. [`page`]: the 8 KiB page layout and its CRC32C checksum.
//! 3. [`smgr`]: relations as segment files, and the relation-size cache.
//! 4. [`buffer`]: the shared buffer pool, whose relation drop does not scan the pool.
//! 5. [`wal`]: the write-ahead log: parallel insertion, group commit, reading back;
//!    [`sync`]: the sync-request queue; [`recovery`]: resource managers and redo.
//! 6. [`checkpoint`]: the checkpointer, the control file.
//! 7. [`clog`]: commit status and commit timestamps, on pages in the buffer pool.
//! 8. [`txn`]: transaction ids, commit and abort.
//! 9. [`fsm`]: the free-space map, a hint fork (not WAL-logged) of each heap block's free
//!    space, so an insert finds a block with room without reading heap pages.
//! 9. [`vacuum`]: lazy vacuum; today its dead-TID store (seed 004).
//!
//! [`Database`] opens a data directory (exclusively) with its storage manager and buffer
//! pool; [`Config`] holds every setting; [`Error`] is the one error type of the library.

pub mod buffer;
pub mod checkpoint;
pub mod clog;
pub mod config;
mod db;
pub mod error;
pub mod fsm;
mod hash;
pub mod page;
pub mod recovery;
pub mod rng;
pub mod smgr;
pub mod sync;
pub mod txn;
pub mod vacuum;
pub mod vfs;
pub mod wal;

pub use config::{
    BufferDropMode, Config, DeadTidsMode, RelsizeCacheMode, SyncMode, TwophaseStateMode,
};
pub use db::Database;
pub use error::{Error, Result};
pub use smgr::{BlockNumber, Fork, RelFileLocator};
