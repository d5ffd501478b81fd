#!/usr/bin/env bash
# The MCP end-to-end test with an independent client, the official Python SDK: runs
# tests/python/mcp_client.py against the real server (scripts/lib/test-server.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt 2>&1 | grep -v 'root' || true
source scripts/lib/test-server.sh
python3 tests/python/mcp_client.py "$url/mcp" "$key" "$env_id"
