"""Previews against the direct path, same run, same app, same sandbox: an `internet`
sandbox runs the preview tests' app (crates/sandboxd-server/tests/e2e/preview/app.py,
listening on all its addresses), reached once through sandboxd's preview
(`/preview/<handle>/8000/`, carried by the agent) and once directly at the sandbox's
address on the engine's bridge (the baseline). Measured: small GETs (p50 and p90,
interleaved in blocks), a 100 MiB download (MiB/s, the server's RSS sampled while it
streams and its CPU time per download; curl as the client, seven per side, interleaved,
the median kept), and 100 WebSockets at once, each echoing messages (errors counted).
    python3 scripts/bench_previews.py [small GETs per side]   (SANDBOXD_URL, SANDBOXD_KEY,
    BENCH_SERVER_PID set)"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import websockets

REPO = Path(__file__).resolve().parents[1]
APP = (REPO / "crates/sandboxd-server/tests/e2e/preview/app.py").read_text()
URL = os.environ["SANDBOXD_URL"]
KEY = os.environ["SANDBOXD_KEY"]
SERVER_PID = int(os.environ["BENCH_SERVER_PID"])
HEADERS = {"x-api-key": KEY}
BLOCK = 50
MIB = 100
# Downloads per side, interleaved; the median is reported.
DOWNLOADS = 7
SOCKETS = 100
MESSAGES = 10


def handle_of(sandbox_id: str) -> str:
    return base64.b32hexencode(sandbox_id.encode()).decode().rstrip("=").lower()


def cpu_seconds(pid: int) -> float:
    """User and system time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def call(http: httpx.AsyncClient, procedure: str, body: dict) -> dict:
    answer = await http.post(f"{URL}/api/{procedure}", json=body, headers=HEADERS, timeout=600)
    answer.raise_for_status()
    return answer.json()


async def small_gets(http: httpx.AsyncClient, preview: str, direct: str, count: int) -> dict:
    times: dict[str, list[float]] = {"preview": [], "direct": []}
    for _ in range(max(1, count // BLOCK)):
        for side, base, headers in (("direct", direct, {}), ("preview", preview, HEADERS)):
            for _ in range(BLOCK):
                start = time.perf_counter()
                answer = await http.get(f"{base}/", headers=headers)
                times[side].append((time.perf_counter() - start) * 1000)
                assert answer.status_code == 200 and answer.text == "hello from inside\n"
    def p(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1]
    row = {side: {"p50": p(v, 50), "p90": p(v, 90)} for side, v in times.items()}
    row["added_p50_ms"] = row["preview"]["p50"] - row["direct"]["p50"]
    return row


async def download(base: str, headers: dict) -> tuple[float, float, float]:
    """One 100 MiB download with curl (a client that is not the bottleneck): MiB/s, the
    server's RSS sampled while it runs, and the CPU time the server spent on it."""
    cpu_before = cpu_seconds(SERVER_PID)
    args = ["curl", "-sf", "-o", "/dev/null", "-w", "%{size_download} %{time_total}"]
    for name, value in headers.items():
        args += ["-H", f"{name}: {value}"]
    curl = await asyncio.create_subprocess_exec(
        *args, f"{base}/big?mib={MIB}", stdout=asyncio.subprocess.PIPE)
    peak = rss_mib(SERVER_PID)
    while curl.returncode is None:
        try:
            await asyncio.wait_for(curl.wait(), 0.05)
        except asyncio.TimeoutError:
            pass
        peak = max(peak, rss_mib(SERVER_PID))
    out = (await curl.stdout.read()).decode().split()
    assert curl.returncode == 0 and int(out[0]) == MIB << 20, out
    return MIB / float(out[1]), peak, cpu_seconds(SERVER_PID) - cpu_before


async def echoes(base: str, headers: dict) -> tuple[int, float]:
    url = base.replace("http://", "ws://", 1) + "/ws"
    errors = 0

    async def one(n: int) -> None:
        nonlocal errors
        try:
            async with websockets.connect(url, additional_headers=headers, open_timeout=30) as ws:
                for m in range(MESSAGES):
                    await ws.send(f"{n}:{m}")
                    if await asyncio.wait_for(ws.recv(), 30) != f"echo: {n}:{m}":
                        errors += 1
        except Exception as error:  # counted, not raised: the figure is the error count
            print(f"socket {n}: {error!r}", file=sys.stderr)
            errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(SOCKETS)))
    return errors, time.perf_counter() - start


