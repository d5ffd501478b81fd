#!/usr/bin/env bash
# Installs gVisor's runtime, `runsc`, from Debian bookworm-backports (its systrap
# platform; bookworm's own runsc has only ptrace and KVM), and registers it with a
# Docker engine as `runsc` with the arguments sandboxd's sandboxes need:
#   --host-uds=open   the agent inside connects to its socket on the host, bind-mounted in
#   --overlay2=none   files written in the root filesystem are the container's own, so
#                     that `docker commit` (snapshots) keeps them
# GVISOR_PLATFORM=ptrace registers it on gVisor's ptrace platform instead of systrap:
# an idle sandbox then costs almost no CPU (systrap keeps about 3 % of a CPU busy per
# idle sandbox here), but every system call costs about 18 times as much
# (docs/performance.md). For hosts of many idle sandboxes whose code makes few calls.
# The engine is then told to reload its configuration (SIGHUP: runtimes are reloaded
# without a restart, and running containers are left alone), and the script checks
# that it offers `runsc`.
# On the local engine it also turns on the engine's experimental setting, which its
# checkpoint API needs (sandboxes hibernated to disk, `sandbox.pause {memory: "disk"}`),
# and registers runsc through scripts/runsc-in-place.sh, which keeps a checkpoint's
# pages where the runtime wrote them.
# That setting is read only at the engine's start: the first time, the script restarts
# the engine (running containers stop; their sandboxes start again when next used).
#   bash scripts/gvisor.sh                          the local engine (/etc/docker/daemon.json)
#   bash scripts/gvisor.sh CONFIG PIDFILE [HOST]    another engine: its daemon.json, the
#                                                   pid file of its dockerd, its DOCKER_HOST
#                                                   (runsc only)
set -euo pipefail
config=${1:-/etc/docker/daemon.json}
pidfile=${2:-/var/run/docker.pid}
host=${3:-}

if ! runsc --version 2>/dev/null | grep -q '^runsc version 0.0~2024'; then
  if ! grep -rqs '^deb .* bookworm-backports ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" \
      >/etc/apt/sources.list.d/bookworm-backports.list
  fi
  . "$(dirname "$0")/apt.sh"
  apt_install -t bookworm-backports runsc
fi

mkdir -p "$(dirname "$config")"
[ -s "$config" ] || echo '{}' >"$config"
platform=${GVISOR_PLATFORM:-systrap}
case $platform in
  systrap | ptrace) ;;
  *) echo "GVISOR_PLATFORM must be systrap or ptrace, not $platform" >&2; exit 2 ;;
esac
experimental=$([ -z "$host" ] && echo 1 || echo 0)
runtime=$(command -v runsc)
if [ "$experimental" = 1 ]; then
  # The local engine runs runsc through scripts/runsc-in-place.sh: a checkpoint's pages
  # are written and read where they lie, not carried through the engine's content store
  # (docs/performance.md#hibernation).
  runtime=/usr/local/libexec/sandboxd/runsc
  data_root=$(docker info --format '{{.DockerRootDir}}')
  case $data_root in
    *"'"* | *"|"* | *"&"* | *"\\"*) echo "the engine's data root has a character the runtime's wrapper cannot take: $data_root" >&2; exit 1 ;;
  esac
  mkdir -p "$(dirname "$runtime")"
  sed -e "s|@RUNSC@|$(command -v runsc)|" -e "s|@DATA_ROOT@|$data_root|" \
    "$(dirname "$0")/runsc-in-place.sh" >"$runtime.new"
  chmod 755 "$runtime.new"
  mv "$runtime.new" "$runtime"
fi
changed=$(python3 - "$config" "$runtime" "$platform" "$experimental" <<'PY'
import json, sys
path, runsc, platform, experimental = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
with open(path) as f:
    config = json.load(f)
args = ["--network=none", "--host-uds=open", "--overlay2=none"]
if platform != "systrap":
    args.append(f"--platform={platform}")
wanted = {"path": runsc, "runtimeArgs": args}
changed = False
if config.get("runtimes", {}).get("runsc") != wanted:
    config.setdefault("runtimes", {})["runsc"] = wanted
    changed = True
if experimental == "1" and config.get("experimental") is not True:
    config["experimental"] = True
    changed = True
if changed:
    with open(path + ".new", "w") as f:
        json.dump(config, f, indent=2)
    import os
    os.replace(path + ".new", path)
    print("changed")
PY
)

# Restarts the local engine with the command line it was started with (or through
# systemd when it runs the engine), and waits for it to answer.
restart_local_engine() {
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker 2>/dev/null; then
    systemctl restart docker
  else
    local pid args
    pid=$(cat "$pidfile" 2>/dev/null || pgrep -xo dockerd)
    mapfile -d '' args <"/proc/$pid/cmdline"
    kill "$pid"
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    (setsid "${args[@]}" >>/tmp/dockerd.log 2>&1 &)
  fi
  for _ in $(seq 150); do docker info >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "the engine did not come back after its restart (log: /tmp/dockerd.log)" >&2
  exit 1
}

docker_at() { if [ -n "$host" ]; then DOCKER_HOST=$host docker "$@"; else docker "$@"; fi; }
if [ -n "$changed" ] || ! docker_at info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
  pid=$(cat "$pidfile" 2>/dev/null || pgrep -xo dockerd)
  kill -HUP "$pid"
  for _ in $(seq 50); do
    docker_at info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"' && break
    sleep 0.1
  done
fi
if [ "$experimental" = 1 ] && [ "$(docker info --format '{{.ExperimentalBuild}}')" != true ]; then
  echo "restarting the engine to turn on its experimental setting (checkpoints)" >&2
  restart_local_engine
  if [ "$(docker info --format '{{.ExperimentalBuild}}')" != true ]; then
    echo "the engine still has its experimental setting off after its restart (log: /tmp/dockerd.log)" >&2
    exit 1
  fi
fi
docker_at info --format '{{json .Runtimes}}' | grep -q '"runsc"' || {
  echo "the engine does not offer runsc after reloading $config" >&2
  exit 1
}
echo "runsc $(runsc --version | head -1 | cut -d' ' -f3) registered with the engine ($platform platform)"
