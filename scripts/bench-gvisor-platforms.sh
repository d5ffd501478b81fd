#!/usr/bin/env bash
# gVisor's systrap and ptrace platforms beside runc on the local engine: what an idle
# container costs in CPU, and what system calls and program starts cost inside one
# (scripts/bench_gvisor_platforms.py). Installs and registers runsc first.
#   bash scripts/bench-gvisor-platforms.sh [idle containers per runtime, default 10] [seconds, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-local-images.sh >/dev/null
bash scripts/gvisor.sh
python3 scripts/bench_gvisor_platforms.py "${1:-10}" "${2:-20}"
