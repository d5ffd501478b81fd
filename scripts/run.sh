#!/usr/bin/env bash
# Runs sandboxd on this machine: starts the Docker engine if needed, builds the local
# images, starts the server on 127.0.0.1:3000 and creates a first sandbox to show it works.
# The server keeps running in the foreground; Ctrl-C stops it (sandboxes stay until
# they expire or are killed).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd"
  (dockerd >/tmp/dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
bash scripts/build-local-images.sh
SANDBOXD_AGENT_BINARY=${SANDBOXD_AGENT_BINARY:-$(bash scripts/build-agent.sh)}
export SANDBOXD_AGENT_BINARY
cargo build -p sandboxd
config=${SANDBOXD_CONFIG:-examples/local.toml}
data=${SANDBOXD_DATA_DIR:-./sandboxd-data}
url=http://127.0.0.1:3000

target/debug/sandboxd serve --config "$config" --data-dir "$data" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server' INT TERM
for _ in $(seq 1 100); do curl -fs "$url/health" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "$url/health" >/dev/null || { echo "sandboxd did not start" >&2; exit 1; }

key=${SANDBOXD_KEY:-$(cat "$data/owner.key")}
env_id=$(curl -fs "$url/api/project.all" -H "x-api-key: $key" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["environments"][0]["environmentId"])')
sandbox=$(curl -fs -X POST "$url/api/sandbox.create" -H "x-api-key: $key" -H 'content-type: application/json' \
  -d "{\"environmentId\": \"$env_id\", \"template\": \"python\", \"name\": \"first\"}" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["sandboxId"])')
curl -fs -X POST "$url/api/sandbox.exec" -H "x-api-key: $key" -H 'content-type: application/json' \
  -d "{\"sandboxId\": \"$sandbox\", \"cmd\": \"python3 -c \\\"print(6*7)\\\"\"}"
echo
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
wait $server
