//! Roles that cannot escalate (issue 36): in-process sessions logged in as different roles on
//! one database, checked against what PostgreSQL 15 answers, SQLSTATE and message word for
//! word. A plain role cannot gain superuser, create roles, change another's password or read
//! verifiers; a CREATEROLE role administers ordinary roles but not superusers; membership
//! decides SET ROLE and the admin option; `is_superuser` follows the session's role; and a
//! data directory from before the role attributes opens with them filled in.

mod common;

use std::sync::Arc;

use common::{one, open, rows};
use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Column, Config, Database, IsolationLevel, Type, Value};
use quire_sql::{lookup_role, ScramVerifier, Session};

/// A session logged in as `user`.
fn login(db: &Arc<Database>, user: &str) -> Session {
    let mut s = Session::new(Arc::clone(db));
    s.set_user(user);
    s
}

/// Runs one statement: its tag, or its error as "SQLSTATE message".
fn run(s: &mut Session, sql: &str) -> Result<String, String> {
    let mut out = s.execute_query(sql);
    assert_eq!(out.len(), 1, "{sql}");
    out.remove(0)
        .map(|o| o.tag)
        .map_err(|e| format!("{} {}", e.sqlstate(), e.message()))
}

fn ok(s: &mut Session, sql: &str) {
    if let Err(e) = run(s, sql) {
        panic!("{sql}: {e}");
    }
}

/// The notices a statement that succeeds sends (all at NOTICE severity here).
fn notices(s: &mut Session, sql: &str) -> Vec<String> {
    let mut out = s.execute_query(sql);
    let notices = out
        .remove(0)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .notices;
    notices
        .into_iter()
        .map(|n| {
            assert_eq!(n.severity, quire_sql::Severity::Notice, "{sql}: {n:?}");
            n.message
        })
        .collect()
}

/// Each statement fails with its "SQLSTATE message".
fn refused(s: &mut Session, cases: &[(&str, &str)]) {
    for (sql, expected) in cases {
        assert_eq!(run(s, sql), Err((*expected).to_string()), "{sql}");
    }
}

fn text(v: Value) -> String {
    match v {
        Value::Text(t) => t,
        other => panic!("not text: {other:?}"),
    }
}

fn db() -> (tempfile::TempDir, Arc<Database>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = open(dir.path()).expect("the database opens");
    (dir, db)
}

const NOT_SUPERUSER_ALTER: &str =
    "42501 must be superuser to alter superuser roles or change superuser attribute";

#[test]
fn a_plain_role_cannot_gain_superuser() {
    let (_dir, db) = db();
    let mut admin = login(&db, "postgres");
    ok(&mut admin, "CREATE ROLE plain LOGIN PASSWORD 'pw'");
    let mut plain = login(&db, "plain");
    refused(
        &mut plain,
        &[
            ("ALTER ROLE plain SUPERUSER", NOT_SUPERUSER_ALTER),
            ("ALTER ROLE current_user WITH SUPERUSER", NOT_SUPERUSER_ALTER),
            ("ALTER ROLE plain NOSUPERUSER", NOT_SUPERUSER_ALTER),
            (
                "CREATE ROLE x SUPERUSER",
                "42501 must be superuser to create superusers",
            ),
            (
                "SET ROLE postgres",
                "42501 permission denied to set role \"postgres\"",
            ),
            (
                "SET SESSION AUTHORIZATION postgres",
                "42501 permission denied to set session authorization \"postgres\"",
            ),
            (
                "SET session_authorization = 'postgres'",
                "42501 permission denied to set session authorization \"postgres\"",
            ),
            (
                "GRANT postgres TO plain",
                "42501 must be superuser to alter superusers",
            ),
            ("ALTER ROLE plain CREATEROLE", "42501 permission denied"),
            (
                "ALTER ROLE plain REPLICATION",
                "42501 must be superuser to alter replication roles or change replication attribute",
            ),
            (
                "ALTER ROLE plain BYPASSRLS",
                "42501 must be superuser to change bypassrls attribute",
            ),
            (
                "SET is_superuser = on",
                "55P02 parameter \"is_superuser\" cannot be changed",
            ),
        ],
    );
    assert!(!plain.is_superuser());
    assert_eq!(text(one(&mut plain, "SHOW is_superuser")), "off");
    assert_eq!(
        text(one(&mut plain, "SELECT current_setting('is_superuser')")),
        "off"
    );
    assert_eq!(
        rows(
            &mut admin,
            "SELECT rolsuper, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles \
             WHERE rolname = 'plain'"
        ),
        [vec![Value::Bool(false); 4]]
    );
    // The refused CREATE left nothing behind.
    assert_eq!(
        one(
            &mut admin,
            "SELECT count(*) FROM pg_roles WHERE rolname = 'x'"
        ),
        Value::Int(0)
    );
}

