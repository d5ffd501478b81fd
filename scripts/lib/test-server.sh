# Sourced by the scripts that test the real binary from outside: starts a debug build
# (a release build with SANDBOXD_PROFILE=release) of `sandboxd serve` on a free port with
# its own data dir, and removes everything it created on exit. Sets: port, key, data,
# url, env_id, bin, server (its pid). Extra `SANDBOXD_*` settings can be exported before
# sourcing.
if [ "${SANDBOXD_PROFILE:-debug}" = release ]; then
  cargo build -q --release -p sandboxd
  bin=target/release/sandboxd
else
  cargo build -q -p sandboxd
  bin=target/debug/sandboxd
fi
data=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
key="sbx_external_test_key_0123456789abcdefghijk"
url="http://127.0.0.1:$port"
SANDBOXD_BOOTSTRAP_KEY=$key SANDBOXD_TEMPLATES__BASE__IMAGE=sandboxd-local/debian:bookworm \
  SANDBOXD_TEMPLATES__PYTHON__IMAGE=sandboxd-local/busybox:latest \
  SANDBOXD_TEMPLATES__NODE__IMAGE=sandboxd-local/busybox:latest \
  SANDBOXD_TEMPLATES__CODE_INTERPRETER_V1__IMAGE=sandboxd-local/interpreter:bookworm \
  "$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" >"$data/server.log" 2>&1 &
server=$!
instance=none
source scripts/lib/remove-containers.sh
cleanup() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  # Every container of this server carries its installation id.
  local failed=0
  remove_containers "label=sandboxd.instance=$instance" || failed=1
  # And every volume it made.
  volumes=$(docker volume ls -q --filter "label=sandboxd.instance=$instance")
  [ -z "$volumes" ] || docker volume rm -f $volumes >/dev/null
  # And so does every snapshot image it made. A snapshot of a sandbox made from a
  # snapshot is a child of that image, which the engine removes only after the child:
  # a few rounds remove them all, whatever the order.
  for _ in 1 2 3 4; do
    images=$(docker images -q --filter "label=sandboxd.instance=$instance" | sort -u)
    [ -z "$images" ] && break
    docker rmi -f $images >/dev/null 2>&1 || true
  done
  images=$(docker images -q --filter "label=sandboxd.instance=$instance" | sort -u)
  [ -z "$images" ] || { echo "snapshot images left: $images" >&2; failed=1; }
  # And every image its builds made (templates and their cached steps), by the
  # organizations of its database.
  for org in $(python3 -c 'import sqlite3, sys; [print(r[0]) for r in sqlite3.connect(sys.argv[1]).execute("SELECT organization_id FROM organizations")]' "$data/sandboxd.db" 2>/dev/null); do
    for _ in 1 2 3 4 5 6; do
      images=$(docker images -q --filter "label=sandboxd.builtBy=$org" | sort -u)
      [ -z "$images" ] && break
      docker rmi -f $images >/dev/null 2>&1 || true
    done
  done
  # The internet bridge, made for the first `internet` sandbox (E2B's default), unless
  # another server's sandboxes are still on it (then the engine refuses).
  docker network rm sandboxd-internet >/dev/null 2>&1 || true
  rm -rf "$data"
  return "$failed"
}
trap cleanup EXIT
for _ in $(seq 1 100); do curl -fs "$url/health" >/dev/null 2>&1 && break; sleep 0.1; done
env_id=$(curl -fs "$url/api/project.all" -H "x-api-key: $key" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["environments"][0]["environmentId"])')
instance=$(python3 - "$data/sandboxd.db" <<'PY'
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT instance_id FROM installation").fetchone()[0])
PY
)