async def main(count: int) -> None:
    async with httpx.AsyncClient(timeout=120) as http:
        projects = (await http.get(f"{URL}/api/project.all", headers=HEADERS)).json()
        env = projects[0]["environments"][0]["environmentId"]
        sandbox = await call(http, "sandbox.create", {
            "environmentId": env, "template": "base", "networkMode": "internet",
            "pidsLimit": 2048, "memoryMb": 2048, "cpu": 2, "timeoutMs": 3_600_000,
        })
        sid = sandbox["sandboxId"]
        try:
            app = APP.replace('("127.0.0.1", 8000)', '("0.0.0.0", 8000)')
            await call(http, "sandbox.writeFile", {"sandboxId": sid, "path": "/tmp/app.py", "content": app})
            await call(http, "sandbox.processStart", {"sandboxId": sid, "cmd": "exec python3 /tmp/app.py"})
            container = sandbox["containerId"]
            networks = json.loads(subprocess.check_output(
                ["docker", "inspect", "-f", "{{json .NetworkSettings.Networks}}", container]))
            address = next(n["IPAddress"] for n in networks.values() if n.get("IPAddress"))
            direct = f"http://{address}:8000"
            preview = f"{URL}/preview/{handle_of(sid)}/8000"
            for _ in range(100):
                try:
                    if (await http.get(f"{preview}/", headers=HEADERS)).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
            # Warm both paths.
            await small_gets(http, preview, direct, BLOCK)
            gets = await small_gets(http, preview, direct, count)
            rss_before = rss_mib(SERVER_PID)
            speeds: dict[str, list[float]] = {"preview": [], "direct": []}
            peaks: list[float] = []
            server_cpu: list[float] = []
            for _ in range(DOWNLOADS):
                for side, base, headers in (("direct", direct, {}), ("preview", preview, HEADERS)):
                    speed, peak, cpu = await download(base, headers)
                    speeds[side].append(speed)
                    if side == "preview":
                        peaks.append(peak)
                        server_cpu.append(cpu)
            preview_errors, preview_secs = await echoes(preview, HEADERS)
            direct_errors, direct_secs = await echoes(direct, {})
        finally:
            await call(http, "sandbox.kill", {"sandboxId": sid})
    speed = {side: statistics.median(v) for side, v in speeds.items()}
    report = {
        "small_get_ms": gets,
        "download_mib_per_s": speed,
        "download_ratio": speed["preview"] / speed["direct"],
        "server_rss_mib": {"before": rss_before, "peak_while_streaming": max(peaks)},
        "server_cpu_ms_per_download": statistics.median(server_cpu) * 1000,
        "websockets": {
            "sockets": SOCKETS, "messages_each": MESSAGES,
            "preview_errors": preview_errors, "preview_seconds": preview_secs,
            "direct_errors": direct_errors, "direct_seconds": direct_secs,
        },
    }
    g = gets
    print(f"small GET p50: preview {g['preview']['p50']:.2f} ms, direct {g['direct']['p50']:.2f} ms "
          f"(+{g['added_p50_ms']:.2f} ms); p90 {g['preview']['p90']:.2f} / {g['direct']['p90']:.2f} ms")
    print(f"{MIB} MiB download: preview {speed['preview']:.0f} MiB/s, direct {speed['direct']:.0f} MiB/s "
          f"({report['download_ratio']:.2f}x); server RSS {rss_before:.1f} MiB before, "
          f"{max(peaks):.1f} MiB at most while streaming; server CPU "
          f"{report['server_cpu_ms_per_download']:.0f} ms per preview download")
    print(f"{SOCKETS} WebSockets x {MESSAGES} echoes: preview {preview_errors} errors in {preview_secs:.2f} s, "
          f"direct {direct_errors} errors in {direct_secs:.2f} s")
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