#[test]
fn a_plain_role_cannot_create_roles_or_change_another_role() {
    let (_dir, db) = db();
    let mut admin = login(&db, "postgres");
    ok(&mut admin, "CREATE ROLE plain LOGIN PASSWORD 'pw'");
    ok(&mut admin, "CREATE ROLE other LOGIN PASSWORD 'theirs'");
    let mut plain = login(&db, "plain");
    refused(
        &mut plain,
        &[
            ("CREATE ROLE x", "42501 permission denied to create role"),
            (
                "CREATE USER x PASSWORD 'p'",
                "42501 permission denied to create role",
            ),
            (
                "CREATE ROLE x REPLICATION",
                "42501 must be superuser to create replication users",
            ),
            (
                "CREATE ROLE x BYPASSRLS",
                "42501 must be superuser to create bypassrls users",
            ),
            (
                "ALTER ROLE other PASSWORD 'stolen'",
                "42501 permission denied",
            ),
            ("ALTER USER other PASSWORD NULL", "42501 permission denied"),
            ("ALTER ROLE postgres PASSWORD 'stolen'", NOT_SUPERUSER_ALTER),
            (
                "ALTER ROLE other RENAME TO x",
                "42501 permission denied to rename role",
            ),
            ("DROP ROLE other", "42501 permission denied to drop role"),
            (
                "DROP ROLE IF EXISTS other",
                "42501 permission denied to drop role",
            ),
            // A role does not administer itself (PostgreSQL 15.x).
            (
                "GRANT plain TO other",
                "42501 must have admin option on role \"plain\"",
            ),
            // Its own password, and nothing else.
            (
                "ALTER ROLE plain PASSWORD 'new' VALID UNTIL 'infinity'",
                "42501 permission denied",
            ),
            (
                "ALTER ROLE plain CONNECTION LIMIT 1",
                "42501 permission denied",
            ),
            ("ALTER ROLE plain", "42501 permission denied"),
        ],
    );
    ok(&mut plain, "ALTER ROLE plain PASSWORD 'new'");
    let verifier = |name: &str| {
        let role = lookup_role(&db, name).unwrap().unwrap();
        ScramVerifier::parse(role.password.as_deref().unwrap()).unwrap()
    };
    assert!(verifier("plain").matches_password("new"));
    assert!(verifier("other").matches_password("theirs"));
    assert_eq!(
        lookup_role(&db, "postgres").unwrap().unwrap().password,
        None
    );
}

