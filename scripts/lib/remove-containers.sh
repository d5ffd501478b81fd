# Sourced: `remove_containers FILTER...` force-removes every container the engine
# (DOCKER_HOST, or the local one) lists for all of the `docker ps` filters (for example
# label=sandboxd.instance=ID), with their anonymous volumes. The tests' harnesses of the
# real binary and of the end-to-end suite remove what their servers left with it.
#
# The engine gives up on a container whose processes are not gone 10 s after its
# SIGKILL: its init, the last of its pid namespace to go, stays a zombie while another
# of its processes is stuck in the kernel (a request to the fuse-overlayfs storage
# driver under load, for one). Such a container is described once (its processes, their
# states and kernel stacks) and tried again, for up to two minutes, before this fails.
# The engine then removes the container but not its cgroup directories (they still held
# the zombie when it tried): what is left of them goes too, as sandboxd's own removal
# does.
remove_containers() {
  local filters=() filter ids id tries=0 described=no removed=""
  # No filter would name every container of the engine.
  [ $# -gt 0 ] || { echo "remove_containers: no filter given" >&2; return 2; }
  for filter in "$@"; do filters+=(--filter "$filter"); done
  while ids=$(docker ps -aq --no-trunc "${filters[@]}") && [ -n "$ids" ]; do
    removed="$removed $ids"
    # shellcheck disable=SC2086
    docker rm -fv $ids >/dev/null 2>"${TMPDIR:-/tmp}/remove-containers.$$" && continue
    cat "${TMPDIR:-/tmp}/remove-containers.$$" >&2
    if [ "$described" = no ]; then
      described=yes
      for id in $(docker ps -aq --no-trunc "${filters[@]}"); do
        describe_container "$id" >&2
      done
    fi
    tries=$((tries + 1))
    if [ "$tries" -ge 12 ]; then
      rm -f "${TMPDIR:-/tmp}/remove-containers.$$"
      echo "containers left after two minutes: $ids" >&2
      return 1
    fi
    sleep 10
  done
  rm -f "${TMPDIR:-/tmp}/remove-containers.$$"
  # shellcheck disable=SC2086
  remove_cgroups $removed
}

# Removes the cgroup directories (cgroup v1 and v2, cgroupfs and systemd drivers) left of
# the removed containers IDS: `rmdir` takes an empty cgroup only, so one still in use
# is tried again, for up to 20 s, and then named.
remove_cgroups() {
  local id dirs tries
  for id in $(printf '%s\n' "$@" | sort -u); do
    [[ $id =~ ^[0-9a-f]{64}$ ]] || continue
    # Still there (the engine stopped answering before it was removed): not ours to touch.
    docker inspect "$id" >/dev/null 2>&1 && continue
    for tries in $(seq 40); do
      dirs=$(cgroups_of "$id")
      [ -z "$dirs" ] && break
      # shellcheck disable=SC2086
      rmdir $dirs 2>/dev/null || true
      dirs=$(cgroups_of "$id")
      [ -z "$dirs" ] && break
      sleep 0.5
    done
    [ -z "$dirs" ] || echo "cgroup directories of removed container $id still in use: $dirs" >&2
  done
}

cgroups_of() {
  find /sys/fs/cgroup -maxdepth 3 -type d \( -name "$1" -o -name "docker-$1.scope" \) 2>/dev/null || true
}

# What a container that will not go is doing: its state, and every process in its
# cgroup with each thread's state, wait channel and kernel stack.
describe_container() {
  local id=$1 dir pid task
  docker inspect -f '{{.Id}}: {{.State.Status}} paused={{.State.Paused}} pid={{.State.Pid}}' "$id" || return 0
  dir=$(find /sys/fs/cgroup/freezer /sys/fs/cgroup -maxdepth 4 -type d -name "*$id*" 2>/dev/null | head -n 1 || true)
  [ -n "$dir" ] || return 0
  echo "cgroup $dir"
  [ -f "$dir/freezer.state" ] && echo "freezer: $(cat "$dir/freezer.state")"
  for pid in $(cat "$dir/cgroup.procs" 2>/dev/null); do
    for task in /proc/"$pid"/task/*; do
      echo "  $(cut -d' ' -f1-3 "$task/stat" 2>/dev/null) wchan=$(cat "$task/wchan" 2>/dev/null)"
      sed 's/^/      /' "$task/stack" 2>/dev/null | head -n 12
    done
  done
}
