#!/usr/bin/env bash
# Admissions per second and p99 (signed joins of established rooms, open mode) with the relay on
# SQLite and on PostgreSQL, on this machine, and PostgreSQL's transactions per admission (each
# statement of the relay is its own transaction, so this is its round trips). The relay (`serve`)
# runs on CPU 0 and the clients (`admit`) on CPU 1; PostgreSQL is a server of the script's own on
# a loopback port, with its default (durable) settings. Usage: bench/admission-bench.sh [ROOMS]
# [SECONDS] [CONCURRENCY]; `make bench-admission`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOMS=${1:-5000}
SECONDS_=${2:-10}
CONCURRENCY=${3:-64}
BENCH=.build/release/tether-relaybench
WORK=$(mktemp -d /tmp/admission-bench.XXXXXX)
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
PGPORT=$((20000 + RANDOM % 20000))
# The server's tools start in its own directory: the caller's may be one the postgres user cannot
# enter (a clone in root's 0700 home), where they fail.
AS_PG=(env --chdir "$WORK")
[ "$(id -u)" -eq 0 ] && AS_PG=(runuser -u postgres -- env --chdir "$WORK") && chown postgres: "$WORK"

cleanup() {
  [ -n "${SERVE_PID:-}" ] && kill "$SERVE_PID" 2>/dev/null || true
  "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"${AS_PG[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U tether --auth=trust -E UTF8 >/dev/null
printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\nmax_connections = 100\n" "$PGPORT" "$WORK" >> "$WORK/pg/postgresql.conf"
"${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w start >/dev/null
PGURL="postgres://tether@127.0.0.1:$PGPORT/postgres"
commits() { "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U tether -d postgres -At -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'postgres'"; }

run() {  # $1 label, $2 database
  local port=$((9700 + RANDOM % 200))
  taskset -c 0 "$BENCH" serve --port "$port" --db "$2" --rooms "$ROOMS" > "$WORK/serve-$1.out" 2> "$WORK/serve-$1.err" &
  SERVE_PID=$!
  for _ in $(seq 1 600); do grep -q "relaybench: serving" "$WORK/serve-$1.out" 2>/dev/null && break; sleep 0.1; done
  local before after line
  [ "$1" = postgres ] && { sleep 1; before=$(commits); }
  line=$(taskset -c 1 "$BENCH" admit --port "$port" --rooms "$ROOMS" --seconds "$SECONDS_" --concurrency "$CONCURRENCY" --label "$1" || true)
  if [ "$1" = postgres ]; then
    sleep 0.6  # the statistics collector reports with a short delay
    after=$(commits)
    local admissions
    admissions=$(echo "$line" | sed -n 's/.*"admissions":\([0-9]*\).*/\1/p')
    # The node's own chores commit ~2 transactions a second (lease renewal, shard-map read).
    line="${line%\}},\"pg_transactions\":$((after - before)),\"pg_transactions_per_admission\":$(awk -v t=$((after - before)) -v a="$admissions" -v s="$SECONDS_" 'BEGIN { printf "%.3f", (t - 2 * (s + 2)) / a }')}"
  fi
  echo "$line"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=
}

echo "admission-bench: $ROOMS established rooms, $CONCURRENCY joins in flight, ${SECONDS_} s; relay on CPU 0, clients on CPU 1" >&2
run sqlite "$WORK/relay.db"
run postgres "$PGURL"
