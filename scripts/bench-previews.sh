#!/usr/bin/env bash
# Previews against the direct path (scripts/bench_previews.py): a release build of the
# server, one `internet` sandbox running the preview tests' app, reached through the
# preview and at its address on the engine's bridge, same run.
# Then the same app downloaded through two plain relays with the preview's hops
# (scripts/bench_relay_ceiling.py): what copying through those hops reaches at most.
#   bash scripts/bench-previews.sh [small GETs per side, default 500]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-local-images.sh
python3 -m pip install -q --disable-pip-version-check './sdk/python' 2>&1 | grep -v 'root' || true
export SANDBOXD_PROFILE=release
# One key drives the benchmark hard: no per-user rate limit.
export SANDBOXD_RATE_LIMIT_PER_SECOND=0
source scripts/lib/test-server.sh
SANDBOXD_URL=$url SANDBOXD_KEY=$key BENCH_SERVER_PID=$server python3 scripts/bench_previews.py "${1:-500}"
# The ceiling of any carriage through the preview's hops on this machine, same run: two
# plain relays (in the container, on the host) against the same direct path.
python3 scripts/bench_relay_ceiling.py
