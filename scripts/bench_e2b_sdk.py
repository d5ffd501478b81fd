"""One client's side of scripts/bench-e2b-sdk.sh: E2B's SDK (`e2b`) through sandboxd's
E2B API, or sandboxd's own SDK, on the same server. Per run: create → first output
(a sandbox of the `base` template made, `echo hi` run in it, its output back), then
`true` run RUNS_PER_SANDBOX times, then `1 + 1` as many times in the sandbox's Python
context (E2B's code interpreter SDK, `e2b_code_interpreter`, or sandboxd's
`run_code`), after a first run that starts the context; then a directory watched while
a process in the sandbox makes WATCHED files in it, 100 ms apart, noting when it made
each (the sandbox's clock is the host's): how long after a file is made its event is in
the client's hands (sandboxd's SDK: `files.watch`, its WebSocket; E2B's sync SDK:
`files.watch_dir`, its events read every 10 ms); the sandbox killed. E2B's SDK runs every command as
`/bin/bash -l -c CMD` (a login shell reads the profile), sandboxd's as `sh -c CMD`: so
sandboxd's SDK also runs `bash -l -c true`, the same process E2B's starts. Prints the
medians as JSON.

    python3 scripts/bench_e2b_sdk.py e2b|sandboxd RUNS   (SANDBOXD_URL, SANDBOXD_KEY set)
"""

import json
import os
import statistics
import sys
import threading
import time

RUNS_PER_SANDBOX = 20
WATCHED = 20
# Makes WATCHED files 100 ms apart under /tmp/wb, then writes when it made each to
# /tmp/wb-times (outside the watched directory).
MAKER = (
    "import time\n"
    "made = []\n"
    f"for i in range({WATCHED}):\n"
    "    time.sleep(0.1)\n"
    "    made.append(time.time())\n"
    "    open(f'/tmp/wb/f{i}', 'w').close()\n"
    "open('/tmp/wb-times', 'w').write(' '.join(map(str, made)))\n"
)

client, runs = sys.argv[1], int(sys.argv[2])
url, key = os.environ["SANDBOXD_URL"], os.environ["SANDBOXD_KEY"]

if client == "e2b":
    os.environ["E2B_API_URL"] = f"{url}/e2b"
    os.environ["E2B_SANDBOX_URL"] = f"{url}/e2b/envd"
    os.environ["E2B_API_KEY"] = key
    from e2b_code_interpreter import Sandbox

    def make():
        return Sandbox.create("base", timeout=120, allow_internet_access=False)

    def run(sbx, cmd):
        return sbx.commands.run(cmd).stdout

    def run_code(sbx, code):
        return sbx.run_code(code).text

    def kill(sbx):
        sbx.kill()

    def read_text(sbx, path):
        return sbx.files.read(path)

    def watch_delays(sbx):
        seen = {}
        handle = sbx.files.watch_dir("/tmp/wb")
        maker = threading.Thread(target=run, args=(sbx, "python3 /tmp/maker.py"))
        maker.start()
        deadline = time.time() + 30
        while len(seen) < WATCHED and time.time() < deadline:
            for event in handle.get_new_events():
                name = event.name.rsplit("/", 1)[-1]
                seen.setdefault(name, time.time())
            time.sleep(0.01)
        maker.join()
        handle.stop()
        return seen

else:
    from sandboxd import Sandbox

    def make():
        return Sandbox.create("base", timeout=120)

    def run(sbx, cmd):
        return sbx.commands.run(cmd).stdout

    def run_code(sbx, code):
        return sbx.run_code(code).result

    def kill(sbx):
        sbx.kill()

    def read_text(sbx, path):
        return sbx.files.read_text(path)

    def watch_delays(sbx):
        seen = {}
        with sbx.files.watch("/tmp/wb") as changes:
            maker = threading.Thread(target=run, args=(sbx, "python3 /tmp/maker.py"))
            maker.start()
            for change in changes:
                seen.setdefault(change.name, time.time())
                if len(seen) == WATCHED:
                    break
            maker.join()
        return seen


codes, watched = [], []
first, trues, logins = [], [], []
for _ in range(runs):
    start = time.perf_counter()
    sbx = make()
    assert run(sbx, "echo hi") == "hi\n"
    first.append(time.perf_counter() - start)
    for _ in range(RUNS_PER_SANDBOX):
        start = time.perf_counter()
        run(sbx, "true")
        trues.append(time.perf_counter() - start)
        if client != "e2b":
            start = time.perf_counter()
            run(sbx, "bash -l -c true")
            logins.append(time.perf_counter() - start)
    assert run_code(sbx, "x = 1; x + 1") == "2"
    for _ in range(RUNS_PER_SANDBOX):
        start = time.perf_counter()
        run_code(sbx, "1 + 1")
        codes.append(time.perf_counter() - start)
    sbx.files.write("/tmp/maker.py", MAKER)
    run(sbx, "mkdir -p /tmp/wb && rm -f /tmp/wb/*")
    seen = watch_delays(sbx)
    made = [float(t) for t in read_text(sbx, "/tmp/wb-times").split()]
    for i, at in enumerate(made):
        if f"f{i}" in seen:
            watched.append(seen[f"f{i}"] - at)
    kill(sbx)
    time.sleep(0.5)
print(
    json.dumps(
        {
            "client": client,
            "create_first_output_ms": statistics.median(first) * 1000,
            "run_true_ms": statistics.median(trues) * 1000,
            # E2B's `true` is already `bash -l -c true`.
            "same_process_ms": statistics.median(logins or trues) * 1000,
            "run_code_ms": statistics.median(codes) * 1000,
            "watch_event_ms": statistics.median(watched) * 1000,
        }
    )
)
