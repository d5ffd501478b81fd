"""Terminals: an interactive shell (or any command) on a pseudo-terminal in the
sandbox, over the `/sandbox-pty` WebSocket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import websockets
from websockets.asyncio.client import ClientConnection

from . import _ws, errors

if TYPE_CHECKING:
    from ._handle import SandboxHandle

#: How long opening a terminal may take.
OPEN_TIMEOUT = 30.0
#: What `read_until` holds while it waits: a terminal's output is the sandbox's to choose.
MAX_UNTIL = 16 * 1024 * 1024


class AsyncTerminal:
    """One terminal. Read its output as it comes (`async for chunk in terminal`, or
    `read_until`), type with `send`, and `resize` it; leaving its block ends it."""

    def __init__(self, ws: ClientConnection) -> None:
        self._ws: ClientConnection | None = ws
        #: The exit code of what ran on the terminal, once it ended.
        self.exit_code: int | None = None
        self._pending = b""

    async def __aenter__(self) -> AsyncTerminal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, keys: str | bytes) -> None:
        """Types `keys` (text is sent as UTF-8; `"\\x03"` is Ctrl-C)."""
        await self._socket().send(keys.encode() if isinstance(keys, str) else keys)

    async def resize(self, cols: int, rows: int) -> None:
        """Changes the terminal's size (what runs on it gets SIGWINCH)."""
        await self._socket().send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    async def read(self, timeout: float | None = None) -> bytes:
        """The next output as it came, at most `timeout` seconds away (`TimeoutError`);
        `b""` once the terminal ended."""
        if self._pending:
            chunk, self._pending = self._pending, b""
            return chunk
        ws = self._ws
        if ws is None:
            return b""
        try:
            while True:
                async with asyncio.timeout(timeout):
                    message = await ws.recv()
                if isinstance(message, bytes):
                    return message
                event = json.loads(message)
                if event.get("type") == "exit":
                    self.exit_code = int(event.get("exitCode", -1))
                    await self.close()
                    return b""
                if event.get("type") == "error":
                    raise errors.CommandError(str(event.get("message", "the terminal failed")))
        except websockets.exceptions.ConnectionClosedOK:
            self._ws = None
            return b""
        except websockets.exceptions.ConnectionClosed as error:
            self._ws = None
            raise _ws.failure(error, "", "") from error

    async def read_until(self, text: str | bytes, timeout: float = 30) -> bytes:
        """Everything the terminal showed up to and including the first `text`
        (`TimeoutError` when it does not show within `timeout` seconds, `CommandError`
        when more than `MAX_UNTIL` bytes came first)."""
        wanted = text.encode() if isinstance(text, str) else text
        seen = b""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while wanted not in seen:
            left = deadline - loop.time()
            try:
                if left <= 0:
                    raise TimeoutError(f"{wanted!r} did not show within {timeout} s")
                chunk = await self.read(left)
            except TimeoutError:
                self._pending = seen + self._pending  # what showed is still there to read
                raise
            if not chunk:
                raise errors.CommandError(f"the terminal ended before {wanted!r} showed")
            seen += chunk
            if len(seen) > MAX_UNTIL and wanted not in seen:
                raise errors.CommandError(f"{wanted!r} did not show within {MAX_UNTIL} bytes")
        end = seen.index(wanted) + len(wanted)
        self._pending = seen[end:]
        return seen[:end]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while chunk := await self.read():
            yield chunk

    async def wait(self, timeout: float | None = None) -> int:
        """Waits for the terminal to end (its output is read and dropped); the exit code."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._ws is not None:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            await self.read(left)
        return self.exit_code if self.exit_code is not None else -1

    async def close(self) -> None:
        """Ends the terminal and what runs on it."""
        ws, self._ws = self._ws, None
        if ws is not None:
            await _ws.close(ws)

    def _socket(self) -> ClientConnection:
        if self._ws is None:
            raise errors.CommandError("the terminal has ended")
        return self._ws


class AsyncPty:
    """`sandbox.pty`: terminals in the sandbox."""

    def __init__(self, sandbox: SandboxHandle) -> None:
        self._sandbox = sandbox

    async def open(
        self, *, cols: int = 80, rows: int = 24, cmd: str | None = None
    ) -> AsyncTerminal:
        """A terminal of `cols` × `rows` running `cmd` (by default the user's shell)."""
        conn = self._sandbox._conn
        query: dict[str, str | int] = {"sandboxId": self._sandbox.id, "cols": cols, "rows": rows}
        if cmd is not None:
            query["cmd"] = cmd
        ws: ClientConnection | None = None
        try:
            async with asyncio.timeout(OPEN_TIMEOUT):
                ws = await _ws.open_session(conn, "/sandbox-pty", query)
                while True:
                    message = await ws.recv()
                    if isinstance(message, bytes):
                        continue
                    event = json.loads(message)
                    if event.get("type") == "ready":
                        return AsyncTerminal(ws)
                    if event.get("type") == "error":
                        raise errors.CommandError(
                            str(event.get("message", "no terminal could be opened"))
                        )
        except BaseException as error:
            if ws is not None:
                ws.transport.abort()
            mapped = _ws.failure(error, conn.target.url, self._sandbox.id)
            if mapped is error:
                raise
            raise mapped from error
