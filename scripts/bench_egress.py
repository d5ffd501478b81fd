"""Egress through the proxy against an `internet` sandbox, same run, same server: a web
server on the bench's own Docker network (its gateway address, on this host) is reached
from an `allowlist` sandbox through sandboxd's egress proxy by the name `far` (the
operator's `[egress] hosts`), and from an `internet` sandbox directly at its address
(the baseline). Measured inside the sandboxes with curl: time to first byte of small
GETs (p50, p90; blocks interleaved), a 100 MiB download (MiB/s, the median of five per
side, interleaved; through the proxy both as a request in absolute form and through a
CONNECT tunnel), the same download from a server paced at 100 MiB/s (a fast internet
link: what a sandbox meets outside this machine), and the server's memory per open
tunnel (RSS with 28 tunnels open against none).
    python3 scripts/bench_egress.py   (SANDBOXD_URL, SANDBOXD_KEY, BENCH_SERVER_PID,
    FAR_ADDRESS, FAR_PORT set)"""

from __future__ import annotations

import http.server
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

URL = os.environ["SANDBOXD_URL"]
KEY = os.environ["SANDBOXD_KEY"]
SERVER_PID = int(os.environ["BENCH_SERVER_PID"])
FAR = os.environ["FAR_ADDRESS"]
PORT = int(os.environ["FAR_PORT"])
HEADERS = {"x-api-key": KEY}
MIB = 100
BLOCK = 50
BLOCKS = 4
DOWNLOADS = 5
TUNNELS = 28
#: The paced server's rate, MiB/s: about an 840 Mbit/s link.
LINK = 100


