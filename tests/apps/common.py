"""Shared by the scenarios of tests/apps: where the server is, and how a scenario reports.

The server comes from the environment (set by .ci/apps.sh): APPS_HOST, APPS_PORT, APPS_DB,
APPS_USER. Each scenario is a function run by `run(name, fn)`, which prints one line,
`PASS name` or `FAIL name: first error`, and exits non-zero on failure.
"""

import os
import sys
import traceback

HOST = os.environ.get("APPS_HOST", "127.0.0.1")
PORT = int(os.environ.get("APPS_PORT", "25452"))
DB = os.environ.get("APPS_DB", "quire")
USER = os.environ.get("APPS_USER", "postgres")


def dsn():
    """A libpq connection string for psycopg."""
    return f"host={HOST} port={PORT} dbname={DB} user={USER}"


def sqlalchemy_url():
    """A SQLAlchemy URL with the psycopg (3) driver."""
    return f"postgresql+psycopg://{USER}@{HOST}:{PORT}/{DB}"


def check(actual, expected, what):
    """Fails the scenario, naming what was checked, unless actual == expected."""
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def run(name, fn):
    """Runs one scenario and reports it on one line; the traceback goes to stderr."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any failure of the application is the result
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        # psycopg's errors carry the SQLSTATE; SQLAlchemy's wrap psycopg's in .orig.
        sqlstate = getattr(e, "sqlstate", None) or getattr(getattr(e, "orig", None), "sqlstate", None)
        traceback.print_exc(file=sys.stderr)
        code = f" [{sqlstate}]" if sqlstate else ""
        print(f"FAIL {name}: {type(e).__name__}{code}: {first}", flush=True)
        sys.exit(1)
    print(f"PASS {name}", flush=True)
