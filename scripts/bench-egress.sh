#!/usr/bin/env bash
# Egress through sandboxd's proxy against an `internet` sandbox (scripts/bench_egress.py):
# a release build of the server, a web server on a Docker network this script creates
# (at its gateway, an address of this host), named `far` for `allowlist` sandboxes
# through `[egress] hosts` and reached directly by an `internet` sandbox, same run.
#   bash scripts/bench-egress.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-local-images.sh
network=sandboxd-bench-egress
docker network rm "$network" >/dev/null 2>&1 || true
docker network create --subnet 10.213.7.0/24 --gateway 10.213.7.1 \
  --label sandboxd.bench=egress "$network" >/dev/null
trap 'docker network rm "$network" >/dev/null 2>&1 || true' EXIT
far=10.213.7.1
far_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("10.213.7.1", 0)); print(s.getsockname()[1])')
export SANDBOXD_PROFILE=release
export SANDBOXD_RATE_LIMIT_PER_SECOND=0
export SANDBOXD_EGRESS__HOSTS__FAR=$far
export SANDBOXD_EGRESS__ALLOWED_NETWORKS="[\"$far/32\"]"
source scripts/lib/test-server.sh
# test-server.sh set its own trap; remove the network after it.
trap 'cleanup; docker network rm "$network" >/dev/null 2>&1 || true' EXIT
SANDBOXD_URL=$url SANDBOXD_KEY=$key BENCH_SERVER_PID=$server FAR_ADDRESS=$far FAR_PORT=$far_port \
  python3 scripts/bench_egress.py
