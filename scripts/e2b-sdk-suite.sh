#!/usr/bin/env bash
# Runs E2B's own Python SDK tests against a live sandboxd, set up as E2B's users set
# it up (E2B_API_URL at /e2b, E2B_SANDBOX_URL at /e2b/envd, a sandboxd key as
# E2B_API_KEY), and reports passed / failed / skipped per directory. With
# E2B_SUITE_DOMAIN=1 the SDK is given E2B_DOMAIN instead, and reaches the server over
# TLS through a proxy on loopback (scripts/lib/e2b-domain.sh).
#
#   [E2B_SUITE_DOMAIN=1] bash scripts/e2b-sdk-suite.sh PYTHON_SDK_DIR [PYTEST_ARGS...]
#
# PYTHON_SDK_DIR is E2B's packages/python-sdk (from a checkout of e2b-dev/E2B made
# outside this repository: nothing of it is kept here, and nothing is fetched at test
# time), or the `python` directory of e2b-dev/code-interpreter (then give
# E2B_TESTS_TEMPLATE=base and PYTEST_ARGS such as `-o addopts= tests/sync`). Without PYTEST_ARGS it runs the sandbox tests, sync and async: commands, files,
# pty, and the lifecycle tests. The `e2b` package and pytest come from PyPI into
# target/e2b-venv (as scripts/test-e2b-python.sh does); the server is a debug build
# (SANDBOXD_PROFILE=release for a release one) with its own data dir, removed after.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PYTHON_SDK_DIR [PYTEST_ARGS...]" >&2; exit 2; }
sdk=$(cd "$1" && pwd)
shift
cd "$(dirname "$0")/.."
repo=$(pwd)
venv=$repo/target/e2b-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  'e2b==2.63.0' 'e2b-code-interpreter==2.11.5' 'pytest>=8' pytest-timeout pytest-asyncio 2>&1 | grep -v 'root' || true
if [ -n "${E2B_SUITE_DOMAIN:-}" ]; then
  source scripts/lib/e2b-domain.sh
  source scripts/lib/test-server.sh
  e2b_domain_proxy
  settings=("${e2b_domain_env[@]}")
else
  source scripts/lib/test-server.sh
  settings=(E2B_API_URL="$url/e2b" E2B_SANDBOX_URL="$url/e2b/envd" E2B_API_KEY="$key")
fi
report=$(mktemp -d)
args=("$@")
if [ ${#args[@]} = 0 ]; then
  args=(tests/sync/sandbox_sync tests/async/sandbox_async)
fi
status=0
(
  cd "$sdk"
  env -u E2B_API_URL -u E2B_SANDBOX_URL "${settings[@]}" \
    "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE \
    --junitxml="$report/junit.xml" "${args[@]}"
) || status=$?
"$venv/bin/python" - "$report/junit.xml" <<'PY'
import collections, sys, xml.etree.ElementTree as ET
counts = collections.defaultdict(collections.Counter)
for case in ET.parse(sys.argv[1]).iter("testcase"):
    parts = case.get("classname", "").split(".")
    where = "/".join(p for p in parts[:-1] if p not in ("tests",)) or "?"
    kind = "passed"
    for child in case:
        if child.tag in ("failure", "error"):
            kind = "failed"
        elif child.tag == "skipped":
            kind = "skipped"
    counts[where][kind] += 1
print(f"\n{'directory':50} passed failed skipped")
total = collections.Counter()
for where in sorted(counts):
    c = counts[where]
    total.update(c)
    print(f"{where:50} {c['passed']:6} {c['failed']:6} {c['skipped']:7}")
print(f"{'total':50} {total['passed']:6} {total['failed']:6} {total['skipped']:7}")
PY
rm -rf "$report"
exit $status
