//! `pg_catalog`: PostgreSQL's system catalogs as read-only views computed from quire's own
//! catalog (the engine's tables and indexes, and the SQL layer's column types), so that
//! psql's and pgbench's catalog queries and drivers' metadata queries work. Each view is
//! built when a query scans it, in the querying transaction, so it shows that
//! transaction's view of the catalog (an uncommitted CREATE TABLE is visible to itself).
//!
//! Oids: a table's or index's oid is its engine oid; the namespaces, types, access methods,
//! the one database and the bootstrap superuser have PostgreSQL's fixed oids; other roles'
//! are kept in the roles table ([`crate::roles`]); a key constraint's oid is
//! its index's oid plus [`CONSTRAINT_OID_BASE`].

use quire_engine::{Entry, IndexDef, Row, SqlState, Transaction, Value, WalCounters};

use crate::catalog::{self, TableInfo};
use crate::context::Cx;
use crate::error::{Result, SqlError};
use crate::parse::quote_ident;
use crate::roles::Role;
use crate::types::SqlType;

pub(crate) const DATABASE_NAME: &str = "quire";
pub(crate) const SUPERUSER: &str = "postgres";
const SUPERUSER_OID: i64 = 10;
const DATABASE_OID: i64 = 5;
const PG_CATALOG_NS: i64 = 11;
const PUBLIC_NS: i64 = 2200;
const HEAP_AM: i64 = 2;
const BTREE_AM: i64 = 403;
const DEFAULT_COLLATION: i64 = 100;
/// The oids of the catalogs other code names objects by (`classoid`): pg_class's,
/// pg_namespace's and pg_attrdef's.
pub(crate) const CLASS_RELID: u32 = 1259;
pub(crate) const NAMESPACE_RELID: u32 = 2615;
const ATTRDEF_RELID: u32 = 2604;
/// pg_catalog's `nspacl`: its owner's USAGE and CREATE, PUBLIC's USAGE.
const PG_CATALOG_ACL: &str = "{postgres=UC/postgres,=U/postgres}";
/// Added to an index's oid to name its key constraint (PostgreSQL gives constraints oids of
/// their own; quire's oids stay far below this).
pub(crate) const CONSTRAINT_OID_BASE: u32 = 1 << 30;

/// A pg_catalog view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CatalogTable {
    Namespace,
    Class,
    Attribute,
    Type,
    Index,
    Database,
    /// pg_roles: every role, the password masked (`********` whether there is one or not,
    /// as PostgreSQL shows it).
    Roles,
    /// pg_authid: every role with its SCRAM verifier; only a superuser may read it (42501).
    Authid,
    /// pg_user: the roles that may log in, the password masked.
    User,
    Settings,
    Am,
    /// pg_opclass: the default B-tree operator class of each type (PostgreSQL's oids).
    Opclass,
    Constraint,
    AttrDef,
    /// pg_depend: the auto dependencies of serial columns' sequences on their columns.
    Depend,
    /// pg_auth_members: who belongs to which role ([`crate::roles`]). PostgreSQL 15's
    /// columns, then PostgreSQL 16's `inherit_option` and `set_option` (which psql 16's
    /// `\drg` reads; quire reports version 16) as PostgreSQL 15's rules give them: the
    /// member's INHERIT, and SET always.
    AuthMembers,
    Collation,
    PreparedXacts,
    /// pg_locks: every lock held or awaited in the engine's lock table ([`lock_rows`]).
    Locks,
    PreparedStatements,
    /// pg_cursors: the session's open cursors.
    Cursors,
    Description,
    Tables,
    /// pg_views: the user's views ([`views`]).
    Views,
    /// pg_rewrite: each view's `_RETURN` rule ([`views`]).
    Rewrite,
    InitPrivs,
    /// pg_language: PostgreSQL's three built-in languages (internal, c, sql).
    Language,
    /// pg_tablespace: PostgreSQL's two built-in tablespaces (quire has no others).
    Tablespace,
    Sequence,
    /// quire's file-layer counters, one row per operation kind (opens, reads, writes, size
    /// probes, fsyncs, ...) since the server started.
    StatIo,
    /// PostgreSQL's `pg_stat_wal`: the WAL's counters since the server started. The times
    /// are always measured (PostgreSQL's need `track_wal_io_timing`).
    StatWal,
    /// PostgreSQL 15's `pg_stat_bgwriter`: the checkpointer's and the background writer's
    /// counters since the last reset. `buffers_backend_fsync` is always 0: statements never
    /// fsync, they queue sync requests for the checkpointer.
    StatBgwriter,
    /// A catalog of a feature quire lacks: there, and empty ([`absent`]).
    Absent(Absent),
    /// A view of `information_schema` ([`information_schema`]).
    Info(InfoView),
    /// A sequence read as a relation (`SELECT last_value, is_called FROM seq`): one row of
    /// its state, as PostgreSQL's sequence relations have.
    SequenceData(u32),
}

/// Every pg_catalog view by name (one list: names to views, and oids back to names).
const CATALOGS: &[(&str, CatalogTable)] = &[
    ("pg_namespace", CatalogTable::Namespace),
    ("pg_class", CatalogTable::Class),
    ("pg_attribute", CatalogTable::Attribute),
    ("pg_type", CatalogTable::Type),
    ("pg_index", CatalogTable::Index),
    ("pg_database", CatalogTable::Database),
    ("pg_roles", CatalogTable::Roles),
    ("pg_authid", CatalogTable::Authid),
    ("pg_user", CatalogTable::User),
    ("pg_settings", CatalogTable::Settings),
    ("pg_am", CatalogTable::Am),
    ("pg_opclass", CatalogTable::Opclass),
    ("pg_inherits", CatalogTable::Absent(Absent::Inherits)),
    (
        "pg_partitioned_table",
        CatalogTable::Absent(Absent::PartitionedTable),
    ),
    ("pg_constraint", CatalogTable::Constraint),
    ("pg_attrdef", CatalogTable::AttrDef),
    ("pg_depend", CatalogTable::Depend),
    ("pg_auth_members", CatalogTable::AuthMembers),
    ("pg_proc", CatalogTable::Absent(Absent::Proc)),
    ("pg_extension", CatalogTable::Absent(Absent::Extension)),
    ("pg_collation", CatalogTable::Collation),
    ("pg_prepared_xacts", CatalogTable::PreparedXacts),
    ("pg_locks", CatalogTable::Locks),
    ("pg_prepared_statements", CatalogTable::PreparedStatements),
    ("pg_cursors", CatalogTable::Cursors),
    ("pg_description", CatalogTable::Description),
    ("pg_tables", CatalogTable::Tables),
    ("pg_policy", CatalogTable::Absent(Absent::Policy)),
    (
        "pg_statistic_ext",
        CatalogTable::Absent(Absent::StatisticExt),
    ),
    ("pg_publication", CatalogTable::Absent(Absent::Publication)),
    (
        "pg_publication_rel",
        CatalogTable::Absent(Absent::PublicationRel),
    ),
    (
        "pg_publication_namespace",
        CatalogTable::Absent(Absent::PublicationNamespace),
    ),
    ("pg_trigger", CatalogTable::Absent(Absent::Trigger)),
    ("pg_rewrite", CatalogTable::Rewrite),
    ("pg_views", CatalogTable::Views),
    ("pg_range", CatalogTable::Absent(Absent::Range)),
    (
        "pg_foreign_table",
        CatalogTable::Absent(Absent::ForeignTable),
    ),
    (
        "pg_foreign_data_wrapper",
        CatalogTable::Absent(Absent::ForeignDataWrapper),
    ),
    (
        "pg_foreign_server",
        CatalogTable::Absent(Absent::ForeignServer),
    ),
    ("pg_init_privs", CatalogTable::InitPrivs),
    ("pg_transform", CatalogTable::Absent(Absent::Transform)),
    ("pg_operator", CatalogTable::Absent(Absent::Operator)),
    ("pg_opfamily", CatalogTable::Absent(Absent::Opfamily)),
    ("pg_amop", CatalogTable::Absent(Absent::Amop)),
    ("pg_amproc", CatalogTable::Absent(Absent::Amproc)),
    ("pg_ts_parser", CatalogTable::Absent(Absent::TsParser)),
    ("pg_ts_template", CatalogTable::Absent(Absent::TsTemplate)),
    ("pg_ts_dict", CatalogTable::Absent(Absent::TsDict)),
    ("pg_ts_config", CatalogTable::Absent(Absent::TsConfig)),
    ("pg_conversion", CatalogTable::Absent(Absent::Conversion)),
    ("pg_default_acl", CatalogTable::Absent(Absent::DefaultAcl)),
    (
        "pg_event_trigger",
        CatalogTable::Absent(Absent::EventTrigger),
    ),
    (
        "pg_subscription",
        CatalogTable::Absent(Absent::Subscription),
    ),
    (
        "pg_largeobject_metadata",
        CatalogTable::Absent(Absent::LargeobjectMetadata),
    ),
    ("pg_seclabels", CatalogTable::Absent(Absent::Seclabels)),
    ("pg_seclabel", CatalogTable::Absent(Absent::Seclabel)),
    ("pg_shseclabel", CatalogTable::Absent(Absent::Shseclabel)),
    (
        "pg_shdescription",
        CatalogTable::Absent(Absent::Shdescription),
    ),
    (
        "pg_db_role_setting",
        CatalogTable::Absent(Absent::DbRoleSetting),
    ),
    (
        "pg_parameter_acl",
        CatalogTable::Absent(Absent::ParameterAcl),
    ),
    ("pg_cast", CatalogTable::Absent(Absent::Cast)),
    ("pg_language", CatalogTable::Language),
    ("pg_tablespace", CatalogTable::Tablespace),
    ("pg_sequence", CatalogTable::Sequence),
    ("quire_stat_io", CatalogTable::StatIo),
    ("pg_stat_wal", CatalogTable::StatWal),
    ("pg_stat_bgwriter", CatalogTable::StatBgwriter),
];

