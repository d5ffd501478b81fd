"""Commands: run to completion over the streaming exec WebSocket, their output handed
to callbacks as it comes, or started in the background and followed through a handle."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

import websockets
from websockets.asyncio.client import ClientConnection

from . import _ws, errors
from .models import CommandResult, OutputSlice, ProcessInfo

if TYPE_CHECKING:
    from ._handle import SandboxHandle

#: A callback for output: called with each chunk of text as it arrives.
OutputCallback = Callable[[str], "Awaitable[None] | None"]

#: The server ends a command at its timeout; the client waits this much longer for it.
GRACE = 30.0


async def _call_back(callback: OutputCallback | None, data: str) -> None:
    if callback is not None:
        outcome = callback(data)
        if asyncio.iscoroutine(outcome):
            await outcome


class AsyncCommands:
    """`sandbox.commands`: run commands in the sandbox."""

    def __init__(self, sandbox: SandboxHandle) -> None:
        self._sandbox = sandbox
        self._sessions = _ws.ExecSessions()

    @overload
    async def run(
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
    async def run(
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
    ) -> AsyncProcess: ...

    async def run(
        self,
        cmd: str,
        *,
        background: bool = False,
        timeout: float = 60,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        stdin: bool = False,
    ) -> CommandResult | AsyncProcess:
        """Runs `cmd` through `sh -c` in `cwd` (default: the sandbox's workdir) with
        `env` added. It returns once the command ended, having handed each chunk of its
        output to `on_stdout` / `on_stderr` as it came (a command past `timeout`
        seconds is killed: `timed_out`, exit code 124). With `background=True` it
        returns a handle at once (`stdin=True` keeps the command's input open)."""
        cwd = self._sandbox._absolute(cwd) if cwd else None
        if background:
            info = await self._sandbox._conn.call(
                "sandbox.processStart",
                {"sandboxId": self._sandbox.id, "cmd": cmd, "cwd": cwd, "env": env, "stdin": stdin},
            )
            return AsyncProcess(self._sandbox, ProcessInfo.from_json(info))
        return await self._stream(cmd, timeout, cwd, env, on_stdout, on_stderr)

    def stream(
        self,
        cmd: str,
        *,
        timeout: float = 60,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> AsyncCommandStream:
        """A command whose output is read as it comes: `async with
        sb.commands.stream(cmd) as command: async for chunk in command: ...`. It starts
        on entering the block; leaving the block before it ended kills it."""
        cwd = self._sandbox._absolute(cwd) if cwd else None
        return AsyncCommandStream(self._sandbox, cmd, timeout, cwd, env, self._sessions)

    async def _stream(
        self,
        cmd: str,
        timeout: float,
        cwd: str | None,
        env: dict[str, str] | None,
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
    ) -> CommandResult:
        async with AsyncCommandStream(self._sandbox, cmd, timeout, cwd, env, self._sessions) as command:
            async for chunk in command:
                await _call_back(on_stdout if chunk.stream == "stdout" else on_stderr, chunk.data)
        assert command.result is not None
        return command.result

    async def list(self) -> list[ProcessInfo]:
        """The sandbox's background processes."""
        listed = await self._sandbox._conn.call(
            "sandbox.processList", query={"sandboxId": self._sandbox.id}
        )
        return [ProcessInfo.from_json(p) for p in listed]


async def _refusal(sandbox: SandboxHandle, message: str) -> errors.SandboxdError:
    """The error of a command the session refused: the sandbox's state when it is not
    running (the session says so only in words)."""
    info = await sandbox.refresh()
    if info.status != "running":
        return errors.SandboxNotRunning(message, status=412)
    return errors.CommandError(message)


#: What a result keeps of each stream, as the server's `sandbox.exec` does; the chunks
#: beyond it still reach the iterator and the callbacks.
KEPT_BYTES = 1024 * 1024


class _Kept:
    """The first `KEPT_BYTES` of a stream's output: a command's output is the
    sandbox's to choose, so it never grows the client's memory without bound."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._size = 0
        self.truncated = False

    def add(self, data: str) -> None:
        if self.truncated:
            return
        size = len(data.encode())
        if self._size + size > KEPT_BYTES:
            self.truncated = True
            return
        self._parts.append(data)
        self._size += size

    def text(self) -> str:
        return "".join(self._parts)


@dataclass(frozen=True)
class OutputChunk:
    """A piece of a command's output, as it arrived."""

    stream: Literal["stdout", "stderr"]
    data: str


class AsyncCommandStream:
    """One command over the exec WebSocket. `result` is set once it ended."""

    def __init__(
        self,
        sandbox: SandboxHandle,
        cmd: str,
        timeout: float,
        cwd: str | None,
        env: dict[str, str] | None,
        sessions: _ws.ExecSessions | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._sessions = sessions
        self._message: dict[str, Any] = {
            "type": "exec",
            "cmd": cmd,
            "timeoutMs": max(1000, int(timeout * 1000)),
        }
        if cwd:
            self._message["cwd"] = cwd
        if env:
            self._message["env"] = env
        self._deadline = timeout + GRACE
        self._ws: ClientConnection | None = None
        self._kept = {"stdout": _Kept(), "stderr": _Kept()}
        #: How the command ended, once it did.
        self.result: CommandResult | None = None

    async def __aenter__(self) -> AsyncCommandStream:
        conn = self._sandbox._conn
        kept = self._sessions.take() if self._sessions is not None else None
        if kept is not None:
            try:
                await kept.send(json.dumps(self._message))
                self._ws = kept
                return self
            except websockets.exceptions.ConnectionClosed:
                # Closed before the command left: it runs on a new session instead.
                kept.transport.abort()
        try:
            async with asyncio.timeout(GRACE):
                self._ws = await _ws.open_session(conn, "/sandbox-exec", {"sandboxId": self._sandbox.id})
                await self._ws.send(json.dumps(self._message))
        except BaseException as error:
            await self.aclose()
            mapped = _ws.failure(error, conn.target.url, self._sandbox.id)
            if mapped is error:
                raise
            raise mapped from error
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _done(self) -> None:
        """The command ended: its session is kept for the next one."""
        ws, self._ws = self._ws, None
        if ws is not None:
            if self._sessions is not None and self._sandbox._conn.keeps_sockets:
                await self._sessions.give_back(ws)
            else:
                await _ws.close(ws)

    async def aclose(self) -> None:
        """Ends the session; a command still running is killed."""
        ws, self._ws = self._ws, None
        if ws is not None:
            await _ws.close(ws)

    async def __aiter__(self) -> AsyncIterator[OutputChunk]:
        ws = self._ws
        if ws is None:
            if self.result is not None:
                return
            raise errors.CommandError("enter the block first: `async with ... as command`")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._deadline
        try:
            while True:
                # The deadline covers each wait, never the caller's code between chunks.
                async with asyncio.timeout_at(deadline):
                    raw = await ws.recv()
                event = json.loads(raw)
                kind = event.get("type")
                if kind in ("stdout", "stderr"):
                    data = str(event.get("data", ""))
                    self._kept[kind].add(data)
                    yield OutputChunk(kind, data)
                elif kind == "exit":
                    self.result = CommandResult(
                        exit_code=int(event.get("exitCode", -1)),
                        stdout=self._kept["stdout"].text(),
                        stderr=self._kept["stderr"].text(),
                        timed_out=bool(event.get("timedOut", False)),
                        truncated=any(k.truncated for k in self._kept.values()),
                    )
                    await self._done()
                    return
                elif kind == "error":
                    raise await _refusal(self._sandbox, event.get("message", "the command failed"))
        except TimeoutError as error:
            await self.aclose()
            raise errors.CommandError(
                f"the command did not end within {self._deadline:g} s of being asked"
            ) from error
        except websockets.exceptions.ConnectionClosedOK as error:
            raise errors.CommandError("the session ended before the command did") from error
        except (websockets.exceptions.WebSocketException, OSError) as error:
            raise _ws.failure(error, self._sandbox._conn.target.url, self._sandbox.id) from error

    async def wait(self) -> CommandResult:
        """Reads the rest of the output and returns how the command ended."""
        async for _ in self:
            pass
        assert self.result is not None
        return self.result


class AsyncProcess:
    """A background process in a sandbox."""

    def __init__(self, sandbox: SandboxHandle, info: ProcessInfo) -> None:
        self._sandbox = sandbox
        self.info = info

    def __repr__(self) -> str:
        return f"AsyncProcess({self.id!r}, pid={self.pid})"

    @property
    def id(self) -> str:
        return self.info.process_id

    @property
    def pid(self) -> int:
        return self.info.pid

    def _body(self, **extra: Any) -> dict[str, Any]:
        return {"sandboxId": self._sandbox.id, "processId": self.id, **extra}

    async def wait(self, timeout: float | None = None) -> CommandResult:
        """Waits for the process to end (at most `timeout` seconds: `TimeoutError`);
        its exit code and the output the agent kept."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            left = 60.0 if deadline is None else max(0.0, deadline - loop.time())
            chunk = min(left, 60.0)
            info = await self._sandbox._conn.call(
                "sandbox.processWait",
                self._body(timeoutMs=int(chunk * 1000)),
                timeout=chunk + 30,
            )
            self.info = ProcessInfo.from_json(info)
            if self.info.exit_code is not None or self.info.status != "running":
                break
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError(f"process {self.id} still runs after {timeout} s")
        stdout = await self._all("stdout")
        stderr = await self._all("stderr")
        return CommandResult(
            exit_code=self.info.exit_code if self.info.exit_code is not None else -1,
            stdout=stdout.decode(errors="replace"),
            stderr=stderr.decode(errors="replace"),
        )

    async def _all(self, stream: Literal["stdout", "stderr"]) -> bytes:
        parts = []
        offset = 0
        while True:
            piece = await self.output(stream, offset)
            parts.append(piece.data)
            if piece.end == offset or not piece.data:
                return b"".join(parts)
            offset = piece.end

    async def output(
        self, stream: Literal["stdout", "stderr"] = "stdout", offset: int = 0
    ) -> OutputSlice:
        """The stream's bytes from `offset`, as far as there are some now."""
        answer = await self._sandbox._conn.call(
            "sandbox.processOutput",
            query={**self._body(), "stream": stream, "offset": offset, "encoding": "base64"},
        )
        return OutputSlice(
            start=int(answer["start"]),
            end=int(answer["end"]),
            data=base64.b64decode(answer.get("data", "")),
            exited=bool(answer.get("exited", False)),
        )

    async def send_stdin(self, data: str | bytes, *, close: bool = False) -> int:
        """Writes `data` to the process's standard input (closed after with `close`)."""
        raw = data.encode() if isinstance(data, str) else data
        written = 0
        chunk = 256 * 1024
        pieces = [raw[i : i + chunk] for i in range(0, len(raw), chunk)] or [b""]
        for index, piece in enumerate(pieces):
            last = index == len(pieces) - 1
            answer = await self._sandbox._conn.call(
                "sandbox.processWrite",
                self._body(
                    data=base64.b64encode(piece).decode(),
                    encoding="base64",
                    close=close and last,
                ),
            )
            written += int(answer.get("written", len(piece)))
        return written

    async def close_stdin(self) -> None:
        """Closes the process's standard input."""
        await self.send_stdin(b"", close=True)

    async def signal(self, signal: str = "TERM") -> ProcessInfo:
        """Sends `signal` (`TERM`, `KILL`, `INT`, `HUP`, …) to the process's group."""
        info = await self._sandbox._conn.call(
            "sandbox.processSignal", self._body(signal=signal)
        )
        self.info = ProcessInfo.from_json(info)
        return self.info

    async def kill(self) -> ProcessInfo:
        """Kills the process's group."""
        return await self.signal("KILL")
