"""The sync API: the same objects as the async one, each call waiting for its result.
Output callbacks are called on the SDK's own thread, as each chunk arrives."""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from collections.abc import Iterator, Sequence
from typing import Any, Literal, overload

from . import _portal
from ._code import Context, Execution
from ._commands import AsyncCommandStream, AsyncProcess, OutputCallback, OutputChunk
from ._pty import AsyncTerminal
from ._sandbox import AsyncSandbox
from .models import (
    ActivityEntry,
    ActivityPage,
    Changes,
    CommandResult,
    EgressLog,
    EgressRequest,
    EntryInfo,
    ExposedPort,
    FileChange,
    MetricReading,
    OutputSlice,
    ProcessInfo,
    SandboxInfo,
    SandboxStats,
    SnapshotInfo,
    VolumeInfo,
)


class Process:
    """A background process in a sandbox."""

    def __init__(self, inner: AsyncProcess) -> None:
        self._inner = inner

    def __repr__(self) -> str:
        return f"Process({self.id!r}, pid={self.pid})"

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def pid(self) -> int:
        return self._inner.pid

    @property
    def info(self) -> ProcessInfo:
        return self._inner.info

    def wait(self, timeout: float | None = None) -> CommandResult:
        """Waits for the process to end; its exit code and kept output."""
        return _portal.run(self._inner.wait(timeout))

    def output(self, stream: Literal["stdout", "stderr"] = "stdout", offset: int = 0) -> OutputSlice:
        """The stream's bytes from `offset`."""
        return _portal.run(self._inner.output(stream, offset))

    def send_stdin(self, data: str | bytes, *, close: bool = False) -> int:
        """Writes to the process's standard input."""
        return _portal.run(self._inner.send_stdin(data, close=close))

    def close_stdin(self) -> None:
        _portal.run(self._inner.close_stdin())

    def signal(self, signal: str = "TERM") -> ProcessInfo:
        return _portal.run(self._inner.signal(signal))

    def kill(self) -> ProcessInfo:
        return _portal.run(self._inner.kill())


