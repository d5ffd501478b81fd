#!/usr/bin/env bash
# Runs sandboxd on this machine: starts the Docker engine if needed, builds the local
# images and sandboxd, starts the server on 127.0.0.1:3000 and creates a first sandbox to
# show it works.
#
#   bash scripts/run.sh          keeps the server in the foreground; Ctrl-C stops it
#                                (sandboxes stay until they expire or are killed)
#   bash scripts/run.sh --check  the same without a prompt, then removes the sandbox,
#                                stops the server and exits 0 (it works) or 1
#
# Settings: SANDBOXD_LISTEN (default 127.0.0.1:3000), SANDBOXD_DATA_DIR (default
# ./sandboxd-data), SANDBOXD_CONFIG (default examples/local.toml), SANDBOXD_KEY (default:
# the owner key the first start writes to <data dir>/owner.key).
set -uo pipefail
cd "$(dirname "$0")/.."

mode=serve
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  -h | --help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "run.sh: unknown option $1 (try --help)" >&2
    exit 2
    ;;
esac

listen=${SANDBOXD_LISTEN:-127.0.0.1:3000}
data=${SANDBOXD_DATA_DIR:-./sandboxd-data}
config=${SANDBOXD_CONFIG:-examples/local.toml}
url=http://$listen
server=
sandbox=
log=
work=$(mktemp -d)

step() { echo "==> $*"; }

# Says what failed and what to do, then exits (the EXIT trap stops the server).
fail() {
  echo >&2
  echo "run.sh: $1" >&2
  shift
  for hint in "$@"; do echo "  $hint" >&2; done
  if [ -n "$log" ] && [ -s "$log" ]; then
    echo "  the server's last log lines ($log):" >&2
    tail -n 20 "$log" | sed 's/^/    /' >&2
  fi
  exit 1
}

server_alive() { [ -n "$server" ] && kill -0 "$server" 2>/dev/null; }

stop_server() {
  server_alive || return 0
  kill -TERM "$server" 2>/dev/null
  for _ in $(seq 1 200); do server_alive || break; sleep 0.1; done
  server_alive && kill -KILL "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  server=
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ "$mode" = check ] && [ -n "$sandbox" ] && server_alive; then
    api POST sandbox.remove "{\"sandboxId\": \"$sandbox\"}" >/dev/null 2>&1 &&
      echo "removed the sandbox $sandbox"
  fi
  if server_alive; then
    echo "stopping sandboxd"
    stop_server
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Reads one field of a JSON document on standard input; prints nothing when it is not
# there (the caller says what went wrong).
json_field() {
  python3 -c '
import json, sys
try:
    value = json.load(sys.stdin)
    for key in sys.argv[1].split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    print(value)
except Exception:
    sys.exit(1)
' "$1"
}

# Calls a procedure; prints the response body. On an error status, says which call
# failed with the server's own message.
api() {
  local method=$1 procedure=$2 body=${3:-} status
  local args=(-sS -o "$work/body" -w '%{http_code}' -X "$method" -H "x-api-key: $key")
  [ -n "$body" ] && args+=(-H 'content-type: application/json' -d "$body")
  if ! status=$(curl "${args[@]}" "$url/api/$procedure" 2>"$work/curl-error"); then
    fail "$procedure: no answer from $url ($(cat "$work/curl-error"))" \
      "is the server still running? its log says why it stopped"
  fi
  if [ "${status:0:1}" != 2 ]; then
    local message
    message=$(json_field message <"$work/body" || head -c 300 "$work/body")
    fail "$procedure answered $status: $message"
  fi
  cat "$work/body"
}

for tool in cargo curl python3 docker; do
  command -v "$tool" >/dev/null ||
    fail "$tool is not installed" "sandboxd's quick start needs cargo (Rust), curl, python3 and Docker"
done

