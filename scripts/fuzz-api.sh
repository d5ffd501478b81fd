#!/usr/bin/env bash
# Fuzzes the REST API from its own OpenAPI document with schemathesis (PyPI) against the
# real server and engine: every operation, generated valid and invalid inputs, with the
# owner's key. Fails on any 5xx response and prints how many cases ran.
#   bash scripts/fuzz-api.sh [max examples per operation, default 100]
set -euo pipefail
cd "$(dirname "$0")/.."
examples=${1:-100}
python3 -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt 2>&1 | grep -v 'root' || true
# Fuzzing sends thousands of requests with one key: no rate limit for this server.
export SANDBOXD_RATE_LIMIT_PER_SECOND=0
source scripts/lib/test-server.sh
report=$(mktemp -d)
status=0
schemathesis run "$url/api/openapi.json" \
  --header "x-api-key: $key" \
  --checks not_a_server_error \
  --max-examples "$examples" \
  --phases examples,coverage,fuzzing \
  --seed 1 \
  --generation-deterministic \
  --workers 2 \
  --generation-with-security-parameters false \
  --request-timeout 30 \
  --continue-on-failure \
  --report ndjson --report-ndjson-path "$report/events.ndjson" \
  --no-color >"$report/out.txt" 2>&1 || status=$?
tail -n 25 "$report/out.txt"
cases=$(python3 - "$report/events.ndjson" <<'PY'
import json, sys
count = 0
for line in open(sys.argv[1]):
    event = json.loads(line)
    for name, body in event.items():
        if name == "ScenarioFinished":
            count += len(body.get("recorder", {}).get("cases", {}))
print(count)
PY
)
echo "fuzz-api: $cases cases, exit $status"
if [ "$status" != 0 ]; then
  grep -i -E "error|panick" "$data/server.log" | tail -n 20 || true
fi
rm -rf "$report"
exit "$status"
