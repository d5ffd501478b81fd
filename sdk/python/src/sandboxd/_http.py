"""One connection to a server: its procedures over HTTP (errors mapped to the SDK's
classes) and the address of its WebSockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import httpx

from . import errors
from ._config import Target

#: Calls that wait on the server (a process wait, a context run) set their own.
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)


class Connection:
    """A server and the key presented to it, over one pooled HTTP client."""

    def __init__(
        self, target: Target, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.target = target
        headers = {"x-api-key": target.key} if target.key else {}
        self.http = httpx.AsyncClient(
            base_url=target.url,
            headers=headers,
            timeout=DEFAULT_TIMEOUT,
            follow_redirects=False,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"Connection({self.target.url!r})"

    async def close(self) -> None:
        await self.http.aclose()

    async def call(
        self,
        procedure: str,
        body: dict[str, Any] | None = None,
        *,
        query: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """POSTs `body` (a mutation) or GETs with `query` (a query); the JSON answer."""
        params = {k: v for k, v in (query or {}).items() if v is not None}
        kwargs: dict[str, Any] = {}
        if timeout is not None:
            kwargs["timeout"] = httpx.Timeout(timeout, connect=10.0)
        try:
            if body is not None:
                clean = {k: v for k, v in body.items() if v is not None}
                response = await self.http.post(f"/api/{procedure}", json=clean, **kwargs)
            else:
                response = await self.http.get(f"/api/{procedure}", params=params, **kwargs)
        except httpx.TransportError as error:
            raise errors.ConnectionFailed(
                f"cannot reach {self.target.url}: {error}"
            ) from error
        return await self.answer(response)

    async def answer(self, response: httpx.Response) -> Any:
        """The JSON of a 2xx answer; the mapped error otherwise."""
        if response.is_success:
            return response.json()
        await response.aread()
        try:
            body = response.json()
        except ValueError:
            body = None
        raise errors.from_answer(
            response.status_code, body, response.headers.get("retry-after")
        )

    async def stream(
        self,
        method: str,
        procedure: str,
        *,
        query: dict[str, Any],
        content: AsyncIterator[bytes] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """A streamed request; the caller reads and closes the response."""
        request = self.http.build_request(
            method,
            f"/api/{procedure}",
            params={k: v for k, v in query.items() if v is not None},
            content=content,
            headers=headers,
            timeout=httpx.Timeout(None, connect=10.0),
        )
        try:
            response = await self.http.send(request, stream=True)
        except httpx.TransportError as error:
            raise errors.ConnectionFailed(
                f"cannot reach {self.target.url}: {error}"
            ) from error
        if not response.is_success:
            try:
                await self.answer(response)
            finally:
                await response.aclose()
        return response

    def ws_url(self, path: str, query: dict[str, Any]) -> str:
        base = self.target.url
        scheme = "wss" if base.startswith("https://") else "ws"
        rest = base.split("://", 1)[1]
        return f"{scheme}://{rest}{path}?{urlencode(query)}"
