#!/usr/bin/env bash
# E2B's own Python SDK (`e2b` from PyPI, in a virtual environment of its own under
# target/, so that its dependencies never meet the other clients') against the real
# server (scripts/lib/test-server.sh starts it): the control plane
# (tests/python/e2b_control_plane.py, with a key made in E2B's form), the in-sandbox daemon
# (tests/python/e2b_in_sandbox.py), E2B's code interpreter SDK
# (tests/python/e2b_interpreter.py), E2B's template builder
# (tests/python/e2b_templates.py), the README's E2B example as written (its URL
# and key those of the test server, its `pip install` the pinned one below), and the
# SDK given only `E2B_DOMAIN` (tests/python/e2b_domain.py), over TLS through a proxy
# on loopback (tests/python/tls_proxy.py) as an operator's proxy would be.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/e2b-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check 'e2b==2.63.0' 'e2b-code-interpreter==2.11.5' 2>&1 | grep -v 'root' || true
source scripts/lib/e2b-domain.sh
source scripts/lib/test-server.sh
e2b_domain_proxy
# A key in E2B's form, as E2B's SDKs check keys: the control plane's calls go with it.
e2b_key=$(curl -fs -X POST "$url/api/apiKey.create" -H "x-api-key: $key" \
  -H 'content-type: application/json' -d '{"name": "e2b-sdk", "format": "e2b"}' |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["secret"])')
"$venv/bin/python" tests/python/e2b_control_plane.py "$url" "$e2b_key"
"$venv/bin/python" tests/python/e2b_in_sandbox.py "$url" "$key"
"$venv/bin/python" tests/python/e2b_interpreter.py "$url" "$key"
"$venv/bin/python" tests/python/e2b_templates.py "$url" "$key"

# The README's example: the bash block after the e2b-example marker.
example=$(awk '/<!-- e2b-example/ {found=1; next} found && /^```bash/ {inside=1; next}
               inside && /^```/ {exit} inside {print}' README.md)
[ -n "$example" ] || { echo "the README's E2B example is missing" >&2; exit 1; }
example=$(printf '%s\n' "$example" | grep -v '^pip install e2b$' |
  sed -e "s#http://127.0.0.1:3000#$url#g" -e "s#\$(cat sandboxd-data/owner.key)#$key#" \
      -e "s#^python3 #$venv/bin/python #")
out=$(bash -c "$example")
expected=$'hello from Linux\nkept'
if [ "$out" != "$expected" ]; then
  echo "the README's E2B example printed:" >&2
  printf '%s\n' "$out" >&2
  exit 1
fi
echo "the README's E2B example: ok"

env -u E2B_API_URL -u E2B_SANDBOX_URL "${e2b_domain_env[@]}" \
  "$venv/bin/python" tests/python/e2b_domain.py
