//! The engine's error type. Every error that concerns a page names the relation, fork and
//! block; every file error names the file. Errors are logged where they are handled (by the
//! caller that decides what to do), not here.
//!
//! ## Rules
//! - One enum for the library, each variant with its PostgreSQL SQLSTATE
//!   ([`Error::sqlstate`]): what a client sees is what PostgreSQL would send.
//! - **XX001** (data_corrupted): bytes read from disk or WAL that do not decode or fail their
//!   checksum, always with where they were (relation, block, LSN, file). **58030**
//!   (io_error): the operating system refused a read, write or fsync; but **53000**
//!   (insufficient_resources) when it refused for want of a file descriptor (EMFILE,
//!   ENFILE), as PostgreSQL's `errcode_for_file_access` says. **XX000**
//!   (internal_error): the engine's own state contradicts itself (a stopped WAL, a missing
//!   relation that must exist); never for bad input.
//! - A panic is right only for a broken invariant of the engine's own making (a caller bug,
//!   asserted where it would corrupt data), never for input: bytes from disk, WAL or a client
//!   get an error, and the engine goes on or, after a failed write or fsync, stops.

use std::io;
use std::path::PathBuf;

use crate::page::PageError;
use crate::types::{BlockNumber, Fork, Lsn, RelFileLocator, Rmid, Xid};
use crate::SqlState;

