#!/usr/bin/env bash
# Applications and tools run unchanged against `quire serve` (issue 41): the Python scenarios
# of tests/apps (psycopg 3, asyncpg, SQLAlchemy 2 Core and ORM, pandas, Django 5), each against a
# freshly started release server, each printing `PASS name` or `FAIL name: first error`.
# The client libraries go into a venv (APPS_VENV, default /opt/apps-venv; reused when there).
#
#   .ci/apps.sh [scenario ...]      (default: every tests/apps/*.py but common.py)
#
# APPS_SERVER=external APPS_HOST=... APPS_PORT=... APPS_DB=... runs the scenarios against a
# server already running (how they were checked against PostgreSQL 18).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
export PYTHONDONTWRITEBYTECODE=1

venv=${APPS_VENV:-/opt/apps-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check \
  "SQLAlchemy>=2,<3" "psycopg[binary]>=3,<4" pandas "Django>=5,<6" "asyncpg>=0.29,<1"
echo "== venv $venv ready after $(($(date +%s) - start)) s"

if [ $# -gt 0 ]; then
  scenarios=("$@")
else
  scenarios=()
  for f in tests/apps/*.py; do
    [ "$(basename "$f")" = common.py ] || scenarios+=("$(basename "$f" .py)")
  done
fi

server=
data=
log=
cleanup() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  [ -n "$data" ] && rm -rf "$data" "$log"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "${APPS_SERVER:-quire}" = quire ]; then
  cargo build --release -q -p quire
  data=$(mktemp -d)
  log="$data.log"
  # Below the kernel's ephemeral range (32768-60999), where a client socket could hold it.
  export APPS_HOST=127.0.0.1 APPS_PORT=25452 APPS_DB=quire APPS_USER=postgres
  ./target/release/quire serve --data-dir "$data" --port "$APPS_PORT" >"$log" 2>&1 &
  server=$!
  ready=
  for _ in $(seq 1 300); do
    kill -0 "$server" 2>/dev/null || { echo "quire serve exited while starting:"; cat "$log"; exit 1; }
    if "$venv/bin/python" -c "import psycopg; psycopg.connect('host=$APPS_HOST port=$APPS_PORT dbname=$APPS_DB user=$APPS_USER', connect_timeout=2).close()" 2>/dev/null; then
      ready=1
      break
    fi
    sleep 0.1
  done
  [ -n "$ready" ] || { echo "quire serve did not answer in time:"; tail -30 "$log"; exit 1; }
fi

failed=0
for s in "${scenarios[@]}"; do
  t0=$(date +%s%N)
  err=$(mktemp)
  if (cd tests/apps && "$venv/bin/python" "$s.py" 2>"$err"); then
    :
  else
    failed=$((failed + 1))
    echo "--- $s: traceback"
    tail -25 "$err"
    if [ -n "$log" ]; then
      echo "--- server log (last 15 lines)"
      tail -15 "$log"
    fi
  fi
  rm -f "$err"
  ms=$((($(date +%s%N) - t0) / 1000000))
  printf '    (%s: %d.%01d s)\n' "$s" $((ms / 1000)) $((ms % 1000 / 100))
done

echo "apps: ${#scenarios[@]} scenarios, $failed failed, $(($(date +%s) - start)) s in all"
[ "$failed" = 0 ]