use SqlType as T;

mod absent;
mod information_schema;
mod views;
use absent::Absent;
pub(crate) use information_schema::InfoView;
pub(crate) use views::{view_def, view_def_named};

impl CatalogTable {
    /// The catalog view `schema.name` (`schema` `None`: an unqualified name): pg_catalog's
    /// under `pg_catalog` or unqualified, information_schema's only under
    /// `information_schema`.
    pub(crate) fn resolve(schema: Option<&str>, name: &str) -> Option<CatalogTable> {
        match schema {
            Some("information_schema") => InfoView::named(name).map(CatalogTable::Info),
            _ => CatalogTable::named(name),
        }
    }

    pub(crate) fn named(name: &str) -> Option<CatalogTable> {
        CATALOGS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// The catalog's own oid (its `tableoid`): PostgreSQL's, for the catalogs that are
    /// tables there; `None` for the views.
    pub(crate) fn oid(self) -> Option<u32> {
        Some(match self {
            CatalogTable::Absent(a) => return a.oid(),
            CatalogTable::Namespace => NAMESPACE_RELID,
            CatalogTable::Class => CLASS_RELID,
            CatalogTable::Attribute => 1249,
            CatalogTable::Type => 1247,
            CatalogTable::Index => 2610,
            CatalogTable::Database => 1262,
            CatalogTable::Authid => 1260,
            CatalogTable::Am => 2601,
            CatalogTable::Opclass => 2616,
            CatalogTable::Constraint => 2606,
            CatalogTable::AttrDef => ATTRDEF_RELID,
            CatalogTable::Depend => 2608,
            CatalogTable::AuthMembers => 1261,
            CatalogTable::Collation => 3456,
            CatalogTable::Description => 2609,
            CatalogTable::Tablespace => 1213,
            CatalogTable::Sequence => 2224,
            CatalogTable::InitPrivs => 3394,
            CatalogTable::Language => 2612,
            CatalogTable::Rewrite => views::REWRITE_RELID,
            _ => return None,
        })
    }

    pub(crate) fn columns(self) -> &'static [(&'static str, SqlType)] {
        match self {
            CatalogTable::Info(v) => v.columns(),
            CatalogTable::Absent(a) => a.columns(),
            CatalogTable::SequenceData(_) => &[
                ("last_value", T::Int8),
                ("log_cnt", T::Int8),
                ("is_called", T::Bool),
            ],
            CatalogTable::Namespace => &[
                ("oid", T::Oid),
                ("nspname", T::Name),
                ("nspowner", T::Oid),
                ("nspacl", T::TEXT_ARRAY),
            ],
            CatalogTable::Class => &[
                ("oid", T::Oid),
                ("relname", T::Name),
                ("relnamespace", T::Oid),
                ("reltype", T::Oid),
                ("reloftype", T::Oid),
                ("relowner", T::Oid),
                ("relam", T::Oid),
                ("relfilenode", T::Oid),
                ("reltablespace", T::Oid),
                ("relpages", T::Int4),
                ("reltuples", T::Float4),
                ("reltoastrelid", T::Oid),
                ("relhasindex", T::Bool),
                ("relisshared", T::Bool),
                ("relpersistence", T::Char),
                ("relkind", T::Char),
                ("relnatts", T::Int2),
                ("relchecks", T::Int2),
                ("relhasrules", T::Bool),
                ("relhastriggers", T::Bool),
                ("relhassubclass", T::Bool),
                ("relrowsecurity", T::Bool),
                ("relforcerowsecurity", T::Bool),
                ("relispopulated", T::Bool),
                ("relreplident", T::Char),
                ("relispartition", T::Bool),
                ("relacl", T::TEXT_ARRAY),
                ("reloptions", T::TEXT_ARRAY),
                ("relpartbound", T::Text),
                ("relallvisible", T::Int4),
                // quire's freezing is per page, not per relation: 0 (PostgreSQL's
                // InvalidTransactionId) for every relation.
                ("relfrozenxid", T::Int8),
                ("relminmxid", T::Int8),
            ],
            CatalogTable::Attribute => &[
                ("attrelid", T::Oid),
                ("attname", T::Name),
                ("atttypid", T::Oid),
                ("attlen", T::Int2),
                ("attnum", T::Int2),
                ("atttypmod", T::Int4),
                ("attndims", T::Int2),
                ("attnotnull", T::Bool),
                ("atthasdef", T::Bool),
                ("attidentity", T::Char),
                ("attgenerated", T::Char),
                ("attisdropped", T::Bool),
                ("attcollation", T::Oid),
                ("attstattarget", T::Int4),
                ("attstorage", T::Char),
                ("attcompression", T::Char),
                ("attalign", T::Char),
                ("attislocal", T::Bool),
                ("attinhcount", T::Int2),
                ("attoptions", T::TEXT_ARRAY),
                ("attfdwoptions", T::TEXT_ARRAY),
                ("atthasmissing", T::Bool),
                ("attmissingval", T::TEXT_ARRAY),
                ("attacl", T::TEXT_ARRAY),
            ],
            CatalogTable::Type => &[
                ("oid", T::Oid),
                ("typname", T::Name),
                ("typnamespace", T::Oid),
                ("typowner", T::Oid),
                ("typlen", T::Int2),
                ("typbyval", T::Bool),
                ("typtype", T::Char),
                ("typcategory", T::Char),
                ("typrelid", T::Oid),
                ("typelem", T::Oid),
                ("typarray", T::Oid),
                ("typnotnull", T::Bool),
                ("typbasetype", T::Oid),
                ("typtypmod", T::Int4),
                ("typcollation", T::Oid),
                ("typdelim", T::Char),
                ("typisdefined", T::Bool),
                ("typacl", T::TEXT_ARRAY),
                ("typstorage", T::Char),
                ("typalign", T::Char),
            ],
            CatalogTable::Index => &[
                ("indexrelid", T::Oid),
                ("indrelid", T::Oid),
                ("indnatts", T::Int2),
                ("indnkeyatts", T::Int2),
                ("indisunique", T::Bool),
                ("indnullsnotdistinct", T::Bool),
                ("indisprimary", T::Bool),
                ("indisexclusion", T::Bool),
                ("indimmediate", T::Bool),
                ("indisclustered", T::Bool),
                ("indisvalid", T::Bool),
                ("indisready", T::Bool),
                ("indislive", T::Bool),
                ("indisreplident", T::Bool),
                ("indkey", T::INT2_VECTOR),
                ("indcollation", T::OID_VECTOR),
                ("indclass", T::OID_VECTOR),
                ("indoption", T::INT2_VECTOR),
                ("indexprs", T::Text),
                ("indpred", T::Text),
            ],
            CatalogTable::Database => &[
                ("oid", T::Oid),
                ("datname", T::Name),
                ("datdba", T::Oid),
                ("encoding", T::Int4),
                ("datlocprovider", T::Char),
                ("datistemplate", T::Bool),
                ("datallowconn", T::Bool),
                ("datconnlimit", T::Int4),
                ("datcollate", T::Text),
                ("datctype", T::Text),
                ("daticulocale", T::Text),
                ("datacl", T::TEXT_ARRAY),
                ("datfrozenxid", T::Int8),
                ("datminmxid", T::Int8),
                ("dattablespace", T::Oid),
                ("datcollversion", T::Text),
                ("daticurules", T::Text),
            ],
            CatalogTable::User => &[
                ("usename", T::Name),
                ("usesysid", T::Oid),
                ("usecreatedb", T::Bool),
                ("usesuper", T::Bool),
                ("userepl", T::Bool),
                ("usebypassrls", T::Bool),
                ("passwd", T::Text),
                ("valuntil", T::Timestamptz),
                ("useconfig", T::TEXT_ARRAY),
            ],
            CatalogTable::Roles => &[
                ("rolname", T::Name),
                ("rolsuper", T::Bool),
                ("rolinherit", T::Bool),
                ("rolcreaterole", T::Bool),
                ("rolcreatedb", T::Bool),
                ("rolcanlogin", T::Bool),
                ("rolreplication", T::Bool),
                ("rolconnlimit", T::Int4),
                ("rolpassword", T::Text),
                ("rolvaliduntil", T::Timestamptz),
                ("rolbypassrls", T::Bool),
                ("rolconfig", T::TEXT_ARRAY),
                ("oid", T::Oid),
            ],
            CatalogTable::Authid => &[
                ("oid", T::Oid),
                ("rolname", T::Name),
                ("rolsuper", T::Bool),
                ("rolinherit", T::Bool),
                ("rolcreaterole", T::Bool),
                ("rolcreatedb", T::Bool),
                ("rolcanlogin", T::Bool),
                ("rolreplication", T::Bool),
                ("rolbypassrls", T::Bool),
                ("rolconnlimit", T::Int4),
                ("rolpassword", T::Text),
                ("rolvaliduntil", T::Timestamptz),
            ],
            CatalogTable::Settings => &[
                ("name", T::Text),
                ("setting", T::Text),
                ("unit", T::Text),
                ("category", T::Text),
                ("short_desc", T::Text),
                ("context", T::Text),
                ("vartype", T::Text),
                ("source", T::Text),
                ("boot_val", T::Text),
                ("reset_val", T::Text),
            ],
            CatalogTable::Am => &[
                ("oid", T::Oid),
                ("amname", T::Name),
                ("amhandler", T::Regproc),
                ("amtype", T::Char),
            ],
            CatalogTable::Opclass => &[
                ("oid", T::Oid),
                ("opcmethod", T::Oid),
                ("opcname", T::Name),
                ("opcnamespace", T::Oid),
                ("opcowner", T::Oid),
                ("opcfamily", T::Oid),
                ("opcintype", T::Oid),
                ("opcdefault", T::Bool),
                ("opckeytype", T::Oid),
            ],
            CatalogTable::Constraint => &[
                ("oid", T::Oid),
                ("conname", T::Name),
                ("connamespace", T::Oid),
                ("contype", T::Char),
                ("condeferrable", T::Bool),
                ("condeferred", T::Bool),
                ("convalidated", T::Bool),
                ("conrelid", T::Oid),
                ("contypid", T::Oid),
                ("conindid", T::Oid),
                ("conparentid", T::Oid),
                ("confrelid", T::Oid),
                ("conislocal", T::Bool),
                ("confupdtype", T::Char),
                ("confdeltype", T::Char),
                ("confmatchtype", T::Char),
                ("conkey", T::INT2_ARRAY),
                ("confkey", T::INT2_ARRAY),
                ("coninhcount", T::Int2),
                ("connoinherit", T::Bool),
            ],
            CatalogTable::AttrDef => &[
                ("oid", T::Oid),
                ("adrelid", T::Oid),
                ("adnum", T::Int2),
                ("adbin", T::Text),
            ],
            CatalogTable::Collation => &[
                ("oid", T::Oid),
                ("collname", T::Name),
                ("collnamespace", T::Oid),
                ("collowner", T::Oid),
                ("collencoding", T::Int4),
            ],
            CatalogTable::Cursors => &[
                ("name", T::Text),
                ("statement", T::Text),
                ("is_holdable", T::Bool),
                ("is_binary", T::Bool),
                ("is_scrollable", T::Bool),
                ("creation_time", T::Timestamptz),
            ],
            CatalogTable::PreparedStatements => &[
                ("name", T::Text),
                ("statement", T::Text),
                ("prepare_time", T::Timestamptz),
                ("parameter_types", T::TEXT_ARRAY),
                ("result_types", T::TEXT_ARRAY),
                ("from_sql", T::Bool),
                ("generic_plans", T::Int8),
                ("custom_plans", T::Int8),
            ],
            CatalogTable::Locks => &[
                ("locktype", T::Text),
                ("database", T::Oid),
                ("relation", T::Oid),
                ("page", T::Int4),
                ("tuple", T::Int2),
                ("virtualxid", T::Text),
                ("transactionid", T::Int8),
                ("classid", T::Oid),
                ("objid", T::Oid),
                ("objsubid", T::Int2),
                ("virtualtransaction", T::Text),
                ("pid", T::Int4),
                ("mode", T::Text),
                ("granted", T::Bool),
                ("fastpath", T::Bool),
                ("waitstart", T::Timestamptz),
            ],
            CatalogTable::PreparedXacts => &[
                ("transaction", T::Int8),
                ("gid", T::Text),
                ("prepared", T::Timestamptz),
                ("owner", T::Name),
                ("database", T::Name),
            ],
            CatalogTable::Description => &[
                ("objoid", T::Oid),
                ("classoid", T::Oid),
                ("objsubid", T::Int4),
                ("description", T::Text),
            ],
            CatalogTable::Depend => &[
                ("classid", T::Oid),
                ("objid", T::Oid),
                ("objsubid", T::Int4),
                ("refclassid", T::Oid),
                ("refobjid", T::Oid),
                ("refobjsubid", T::Int4),
                ("deptype", T::Char),
            ],
            CatalogTable::AuthMembers => &[
                ("roleid", T::Oid),
                ("member", T::Oid),
                ("grantor", T::Oid),
                ("admin_option", T::Bool),
                ("inherit_option", T::Bool),
                ("set_option", T::Bool),
            ],
            CatalogTable::Tablespace => &[
                ("oid", T::Oid),
                ("spcname", T::Name),
                ("spcowner", T::Oid),
                ("spcacl", T::TEXT_ARRAY),
                ("spcoptions", T::TEXT_ARRAY),
            ],
            CatalogTable::InitPrivs => &[
                ("objoid", T::Oid),
                ("classoid", T::Oid),
                ("objsubid", T::Int4),
                ("privtype", T::Char),
                ("initprivs", T::TEXT_ARRAY),
            ],
            CatalogTable::Language => &[
                ("oid", T::Oid),
                ("lanname", T::Name),
                ("lanowner", T::Oid),
                ("lanispl", T::Bool),
                ("lanpltrusted", T::Bool),
                ("lanplcallfoid", T::Oid),
                ("laninline", T::Oid),
                ("lanvalidator", T::Oid),
                ("lanacl", T::TEXT_ARRAY),
            ],
            CatalogTable::Sequence => &[
                ("seqrelid", T::Oid),
                ("seqtypid", T::Oid),
                ("seqstart", T::Int8),
                ("seqincrement", T::Int8),
                ("seqmax", T::Int8),
                ("seqmin", T::Int8),
                ("seqcache", T::Int8),
                ("seqcycle", T::Bool),
            ],
            CatalogTable::StatIo => &[("op", T::Text), ("count", T::Int8)],
            CatalogTable::StatWal => &[
                ("wal_records", T::Int8),
                ("wal_fpi", T::Int8),
                ("wal_bytes", T::Numeric(None)),
                ("wal_buffers_full", T::Int8),
                ("wal_write", T::Int8),
                ("wal_sync", T::Int8),
                ("wal_write_time", T::Float8),
                ("wal_sync_time", T::Float8),
                ("stats_reset", T::Timestamptz),
            ],
            CatalogTable::StatBgwriter => &[
                ("checkpoints_timed", T::Int8),
                ("checkpoints_req", T::Int8),
                ("checkpoint_write_time", T::Float8),
                ("checkpoint_sync_time", T::Float8),
                ("buffers_checkpoint", T::Int8),
                ("buffers_clean", T::Int8),
                ("maxwritten_clean", T::Int8),
                ("buffers_backend", T::Int8),
                ("buffers_backend_fsync", T::Int8),
                ("buffers_alloc", T::Int8),
                ("stats_reset", T::Timestamptz),
            ],
            CatalogTable::Views => &[
                ("schemaname", T::Name),
                ("viewname", T::Name),
                ("viewowner", T::Name),
                ("definition", T::Text),
            ],
            CatalogTable::Rewrite => &[
                ("oid", T::Oid),
                ("rulename", T::Name),
                ("ev_class", T::Oid),
                ("ev_type", T::Char),
                ("ev_enabled", T::Char),
                ("is_instead", T::Bool),
                ("ev_qual", T::Text),
                ("ev_action", T::Text),
            ],
            CatalogTable::Tables => &[
                ("schemaname", T::Name),
                ("tablename", T::Name),
                ("tableowner", T::Name),
                ("tablespace", T::Name),
                ("hasindexes", T::Bool),
                ("hasrules", T::Bool),
                ("hastriggers", T::Bool),
                ("rowsecurity", T::Bool),
            ],
        }
    }

    /// The view's rows as `cx`'s transaction sees the catalog.
    pub(crate) fn rows(self, cx: &Cx) -> Result<Vec<Row>> {
        Ok(match self {
            CatalogTable::Info(v) => v.rows(cx)?,
            CatalogTable::SequenceData(oid) => {
                let s = cx.tx.sequence_state(quire_engine::Oid(u64::from(oid)))?;
                vec![vec![
                    int(s.last_value),
                    int(s.log_cnt),
                    Value::Bool(s.is_called),
                ]]
            }
            // As initdb makes them in PostgreSQL 15 and later: `public` belongs to
            // pg_database_owner, and PUBLIC may use both.
            CatalogTable::Namespace => vec![
                vec![
                    int(PG_CATALOG_NS),
                    text("pg_catalog"),
                    int(SUPERUSER_OID),
                    text(PG_CATALOG_ACL),
                ],
                vec![
                    int(PUBLIC_NS),
                    text("public"),
                    int(crate::roles::DATABASE_OWNER_OID.into()),
                    text("{pg_database_owner=UC/pg_database_owner,=U/pg_database_owner}"),
                ],
            ],
            CatalogTable::Class => class_rows(cx.tx)?,
            CatalogTable::Attribute => attribute_rows(cx.tx)?,
            CatalogTable::Type => type_rows(),
            CatalogTable::Index => index_rows(cx.tx)?,
            CatalogTable::Database => vec![vec![
                int(DATABASE_OID),
                text(DATABASE_NAME),
                int(SUPERUSER_OID),
                int(6),
                text("c"),
                Value::Bool(false),
                Value::Bool(true),
                int(-1),
                text("C"),
                text("C"),
                Value::Null,
                Value::Null,
                int(0),
                int(0),
                int(1663),
                Value::Null,
                Value::Null,
            ]],
            CatalogTable::Roles => crate::roles::all(cx.tx)?.iter().map(pg_roles_row).collect(),
            CatalogTable::Authid => {
                crate::roles::check_authid_readable(cx.tx, cx.settings.identity())?;
                crate::roles::all(cx.tx)?
                    .iter()
                    .map(pg_authid_row)
                    .collect()
            }
            CatalogTable::User => crate::roles::all(cx.tx)?
                .iter()
                .filter(|r| r.login)
                .map(pg_user_row)
                .collect(),
            CatalogTable::AuthMembers => auth_members_rows(cx.tx)?,
            CatalogTable::Settings => cx
                .settings
                .all()
                .into_iter()
                .map(|(name, value, source)| {
                    vec![
                        text(&name),
                        text(&value),
                        Value::Null,
                        text("quire"),
                        Value::Null,
                        text("user"),
                        text("string"),
                        text(source),
                        Value::Null,
                        text(&value),
                    ]
                })
                .collect(),
            CatalogTable::Description => descriptions(cx.tx, None)?
                .into_iter()
                .map(|d| {
                    vec![
                        int(d.objoid.into()),
                        int(d.classoid.into()),
                        int(d.objsubid.into()),
                        text(&d.text),
                    ]
                })
                .collect(),
            // pg_catalog's privileges as initdb set them (pg_dump leaves them out).
            CatalogTable::InitPrivs => vec![vec![
                int(PG_CATALOG_NS),
                int(NAMESPACE_RELID.into()),
                int(0),
                text("i"),
                text(PG_CATALOG_ACL),
            ]],
            CatalogTable::Language => {
                [(12, "internal", false), (13, "c", false), (14, "sql", true)]
                    .iter()
                    .map(|&(oid, name, trusted)| {
                        vec![
                            int(oid),
                            text(name),
                            int(SUPERUSER_OID),
                            Value::Bool(false),
                            Value::Bool(trusted),
                            int(0),
                            int(0),
                            int(0),
                            Value::Null,
                        ]
                    })
                    .collect()
            }
            CatalogTable::Am => vec![
                // The handlers' oids are PostgreSQL's (heap_tableam_handler, bthandler).
                vec![int(HEAP_AM), text("heap"), int(3), text("t")],
                vec![int(BTREE_AM), text("btree"), int(330), text("i")],
            ],
            CatalogTable::Tablespace => [(1663, "pg_default"), (1664, "pg_global")]
                .iter()
                .map(|&(oid, name)| {
                    vec![
                        int(oid),
                        text(name),
                        int(SUPERUSER_OID),
                        Value::Null,
                        Value::Null,
                    ]
                })
                .collect(),
            CatalogTable::Opclass => OPCLASSES
                .iter()
                .map(|&(oid, name, family, intype)| {
                    let key = if name == "name_ops" { 2275 } else { 0 };
                    vec![
                        int(oid.into()),
                        int(BTREE_AM),
                        text(name),
                        int(PG_CATALOG_NS),
                        int(SUPERUSER_OID),
                        int(family.into()),
                        int(intype.into()),
                        Value::Bool(true),
                        int(key),
                    ]
                })
                .collect(),
            CatalogTable::Absent(_) => Vec::new(),
            CatalogTable::Depend => depend_rows(cx.tx)?,
            CatalogTable::AttrDef => attrdef_rows(cx.tx)?,
            CatalogTable::Sequence => sequence_rows(cx.tx)?,
            CatalogTable::Constraint => constraint_rows(cx.tx)?,
            CatalogTable::StatIo => {
                let counts = cx.db.io_counts();
                quire_engine::vfs::OpKind::ALL
                    .iter()
                    .map(|&k| vec![text(k.name()), count(counts.get(k))])
                    .collect()
            }
            CatalogTable::StatWal => {
                let (counters, reset_at) = cx.db.wal_stats();
                vec![stat_wal_row(&counters, reset_at)]
            }
            CatalogTable::StatBgwriter => {
                let (counters, reset_at) = cx.db.bgwriter_stats();
                vec![stat_bgwriter_row(&counters, reset_at)]
            }
            CatalogTable::Collation => vec![vec![
                int(DEFAULT_COLLATION),
                text("default"),
                int(PG_CATALOG_NS),
                int(SUPERUSER_OID),
                int(-1),
            ]],
            CatalogTable::Cursors => cx
                .cursors
                .iter()
                .map(|(name, c)| {
                    vec![
                        text(name),
                        text(&c.statement),
                        Value::Bool(c.holdable),
                        Value::Bool(false),
                        Value::Bool(c.scrollable),
                        Value::Timestamp(c.creation_time_us),
                    ]
                })
                .collect(),
            CatalogTable::PreparedStatements => cx
                .prepared
                .iter()
                .map(|(name, p)| {
                    vec![
                        text(name),
                        text(&p.statement),
                        Value::Timestamp(p.prepare_time_us),
                        text(&type_array(&p.parameter_types)),
                        text(&type_array(&p.result_types)),
                        Value::Bool(p.from_sql),
                        int(p.generic_plans),
                        int(0),
                    ]
                })
                .collect(),
            CatalogTable::Locks => lock_rows(cx.db),
            CatalogTable::PreparedXacts => cx
                .db
                .prepared_transactions()
                .into_iter()
                .map(|p| {
                    let at = i64::try_from(p.prepared_at_micros).unwrap_or(i64::MAX);
                    vec![
                        count(p.xid.0),
                        text(&p.gid),
                        Value::Timestamp(at),
                        text(SUPERUSER),
                        text(DATABASE_NAME),
                    ]
                })
                .collect(),
            CatalogTable::Views => views::pg_views_rows(cx.tx, !cx.settings.sees_public())?,
            CatalogTable::Rewrite => views::rewrite_rows(cx.tx)?,
            CatalogTable::Tables => user_tables(cx.tx)?
                .into_iter()
                .map(|t| {
                    vec![
                        text("public"),
                        text(&t.def.name),
                        text(SUPERUSER),
                        Value::Null,
                        Value::Bool(!t.indexes.is_empty()),
                        Value::Bool(false),
                        Value::Bool(false),
                        Value::Bool(false),
                    ]
                })
                .collect(),
        })
    }
}

