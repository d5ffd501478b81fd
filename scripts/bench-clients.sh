#!/usr/bin/env bash
# The Python clients side by side (scripts/bench_clients.py): the sandboxd SDK through a
# release build of the server, sandboxio's Docker backend and the Docker SDK for Python,
# same engine, same image, same run.
#   bash scripts/bench-clients.sh [runs, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-local-images.sh
python3 -m pip install -q --disable-pip-version-check './sdk/python[bench]' 2>&1 | grep -v 'root' || true
python3 -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./sdk/python 2>&1 | grep -v 'root' || true
export SANDBOXD_PROFILE=release
# Every client's creates are cold, as those made on the engine directly are: no pool is
# kept for their demand.
export SANDBOXD_WARM_ON_DEMAND__BUDGET=0
source scripts/lib/test-server.sh
bench_cleanup() {
  for label in sandboxd.bench=clients io.sandboxio.managed=true; do
    remove_containers "label=$label"
  done
  cleanup
}
trap bench_cleanup EXIT
SANDBOXD_URL=$url SANDBOXD_KEY=$key BENCH_INSTANCE=$instance python3 scripts/bench_clients.py "${1:-5}"
