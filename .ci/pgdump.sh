#!/usr/bin/env bash
# pg_dump and pg_restore run unchanged against quire (issue 41): PostgreSQL 18's tools, the
# schema and rows of tests/dump/schema.sql, and four round trips, each restored with
# ON_ERROR_STOP so that any statement a restore refuses fails the script:
#   1. quire   --pg_dump plain------> PostgreSQL (psql)
#   2. quire   --pg_dump custom-----> quire (pg_restore), a fresh server
#   3. quire   --pg_dump directory--> PostgreSQL (pg_restore)
#   4. PostgreSQL --pg_dump plain---> quire (psql), a fresh server
#   5. quire   --pg_dumpall--------> a script with its roles, memberships and tables
# After each, every table's and view's rows, its columns (name, type, nullable), its constraints, the
# comments and the sequences' states must equal the source's, compared as text through psql.
#
#   .ci/pgdump.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# shellcheck source=.ci/pg18.sh
. .ci/pg18.sh

tmp=$(mktemp -d /tmp/quire-pgdump.XXXXXX)
servers=()
cleanup() {
  local status=$?
  set +e
  for s in "${servers[@]}"; do kill -TERM "$s" 2>/dev/null; wait "$s" 2>/dev/null; done
  pg18_stop "$tmp"
  if [ "$status" != 0 ]; then
    for l in "$tmp"/*.log; do echo "== $l (last lines)" >&2; tail -n 15 "$l" >&2; done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pg18_start "$tmp"
bin=$PG18_BIN
cargo build --release -q -p quire

# A fresh quire server on `port` (below the kernel's ephemeral range).
quire_start() {
  local port=$1
  ./target/release/quire serve --data-dir "$tmp/quire-$port" --port "$port" >"$tmp/quire-$port.log" 2>&1 &
  servers+=($!)
  for _ in $(seq 1 300); do
    "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && return 0
    sleep 0.1
  done
  echo "quire serve on $port did not answer in 30 s" >&2
  return 1
}

psql_at() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres "$@"; }

# What a restore must reproduce, as text: per table its columns, constraints and rows (in
# the order of every column), then each sequence's state.
snapshot() {
  local port=$1 db=$2 t
  local tables="author book review counter_log a_titles a_short"
  for t in $tables; do
    echo "== $t"
    psql_at -p "$port" -d "$db" -At -c "select obj_description('$t'::regclass, 'pg_class')"
    psql_at -p "$port" -d "$db" -At -c "select column_name, data_type, is_nullable,
      col_description('$t'::regclass, ordinal_position::int)
      from information_schema.columns where table_name = '$t' order by ordinal_position"
    psql_at -p "$port" -d "$db" -At -c "select constraint_name, constraint_type
      from information_schema.table_constraints where table_name = '$t'
      and constraint_type <> 'CHECK' order by 1"
    psql_at -p "$port" -d "$db" -At -c "select * from $t order by 1, 2"
  done
  for s in author_id_seq book_id_seq ticket; do
    echo "== sequence $s"
    psql_at -p "$port" -d "$db" -At -c "select obj_description('$s'::regclass, 'pg_class')"
    psql_at -p "$port" -d "$db" -At -c "select last_value, is_called from $s"
  done
}

check() {
  local what=$1 expected=$2 port=$3 db=$4
  snapshot "$port" "$db" >"$tmp/got.txt"
  if ! diff -u "$expected" "$tmp/got.txt" >"$tmp/diff.txt"; then
    echo "FAIL $what: the restored database differs from its source" >&2
    head -40 "$tmp/diff.txt" >&2
    exit 1
  fi
  echo "PASS $what"
}

# The sources: quire, and PostgreSQL's database `src`, from the same script.
quire_start 25462
psql_at -p 25462 -d quire -f tests/dump/schema.sql >/dev/null
psql_at -p "$PG18_PORT" -d postgres -c "create database src" >/dev/null
psql_at -p "$PG18_PORT" -d src -f tests/dump/schema.sql >/dev/null
snapshot 25462 quire >"$tmp/quire-source.txt"
snapshot "$PG18_PORT" src >"$tmp/pg-source.txt"
# The two sources must agree, or the comparison below would prove nothing.
diff -u "$tmp/pg-source.txt" "$tmp/quire-source.txt" || {
  echo "FAIL: tests/dump/schema.sql gives quire and PostgreSQL different databases" >&2
  exit 1
}

dump() { "$bin/pg_dump" -h 127.0.0.1 -U postgres "$@"; }

# 1. quire -> PostgreSQL, plain format through psql.
dump -p 25462 -d quire -f "$tmp/quire.sql"
psql_at -p "$PG18_PORT" -d postgres -c "create database from_quire" >/dev/null
psql_at -p "$PG18_PORT" -d from_quire -f "$tmp/quire.sql" >/dev/null
check "quire -> pg_dump plain -> psql -> PostgreSQL" "$tmp/quire-source.txt" "$PG18_PORT" from_quire

# 2. quire -> quire, custom format through pg_restore.
dump -p 25462 -d quire -Fc -f "$tmp/quire.dump"
quire_start 25463
"$bin/pg_restore" -h 127.0.0.1 -p 25463 -U postgres -d quire --exit-on-error "$tmp/quire.dump"
check "quire -> pg_dump custom -> pg_restore -> quire" "$tmp/quire-source.txt" 25463 quire

# 3. quire -> PostgreSQL, directory format through pg_restore.
dump -p 25462 -d quire -Fd -f "$tmp/quire.dir"
psql_at -p "$PG18_PORT" -d postgres -c "create database from_quire_dir" >/dev/null
"$bin/pg_restore" -h 127.0.0.1 -p "$PG18_PORT" -U postgres -d from_quire_dir --exit-on-error "$tmp/quire.dir"
check "quire -> pg_dump directory -> pg_restore -> PostgreSQL" "$tmp/quire-source.txt" "$PG18_PORT" from_quire_dir

# 4. PostgreSQL -> quire, plain format through psql.
dump -p "$PG18_PORT" -d src -f "$tmp/pg.sql"
quire_start 25464
psql_at -p 25464 -d quire -f "$tmp/pg.sql" >/dev/null
check "PostgreSQL -> pg_dump plain -> psql -> quire" "$tmp/pg-source.txt" 25464 quire

# 5. pg_dumpall of quire: the roles and memberships, then the database.
"$bin/pg_dumpall" -h 127.0.0.1 -p 25462 -U postgres -l quire -f "$tmp/all.sql"
for want in "CREATE ROLE dump_reader;" "GRANT dump_writer TO dump_reader" "CREATE TABLE public.book ("; do
  grep -qF "$want" "$tmp/all.sql" || { echo "FAIL pg_dumpall: no \"$want\"" >&2; exit 1; }
done
echo "PASS quire -> pg_dumpall"

echo "pgdump: 4 round trips and pg_dumpall passed in $(($(date +%s) - start)) s"