/// A `regtype[]` as text: the types' names, quoted where they have blanks.
fn type_array(types: &[SqlType]) -> String {
    let names: Vec<String> = types
        .iter()
        .map(|t| {
            let n = t.name();
            if n.contains([' ', ',', '"', '{', '}', '\\']) {
                format!("\"{}\"", n.replace('\\', "\\\\").replace('"', "\\\""))
            } else {
                n
            }
        })
        .collect();
    format!("{{{}}}", names.join(","))
}

/// pg_locks' rows: one per owner, tag and mode, held or awaited. The `pid` of a client
/// session's lock is its process id; a prepared transaction's is NULL, its
/// `virtualtransaction` PostgreSQL's `-1/xid`. Row locks are kept in the rows themselves
/// (xmax), not in the lock table, so only their waits show (as `transactionid`).
fn lock_rows(db: &quire_engine::Database) -> Vec<Row> {
    use quire_engine::LockTag;
    let mut rows: Vec<Row> = Vec::new();
    // The engine's database number of its tags shows as the one database's oid; 0 (the
    // engine's own catalog) stays 0, as PostgreSQL's shared catalogs show.
    let database = |db_oid: u32| int(if db_oid == 0 { 0 } else { DATABASE_OID });
    let mut locks = db.lock_status();
    locks.sort_by_key(|l| (l.owner, l.tag, l.mode, !l.granted));
    for l in locks {
        let none = || Value::Null;
        let (locktype, database, relation, xid, classid, objid, objsubid) = match l.tag {
            LockTag::Relation { db_oid, rel_oid } => (
                "relation",
                database(db_oid),
                count(rel_oid.0),
                none(),
                none(),
                none(),
                none(),
            ),
            LockTag::Transaction { xid } => (
                "transactionid",
                none(),
                none(),
                count(xid.0),
                none(),
                none(),
                none(),
            ),
            LockTag::Advisory { db_oid, key, pair } => (
                "advisory",
                database(db_oid),
                none(),
                none(),
                count(key >> 32),
                count(key & 0xffff_ffff),
                int(if pair { 2 } else { 1 }),
            ),
        };
        let (vxact, pid) = match l.owner.backend_pid() {
            Some(pid) => (format!("{pid}/0"), int(i64::from(pid))),
            None => match l.owner.prepared_xid() {
                Some(xid) => (format!("-1/{xid}"), none()),
                None => (format!("{}/0", l.owner.0), none()),
            },
        };
        rows.push(vec![
            text(locktype),
            database,
            relation,
            none(),
            none(),
            none(),
            xid,
            classid,
            objid,
            objsubid,
            text(&vxact),
            pid,
            text(l.mode.name()),
            Value::Bool(l.granted),
            Value::Bool(l.fast_path),
            none(),
        ]);
    }
    rows
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

/// The one row of `pg_stat_wal`.
fn stat_wal_row(c: &WalCounters, since_micros: u64) -> Row {
    // PostgreSQL reports the times in milliseconds.
    #[allow(clippy::cast_precision_loss)] // exact below 2^53 ns (104 days of I/O)
    let ms = |ns: u64| Value::Float(ns as f64 / 1e6);
    vec![
        count(c.records),
        count(c.full_page_images),
        Value::Numeric(crate::numeric::from_i64(
            i64::try_from(c.bytes).unwrap_or(i64::MAX),
        )),
        count(c.buffers_full),
        count(c.writes),
        count(c.fsyncs),
        ms(c.write_ns),
        ms(c.sync_ns),
        Value::Timestamp(i64::try_from(since_micros).unwrap_or(i64::MAX)),
    ]
}

/// The one row of `pg_stat_bgwriter`.
fn stat_bgwriter_row(c: &quire_engine::BgwriterCounters, since_micros: u64) -> Row {
    // PostgreSQL reports the times in milliseconds.
    #[allow(clippy::cast_precision_loss)] // exact below 2^53 µs (285 years)
    let ms = |us: u64| Value::Float(us as f64 / 1e3);
    vec![
        count(c.checkpoints_timed),
        count(c.checkpoints_req),
        ms(c.checkpoint_write_us),
        ms(c.checkpoint_sync_us),
        count(c.buffers_checkpoint),
        count(c.buffers_clean),
        count(c.maxwritten_clean),
        count(c.buffers_backend),
        count(0),
        count(c.buffers_alloc),
        Value::Timestamp(i64::try_from(since_micros).unwrap_or(i64::MAX)),
    ]
}

fn oid_of(o: quire_engine::Oid) -> Value {
    count(o.0)
}

/// A counter (or any u64 the catalogs show) as a bigint, saturating: no counter reaches
/// 2^63.
fn count(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The SQL-visible tables (quire's own catalog table is hidden), with their SQL types.
/// What `pg_roles`, `pg_user` and `pg_shadow` show for every role's password.
const MASKED_PASSWORD: &str = "********";

fn valid_until(r: &Role) -> Value {
    r.valid_until.map_or(Value::Null, Value::Timestamp)
}

fn pg_roles_row(r: &Role) -> Row {
    vec![
        text(&r.name),
        Value::Bool(r.superuser),
        Value::Bool(r.inherit),
        Value::Bool(r.createrole),
        Value::Bool(r.createdb),
        Value::Bool(r.login),
        Value::Bool(r.replication),
        int(i64::from(r.connection_limit)),
        text(MASKED_PASSWORD),
        valid_until(r),
        Value::Bool(r.bypassrls),
        Value::Null,
        int(i64::from(r.oid)),
    ]
}

fn pg_authid_row(r: &Role) -> Row {
    vec![
        int(i64::from(r.oid)),
        text(&r.name),
        Value::Bool(r.superuser),
        Value::Bool(r.inherit),
        Value::Bool(r.createrole),
        Value::Bool(r.createdb),
        Value::Bool(r.login),
        Value::Bool(r.replication),
        Value::Bool(r.bypassrls),
        int(i64::from(r.connection_limit)),
        r.password.as_deref().map_or(Value::Null, text),
        valid_until(r),
    ]
}

fn pg_user_row(r: &Role) -> Row {
    vec![
        text(&r.name),
        int(i64::from(r.oid)),
        Value::Bool(r.createdb),
        Value::Bool(r.superuser),
        Value::Bool(r.replication),
        Value::Bool(r.bypassrls),
        text(MASKED_PASSWORD),
        valid_until(r),
        Value::Null,
    ]
}

fn auth_members_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let roles = crate::roles::all(tx)?;
    let inherits = |oid: u32| roles.iter().any(|r| r.oid == oid && r.inherit);
    Ok(crate::roles::memberships(tx)?
        .iter()
        .map(|m| {
            vec![
                int(i64::from(m.roleid)),
                int(i64::from(m.member)),
                int(i64::from(m.grantor)),
                Value::Bool(m.admin_option),
                Value::Bool(inherits(m.member)),
                Value::Bool(true),
            ]
        })
        .collect())
}

fn user_tables(tx: &Transaction) -> Result<Vec<TableInfo>> {
    let mut out = Vec::new();
    for def in tx.tables()? {
        if def.name.starts_with(catalog::RESERVED_PREFIX) {
            continue;
        }
        out.push(catalog::lookup(tx, &def.name)?);
    }
    out.sort_by(|a, b| a.def.name.cmp(&b.def.name));
    Ok(out)
}

fn class_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for s in user_sequences(tx)? {
        // PostgreSQL's sequence relation has three columns: last_value, log_cnt, is_called.
        rows.push(class_row(oid_of(s.oid), &s.name, "S", 0, 3, false));
    }
    for t in user_tables(tx)? {
        let mut row = class_row(
            oid_of(t.def.oid),
            &t.def.name,
            "r",
            HEAP_AM,
            t.columns.len(),
            !t.indexes.is_empty(),
        );
        row[RELCHECKS] = int(i64::try_from(t.checks.len()).unwrap_or(i64::MAX));
        row[RELHASTRIGGERS] =
            Value::Bool(!t.foreign_keys.is_empty() || !t.referenced_by.is_empty());
        rows.push(row);
        for i in &t.indexes {
            rows.push(class_row(
                oid_of(i.oid),
                &i.name,
                "i",
                BTREE_AM,
                i.columns.len(),
                false,
            ));
        }
    }
    rows.extend(views::class_rows(tx)?);
    Ok(rows)
}

/// The sequences SQL sees (not quire's own).
fn user_sequences(tx: &Transaction) -> Result<Vec<quire_engine::SequenceDef>> {
    let mut all = tx.sequences()?;
    all.retain(|s| !s.name.starts_with(catalog::RESERVED_PREFIX));
    Ok(all)
}

/// `relchecks`' place in a pg_class row.
const RELCHECKS: usize = 17;
/// `relhastriggers`: PostgreSQL's foreign keys are triggers on both tables, and psql looks
/// for them only when it is set.
const RELHASTRIGGERS: usize = 19;

fn class_row(oid: Value, name: &str, kind: &str, am: i64, natts: usize, has_index: bool) -> Row {
    let f = Value::Bool(false);
    vec![
        oid.clone(),
        text(name),
        int(PUBLIC_NS),
        int(0),
        int(0),
        int(SUPERUSER_OID),
        int(am),
        oid,
        int(0),
        int(0),
        Value::Float(-1.0),
        int(0),
        Value::Bool(has_index),
        f.clone(),
        text("p"),
        text(kind),
        int(i64::try_from(natts).unwrap_or(i64::MAX)),
        int(0),
        f.clone(),
        f.clone(),
        f.clone(),
        f.clone(),
        f.clone(),
        Value::Bool(true),
        text("d"),
        f,
        Value::Null,
        Value::Null,
        Value::Null,
        int(0),
        int(0),
        int(0),
    ]
}

/// One row per column DEFAULT; `adbin` holds the expression's text, which
/// `pg_get_expr` returns as it is.
/// A DEFAULT's oid: they are not kept, so the table's, offset by the column.
fn attrdef_oid(table: quire_engine::Oid, attnum: i64) -> Value {
    oid_of(table)
        .as_int()
        .map_or(Value::Null, |o| int(o * 2048 + attnum))
}

fn attrdef_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for t in user_tables(tx)? {
        for (i, c) in t.columns.iter().enumerate() {
            // An identity column's sequence is no DEFAULT to PostgreSQL.
            if let (Some(expr), None) = (&c.default, c.identity) {
                let attnum = i64::try_from(i).unwrap_or(i64::MAX - 1) + 1;
                rows.push(vec![
                    attrdef_oid(t.def.oid, attnum),
                    oid_of(t.def.oid),
                    int(attnum),
                    text(&default_display(expr, c.ty)),
                ]);
            }
        }
    }
    Ok(rows)
}

