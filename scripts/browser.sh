#!/usr/bin/env bash
# The browser of the dashboard's tests: Debian's headless Chromium and its chromedriver,
# installed when missing (as root, from Debian's packages).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "chromium and chromedriver are missing: install Debian's chromium and chromium-driver" >&2
  exit 1
fi
. "$(dirname "$0")/apt.sh"
apt_install chromium chromium-driver
command -v chromedriver >/dev/null