/// The result type of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid page in block {block} of relation {rel} fork {fork}: {reason}")]
    CorruptPage {
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        reason: PageError,
    },

    #[error(
        "could not read block {block} of relation {rel} fork {fork}: read only {read_bytes} of {wanted_bytes} bytes"
    )]
    ShortRead {
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        read_bytes: usize,
        wanted_bytes: usize,
    },

    #[error("could not {op} block {block} of relation {rel} fork {fork}: {source}")]
    BlockIo {
        op: &'static str,
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        #[source]
        source: io::Error,
    },

    #[error(
        "segment {segment} of relation {rel} fork {fork} is missing (file \"{path}\", needed for block {block})"
    )]
    MissingSegment {
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        segment: u32,
        path: PathBuf,
    },

    #[error(
        "block {block} is beyond the end of relation {rel} fork {fork}, which has {nblocks} blocks"
    )]
    BlockOutOfRange {
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        nblocks: BlockNumber,
    },

    #[error("relation {rel} fork {fork} does not exist")]
    NoSuchRelation { rel: RelFileLocator, fork: Fork },

    #[error("relation {rel} fork {fork} already exists")]
    RelationExists { rel: RelFileLocator, fork: Fork },

    #[error("could not {op} file \"{path}\": {source}")]
    File {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("block {block} of relation {rel} fork {fork} cannot be repaired: {reason}")]
    PageUnrepairable {
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        reason: String,
    },

    #[error("no unpinned buffers available ({nbuffers} buffers, all pinned)")]
    NoFreeBuffers { nbuffers: usize },

    #[error("WAL is corrupt at LSN {lsn}: {reason}")]
    WalCorrupt { lsn: Lsn, reason: String },

    #[error("could not {op} WAL at LSN {lsn}: {source}")]
    WalIo {
        op: &'static str,
        lsn: Lsn,
        #[source]
        source: io::Error,
    },

    #[error("WAL is in a failed state: {reason}")]
    WalFailed { reason: String },

    #[error("WAL record too large: {size_bytes} bytes with {blocks} block references")]
    WalRecordTooLarge { size_bytes: usize, blocks: usize },

    #[error("control file \"{path}\" is invalid: {reason}")]
    ControlFile { path: PathBuf, reason: String },

    #[error("checkpoint failed, the engine stopped: {reason}")]
    CheckpointFailed { reason: String },

    #[error(
        "the engine stopped after an I/O failure and must be restarted, which recovers from \
         the WAL (the failure: {reason})"
    )]
    EngineFailed { reason: String },

    #[error("cannot start on this data directory: {reason}")]
    StartupRefused { reason: String },

    /// PostgreSQL's `checkDataDir`: a data directory others may write into, or read
    /// (anything but group read and search), is refused.
    #[error(
        "data directory \"{}\" has invalid permissions (DETAIL: Permissions should be u=rwx \
         (0700) or u=rwx,g=rx (0750).)",
        path.display()
    )]
    DataDirPermissions { path: PathBuf, mode: u32 },

    /// PostgreSQL's `checkDataDir`: a data directory another user owns is refused.
    #[error(
        "data directory \"{}\" has wrong ownership (HINT: The server must be started by the \
         user that owns the data directory.)",
        path.display()
    )]
    DataDirOwnership { path: PathBuf },

    /// PostgreSQL's `set_max_safe_fds`: the limit on open files leaves the engine too few.
    #[error(
        "insufficient file descriptors available to start server process (DETAIL: System \
         allows {allows}, we need at least {needs}.)"
    )]
    InsufficientDescriptors { allows: u64, needs: u64 },

    #[error("no resource manager {rmid} to redo the WAL record at LSN {lsn}")]
    UnknownResourceManager { rmid: Rmid, lsn: Lsn },

    #[error("invalid value for setting \"{name}\": {reason}")]
    Config { name: String, reason: String },

    // ------------------------------------------------------------ transactions and locks
    #[error("could not serialize access due to {reason}")]
    SerializationFailure { reason: String },

    #[error("deadlock detected: {detail}")]
    Deadlock { detail: String },

    /// Something PostgreSQL refuses as not supported (SQLSTATE 0A000); `what` is the message.
    #[error("{what}")]
    FeatureNotSupported { what: String },

    #[error("could not obtain {what}")]
    LockNotAvailable { what: String },

    /// A lock wait longer than the transaction's `lock_timeout` (PostgreSQL's message; what
    /// was waited for is in `what`, for the log).
    #[error("canceling statement due to lock timeout")]
    LockTimeout { what: String },

    /// A lock wait ended by [`crate::Database::cancel_lock_wait`] (a client's cancel request
    /// or a statement timeout).
    #[error("canceling statement while waiting for {what}")]
    QueryCanceled { what: String },

    #[error("out of shared memory: {what} (hint: {hint})")]
    OutOfSharedMemory { what: String, hint: String },

    #[error("{what}")]
    NotInPrerequisiteState { what: String },

    #[error("current transaction is aborted, commands ignored until end of transaction block")]
    InFailedTransaction,

    #[error("{what}")]
    InvalidTransactionState { what: String },

    #[error("savepoint \"{name}\" does not exist")]
    NoSuchSavepoint { name: String },

    #[error("transaction identifier \"{gid}\" is already in use")]
    DuplicateGid { gid: String },

    #[error("prepared transaction with identifier \"{gid}\" does not exist")]
    NoSuchPreparedTransaction { gid: String },

    #[error("relation \"{name}\" does not exist")]
    UndefinedTable { name: String },

    #[error("relation \"{name}\" already exists")]
    DuplicateTable { name: String },

    #[error("{what}")]
    ProgramLimitExceeded { what: String },

    #[error("{what}")]
    InvalidParameter { what: String },

    #[error("sorry, too many clients already (max_connections)")]
    TooManyConnections,

    #[error("invalid tuple {tid} in relation {rel}: {reason}")]
    CorruptTuple {
        rel: RelFileLocator,
        tid: crate::page::Tid,
        reason: String,
    },

    #[error(
        "could not access status of transaction {xid}: statuses below {oldest} were removed \
         (a tuple naming it lacks the hint vacuum sets)"
    )]
    TransactionStatusRemoved { xid: Xid, oldest: Xid },

    #[error("two-phase state file \"{path}\" is invalid: {reason}")]
    TwoPhaseStateFile { path: PathBuf, reason: String },

    #[error("{what}")]
    DatatypeMismatch { what: String },

    #[error(
        "duplicate key value violates unique constraint \"{index}\" (Key ({key}) already exists)"
    )]
    UniqueViolation { index: String, key: String },

    /// A unique index built (CREATE UNIQUE INDEX, REINDEX) over rows that share a key.
    #[error("could not create unique index \"{index}\" (Key ({columns})=({key}) is duplicated)")]
    UniqueIndexBuild {
        index: String,
        columns: String,
        key: String,
    },

    #[error("column \"{name}\" does not exist")]
    UndefinedColumn { name: String },

    #[error("{what}")]
    DuplicateColumn { what: String },

    /// nextval past a sequence's bound without CYCLE.
    #[error("{what}")]
    SequenceLimit { what: String },

    /// setval outside a sequence's bounds, an increment that overflows.
    #[error("{what}")]
    OutOfRange { what: String },

    /// A name of one kind of relation used as another ("\"t\" is not a sequence").
    #[error("{what}")]
    WrongObjectType { what: String },

    #[error("invalid sequence page of relation {rel}: {reason}")]
    CorruptSequence { rel: RelFileLocator, reason: String },

    /// A toasted value that cannot be read back (PostgreSQL's "missing chunk number ...").
    #[error("invalid toasted value in relation {rel}: {reason}")]
    CorruptToast { rel: RelFileLocator, reason: String },

    #[error("invalid index entry in block {block} of index {rel}: {reason}")]
    CorruptIndex {
        rel: RelFileLocator,
        block: BlockNumber,
        reason: String,
    },
}