/// A column's DEFAULT as `pg_get_expr` shows it. quire keeps the expression as written;
/// PostgreSQL keeps it coerced to the column's type and prints it back (ruleutils.c's
/// `get_const_expr`). For a quoted constant — what ORMs write (`DEFAULT 'true'`) — that is
/// done here: the value in its type's output form, bare for booleans and non-negative
/// integers, quoted and cast otherwise (`'x'::text`, `'-3'::integer`). Other expressions,
/// and constants of other types, are shown as written.
fn default_display(expr: &str, ty: SqlType) -> String {
    let quoted = expr
        .strip_prefix('\'')
        .and_then(|e| e.strip_suffix('\''))
        .filter(|inner| !inner.replace("''", "").contains('\''));
    let Some(inner) = quoted else {
        return expr.to_string();
    };
    // The constant before the length coercion PostgreSQL applies on insert: `'a'::bpchar`.
    let constant_ty = match ty {
        T::Varchar(_) => T::Varchar(None),
        T::Bpchar(_) => T::Bpchar(None),
        t => t,
    };
    let Ok(value) = crate::types::parse_text(constant_ty, &inner.replace("''", "'")) else {
        return expr.to_string();
    };
    let Some(out) = crate::types::format_text(&value, constant_ty) else {
        return expr.to_string();
    };
    let cast = |name: &str| format!("'{}'::{name}", out.replace('\'', "''"));
    match ty {
        T::Bool => if out == "t" { "true" } else { "false" }.to_string(),
        T::Int4 if !out.starts_with('-') => out,
        T::Int2
        | T::Int4
        | T::Int8
        | T::Text
        | T::Name
        | T::Date
        | T::Timestamp
        | T::Timestamptz
        | T::Array(_) => cast(&ty.name()),
        T::Varchar(_) => cast("character varying"),
        T::Bpchar(_) => cast("bpchar"),
        _ => expr.to_string(),
    }
}

