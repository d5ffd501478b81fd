#!/usr/bin/env bash
# The MCP end-to-end test with an independent client, the official Python SDK: starts
# the real server (debug build) on a free port with its own data dir, runs
# tests/python/mcp_client.py against it, and cleans up whatever it created.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt 2>&1 | grep -v 'root' || true
cargo build -q -p sandboxd
data=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
key="sbx_python_mcp_test_key_0123456789abcdefghij"
SANDBOXD_BOOTSTRAP_KEY=$key SANDBOXD_TEMPLATES__BASE__IMAGE=sandboxd-local/debian:bookworm \
  SANDBOXD_AGENT_BINARY=${SANDBOXD_AGENT_BINARY:-$(bash scripts/build-agent.sh)} \
  target/debug/sandboxd serve --listen "127.0.0.1:$port" --data-dir "$data" >"$data/server.log" 2>&1 &
server=$!
env_id=none
cleanup() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  # Every sandbox of this run lives in its fresh environment.
  ids=$(docker ps -aq --filter "label=sandboxd.environmentId=$env_id")
  [ -z "$ids" ] || docker rm -f $ids >/dev/null
  rm -rf "$data"
}
trap cleanup EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
env_id=$(curl -fs "http://127.0.0.1:$port/api/project.all" -H "x-api-key: $key" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["environments"][0]["environmentId"])')
python3 tests/python/mcp_client.py "http://127.0.0.1:$port/mcp" "$key" "$env_id"
