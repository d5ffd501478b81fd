"""Commands: run to completion over the streaming exec WebSocket, their output handed
to callbacks as it comes, or started in the background and followed through a handle."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, overload

import websockets
from websockets.asyncio.client import connect as ws_connect

from . import errors
from .models import CommandResult, OutputSlice, ProcessInfo

if TYPE_CHECKING:
    from ._sandbox import AsyncSandbox

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

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sandbox = sandbox

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

    async def _stream(
        self,
        cmd: str,
        timeout: float,
        cwd: str | None,
        env: dict[str, str] | None,
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
    ) -> CommandResult:
        conn = self._sandbox._conn
        url = conn.ws_url("/sandbox-exec", {"sandboxId": self._sandbox.id})
        headers = {"x-api-key": conn.target.key} if conn.target.key else {}
        message: dict[str, Any] = {"type": "exec", "cmd": cmd, "timeoutMs": int(timeout * 1000)}
        if cwd:
            message["cwd"] = cwd
        if env:
            message["env"] = env
        out: list[str] = []
        err: list[str] = []
        try:
            async with asyncio.timeout(timeout + GRACE):
                async with ws_connect(
                    url, additional_headers=headers, max_size=16 * 1024 * 1024
                ) as ws:
                    await ws.send(json.dumps(message))
                    async for raw in ws:
                        event = json.loads(raw)
                        kind = event.get("type")
                        if kind == "stdout":
                            out.append(event["data"])
                            await _call_back(on_stdout, event["data"])
                        elif kind == "stderr":
                            err.append(event["data"])
                            await _call_back(on_stderr, event["data"])
                        elif kind == "exit":
                            return CommandResult(
                                exit_code=int(event.get("exitCode", -1)),
                                stdout="".join(out),
                                stderr="".join(err),
                                timed_out=bool(event.get("timedOut", False)),
                            )
                        elif kind == "error":
                            raise await self._refusal(event.get("message", "the command failed"))
        except websockets.exceptions.InvalidStatus as error:
            status = error.response.status_code
            raise errors.from_answer(status, _json_of(error.response.body)) from error
        except websockets.exceptions.ConnectionClosed as error:
            raise _closed(error, self._sandbox.id) from error
        except OSError as error:
            raise errors.ConnectionFailed(f"cannot reach {conn.target.url}: {error}") from error
        raise errors.CommandError("the session ended before the command did")

    async def _refusal(self, message: str) -> errors.SandboxdError:
        """The error of a command the session refused: the sandbox's state when it is
        not running (the session says so only in words)."""
        info = await self._sandbox.refresh()
        if info.status != "running":
            return errors.SandboxNotRunning(message, status=412)
        return errors.CommandError(message)

    async def list(self) -> list[ProcessInfo]:
        """The sandbox's background processes."""
        listed = await self._sandbox._conn.call(
            "sandbox.processList", query={"sandboxId": self._sandbox.id}
        )
        return [ProcessInfo.from_json(p) for p in listed]


def _json_of(body: bytes | None) -> Any:
    try:
        return json.loads(body or b"")
    except ValueError:
        return None


def _closed(error: websockets.exceptions.ConnectionClosed, sandbox_id: str) -> errors.SandboxdError:
    code = error.rcvd.code if error.rcvd else None
    reason = error.rcvd.reason if error.rcvd else ""
    if code == 4001:
        return errors.AuthenticationError(reason or "the key was refused", code="UNAUTHORIZED")
    if code == 4003:
        return errors.PermissionDenied(reason or f"no access to sandbox {sandbox_id}")
    return errors.CommandError(f"the session closed ({code}): {reason}")


class AsyncProcess:
    """A background process in a sandbox."""

    def __init__(self, sandbox: AsyncSandbox, info: ProcessInfo) -> None:
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
