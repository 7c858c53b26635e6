#!/usr/bin/env bash
# PostgreSQL's own clients against a freshly started `quire serve`: pgbench's initialization,
# its built-in scripts in every query mode, the two-phase script, the TPC-B invariant,
# psql's \dt, \d and an error's SQLSTATE, and authentication: psql over TLS
# (sslmode=require and verify-full with the test CA), SCRAM-SHA-256 and \password. Installs Debian's postgresql-client if it is
# missing. Usage: .ci/interop.sh [seconds per pgbench run, default 10]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}

if ! command -v pgbench >/dev/null || ! command -v psql >/dev/null; then
  echo "== installing postgresql-client"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null
fi

cargo build --release -q -p quire
data=$(mktemp -d)
# Below the kernel's ephemeral range (32768-60999), where a client socket could hold it.
port=25432
log="$data.log"
./target/release/quire serve --data-dir "$data" --port "$port" -c max_prepared_transactions=16 >"$log" 2>&1 &
server=$!
auth_server=
auth_data=
cleanup() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  if [[ -n "$auth_server" ]]; then
    kill -TERM "$auth_server" 2>/dev/null || true
    wait "$auth_server" 2>/dev/null || true
  fi
  rm -rf "$data" "$data.log" ${auth_data:+"$auth_data"}
}
trap cleanup EXIT

export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=quire
for _ in $(seq 1 100); do
  psql -qAtc 'select 1' >/dev/null 2>&1 && break
  sleep 0.1
done

fail() {
  echo "FAILED: $*"
  echo "--- server log (last 30 lines)"
  tail -30 "$log"
  exit 1
}

q() { psql -qAtc "$1"; }

echo "== pgbench -i -s 2"
pgbench -i -s 2 2>&1 | tail -2

# One pgbench run; checks that no transaction failed or aborted, prints the figures.
bench() {
  local label=$1
  shift
  local out
  out=$(pgbench -T "$secs" "$@" 2>&1) || fail "pgbench $label: $out"
  grep -q "number of failed transactions: 0 " <<<"$out" || fail "pgbench $label: $out"
  grep -qi "aborted" <<<"$out" && fail "pgbench $label: $out"
  printf '%-28s %10s tps  latency %8s ms  failed %s\n' "$label" \
    "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")" \
    "$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")" \
    "$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")"
  last_tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
}

echo "== pgbench -T $secs -c 4 -j 2"
balances() {
  q "select (select sum(abalance) from pgbench_accounts), (select sum(tbalance) from pgbench_tellers), (select sum(bbalance) from pgbench_branches)"
}
for mode in simple extended prepared; do
  IFS='|' read -r a0 t0 b0 <<<"$(balances)"
  bench "tpcb -M $mode" -c 4 -j 2 -M "$mode"
  # TPC-B's invariant: each transaction adds its delta to one account, teller and branch,
  # and records it in the history (which pgbench empties before each run).
  IFS='|' read -r a1 t1 b1 <<<"$(balances)"
  h=$(q "select coalesce(sum(delta), 0) from pgbench_history")
  da=$((a1 - a0)) dt=$((t1 - t0)) db=$((b1 - b0))
  [[ "$da" == "$dt" && "$dt" == "$db" && "$db" == "$h" ]] ||
    fail "TPC-B invariant after -M $mode: accounts +$da tellers +$dt branches +$db history $h"
done
echo "TPC-B invariant holds after each run: the accounts', tellers' and branches' balances grew by the history's deltas"

for mode in simple extended prepared; do
  bench "select-only -M $mode" -c 4 -j 2 -S -M "$mode"
done
for mode in simple extended prepared; do
  a0=$(q "select sum(abalance) from pgbench_accounts")
  bench "simple-update -M $mode" -c 4 -j 2 -N -M "$mode"
  a1=$(q "select sum(abalance) from pgbench_accounts")
  h=$(q "select coalesce(sum(delta), 0) from pgbench_history")
  [[ $((a1 - a0)) == "$h" ]] || fail "after -N -M $mode: accounts +$((a1 - a0)), history $h"
done
echo "-N: the accounts' balances grew by the history's deltas after each run"

# Seed 003's two-phase script (bench/twophase.sql, shared with bench/compare-postgres.sh).
before=$(q "select sum(abalance) from pgbench_accounts")
bench "two-phase -c 2" -c 2 -j 2 -f bench/twophase.sql
after=$(q "select sum(abalance) from pgbench_accounts")
[[ $((after - before)) == "$last_tx" ]] || fail "two-phase: abalance grew by $((after - before)), $last_tx transactions committed"
[[ "$(q 'select count(*) from pg_prepared_xacts')" == 0 ]] || fail "prepared transactions left over"
echo "two-phase: abalance grew by exactly the $last_tx committed transactions"

echo "== psql"
dt=$(psql -c '\dt')
echo "$dt"
for t in pgbench_accounts pgbench_branches pgbench_history pgbench_tellers; do
  grep -q " $t " <<<"$dt" || fail "\\dt lacks $t"
