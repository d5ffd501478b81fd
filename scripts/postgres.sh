#!/usr/bin/env bash
# A private PostgreSQL server on loopback for the tests (and for trying replicas by hand),
# from Debian's packages; the system's own cluster is never touched.
#   bash scripts/postgres.sh start   starts it (installing PostgreSQL when missing, as root)
#                                    and prints `export SANDBOXD_TEST_POSTGRES_URL=...`
#   bash scripts/postgres.sh install installs PostgreSQL when missing (as root), no more
#   bash scripts/postgres.sh url     prints that line for a running server
#   bash scripts/postgres.sh stop    stops it and removes its files
# Its files are in $SANDBOXD_PG_DIR (default /tmp/sandboxd-test-postgres); it listens on
# 127.0.0.1:$SANDBOXD_PG_PORT (default 55432), with a random password for user sandboxd.
set -euo pipefail
dir="${SANDBOXD_PG_DIR:-/tmp/sandboxd-test-postgres}"
port="${SANDBOXD_PG_PORT:-55432}"

bindir() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$found" ] && [ "$(id -u)" = 0 ]; then
    echo "installing PostgreSQL from Debian's packages" >&2
    . "$(dirname "$0")/apt.sh"
    apt_install postgresql >&2
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  fi
  [ -n "$found" ] || { echo "PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
  echo "$found"
}

# Runs a server program as the owner of the files: PostgreSQL refuses to run as root.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url() {
  echo "export SANDBOXD_TEST_POSTGRES_URL=postgres://sandboxd:$(cat "$dir/password")@127.0.0.1:$port/postgres"
}

running() {
  [ -f "$dir/data/postmaster.pid" ] && as_owner "$(bindir)/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

case "${1:-start}" in
  start)
    bin=$(bindir)
    if running; then url; exit 0; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      rm -rf "$dir"
      mkdir -p "$dir"
      head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$dir/password"
      if [ "$(id -u)" = 0 ]; then chown -R postgres "$dir"; fi
      chmod 700 "$dir"
      as_owner "$bin/initdb" -D "$dir/data" -U sandboxd --pwfile="$dir/password" \
        --auth=scram-sha-256 -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400" \
      start >/dev/null || { tail -n 30 "$dir/server.log" >&2; exit 1; }
    url
    ;;
  install)
    bindir >/dev/null
    ;;
  url)
    running || { echo "no test PostgreSQL is running (bash scripts/postgres.sh start)" >&2; exit 1; }
    url
    ;;
  stop)
    if running; then as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null; fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|install|url|stop" >&2
    exit 2
    ;;
esac
