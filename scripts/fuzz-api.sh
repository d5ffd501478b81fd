#!/usr/bin/env bash
# Fuzzes the REST API from its own OpenAPI document with schemathesis (PyPI) against the
# real server and engine: every operation, generated valid and invalid inputs. Real
# sandboxes, processes, contexts, keys and members are made first
# (tests/fuzz/fixtures.py) and most cases aim at them (tests/fuzz/hooks.py), so the pass
# reaches the code behind the ids; destructive operations aim only at objects made for
# them, with a key made for them. Prints, per operation, the cases and the 2xx answers
# (tests/fuzz/floor.py); fails on any 5xx, on any request that got no answer, or when an
# operation's share of 2xx answers is under the floor. Then aims at the boundaries the
# document does not describe (tests/fuzz/boundaries.py).
#   bash scripts/fuzz-api.sh [max examples per operation, default 100] [floor %, default 5]
# (fewer for the few operations tests/fuzz/schemathesis.toml names, whose every case
# costs seconds of the engine's work).
# FUZZ_KEEP_REPORT=dir keeps schemathesis' NDJSON report, its output and the server's log there.
set -euo pipefail
cd "$(dirname "$0")/.."
examples=${1:-100}
floor=${2:-5}
python3 -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt 2>&1 | grep -v 'root' || true
# Fuzzing sends thousands of requests with one key: no rate limit for this server.
export SANDBOXD_RATE_LIMIT_PER_SECOND=0
# Every snapshot is a commit on the engine: a bound on how many the fuzzer makes (forks
# take theirs from the same count).
export SANDBOXD_QUOTAS__SNAPSHOTS=150
# Room for the pass's template builds at once: beside the rest of the suite a build
# takes longer, and the cases past the bound would be refused (429) under the floor.
export SANDBOXD_BUILDS__PER_ORGANIZATION=8 SANDBOXD_BUILDS__AT_ONCE=8
# Previews on hosts of their own too, so that the odd hosts reach that routing.
export SANDBOXD_PREVIEW_DOMAIN=localhost
# The fixtures register servers on loopback.
export SANDBOXD_SERVERS__ALLOWED_NETWORKS='["127.0.0.0/8"]'
source scripts/lib/test-server.sh
report=$(mktemp -d)
python3 tests/fuzz/fixtures.py "$url" "$key" "$env_id" "$report/fixtures.json"
status=0
# One worker: with two threads, CPython 3.11.7 (this machine's) now and then fails an
# ast.parse that hypothesis makes while describing a strategy ("AST constructor
# recursion depth mismatch", python/cpython#106905), which schemathesis reports as a
# runtime error of the operation being generated.
SANDBOXD_FUZZ_FIXTURES="$report/fixtures.json" SANDBOXD_FUZZ_KEY="$key" \
  PYTHONPATH=tests/fuzz SCHEMATHESIS_HOOKS=hooks \
  schemathesis --config-file tests/fuzz/schemathesis.toml run "$url/api/openapi.json" \
  --checks not_a_server_error \
  --max-examples "$examples" \
  --phases examples,coverage,fuzzing \
  --seed 1 \
  --generation-deterministic \
  --workers 1 \
  --generation-with-security-parameters false \
  --request-timeout 30 \
  --continue-on-failure \
  --report ndjson --report-ndjson-path "$report/events.ndjson" \
  --no-color >"$report/out.txt" 2>&1 || status=$?
tail -n 25 "$report/out.txt"
python3 tests/fuzz/floor.py "$report/events.ndjson" "$floor" || status=1
# The boundaries the API document does not describe: egress widening with a key that
# may only ask, previews on a link's cookie from foreign origins, odd hosts, gzip bombs.
python3 tests/fuzz/boundaries.py "$url" "$key" "$report/fixtures.json" "$examples" || status=1
echo "fuzz-api: exit $status"
if [ "$status" != 0 ]; then
  # Requests that got no answer (connection errors, timeouts) are listed here in full.
  sed -n '/ERRORS/,/SUMMARY/p' "$report/out.txt" | head -n 80
  # The log holds what the fuzzer sent, binary bytes included: read it as text.
  grep -a -i -E "error|panick" "$data/server.log" | grep -a -v -E "reconcile skipped|server test failed|changed server could not" | tail -n 20 || true
fi
if [ -n "${FUZZ_KEEP_REPORT:-}" ]; then
  mkdir -p "$FUZZ_KEEP_REPORT"
  cp "$report/events.ndjson" "$report/out.txt" "$data/server.log" "$FUZZ_KEEP_REPORT/"
fi
rm -rf "$report"
# The images of the templates the pass built, and their build cache, by name (a step's
# image is the parent of the next one's: an id with children is not removed).
for repository in sandboxd-templates sandboxd-build-cache; do
  docker images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$repository:*" | xargs -r docker rmi >/dev/null 2>&1 || true
done
exit "$status"