#[test]
fn verifiers_are_for_superusers_only() {
    let (_dir, db) = db();
    let mut admin = login(&db, "postgres");
    ok(&mut admin, "CREATE ROLE plain LOGIN PASSWORD 'pw'");
    let mut plain = login(&db, "plain");
    let authid = "42501 permission denied for table pg_authid";
    let reserved = "42501 table names starting with \"quire_\" are reserved for quire's catalog";
    refused(
        &mut plain,
        &[
            ("SELECT rolpassword FROM pg_authid", authid),
            ("SELECT count(*) FROM pg_catalog.pg_authid", authid),
            // Nor through the tables behind them; and their index, which every login reads,
            // stays.
            ("SELECT * FROM quire_roles", reserved),
            ("UPDATE quire_roles SET rolsuper = true", reserved),
            (
                "INSERT INTO quire_auth_members VALUES (10, 16384, 10, true)",
                reserved,
            ),
            ("DROP INDEX quire_roles_name", reserved),
            ("DROP TABLE quire_auth_members", reserved),
        ],
    );
    // pg_roles and pg_user mask every password, set or not, as PostgreSQL does.
    assert_eq!(
        rows(
            &mut plain,
            "SELECT rolname, rolpassword FROM pg_roles WHERE oid <> 6171 ORDER BY oid"
        ),
        [["postgres", "********"], ["plain", "********"]]
            .map(|r| r.map(|v| Value::Text(v.into())).to_vec())
    );
    assert_eq!(
        rows(&mut plain, "SELECT DISTINCT passwd FROM pg_user"),
        [vec![Value::Text("********".into())]]
    );
    let stored = text(one(
        &mut admin,
        "SELECT rolpassword FROM pg_authid WHERE rolname = 'plain'",
    ));
    assert!(stored.starts_with("SCRAM-SHA-256$4096:"), "{stored}");
    // The current role decides: a superuser that SET ROLE to a plain role reads as that role.
    ok(&mut admin, "SET ROLE plain");
    refused(&mut admin, &[("SELECT rolpassword FROM pg_authid", authid)]);
    ok(&mut admin, "RESET ROLE");
    assert_eq!(
        rows(&mut admin, "SELECT rolname FROM pg_authid ORDER BY oid").len(),
        3,
        "postgres, pg_database_owner and plain"
    );
}

#[test]
fn a_createrole_role_administers_ordinary_roles_but_not_superusers() {
    let (_dir, db) = db();
    let mut su = login(&db, "postgres");
    ok(&mut su, "CREATE ROLE admin LOGIN CREATEROLE");
    ok(&mut su, "CREATE ROLE boss SUPERUSER");
    let mut admin = login(&db, "admin");
    ok(
        &mut admin,
        "CREATE ROLE worker LOGIN PASSWORD 'w' CREATEDB NOINHERIT CONNECTION LIMIT 3 \
         VALID UNTIL '2030-01-02 03:04:05+00'",
    );
    assert_eq!(
        rows(
            &mut admin,
            "SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, \
             rolreplication, rolconnlimit, rolvaliduntil::text, rolbypassrls \
             FROM pg_roles WHERE rolname = 'worker'"
        ),
        [vec![
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(true),
            Value::Bool(true),
            Value::Bool(false),
            Value::Int(3),
            Value::Text("2030-01-02 03:04:05+00".into()),
            Value::Bool(false),
        ]]
    );
    ok(
        &mut admin,
        "ALTER ROLE worker NOLOGIN NOCREATEDB CREATEROLE PASSWORD 'v' VALID UNTIL 'infinity'",
    );
    ok(&mut admin, "ALTER ROLE worker RENAME TO labourer");
    assert_eq!(
        rows(
            &mut admin,
            "SELECT rolcanlogin, rolcreatedb, rolcreaterole, rolvaliduntil FROM pg_roles \
             WHERE rolname = 'labourer'"
        ),
        [vec![
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(true),
            Value::Null
        ]]
    );
    refused(
        &mut admin,
        &[
            (
                "CREATE ROLE x SUPERUSER",
                "42501 must be superuser to create superusers",
            ),
            ("ALTER ROLE boss PASSWORD 'x'", NOT_SUPERUSER_ALTER),
            ("ALTER ROLE labourer SUPERUSER", NOT_SUPERUSER_ALTER),
            ("ALTER ROLE postgres NOLOGIN", NOT_SUPERUSER_ALTER),
            (
                "DROP ROLE boss",
                "42501 must be superuser to drop superusers",
            ),
            (
                "DROP ROLE postgres",
                "42501 must be superuser to drop superusers",
            ),
            (
                "ALTER ROLE boss RENAME TO b",
                "42501 must be superuser to rename superusers",
            ),
            (
                "GRANT boss TO labourer",
                "42501 must be superuser to alter superusers",
            ),
            ("DROP ROLE admin", "55006 current user cannot be dropped"),
            (
                "ALTER ROLE admin RENAME TO a",
                "0A000 session user cannot be renamed",
            ),
            ("CREATE ROLE pg_x", "42939 role name \"pg_x\" is reserved"),
            (
                "CREATE ROLE public",
                "42939 role name \"public\" is reserved",
            ),
            (
                "CREATE ROLE x CONNECTION LIMIT -2",
                "22023 invalid connection limit: -2",
            ),
            (
                "CREATE ROLE labourer",
                "42710 role \"labourer\" already exists",
            ),
            (
                "ALTER ROLE ghost LOGIN",
                "42704 role \"ghost\" does not exist",
            ),
            (
                "DROP ROLE current_user",
                "22023 cannot use special role specifier in DROP ROLE",
            ),
        ],
    );
    assert_eq!(
        notices(&mut admin, "DROP ROLE IF EXISTS ghost, labourer"),
        ["role \"ghost\" does not exist, skipping"]
    );
    assert_eq!(
        one(
            &mut admin,
            "SELECT count(*) FROM pg_roles WHERE rolname = 'labourer'"
        ),
        Value::Int(0)
    );
    // A superuser may do what CREATEROLE may not; the bootstrap superuser stays, and keeps
    // SUPERUSER.
    ok(&mut su, "CREATE ROLE su2 SUPERUSER LOGIN");
    refused(
        &mut login(&db, "su2"),
        &[(
            "DROP ROLE postgres",
            "2BP01 cannot drop role postgres because it is required by the database system",
        )],
    );
    ok(&mut su, "ALTER ROLE boss NOSUPERUSER");
    let e = su
        .execute_query("ALTER ROLE postgres NOSUPERUSER")
        .remove(0);
    let e = e.expect_err("the bootstrap superuser keeps SUPERUSER");
    assert_eq!(
        (e.sqlstate().code(), e.message(), e.detail()),
        (
            "42501",
            "permission denied to alter role",
            Some("The bootstrap user must have the SUPERUSER attribute.")
        )
    );
}

