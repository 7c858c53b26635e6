"""asyncpg as an application uses it: everything in binary format. Prepared statements with
typed parameters (arrays among them), executemany, nested transactions (savepoints),
copy_records_to_table (binary COPY FROM STDIN), copy_from_query and copy_from_table (CSV
and binary COPY TO STDOUT)."""

import asyncio
import datetime
import decimal
import io

import asyncpg

from common import DB, HOST, PORT, USER, check, run


async def main():
    conn = await asyncpg.connect(host=HOST, port=PORT, user=USER, database=DB)
    try:
        await conn.execute("DROP TABLE IF EXISTS apps_apg")
        await conn.execute(
            "CREATE TABLE apps_apg (id integer PRIMARY KEY, name text, tags text[], n numeric(10, 2),"
            " at timestamptz, scores bigint[])"
        )
        at = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)
        rows = [
            (1, "a", ["x", "y z"], decimal.Decimal("1.50"), at, [1, None, 2**40]),
            (2, None, None, None, None, None),
        ]
        await conn.executemany("INSERT INTO apps_apg VALUES ($1, $2, $3, $4, $5, $6)", rows)
        got = await conn.fetch("SELECT * FROM apps_apg WHERE id = ANY($1::int[]) ORDER BY id", [1, 2])
        check([tuple(r) for r in got], rows, "binary rows with arrays")
        check(await conn.fetchval("SELECT array_agg(id ORDER BY id) FROM apps_apg"), [1, 2], "array_agg")
        # jsonb travels in binary (a version byte, then the text); json as text.
        doc = await conn.fetchval("SELECT $1::jsonb || '{\"b\": [true, null]}'", '{"a": 1.5}')
        check(doc, '{"a": 1.5, "b": [true, null]}', "jsonb parameter and result")
        check(await conn.fetchval("SELECT $1::json -> 'k'", '{"k" : [1,  2]}'), "[1,  2]", "json piece as written")

        # Nested transactions are savepoints: the inner failure leaves the outer row.
        async with conn.transaction():
            await conn.execute("INSERT INTO apps_apg (id) VALUES (3)")
            try:
                async with conn.transaction():
                    await conn.execute("INSERT INTO apps_apg (id) VALUES (3)")
            except asyncpg.UniqueViolationError as e:
                check(e.sqlstate, "23505", "duplicate in a nested transaction")
        check(await conn.fetchval("SELECT count(*) FROM apps_apg"), 3, "outer transaction kept")

        # Binary COPY FROM STDIN, then COPY TO STDOUT as CSV and as binary.
        records = [(10 + i, f"c{i}", [str(i)], decimal.Decimal(i) / 4, at, [i]) for i in range(50)]
        result = await conn.copy_records_to_table(
            "apps_apg", records=records, columns=["id", "name", "tags", "n", "at", "scores"]
        )
        check(result, "COPY 50", "copy_records_to_table")
        got = await conn.fetchrow("SELECT name, tags, n, scores FROM apps_apg WHERE id = 13")
        check(tuple(got), ("c3", ["3"], decimal.Decimal("0.75"), [3]), "a copied record")
        out = io.BytesIO()
        await conn.copy_from_query("SELECT id, name FROM apps_apg WHERE id < 12 ORDER BY id", output=out, format="csv")
        check(out.getvalue(), b"1,a\n2,\n3,\n10,c0\n11,c1\n", "copy_from_query (csv)")
        out = io.BytesIO()
        result = await conn.copy_from_table("apps_apg", output=out, format="binary")
        check((result, out.getvalue()[:11]), ("COPY 53", b"PGCOPY\n\xff\r\n\x00"), "copy_from_table (binary)")
    finally:
        await conn.close()


def scenario():
    asyncio.run(main())


if __name__ == "__main__":
    run("asyncpg", scenario)
