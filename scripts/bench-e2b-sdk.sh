#!/usr/bin/env bash
# E2B's SDK through sandboxd's E2B API next to sandboxd's own Python SDK, same release
# server, same template, same run (scripts/bench_e2b_sdk.py): create → first output,
# `commands.run("true")` and `run_code("1 + 1")` in a Python context (E2B's code
# interpreter SDK), medians, and the ratio of E2B's to sandboxd's; then the same process
# both ways (E2B's SDK runs `bash -l -c true`, sandboxd's `sh -c true`); and how long a
# file made in the sandbox takes to reach a watcher of its directory. The two SDKs run
# in processes of their own (E2B's from target/e2b-venv), taking turns.
#   bash scripts/bench-e2b-sdk.sh [runs, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bash scripts/build-local-images.sh
venv=target/e2b-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check 'e2b==2.63.0' 'e2b-code-interpreter==2.11.5' 2>&1 | grep -v 'root' || true
python3 -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./sdk/python 2>&1 | grep -v 'root' || true
python3 -m pip install -q --disable-pip-version-check ./sdk/python 2>&1 | grep -v 'root' || true
export SANDBOXD_PROFILE=release
# Creates after each SDK's first are served by the pools kept for their shape's demand
# (on by default).
source scripts/lib/test-server.sh
export SANDBOXD_URL=$url SANDBOXD_KEY=$key
results=$(mktemp)
for _ in 1 2; do
  "$venv/bin/python" scripts/bench_e2b_sdk.py e2b "$runs" >>"$results"
  python3 scripts/bench_e2b_sdk.py sandboxd "$runs" >>"$results"
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def med(client, field):
    return statistics.median(r[field] for r in rows if r["client"] == client)
print(f"{'':28} {'E2B SDK':>10} {'sandboxd SDK':>13} {'ratio':>7}")
for field, label in [
    ("create_first_output_ms", "create → first output (ms)"),
    ("run_true_ms", 'commands.run("true") (ms)'),
    ("same_process_ms", "the same process (ms)"),
    ("run_code_ms", 'run_code("1 + 1") (ms)'),
    ("watch_event_ms", "a file event, p50 (ms)"),
]:
    e2b, own = med("e2b", field), med("sandboxd", field)
    print(f"{label:28} {e2b:10.1f} {own:13.1f} {e2b / own:7.2f}")
PY
rm -f "$results"
