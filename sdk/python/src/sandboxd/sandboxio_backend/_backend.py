"""`SandboxdBackend`: sandboxio's `Backend` on a sandboxd server."""

from __future__ import annotations

import asyncio
import ipaddress
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import httpx
from sandboxio import _policy
from sandboxio._teardown import teardown_grace
from sandboxio.audit import AuditConfig
from sandboxio.errors import (
    AuthError,
    ConfigurationError,
    ConnectError,
    CreateTimeout,
    SandboxError,
)
from sandboxio.models import Capability, IsolationTier, ManagedSandbox, NetworkPolicy, Resources

from .. import errors as sdk
from .._config import _is_loopback, resolve
from .._http import Connection, tls_context
from .._sandbox import AsyncSandbox, _default_environment, abandon_create
from ..models import Egress
from . import _errors
from ._sandbox import SandboxdSandbox

#: What sandboxd does that sandboxio's suite covers. Terminals, background processes and
#: stdin are real too, but sandboxio has no tests for them yet: they are on `.native`.
CAPABILITIES = (
    Capability.RUN_COMMAND
    | Capability.RUN_CODE
    | Capability.STATEFUL_CODE
    | Capability.STREAMING
    | Capability.FILESYSTEM
    | Capability.UPLOAD_DOWNLOAD
    | Capability.NETWORK_POLICY
)
DEFAULT_TEMPLATE = "python"
TEMPLATES = ("base", "python", "node")
#: Where relative paths lead, for files and commands alike.
WORKDIR = "/work"
#: The server's idle timeout cannot be shorter; the lifetime below that is kept here.
SERVER_MIN_TIMEOUT = 10.0
SERVER_MAX_TIMEOUT = 86400.0