/// `pg_auth_members` as names: (role, member, grantor, admin option).
fn memberships(s: &mut Session) -> Vec<(String, String, String, bool)> {
    rows(
        s,
        "SELECT r.rolname, m.rolname, g.rolname, a.admin_option FROM pg_auth_members a \
         JOIN pg_roles r ON a.roleid = r.oid JOIN pg_roles m ON a.member = m.oid \
         JOIN pg_roles g ON a.grantor = g.oid ORDER BY 1, 2",
    )
    .into_iter()
    .map(|r| {
        let [role, member, grantor, Value::Bool(admin)] = <[Value; 4]>::try_from(r).unwrap() else {
            panic!("admin_option is no bool")
        };
        (text(role), text(member), text(grantor), admin)
    })
    .collect()
}

fn m(role: &str, member: &str, grantor: &str, admin: bool) -> (String, String, String, bool) {
    (role.into(), member.into(), grantor.into(), admin)
}

#[test]
fn membership_decides_set_role_and_the_admin_option() {
    let (_dir, db) = db();
    let mut su = login(&db, "postgres");
    for r in ["alice LOGIN", "leader LOGIN", "team", "dept"] {
        ok(&mut su, &format!("CREATE ROLE {r}"));
    }
    ok(&mut su, "GRANT team TO alice");
    ok(&mut su, "GRANT dept TO team WITH ADMIN OPTION");
    // A GRANT rolls back with its block.
    ok(&mut su, "BEGIN");
    ok(&mut su, "GRANT team TO leader");
    ok(&mut su, "ROLLBACK");
    assert_eq!(
        memberships(&mut su),
        [
            m("dept", "team", "postgres", true),
            m("team", "alice", "postgres", false)
        ]
    );
    let mut alice = login(&db, "alice");
    ok(&mut alice, "SET ROLE team");
    assert_eq!(
        rows(
            &mut alice,
            "SELECT current_user, session_user, current_role"
        ),
        [["team", "alice", "team"]
            .map(|v| Value::Text(v.into()))
            .to_vec()]
    );
    assert_eq!(text(one(&mut alice, "SHOW role")), "team");
    // Through membership chains, whatever the role SET ROLE chose.
    ok(&mut alice, "SET ROLE dept");
    refused(
        &mut alice,
        &[
            (
                "SET ROLE leader",
                "42501 permission denied to set role \"leader\"",
            ),
            ("SET ROLE nosuch", "22023 role \"nosuch\" does not exist"),
        ],
    );
    ok(&mut alice, "SET ROLE NONE");
    assert_eq!(text(one(&mut alice, "SELECT current_user")), "alice");
    assert_eq!(text(one(&mut alice, "SHOW role")), "none");
    // alice belongs to team, which holds the admin option on dept.
    ok(&mut alice, "GRANT dept TO leader");
    refused(
        &mut alice,
        &[
            (
                "GRANT team TO leader",
                "42501 must have admin option on role \"team\"",
            ),
            (
                "GRANT dept TO leader GRANTED BY postgres",
                "42501 must be superuser to set grantor",
            ),
        ],
    );
    assert_eq!(
        notices(&mut alice, "GRANT dept TO leader"),
        ["role \"leader\" is already a member of role \"dept\""]
    );
    ok(&mut alice, "REVOKE dept FROM leader");
    assert_eq!(
        notices(&mut alice, "REVOKE dept FROM leader"),
        ["role \"leader\" is not a member of role \"dept\""]
    );
    refused(
        &mut su,
        &[
            (
                "GRANT alice TO dept",
                "0LP01 role \"alice\" is a member of role \"dept\"",
            ),
            (
                "GRANT team TO team",
                "0LP01 role \"team\" is a member of role \"team\"",
            ),
            (
                "GRANT team TO public",
                "42704 role \"public\" does not exist",
            ),
            (
                "GRANT ghost TO alice",
                "42704 role \"ghost\" does not exist",
            ),
        ],
    );
    ok(&mut su, "REVOKE ADMIN OPTION FOR dept FROM team");
    refused(
        &mut alice,
        &[(
            "GRANT dept TO leader",
            "42501 must have admin option on role \"dept\"",
        )],
    );
    // DROP ROLE takes its memberships with it: alice can no longer reach dept.
    ok(&mut su, "DROP ROLE team");
    assert!(memberships(&mut su).is_empty());
    refused(
        &mut alice,
        &[(
            "SET ROLE dept",
            "42501 permission denied to set role \"dept\"",
        )],
    );
    // CREATE ROLE's membership lists.
    ok(
        &mut su,
        "CREATE ROLE crew IN ROLE dept ROLE alice ADMIN leader",
    );
    assert_eq!(
        memberships(&mut su),
        [
            m("crew", "alice", "postgres", false),
            m("crew", "leader", "postgres", true),
            m("dept", "crew", "postgres", false),
        ]
    );
}

