#!/usr/bin/env bash
# Runs E2B's own Python SDK test suite and, when given, e2b-code-interpreter's, against
# a live sandboxd set up as E2B's users set it up (E2B_DOMAIN, behind TLS, and a key
# sandboxd made in E2B's form as E2B_API_KEY), and reports passed /
# failed / skipped per directory, then the share that passed of the tests that do not
# need E2B's cloud (scripts/lib/e2b-suite-notes.txt names those, with why). It fails
# when E2B's share is under 95% or the interpreter's under 90%.
#
#   bash scripts/test-e2b-suite.sh E2B_DIR [CODE_INTERPRETER_DIR]
#
# E2B_DIR is a checkout of e2b-dev/E2B (its packages/python-sdk), CODE_INTERPRETER_DIR
# one of e2b-dev/code-interpreter, both made outside this repository: nothing of them is
# kept here, and nothing is fetched at test time but the packages below from PyPI. The
# SDKs installed are the versions the checkouts name (their pyproject.toml), so the tests
# and the SDK they test agree. Settings:
#   E2B_SUITE_TESTS="tests/sync/..."  only these of E2B's tests (default: sync, async and
#                                     shared, whole); E2B_SUITE_CI_TESTS likewise for the
#                                     interpreter's (default: tests)
#   E2B_SUITE_DOMAIN=0                the SDK is given E2B_API_URL and E2B_SANDBOX_URL;
#                                     by default it is given only E2B_DOMAIN, as a
#                                     deployment of sandboxd for E2B's SDKs is set up, and
#                                     reaches the server over TLS through a proxy on
#                                     loopback (scripts/lib/e2b-domain.sh)
#   E2B_SUITE_WORKERS=N               pytest-xdist workers (default 4)
#   SANDBOXD_PROFILE=release          a release build of the server (default debug)
# Each suite's pytest log and JUnit XML are kept in target/e2b-suite-report/.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 E2B_DIR [CODE_INTERPRETER_DIR]" >&2; exit 2; }
e2b_dir=$(cd "$1" && pwd)
[ -d "$e2b_dir/packages/python-sdk" ] && e2b_dir=$e2b_dir/packages/python-sdk
[ -f "$e2b_dir/pyproject.toml" ] && [ -d "$e2b_dir/tests" ] ||
  { echo "$1: not a checkout of e2b-dev/E2B (no packages/python-sdk/tests)" >&2; exit 2; }
ci_dir=
if [ $# -ge 2 ]; then
  ci_dir=$(cd "$2" && pwd)
  [ -d "$ci_dir/python" ] && ci_dir=$ci_dir/python
  [ -d "$ci_dir/tests" ] || { echo "$2: not a checkout of e2b-dev/code-interpreter" >&2; exit 2; }
fi
cd "$(dirname "$0")/.."
repo=$(pwd)

version_of() { sed -n 's/^version = "\(.*\)"/\1/p' "$1/pyproject.toml" | head -n 1; }
packages=("e2b==$(version_of "$e2b_dir")")
[ -z "$ci_dir" ] || packages+=("e2b-code-interpreter==$(version_of "$ci_dir")")
venv=$repo/target/e2b-suite-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}" \
  'pytest>=8' pytest-timeout pytest-asyncio pytest-xdist python-dotenv 2>&1 | grep -v 'root' || true
commit_of() { git -C "$1" rev-parse --short HEAD 2>/dev/null || echo unknown; }
echo "SDKs: ${packages[*]}; E2B's tests at $(commit_of "$e2b_dir")"
[ -z "$ci_dir" ] || echo "the interpreter's tests at $(commit_of "$ci_dir")"

# Room for the suite's sandboxes at once.
export SANDBOXD_QUOTAS__RUNNING_SANDBOXES=${SANDBOXD_QUOTAS__RUNNING_SANDBOXES:-100}
export SANDBOXD_QUOTAS__CPU=${SANDBOXD_QUOTAS__CPU:-200}
export SANDBOXD_QUOTAS__MEMORY_MB=${SANDBOXD_QUOTAS__MEMORY_MB:-204800}
# And for the template tests' builds at once (each from the base, a step or two).
export SANDBOXD_BUILDS__PER_ORGANIZATION=${SANDBOXD_BUILDS__PER_ORGANIZATION:-8}
export SANDBOXD_BUILDS__AT_ONCE=${SANDBOXD_BUILDS__AT_ONCE:-8}
if [ "${E2B_SUITE_DOMAIN:-1}" != 0 ]; then
  source scripts/lib/e2b-domain.sh
fi
source scripts/lib/test-server.sh
owner_key=$key
key=$(curl -fs -X POST "$url/api/apiKey.create" -H "x-api-key: $owner_key" \
  -H 'content-type: application/json' -d '{"name": "e2b-suite", "format": "e2b"}' |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')
if [ "${E2B_SUITE_DOMAIN:-1}" != 0 ]; then
  e2b_domain_proxy
  settings=("${e2b_domain_env[@]}")
else
  settings=(E2B_API_URL="$url/e2b" E2B_SANDBOX_URL="$url/e2b/envd" E2B_API_KEY="$key")
fi
# Each suite's log and JUnit XML stay under target/ to be read after the run.
report=$repo/target/e2b-suite-report
rm -rf "$report" && mkdir -p "$report"

suite() { # NAME DIR TESTS...
  local name=$1 dir=$2
  shift 2
  local started=$SECONDS
  (
    cd "$dir"
    env -u E2B_API_URL -u E2B_SANDBOX_URL -u E2B_DOMAIN "${settings[@]}" \
      "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE -n "${E2B_SUITE_WORKERS:-4}" \
      --timeout 300 --junitxml="$report/$name.xml" "$@" >"$report/$name.log" 2>&1
  ) || true
  tail -n 60 "$report/$name.log" | grep -E '^(FAILED|ERROR)' || true
  echo "$name: $((SECONDS - started)) s"
}
read -r -a e2b_tests <<<"${E2B_SUITE_TESTS:-tests/sync tests/async tests/shared}"
suite e2b "$e2b_dir" "${e2b_tests[@]}"
if [ -n "$ci_dir" ]; then
  read -r -a ci_tests <<<"${E2B_SUITE_CI_TESTS:-tests}"
  E2B_TESTS_TEMPLATE=code-interpreter-v1 suite interpreter "$ci_dir" -o addopts=--import-mode=importlib "${ci_tests[@]}"
fi

"$venv/bin/python" scripts/lib/e2b_suite_report.py scripts/lib/e2b-suite-notes.txt \
  "$report/e2b.xml" ${ci_dir:+"$report/interpreter.xml"}