class CommandStream:
    """A command whose output is read as it comes; see `AsyncCommands.stream`."""

    def __init__(self, inner: AsyncCommandStream) -> None:
        self._inner = inner
        self._chunks: Any = None

    def __enter__(self) -> CommandStream:
        _portal.run(self._inner.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._chunks is not None:
            _portal.run(self._chunks.aclose())
        _portal.run(self._inner.aclose())

    def __iter__(self) -> Iterator[OutputChunk]:
        self._chunks = self._inner.__aiter__()
        while True:
            try:
                yield _portal.run(self._chunks.__anext__())
            except StopAsyncIteration:
                return

    @property
    def result(self) -> CommandResult | None:
        return self._inner.result

    def wait(self) -> CommandResult:
        return _portal.run(self._inner.wait())


class Terminal:
    """A terminal in a sandbox; see `AsyncTerminal`."""

    def __init__(self, inner: AsyncTerminal) -> None:
        self._inner = inner

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def exit_code(self) -> int | None:
        return self._inner.exit_code

    def send(self, keys: str | bytes) -> None:
        _portal.run(self._inner.send(keys))

    def resize(self, cols: int, rows: int) -> None:
        _portal.run(self._inner.resize(cols, rows))

    def read(self, timeout: float | None = None) -> bytes:
        return _portal.run(self._inner.read(timeout))

    def read_until(self, text: str | bytes, timeout: float = 30) -> bytes:
        return _portal.run(self._inner.read_until(text, timeout))

    def __iter__(self) -> Iterator[bytes]:
        while chunk := self.read():
            yield chunk

    def wait(self, timeout: float | None = None) -> int:
        return _portal.run(self._inner.wait(timeout))

    def close(self) -> None:
        _portal.run(self._inner.close())


class Pty:
    """`sandbox.pty`: terminals in the sandbox."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._pty = sandbox.pty

    def open(self, *, cols: int = 80, rows: int = 24, cmd: str | None = None) -> Terminal:
        """See `AsyncPty.open`."""
        return Terminal(_portal.run(self._pty.open(cols=cols, rows=rows, cmd=cmd)))


class Commands:
    """`sandbox.commands`: run commands in the sandbox."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sandbox = sandbox

    @overload
    def run(
        self,
        cmd: str,
        *,
        background: Literal[False] = False,
        timeout: float = 60,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        stdin: bool = False,
    ) -> CommandResult: ...

    @overload
    def run(
        self,
        cmd: str,
        *,
        background: Literal[True],
        timeout: float = 60,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        stdin: bool = False,
    ) -> Process: ...

    def run(self, cmd: str, *, background: bool = False, **options: Any) -> CommandResult | Process:
        """See `AsyncCommands.run`."""
        outcome = _portal.run(self._sandbox.commands.run(cmd, background=background, **options))  # type: ignore[call-overload]
        return Process(outcome) if isinstance(outcome, AsyncProcess) else outcome

    def stream(
        self,
        cmd: str,
        *,
        timeout: float = 60,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> CommandStream:
        """See `AsyncCommands.stream`."""
        return CommandStream(self._sandbox.commands.stream(cmd, timeout=timeout, cwd=cwd, env=env))

    def list(self) -> list[ProcessInfo]:
        return _portal.run(self._sandbox.commands.list())


class Watch:
    """A watch of a directory; see `AsyncFiles.watch`. `with sb.files.watch(p) as
    changes: for change in changes: ...`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._changes: Any = None

    @property
    def lost(self) -> int:
        return self._inner.lost

    def __enter__(self) -> Watch:
        _portal.run(self._inner.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._changes is not None:
            _portal.run(self._changes.aclose())
        _portal.run(self._inner.aclose())

    def __iter__(self) -> Iterator[FileChange]:
        self._changes = self._inner.__aiter__()
        while True:
            try:
                yield _portal.run(self._changes.__anext__())
            except StopAsyncIteration:
                return


class Files:
    """`sandbox.files`: the sandbox's files. Relative paths are under its workdir."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._files = sandbox.files

    def write(self, path: str, data: str | bytes, *, mode: int | None = None) -> None:
        _portal.run(self._files.write(path, data, mode=mode))

    def read(self, path: str) -> bytes:
        return _portal.run(self._files.read(path))

    def read_text(self, path: str) -> str:
        return _portal.run(self._files.read_text(path))

    def list(self, path: str = ".") -> list[EntryInfo]:
        return _portal.run(self._files.list(path))

    def upload(self, local: str | os.PathLike[str], remote: str) -> dict[str, Any]:
        return _portal.run(self._files.upload(local, remote))

    def download(self, remote: str, local: str | os.PathLike[str]) -> Path:
        return _portal.run(self._files.download(remote, local))

    def watch(self, path: str = ".", *, recursive: bool = False) -> Watch:
        """See `AsyncFiles.watch`."""
        return Watch(self._files.watch(path, recursive=recursive))


class Ports:
    """`sb.ports`: a sandbox's ports as preview URLs."""

    def __init__(self, inner: AsyncSandbox) -> None:
        self._inner = inner.ports

    def expose(self, port: int, *, public: bool = False, ttl: float | None = None) -> ExposedPort:
        """See `AsyncPorts.expose`."""
        return _portal.run(self._inner.expose(port, public=public, ttl=ttl))

    def list(self) -> list[ExposedPort]:
        return _portal.run(self._inner.list())

    def unexpose(self, port: int) -> bool:
        return _portal.run(self._inner.unexpose(port))

    def url(self, port: int) -> str:
        return self._inner.url(port)


class SandboxEgress:
    """`sb.egress`: what an `allowlist` sandbox may reach."""

    def __init__(self, inner: AsyncSandbox) -> None:
        self._inner = inner.egress

    def set(self, allow: list[str]) -> list[str]:
        """See `AsyncEgress.set`."""
        return _portal.run(self._inner.set(allow))

    def list(self) -> list[str]:
        return _portal.run(self._inner.list())

    def log(self, cursor: str | None = None, limit: int | None = None) -> EgressLog:
        """See `AsyncEgress.log`."""
        return _portal.run(self._inner.log(cursor, limit))

    def request(self, host: str, reason: str | None = None) -> EgressRequest:
        """See `AsyncEgress.request`."""
        return _portal.run(self._inner.request(host, reason))

    def requests(self, all: bool = False) -> list[EgressRequest]:
        """See `AsyncEgress.requests`."""
        return _portal.run(self._inner.requests(all))

    def decide(self, request_id: str, approve: bool) -> EgressRequest:
        """See `AsyncEgress.decide`."""
        return _portal.run(self._inner.decide(request_id, approve))


class Sandbox:
    """A sandbox. `with Sandbox.create(...) as sb:` kills it at the end of the block,
    however the block ends."""

    def __init__(self, inner: AsyncSandbox) -> None:
        self._inner = inner
        self.commands = Commands(inner)
        self.files = Files(inner)
        self.pty = Pty(inner)
        self.ports = Ports(inner)
        self.egress = SandboxEgress(inner)

    def __repr__(self) -> str:
        return f"Sandbox({self.id!r}, status={self.info.status!r})"

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def info(self) -> SandboxInfo:
        return self._inner.info

    @classmethod
    def create(cls, template: str | None = None, **options: Any) -> Sandbox:
        """See `AsyncSandbox.create`."""
        return cls(_portal.run(AsyncSandbox.create(template, **options)))

    @classmethod
    def connect(cls, sandbox_id: str, *, url: str | None = None, key: str | None = None) -> Sandbox:
        return cls(_portal.run(AsyncSandbox.connect(sandbox_id, url=url, key=key)))

    @staticmethod
    def list(**options: Any) -> list[SandboxInfo]:
        return _portal.run(AsyncSandbox.list(**options))

    def get_host(self, port: int) -> str:
        """See `AsyncSandbox.get_host`."""
        return self._inner.get_host(port)

    def refresh(self) -> SandboxInfo:
        return _portal.run(self._inner.refresh())

    def activity(
        self,
        *,
        kinds: Sequence[str] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        latest: bool = False,
    ) -> ActivityPage:
        """See `AsyncSandbox.activity`."""
        return _portal.run(
            self._inner.activity(kinds=kinds, cursor=cursor, limit=limit, latest=latest)
        )

    def recording(self, terminal_id: str) -> str:
        """See `AsyncSandbox.recording`."""
        return _portal.run(self._inner.recording(terminal_id))

    def follow_activity(
        self,
        *,
        kinds: Sequence[str] | None = None,
        cursor: str | None = None,
        every: float = 0.5,
    ) -> Iterator[ActivityEntry]:
        """See `AsyncSandbox.follow_activity`: `for entry in sb.follow_activity(): ...`."""
        entries = self._inner.follow_activity(kinds=kinds, cursor=cursor, every=every)
        try:
            while True:
                yield _portal.run(entries.__anext__())
        finally:
            _portal.run(entries.aclose())

    def set_timeout(self, timeout: float) -> SandboxInfo:
        return _portal.run(self._inner.set_timeout(timeout))

    def stats(self) -> SandboxStats:
        """See `AsyncSandbox.stats`."""
        return _portal.run(self._inner.stats())

    def metrics(
        self, *, start: str | None = None, end: str | None = None
    ) -> list[MetricReading]:
        """See `AsyncSandbox.metrics`."""
        return _portal.run(self._inner.metrics(start=start, end=end))

    def run_code(
        self, code: str, *, context: Context | str | None = None, timeout: float = 60
    ) -> Execution:
        """See `AsyncSandbox.run_code`."""
        return _portal.run(self._inner.run_code(code, context=context, timeout=timeout))

    def create_context(self, language: str = "python") -> Context:
        return _portal.run(self._inner.create_context(language))

    def remove_context(self, context: Context | str) -> None:
        _portal.run(self._inner.remove_context(context))

    def pause(self, *, memory: Literal["ram", "disk"] = "ram") -> SandboxInfo:
        """See `AsyncSandbox.pause`."""
        return _portal.run(self._inner.pause(memory=memory))

    def resume(self) -> SandboxInfo:
        """See `AsyncSandbox.resume`."""
        return _portal.run(self._inner.resume())

    def changes(self, *, all: bool = False) -> Changes:
        """See `AsyncSandbox.changes`."""
        return _portal.run(self._inner.changes(all=all))

    def download_changes(self, local: str | os.PathLike[str], *, all: bool = False) -> Path:
        """See `AsyncSandbox.download_changes`."""
        return _portal.run(self._inner.download_changes(local, all=all))

    def snapshot(self, name: str | None = None, *, memory: bool = False) -> SnapshotInfo:
        """See `AsyncSandbox.snapshot`."""
        return _portal.run(self._inner.snapshot(name, memory=memory))

    def fork(
        self,
        count: int = 1,
        *,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        memory: bool = False,
    ) -> list[Sandbox]:
        """See `AsyncSandbox.fork`."""
        forks = _portal.run(self._inner.fork(count, env=env, timeout=timeout, memory=memory))
        return [type(self)(fork) for fork in forks]

    @staticmethod
    def list_snapshots(*, url: str | None = None, key: str | None = None) -> list[SnapshotInfo]:
        """See `AsyncSandbox.list_snapshots`."""
        return _portal.run(AsyncSandbox.list_snapshots(url=url, key=key))

    @staticmethod
    def remove_snapshot(
        snapshot: SnapshotInfo | str, *, url: str | None = None, key: str | None = None
    ) -> None:
        """See `AsyncSandbox.remove_snapshot`."""
        _portal.run(AsyncSandbox.remove_snapshot(snapshot, url=url, key=key))

    @staticmethod
    def create_volume(name: str, **options: Any) -> VolumeInfo:
        """See `AsyncSandbox.create_volume`."""
        return _portal.run(AsyncSandbox.create_volume(name, **options))

    @staticmethod
    def list_volumes(*, url: str | None = None, key: str | None = None) -> list[VolumeInfo]:
        """See `AsyncSandbox.list_volumes`."""
        return _portal.run(AsyncSandbox.list_volumes(url=url, key=key))

    @staticmethod
    def get_volume(volume_id: str, *, url: str | None = None, key: str | None = None) -> VolumeInfo:
        """See `AsyncSandbox.get_volume`."""
        return _portal.run(AsyncSandbox.get_volume(volume_id, url=url, key=key))

    @staticmethod
    def remove_volume(
        volume: VolumeInfo | str, *, url: str | None = None, key: str | None = None
    ) -> None:
        """See `AsyncSandbox.remove_volume`."""
        _portal.run(AsyncSandbox.remove_volume(volume, url=url, key=key))

    def kill(self) -> None:
        _portal.run(self._inner.kill())

    def close(self) -> None:
        _portal.run(self._inner.close())

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        _portal.run(self._inner.__aexit__(kind, error, trace))
