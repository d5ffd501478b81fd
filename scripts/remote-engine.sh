#!/usr/bin/env bash
# A second Docker engine on this machine that stands for a remote server, for the tests
# of remote servers: its own socket, data root, exec root, pidfile, config file and
# network namespace (so its bridge is its own and the host's docker0 is untouched), with
# the local test images loaded into it. The tests reach it only through OpenSSH: each
# test starts its own sshd (key authentication, loopback only) in a private mount
# namespace where this engine's socket is bound over /var/run/docker.sock, as on a real
# host. This script provides what they need: the engine, the keys, and sshd installed.
#
#   scripts/remote-engine.sh up          start it (idempotent); prints the directory
#   scripts/remote-engine.sh down        stop it and remove its containers and namespace
#   scripts/remote-engine.sh sshd PORT   start an sshd in front of it on 127.0.0.1:PORT
#                                        (the benchmark's; the tests start their own)
#   scripts/remote-engine.sh sshd-stop PORT  stop that sshd and its sessions
#
# Directory: $SANDBOXD_REMOTE_DIR, default /tmp/sandboxd-remote. It holds docker.sock,
# client_key (the key sandboxd logs in with), host_key (sshd's), authorized_keys.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${SANDBOXD_REMOTE_DIR:-/tmp/sandboxd-remote}
netns=sandboxd-remote
images=(sandboxd-local/busybox:latest sandboxd-local/debian:bookworm)

remote() { docker -H "unix://$dir/docker.sock" "$@"; }

. "$(dirname "$0")/apt.sh"
ensure_pkg() {
  if ! dpkg -s "$1" >/dev/null 2>&1; then
    # No service is started by the package: the tests start their own sshd.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    apt_install "$1"
    rm -f /usr/sbin/policy-rc.d
  fi
}

up() {
  ensure_pkg openssh-server
  mkdir -p "$dir" /run/sshd
  chmod 700 "$dir"
  [ -f "$dir/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
  [ -f "$dir/client_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/client_key"
  cp "$dir/client_key.pub" "$dir/authorized_keys"

  if ! remote info >/dev/null 2>&1; then
    ip netns list | grep -qw "$netns" || ip netns add "$netns"
    ip netns exec "$netns" ip link set lo up
    echo '{}' >"$dir/daemon.json"
    # `ip netns exec` remounts /sys, which dockerd cannot run under: nsenter only
    # enters the network namespace.
    nsenter --net="/var/run/netns/$netns" dockerd \
      --config-file "$dir/daemon.json" \
      --data-root "$dir/data" --exec-root "$dir/exec" \
      --pidfile "$dir/docker.pid" -H "unix://$dir/docker.sock" \
      >"$dir/dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do remote info >/dev/null 2>&1 && break; sleep 0.5; done
    remote info >/dev/null 2>&1 || {
      echo "the second engine did not start" >&2
      tail -n 30 "$dir/dockerd.log" >&2
      exit 1
    }
  fi
  # gVisor's runtime, registered with this engine as with the local one.
  bash scripts/gvisor.sh "$dir/daemon.json" "$dir/docker.pid" "unix://$dir/docker.sock" >/dev/null
  for image in "${images[@]}"; do
    local want have
    want=$(docker image inspect --format '{{.Id}}' "$image")
    have=$(remote image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    [ "$want" = "$have" ] || docker save "$image" | remote load -q >/dev/null
  done
  echo "$dir"
}

down() {
  if remote info >/dev/null 2>&1; then
    ids=$(remote ps -aq --filter label=sandboxd.sandbox=true)
    [ -z "$ids" ] || remote rm -f $ids >/dev/null
  fi
  [ -f "$dir/docker.pid" ] && kill "$(cat "$dir/docker.pid")" 2>/dev/null || true
  for _ in $(seq 1 40); do [ -S "$dir/docker.sock" ] && remote info >/dev/null 2>&1 || break; sleep 0.25; done
  ip netns list | grep -qw "$netns" && ip netns delete "$netns" || true
}

sshd_up() {
  local port=$1 conf="$dir/sshd-$1"
  mkdir -p "$conf"
  cat >"$conf/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowStreamLocalForwarding yes
StreamLocalBindUnlink yes
AllowTcpForwarding yes
X11Forwarding no
PidFile none
MaxSessions 100
MaxStartups 100
Subsystem sftp internal-sftp
CONF
  unshare -m --propagation private sh -c \
    "mount --bind '$dir/docker.sock' /var/run/docker.sock && exec /usr/sbin/sshd -D -e -f '$conf/sshd_config'" \
    >"$conf/sshd.log" 2>&1 &
  echo $! >"$conf/pid"
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "sshd did not listen on $port" >&2
  cat "$conf/sshd.log" >&2
  exit 1
}

sshd_down() {
  local pid_file="$dir/sshd-$1/pid"
  [ -f "$pid_file" ] || return 0
  local pid
  pid=$(cat "$pid_file")
  pkill -KILL -P "$pid" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$dir/sshd-$1"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  sshd) sshd_up "${2:?port}" ;;
  sshd-stop) sshd_down "${2:?port}" ;;
  *) echo "usage: $0 up|down|sshd PORT|sshd-stop PORT" >&2; exit 2 ;;
esac
