"""pandas through SQLAlchemy: DataFrame.to_sql (a new table with its index, then appended
to), read_sql_query with and without a parameter."""

import pandas as pd
from sqlalchemy import create_engine, text

from common import check, run, sqlalchemy_url


def scenario():
    engine = create_engine(sqlalchemy_url())
    df = pd.DataFrame(
        {
            "name": ["a", "b", "c", None],
            "n": [1, 2, 3, 4],
            "x": [0.5, 1.25, None, -2.0],
            "flag": [True, False, True, False],
            "at": pd.to_datetime(["2024-01-01 10:00:00", "2024-01-02 00:00:00", "2024-02-29 23:59:59", None], utc=True),
        },
        index=pd.Index([10, 20, 30, 40], name="key"),
    )
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS apps_frame"))
    # Replacing an existing table reflects it first (SQLAlchemy's get_pk_constraint and
    # get_indexes), as read_sql_table does.
    df.iloc[:1].to_sql("apps_frame", engine, if_exists="replace", index=True)
    df.to_sql("apps_frame", engine, if_exists="replace", index=True)
    df.iloc[:2].to_sql("apps_frame", engine, if_exists="append", index=True)
    table = pd.read_sql_table("apps_frame", engine, index_col="key")
    check(len(table), 6, "read_sql_table rows")
    check(list(table.columns), ["name", "n", "x", "flag", "at"], "read_sql_table columns")

    back = pd.read_sql_query("SELECT * FROM apps_frame ORDER BY key, n", engine, index_col="key")
    check(len(back), 6, "rows written")
    check(list(back.columns), ["name", "n", "x", "flag", "at"], "columns")
    first = back.iloc[[0, 2, 4, 5]]
    check(first["n"].tolist(), [1, 2, 3, 4], "integers")
    check(first["flag"].tolist(), [True, False, True, False], "booleans")
    check(str(first["at"].dtype.tz), "UTC", "timestamptz dtype")
    check(first["at"].iloc[2], pd.Timestamp("2024-02-29 23:59:59", tz="UTC"), "timestamptz value")
    check(pd.isna(first["at"].iloc[3]) and pd.isna(first["x"].iloc[2]) and pd.isna(first["name"].iloc[3]),
          True, "NULLs")
    check(first["x"].iloc[1], 1.25, "float")

    q = pd.read_sql_query(
        text("SELECT key, n * 2 AS n2, x FROM apps_frame WHERE n >= :least ORDER BY key, n2"),
        engine,
        params={"least": 2},
    )
    check(q["key"].tolist(), [20, 20, 30, 40], "read_sql_query keys")
    check(q["n2"].tolist(), [4, 4, 6, 8], "read_sql_query values")
    agg = pd.read_sql_query(
        "SELECT flag, count(*) AS c FROM apps_frame GROUP BY flag ORDER BY flag", engine
    )
    check(agg.values.tolist(), [[False, 3], [True, 3]], "read_sql_query aggregate")
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE apps_frame"))
    engine.dispose()


run("pandas", scenario)
