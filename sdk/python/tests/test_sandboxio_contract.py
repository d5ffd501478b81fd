"""sandboxio's adapter contract suite against sandboxd: the backend this SDK ships,
driving the live server of `conftest.py`. Fault probes are real: answers of the real
server held back or a connection to it failing (an HTTP transport between the backend
and the server), a key that is not there, an image that does not exist, a container
removed behind the server's back."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import httpx
import pytest
from sandboxio.audit import AuditConfig
from sandboxio.errors import SandboxGone
from sandboxio.models import Resources
from sandboxio.protocols import AsyncSandbox, Backend
from held_sockets import sockets_to
from sandboxio.testing.suite import BackendContractSuite, RecordingSink

from conftest import CANARY_IP, CANARY_SUBNET
from sandboxd import AsyncSandbox as SdkSandbox
from sandboxd import errors as sdk
from sandboxd.sandboxio_backend import SandboxdBackend, SandboxdSandbox

#: Processes of an idle sandbox: its init and the agent.
IDLE = ("sandboxd-agent", "docker-init", "tini", "sleep")


class Faults:
    """What the transport does to the real server's traffic, per procedure."""

    def __init__(self) -> None:
        self.hold: dict[str, float] = {}
        self.fail: set[str] = set()


class FaultyTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, which can hold an answer back or lose the connection."""

    def __init__(self, faults: Faults, inner: httpx.AsyncBaseTransport) -> None:
        self._faults = faults
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        procedure = request.url.path.rsplit("/", 1)[-1]
        if procedure in self._faults.fail:
            raise httpx.ConnectError(f"connection lost during {procedure}", request=request)
        response = await self._inner.handle_async_request(request)
        held = self._faults.hold.get(procedure)
        if held:
            await response.aread()
            await asyncio.sleep(held)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class FaultyBackend(SandboxdBackend):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.faults = Faults()

    def _transport(self, *, keep_alive: bool = True) -> httpx.AsyncBaseTransport:
        return FaultyTransport(self.faults, super()._transport(keep_alive=keep_alive))


_sink = RecordingSink()
_backend = FaultyBackend(audit=AuditConfig(sinks=(_sink,)), name_prefix=f"contract-{uuid.uuid4().hex[:6]}")


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


async def _info(sandbox_id: str) -> Any:
    sb = await SdkSandbox.connect(sandbox_id)
    try:
        return sb.info
    finally:
        await sb.close()


def _stray(container: str) -> list[str]:
    """What runs in the container beyond an idle sandbox's processes."""
    top = _docker("top", container, "-eo", "pid,args")
    assert top.returncode == 0, top.stderr
    rows = [line.split(None, 1)[-1] for line in top.stdout.splitlines()[1:] if line.strip()]
    return [r for r in rows if not any(i in r.split()[0] for i in IDLE)]


@pytest.fixture(scope="module", autouse=True)
def _live(server: Any) -> Iterator[None]:
    """The server is up for the suite; every sandbox the backend made is gone at the end."""
    yield
    leaked = [
        s
        for s in asyncio.run(SdkSandbox.list())
        if s.name.startswith(f"{_backend.name_prefix}-") and s.status == "running"
    ]
    assert not leaked, f"leaked {len(leaked)} sandboxes: {[s.sandbox_id for s in leaked]}"


@pytest.fixture(scope="module", autouse=True)
def _canary() -> Iterator[None]:
    """A web server on a Docker network made here: what the egress probe aims at, named
    `canary` for `allowlist` sandboxes through the server's `[egress] hosts`."""
    tag = uuid.uuid4().hex[:8]
    network = f"sandboxd-test-canary-{tag}"
    name = f"sandboxd-test-canary-{tag}"
    made = _docker("network", "create", "--label", "sandboxd.test=canary", "--subnet", CANARY_SUBNET, network)
    assert made.returncode == 0, made.stderr
    try:
        started = _docker(
            "run", "-d", "--name", name, "--label", "sandboxd.test=canary", "--network", network,
            "--ip", CANARY_IP, "sandboxd-local/debian:bookworm", "python3", "-m", "http.server", "80",
        )
        assert started.returncode == 0, started.stderr
        address = _docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name
        ).stdout.strip()
        # Reachable from the canary's network: a probe that fails elsewhere is the policy.
        probe = ["python3", "-c", f"import urllib.request; urllib.request.urlopen('http://{address}/', timeout=5)"]
        deadline = time.monotonic() + 20
        while True:
            reached = _docker("run", "--rm", "--network", network, "sandboxd-local/debian:bookworm", *probe)
            if reached.returncode == 0:
                break
            assert time.monotonic() < deadline, reached.stderr
            time.sleep(0.5)
        assert address == CANARY_IP, address
        TestSandboxdBackend.canary_host = "canary"
        yield
    finally:
        _docker("rm", "-f", name)
        _docker("network", "rm", network)


