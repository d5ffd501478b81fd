"""A connection to a server: its procedures over HTTP (errors mapped to the SDK's
classes), one pooled client shared per server and key, and the address of its
WebSockets."""

from __future__ import annotations

import asyncio
import functools
import ssl
import weakref
from collections.abc import AsyncIterator, Callable, Hashable
from typing import Any
from urllib.parse import urlencode

import httpx

from . import errors
from ._config import Target

#: Calls that wait on the server (a process wait, a context run) set their own.
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of every client of the process (httpx's trust settings):
    making one costs tens of milliseconds, which each client would pay again."""
    return httpx.create_ssl_context(verify=True, trust_env=True)


#: The default environment of each server and key, once asked (it outlives the pools).
_environments: dict[tuple[str, str], str] = {}


class _Pool:
    """One pooled HTTP client, shared by every handle on the same server, key (and
    transport) in one event loop, and what is learned once for them all."""

    def __init__(self, target: Target, transport: Transports | None) -> None:
        headers = {"x-api-key": target.key} if target.key else {}
        self.client = httpx.AsyncClient(
            base_url=target.url,
            headers=headers,
            timeout=DEFAULT_TIMEOUT,
            follow_redirects=False,
            verify=tls_context(),
            transport=transport() if transport is not None else None,
        )
        self.users = 0


#: Makes the transport of a new pooled client (a backend's own, a test's faulty one).
Transports = Callable[[], httpx.AsyncBaseTransport]

#: The pools in use: per event loop (a client's sockets belong to the loop that opened
#: them), by server, key and who shares them.
_pools: weakref.WeakKeyDictionary[object, dict[tuple[str, str, Hashable], _Pool]] = weakref.WeakKeyDictionary()

#: Where code outside any event loop keeps its pools.
_NO_LOOP = asyncio.AbstractEventLoop()

PoolKey = tuple[object, tuple[str, str, Hashable]]


def _acquire(target: Target, transport: Transports | None, share: Hashable) -> tuple[PoolKey, _Pool]:
    try:
        loop: object = asyncio.get_running_loop()
    except RuntimeError:
        loop = _NO_LOOP
    pools = _pools.setdefault(loop, {})
    key = (target.url, target.key, share)
    pool = pools.get(key)
    if pool is None or pool.client.is_closed:
        pool = _Pool(target, transport)
        pools[key] = pool
    pool.users += 1
    return (weakref.ref(loop), key), pool


def _release(held_key: PoolKey, pool: _Pool) -> httpx.AsyncClient | None:
    """Lets go of `pool`; the client to close when that was its last user."""
    pool.users -= 1
    if pool.users > 0:
        return None
    loop_ref, key = held_key
    loop = loop_ref()  # type: ignore[operator]
    pools = _pools.get(loop) if loop is not None else None
    if pools is not None and pools.get(key) is pool:
        del pools[key]
    return pool.client


def _release_unclosed(key: PoolKey, pool: _Pool, loop: asyncio.AbstractEventLoop | None) -> None:
    """A handle collected without being closed lets go of its pool too."""
    client = _release(key, pool)
    if client is None or loop is None or loop.is_closed():
        return
    try:
        loop.call_soon_threadsafe(lambda: loop.create_task(client.aclose()))
    except RuntimeError:
        pass


class Connection:
    """A server and the key presented to it. Handles on the same server and key share
    one pooled HTTP client (one TLS context, kept-alive sockets); the client is closed
    when the last handle lets go of it. A handle let go of takes a share again at its
    next call."""

    def __init__(
        self,
        target: Target,
        *,
        transport: Transports | None = None,
        share: Hashable = 0,
        keeps_sockets: bool = True,
    ) -> None:
        """`transport` makes the transport of the shared client, which those with the
        same `share` (and server and key) use. `keeps_sockets=False`: no exec session
        is kept between commands, for owners that may drop a handle without closing
        it (give them a transport that keeps no connection alive either)."""
        self.target = target
        self.keeps_sockets = keeps_sockets
        self._transport = transport
        self._share = share
        self._held: tuple[PoolKey, _Pool] | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def _pool(self) -> _Pool:
        held = self._held
        if held is None or held[1].client.is_closed:
            held = _acquire(self.target, self._transport, self._share)
            self._held = held
            try:
                loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            self._finalizer = weakref.finalize(self, _release_unclosed, held[0], held[1], loop)
        return held[1]

    @property
    def http(self) -> httpx.AsyncClient:
        return self._pool.client

    @property
    def environment(self) -> str | None:
        """The default environment, once learned for this server and key."""
        return _environments.get((self.target.url, self.target.key))

    @environment.setter
    def environment(self, value: str | None) -> None:
        if value is None:
            _environments.pop((self.target.url, self.target.key), None)
        else:
            _environments[(self.target.url, self.target.key)] = value

    def __repr__(self) -> str:
        return f"Connection({self.target.url!r})"

    async def close(self) -> None:
        """Lets go of this handle's share of the client (closed with its last share)."""
        held, self._held = self._held, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if held is not None:
            client = _release(*held)
            if client is not None:
                await client.aclose()

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
