"""psycopg 3 as an application uses it: typed server-side parameters, executemany, nested
transactions (savepoints), COPY in and out, prepared statements re-used, then DDL and a
rollback (after which psycopg sends DEALLOCATE ALL)."""

import datetime
import decimal

import psycopg
from psycopg.types.json import Json, Jsonb

from common import check, dsn, run


def scenario():
    with psycopg.connect(dsn(), autocommit=False) as conn:
        cur = conn.cursor()
        cur.execute("DROP TABLE IF EXISTS apps_items")
        cur.execute(
            "CREATE TABLE apps_items (id integer PRIMARY KEY, name text, price numeric(10, 2),"
            " active boolean, at timestamptz)"
        )
        conn.commit()

        # Server-side parameters, each with its type (psycopg binds them with OIDs).
        at = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.timezone.utc)
        cur.execute(
            "INSERT INTO apps_items VALUES (%s, %s, %s, %s, %s)",
            (1, "one", decimal.Decimal("1.50"), True, at),
        )
        cur.execute("INSERT INTO apps_items VALUES (%s, %s, %s, %s, %s)", (2, None, None, None, None))
        cur.execute("SELECT id, name, price, active, at FROM apps_items WHERE id = %s", (1,))
        check(cur.fetchone(), (1, "one", decimal.Decimal("1.50"), True, at), "typed round trip")
        cur.execute("SELECT name IS NULL, price IS NULL, at IS NULL FROM apps_items WHERE id = %s", (2,))
        check(cur.fetchone(), (True, True, True), "NULL parameters")
        cur.execute("SELECT %s::int + 1, %s || 'x', %s::numeric * 2, NOT %s", (41, "a", decimal.Decimal("0.25"), False))
        check(cur.fetchone(), (42, "ax", decimal.Decimal("0.50"), True), "parameter expressions")
        # Binary parameters and results.
        bcur = conn.cursor(binary=True)
        bcur.execute("SELECT id, name, price, active, at FROM apps_items WHERE id = %b", (1,))
        check(bcur.fetchone(), (1, "one", decimal.Decimal("1.50"), True, at), "binary round trip")
        # Lists are arrays, in text and in binary: parameters, results, ANY and array_agg.
        arrays = ([1, None, 3], ["a", "b c", None, 'x"y'], [2**40], [True, False], [decimal.Decimal("1.25")],
                  [datetime.date(2024, 1, 2)])
        for c in (cur, bcur):
            c.execute("SELECT %s::int[], %s::text[], %s::bigint[], %s::bool[], %s::numeric[], %s::date[]", arrays)
            check(c.fetchone(), arrays, "array parameters and results")
            c.execute("SELECT array_agg(id ORDER BY id), 1 = ANY(%s) FROM apps_items", ([1, 2],))
            check(c.fetchone(), ([1, 2], True), "array_agg and = ANY(list)")
            # json and jsonb: psycopg's Json/Jsonb wrappers, decoded to Python objects.
            doc = {"b": [1, 2.5, None], "a": "x\u00e9", "n": {"t": True}}
            c.execute("SELECT %s::jsonb, %s::json, %s::jsonb -> 'b' ->> 1, %s::jsonb @> '{\"a\": \"x\u00e9\"}'",
                      (Jsonb(doc), Json(doc), Jsonb(doc), Jsonb(doc)))
            check(c.fetchone(), (doc, doc, "2.5", True), "json and jsonb round trip")

        cur.executemany(
            "INSERT INTO apps_items (id, name, price, active) VALUES (%s, %s, %s, %s)",
            [(i, f"item{i}", decimal.Decimal(i) / 4, i % 2 == 0) for i in range(10, 20)],
        )
        check(cur.rowcount, 10, "executemany rowcount")
        conn.commit()

        # Server-side (named) cursors: DECLARE, then FETCH FORWARD n, text and binary.
        for binary in (False, True):
            with conn.cursor(name="apps_big", binary=binary) as sc:
                sc.itersize = 3
                sc.execute("SELECT id, name FROM apps_items WHERE id >= %s ORDER BY id", (10,))
                check(sc.fetchone(), (10, "item10"), "named cursor fetchone")
                check([r[0] for r in sc.fetchmany(4)], [11, 12, 13, 14], "named cursor fetchmany")
                check([r[0] for r in sc], [15, 16, 17, 18, 19], "named cursor iteration (FETCH FORWARD itersize)")
        conn.commit()
        with conn.cursor(name="apps_held", withhold=True) as sc:
            sc.execute("SELECT count(*) FROM apps_items")
            conn.commit()
            check(sc.fetchone(), (12,), "WITH HOLD cursor after commit")

        # Nested transaction blocks: the inner ones are savepoints.
        conn.autocommit = True
        with conn.transaction():
            conn.execute("UPDATE apps_items SET name = 'outer' WHERE id = 10")
            try:
                with conn.transaction():
                    conn.execute("UPDATE apps_items SET name = 'inner' WHERE id = 11")
                    conn.execute("SELECT 1 / 0")
            except psycopg.errors.DivisionByZero:
                pass
            with conn.transaction():
                conn.execute("UPDATE apps_items SET name = 'kept' WHERE id = 12")
        rows = conn.execute("SELECT id, name FROM apps_items WHERE id IN (10, 11, 12) ORDER BY id").fetchall()
        check(rows, [(10, "outer"), (11, "item11"), (12, "kept")], "savepoints")
        try:
            with conn.transaction():
                conn.execute("DELETE FROM apps_items")
                raise psycopg.Rollback()
        finally:
            pass
        check(conn.execute("SELECT count(*) FROM apps_items").fetchone(), (12,), "psycopg.Rollback")

        # COPY in and out, text format.
        with conn.cursor() as c:
            with c.copy("COPY apps_items (id, name, price, active) FROM STDIN") as copy:
                for i in range(100, 110):
                    copy.write_row((i, f"copied {i}", decimal.Decimal(i), None))
                copy.write_row((110, "tab\there", None, True))
            check(conn.execute("SELECT count(*), sum(price) FROM apps_items WHERE id >= 100").fetchone(),
                  (11, decimal.Decimal(1045)), "COPY FROM STDIN")
            out = []
            with c.copy("COPY (SELECT id, name, active FROM apps_items WHERE id >= 109 ORDER BY id) TO STDOUT") as copy:
                for row in copy.rows():
                    out.append(row)
            check(out, [("109", "copied 109", None), ("110", "tab\there", "t")], "COPY TO STDOUT rows")
            data = b""
            with c.copy("COPY apps_items (id, name) TO STDOUT") as copy:
                for block in copy:
                    data += bytes(block)
            check(data.count(b"\n"), 23, "COPY TO STDOUT lines")

        # Prepared statements: prepare=True makes psycopg PARSE a named statement and re-use it.
        conn.autocommit = False
        for i in range(5):
            cur.execute("SELECT name FROM apps_items WHERE id = %s", (100 + i,), prepare=True)
            check(cur.fetchone(), (f"copied {100 + i}",), "prepared statement")
        names = conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql").fetchone()
        check(names[0] >= 1, True, "the protocol's prepared statement in pg_prepared_statements")
        # DDL invalidates psycopg's cache; after a rollback it sends DEALLOCATE ALL.
        cur.execute("CREATE TABLE apps_scratch (a int)")
        conn.rollback()
        for i in range(3):
            cur.execute("SELECT name FROM apps_items WHERE id = %s", (100 + i,), prepare=True)
            check(cur.fetchone(), (f"copied {100 + i}",), "prepared statement after DEALLOCATE ALL")
        cur.execute("SELECT to_regclass('apps_scratch') IS NULL")
        check(cur.fetchone(), (True,), "rolled-back CREATE TABLE")
        conn.commit()

        # Server-side errors keep their SQLSTATE and the connection stays usable.
        try:
            cur.execute("INSERT INTO apps_items (id) VALUES (1)")
            raise AssertionError("duplicate key accepted")
        except psycopg.errors.UniqueViolation:
            conn.rollback()
        cur.execute("DROP TABLE apps_items")
        conn.commit()


run("psycopg3", scenario)
