"""A sandbox's ports as preview URLs: exposed with a signed link or publicly, listed and
unexposed."""

from __future__ import annotations

import base64

from ._handle import SandboxHandle
from .models import ExposedPort


def handle_of(sandbox_id: str) -> str:
    """The name of a sandbox in a preview's address: its id in lower-case base32
    (RFC 5155's alphabet, no padding), as the server makes it."""
    return base64.b32hexencode(sandbox_id.encode()).decode().rstrip("=").lower()


class AsyncPorts:
    """`sb.ports`: what listens on `127.0.0.1:<port>` inside the sandbox, reached from
    outside through sandboxd."""

    def __init__(self, sandbox: SandboxHandle) -> None:
        self._sandbox = sandbox

    async def expose(
        self, port: int, *, public: bool = False, ttl: float | None = None
    ) -> ExposedPort:
        """Exposes `port`: its `url` carries a signed link good for `ttl` seconds
        (default one hour, at most seven days), or, with `public=True`, lets anyone in.
        Exposing a port again replaces its earlier exposure and ends that one's links."""
        body: dict[str, object] = {"sandboxId": self._sandbox.id, "port": port, "public": public}
        if ttl is not None:
            body["ttlSeconds"] = max(1, int(ttl))
        return ExposedPort.from_json(await self._sandbox._conn.call("sandbox.exposePort", body))

    async def list(self) -> list[ExposedPort]:
        """The sandbox's exposed ports, by port."""
        listed = await self._sandbox._conn.call(
            "sandbox.ports", query={"sandboxId": self._sandbox.id}
        )
        return [ExposedPort.from_json(p) for p in listed]

    async def unexpose(self, port: int) -> bool:
        """Ends a port's exposure (its links and public access stop at once); whether it
        was exposed."""
        answer = await self._sandbox._conn.call(
            "sandbox.unexposePort", {"sandboxId": self._sandbox.id, "port": port}
        )
        return bool(answer.get("removed"))

    def url(self, port: int) -> str:
        """The address of the port's preview without a link: reached with the key
        (`x-api-key`), or by anyone once exposed publicly."""
        base = self._sandbox._conn.target.url.rstrip("/")
        return f"{base}/preview/{handle_of(self._sandbox.id)}/{port}/"