/// Which size a `pg_*_size` function reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SizeOf {
    /// One fork (`pg_relation_size(rel [, fork])`).
    Fork,
    /// Every fork (`pg_table_size`).
    Table,
    /// A table's indexes (`pg_indexes_size`).
    Indexes,
    /// Both (`pg_total_relation_size`).
    Total,
}

/// A `pg_*_size` function of relation `oid`: NULL (`None`) for no such relation, as
/// PostgreSQL answers.
pub(crate) fn relation_size(
    tx: &Transaction,
    oid: u32,
    which: SizeOf,
    fork: &str,
) -> Result<Option<i64>> {
    use quire_engine::Fork;
    let oid = quire_engine::Oid(u64::from(oid));
    let all_forks = |o| -> Result<Option<u64>> {
        let mut total = None;
        for f in Fork::ALL {
            if let Some(b) = tx.relation_fork_bytes(o, f)? {
                total = Some(total.unwrap_or(0) + b);
            }
        }
        Ok(total)
    };
    let indexes = |o| -> Result<u64> {
        let mut total = 0;
        if let Some(Entry::Table(_)) = tx.relation(o)? {
            for i in tx.table_indexes(o)? {
                total += all_forks(i.oid)?.unwrap_or(0);
            }
        }
        Ok(total)
    };
    let bytes = match which {
        SizeOf::Fork => {
            let f = match fork {
                "main" => Fork::Main,
                "fsm" => Fork::Fsm,
                "vm" => Fork::Vm,
                "init" => return Ok(tx.relation(oid)?.map(|_| 0)),
                other => {
                    return Err(SqlError::new(
                        SqlState::INVALID_PARAMETER_VALUE,
                        format!("invalid fork name \"{other}\""),
                    ))
                }
            };
            tx.relation_fork_bytes(oid, f)?
        }
        // A table's size counts its TOAST relation, as PostgreSQL's does.
        SizeOf::Table => match all_forks(oid)? {
            Some(t) => Some(t + tx.toast_bytes(oid)?),
            None => None,
        },
        SizeOf::Indexes => all_forks(oid)?.map(|_| indexes(oid)).transpose()?,
        SizeOf::Total => match all_forks(oid)? {
            Some(t) => Some(t + tx.toast_bytes(oid)? + indexes(oid)?),
            None => None,
        },
    };
    Ok(bytes.map(|b| i64::try_from(b).unwrap_or(i64::MAX)))
}

