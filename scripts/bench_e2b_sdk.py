"""One client's side of scripts/bench-e2b-sdk.sh: E2B's SDK (`e2b`) through sandboxd's
E2B API, or sandboxd's own SDK, on the same server. Per run: create → first output
(a sandbox of the `base` template made, `echo hi` run in it, its output back), then
`true` run RUNS_PER_SANDBOX times, then `1 + 1` as many times in the sandbox's Python
context (E2B's code interpreter SDK, `e2b_code_interpreter`, or sandboxd's
`run_code`), after a first run that starts the context; the sandbox killed. E2B's SDK runs every command as
`/bin/bash -l -c CMD` (a login shell reads the profile), sandboxd's as `sh -c CMD`: so
sandboxd's SDK also runs `bash -l -c true`, the same process E2B's starts. Prints the
medians as JSON.

    python3 scripts/bench_e2b_sdk.py e2b|sandboxd RUNS   (SANDBOXD_URL, SANDBOXD_KEY set)
"""

import json
import os
import statistics
import sys
import time

RUNS_PER_SANDBOX = 20

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


codes = []
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
        }
    )
)
