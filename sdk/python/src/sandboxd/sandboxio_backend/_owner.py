"""What the parts of a sandbox (its files, its streamed commands) use of the sandbox
that owns them, and what a sandbox uses of its backend: the seams between the modules
of this package, so each depends on these shapes rather than on the others."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn, Protocol

from sandboxio._record import OperationRecord
from sandboxio.audit import AuditConfig
from sandboxio.models import Capability, ExecResult, IsolationTier

from .._sandbox import AsyncSandbox


class BackendSettings(Protocol):
    """The backend, as its sandboxes see it."""

    name: str
    capabilities: Capability
    isolation: IsolationTier
    audit: AuditConfig


class SandboxOwner(Protocol):
    """The sandbox, as its files and streams see it."""

    id: str
    labels: dict[str, str]
    backend_name: str

    @property
    def native(self) -> AsyncSandbox: ...

    def _need(self, cap: Capability) -> None: ...

    async def _limit(self, timeout: float | None) -> tuple[float, bool]: ...

    async def _timed_out(self, limit: float, lifetime: bool, error: BaseException) -> NoReturn: ...

    def _record(self, event: str, **fields: Any) -> OperationRecord: ...

    def _operation(self, record: OperationRecord) -> Any: ...

    async def _exec(
        self, script: str, env: Mapping[str, str] | None, limit: float, lifetime: bool
    ) -> ExecResult: ...