/// `pg_size_pretty(bigint)`: bytes below 10 kB, then kB, MB, GB, TB, PB, each rounded
/// half away from zero, as PostgreSQL prints them.
pub(crate) fn size_pretty(bytes: i64) -> String {
    const LIMIT: i64 = 10 * 1024;
    if bytes.unsigned_abs() < LIMIT.unsigned_abs() {
        return format!("{bytes} bytes");
    }
    let half_rounded = |x: i64| i64::midpoint(x, if x < 0 { -1 } else { 1 });
    // One extra bit kept for the rounding.
    let mut size = bytes >> 9;
    for unit in ["kB", "MB", "GB", "TB"] {
        if size.abs() < LIMIT * 2 - 1 {
            return format!("{} {unit}", half_rounded(size));
        }
        size >>= 10;
    }
    format!("{} PB", half_rounded(size))
}

/// `pg_class`'s own oid, which pg_depend's `classid` and `refclassid` name.
const PG_CLASS_OID: i64 = CLASS_RELID as i64;
const ATTRDEF_OID: i64 = ATTRDEF_RELID as i64;

/// The oids of the catalogs psql casts to `regclass` (`'pg_catalog.pg_class'::regclass`).
fn catalog_oid(name: &str) -> Option<u32> {
    CatalogTable::named(name.trim_start_matches("pg_catalog."))?.oid()
}

/// A serial column's sequence depends on its column (deptype `a`, auto): psql's `\d seq`
/// shows "Owned by" from it.
///
/// A serial column's sequence is an auto dependency (`a`) and an identity column's an
/// internal one (`i`), which is how pg_dump tells `ALTER TABLE ... ADD GENERATED` from
/// `CREATE SEQUENCE ... OWNED BY`. A serial column's DEFAULT depends on its column (`a`)
/// and normally on its sequence (`n`), the loop pg_dump breaks by dumping the DEFAULT
/// after the sequence.
fn depend_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = views::depend_rows(tx)?;
    for t in user_tables(tx)? {
        for (i, c) in t.columns.iter().enumerate() {
            let attnum = i64::try_from(i).unwrap_or(i64::MAX - 1) + 1;
            let dep = |class: i64, obj: Value, ref_obj: Value, ref_sub: i64, kind: &str| {
                vec![
                    int(class),
                    obj,
                    int(0),
                    int(PG_CLASS_OID),
                    ref_obj,
                    int(ref_sub),
                    text(kind),
                ]
            };
            if c.default.is_some() && c.identity.is_none() {
                let def = attrdef_oid(t.def.oid, attnum);
                rows.push(dep(
                    ATTRDEF_OID,
                    def.clone(),
                    oid_of(t.def.oid),
                    attnum,
                    "a",
                ));
                if let Some(seq) = c.owned_seq {
                    rows.push(dep(ATTRDEF_OID, def, oid_of(seq), 0, "n"));
                }
            }
            if let Some(seq) = c.owned_seq {
                let kind = if c.identity.is_some() { "i" } else { "a" };
                rows.push(dep(
                    PG_CLASS_OID,
                    oid_of(seq),
                    oid_of(t.def.oid),
                    attnum,
                    kind,
                ));
            }
        }
    }
    Ok(rows)
}

fn sequence_rows(tx: &Transaction) -> Result<Vec<Row>> {
    Ok(user_sequences(tx)?
        .into_iter()
        .map(|s| {
            let o = s.options;
            vec![
                oid_of(s.oid),
                int(i64::from(
                    match o.value_bytes {
                        2 => SqlType::Int2,
                        4 => SqlType::Int4,
                        _ => SqlType::Int8,
                    }
                    .oid(),
                )),
                int(o.start),
                int(o.increment),
                int(o.max_value),
                int(o.min_value),
                int(o.cache),
                Value::Bool(o.cycle),
            ]
        })
        .collect())
}

fn attribute_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for t in user_tables(tx)?.into_iter().chain(views::as_tables(tx)?) {
        for (i, c) in t.columns.iter().enumerate() {
            let mut row = vec![
                oid_of(t.def.oid),
                text(&c.name),
                int(i64::from(c.ty.oid())),
                int(type_len(c.ty)),
                int(i64::try_from(i).unwrap_or(i64::MAX - 1) + 1),
                int(typmod(c.ty)),
                int(0),
                Value::Bool(c.not_null),
                Value::Bool(c.default.is_some() && c.identity.is_none()),
                text(c.identity.map_or("", catalog::Identity::letter)),
                text(""),
                Value::Bool(c.dropped),
                int(if c.ty.is_text() { DEFAULT_COLLATION } else { 0 }),
                int(-1),
                text(column_storage(c, t.def.columns.get(i))),
                text(""),
            ];
            row.extend(attribute_tail(c.ty));
            rows.push(row);
        }
        for idx in &t.indexes {
            for (i, &k) in idx.columns.iter().enumerate() {
                let c = &t.columns[usize::from(k)];
                let mut row = vec![
                    oid_of(idx.oid),
                    text(&c.name),
                    int(i64::from(c.ty.oid())),
                    int(type_len(c.ty)),
                    int(i64::try_from(i).unwrap_or(i64::MAX - 1) + 1),
                    int(typmod(c.ty)),
                    int(0),
                    Value::Bool(false),
                    Value::Bool(false),
                    text(""),
                    text(""),
                    Value::Bool(false),
                    int(0),
                    int(-1),
                    text(c.ty.typstorage()),
                    text(""),
                ];
                row.extend(attribute_tail(c.ty));
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// The last columns of a pg_attribute row, from `attalign` on: quire has no inheritance,
/// attribute options, foreign tables, fast defaults or column privileges.
fn attribute_tail(ty: SqlType) -> [Value; 8] {
    [
        text(align(ty)),
        Value::Bool(true),
        int(0),
        Value::Null,
        Value::Null,
        Value::Bool(false),
        Value::Null,
        Value::Null,
    ]
}

/// `typalign`: by the stored length, `i` for a variable-length type.
fn align(t: SqlType) -> &'static str {
    match type_len(t) {
        1 | 64 => "c",
        2 => "s",
        8 => "d",
        _ => "i",
    }
}

fn index_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for t in user_tables(tx)? {
        for i in &t.indexes {
            let primary = is_primary(&t, i);
            let key: Vec<String> = i.columns.iter().map(|c| (c + 1).to_string()).collect();
            let n = int(i64::try_from(i.columns.len()).unwrap_or(i64::MAX));
            let types: Vec<SqlType> = i
                .columns
                .iter()
                .map(|&c| t.columns.get(usize::from(c)).map_or(T::Unknown, |c| c.ty))
                .collect();
            let oids = |f: &dyn Fn(SqlType) -> u32| {
                crate::types::array::vector(types.iter().map(|&t| Some(f(t).to_string())).collect())
            };
            let collation = |t: SqlType| if t.is_text() { 100 } else { 0 };
            rows.push(vec![
                oid_of(i.oid),
                oid_of(t.def.oid),
                n.clone(),
                n,
                Value::Bool(i.unique),
                Value::Bool(false),
                Value::Bool(primary),
                Value::Bool(false),
                Value::Bool(true),
                Value::Bool(false),
                Value::Bool(true),
                Value::Bool(true),
                Value::Bool(true),
                Value::Bool(false),
                crate::types::array::vector(key.into_iter().map(Some).collect()),
                oids(&collation),
                oids(&opclass),
                oids(&|_| 0),
                Value::Null,
                Value::Null,
            ]);
        }
    }
    Ok(rows)
}

fn is_primary(t: &TableInfo, i: &IndexDef) -> bool {
    t.pkey.as_ref().is_some_and(|(oid, _)| *oid == i.oid)
}

/// An `int2[]` of attribute numbers (`conkey`, `indkey`): positions plus one.
fn attnums(cols: impl IntoIterator<Item = usize>) -> Value {
    let key: Vec<String> = cols.into_iter().map(|c| (c + 1).to_string()).collect();
    text(&format!("{{{}}}", key.join(",")))
}

/// One pg_constraint row; `fk` adds a foreign key's columns.
struct ConRow<'a> {
    oid: i64,
    name: &'a str,
    kind: &'static str,
    validated: bool,
    table: quire_engine::Oid,
    index: i64,
    key: Vec<usize>,
    fk: Option<&'a catalog::ForeignKey>,
}

fn constraint_row(c: ConRow) -> Row {
    let none = || text(" ");
    let (upd, del, matched) = match c.fk {
        Some(f) => (
            text(f.on_update.letter()),
            text(f.on_delete.letter()),
            text(if f.match_full { "f" } else { "s" }),
        ),
        None => (none(), none(), none()),
    };
    vec![
        int(c.oid),
        text(c.name),
        int(PUBLIC_NS),
        text(c.kind),
        Value::Bool(c.fk.is_some_and(|f| f.deferral.deferrable())),
        Value::Bool(c.fk.is_some_and(|f| f.deferral.initially_deferred())),
        Value::Bool(c.validated),
        oid_of(c.table),
        int(0),
        int(c.index),
        int(0),
        c.fk.map_or(int(0), |f| oid_of(f.ref_table)),
        Value::Bool(true),
        upd,
        del,
        matched,
        if c.key.is_empty() {
            Value::Null
        } else {
            attnums(c.key)
        },
        c.fk.map_or(Value::Null, |f| attnums(f.ref_columns.iter().copied())),
        int(0),
        Value::Bool(false),
    ]
}

