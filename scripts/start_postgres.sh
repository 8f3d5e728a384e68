#!/usr/bin/env bash
# Start a throw-away local PostgreSQL server for the rooflaw tests and print its URL on stdout.
#
#   eval "$(scripts/start_postgres.sh --export)"   # sets ROOFLAW_TEST_PG_URL and ROOFLAW_PG_DIR
#   scripts/start_postgres.sh                      # prints postgresql+psycopg2://rooflaw@127.0.0.1:PORT/rooflaw
#   scripts/start_postgres.sh --stop DIR           # stops a server started earlier (DIR = ROOFLAW_PG_DIR)
#
# Uses the Debian PostgreSQL binaries (pg_ctl/initdb on PATH or /usr/lib/postgresql/*/bin). PostgreSQL refuses to
# run as root, so as root the cluster is owned and run by the unprivileged user `postgres` (created if missing).
# Env: PGPORT (default: a free port from 54329 up), ROOFLAW_PG_DIR (default: a new temp dir).
set -euo pipefail

find_bin() {
  local name=$1
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
  local c
  for c in /usr/lib/postgresql/*/bin/"$name"; do
    [ -x "$c" ] && { echo "$c"; return; }
  done
  echo "start_postgres.sh: $name not found (apt-get install postgresql)" >&2
  exit 1
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

PG_CTL=$(find_bin pg_ctl)
BIN=$(dirname "$(readlink -f "$PG_CTL")")

if [ "${1:-}" = "--stop" ]; then
  dir=${2:?usage: start_postgres.sh --stop DIR}
  as_owner "$BIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
  rm -rf "$dir"
  exit 0
fi

if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin postgres
fi

dir=${ROOFLAW_PG_DIR:-$(mktemp -d /tmp/rooflaw-pg.XXXXXX)}
mkdir -p "$dir"
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres "$dir"

port=${PGPORT:-}
if [ -z "$port" ]; then
  port=54329
  while (echo >/dev/tcp/127.0.0.1/$port) >/dev/null 2>&1; do port=$((port + 1)); done
fi

if [ ! -f "$dir/data/PG_VERSION" ]; then
  as_owner "$BIN/initdb" -D "$dir/data" -U rooflaw --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
fi
as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off" start >/dev/null \
  || { cat "$dir/server.log" >&2; exit 1; }
as_owner "$BIN/createdb" -h 127.0.0.1 -p "$port" -U rooflaw rooflaw 2>/dev/null || true

url="postgresql+psycopg2://rooflaw@127.0.0.1:$port/rooflaw"
if [ "${1:-}" = "--export" ]; then
  echo "export ROOFLAW_TEST_PG_URL='$url'"
  echo "export ROOFLAW_PG_DIR='$dir'"
else
  echo "$url"
fi
