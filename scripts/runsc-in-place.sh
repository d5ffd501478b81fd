#!/bin/sh
# runsc as sandboxd's engines run it, installed by scripts/gvisor.sh with @RUNSC@ (the
# runtime) and @DATA_ROOT@ (the engine's data root) filled in. Everything is passed to
# runsc as it is, except a checkpoint's memory and its restore:
#
# The engine (Docker through containerd) carries a checkpoint's files through its
# content store twice, into it after the runtime wrote them and out of it before the
# runtime reads them: for 256 MiB of a sandbox's memory that is 10 s of copying around
# 1 s of gVisor's own work. Here the runtime writes the pages in place, in a directory
# of the container's own in the engine's data root (readable by root only, removed with
# the container), and the image the engine carries holds one small file naming that
# directory; the restore reads the pages from there. A checkpoint's directory no longer
# named by any of the container's checkpoints goes at its next checkpoint. sandboxd
# moves the memory of a snapshot with memory to <data root>/sandboxd-memory/<snapshot>,
# and a container started from it gets a checkpoint naming that directory.
set -u
runsc='@RUNSC@'
root='@DATA_ROOT@'
marker=sandboxd-checkpoint

last=
image=
state=
next=
for arg in "$@"; do
  case $next in
    image) image=$arg ;;
    root) state=$arg ;;
  esac
  next=
  case $arg in
    --image-path | -image-path) next=image ;;
    --image-path=* | -image-path=*) image=${arg#*=} ;;
    --root | -root) next=root ;;
    --root=* | -root=*) state=${arg#*=} ;;
  esac
  last=$arg
done

# Calls with the image path given as the next argument replaced by $1.
with_image() {
  replacement=$1
  shift
  skip=0
  for arg in "$@"; do
    shift
    if [ "$skip" = 1 ]; then set -- "$@" "$replacement"; skip=0; continue; fi
    case $arg in
      --image-path | -image-path) skip=1 ;;
      --image-path=* | -image-path=*) arg="--image-path=$replacement" ;;
    esac
    set -- "$@" "$arg"
  done
  "$runsc" "$@"
}

case " $* " in
  *" checkpoint "*)
    container=$root/containers/$last
    case $last in */* | .* | "") exec "$runsc" "$@" ;; esac
    if [ -z "$image" ] || [ ! -d "$container" ] || [ ! -d "$image" ]; then
      exec "$runsc" "$@"
    fi
    kept=$container/sandboxd-checkpoints
    mkdir -p "$kept" && chmod 700 "$kept" || exit 1
    pages=$kept/$(date +%s%N)-$$
    mkdir "$pages" || exit 1
    if with_image "$pages" "$@"; then
      if ! printf '%s\n' "$pages" >"$image/$marker"; then
        rm -rf -- "$pages"
        exit 1
      fi
      # The directories none of the container's checkpoints names any more go, once
      # this one is answered.
      (
        for old in "$kept"/*; do
          [ "$old" = "$pages" ] && continue
          named=$(cat "$container"/checkpoints/*/"$marker" 2>/dev/null | grep -Fx -- "$old" || true)
          [ -z "$named" ] && rm -rf -- "$old"
        done
      ) </dev/null >/dev/null 2>&1 &
      exit 0
    else
      status=$?
      rm -rf -- "$pages"
      exit "$status"
    fi
    ;;
  *" restore "*)
    if [ -n "$image" ] && [ -f "$image/$marker" ]; then
      pages=$(head -n 1 "$image/$marker")
      case $pages in
        "$root"/containers/*/sandboxd-checkpoints/* | "$root"/sandboxd-memory/*) ;;
        *) echo "sandboxd-checkpoint names a directory outside $root: $pages" >&2; exit 1 ;;
      esac
      case $pages in
        *..*) echo "sandboxd-checkpoint names $pages" >&2; exit 1 ;;
      esac
      [ -d "$pages" ] || { echo "the checkpoint's pages are gone: $pages" >&2; exit 1; }
      # The sandbox saved under this id may still be being deleted (the engine answers
      # the checkpoint first): a restore under the same id meanwhile would be torn down
      # with it.
      if [ -n "$state" ]; then
        tries=0
        while "$runsc" --root "$state" state "$last" >/dev/null 2>&1 && [ "$tries" -lt 200 ]; do
          sleep 0.05
          tries=$((tries + 1))
        done
      fi
      with_image "$pages" "$@"
      exit $?
    fi
    ;;
esac
exec "$runsc" "$@"
