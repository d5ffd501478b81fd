#!/usr/bin/env bash
# Builds the local images the quick start and the test suite use, without any registry:
#   sandboxd-local/busybox:latest  a static busybox root filesystem (no GNU tools, no libc)
#   sandboxd-local/debian:bookworm a minimal Debian made with debootstrap (GNU coreutils and
#                                  find, python3 (also as `python`) with its standard library, pip, curl,
#                                  git and node: what E2B's base image offers that code
#                                  written for it runs), user 1000
#                                  `user` with home /home/user, and /usr/local/bin/suid-id,
#                                  a setuid-root copy of `id` the security tests run to
#                                  show that setuid grants nothing in a sandbox
#   sandboxd-local/interpreter:bookworm the same Debian with what a notebook's code uses:
#                                  IPython, matplotlib, pandas, numpy and Pillow (the
#                                  code interpreter's rich results, its charts and data)
# Images that already exist in this version are kept; pass --force to rebuild them.
set -euo pipefail

# Bumped whenever what goes into the images changes, so stale images are rebuilt.
version=6
force=0
[ "${1:-}" = "--force" ] && force=1

have_image() {
  [ "$force" = 0 ] &&
    [ "$(docker image inspect --format '{{index .Config.Labels "sandboxd.local-image"}}' "$1" 2>/dev/null)" = "$version" ]
}

. "$(dirname "$0")/apt.sh"
ensure_pkg() {
  dpkg -s "$1" >/dev/null 2>&1 || apt_install "$1"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

write_accounts() {
  local root=$1
  mkdir -p "$root/etc"
  cat >"$root/etc/passwd" <<'P'
root:x:0:0:root:/root:/bin/sh
user:x:1000:1000:user:/home/user:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
P
  cat >"$root/etc/group" <<'G'
root:x:0:
user:x:1000:
nogroup:x:65534:
G
}

if ! have_image sandboxd-local/busybox:latest; then
  ensure_pkg busybox-static
  root="$work/busybox"
  mkdir -p "$root/bin" "$root/tmp" "$root/home/user" "$root/root" "$root/proc" "$root/sys" "$root/dev"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done
  write_accounts "$root"
  chmod 1777 "$root/tmp"
  chown 1000:1000 "$root/home/user"
  tar -C "$root" -c . | docker import \
    --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' \
    --change "LABEL sandboxd.local-image=$version" \
    - sandboxd-local/busybox:latest >/dev/null
  echo "built sandboxd-local/busybox:latest"
fi

# A Debian root filesystem with `packages` (comma-separated) as an image named `name`.
debian_image() {
  local name=$1 packages=$2 root="$work/$(basename "${1%%:*}")"
  ensure_pkg debootstrap
  debootstrap --variant=minbase --include="$packages" bookworm "$root" http://deb.debian.org/debian >"$root.log" 2>&1 \
    || { tail -n 30 "$root.log"; exit 1; }
  rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
  chroot "$root" /usr/sbin/groupadd -g 1000 user
  chroot "$root" /usr/sbin/useradd -u 1000 -g 1000 -m -d /home/user -s /bin/sh user
  install -m 4755 -o root -g root "$root/usr/bin/id" "$root/usr/local/bin/suid-id"
  tar -C "$root" -c . | docker import \
    --change 'CMD ["/bin/bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "LABEL sandboxd.local-image=$version" \
    - "$name" >/dev/null
  rm -rf "$root"
  echo "built $name"
}

base_packages=python3,python-is-python3,python3-pip,curl,git,nodejs
have_image sandboxd-local/debian:bookworm || debian_image sandboxd-local/debian:bookworm "$base_packages" &
have_image sandboxd-local/interpreter:bookworm || debian_image sandboxd-local/interpreter:bookworm \
  "$base_packages,python3-ipython,python3-matplotlib,python3-matplotlib-inline,python3-pandas,python3-numpy,python3-pil" &
for made in $(jobs -p); do wait "$made"; done