done
d=$(psql -c '\d pgbench_accounts')
echo "$d"
grep -q '"pgbench_accounts_pkey" PRIMARY KEY, btree (aid)' <<<"$d" || fail "\\d pgbench_accounts lacks its primary key"
grep -q 'aid      | integer       |           | not null' <<<"$d" || fail "\\d pgbench_accounts: column aid"
q 'create table notes (id serial primary key, body text not null, at timestamptz default now())' >/dev/null
q "insert into notes (body) values ('a'), ('b')" >/dev/null
[[ "$(q 'select max(id) from notes')" == 2 ]] || fail "serial column did not number the rows 1, 2"
d=$(psql -c '\d notes')
echo "$d"
grep -q "nextval('notes_id_seq'::regclass)" <<<"$d" || fail "\\d notes lacks the serial column's default"
grep -q 'now()' <<<"$d" || fail "\\d notes lacks the DEFAULT now()"
ds=$(psql -c '\ds')
grep -q 'notes_id_seq | sequence' <<<"$ds" || fail "\\ds lacks notes_id_seq"
dseq=$(psql -c '\d notes_id_seq')
echo "$dseq"
grep -q 'Owned by: public.notes.id' <<<"$dseq" || fail "\\d notes_id_seq lacks its owner"
dplus=$(psql -c '\d+ notes')
echo "$dplus"
grep -q 'Access method: heap' <<<"$dplus" || fail "\\d+ notes failed"
dtplus=$(psql -c '\dt+ notes')
grep -q 'kB\|bytes' <<<"$dtplus" || fail "\\dt+ shows no size"
for meta in '\l' '\di' '\du' '\dn' '\df' '\dx'; do
  psql -c "$meta" >/dev/null || fail "psql $meta failed"
done
q 'drop table notes' >/dev/null
err=$(psql -v VERBOSITY=verbose -c 'select 1/0' 2>&1 || true)
echo "$err"
grep -q "ERROR:  22012: division by zero" <<<"$err" || fail "select 1/0 did not report SQLSTATE 22012"

echo "== clean shutdown"
kill -TERM "$server"
wait "$server" || fail "quire serve exited with an error on SIGTERM"
grep -q "shut down" "$log" || grep -qi "shutdown" "$log" || fail "no shutdown in the log"

echo "== authentication: TLS, SCRAM-SHA-256, psql's \\password"
# A second server: postgres trusted in the clear on loopback, everybody else by SCRAM over TLS
# only, with the test certificate of crates/server/tests/fixtures.
auth_data=$(mktemp -d)
fixtures=$PWD/crates/server/tests/fixtures
printf 'hostnossl all postgres 127.0.0.1/32 trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n' >"$auth_data/hba.conf"
# The server refuses a key others can read, as PostgreSQL does; a checkout's copy is 0644.
install -m 0600 "$fixtures/server.key" "$auth_data/server.key"
log="$auth_data/log"
./target/release/quire serve --data-dir "$auth_data/data" --port $((port + 1)) \
  -c hba_file="$auth_data/hba.conf" -c ssl=on \
  -c ssl_cert_file="$fixtures/server.crt" -c ssl_key_file="$auth_data/server.key" >"$log" 2>&1 &
auth_server=$!
# In the clear unless a test asks for TLS (libpq's default, prefer, would try TLS first).
export PGPORT=$((port + 1)) PGSSLMODE=disable
for _ in $(seq 1 100); do
  psql "sslmode=disable" -qAtc 'select 1' >/dev/null 2>&1 && break
  sleep 0.1
done
psql "sslmode=disable" -qAtc "create user alice" >/dev/null || fail "create user alice"
# psql reads the new password from stdin when there is no terminal, and sends its verifier.
printf 'sesame\nsesame\n' | psql "sslmode=disable" -c '\password alice' >/dev/null 2>&1 ||
  fail "\\password alice"
[[ "$(q "select rolpassword like 'SCRAM-SHA-256\$4096:%' from pg_authid where rolname = 'alice'")" == t ]] ||
  fail "alice's verifier is not SCRAM-SHA-256"
[[ "$(PGPASSWORD=sesame psql "sslmode=require user=alice" -qAtc 'select current_user')" == alice ]] ||
  fail "alice over TLS with SCRAM"
[[ "$(PGPASSWORD=sesame psql "sslmode=verify-full sslrootcert=$fixtures/ca.crt host=localhost user=alice" -qAtc 'select 1')" == 1 ]] ||
  fail "verify-full against the test CA"
for who in alice nobody; do
  err=$(PGPASSWORD=wrong psql "sslmode=require user=$who" -qAtc 'select 1' 2>&1 || true)
  grep -q "FATAL:  password authentication failed for user \"$who\"" <<<"$err" || fail "wrong password for $who: $err"
done
err=$(PGPASSWORD=sesame psql "sslmode=disable user=alice" -qAtc 'select 1' 2>&1 || true)
grep -q 'no pg_hba.conf entry for host "127.0.0.1", user "alice", database "quire", no encryption' <<<"$err" ||
  fail "alice in the clear: $err"
echo "TLS (require, verify-full), SCRAM-SHA-256, \\password, 28P01 for a wrong password and an unknown user, no-entry in the clear"

echo "interop: all checks passed"
