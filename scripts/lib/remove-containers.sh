# Sourced: `remove_containers FILTER` force-removes every container the engine lists
# for a `docker ps` filter (for example label=sandboxd.instance=ID), with their
# anonymous volumes.
#
# The engine gives up on a container whose processes are not gone 10 s after its
# SIGKILL: its init, the last of its pid namespace to go, stays a zombie while another
# of its processes is stuck in the kernel (a request to the fuse-overlayfs storage
# driver under load, for one). Such a container is described once (its processes, their
# states and kernel stacks) and tried again, for up to two minutes, before this fails.
remove_containers() {
  local filter=$1 ids tries=0 described=no
  while ids=$(docker ps -aq --no-trunc --filter "$filter") && [ -n "$ids" ]; do
    # shellcheck disable=SC2086
    docker rm -fv $ids >/dev/null 2>"${TMPDIR:-/tmp}/remove-containers.$$" && continue
    cat "${TMPDIR:-/tmp}/remove-containers.$$" >&2
    if [ "$described" = no ]; then
      described=yes
      for id in $(docker ps -aq --no-trunc --filter "$filter"); do
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
