"""What the hops of a preview cost by themselves: the preview tests' app in a container on
the engine's bridge, downloaded from (a) directly at its bridge address, the preview
benchmark's baseline, and (b) through two plain relays with the hops a preview has: one
inside the container on its loopback, one on the host, joined by a unix socket the host
owns and mounts into the container. The relays copy bytes with 1 MiB buffers and nothing
else: no frames, no credit, no HTTP parsing. Their ratio to (a) is the most any carriage
through those hops can reach on this machine, measured in the same run.
    python3 scripts/bench_relay_ceiling.py [downloads per side, default 7]
Needs the local images (scripts/build-local-images.sh); cleans up its container."""

from __future__ import annotations

import inspect
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
APP = (REPO / "crates/sandboxd-server/tests/e2e/preview/app.py").read_text()
IMAGE = "sandboxd-local/debian:bookworm"
LABEL = "sandboxd.bench=relay-ceiling"
MIB = 100
BUFFER = 1 << 20

def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copies one direction until it ends, then ends it on the other side."""
    buf = bytearray(BUFFER)
    view = memoryview(buf)
    try:
        while True:
            n = src.recv_into(buf)
            if n == 0:
                break
            dst.sendall(view[:n])
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


# The relay inside the container: for each connection from the host, one to the app.
INSIDE = f"""import socket, threading
BUFFER = {BUFFER}
{inspect.getsource(pump)}
while True:
    host = socket.socket(socket.AF_UNIX); host.connect("/relay/sock")
    app = socket.create_connection(("127.0.0.1", 8000))
    app.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = threading.Thread(target=pump, args=(host, app)); t.start()
    pump(app, host); t.join(); host.close(); app.close()
"""


def host_relay(listener: socket.socket, agent: socket.socket) -> None:
    """Joins each client to the next connection the inside relay made."""
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        inside, _ = agent.accept()
        t = threading.Thread(target=pump, args=(client, inside), daemon=True)
        t.start()
        pump(inside, client)
        t.join()
        client.close()
        inside.close()


def download(url: str) -> float:
    out = subprocess.check_output(
        ["curl", "-sf", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", url]).split()
    assert int(out[0]) == MIB << 20, out
    return MIB / float(out[1])


def main(rounds: int) -> None:
    relay_dir = tempfile.mkdtemp(prefix="relay-ceiling-")
    os.chmod(relay_dir, 0o777)
    agent = socket.socket(socket.AF_UNIX)
    agent.bind(f"{relay_dir}/sock")
    os.chmod(f"{relay_dir}/sock", 0o777)
    agent.listen(4)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    app = APP.replace('("127.0.0.1", 8000)', '("0.0.0.0", 8000)')
    container = subprocess.check_output([
        "docker", "run", "-d", "--rm", "--label", LABEL, "-v", f"{relay_dir}:/relay",
        IMAGE, "python3", "-c", app]).decode().strip()
    try:
        address = subprocess.check_output([
            "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            container]).decode().strip()
        direct = f"http://{address}:8000/big?mib={MIB}"
        for _ in range(100):
            try:
                socket.create_connection((address, 8000), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        subprocess.check_call(["docker", "exec", "-d", container, "python3", "-c", INSIDE])
        threading.Thread(target=host_relay, args=(listener, agent), daemon=True).start()
        relayed = f"http://127.0.0.1:{port}/big?mib={MIB}"
        download(direct)
        download(relayed)
        speeds: dict[str, list[float]] = {"direct": [], "relayed": []}
        for _ in range(rounds):
            speeds["direct"].append(download(direct))
            speeds["relayed"].append(download(relayed))
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    speed = {side: statistics.median(v) for side, v in speeds.items()}
    ratio = speed["relayed"] / speed["direct"]
    print(f"{MIB} MiB download: two plain relays {speed['relayed']:.0f} MiB/s, direct "
          f"{speed['direct']:.0f} MiB/s ({ratio:.2f}x)")
    print(json.dumps({"download_mib_per_s": speed, "relayed_ratio": ratio, "samples": speeds}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
