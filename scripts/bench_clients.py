"""Python clients on the same engine, same run, same image. Through one sandboxd
server: a plain HTTP client on its REST API (the baseline: one pooled httpx client,
`sandbox.create`, `sandbox.exec`, `sandbox.writeFile` / `readFile`), the sandboxd SDK,
and sandboxio's API over the SDK (`SandboxdBackend`). Beside them, for scale,
sandboxio's own Docker backend and the Docker SDK for Python on the engine directly.
Per client: create → first output (make a sandbox, run `echo`, its output back), an
`exec true` round trip, and a 1 MiB file written then read back. Medians of the runs;
ratios against the plain REST client. sandboxd removes a killed sandbox's container in the
background: each client starts once the engine holds no container of the one before.
    python3 scripts/bench_clients.py [runs]   (SANDBOXD_URL and SANDBOXD_KEY set; BENCH_INSTANCE:
    the server's installation id, whose containers are waited for)"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import statistics
import sys
import tarfile
import time
from collections.abc import Awaitable, Callable

import docker
import httpx
from sandboxio_docker import DockerBackend

from sandboxd import AsyncSandbox
from sandboxd.sandboxio_backend import SandboxdBackend

IMAGE = "sandboxd-local/debian:bookworm"
PAYLOAD = os.urandom(1024 * 1024)
EXECS = 20
LABEL = {"sandboxd.bench": "clients"}


async def timed(step: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await step()
    return time.perf_counter() - start


async def sandboxd_client() -> dict[str, float]:
    holder: dict[str, AsyncSandbox] = {}

    async def first_output() -> None:
        holder["sb"] = await AsyncSandbox.create(image=IMAGE, timeout=120)
        assert (await holder["sb"].commands.run("echo hi")).stdout == "hi\n"

    made = await timed(first_output)
    sb = holder["sb"]
    try:
        execs = [await timed(lambda: sb.commands.run("true")) for _ in range(EXECS)]

        async def write_read() -> None:
            await sb.files.write("/tmp/blob.bin", PAYLOAD)
            assert await sb.files.read("/tmp/blob.bin") == PAYLOAD

        files = await timed(write_read)
    finally:
        await sb.kill()
        await sb.close()
    return {"first output": made, "exec true": statistics.median(execs), "1 MiB write+read": files}


async def rest_client(http: httpx.AsyncClient, environment: str) -> dict[str, float]:
    async def call(procedure: str, body: dict[str, object]) -> dict[str, object]:
        answer = await http.post(f"/api/{procedure}", json=body)
        answer.raise_for_status()
        return answer.json()

    holder: dict[str, str] = {}

    async def first_output() -> None:
        made = await call("sandbox.create", {"environmentId": environment, "image": IMAGE, "timeoutMs": 120_000})
        holder["id"] = str(made["sandboxId"])
        out = await call("sandbox.exec", {"sandboxId": holder["id"], "cmd": "echo hi"})
        assert out["stdout"] == "hi\n"

    made = await timed(first_output)
    sandbox_id = holder["id"]
    try:
        execs = [await timed(lambda: call("sandbox.exec", {"sandboxId": sandbox_id, "cmd": "true"})) for _ in range(EXECS)]

        async def write_read() -> None:
            content = base64.b64encode(PAYLOAD).decode()
            await call("sandbox.writeFile", {"sandboxId": sandbox_id, "path": "/tmp/blob.bin", "content": content, "encoding": "base64"})
            answer = await http.get("/api/sandbox.readFile", params={"sandboxId": sandbox_id, "path": "/tmp/blob.bin", "encoding": "base64"})
            assert base64.b64decode(answer.json()["content"]) == PAYLOAD

        files = await timed(write_read)
    finally:
        await call("sandbox.kill", {"sandboxId": sandbox_id})
    return {"first output": made, "exec true": statistics.median(execs), "1 MiB write+read": files}


async def sandboxio_docker_client(backend: DockerBackend | SandboxdBackend) -> dict[str, float]:
    holder: dict[str, object] = {}

    async def first_output() -> None:
        sb = await backend.create(template=IMAGE, timeout=120)
        holder["sb"] = sb
        assert (await sb.run(["echo", "hi"])).stdout == "hi\n"

    made = await timed(first_output)
    sb = holder["sb"]
    try:
        execs = [await timed(lambda: sb.run(["true"])) for _ in range(EXECS)]  # type: ignore[attr-defined]

        async def write_read() -> None:
            await sb.files.write("/tmp/blob.bin", PAYLOAD)  # type: ignore[attr-defined]
            assert await sb.files.read("/tmp/blob.bin") == PAYLOAD  # type: ignore[attr-defined]

        files = await timed(write_read)
    finally:
        await sb.kill()  # type: ignore[attr-defined]
    return {"first output": made, "exec true": statistics.median(execs), "1 MiB write+read": files}


def docker_client(client: docker.DockerClient) -> dict[str, float]:
    start = time.perf_counter()
    container = client.containers.run(
        IMAGE, ["sleep", "300"], detach=True, init=True, labels=LABEL, network_mode="none",
        cap_drop=["ALL"], security_opt=["no-new-privileges"], mem_limit="512m", pids_limit=256,
    )
    try:
        out = container.exec_run(["echo", "hi"])
        assert out.output == b"hi\n"
        made = time.perf_counter() - start
        execs = []
        for _ in range(EXECS):
            t = time.perf_counter()
            container.exec_run(["true"])
            execs.append(time.perf_counter() - t)
        t = time.perf_counter()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("blob.bin")
            info.size = len(PAYLOAD)
            tar.addfile(info, io.BytesIO(PAYLOAD))
        container.put_archive("/tmp", buf.getvalue())
        stream, _ = container.get_archive("/tmp/blob.bin")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile("blob.bin")
            assert member is not None and member.read() == PAYLOAD
        files = time.perf_counter() - t
    finally:
        container.remove(force=True)
    return {"first output": made, "exec true": statistics.median(execs), "1 MiB write+read": files}


def settle(client: docker.DockerClient) -> None:
    """Waits (up to 30 s) until the engine holds no sandbox container of any client."""
    deadline = time.monotonic() + 30
    instance = os.environ.get("BENCH_INSTANCE")
    ours = f"sandboxd.instance={instance}" if instance else "sandboxd.sandbox"
    labels = (ours, "io.sandboxio.managed=true", "sandboxd.bench=clients")
    while time.monotonic() < deadline:
        if not any(client.containers.list(all=True, filters={"label": label}) for label in labels):
            return
        time.sleep(0.05)


async def main(runs: int) -> None:
    client = docker.from_env()
    backend = DockerBackend(image=IMAGE, client=client, reaper=False)
    over_sandboxd = SandboxdBackend(template=IMAGE)
    http = httpx.AsyncClient(base_url=os.environ["SANDBOXD_URL"], headers={"x-api-key": os.environ["SANDBOXD_KEY"]}, timeout=120)
    projects = (await http.get("/api/project.all")).json()
    environment = str(projects[0]["environments"][0]["environmentId"])
    clients = {
        "REST (httpx)": lambda: rest_client(http, environment),
        "sandboxd SDK": sandboxd_client,
        "sandboxio/sandboxd": lambda: sandboxio_docker_client(over_sandboxd),
        "sandboxio docker": lambda: sandboxio_docker_client(backend),
        "docker SDK": lambda: asyncio.to_thread(docker_client, client),
    }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in clients}
    # One warm-up round each, not counted: image metadata, connection pools, imports.
    for run in clients.values():
        await run()
        await asyncio.to_thread(settle, client)
    # Interleaved, so that a slow moment of the machine falls on every client alike.
    for _ in range(runs):
        for name, run in clients.items():
            results[name].append(await run())
            await asyncio.to_thread(settle, client)
    metrics = ["first output", "exec true", "1 MiB write+read"]
    median = {
        name: {m: statistics.median(r[m] for r in rows) for m in metrics} for name, rows in results.items()
    }
    print(f"medians of {runs} runs (exec: median of {EXECS} each), image {IMAGE}")
    print(f"{'client':20}" + "".join(f"{m:>26}" for m in metrics))
    for name, row in median.items():
        cells = "".join(
            f"{row[m] * 1000:>12.1f} ms ({row[m] / median['REST (httpx)'][m]:>5.2f}x)    " for m in metrics
        )
        print(f"{name:20}{cells}")
    await http.aclose()
    client.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