fn constraint_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let tables = user_tables(tx)?;
    for t in &tables {
        for i in t.indexes.iter().filter(|i| i.unique) {
            rows.push(constraint_row(ConRow {
                oid: i64::try_from(i.oid.0).unwrap_or(0) + i64::from(CONSTRAINT_OID_BASE),
                name: &i.name,
                kind: if is_primary(t, i) { "p" } else { "u" },
                validated: true,
                table: t.def.oid,
                index: i64::try_from(i.oid.0).unwrap_or(0),
                key: i.columns.iter().map(|&c| usize::from(c)).collect(),
                fk: None,
            }));
        }
        for c in &t.checks {
            rows.push(constraint_row(ConRow {
                oid: i64::from(c.oid),
                name: &c.name,
                kind: "c",
                validated: c.validated,
                table: t.def.oid,
                index: 0,
                key: Vec::new(),
                fk: None,
            }));
        }
        for f in &t.foreign_keys {
            let index = tables
                .iter()
                .find(|p| p.def.oid == f.ref_table)
                .and_then(|p| referenced_index(p, f))
                .map_or(0, |i| i64::try_from(i.oid.0).unwrap_or(0));
            rows.push(constraint_row(ConRow {
                oid: i64::from(f.oid),
                name: &f.name,
                kind: "f",
                validated: f.validated,
                table: t.def.oid,
                index,
                key: f.columns.clone(),
                fk: Some(f),
            }));
        }
    }
    Ok(rows)
}

/// The unique index of `parent` a foreign key's referenced columns are (`conindid`).
fn referenced_index<'a>(parent: &'a TableInfo, fk: &catalog::ForeignKey) -> Option<&'a IndexDef> {
    parent.indexes.iter().find(|i| {
        i.unique
            && i.columns.len() == fk.ref_columns.len()
            && i.columns
                .iter()
                .all(|&c| fk.ref_columns.contains(&usize::from(c)))
    })
}

