"""`SandboxdSandbox`: sandboxio's `AsyncSandbox` over the SDK's. Its lifetime is
sandboxio's `timeout` from creation, kept here (the server's own timeout is an idle
timeout of at least 10 s, the backstop when the caller goes away)."""

from __future__ import annotations

import shlex
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

import anyio
import anyio.lowlevel
from sandboxio import _policy
from sandboxio._record import OperationRecord, Redactor, operation
from sandboxio._teardown import shielded_kill
from sandboxio.errors import (
    CapabilityNotSupported,
    ConfigurationError,
    ExecutionTimeout,
    SandboxGone,
)
from sandboxio.models import Capability, ExecResult, NetworkPolicy, RichOutput

from .. import errors as sdk
from . import _errors
from ._files import SandboxdFiles
from ._process import SandboxdProcess

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._sandbox import AsyncSandbox
    from ._owner import BackendSettings

#: The server runs one command for at most this long.
MAX_COMMAND = 600.0
#: Context runs are answered at their timeout; the answer may take this much longer.
CONTEXT_GRACE = 10.0


class SandboxdSandbox:
    """A sandbox on sandboxd. `native` is the SDK's `AsyncSandbox` (terminals,
    background processes, stdin, the server's own calls)."""

    def __init__(
        self,
        backend: BackendSettings,
        native: AsyncSandbox,
        *,
        lifetime: float | None,
        started: float,
        network: NetworkPolicy,
        secrets: Mapping[str, str],
        env: Mapping[str, str],
        metadata: Mapping[str, str],
    ) -> None:
        self._backend = backend
        self._native = native
        self.id = native.id
        self.backend_name = backend.name
        self.capabilities = backend.capabilities
        self.isolation = backend.isolation
        self.network = network
        self.labels: dict[str, str] = dict(metadata)
        self.timeout = lifetime
        self._expires = None if lifetime is None else started + lifetime
        self._redact = Redactor(secrets, env)
        self._killed = False
        self._contexts: dict[str, str] = {}
        self._files = SandboxdFiles(self)

    def __repr__(self) -> str:
        state = "killed" if self._killed else "running"
        caps = "|".join(c.name or "" for c in Capability if c in self.capabilities)
        return f"<SandboxdSandbox sandboxd:{self.id} {self.isolation.value} {state} caps={caps}>"

    # --- plumbing -----------------------------------------------------------------------

    def _need(self, cap: Capability) -> None:
        if cap not in self.capabilities:
            raise CapabilityNotSupported(cap, backend=self._backend.name)

    def _gone(self, why: str = "was killed") -> SandboxGone:
        return SandboxGone(f"sandbox {self.id} {why}")

    async def _limit(self, timeout: float | None) -> tuple[float, bool]:
        """How long an operation may take, and whether that is the end of the sandbox's
        lifetime. A sandbox past its lifetime is killed and gone."""
        _policy.validate_timeout(timeout)
        if timeout is not None and timeout > MAX_COMMAND:
            raise ConfigurationError(
                f"timeout={timeout!r}: sandboxd runs one command for at most {MAX_COMMAND:.0f} s.",
                hint="Start it in the background through `sandbox.native.commands.run(..., background=True)`.",
            )
        if self._killed:
            raise self._gone()
        if self._expires is None:
            return (timeout or MAX_COMMAND), False
        left = self._expires - time.monotonic()
        if left <= 0:
            await self._expire()
        if timeout is not None and timeout < left:
            return timeout, False
        return min(left, MAX_COMMAND), left <= MAX_COMMAND

    async def _expire(self) -> NoReturn:
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            try:
                await self.kill()
            except Exception:
                pass
        raise self._gone(f"reached the end of its {self.timeout} s lifetime")

    async def _timed_out(self, limit: float, lifetime: bool, error: BaseException) -> NoReturn:
        if lifetime:
            await self._expire()
        raise ExecutionTimeout(f"execution exceeded {limit:g}s in sandbox {self.id}") from error

    def _record(self, event: str, **fields: Any) -> OperationRecord:
        return OperationRecord(
            event=event,
            sandbox_id=self.id,
            backend=self._backend.name,
            isolation=self.isolation,
            metadata=self.labels,
            **fields,
        )

    def _operation(self, record: OperationRecord) -> Any:
        return operation(record, config=self._backend.audit, redact=self._redact)

    async def _exec(
        self, script: str, env: Mapping[str, str] | None, limit: float, lifetime: bool
    ) -> ExecResult:
        """A command run to its end through `sh -c`, within `limit` seconds."""
        command = self._native.commands.stream(script, timeout=limit, env=dict(env or {}) or None)
        try:
            with anyio.fail_after(limit):
                async with command:
                    result = await command.wait()
        except TimeoutError as error:
            await self._timed_out(limit, lifetime, error)
        except sdk.SandboxdError as error:
            raise _errors.on_run(error, self.id) from error
        if result.timed_out:
            await self._timed_out(limit, lifetime, TimeoutError())
        return ExecResult(result.exit_code, result.stdout, result.stderr)

    async def _teardown(self) -> None:
        await shielded_kill(self.kill, sandbox_id=self.id, backend=self._backend.name, labels=self.labels)

    # --- AsyncSandbox ---------------------------------------------------------------------

    async def run(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """A string runs through `sh -c`; a list runs as it is, never through a shell."""
        self._need(Capability.RUN_COMMAND)
        limit, lifetime = await self._limit(timeout)
        argv = [cmd] if isinstance(cmd, str) else list(cmd)
        record = self._record("exec", argv=argv)
        async with self._operation(record):
            result = await self._exec(_script(cmd), env, limit, lifetime)
            record.exit_code = result.exit_code
            record.bytes_out = len(result.stdout) + len(result.stderr)
        return result

    async def run_code(
        self,
        code: str,
        *,
        language: str = "python",
        context_id: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Python code: a fresh `python3` without `context_id`; with one, an interpreter
        context of this sandbox that keeps its state (made on first use of the id). A
        final expression's `repr()` is a `text/plain` result."""
        self._need(Capability.RUN_CODE)
        if context_id is not None:
            self._need(Capability.STATEFUL_CODE)
        if language != "python":
            raise ConfigurationError(
                f"language={language!r} is not available on sandboxd; python is.",
                hint="Run another interpreter yourself with `run([...])`.",
            )
        limit, lifetime = await self._limit(timeout)
        record = self._record("run_code", code=code)
        async with self._operation(record):
            if context_id is None:
                result = await self._exec(shlex.join(["python3", "-c", code]), None, limit, lifetime)
            else:
                result = await self._in_context(context_id, code, limit, lifetime)
            record.exit_code = result.exit_code
            record.bytes_in = len(code)
            record.bytes_out = len(result.stdout) + len(result.stderr)
        return result

    async def _in_context(self, context_id: str, code: str, limit: float, lifetime: bool) -> ExecResult:
        try:
            with anyio.fail_after(limit + CONTEXT_GRACE):
                if context_id not in self._contexts:
                    made = await self._native.create_context()
                    self._contexts[context_id] = made.context_id
                run = await self._native.run_code(
                    code, context=self._contexts[context_id], timeout=max(limit, 1.0)
                )
        except TimeoutError as error:
            await self._timed_out(limit, lifetime, error)
        except sdk.SandboxdError as error:
            raise _errors.on_run(error, self.id) from error
        if run.timed_out:
            await self._timed_out(limit, lifetime, TimeoutError())
        stderr = run.stderr
        if run.error is not None and run.error.traceback not in stderr:
            stderr += run.error.traceback or f"{run.error.name}: {run.error.value}\n"
        results = None if run.result is None else (RichOutput("text/plain", run.result),)
        return ExecResult(1 if run.error is not None else 0, run.stdout, stderr, results=results)

    def stream(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
    ) -> SandboxdProcess:
        """A command whose output is read as it comes; it starts on `async with`."""
        self._need(Capability.STREAMING)
        _policy.validate_timeout(timeout)
        if self._killed:
            raise self._gone()
        argv = [cmd] if isinstance(cmd, str) else list(cmd)
        return SandboxdProcess(self, _script(cmd), argv, env, timeout)

    async def kill(self) -> None:
        """Kills the sandbox; again is fine."""
        if self._killed:
            await anyio.lowlevel.checkpoint()
            return
        try:
            await self._native.kill()
        except (sdk.NotFound, sdk.SandboxNotRunning):
            pass
        except sdk.SandboxdError as error:
            raise _errors.on_kill(error, self.id) from error
        self._killed = True
        with anyio.CancelScope(shield=True):
            await self._native.close()

    @property
    def files(self) -> SandboxdFiles:
        self._need(Capability.FILESYSTEM)
        return self._files

    @property
    def native(self) -> AsyncSandbox:
        return self._native

    async def __aenter__(self) -> SandboxdSandbox:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._teardown()
        finally:
            # The block is over: the connection goes, whether the kill worked or not.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._native.close()


def _script(cmd: str | list[str]) -> str:
    """What `sh -c` runs: a string as it is, a list quoted word by word."""
    return cmd if isinstance(cmd, str) else shlex.join(cmd)
