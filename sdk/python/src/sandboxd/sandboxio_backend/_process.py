"""`SandboxdProcess`: sandboxio's streamed `Process` over the exec WebSocket."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from sandboxio._record import OperationRecord
from sandboxio._teardown import shielded_kill
from sandboxio.models import ExecResult, OutputChunk

from .. import errors as sdk
from . import _errors

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from .._commands import AsyncCommandStream
    from .._commands import OutputChunk as SdkChunk
    from ._owner import SandboxOwner


class SandboxdProcess:
    """One command whose output is read as it comes. Entering starts it; leaving the
    block before it ended kills it (the server kills a command whose session ends)."""

    def __init__(
        self,
        sandbox: SandboxOwner,
        script: str,
        argv: list[str],
        env: Mapping[str, str] | None,
        timeout: float | None,
    ) -> None:
        self._sandbox = sandbox
        self._script = script
        self._argv = argv
        self._env = dict(env or {}) or None
        self._timeout = timeout
        self._command: AsyncCommandStream | None = None
        self._chunks: AsyncIterator[SdkChunk] | None = None
        self._exit_code: int | None = None
        self._deadline = 0.0
        self._limit = 0.0
        self._lifetime = False
        self._record: OperationRecord | None = None

    @property
    def returncode(self) -> int | None:
        return self._exit_code

    async def __aenter__(self) -> SandboxdProcess:
        sb = self._sandbox
        self._limit, self._lifetime = await sb._limit(self._timeout)
        self._deadline = time.monotonic() + self._limit
        command = sb.native.commands.stream(self._script, timeout=self._limit, env=self._env)
        try:
            await command.__aenter__()
        except sdk.SandboxdError as error:
            raise _errors.on_run(error, sb.id) from error
        self._command = command
        self._chunks = command.__aiter__()
        self._record = sb._record("exec", argv=self._argv)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._exit_code is None:
            await shielded_kill(
                self.kill,
                sandbox_id=self._sandbox.id,
                backend=self._sandbox.backend_name,
                labels=self._sandbox.labels,
            )
        await self._emit()

    async def _emit(self) -> None:
        if self._record is None:
            return
        record, self._record = self._record, None
        record.exit_code = self._exit_code
        async with self._sandbox._operation(record):
            pass

    def __aiter__(self) -> SandboxdProcess:
        if self._chunks is None and self._exit_code is None:
            raise RuntimeError("enter the block first: `async with sb.stream(...) as proc`")
        return self

    async def __anext__(self) -> OutputChunk:
        if self._exit_code is not None or self._chunks is None:
            raise StopAsyncIteration
        try:
            with anyio.fail_after(max(self._deadline - time.monotonic(), 0.0)):
                chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            assert self._command is not None and self._command.result is not None
            result = self._command.result
            self._exit_code = result.exit_code
            if result.timed_out:
                await self._sandbox._timed_out(self._limit, self._lifetime, TimeoutError())
            raise
        except TimeoutError as error:
            await self.kill()
            await self._sandbox._timed_out(self._limit, self._lifetime, error)
        except anyio.get_cancelled_exc_class():
            await self.kill()
            raise
        except sdk.SandboxdError as error:
            await self.kill()
            raise _errors.on_run(error, self._sandbox.id) from error
        if self._record is not None:
            self._record.bytes_out += len(chunk.data)
        return OutputChunk(chunk.stream, chunk.data.encode())

    async def wait(self) -> ExecResult:
        """Reads (and drops) what is left of the output; how the command ended."""
        async for _ in self:
            pass
        assert self._exit_code is not None
        return ExecResult(self._exit_code, "", "", streamed=True)

    async def kill(self) -> None:
        """Ends the command (its session ends, and the server kills it)."""
        if self._exit_code is None:
            self._exit_code = _errors.KILLED_EXIT
            await self._close()
        await anyio.lowlevel.checkpoint()

    async def _close(self) -> None:
        chunks, self._chunks = self._chunks, None
        command, self._command = self._command, None
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            if chunks is not None:
                aclose: Any = getattr(chunks, "aclose", None)
                if aclose is not None:
                    await aclose()
            if command is not None:
                await command.aclose()
