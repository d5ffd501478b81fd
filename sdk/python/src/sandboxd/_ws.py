"""What the exec and terminal WebSocket sessions share: opening one with the
connection's key, closing one within a bound, keeping an exec session for the next
command, and their failures as the SDK's errors."""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.protocol import State

from . import errors
from ._http import Connection

#: Largest message accepted from the server.
MAX_MESSAGE = 16 * 1024 * 1024
#: How long a session's closing handshake may take before its socket is dropped.
CLOSE_TIMEOUT = 5.0


async def open_session(conn: Connection, path: str, query: dict[str, Any]) -> ClientConnection:
    """A WebSocket to `path` on the connection's server, with its key."""
    headers = {"x-api-key": conn.target.key} if conn.target.key else {}
    return await ws_connect(conn.ws_url(path, query), additional_headers=headers, max_size=MAX_MESSAGE)


async def close(ws: ClientConnection) -> None:
    """Closes `ws`; a handshake that does not end in time, or is interrupted, drops the
    socket (the server ends what ran on the session either way)."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await ws.close()
    except TimeoutError:
        ws.transport.abort()
    except BaseException:
        ws.transport.abort()
        raise


class ExecSessions:
    """A sandbox's exec WebSocket kept open between commands (the server runs one
    command at a time on a session, any number in turn): at most one idle session,
    closed when the sandbox is killed or closed, and its socket dropped when the
    handle is collected without either."""

    def __init__(self) -> None:
        # The idle session and its event loop, in a list the finalizer shares (so that
        # it holds no reference to `self`).
        self._kept: list[tuple[ClientConnection, asyncio.AbstractEventLoop]] = []
        weakref.finalize(self, _drop, self._kept)

    @property
    def _idle(self) -> ClientConnection | None:
        return self._kept[0][0] if self._kept else None

    def take(self) -> ClientConnection | None:
        """The idle session, if it is still open."""
        if not self._kept:
            return None
        ws, _ = self._kept.pop()
        if ws.state is State.OPEN:
            return ws
        ws.transport.abort()
        return None

    async def give_back(self, ws: ClientConnection) -> None:
        """Keeps `ws` for the next command, or closes it when one is kept already."""
        if not self._kept and ws.state is State.OPEN:
            self._kept.append((ws, asyncio.get_running_loop()))
        else:
            await close(ws)

    async def close(self) -> None:
        if self._kept:
            await close(self._kept.pop()[0])


def _drop(kept: list[tuple[ClientConnection, asyncio.AbstractEventLoop]]) -> None:
    """The idle session of a handle collected unclosed: its socket is dropped in the
    loop that owns it (the server ends the session when the socket goes). Once that
    loop is closed, the socket goes with the objects."""
    while kept:
        ws, loop = kept.pop()
        if loop.is_closed():
            continue
        try:
            loop.call_soon_threadsafe(ws.transport.abort)
        except RuntimeError:
            pass


def failure(error: BaseException, url: str, sandbox_id: str) -> BaseException:
    """The SDK's error for a failure of a session (other errors pass unchanged)."""
    if isinstance(error, websockets.exceptions.InvalidStatus):
        status = error.response.status_code
        return errors.from_answer(status, _json_of(error.response.body))
    if isinstance(error, websockets.exceptions.ConnectionClosed):
        return _closed(error, sandbox_id)
    if isinstance(error, TimeoutError):
        return errors.ConnectionFailed(f"no answer from {url} in time")
    if isinstance(error, OSError | websockets.exceptions.InvalidHandshake):
        return errors.ConnectionFailed(f"cannot reach {url}: {error}")
    return error


def _json_of(body: bytes | bytearray | None) -> Any:
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
