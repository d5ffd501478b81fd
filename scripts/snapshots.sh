#!/usr/bin/env bash
# Writes the committed descriptions of the API again from the code, after a deliberate
# change: docs/openapi.json (the OpenAPI document served at /api/openapi.json) and
# docs/mcp-tools.json (the MCP tools, with their descriptions and input schemas). The
# test suite fails while either differs from what the server serves; review the diff
# (`git diff docs/`) before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."
SANDBOXD_UPDATE_SNAPSHOTS=1 cargo nextest run --workspace --no-fail-fast -E \
  'test(=tests::the_committed_document_is_the_one_served) | test(=mcp::tool_list_matches_the_snapshot)'
git status --short docs/openapi.json docs/mcp-tools.json
