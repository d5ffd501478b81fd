#!/usr/bin/env bash
# Builds the in-sandbox agent as a static binary (glibc linked statically), so it runs in
# any image, with or without libc. Prints the path of the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(rustc -vV | sed -n 's/^host: //p')
# The allocator reserves no arena ahead, as in the agent sandboxd embeds
# (crates/sandboxd-agent-embed/build.rs): about 170 KiB less per agent process.
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --quiet -p sandboxd-agent \
  --target "$target" --target-dir target/agent
binary="target/agent/$target/release/sandboxd-agent"
if ldd "$binary" 2>&1 | grep -q '=>'; then
  echo "$binary is not static" >&2
  exit 1
fi
echo "$PWD/$binary"