class Far(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    chunk = b"x" * (1 << 20)

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        if self.path.startswith("/paced"):
            self.send_response(200)
            self.send_header("Content-Length", str(MIB << 20))
            self.end_headers()
            started = time.monotonic()
            for i in range(MIB):
                self.wfile.write(self.chunk)
                ahead = started + (i + 1) / LINK - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            return
        if self.path.startswith("/big"):
            self.send_response(200)
            self.send_header("Content-Length", str(MIB << 20))
            self.end_headers()
            for _ in range(MIB):
                self.wfile.write(self.chunk)
            return
        body = b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def serve_far() -> None:
    http.server.ThreadingHTTPServer((FAR, PORT), Far).serve_forever()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def call(client: httpx.Client, procedure: str, body: dict) -> dict:
    answer = client.post(f"{URL}/api/{procedure}", json=body, headers=HEADERS, timeout=600)
    answer.raise_for_status()
    return answer.json()


def sh(client: httpx.Client, sandbox: str, cmd: str) -> str:
    out = call(client, "sandbox.exec", {"sandboxId": sandbox, "cmd": cmd, "timeoutMs": 600_000})
    assert out["exitCode"] == 0, out
    return out["stdout"]


def first_bytes(client: httpx.Client, sandbox: str, url: str, extra: str = "") -> list[float]:
    loop = (f"for i in $(seq {BLOCK}); do curl -sf {extra} -o /dev/null "
            f"-w '%{{time_starttransfer}}\\n' {url}; done")
    return [float(t) * 1000 for t in sh(client, sandbox, loop).split()]


def download(client: httpx.Client, sandbox: str, url: str, extra: str = "", path: str = "/big") -> float:
    out = sh(client, sandbox, f"curl -sf {extra} -o /dev/null -w '%{{size_download}} %{{time_total}}' {url}{path}")
    size, seconds = out.split()
    assert int(size) == MIB << 20, out
    return MIB / float(seconds)


def main() -> None:
    far = multiprocessing.Process(target=serve_far, daemon=True)
    far.start()
    time.sleep(0.5)
    with httpx.Client(timeout=120) as client:
        env = client.get(f"{URL}/api/project.all", headers=HEADERS).json()[0]["environments"][0]["environmentId"]
        common = {"environmentId": env, "template": "base", "pidsLimit": 2048,
                  "memoryMb": 2048, "cpu": 2, "timeoutMs": 3_600_000}
        proxied = call(client, "sandbox.create", {**common, "networkMode": "allowlist",
                                                  "egress": {"allow": [f"far:{PORT}"]}})["sandboxId"]
        direct = call(client, "sandbox.create", {**common, "networkMode": "internet"})["sandboxId"]
        try:
            via_proxy = f"http://far:{PORT}"
            straight = f"http://{FAR}:{PORT}"
            # Warm both paths.
            first_bytes(client, proxied, via_proxy)
            first_bytes(client, direct, straight)
            ttfb: dict[str, list[float]] = {"proxy": [], "tunnel": [], "direct": []}
            for _ in range(BLOCKS):
                ttfb["direct"] += first_bytes(client, direct, straight)
                ttfb["proxy"] += first_bytes(client, proxied, via_proxy)
                ttfb["tunnel"] += first_bytes(client, proxied, via_proxy, "--proxytunnel")
            speeds: dict[str, list[float]] = {"proxy": [], "tunnel": [], "direct": []}
            for _ in range(DOWNLOADS):
                speeds["direct"].append(download(client, direct, straight))
                speeds["proxy"].append(download(client, proxied, via_proxy))
                speeds["tunnel"].append(download(client, proxied, via_proxy, "--proxytunnel"))
            paced: dict[str, list[float]] = {"proxy": [], "tunnel": [], "direct": []}
            for _ in range(3):
                paced["direct"].append(download(client, direct, straight, path="/paced"))
                paced["proxy"].append(download(client, proxied, via_proxy, path="/paced"))
                paced["tunnel"].append(download(client, proxied, via_proxy, "--proxytunnel", "/paced"))
            idle = rss_mib(SERVER_PID)
            # Tunnels held open by one program: each CONNECT answered, then left idle.
            hold = (
                "import socket, time\n"
                "held = []\n"
                f"for _ in range({TUNNELS}):\n"
                "    s = socket.create_connection(('127.0.0.1', 49980))\n"
                f"    s.sendall(b'CONNECT far:{PORT} HTTP/1.1\\r\\nHost: far:{PORT}\\r\\n\\r\\n')\n"
                "    assert s.recv(100).startswith(b'HTTP/1.1 200'), 'tunnel refused'\n"
                "    held.append(s)\n"
                "print('open', flush=True)\n"
                "time.sleep(3)\n"
            )
            call(client, "sandbox.writeFile", {"sandboxId": proxied, "path": "/tmp/hold.py", "content": hold})
            call(client, "sandbox.processStart", {"sandboxId": proxied, "cmd": "python3 /tmp/hold.py"})
            time.sleep(2)
            held = rss_mib(SERVER_PID)
        finally:
            for sid in (proxied, direct):
                call(client, "sandbox.kill", {"sandboxId": sid})
    far.terminate()

    def p(values: list[float], q: int) -> float:
        return statistics.quantiles(values, n=100)[q - 1]

    report = {
        "ttfb_ms": {side: {"p50": p(v, 50), "p90": p(v, 90)} for side, v in ttfb.items()},
        "download_mib_per_s": {side: statistics.median(v) for side, v in speeds.items()},
        f"download_at_{LINK}_mib_per_s": {side: statistics.median(v) for side, v in paced.items()},
        "server_rss_mib": {"idle": idle, f"with_{TUNNELS}_tunnels": held},
    }
    t = report["ttfb_ms"]
    d = report["download_mib_per_s"]
    print(f"first byte p50: direct {t['direct']['p50']:.2f} ms, proxy {t['proxy']['p50']:.2f} ms "
          f"(+{t['proxy']['p50'] - t['direct']['p50']:.2f}), tunnel {t['tunnel']['p50']:.2f} ms "
          f"(+{t['tunnel']['p50'] - t['direct']['p50']:.2f})")
    print(f"{MIB} MiB download: direct {d['direct']:.0f} MiB/s, proxy {d['proxy']:.0f} MiB/s "
          f"({d['proxy'] / d['direct']:.2f}x), tunnel {d['tunnel']:.0f} MiB/s ({d['tunnel'] / d['direct']:.2f}x)")
    k = report[f"download_at_{LINK}_mib_per_s"]
    print(f"{MIB} MiB from a server paced at {LINK} MiB/s: direct {k['direct']:.0f} MiB/s, proxy "
          f"{k['proxy']:.0f} MiB/s ({k['proxy'] / k['direct']:.2f}x), tunnel {k['tunnel']:.0f} MiB/s "
          f"({k['tunnel'] / k['direct']:.2f}x)")
    print(f"server RSS {idle:.1f} MiB, {held:.1f} MiB with {TUNNELS} tunnels open "
          f"({(held - idle) * 1024 / TUNNELS:.0f} KiB each)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
