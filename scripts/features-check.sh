#!/usr/bin/env bash
# Fails when a dependency would be built with other features for the binary
# (`cargo build -p sandboxd`, the quick start) than for the tests (the workspace with its
# dev-dependencies): then both builds compile it, and all that depends on it, apart.
# crates/sandboxd-features turns such features on for the binary too.
set -euo pipefail
cd "$(dirname "$0")/.."
features() {
  cargo tree "$@" -f '{p} {f}' --prefix none | sed 's/ (\*)$//; s/ (proc-macro)//' | sort -u
}
binary=$(features -p sandboxd -e normal,build)
tests=$(features --workspace -e normal,build,dev)
# Packages in both, with their features: a line of the binary's not among the tests' is
# a package whose features differ.
differ=$(comm -23 <(echo "$binary") <(echo "$tests") | grep -v '(/' || true)
if [ -n "$differ" ]; then
  echo "the binary's build and the test build differ in these dependencies' features:" >&2
  echo "$differ" >&2
  echo "turn the tests' features on in crates/sandboxd-features/Cargo.toml" >&2
  exit 1
fi