#[test]
fn is_superuser_follows_the_sessions_role() {
    let (_dir, db) = db();
    let mut su = login(&db, "postgres");
    ok(&mut su, "CREATE ROLE plain LOGIN");
    let mut plain = login(&db, "plain");
    assert!(su.reported_parameters_changed().is_empty());
    let reported = su.reported_parameters();
    assert!(
        reported.contains(&("is_superuser", "on".into())),
        "{reported:?}"
    );
    assert!(reported.contains(&("session_authorization", "postgres".into())));
    // Per session: the other session is not a superuser at the same time.
    assert!(su.is_superuser() && !plain.is_superuser());
    assert_eq!(text(one(&mut plain, "SHOW is_superuser")), "off");

    ok(&mut su, "SET ROLE plain");
    assert!(!su.is_superuser());
    assert_eq!(
        (su.current_user(), su.session_user()),
        ("plain", "postgres")
    );
    assert_eq!(text(one(&mut su, "SHOW is_superuser")), "off");
    assert_eq!(
        su.reported_parameters_changed(),
        [("is_superuser", "off".into())]
    );
    // Privilege checks use the current role.
    refused(
        &mut su,
        &[("CREATE ROLE x", "42501 permission denied to create role")],
    );
    // The session user is a superuser, so it may take any role back.
    ok(&mut su, "SET ROLE postgres");
    assert!(su.is_superuser());
    ok(&mut su, "RESET ROLE");
    assert_eq!(
        su.reported_parameters_changed(),
        [("is_superuser", "on".into())]
    );
    assert!(su.reported_parameters_changed().is_empty());

    ok(&mut su, "SET SESSION AUTHORIZATION plain");
    assert_eq!((su.current_user(), su.session_user()), ("plain", "plain"));
    assert_eq!(text(one(&mut su, "SHOW session_authorization")), "plain");
    assert_eq!(
        su.reported_parameters_changed(),
        [
            ("is_superuser", "off".into()),
            ("session_authorization", "plain".into())
        ]
    );
    // SET ROLE asks about the session user, now plain...
    refused(
        &mut su,
        &[(
            "SET ROLE postgres",
            "42501 permission denied to set role \"postgres\"",
        )],
    );
    // ... while SET SESSION AUTHORIZATION asks about the authenticated role.
    ok(&mut su, "SET SESSION AUTHORIZATION postgres");
    ok(&mut su, "SET SESSION AUTHORIZATION plain");
    ok(&mut su, "RESET SESSION AUTHORIZATION");
    assert!(su.is_superuser());
    assert_eq!(su.session_user(), "postgres");
    assert_eq!(
        su.reported_parameters_changed(),
        [
            ("is_superuser", "on".into()),
            ("session_authorization", "postgres".into())
        ]
    );
    ok(&mut su, "SET application_name = 'psql'");
    assert_eq!(
        su.reported_parameters_changed(),
        [("application_name", "psql".into())]
    );
    // SET ROLE and SESSION AUTHORIZATION stay out of RESET ALL, as in PostgreSQL.
    ok(&mut su, "SET ROLE plain");
    ok(&mut su, "RESET ALL");
    assert_eq!(su.current_user(), "plain");
}

