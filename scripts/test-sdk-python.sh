#!/usr/bin/env bash
# The Python SDK's tests (sdk/python/tests) against the real binary and engine: installs
# the SDK with its test extras, builds the debug binary, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check './sdk/python[test]' 2>&1 | grep -v 'root' || true
# pip keeps an installed copy of the same version: the tests run this checkout's.
python3 -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./sdk/python 2>&1 | grep -v 'root' || true
cargo build -q -p sandboxd
python3 -m pytest -q -p no:cacheprovider sdk/python/tests
