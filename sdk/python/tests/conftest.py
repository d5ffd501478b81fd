"""A live sandboxd for the tests: the built binary (`SANDBOXD_BIN`, else the repo's
debug build) serving on a free loopback port with a data dir of its own, images from
`scripts/build-local-images.sh`. Every container it made is removed at the end."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
#: The egress probe's web server (test_sandboxio_contract.py): on a Docker network made
#: with this subnet, at this address, named `canary` for `allowlist` sandboxes.
CANARY_SUBNET = "10.213.9.0/24"
CANARY_IP = "10.213.9.2"
KEY = "sbx_python_sdk_test_key_0123456789abcdefgh"


@dataclass(frozen=True)
class Server:
    url: str
    key: str
    data: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    binary = Path(os.environ.get("SANDBOXD_BIN", REPO / "target" / "debug" / "sandboxd"))
    assert binary.is_file(), f"{binary} is missing: build it with `cargo build -p sandboxd`"
    data = Path(tempfile.mkdtemp(prefix="sandboxd-sdk-"))
    port = _free_port()
    env = {
        **os.environ,
        "SANDBOXD_BOOTSTRAP_KEY": KEY,
        "SANDBOXD_TEMPLATES__BASE__IMAGE": "sandboxd-local/debian:bookworm",
        "SANDBOXD_TEMPLATES__PYTHON__IMAGE": "sandboxd-local/debian:bookworm",
        "SANDBOXD_TEMPLATES__NODE__IMAGE": "sandboxd-local/busybox:latest",
        "SANDBOXD_TEMPLATES__CODE_INTERPRETER_V1__IMAGE": "sandboxd-local/interpreter:bookworm",
        "SANDBOXD_EGRESS__HOSTS__CANARY": CANARY_IP,
        "SANDBOXD_EGRESS__ALLOWED_NETWORKS": f'["{CANARY_IP}/32"]',
    }
    for name in ("SANDBOXD_URL", "SANDBOXD_KEY"):
        env.pop(name, None)
    log = (data / "server.log").open("wb")
    process = subprocess.Popen(
        [str(binary), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    instance = ""
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).is_success:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, (data / "server.log").read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        instance = sqlite3.connect(data / "sandboxd.db").execute(
            "SELECT instance_id FROM installation"
        ).fetchone()[0]
        os.environ["SANDBOXD_URL"] = url
        os.environ["SANDBOXD_KEY"] = KEY
        yield Server(url=url, key=KEY, data=data)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        if instance:
            listed = subprocess.run(
                ["docker", "ps", "-aq", "--filter", f"label=sandboxd.instance={instance}"],
                capture_output=True,
                text=True,
                check=False,
            )
            for container in listed.stdout.split():
                subprocess.run(["docker", "rm", "-fv", container], capture_output=True, check=False)
            # Snapshot images carry the installation's label too.
            images = subprocess.run(
                ["docker", "images", "-q", "--filter", f"label=sandboxd.instance={instance}"],
                capture_output=True,
                text=True,
                check=False,
            )
            for image in sorted(set(images.stdout.split())):
                subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)
        subprocess.run(["rm", "-rf", str(data)], check=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