/// A data directory made when `quire_roles` had five columns and no memberships existed.
#[test]
fn an_older_roles_table_gains_the_attributes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    let config = Config {
        shared_buffers_bytes: 4 * 1024 * 1024,
        autovacuum: false,
        ..Config::default()
    };
    let db = Database::open(&vfs, dir.path(), config).expect("a new database opens");
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let columns = [
        ("oid", Type::Int),
        ("rolname", Type::Text),
        ("rolsuper", Type::Bool),
        ("rolcanlogin", Type::Bool),
        ("rolpassword", Type::Text),
    ]
    .map(|(n, t)| Column::new(n, t));
    let table = tx.create_table("quire_roles", &columns).unwrap();
    tx.create_index("quire_roles_name", table, &["rolname"], true)
        .unwrap();
    for (oid, name, superuser) in [(10, "postgres", true), (16384, "old", false)] {
        let row = [
            Value::Int(oid),
            Value::Text(name.into()),
            Value::Bool(superuser),
            Value::Bool(true),
            Value::Null,
        ];
        tx.insert(table, &row).unwrap();
    }
    tx.commit().unwrap();
    Session::bootstrap(&db).expect("the older table is migrated");
    Session::bootstrap(&db).expect("a second start finds nothing to do");
    let db = Arc::new(db);
    let mut su = login(&db, "postgres");
    let attributes = "SELECT rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, \
                      rolcanlogin, rolreplication, rolbypassrls, rolconnlimit \
                      FROM pg_roles ORDER BY oid";
    let row = |name: &str, flags: [bool; 7]| {
        let mut r = vec![Value::Text(name.into())];
        r.extend(flags.map(Value::Bool));
        r.push(Value::Int(-1));
        r
    };
    assert_eq!(
        rows(&mut su, attributes),
        [
            row("postgres", [true; 7]),
            // The predefined role an older table lacked, added by the migration.
            row(
                "pg_database_owner",
                [false, true, false, false, false, false, false]
            ),
            row("old", [false, true, false, false, true, false, false]),
        ]
    );
    ok(&mut su, "GRANT postgres TO old");
    ok(&mut su, "ALTER ROLE old CREATEDB");
    assert_eq!(
        memberships(&mut su),
        [m("postgres", "old", "postgres", false)]
    );
}