class SandboxdBackend:
    """Sandboxes on a sandboxd server: hardened containers with an agent inside,
    reached over its API. `template` is what `create(template=None)` makes."""

    name = "sandboxd"
    capabilities = CAPABILITIES
    isolation = IsolationTier.CONTAINER

    def __init__(
        self,
        *,
        url: str | None = None,
        key: str | None = None,
        template: str = DEFAULT_TEMPLATE,
        environment_id: str | None = None,
        audit: AuditConfig | None = None,
        name_prefix: str = "sandboxio",
    ) -> None:
        self.url = url
        self.key = key
        self.template = template
        self.environment_id = environment_id
        self.audit = audit or AuditConfig()
        #: Every sandbox this backend makes is named `<prefix>-<hex>`; `list_managed`
        #: and `sandboxio reap` find them by it.
        self.name_prefix = name_prefix

    def __repr__(self) -> str:
        return f"SandboxdBackend(url={self.url!r}, template={self.template!r})"

    # --- plumbing ---------------------------------------------------------------------

    def _transport(self, *, keep_alive: bool = True) -> httpx.AsyncBaseTransport:
        """The HTTP transport of one of this backend's shared clients (a test's faulty
        one wraps it)."""
        limits = httpx.Limits() if keep_alive else httpx.Limits(max_keepalive_connections=0)
        return httpx.AsyncHTTPTransport(limits=limits, verify=tls_context())

    def connection(self, url: str | None = None, *, borrowed: bool = False) -> Connection:
        """A connection to the server with the key; `AuthError` when there is none.

        The sandboxes this backend made share one pooled client per server, and each
        keeps its exec session between commands; both are let go of when the sandbox
        is killed. A `borrowed` one (what `connect` gives: sandboxio has no call that
        lets go of a sandbox short of killing it, so such a handle may just be dropped)
        holds no socket between calls."""
        target = resolve(url or self.url, self.key)
        if not target.key:
            raise AuthError(self.name, env_var=_errors.KEY_VARIABLE)
        if borrowed:
            return Connection(
                target,
                transport=lambda: self._transport(keep_alive=False),
                share=(id(self), "borrowed"),
                keeps_sockets=False,
            )
        return Connection(target, transport=self._transport, share=id(self))

    async def _environment(self, conn: Connection) -> str:
        if self.environment_id is None:
            try:
                self.environment_id = await _default_environment(conn)
            except sdk.SandboxdError as error:
                raise _errors.on_create(error) from error
        return self.environment_id

    def _split(self, template: str | None) -> tuple[dict[str, str], str | None]:
        """The template or image of a DSN template, and the server it names, if any."""
        chosen = template or self.template
        url = None
        if "@" in chosen:
            chosen, _, server = chosen.rpartition("@")
            host = urlsplit(f"//{server}").hostname or ""
            scheme = "http" if _is_loopback(f"http://{host}") else "https"
            url = f"{scheme}://{server}"
        if not chosen:
            chosen = self.template
        kind = "template" if chosen in TEMPLATES else "image"
        return {kind: chosen}, url

    # --- Backend ----------------------------------------------------------------------

    async def create(
        self,
        *,
        template: str | None = None,
        resources: Resources = Resources(),
        network: NetworkPolicy = NetworkPolicy(),
        env: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        timeout: float = 300,
        metadata: dict[str, str] | None = None,
    ) -> SandboxdSandbox:
        _policy.validate_request(
            resources=resources,
            network=network,
            timeout=timeout,
            capabilities=self.capabilities,
            backend=self.name,
            allowlist_supported=True,
        )
        if resources.disk_mb is not None:
            raise ConfigurationError(
                "Resources.disk_mb is not enforced by sandboxd and is refused, not ignored.",
                hint="Drop disk_mb, or pick a backend that caps disk.",
            )
        if network.ingress_ports:
            raise ConfigurationError(
                "sandboxd publishes no ports; NetworkPolicy.ingress_ports is refused.",
                hint="Drop ingress_ports.",
            )
        source, url = self._split(template)
        conn = self.connection(url)
        name = f"{self.name_prefix}-{uuid.uuid4().hex[:12]}"
        started = time.monotonic()
        fields: dict[str, Any] = {
            **source,
            "name": name,
            "timeout": min(max(float(timeout), SERVER_MIN_TIMEOUT), SERVER_MAX_TIMEOUT),
            "env": {**(env or {}), **(secrets or {})} or None,
            "network": _network(network),
            "cpu": resources.cpu,
            "memory_mb": resources.memory_mb,
            "workdir": WORKDIR,
            "labels": dict(metadata or {}) or None,
        }
        request: asyncio.Future[AsyncSandbox] | None = None
        try:
            with anyio.fail_after(timeout):
                fields["environment_id"] = await self._environment(conn)
                # The request runs on whatever happens to its caller, so a sandbox made
                # after the caller gave up is still known, and removed.
                request = asyncio.ensure_future(AsyncSandbox.create_on(conn, **fields))
                made = await asyncio.shield(request)
        except TimeoutError as error:
            await self._abandon(request, conn)
            raise CreateTimeout(f"create() exceeded {timeout}s on sandboxd") from error
        except anyio.get_cancelled_exc_class():
            await self._abandon(request, conn)
            raise
        except SandboxError:
            await conn.close()
            raise
        except sdk.SandboxdError as error:
            await conn.close()
            raise _errors.on_create(error) from error
        sandbox = SandboxdSandbox(
            self,
            made,
            lifetime=float(timeout),
            started=started,
            network=network,
            secrets=secrets or {},
            env=env or {},
            metadata=metadata or {},
        )
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await sandbox._teardown()
            raise
        return sandbox

    async def _abandon(self, request: asyncio.Future[AsyncSandbox] | None, conn: Connection) -> None:
        """Removes what a create given up on made: waits (shielded, within the teardown
        grace) for the server's answer, then kills the sandbox it names."""
        with anyio.CancelScope(shield=True):
            if request is None:
                await conn.close()
            else:
                await abandon_create(request, conn, wait=teardown_grace())

    async def connect(self, sandbox_id: str) -> SandboxdSandbox:
        conn = self.connection(borrowed=True)
        try:
            made = await AsyncSandbox.connect_on(conn, sandbox_id)
        except sdk.SandboxdError as error:
            await conn.close()
            raise _errors.on_connect(error, sandbox_id) from error
        except BaseException:
            await conn.close()
            raise
        if made.info.status != "running":
            await conn.close()
            raise ConnectError(f"sandbox {sandbox_id!r} is {made.info.status}, not running")
        return SandboxdSandbox(
            self,
            made,
            lifetime=None,
            started=time.monotonic(),
            network=_policy_of(made.info.network_mode, made.info.egress),
            secrets={},
            env={},
            metadata=made.info.labels,
        )

    # --- ReapableBackend --------------------------------------------------------------

    async def list_managed(self, *, labels: Mapping[str, str] | None = None) -> list[ManagedSandbox]:
        """This backend's sandboxes the server still runs, with `labels` among theirs."""
        conn = self.connection()
        try:
            environment = await self._environment(conn)
            listed = await AsyncSandbox.list(environment_id=environment, url=conn.target.url, key=conn.target.key)
        except sdk.SandboxdError as error:
            raise ConnectError(f"sandboxd could not list sandboxes: {error.message}") from error
        finally:
            await conn.close()
        return [
            ManagedSandbox(
                sandbox_id=info.sandbox_id,
                backend=self.name,
                state="running" if info.status == "running" else "stopped",
                created_at=_parse_time(info.created_at),
                labels=info.labels,
            )
            for info in listed
            if info.name.startswith(f"{self.name_prefix}-")
            and info.status in ("running", "creating")
            and all(info.labels.get(k) == v for k, v in (labels or {}).items())
        ]

    async def kill_managed(self, sandbox_id: str) -> bool:
        """Kills one sandbox; False if it was already gone."""
        conn = self.connection()
        try:
            made = await AsyncSandbox.connect_on(conn, sandbox_id)
            if made.info.status == "killed":
                return False
            await made.kill()
        except sdk.NotFound:
            return False
        except sdk.SandboxdError as error:
            raise _errors.on_kill(error, sandbox_id) from error
        finally:
            await conn.close()
        return True


def _parse_time(raw: str) -> Any:
    from datetime import datetime

    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def backend() -> SandboxdBackend:
    """The entry point's factory: a backend configured from the environment."""
    return SandboxdBackend()



def _network(policy: NetworkPolicy) -> str | Egress:
    """sandboxd's network for a policy: `deny` with hosts allowed is an `allowlist`
    sandbox (host names only: sandboxd resolves them itself and refuses addresses)."""
    if policy.egress != "deny":
        return "internet"
    if not policy.allow:
        return "isolated"
    for entry in policy.allow:
        host = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
        try:
            ipaddress.ip_network(host.strip("[]"), strict=False)
        except ValueError:
            continue
        raise ConfigurationError(
            f"NetworkPolicy.allow holds {entry!r}: sandboxd allows host names, not addresses or CIDRs.",
            hint="Name the hosts (e.g. 'pypi.org', '*.pythonhosted.org'); sandboxd resolves them and refuses private ranges.",
        )
    return Egress(allow=list(policy.allow))


def _policy_of(network_mode: str, egress: list[str] | None) -> NetworkPolicy:
    """The policy of a sandbox made elsewhere, from its record."""
    if network_mode == "allowlist":
        return NetworkPolicy(egress="deny", allow=tuple(egress or ()))
    return NetworkPolicy(egress="deny" if network_mode == "isolated" else "allow")
