"""What an `allowlist` sandbox may reach: the list it was made with, replaced while it
runs; and what its connections met."""

from __future__ import annotations

from typing import Any

from ._handle import SandboxHandle
from .models import EgressEntry, EgressLog, EgressRequest


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

    async def log(self, cursor: str | None = None, limit: int | None = None) -> EgressLog:
        """What the sandbox's connections met, in the order the entries were written
        (up to `limit`, 1-500, default 100): each host and port asked for, `allowed`,
        `refused` with the reason, or `failed`, with the bytes each way once an allowed
        connection ended (its entry is then written again). Pass `next_cursor` back as
        `cursor` to read only what came after."""
        query: dict[str, Any] = {"sandboxId": self._sandbox.id}
        if cursor is not None:
            query["cursor"] = cursor
        if limit is not None:
            query["limit"] = limit
        answer = await self._sandbox._conn.call("sandbox.egressLog", query=query)
        return EgressLog(
            entries=[EgressEntry.from_json(entry) for entry in answer.get("entries") or []],
            next_cursor=answer.get("nextCursor"),
            more=bool(answer.get("more")),
        )

    async def request(self, host: str, reason: str | None = None) -> EgressRequest:
        """Asks for one more host (an entry as in `Egress.allow`), with a reason for
        whoever decides. The same host asked again while waiting is the same request.
        Someone holding `egress:decide` approves it with another key; the host is then
        reachable at once."""
        body: dict[str, Any] = {"sandboxId": self._sandbox.id, "host": host}
        if reason is not None:
            body["reason"] = reason
        return EgressRequest.from_json(
            await self._sandbox._conn.call("sandbox.requestEgress", body)
        )

    async def requests(self, all: bool = False) -> list[EgressRequest]:
        """This sandbox's requests, newest first: waiting ones, or with `all=True` the
        decided ones too."""
        answer = await self._sandbox._conn.call(
            "egress.requests",
            query={"sandboxId": self._sandbox.id, "status": "all" if all else "pending"},
        )
        return [EgressRequest.from_json(r) for r in answer or []]

    async def decide(self, request_id: str, approve: bool) -> EgressRequest:
        """Approves (the host joins the list at once) or denies a request; needs
        `egress:decide`, and another key than the one that asked."""
        return EgressRequest.from_json(
            await self._sandbox._conn.call(
                "egress.decide", {"requestId": request_id, "approve": approve}
            )
        )
