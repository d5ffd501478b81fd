"""What a sandbox's parts (its commands, files, terminals and code) use of the sandbox:
its id, its connection, where its relative paths lead and its current record."""

from __future__ import annotations

from typing import Protocol

from ._http import Connection
from .models import SandboxInfo


class SandboxHandle(Protocol):
    _conn: Connection

    @property
    def id(self) -> str: ...

    def _absolute(self, path: str) -> str: ...

    async def refresh(self) -> SandboxInfo: ...
