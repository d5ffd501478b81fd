# Sourced by the scripts that install Debian's packages (as root). `apt_install [apt-get
# options] PACKAGE...` first finishes what an interrupted dpkg left half-done (apt refuses
# every install until then) and waits up to ten minutes for another installer's lock, so
# that a machine where an earlier install was cut, or where another installer runs, still
# gets its packages.

apt_lock_wait=600

apt_recover() {
  local waited=0
  until DEBIAN_FRONTEND=noninteractive dpkg --configure -a >/dev/null 2>&1; do
    if [ "$waited" -ge "$apt_lock_wait" ]; then
      echo "dpkg stays locked or broken after ${apt_lock_wait}s: dpkg --configure -a" >&2
      DEBIAN_FRONTEND=noninteractive dpkg --configure -a
      return 1
    fi
    sleep 2
    waited=$((waited + 2))
  done
}

apt_updated=0
apt_install() {
  apt_recover
  if [ "$apt_updated" = 0 ]; then
    apt-get -o DPkg::Lock::Timeout="$apt_lock_wait" update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$apt_lock_wait" \
    install -y -qq "$@" >/dev/null
}
