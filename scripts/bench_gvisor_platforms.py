"""gVisor's two platforms side by side with runc on the local engine (run by
scripts/bench-gvisor-platforms.sh): per runtime, the share of a CPU an idle container
keeps busy (its shim and every process under it), and inside one container the time of
400,000 system calls, 200 program starts and a shell loop with no calls.

runsc on the ptrace platform is registered for the run as `runsc-ptrace` (the
engine's `runsc` with `--platform=ptrace` added) and removed after it. Containers carry
the label sandboxd.bench=gvisor-platforms and are removed, even on failure.
    python3 scripts/bench_gvisor_platforms.py [idle containers per runtime] [seconds]
"""

import json
import os
import signal
import subprocess
import sys
import time

CONFIG = "/etc/docker/daemon.json"
IMAGE = "sandboxd-local/busybox:latest"
LABEL = "sandboxd.bench=gvisor-platforms"
PTRACE = "runsc-ptrace"
WORKLOADS = {
    "400,000 system calls": "dd if=/dev/zero of=/dev/null bs=1 count=200000 2>/dev/null",
    "200 program starts": "for i in $(seq 200); do /bin/true; done",
    "a shell loop, no calls": "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
}


def docker(*args):
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout.strip()


def runtimes():
    return json.loads(docker("info", "--format", "{{json .Runtimes}}"))


def reload_engine(wanted_present):
    os.kill(int(subprocess.check_output(["pgrep", "-xo", "dockerd"])), signal.SIGHUP)
    for _ in range(100):
        if (PTRACE in runtimes()) == wanted_present:
            return
        time.sleep(0.1)
    sys.exit(f"the engine did not {'offer' if wanted_present else 'drop'} {PTRACE}")


def set_ptrace_runtime(present):
    with open(CONFIG) as f:
        config = json.load(f)
    declared = config.setdefault("runtimes", {})
    if present:
        runsc = declared["runsc"]
        args = [a for a in runsc.get("runtimeArgs", []) if not a.startswith("--platform=")]
        declared[PTRACE] = {"path": runsc["path"], "runtimeArgs": args + ["--platform=ptrace"]}
    else:
        declared.pop(PTRACE, None)
    with open(CONFIG + ".new", "w") as f:
        json.dump(config, f, indent=2)
    os.replace(CONFIG + ".new", CONFIG)
    reload_engine(present)


def tree(pid):
    found, i = [pid], 0
    while i < len(found):
        task_dir = f"/proc/{found[i]}/task"
        for task in os.listdir(task_dir) if os.path.isdir(task_dir) else []:
            try:
                with open(f"{task_dir}/{task}/children") as f:
                    found += [int(c) for c in f.read().split()]
            except OSError:
                pass
        i += 1
    return found


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def shims():
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"containerd-shim" in args[0] and b"-id" in args:
            found[args[args.index(b"-id") + 1].decode()] = int(entry)
    return found


def start(runtime):
    return docker("run", "-d", "--runtime", runtime, "--network=none", "--label", LABEL, IMAGE, "sleep", "1000000")


def idle_cpu_percent(runtime, count, seconds):
    ids = [start(runtime) for _ in range(count)]
    time.sleep(5)
    by_id = shims()
    pids = [pid for i in ids for pid in tree(by_id[i])]
    before = sum(map(cpu_seconds, pids))
    time.sleep(seconds)
    used = sum(map(cpu_seconds, pids)) - before
    return used / seconds / count * 100


def workload_ms(runtime):
    container = start(runtime)
    timings = {}
    for name, script in WORKLOADS.items():
        started = time.monotonic()
        docker("exec", container, "sh", "-c", script)
        timings[name] = (time.monotonic() - started) * 1000
    return timings


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 20
    set_ptrace_runtime(True)
    try:
        rows = {}
        for runtime in ["runc", "runsc", PTRACE]:
            rows[runtime] = {"idle CPU % per container": idle_cpu_percent(runtime, count, seconds)}
            # The workloads run alone: idle systrap sandboxes slow a busy one down.
            remove_containers()
            rows[runtime].update(workload_ms(runtime))
            remove_containers()
        columns = ["idle CPU % per container", *WORKLOADS]
        print(f"{'runtime':<14}" + "".join(f"{c:>26}" for c in columns))
        for runtime, row in rows.items():
            print(f"{runtime:<14}" + "".join(f"{row[c]:>26.2f}" for c in columns))
        print(json.dumps({"idle_containers": count, "seconds": seconds, "runtimes": rows}))
    finally:
        remove_containers()
        set_ptrace_runtime(False)


def remove_containers():
    ids = docker("ps", "-aq", "--filter", f"label={LABEL}").split()
    if ids:
        docker("rm", "-f", *ids)


if __name__ == "__main__":
    main()
