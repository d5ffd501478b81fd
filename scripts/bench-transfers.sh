#!/usr/bin/env bash
# Streamed transfers against `docker cp` on the same engine, same run: a 1 GiB file up
# into a sandbox and down out of it through a release build of `sandboxd cp` (and so
# through the server), then through `docker cp` straight to the engine; the server's
# resident memory before and its peak after. Prints seconds, MiB/s and ratios. The
# server's transfers go through the sandbox's agent; with SANDBOXD_AGENT=false they go
# through the engine's archive API.
#   bash scripts/bench-transfers.sh [size in MiB, default 1024] [runs, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
runs=${2:-3}
export SANDBOXD_PROFILE=release
source scripts/lib/test-server.sh
work=$(mktemp -d)
trap 'rm -rf "$work"; cleanup' EXIT
export SANDBOXD_URL=$url SANDBOXD_KEY=$key
head -c $((size_mib * 1024 * 1024)) /dev/urandom >"$work/big.bin"
id=$("$bin" create --template base --timeout 1h)
container=$("$bin" show "$id" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["containerId"])')
kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$server/status"; }
rss_before=$(kib VmRSS)
peak_before=$(kib VmHWM)
seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null; end=$(date +%s.%N); echo "$end - $start" | bc -l; }
best() { sort -g | head -n 1; }
declare -A took
for run in $(seq 1 "$runs"); do
  took[sandboxd_up]+="$(seconds "$bin" cp "$work/big.bin" "$id:/home/user/up.bin")"$'\n'
  took[docker_up]+="$(seconds docker cp "$work/big.bin" "$container:/home/user/docker-up.bin")"$'\n'
  rm -f "$work/down.bin" "$work/docker-down.bin"
  took[sandboxd_down]+="$(seconds "$bin" cp "$id:/home/user/up.bin" "$work/down.bin")"$'\n'
  took[docker_down]+="$(seconds docker cp "$container:/home/user/up.bin" "$work/docker-down.bin")"$'\n'
done
cmp "$work/big.bin" "$work/down.bin"
cmp "$work/big.bin" "$work/docker-down.bin"
peak_after=$(kib VmHWM)
path=agent
[ "${SANDBOXD_AGENT:-true}" = false ] && path=engine
echo "transfer of ${size_mib} MiB through the $path, best of $runs runs"
for direction in up down; do
  s=$(printf '%s' "${took[sandboxd_$direction]}" | best)
  d=$(printf '%s' "${took[docker_$direction]}" | best)
  printf '%-5s sandboxd cp %6.2f s (%6.1f MiB/s)   docker cp %6.2f s (%6.1f MiB/s)   sandboxd/docker time %.2f\n' \
    "$direction" "$s" "$(echo "$size_mib / $s" | bc -l)" "$d" "$(echo "$size_mib / $d" | bc -l)" "$(echo "$s / $d" | bc -l)"
done
echo "server memory: RSS ${rss_before} KiB before, peak ${peak_before} KiB before, peak ${peak_after} KiB after"
