"""`AsyncSandbox`: one sandbox, made or found through a server."""

from __future__ import annotations

import asyncio
import os
import posixpath
import tempfile
import re
import warnings
from pathlib import Path
from types import TracebackType
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

from ._code import AsyncCode, Context, Execution
from ._commands import AsyncCommands
from ._egress import AsyncEgress
from ._config import resolve
from ._files import AsyncFiles
from ._http import Connection
from ._ports import AsyncPorts
from ._pty import AsyncPty
from .errors import NotFound
from .models import (
    ActivityEntry,
    ActivityPage,
    Changes,
    Egress,
    MetricReading,
    SandboxInfo,
    SandboxStats,
    SnapshotInfo,
    VolumeInfo,
    VolumeMount,
)


async def _default_environment(conn: Connection) -> str:
    """The first environment the key can see, asked once per server and key."""
    if conn.environment is not None:
        return conn.environment
    projects = await conn.call("project.all", query={})
    for project in projects:
        for environment in project.get("environments", []):
            conn.environment = str(environment["environmentId"])
            return conn.environment
    from .errors import ConfigurationError

    raise ConfigurationError("no environment to create in: make a project first")


#: Clean-ups of creates given up on, kept until done.
_pending: set[asyncio.Future[None]] = set()

#: How long a create given up on is waited for before its connection is dropped.
ABANDON_WAIT = 60.0


async def abandon_create(
    made: asyncio.Future[AsyncSandbox], conn: Connection, *, wait: float = ABANDON_WAIT
) -> None:
    """Kills the sandbox a create given up on makes, once the server answers (within
    `wait` seconds); the connection is closed either way."""
    try:
        async with asyncio.timeout(wait):
            sandbox = await made
            await sandbox.kill()
    except BaseException:
        made.cancel()
    finally:
        await conn.close()


_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _mounts_body(
    volumes: Mapping[str, VolumeInfo | str] | Sequence[VolumeMount] | None,
) -> list[dict[str, Any]] | None:
    """The `volumes` of a create: a mapping of path to volume (read-write), or mounts."""
    if not volumes:
        return None
    if isinstance(volumes, VolumeMount):
        volumes = [volumes]
    if isinstance(volumes, Mapping):
        return [VolumeMount(volume, path).to_json() for path, volume in volumes.items()]
    if isinstance(volumes, (str, bytes)) or not all(isinstance(m, VolumeMount) for m in volumes):
        raise TypeError(
            "volumes: give {path: volume} or a list of VolumeMount(volume, path, read_only)"
        )
    return [mount.to_json() for mount in volumes]


def _env_text(env: dict[str, str]) -> str | None:
    """`env` as the server's `KEY=value` lines; a value the lines cannot carry whole
    (a line break, a NUL, whitespace at its end, which the server trims) is refused."""
    from .errors import ConfigurationError

    for key, value in env.items():
        if not _ENV_KEY.fullmatch(key):
            raise ConfigurationError(f"env key {key!r} must match [A-Za-z_][A-Za-z0-9_]*")
        if any(c in value for c in "\r\n\0") or value != value.rstrip():
            raise ConfigurationError(
                f"the value of {key} cannot be carried whole: no line breaks, NUL or "
                "trailing whitespace (write such a value to a file instead)"
            )
    return "\n".join(f"{k}={v}" for k, v in env.items()) or None