impl Error {
    /// The PostgreSQL SQLSTATE of this error (Appendix A of the PostgreSQL manual), for the
    /// wire protocol and for clients that branch on it (40001 and 40P01 mean "retry").
    pub fn sqlstate(&self) -> SqlState {
        if self.is_out_of_descriptors() {
            // PostgreSQL's errcode_for_file_access: EMFILE and ENFILE are
            // insufficient_resources.
            return SqlState::INSUFFICIENT_RESOURCES;
        }
        match self {
            Error::CorruptPage { .. }
            | Error::PageUnrepairable { .. }
            | Error::WalCorrupt { .. }
            | Error::CorruptTuple { .. }
            | Error::TwoPhaseStateFile { .. }
            | Error::TransactionStatusRemoved { .. }
            | Error::CorruptIndex { .. }
            | Error::CorruptSequence { .. }
            | Error::CorruptToast { .. } => SqlState::DATA_CORRUPTED, // data_corrupted
            Error::ShortRead { .. }
            | Error::BlockIo { .. }
            | Error::MissingSegment { .. }
            | Error::File { .. }
            | Error::EngineFailed { .. }
            | Error::WalIo { .. } => SqlState::IO_ERROR, // io_error
            Error::ControlFile { .. }
            | Error::StartupRefused { .. }
            | Error::CheckpointFailed { .. }
            | Error::WalFailed { .. }
            | Error::UnknownResourceManager { .. }
            | Error::BlockOutOfRange { .. }
            | Error::NoSuchRelation { .. }
            | Error::RelationExists { .. } => SqlState::INTERNAL_ERROR, // internal_error
            Error::NoFreeBuffers { .. } | Error::OutOfSharedMemory { .. } => {
                SqlState::OUT_OF_MEMORY
            }
            Error::InsufficientDescriptors { .. } => SqlState::INSUFFICIENT_RESOURCES, // insufficient_resources
            Error::WalRecordTooLarge { .. } | Error::ProgramLimitExceeded { .. } => {
                SqlState::PROGRAM_LIMIT_EXCEEDED
            }
            Error::Config { .. } | Error::InvalidParameter { .. } => {
                SqlState::INVALID_PARAMETER_VALUE
            }
            Error::SerializationFailure { .. } => SqlState::T_R_SERIALIZATION_FAILURE,
            Error::Deadlock { .. } => SqlState::T_R_DEADLOCK_DETECTED,
            Error::LockNotAvailable { .. } | Error::LockTimeout { .. } => {
                SqlState::LOCK_NOT_AVAILABLE
            }
            Error::QueryCanceled { .. } => SqlState::QUERY_CANCELED,
            Error::FeatureNotSupported { .. } => SqlState::FEATURE_NOT_SUPPORTED,
            // object_not_in_prerequisite_state; checkDataDir reports both data directory
            // errors with it.
            Error::NotInPrerequisiteState { .. }
            | Error::DataDirPermissions { .. }
            | Error::DataDirOwnership { .. } => SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
            Error::InFailedTransaction => SqlState::IN_FAILED_SQL_TRANSACTION,
            Error::InvalidTransactionState { .. } => SqlState::INVALID_TRANSACTION_STATE,
            Error::NoSuchSavepoint { .. } => SqlState::S_E_INVALID_SPECIFICATION,
            Error::DuplicateGid { .. } => SqlState::DUPLICATE_OBJECT,
            Error::NoSuchPreparedTransaction { .. } => SqlState::UNDEFINED_OBJECT,
            Error::UndefinedTable { .. } => SqlState::UNDEFINED_TABLE,
            Error::DuplicateTable { .. } => SqlState::DUPLICATE_TABLE,
            Error::TooManyConnections => SqlState::TOO_MANY_CONNECTIONS,
            Error::DatatypeMismatch { .. } => SqlState::DATATYPE_MISMATCH,
            Error::UniqueViolation { .. } | Error::UniqueIndexBuild { .. } => {
                SqlState::UNIQUE_VIOLATION
            }
            Error::UndefinedColumn { .. } => SqlState::UNDEFINED_COLUMN,
            Error::SequenceLimit { .. } => SqlState::SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
            Error::DuplicateColumn { .. } => SqlState::DUPLICATE_COLUMN,
            Error::OutOfRange { .. } => SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            Error::WrongObjectType { .. } => SqlState::WRONG_OBJECT_TYPE,
        }
    }

    /// Whether this is an operating-system error for want of a file descriptor (EMFILE,
    /// ENFILE): an open that failed, never a write or an fsync, so never a reason for the
    /// engine's failed state ([`crate::vfs::fd`]).
    pub fn is_out_of_descriptors(&self) -> bool {
        match self {
            Error::File { source, .. }
            | Error::BlockIo { source, .. }
            | Error::WalIo { source, .. } => crate::vfs::is_out_of_descriptors(source),
            _ => false,
        }
    }

    /// A file error with the operation and path as context.
    pub fn file(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::File {
            op,
            path: path.into(),
            source,
        }
    }
}