if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null; then
    step "starting dockerd (log: /tmp/dockerd.log)"
    (dockerd >/tmp/dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  fi
  docker info >/dev/null 2>&1 ||
    fail "the Docker engine does not answer (docker info failed)" \
      "start it (e.g. sudo systemctl start docker), or add your user to the docker group"
fi

step "building the local images (no registry needed; kept once built)"
bash scripts/build-local-images.sh || fail "building the local images failed (output above)"

step "building sandboxd (a first build takes about 6 minutes on 2 cores)"
cargo build -p sandboxd || fail "cargo build -p sandboxd failed (output above)"

if python3 -c 'import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
socket.create_connection((host, int(port)), timeout=1)' "$listen" 2>/dev/null; then
  fail "something already listens on $listen" \
    "stop it (a sandboxd started earlier?), or choose another address:" \
    "SANDBOXD_LISTEN=127.0.0.1:3001 bash scripts/run.sh"
fi

step "starting sandboxd on $url (data: $data)"
if [ "$mode" = check ]; then
  log=$work/server.log
  RUST_LIB_BACKTRACE=0 target/debug/sandboxd serve --config "$config" --data-dir "$data" --listen "$listen" \
    >"$log" 2>&1 &
else
  RUST_LIB_BACKTRACE=0 target/debug/sandboxd serve --config "$config" --data-dir "$data" --listen "$listen" &
fi
server=$!
health=
for _ in $(seq 1 300); do
  server_alive || fail "sandboxd stopped during its start (its log says why)"
  health=$(curl -fsS "$url/health" 2>/dev/null) && break
  sleep 0.1
done
[ -n "$health" ] || fail "sandboxd did not answer on $url within 30 s"
exec_path=$(json_field execPath <<<"$health" || true)
if [ "$exec_path" != agent ]; then
  echo "warning: sandboxes run without the in-sandbox agent (exec path: ${exec_path:-unknown})" >&2
fi

key=${SANDBOXD_KEY:-}
if [ -z "$key" ]; then
  [ -r "$data/owner.key" ] ||
    fail "no owner key in $data/owner.key" \
      "set SANDBOXD_KEY to an owner key of this data dir, or move $data away to start afresh"
  key=$(tr -d '[:space:]' <"$data/owner.key")
fi

step "creating a first sandbox (python template)"
projects=$(api GET project.all) || exit 1
env_id=$(json_field 0.environments.0.environmentId <<<"$projects") ||
  fail "project.all returned no environment: $projects"
created=$(api POST sandbox.create \
  "{\"environmentId\": \"$env_id\", \"template\": \"python\", \"name\": \"first\"}") || exit 1
sandbox=$(json_field sandboxId <<<"$created") || fail "sandbox.create returned no id: $created"

step "running python3 -c \"print(6*7)\" in it"
exec_body='{"sandboxId": "'$sandbox'", "cmd": "python3 -c \"print(6*7)\""}'
result=$(api POST sandbox.exec "$exec_body") || exit 1
echo "$result"
stdout=$(json_field stdout <<<"$result" || true)
[ "$stdout" = 42 ] || fail "the command printed ${stdout:-nothing} instead of 42"

step "sandboxd doctor --client (the server answers, the key works)"
SANDBOXD_URL=$url SANDBOXD_KEY=$key target/debug/sandboxd doctor --client ||
  fail "sandboxd doctor found a problem (above)"

if [ "$mode" = check ]; then
  echo "check passed: sandboxd served a sandbox and its command on $url"
  exit 0
fi

cat <<MSG

sandboxd is up at $url
  API key:        $data/owner.key
  environment:    $env_id
  first sandbox:  $sandbox (python template; idle timeout 5 min)
Try:
  export SANDBOXD_URL=$url SANDBOXD_KEY=\$(cat $data/owner.key)
  curl -s -X POST \$SANDBOXD_URL/api/sandbox.exec -H "x-api-key: \$SANDBOXD_KEY" \\
    -H 'content-type: application/json' -d '{"sandboxId": "$sandbox", "cmd": "uname -a"}'
Ctrl-C stops the server.
MSG
wait "$server"
