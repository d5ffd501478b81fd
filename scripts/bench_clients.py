"""Three Python clients on the same engine, same run, same image: the sandboxd SDK
(through a sandboxd server), sandboxio's own Docker backend, and the Docker SDK for
Python directly. Per client: create → first output (make a sandbox, run `echo`, its
output back), an `exec true` round trip, and a 1 MiB file written then read back.
Medians of the runs; ratios against the Docker SDK.
    python3 scripts/bench_clients.py [runs]   (SANDBOXD_URL and SANDBOXD_KEY set)"""

from __future__ import annotations

import asyncio
import io
import os
import statistics
import sys
import tarfile
import time
from collections.abc import Awaitable, Callable

import docker
from sandboxio_docker import DockerBackend

from sandboxd import AsyncSandbox

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


async def sandboxio_docker_client(backend: DockerBackend) -> dict[str, float]:
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


async def main(runs: int) -> None:
    client = docker.from_env()
    backend = DockerBackend(image=IMAGE, client=client, reaper=False)
    results: dict[str, list[dict[str, float]]] = {"sandboxd SDK": [], "sandboxio docker": [], "docker SDK": []}
    # One warm-up round each, not counted: image metadata, connection pools, imports.
    await sandboxd_client()
    await sandboxio_docker_client(backend)
    docker_client(client)
    for _ in range(runs):
        results["sandboxd SDK"].append(await sandboxd_client())
        results["sandboxio docker"].append(await sandboxio_docker_client(backend))
        results["docker SDK"].append(await asyncio.to_thread(docker_client, client))
    metrics = ["first output", "exec true", "1 MiB write+read"]
    median = {
        name: {m: statistics.median(r[m] for r in rows) for m in metrics} for name, rows in results.items()
    }
    print(f"medians of {runs} runs (exec: median of {EXECS} each), image {IMAGE}")
    print(f"{'client':18}" + "".join(f"{m:>26}" for m in metrics))
    for name, row in median.items():
        cells = "".join(
            f"{row[m] * 1000:>12.1f} ms ({row[m] / median['docker SDK'][m]:>5.2f}x)    " for m in metrics
        )
        print(f"{name:18}{cells}")
    client.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