class TestSandboxdBackend(BackendContractSuite):
    backend: ClassVar[Backend] = _backend
    audit_sink: ClassVar[RecordingSink | None] = _sink
    allowlist_supported = True
    sandbox_timeout = 120.0
    short_timeout = 1.0
    settle = 0.5

    def cmd_egress(self, host: str) -> list[str]:
        code = f"import urllib.request; urllib.request.urlopen('http://{host}/', timeout=5); print('OK')"
        return ["python3", "-c", code]

    async def wait_until_busy(self, sb: AsyncSandbox) -> None:
        assert isinstance(sb, SandboxdSandbox)
        container = sb.native.info.container_id
        assert container
        deadline = time.monotonic() + 20
        while not await asyncio.to_thread(_stray, container):
            assert time.monotonic() < deadline, "nothing started in the sandbox"
            await asyncio.sleep(0.05)

    async def assert_no_orphans(self, sb: AsyncSandbox) -> None:
        assert isinstance(sb, SandboxdSandbox)
        info = await _info(sb.id)
        container = info.container_id or sb.native.info.container_id
        if sb._killed:
            assert info.status == "killed", info.status
            # The kill answers once the container is stopped; its removal follows.
            deadline = time.monotonic() + 10
            while _docker("inspect", container).returncode == 0:
                assert time.monotonic() < deadline, "a killed sandbox kept its container"
                await asyncio.sleep(0.1)
            return
        assert info.status == "running"
        # The server kills a command whose session ended; give it a moment to be gone.
        deadline = time.monotonic() + 5
        while stray := await asyncio.to_thread(_stray, container):
            assert time.monotonic() < deadline, f"processes survived in {sb.id}: {stray}"
            await asyncio.sleep(0.05)

    async def discard(self, sb: AsyncSandbox) -> None:
        await super().discard(sb)
        assert isinstance(sb, SandboxdSandbox)
        await sb.native.close()

    async def sandbox_count(self) -> int | None:
        listed = await SdkSandbox.list()
        return sum(
            1 for s in listed if s.name.startswith(f"{_backend.name_prefix}-") and s.status == "running"
        )

    async def applied_resources(self, sb: AsyncSandbox) -> Resources | None:
        assert isinstance(sb, SandboxdSandbox)
        inspected = _docker("inspect", "-f", "{{json .HostConfig}}", sb.native.info.container_id or "")
        host = json.loads(inspected.stdout)
        return Resources(cpu=host["NanoCpus"] / 1e9, memory_mb=host["Memory"] // (1024 * 1024))

    async def expire_sandbox(self, sb: AsyncSandbox) -> None:
        # The engine loses the container behind the server's back, as a crashed host or
        # an operator's `docker rm` would.
        assert isinstance(sb, SandboxdSandbox)
        assert _docker("rm", "-f", sb.native.info.container_id or "").returncode == 0

    @contextmanager
    def simulate_kill_hang(self) -> Iterator[None]:
        _backend.faults.hold["sandbox.kill"] = 3.0
        try:
            yield
        finally:
            _backend.faults.hold.pop("sandbox.kill", None)

    @contextmanager
    def simulate_kill_failure(self) -> Iterator[type[BaseException]]:
        _backend.faults.fail.add("sandbox.kill")
        try:
            yield sdk.ConnectionFailed
        finally:
            _backend.faults.fail.discard("sandbox.kill")

    @contextmanager
    def simulate_slow_create(self) -> Iterator[None]:
        _backend.faults.hold["sandbox.create"] = 2.5
        try:
            yield
        finally:
            _backend.faults.hold.pop("sandbox.create", None)

    @contextmanager
    def simulate_provider_failure(self) -> Iterator[type[BaseException]]:
        # An image the engine does not have and cannot pull (no registry is reachable).
        saved = _backend.template
        _backend.template = f"sandboxd-test/absent-{uuid.uuid4().hex[:8]}:none"
        try:
            yield sdk.SandboxdError
        finally:
            _backend.template = saved

    @contextmanager
    def simulate_missing_credential(self) -> Iterator[str]:
        saved = os.environ.pop("SANDBOXD_KEY")
        home = os.environ.get("XDG_CONFIG_HOME")
        os.environ["XDG_CONFIG_HOME"] = f"/nonexistent-{uuid.uuid4().hex}"
        try:
            yield "SANDBOXD_KEY"
        finally:
            os.environ["SANDBOXD_KEY"] = saved
            if home is None:
                os.environ.pop("XDG_CONFIG_HOME", None)
            else:
                os.environ["XDG_CONFIG_HOME"] = home

    async def provider_labels(self, sb: AsyncSandbox) -> Mapping[str, str] | None:
        return (await _info(sb.id)).labels


@pytest.mark.anyio
async def test_the_entry_point_and_the_dsn_reach_the_server(server: Any) -> None:
    import sandboxio

    async with await sandboxio.create("sandboxd://python", timeout=60) as sb:
        assert isinstance(sb, SandboxdSandbox)
        assert (await sb.run(["python3", "-c", "print(6*7)"])).stdout == "42\n"
    host = server.url.removeprefix("http://")
    saved = os.environ.pop("SANDBOXD_URL")
    try:
        async with await sandboxio.create(f"sandboxd://base@{host}", timeout=60) as sb:
            assert isinstance(sb, SandboxdSandbox)
            assert sb.native.info.template == "base"
            assert (await sb.run("echo via-dsn")).stdout == "via-dsn\n"
    finally:
        os.environ["SANDBOXD_URL"] = saved


@pytest.mark.anyio
async def test_reap_finds_the_backends_sandboxes_by_label_and_kills_them(server: Any) -> None:
    backend = SandboxdBackend(name_prefix=f"reap-{uuid.uuid4().hex[:6]}")
    sb = await backend.create(timeout=60, metadata={"tenant_id": "reap-test"})
    other = await backend.create(timeout=60, metadata={"tenant_id": "someone-else"})
    try:
        found = {m.sandbox_id: m for m in await backend.list_managed(labels={"tenant_id": "reap-test"})}
        assert list(found) == [sb.id]
        assert found[sb.id].labels == {"tenant_id": "reap-test"}
        assert found[sb.id].state == "running" and found[sb.id].created_at is not None
        again = await backend.connect(sb.id)
        assert again.labels == {"tenant_id": "reap-test"}
        assert await backend.kill_managed(sb.id) is True
        assert await backend.kill_managed(sb.id) is False
        assert {m.sandbox_id for m in await backend.list_managed()} == {other.id}
        await again.native.close()
    finally:
        await sb.kill()
        await other.kill()


@pytest.mark.anyio
async def test_the_lifetime_is_kept_below_the_servers_minimum(server: Any) -> None:
    sb = await _backend.create(timeout=2)
    async with sb:
        assert (await sb.run("echo alive")).stdout == "alive\n"
        await asyncio.sleep(2.2)
        with pytest.raises(SandboxGone, match="lifetime"):
            await sb.run("echo late")
        assert (await _info(sb.id)).status == "killed"


@pytest.mark.anyio
async def test_commands_keep_their_session_and_a_dropped_handle_keeps_nothing_open(server: Any) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    backend = SandboxdBackend(name_prefix=f"sockets-{uuid.uuid4().hex[:6]}")
    sb = await backend.create(timeout=60)
    try:
        assert (await sb.run("true")).exit_code == 0
        kept = sb.native.commands._sessions._idle
        assert kept is not None, "the exec session is kept after a command"
        for _ in range(3):
            assert (await sb.run("echo again")).stdout == "again\n"
        assert sb.native.commands._sessions._idle is kept, "and reused by the next"
        held = sockets_to(port)
        assert 1 <= held <= 3

        # A handle `connect` gave holds no socket between calls: it may be dropped
        # without a kill or a close.
        again = await backend.connect(sb.id)
        assert (await again.run("echo from-another-handle")).stdout == "from-another-handle\n"
        assert again.native.commands._sessions._idle is None
        assert sockets_to(port) == held
        del again
        gc.collect()
        assert sockets_to(port) == held
    finally:
        await sb.kill()
    for _ in range(50):
        if sockets_to(port) == 0:
            break
        await asyncio.sleep(0.02)
    assert sockets_to(port) == 0, "a killed sandbox keeps no connection or session"
