#!/usr/bin/env bash
# The full test suite: unit tests, engine integration tests and end-to-end tests.
# Needs a running Docker engine; builds the local test images (scripts/build-local-images.sh)
# starts the second engine that stands for a remote server (scripts/remote-engine.sh) and a
# private PostgreSQL on loopback (scripts/postgres.sh), which the store's story and the
# replica tests run on, and installs the headless Chromium of the dashboard's tests
# (scripts/browser.sh), and gVisor's runtime, registered with the engine as `runsc`
# (scripts/gvisor.sh).
# Then the Python clients: the MCP SDK, the sandboxd Python SDK, E2B's Python SDK, the
# fuzz pass (SANDBOXD_FUZZ_EXAMPLES cases per operation, 60 unless set).
# The second engine and the private PostgreSQL are stopped when the suite ends, passed or
# failed; SANDBOXD_TEST_KEEP=1 keeps them running for the next run (which then starts at
# once).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start, so that the output shows where the suite's time goes.
step() { echo "=== $1 (at $((SECONDS / 60))m$((SECONDS % 60))s)"; }
docker info >/dev/null 2>&1 || { echo "the test suite needs a running Docker engine" >&2; exit 1; }
step "what the tests need"
bash scripts/build-local-images.sh
if [ "${SANDBOXD_TEST_KEEP:-0}" != 1 ]; then
  trap 'bash scripts/postgres.sh stop >/dev/null 2>&1 || true; bash scripts/remote-engine.sh down >/dev/null 2>&1 || true' EXIT
fi
bash scripts/remote-engine.sh up >/dev/null
eval "$(bash scripts/postgres.sh start)"
bash scripts/browser.sh
bash scripts/gvisor.sh
# The agent is built into sandboxd by the ordinary build; the tests use that one.
unset SANDBOXD_AGENT_BINARY
# Sandbox containers already on this engine (a server of the user's own): the suite must
# leave none besides them.
sandboxes() { docker ps -aq --no-trunc --filter label=sandboxd.sandbox=true | sort; }
before=$(sandboxes)
# Cgroup directories named by a container id (cgroup v1 and v2, cgroupfs and systemd
# drivers), each with its path.
cgroups() {
  { find /sys/fs/cgroup -maxdepth 3 -type d -regextype posix-extended \
    -regex '.*/(docker/|docker-)[0-9a-f]{64}(\.scope)?' 2>/dev/null || true; } | sort
}
cgroups_before=$(cgroups)
# Images prepared for sandboxes (sandboxd's own cache: an image with a sandbox's
# workdir made) that the suite makes are removed at its end.
prepared() { docker images -q --no-trunc sandboxd-prepared | sort -u; }
prepared_before=$(prepared)
step "the workspace's tests"
cargo nextest run --workspace --no-fail-fast "$@"
# The sandboxd Python SDK first, alone: sandboxio's contract tests it runs give a
# create one second, which a loaded machine can miss.
step "the sandboxd Python SDK"
bash scripts/test-sdk-python.sh
# The fuzz pass (one worker, most of its time waiting on the server) beside the rest:
# its output is printed once it ends, and its failure fails the suite.
step "the fuzz pass, beside the steps below"
fuzz_log=$(mktemp)
bash scripts/fuzz-api.sh "${SANDBOXD_FUZZ_EXAMPLES:-60}" >"$fuzz_log" 2>&1 &
fuzz=$!
failed=0
# The end-to-end core again with every sandbox under gVisor: create, exec, streaming,
# files, transfers, terminals, processes, contexts, kill, timeouts and the reaper, and
# what the agent carries: allowlist egress, previews and exposed ports. Two
# tests watch a sandbox's processes through the engine's `top`, which sees none of a
# gVisor sandbox's: they run under runc only. The workspace is named as above, so that the
# build above is used as it is (one package alone would build its dependencies again,
# with its own features).
step "the end-to-end core under gVisor"
SANDBOXD_TEST_RUNTIME=runsc cargo nextest run --workspace --no-fail-fast \
  -E 'binary_id(sandboxd-server::e2e) & (
        test(/^(exec|files|stream|terminal|processes|contexts|lifecycle|transfers|egress|egress_proxy|ports|preview|exposed_ports)::/)
        - test(stream::a_client_that_stops_reading_does_not_hold_the_sandboxs_other_operations)
        - test(stream::a_client_that_stops_reading_does_not_keep_its_command_past_the_timeout))' || failed=1
step "the clients against the committed API document"
# Every client's calls and models against the committed API document (no server).
python3 tests/surface/check_clients.py || failed=1
step "MCP's Python SDK"
bash scripts/test-mcp-python.sh || failed=1
step "E2B's Python SDKs"
bash scripts/test-e2b-python.sh || failed=1
step "the fuzz pass, waited for"
wait "$fuzz" || failed=1
cat "$fuzz_log"
rm -f "$fuzz_log"
[ "$failed" = 0 ] || { echo "a step above failed" >&2; exit 1; }
step "what is left"
# The images the suite prepared go.
made=$(comm -13 <(echo "$prepared_before") <(prepared))
if [ -n "$made" ]; then
  # A few at a time: each removal waits on the engine's disk.
  echo "$made" | xargs -n 4 -P 3 docker rmi -f >/dev/null
  echo "$(echo "$made" | wc -l) prepared images removed (at $((SECONDS / 60))m$((SECONDS % 60))s)"
fi
# Nothing of gVisor is left running: every gVisor sandbox the tests made was removed with
# its sentry and gofer (their processes are named `exe`; their command lines name runsc).
if left=$(pgrep -af 'runsc-(sandbox|gofer)'); then
  echo "gVisor processes left after the suite:" >&2
  echo "$left" >&2
  exit 1
fi
# Nor any sandbox container (warm pool members included), once the removals the last
# servers started have had their time.
for _ in $(seq 30); do
  left=$(comm -13 <(echo "$before") <(sandboxes))
  [ -z "$left" ] && break
  sleep 1
done
if [ -n "$left" ]; then
  echo "sandbox containers left after the suite:" >&2
  for id in $left; do
    docker inspect -f '{{.Name}} {{.State.Status}} instance={{index .Config.Labels "sandboxd.instance"}} pool={{index .Config.Labels "sandboxd.pool"}}' "$id" >&2 || true
  done
  exit 1
fi
# Nor the cgroup directories of a container that is gone (runsc leaves them after a
# failed start; sandboxd removes them).
containers=$(docker ps -aq --no-trunc)
for _ in $(seq 30); do
  left=$(comm -13 <(echo "$cgroups_before") <(cgroups) | grep -v -F "${containers:-no container}" || true)
  [ -z "$left" ] && break
  sleep 1
done
if [ -n "$left" ]; then
  echo "cgroup directories of removed containers left after the suite:" >&2
  echo "$left" >&2
  exit 1
fi