class AsyncSandbox:
    """A sandbox. `async with await AsyncSandbox.create(...) as sb:` kills it at the
    end of the block, however the block ends."""

    def __init__(self, conn: Connection, info: SandboxInfo) -> None:
        self._conn = conn
        self.info = info
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)
        self.pty = AsyncPty(self)
        self.ports = AsyncPorts(self)
        self.egress = AsyncEgress(self)
        self._code = AsyncCode(self)

    def __repr__(self) -> str:
        return f"AsyncSandbox({self.id!r}, status={self.info.status!r})"

    @property
    def id(self) -> str:
        return self.info.sandbox_id

    @classmethod
    async def create(
        cls,
        template: str | None = None,
        *,
        image: str | None = None,
        name: str | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        network: Literal["isolated", "internet"] | Egress | None = None,
        cpu: float | None = None,
        memory_mb: int | None = None,
        pids_limit: int | None = None,
        workdir: str | None = None,
        environment_id: str | None = None,
        server_id: str | None = None,
        labels: dict[str, str] | None = None,
        auto_pause: bool | Literal["ram", "disk"] | None = None,
        paused_timeout: float | None = None,
        fixed_timeout: bool | None = None,
        snapshot: SnapshotInfo | str | None = None,
        volumes: Mapping[str, VolumeInfo | str] | Sequence[VolumeMount] | None = None,
        isolation: Literal["container", "gvisor"] | None = None,
        url: str | None = None,
        key: str | None = None,
    ) -> AsyncSandbox:
        """Creates a running sandbox from `template` (`base`, `python`, `node`),
        `image`, or `snapshot` (a `SnapshotInfo` or its id: its files, user and
        workdir, on its server). `timeout` is its idle timeout in seconds (every operation extends it);
        `env` its environment (stored encrypted, never returned); `labels` are kept
        with it and returned (who it is for, which session made it). Without
        `environment_id`, the first environment the key can see. With `auto_pause`,
        the idle timeout pauses it instead of killing it (any later call resumes it) and
        it is killed after `paused_timeout` seconds paused (default 24 h);
        `auto_pause="disk"` (with `isolation="gvisor"`) saves its processes to the
        host's disk then. With
        `fixed_timeout`, it ends `timeout` seconds after it is made (or its timeout last
        set) whatever it does, instead of after its last activity. `volumes`
        mounts volumes: `{"/data": volume}` read-write, or a list of `VolumeMount`
        (with `read_only`); the sandbox runs on their server. `isolation` is
        `"container"` (runc) or `"gvisor"` (gVisor's user-space kernel, where the server
        offers it; no `internet` network); the server's default when `None`."""
        conn = Connection(resolve(url, key))
        made: asyncio.Future[AsyncSandbox] | None = None
        try:
            made = asyncio.ensure_future(cls.create_on(
                conn,
                template,
                image=image,
                name=name,
                timeout=timeout,
                env=env,
                network=network,
                cpu=cpu,
                memory_mb=memory_mb,
                pids_limit=pids_limit,
                workdir=workdir,
                environment_id=environment_id,
                server_id=server_id,
                labels=labels,
                auto_pause=auto_pause,
                paused_timeout=paused_timeout,
                fixed_timeout=fixed_timeout,
                snapshot=snapshot,
                volumes=volumes,
                isolation=isolation,
            ))
            # Shielded: a caller that gives up does not stop the request, so the
            # sandbox it makes is known and killed rather than left to its timeout.
            return await asyncio.shield(made)
        except asyncio.CancelledError:
            if made is not None:
                cleanup = asyncio.ensure_future(abandon_create(made, conn))
                _pending.add(cleanup)
                cleanup.add_done_callback(_pending.discard)
            else:
                await conn.close()
            raise
        except BaseException:
            await conn.close()
            raise

    @classmethod
    async def create_on(
        cls,
        conn: Connection,
        template: str | None = None,
        *,
        image: str | None = None,
        name: str | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        network: Literal["isolated", "internet"] | Egress | None = None,
        cpu: float | None = None,
        memory_mb: int | None = None,
        pids_limit: int | None = None,
        workdir: str | None = None,
        environment_id: str | None = None,
        server_id: str | None = None,
        labels: dict[str, str] | None = None,
        auto_pause: bool | Literal["ram", "disk"] | None = None,
        paused_timeout: float | None = None,
        fixed_timeout: bool | None = None,
        snapshot: SnapshotInfo | str | None = None,
        volumes: Mapping[str, VolumeInfo | str] | Sequence[VolumeMount] | None = None,
        isolation: Literal["container", "gvisor"] | None = None,
    ) -> AsyncSandbox:
        """`create` through a connection the caller made (the sandbox then owns it)."""
        env_vars = _env_text(env or {})
        remembered = environment_id is None and conn.environment is not None
        environment = environment_id or await _default_environment(conn)
        body: dict[str, Any] = {
            "environmentId": environment,
            "template": template,
            "image": image,
            "name": name,
            "timeoutMs": None if timeout is None else int(timeout * 1000),
            "envVars": env_vars,
            "networkMode": "allowlist" if isinstance(network, Egress) else network,
            "egress": _egress_body(network) if isinstance(network, Egress) else None,
            "cpu": cpu,
            "memoryMb": memory_mb,
            "pidsLimit": pids_limit,
            "workdir": workdir,
            "serverId": server_id,
            "labels": labels or None,
            "autoPause": auto_pause,
            "pausedTimeoutMs": None if paused_timeout is None else int(paused_timeout * 1000),
            "fixedTimeout": fixed_timeout,
            "snapshotId": snapshot.snapshot_id if isinstance(snapshot, SnapshotInfo) else snapshot,
            "volumes": _mounts_body(volumes),
            "isolation": isolation,
        }
        try:
            created = await conn.call("sandbox.create", body, timeout=600)
        except NotFound:
            if not remembered:
                raise
            # The environment remembered from an earlier create is gone: ask again.
            conn.environment = None
            body["environmentId"] = await _default_environment(conn)
            created = await conn.call("sandbox.create", body, timeout=600)
        return cls(conn, SandboxInfo.from_json(created))

    @classmethod
    async def connect(
        cls, sandbox_id: str, *, url: str | None = None, key: str | None = None
    ) -> AsyncSandbox:
        """The sandbox `sandbox_id` (`NotFound` when the key cannot see it)."""
        conn = Connection(resolve(url, key))
        try:
            return await cls.connect_on(conn, sandbox_id)
        except BaseException:
            await conn.close()
            raise

    @classmethod
    async def connect_on(cls, conn: Connection, sandbox_id: str) -> AsyncSandbox:
        """`connect` through a connection the caller made (the sandbox then owns it)."""
        info = await conn.call("sandbox.one", query={"sandboxId": sandbox_id})
        return cls(conn, SandboxInfo.from_json(info))

    @staticmethod
    async def list(
        *,
        environment_id: str | None = None,
        project_id: str | None = None,
        url: str | None = None,
        key: str | None = None,
    ) -> list[SandboxInfo]:
        """The sandboxes of an environment or project (the default environment when
        neither is given), newest first."""
        conn = Connection(resolve(url, key))
        try:
            if environment_id is None and project_id is None:
                environment_id = await _default_environment(conn)
            listed = await conn.call(
                "sandbox.list",
                query={"environmentId": environment_id, "projectId": project_id},
            )
        finally:
            await conn.close()
        return [SandboxInfo.from_json(s) for s in listed]

    def _absolute(self, path: str) -> str:
        """`path` under the sandbox's workdir when relative."""
        if path.startswith("/"):
            return posixpath.normpath(path)
        return posixpath.normpath(posixpath.join(self.info.workdir, path))

    def get_host(self, port: int) -> str:
        """The address of `port`'s preview (what listens on `127.0.0.1:<port>` inside
        the sandbox): reached with this key, or by anyone once `ports.expose(port,
        public=True)`; `ports.expose(port)` gives a signed link to hand to a person."""
        return self.ports.url(port)

    async def refresh(self) -> SandboxInfo:
        """The sandbox's record as it is now."""
        self.info = SandboxInfo.from_json(
            await self._conn.call("sandbox.one", query={"sandboxId": self.id})
        )
        return self.info

    async def stats(self) -> SandboxStats:
        """CPU, memory and processes the sandbox uses now, against its limits."""
        return SandboxStats.from_json(
            await self._conn.call("sandbox.stats", query={"sandboxId": self.id})
        )

    async def metrics(
        self, *, start: str | None = None, end: str | None = None
    ) -> list[MetricReading]:
        """The sandbox's readings over time (CPU, memory, processes every 5 s; the last
        hour of them kept while it runs), oldest first, from `start` to `end` (RFC 3339
        times, both included)."""
        query = {"sandboxId": self.id}
        if start is not None:
            query["from"] = start
        if end is not None:
            query["to"] = end
        answer = await self._conn.call("sandbox.metrics", query=query)
        return [MetricReading.from_json(r) for r in answer.get("readings", [])]

    async def activity(
        self,
        *,
        kinds: Sequence[str] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        latest: bool = False,
    ) -> ActivityPage:
        """What was done in the sandbox, in the order it was written, newest last:
        commands with their exit codes and the first and last lines of their output,
        files, terminals, ports and its life, each with who asked. `kinds` narrows it
        (`["command"]`), `latest=True` gives the newest `limit` (1-500, default 100);
        pass `next_cursor` back as `cursor` to read only what came after. Readable
        after the sandbox ended, for the server's retention (a week by default)."""
        query: dict[str, Any] = {"sandboxId": self.id}
        if kinds:
            query["kinds"] = ",".join(kinds)
        if cursor is not None:
            query["cursor"] = cursor
        if limit is not None:
            query["limit"] = limit
        if latest:
            query["latest"] = "true"
        answer = await self._conn.call("sandbox.activity", query=query)
        return ActivityPage(
            entries=[ActivityEntry.from_json(e) for e in answer.get("entries") or []],
            next_cursor=answer.get("nextCursor"),
            more=bool(answer.get("more")),
            dropped=int(answer.get("dropped") or 0),
        )

    async def recording(self, terminal_id: str) -> str:
        """A terminal session's recording as asciicast v2 text (the `terminalId` of its
        `terminal` entry in `activity()`): what it printed with its timing, secrets
        masked; `asciinema play` replays it."""
        answer = await self._conn.call(
            "sandbox.recording", query={"sandboxId": self.id, "terminalId": terminal_id}
        )
        return str(answer.get("cast") or "")

    async def follow_activity(
        self,
        *,
        kinds: Sequence[str] | None = None,
        cursor: str | None = None,
        every: float = 0.5,
    ) -> AsyncIterator[ActivityEntry]:
        """The timeline's entries as they are written, from `cursor` (from the oldest
        kept when `None`), until the loop stops: `async for entry in
        sb.follow_activity(kinds=["command"]): ...`. Asks every `every` seconds when
        nothing new is there."""
        while True:
            page = await self.activity(kinds=kinds, cursor=cursor, limit=500)
            for entry in page.entries:
                yield entry
            cursor = page.next_cursor or cursor
            if not page.more:
                await asyncio.sleep(every)

    async def set_timeout(self, timeout: float) -> SandboxInfo:
        """A new idle timeout in seconds, counted from now."""
        await self._conn.call(
            "sandbox.setTimeout", {"sandboxId": self.id, "timeoutMs": int(timeout * 1000)}
        )
        return await self.refresh()

    async def run_code(
        self, code: str, *, context: Context | str | None = None, timeout: float = 60
    ) -> Execution:
        """Runs Python `code` in an interpreter that keeps its state: `context` (from
        `create_context`), or this sandbox's default context, made on first use. The
        value of a final expression comes back as `result` (its `repr()`), an exception
        as `error`; at `timeout` seconds the run is interrupted and the context kept."""
        return await self._code.run(code, context=context, timeout=timeout)

    async def create_context(self, language: str = "python") -> Context:
        """A new interpreter context, with state of its own."""
        return await self._code.create_context(language)

    async def remove_context(self, context: Context | str) -> None:
        """Ends a context."""
        await self._code.remove_context(context)

    async def pause(self, *, memory: Literal["ram", "disk"] = "ram") -> SandboxInfo:
        """Pauses the sandbox: its processes and memory are kept, it uses no CPU. Any
        later call on it (or `resume`) resumes it first. Pausing it again is fine.

        `memory="disk"` (a sandbox of the `gvisor` tier) saves its processes with their
        memory to the host's disk and stops its container: it holds no memory while
        paused and outlives a restart of the server or the host; a resume restores the
        same processes. A sandbox paused in memory moves to disk when asked."""
        if memory not in ("ram", "disk"):
            raise ValueError(f'memory must be "ram" or "disk", not {memory!r}')
        self.info = SandboxInfo.from_json(
            await self._conn.call("sandbox.pause", {"sandboxId": self.id, "memory": memory})
        )
        return self.info

    async def resume(self) -> SandboxInfo:
        """Thaws a paused sandbox (a running one is left as it is)."""
        self.info = SandboxInfo.from_json(
            await self._conn.call("sandbox.resume", {"sandboxId": self.id})
        )
        return self.info

    async def changes(self, *, all: bool = False) -> Changes:
        """The files the sandbox added, changed and removed since its template or
        snapshot, under its workdir, `/tmp` and `/var/tmp` (`all=True`: everywhere),
        with their types and sizes."""
        return Changes.from_json(
            await self._conn.call(
                "sandbox.changes",
                query={"sandboxId": self.id, "all": "true" if all else "false"},
            )
        )

    async def download_changes(
        self, local: str | os.PathLike[str], *, all: bool = False
    ) -> Path:
        """Streams what `changes()` lists into the tar file `local` (written under a
        temporary name, renamed once whole): added and changed files, new directories,
        links, and a `.wh.<name>` entry for each removed path, named from the root. The
        path written."""
        target = Path(local)
        response = await self._conn.stream(
            "GET",
            "sandbox.download",
            query={"sandboxId": self.id, "changes": "true", "all": "true" if all else "false"},
        )
        try:
            parent = target.parent if str(target.parent) else Path(".")
            fd, temp = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.")
            try:
                with os.fdopen(fd, "wb") as out:
                    async for chunk in response.aiter_raw(1 << 20):
                        await asyncio.to_thread(out.write, chunk)
                os.replace(temp, target)
            finally:
                if os.path.exists(temp):
                    os.unlink(temp)
        finally:
            await response.aclose()
        return target

    async def snapshot(self, name: str | None = None, *, memory: bool = False) -> SnapshotInfo:
        """Keeps the sandbox's files as a snapshot (the sandbox is frozen for the
        moment it takes); `create(snapshot=...)` starts sandboxes from it. Its
        environment variables are not kept. `memory=True` (a sandbox of the gvisor
        tier) keeps its processes and their memory too: sandboxes started from the
        snapshot continue them."""
        body: dict[str, Any] = {"sandboxId": self.id}
        if name is not None:
            body["name"] = name
        if memory:
            body["memory"] = True
        return SnapshotInfo.from_json(await self._conn.call("sandbox.snapshot", body, timeout=600))

    async def fork(
        self,
        count: int = 1,
        *,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        memory: bool = False,
    ) -> list[AsyncSandbox]:
        """`count` (1–20) new sandboxes that start with this one's files, limits,
        network and labels, not its environment variables (`env` gives theirs).
        `memory=True` (a sandbox of the gvisor tier): each also continues this one's
        processes, with their memory, from one instant. `timeout`: their idle timeout
        in seconds (default this one's). The snapshot taken is kept
        (`list_snapshots`)."""
        body: dict[str, Any] = {"sandboxId": self.id, "count": count}
        if memory:
            body["memory"] = True
        if env:
            body["envVars"] = _env_text(env)
        if timeout is not None:
            body["timeoutMs"] = int(timeout * 1000)
        forked = await self._conn.call("sandbox.fork", body, timeout=600)
        return [
            type(self)(Connection(self._conn.target), SandboxInfo.from_json(s))
            for s in forked["sandboxes"]
        ]

    @staticmethod
    async def list_snapshots(*, url: str | None = None, key: str | None = None) -> list[SnapshotInfo]:
        """The snapshots the key can see, newest first."""
        conn = Connection(resolve(url, key))
        try:
            listed = await conn.call("snapshot.all")
        finally:
            await conn.close()
        return [SnapshotInfo.from_json(s) for s in listed]

    @staticmethod
    async def remove_snapshot(
        snapshot: SnapshotInfo | str, *, url: str | None = None, key: str | None = None
    ) -> None:
        """Removes a snapshot (refused with `Conflict` while sandboxes made from it
        run)."""
        snapshot_id = snapshot.snapshot_id if isinstance(snapshot, SnapshotInfo) else snapshot
        conn = Connection(resolve(url, key))
        try:
            await conn.call("snapshot.remove", {"snapshotId": snapshot_id})
        finally:
            await conn.close()

    @staticmethod
    async def create_volume(
        name: str,
        *,
        size_mb: int | None = None,
        project_id: str | None = None,
        server_id: str | None = None,
        url: str | None = None,
        key: str | None = None,
    ) -> VolumeInfo:
        """Makes a volume `name` (unique in the organization) on `server_id` (default:
        the local engine). `size_mb` is reserved against the organization's quota."""
        body = {"name": name, "sizeMb": size_mb, "projectId": project_id, "serverId": server_id}
        conn = Connection(resolve(url, key))
        try:
            made = await conn.call("volume.create", body)
        finally:
            await conn.close()
        return VolumeInfo.from_json(made)

    @staticmethod
    async def list_volumes(*, url: str | None = None, key: str | None = None) -> list[VolumeInfo]:
        """The volumes the key can see, by name, with the sandboxes that mount each."""
        conn = Connection(resolve(url, key))
        try:
            listed = await conn.call("volume.all")
        finally:
            await conn.close()
        return [VolumeInfo.from_json(v) for v in listed]

    @staticmethod
    async def get_volume(
        volume_id: str, *, url: str | None = None, key: str | None = None
    ) -> VolumeInfo:
        """One volume (`NotFound` when the key cannot see it)."""
        conn = Connection(resolve(url, key))
        try:
            return VolumeInfo.from_json(await conn.call("volume.one", query={"volumeId": volume_id}))
        finally:
            await conn.close()

    @staticmethod
    async def remove_volume(
        volume: VolumeInfo | str, *, url: str | None = None, key: str | None = None
    ) -> None:
        """Removes a volume and what is in it (refused with `Conflict` while a sandbox
        mounts it)."""
        volume_id = volume.volume_id if isinstance(volume, VolumeInfo) else volume
        conn = Connection(resolve(url, key))
        try:
            await conn.call("volume.remove", {"volumeId": volume_id})
        finally:
            await conn.close()

    async def kill(self) -> None:
        """Kills the sandbox (its record stays, `killed`). Killing it again is fine."""
        await self._conn.call("sandbox.kill", {"sandboxId": self.id})
        self.info = SandboxInfo.from_json({**self.info.raw, "status": "killed"})
        # Nothing of a killed sandbox is kept open: its sessions and its share of the
        # connection go (a later call takes a share again).
        await self.close()

    async def close(self) -> None:
        """Lets go of the connection and of the sessions kept open (the sandbox keeps
        running)."""
        try:
            await self.commands._sessions.close()
        finally:
            await self._conn.close()

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            await self.kill()
        except Exception:
            # The block's own error is the one to see; a failed kill alone is raised.
            if error is None:
                raise
            warnings.warn(f"sandbox {self.id} could not be killed; `sandboxd reap` finds it", stacklevel=2)
        finally:
            await self.close()


def _egress_body(network: Egress) -> dict[str, Any]:
    body: dict[str, Any] = {"allow": list(network.allow)}
    if network.credentials:
        body["credentials"] = [
            {"host": c.host, "header": c.header, "value": c.value} for c in network.credentials
        ]
    return body
