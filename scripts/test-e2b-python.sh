#!/usr/bin/env bash
# E2B's own Python SDK (`e2b` from PyPI, in a virtual environment of its own under
# target/, so that its dependencies never meet the other clients') against the real
# server's E2B control plane: runs tests/python/e2b_control_plane.py
# (scripts/lib/test-server.sh starts the server).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/e2b-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check 'e2b==2.63.0' 2>&1 | grep -v 'root' || true
source scripts/lib/test-server.sh
"$venv/bin/python" tests/python/e2b_control_plane.py "$url" "$key"
