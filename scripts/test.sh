#!/usr/bin/env bash
# The full test suite: unit tests, engine integration tests and end-to-end tests.
# Needs a running Docker engine; builds the local test images (scripts/build-local-images.sh)
# starts the second engine that stands for a remote server (scripts/remote-engine.sh) and a
# private PostgreSQL on loopback (scripts/postgres.sh), which the store's story and the
# replica tests run on, and installs the headless Chromium of the dashboard's tests
# (scripts/browser.sh).
# Then the Python clients: the MCP SDK, the sandboxd Python SDK, E2B's Python SDK, the
# fuzz pass.
# The second engine and the private PostgreSQL are stopped when the suite ends, passed or
# failed; SANDBOXD_TEST_KEEP=1 keeps them running for the next run (which then starts at
# once).
set -euo pipefail
cd "$(dirname "$0")/.."
docker info >/dev/null 2>&1 || { echo "the test suite needs a running Docker engine" >&2; exit 1; }
bash scripts/build-local-images.sh
if [ "${SANDBOXD_TEST_KEEP:-0}" != 1 ]; then
  trap 'bash scripts/postgres.sh stop >/dev/null 2>&1 || true; bash scripts/remote-engine.sh down >/dev/null 2>&1 || true' EXIT
fi
bash scripts/remote-engine.sh up >/dev/null
eval "$(bash scripts/postgres.sh start)"
bash scripts/browser.sh
# The agent is built into sandboxd by the ordinary build; the tests use that one.
unset SANDBOXD_AGENT_BINARY
cargo nextest run --workspace --no-fail-fast "$@"
bash scripts/test-mcp-python.sh
bash scripts/test-sdk-python.sh
bash scripts/test-e2b-python.sh
bash scripts/fuzz-api.sh
