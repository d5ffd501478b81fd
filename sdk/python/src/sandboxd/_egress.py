"""What an `allowlist` sandbox may reach: the list it was made with, replaced while it
runs."""

from __future__ import annotations

from ._handle import SandboxHandle


class AsyncEgress:
    """`sb.egress`: the hosts an `allowlist` sandbox may reach (names, `*.` wildcards
    over one or more labels, either with `:port`; 80 and 443 otherwise)."""

    def __init__(self, sandbox: SandboxHandle) -> None:
        self._sandbox = sandbox

    async def set(self, allow: list[str]) -> list[str]:
        """Replaces the list (empty: nothing leaves); new connections see it within a
        second. Returns the list as the server keeps it (lower case, no duplicates)."""
        answer = await self._sandbox._conn.call(
            "sandbox.setEgress", {"sandboxId": self._sandbox.id, "allow": list(allow)}
        )
        return list((answer.get("egress") or {}).get("allow") or [])

    async def list(self) -> list[str]:
        """The list now; empty for a sandbox in another network mode."""
        answer = await self._sandbox._conn.call(
            "sandbox.one", query={"sandboxId": self._sandbox.id}
        )
        return list((answer.get("egress") or {}).get("allow") or [])