/// `pg_get_constraintdef` of a foreign key: `FOREIGN KEY (a) REFERENCES p(id) ...`.
fn foreign_key_def(tx: &Transaction, f: &catalog::ForeignKey, qualify: bool) -> Result<String> {
    let child = catalog::lookup_oid(tx, f.table)?;
    let parent = catalog::lookup_oid(tx, f.ref_table)?;
    let names = |t: &TableInfo, cols: &[usize]| {
        cols.iter()
            .map(|&c| quote_ident(&t.columns[c].name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let schema = if qualify { "public." } else { "" };
    let mut def = format!(
        "FOREIGN KEY ({}) REFERENCES {schema}{}({})",
        names(&child, &f.columns),
        quote_ident(&parent.def.name),
        names(&parent, &f.ref_columns)
    );
    if f.match_full {
        def.push_str(" MATCH FULL");
    }
    if f.on_update != catalog::FkAction::NoAction {
        def.push_str(" ON UPDATE ");
        def.push_str(f.on_update.sql());
    }
    if f.on_delete != catalog::FkAction::NoAction {
        def.push_str(" ON DELETE ");
        def.push_str(f.on_delete.sql());
    }
    if f.deferral.deferrable() {
        def.push_str(" DEFERRABLE");
    }
    if f.deferral.initially_deferred() {
        def.push_str(" INITIALLY DEFERRED");
    }
    if !f.validated {
        def.push_str(" NOT VALID");
    }
    Ok(def)
}

/// The default B-tree operator classes: oid, name, family and input type, as PostgreSQL's
/// `pg_opclass.dat` numbers them.
const OPCLASSES: &[(u32, &str, u32, u32)] = &[
    (1978, "int4_ops", 1976, 23),
    (1979, "int2_ops", 1976, 21),
    (1981, "oid_ops", 1989, 26),
    (3122, "date_ops", 434, 1082),
    (3123, "float8_ops", 1970, 701),
    (3124, "int8_ops", 1976, 20),
    (3125, "numeric_ops", 1988, 1700),
    (3126, "text_ops", 1994, 25),
    (3127, "timestamptz_ops", 434, 1184),
    (3128, "timestamp_ops", 434, 1114),
    (10000, "array_ops", 397, 2277),
    (10003, "bool_ops", 424, 16),
    (10004, "bpchar_ops", 426, 1042),
    (10006, "bytea_ops", 428, 17),
    (10007, "char_ops", 429, 18),
    (10012, "float4_ops", 1970, 700),
    (10022, "interval_ops", 1982, 1186),
    (10028, "name_ops", 1994, 19),
    (10065, "uuid_ops", 2968, 2950),
    (10067, "pg_lsn_ops", 3253, 3220),
];

/// The default B-tree operator class of a column of type `t` (0 if it has none).
fn opclass(t: SqlType) -> u32 {
    let input = match t {
        T::Array(_) => 2277,
        T::Varchar(_) => T::Text.oid(),
        T::Regclass | T::Regtype | T::Regnamespace | T::Regproc => T::Oid.oid(),
        t => t.oid(),
    };
    OPCLASSES
        .iter()
        .find(|&&(_, _, _, intype)| intype == input)
        .map_or(0, |&(oid, ..)| oid)
}

/// pg_type: each scalar type, `void`, the vectors, then each scalar type's array type.
fn type_rows() -> Vec<Row> {
    let scalars = crate::types::array::SCALAR_TYPES.map(|(t, _)| t);
    let arrays = scalars.iter().filter_map(|&t| SqlType::array_of(t));
    let others = [T::Void, T::INT2_VECTOR, T::OID_VECTOR];
    scalars
        .iter()
        .copied()
        .chain(others)
        .chain(arrays)
        .map(type_row)
        .collect()
}

fn type_row(t: SqlType) -> Row {
    let elem = t.element();
    let category = match t {
        _ if elem.is_some() => "A",
        _ if t.is_text() => "S",
        T::Bool => "B",
        T::Interval => "T",
        T::Date | T::Timestamp | T::Timestamptz => "D",
        T::Json | T::Jsonb | T::Uuid | T::PgLsn | T::Bytea => "U",
        T::Void => "P",
        _ => "N",
    };
    let array_oid = SqlType::array_of(t)
        .filter(|_| elem.is_none())
        .map_or(0, SqlType::oid);
    vec![
        int(i64::from(t.oid())),
        text(&internal_name(t)),
        int(PG_CATALOG_NS),
        int(SUPERUSER_OID),
        int(type_len(t)),
        Value::Bool(type_len(t) > 0 && type_len(t) <= 8),
        text(if t == T::Void { "p" } else { "b" }),
        text(category),
        int(0),
        int(elem.map_or(0, |e| i64::from(e.oid()))),
        int(i64::from(array_oid)),
        Value::Bool(false),
        int(0),
        int(-1),
        int(if t.is_text() || elem.is_some_and(SqlType::is_text) {
            DEFAULT_COLLATION
        } else {
            0
        }),
        text(","),
        Value::Bool(true),
        Value::Null,
        text(t.typstorage()),
        text(align(t)),
    ]
}

/// pg_type's `typname` (PostgreSQL's internal names).
fn internal_name(t: SqlType) -> String {
    match t {
        T::Bool => "bool".into(),
        T::Int2 => "int2".into(),
        T::Int4 => "int4".into(),
        T::Int8 => "int8".into(),
        T::Float4 => "float4".into(),
        T::Float8 => "float8".into(),
        T::Varchar(_) => "varchar".into(),
        T::Bpchar(_) => "bpchar".into(),
        T::Timestamptz => "timestamptz".into(),
        T::Char => "char".into(),
        T::Timestamp => "timestamp".into(),
        T::Array(e) => format!("_{}", internal_name(*e)),
        t => t.name(),
    }
}

/// A table column's `attstorage`: what SET STORAGE chose, else its type's default.
fn column_storage(
    c: &crate::catalog::ColumnInfo,
    stored: Option<&quire_engine::Column>,
) -> &'static str {
    match stored {
        Some(e) if e.storage != quire_engine::Storage::default_for(e.ty) => e.storage.code(),
        _ => c.ty.typstorage(),
    }
}

fn type_len(t: SqlType) -> i64 {
    i64::from(t.typlen())
}

/// `atttypmod`: the declared length plus 4 for varchar(n) and char(n), as PostgreSQL stores it.
fn typmod(t: SqlType) -> i64 {
    i64::from(t.typmod())
}

/// `format_type(oid, typmod)`.
pub(crate) fn format_type(oid: u32, typmod: i64) -> String {
    let Some(t) = SqlType::from_oid(oid) else {
        return "???".into();
    };
    let n = u32::try_from(typmod - 4).ok();
    match t {
        T::Varchar(_) => SqlType::Varchar(n).name(),
        T::Bpchar(_) => SqlType::Bpchar(n.or(Some(1))).name(),
        T::Numeric(_) => {
            SqlType::Numeric(n.map(|m| ((m >> 16) as u16, (m & 0xFFFF) as u16))).name()
        }
        t => t.name(),
    }
}

/// Whether pg_collation lists collation `oid`.
pub(crate) fn collation_exists(oid: u32) -> bool {
    i64::from(oid) == DEFAULT_COLLATION
}

/// The name of namespace `oid` (`regnamespace` output).
pub(crate) fn namespace_name(oid: i64) -> Option<String> {
    match oid {
        PG_CATALOG_NS => Some("pg_catalog".into()),
        PUBLIC_NS => Some("public".into()),
        _ => None,
    }
}

/// The oid of schema `name` (`regnamespace` input).
pub(crate) fn namespace_oid(name: &str) -> Option<i64> {
    match name {
        "pg_catalog" => Some(PG_CATALOG_NS),
        "public" => Some(PUBLIC_NS),
        _ => None,
    }
}

/// Every comment: COMMENT ON's, and initdb's on the two schemas unless replaced.
/// `of`: only those on that object (its comments found by the index).
fn descriptions(
    tx: &Transaction,
    of: Option<u32>,
) -> Result<Vec<catalog::description::Description>> {
    let mut all = match of {
        Some(objoid) => catalog::description::of(tx, objoid)?,
        None => catalog::description::all(tx)?,
    };
    for (oid, d) in [
        (PG_CATALOG_NS, "system catalog schema"),
        (PUBLIC_NS, "standard public schema"),
    ] {
        let oid = u32::try_from(oid).unwrap_or(0);
        if of.is_some_and(|o| o != oid) {
            continue;
        }
        if !all
            .iter()
            .any(|x| x.objoid == oid && x.classoid == NAMESPACE_RELID)
        {
            all.push(catalog::description::Description {
                objoid: oid,
                classoid: NAMESPACE_RELID,
                objsubid: 0,
                text: d.to_string(),
            });
        }
    }
    Ok(all)
}

/// `obj_description(oid, catalog)` (`catalog` None: any catalog) and
/// `col_description(table, column)` (`objsubid` the column).
pub(crate) fn description(
    tx: &Transaction,
    objoid: u32,
    catalog: Option<&str>,
    objsubid: i32,
) -> Result<Option<String>> {
    let classoid = match catalog {
        Some(name) => match catalog_oid(name) {
            Some(c) => Some(c),
            None => return Ok(None),
        },
        None => None,
    };
    Ok(descriptions(tx, Some(objoid))?
        .into_iter()
        .find(|d| {
            d.objoid == objoid && d.objsubid == objsubid && classoid.is_none_or(|c| c == d.classoid)
        })
        .map(|d| d.text))
}

/// A user relation (table or index) by oid, by one catalog lookup: `::regclass` output
/// and `pg_table_is_visible` run once per row of psql's catalog queries, so they must not
/// cost a pass over every table.
fn user_relation(tx: &Transaction, oid: u32) -> Result<Option<Entry>> {
    let found = tx.relation(quire_engine::Oid(u64::from(oid)))?;
    Ok(found.filter(|e| !e.name().starts_with(catalog::RESERVED_PREFIX)))
}

/// The name of relation `oid` (a table or an index), if it exists.
/// The name of the role with `oid` (`pg_get_userbyid`): `unknown (OID=n)` when there is
/// none, as PostgreSQL writes it.
pub(crate) fn role_name(tx: &Transaction, oid: u32) -> Result<String> {
    Ok(crate::roles::by_oid(tx, oid)?.map_or_else(|| format!("unknown (OID={oid})"), |r| r.name))
}

pub(crate) fn relation_name(tx: &Transaction, oid: u32) -> Result<Option<String>> {
    if let Some((name, _)) = CATALOGS.iter().find(|(_, t)| t.oid() == Some(oid)) {
        return Ok(Some((*name).to_string()));
    }
    Ok(user_relation(tx, oid)?.map(|e| e.name().to_string()))
}

/// `pg_get_serial_sequence(table, column)`: the sequence a `serial` or identity column
/// owns, schema-qualified, or `None`. The table's name is read as SQL reads a name (folded
/// to lower case unless quoted), the column's literally, as PostgreSQL does.
pub(crate) fn serial_sequence(
    tx: &Transaction,
    table: &str,
    column: &str,
) -> Result<Option<String>> {
    let name = table.trim().trim_start_matches("public.");
    let name = match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => name.to_lowercase(),
    };
    let t = catalog::lookup(tx, &name)?;
    let c = t.column(column)?;
    let Some(seq) = t.columns[c].owned_seq else {
        return Ok(None);
    };
    let def = tx.sequence_def(seq)?;
    Ok(Some(format!("public.{}", quote_ident(&def.name))))
}

/// The oid of relation `name` (a table or an index).
/// The oid of relation `name` as session `pid` sees it (`regclass` input, `to_regclass`):
/// its own temporary table of that name first (`pg_temp.name` only that), as the search
/// path puts `pg_temp` first for relations; else [`relation_oid`].
pub(crate) fn session_relation_oid(tx: &Transaction, name: &str, pid: i32) -> Result<Option<u32>> {
    let name = name.trim();
    let (temp_only, bare) = match name.split_once('.') {
        Some((schema, t)) if schema == "pg_temp" || schema.starts_with("pg_temp_") => (true, t),
        Some(_) => return relation_oid(tx, name),
        None => (false, name),
    };
    let temp = catalog::TempTables::new(pid).engine_name(bare);
    if let Some(e) = tx.relation_named(&temp)? {
        return Ok(u32::try_from(e.oid().0).ok());
    }
    if temp_only {
        return Ok(None);
    }
    relation_oid(tx, bare)
}

/// The name `::regclass` prints for relation `oid` as session `pid` sees it: its own
/// temporary tables by their names too (others' are hidden, as quire's catalogs hide them).
pub(crate) fn session_relation_name(
    tx: &Transaction,
    oid: u32,
    pid: i32,
) -> Result<Option<String>> {
    if let Some(name) = relation_name(tx, oid)? {
        return Ok(Some(name));
    }
    let own = catalog::TempTables::new(pid).engine_name("");
    Ok(tx
        .relation(quire_engine::Oid(u64::from(oid)))?
        .and_then(|e| e.name().strip_prefix(own.as_str()).map(str::to_string)))
}

pub(crate) fn relation_oid(tx: &Transaction, name: &str) -> Result<Option<u32>> {
    let name = name.trim().trim_start_matches("public.");
    if let Some(oid) = catalog_oid(name) {
        return Ok(Some(oid));
    }
    if name.starts_with(catalog::RESERVED_PREFIX) {
        return Ok(None);
    }
    Ok(tx
        .relation_named(name)?
        .and_then(|e| u32::try_from(e.oid().0).ok()))
}

/// Index `oid` and its table.
fn find_index(tx: &Transaction, oid: u32) -> Result<Option<(TableInfo, IndexDef)>> {
    let Some(Entry::Index(i)) = user_relation(tx, oid)? else {
        return Ok(None);
    };
    let Some(Entry::Table(t)) = tx.relation(i.table)? else {
        return Ok(None);
    };
    Ok(Some((catalog::lookup(tx, &t.name)?, i)))
}

fn key_list(t: &TableInfo, i: &IndexDef) -> String {
    i.columns
        .iter()
        .map(|&c| quote_ident(&t.columns[usize::from(c)].name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `pg_get_indexdef(oid)`: the CREATE INDEX statement of an index.
pub(crate) fn index_def(tx: &Transaction, oid: u32) -> Result<Option<String>> {
    Ok(find_index(tx, oid)?.map(|(t, i)| {
        format!(
            "CREATE {}INDEX {} ON public.{} USING btree ({})",
            if i.unique { "UNIQUE " } else { "" },
            quote_ident(&i.name),
            quote_ident(&t.def.name),
            key_list(&t, &i)
        )
    }))
}

/// `pg_get_constraintdef(oid)`: `PRIMARY KEY (a)`, `UNIQUE (a, b)` or `CHECK (a > 0)`.
/// `expr` (SQL text) with each `'name'::regclass` literal naming an unqualified relation
/// rewritten as `'public.name'::regclass`.
pub(crate) fn qualify_regclass_literals(expr: &str) -> String {
    const CAST: &str = "'::regclass";
    let mut out = String::with_capacity(expr.len() + 8);
    let mut rest = expr;
    while let Some(end) = rest.find(CAST) {
        let (before, after) = rest.split_at(end);
        // The literal's opening quote: the one before `end` (a literal with a quote in it
        // or already qualified is left alone).
        match before.rfind('\'') {
            Some(open) if !before[open + 1..].contains('.') && !before[..open].ends_with('\'') => {
                out.push_str(&before[..=open]);
                out.push_str("public.");
                out.push_str(&before[open + 1..]);
            }
            _ => out.push_str(before),
        }
        out.push_str(CAST);
        rest = &after[CAST.len()..];
    }
    out.push_str(rest);
    out
}

/// `qualify`: name referenced tables with their schema (`public` is not on the search path).
pub(crate) fn constraint_def(tx: &Transaction, oid: u32, qualify: bool) -> Result<Option<String>> {
    if oid >= catalog::CHECK_OID_BASE {
        if let Some(f) = catalog::foreign_keys::all(tx)?
            .iter()
            .find(|f| f.oid == oid)
        {
            return foreign_key_def(tx, f, qualify).map(Some);
        }
        for t in user_tables(tx)? {
            if let Some(c) = t.checks.iter().find(|c| c.oid == oid) {
                let valid = if c.validated { "" } else { " NOT VALID" };
                return Ok(Some(format!("CHECK ({}){valid}", c.expr)));
            }
        }
        return Ok(None);
    }
    let Some(index_oid) = oid.checked_sub(CONSTRAINT_OID_BASE) else {
        return Ok(None);
    };
    Ok(find_index(tx, index_oid)?.map(|(t, i)| {
        let kind = if is_primary(&t, &i) {
            "PRIMARY KEY"
        } else {
            "UNIQUE"
        };
        format!("{kind} ({})", key_list(&t, &i))
    }))
}
