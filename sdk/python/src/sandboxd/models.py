"""What the server answers, as typed values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import CommandExitError


@dataclass(frozen=True)
class EgressCredential:
    """A header sandboxd adds to the sandbox's requests to `host` (sent by its programs
    in plain HTTP, `http://host/...`; sandboxd speaks HTTPS to the host). Sealed at
    rest, never returned, never inside the sandbox."""

    host: str
    header: str
    value: str = field(repr=False)


@dataclass(frozen=True)
class Egress:
    """`network=Egress(allow=[...])` on create: no network but connections to these
    hosts (names, `*.` wildcards over one or more labels, either with `:port`; 80 and
    443 otherwise), through sandboxd; `credentials` for hosts of the list."""

    allow: list[str] = field(default_factory=list)
    credentials: list[EgressCredential] = field(default_factory=list)


@dataclass(frozen=True)
class EgressEntry:
    """One decision of the egress proxy for an `allowlist` sandbox's connection."""

    #: The same for both writes of an allowed connection's entry (decided, ended).
    entry_id: str
    at: str
    host: str
    port: int
    #: `allowed`, `refused` or `failed` (allowed, but the host did not answer).
    decision: str
    reason: str | None
    address: str | None
    bytes_out: int
    bytes_in: int
    #: `None` while the connection is open, and for refusals.
    ended_at: str | None
    #: Decisions left out of the log before this one (over the sandbox's allowance).
    unlogged: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EgressEntry:
        return cls(
            entry_id=data["entryId"],
            at=data.get("at", ""),
            host=data.get("host", ""),
            port=int(data.get("port", 0)),
            decision=data.get("decision", ""),
            reason=data.get("reason"),
            address=data.get("address"),
            bytes_out=int(data.get("bytesOut", 0)),
            bytes_in=int(data.get("bytesIn", 0)),
            ended_at=data.get("endedAt"),
            unlogged=int(data.get("unlogged", 0)),
        )


@dataclass(frozen=True)
class ActivityEntry:
    """One thing done in a sandbox (`sandbox.activity`): `kind` is `command`, `file`,
    `terminal`, `network` or `lifecycle`, and `detail` that kind's fields as the API
    gives them (camelCase: a command's `command`, `exitCode`, `durationMs`, `stdout`
    `{bytes, firstLines, lastLines}`, …)."""

    entry_id: str
    #: When it happened (a command: when it started), RFC 3339.
    at: str
    kind: str
    #: `exec`, `stream`, `process`, `code`; `write`, `read`, …; `open`, `close`; …
    action: str
    #: The key that asked (`{keyId, userId}`); `None` when sandboxd did it itself.
    by: dict[str, str] | None
    detail: dict[str, Any]

    @property
    def failed(self) -> bool:
        """A command that exited non-zero, timed out, ran out of memory or could not
        run; a file operation that failed."""
        d = self.detail
        code = d.get("exitCode")
        return (
            (code is not None and code != 0)
            or bool(d.get("timedOut"))
            or bool(d.get("oomKilled"))
            or d.get("error") is not None
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ActivityEntry:
        kind = data.get("kind", "")
        return cls(
            entry_id=data["entryId"],
            at=data.get("at", ""),
            kind=kind,
            action=data.get("action", ""),
            by=data.get("by"),
            detail=dict(data.get(kind) or {}),
        )


@dataclass(frozen=True)
class ActivityPage:
    """A read of a sandbox's timeline: entries in the order they were written, newest
    last."""

    entries: list[ActivityEntry]
    #: Pass back as `cursor` to read what is written after these.
    next_cursor: str | None
    #: Whether more entries were already written after these.
    more: bool
    #: Entries trimmed from the timeline or never written.
    dropped: int


@dataclass(frozen=True)
class EgressLog:
    """A read of a sandbox's egress log: entries in the order they were written."""

    entries: list[EgressEntry]
    #: Pass back as `cursor` to read what is written after these.
    next_cursor: str | None
    #: Whether more entries were already written after these.
    more: bool


@dataclass(frozen=True)
class EgressRequest:
    """A request for an `allowlist` sandbox to reach one more host."""

    request_id: str
    sandbox_id: str
    host: str
    reason: str | None
    #: `pending`, `approved` or `denied`.
    status: str
    requested_by: str
    created_at: str
    decided_at: str | None
    decided_by: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EgressRequest:
        return cls(
            request_id=data["requestId"],
            sandbox_id=data.get("sandboxId", ""),
            host=data.get("host", ""),
            reason=data.get("reason"),
            status=data.get("status", ""),
            requested_by=data.get("requestedBy", ""),
            created_at=data.get("createdAt", ""),
            decided_at=data.get("decidedAt"),
            decided_by=data.get("decidedBy"),
        )


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox's record."""

    sandbox_id: str
    name: str
    status: str
    image: str
    template: str | None
    cpu: float
    memory_mb: int
    timeout_ms: int
    network_mode: str
    workdir: str
    user: str | None
    isolation: str
    environment_id: str
    project_id: str
    server_id: str | None
    container_id: str | None
    created_at: str
    expires_at: str | None
    #: What the sandbox was labelled with at creation.
    labels: dict[str, str] = field(default_factory=dict)
    #: The hosts an `allowlist` sandbox may reach; `None` in the other network modes.
    egress: list[str] | None = None
    #: Whether the idle timeout pauses it instead of killing it.
    auto_pause: bool = False
    #: Where its memory goes when the idle timeout pauses it: `"ram"` or `"disk"`.
    auto_pause_to: str | None = None
    #: How long it may stay paused before it is killed.
    paused_timeout_ms: int = 0
    #: Whether it ends `timeout_ms` after it was made (or its timeout last set),
    #: whatever it does, rather than after its last activity.
    fixed_timeout: bool = False
    #: When it was paused (`status == "paused"`), else `None`.
    paused_at: str | None = None
    #: The volumes mounted into it.
    volumes: list[VolumeMount] = field(default_factory=list)
    #: Where a paused sandbox's memory is: `"ram"` or `"disk"`; `None` while it runs.
    paused_to: str | None = None
    #: A sandbox paused to disk: the size of its saved memory, in bytes.
    hibernated_bytes: int | None = None
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SandboxInfo:
        return cls(
            sandbox_id=data["sandboxId"],
            name=data.get("name", ""),
            status=data.get("status", ""),
            image=data.get("image", ""),
            template=data.get("template"),
            cpu=float(data.get("cpu", 0)),
            memory_mb=int(data.get("memoryMb", 0)),
            timeout_ms=int(data.get("timeoutMs", 0)),
            network_mode=data.get("networkMode", ""),
            workdir=data.get("workdir", "/"),
            user=data.get("user"),
            isolation=data.get("isolation", ""),
            environment_id=data.get("environmentId", ""),
            project_id=data.get("projectId", ""),
            server_id=data.get("serverId"),
            container_id=data.get("containerId"),
            created_at=data.get("createdAt", ""),
            expires_at=data.get("expiresAt"),
            labels=dict(data.get("labels") or {}),
            egress=None if data.get("egress") is None else list(data["egress"].get("allow") or []),
            auto_pause=bool(data.get("autoPause", False)),
            auto_pause_to=data.get("autoPauseTo"),
            paused_timeout_ms=int(data.get("pausedTimeoutMs", 0)),
            fixed_timeout=bool(data.get("fixedTimeout", False)),
            paused_at=data.get("pausedAt"),
            volumes=[VolumeMount.from_json(v) for v in data.get("volumes") or []],
            paused_to=data.get("pausedTo"),
            hibernated_bytes=data.get("hibernatedBytes"),
            raw=data,
        )


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot of a sandbox's files: sandboxes started from it (`create(snapshot=...)`)
    get its files, user and workdir, on the server it lives on."""

    snapshot_id: str
    name: str
    sandbox_id: str
    project_id: str
    server_id: str | None
    source_image: str
    template: str | None
    user: str | None
    workdir: str
    size_bytes: int
    created_at: str
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    #: Bytes of the processes' memory it keeps; None: files only.
    memory_bytes: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SnapshotInfo:
        return cls(
            snapshot_id=data["snapshotId"],
            name=data.get("name", ""),
            sandbox_id=data.get("sandboxId", ""),
            project_id=data.get("projectId", ""),
            server_id=data.get("serverId"),
            source_image=data.get("sourceImage", ""),
            template=data.get("template"),
            user=data.get("user"),
            workdir=data.get("workdir", "/"),
            size_bytes=int(data.get("sizeBytes", 0)),
            created_at=data.get("createdAt", ""),
            raw=data,
            memory_bytes=None if data.get("memoryBytes") is None else int(data["memoryBytes"]),
        )


@dataclass(frozen=True)
class VolumeInfo:
    """A volume: named storage that outlives sandboxes, on one server. Sandboxes that
    mount it (`create(volumes=...)`) run there."""

    volume_id: str
    name: str
    project_id: str
    server_id: str | None
    #: What it reserves against the organization's quota (MiB).
    size_mb: int
    created_at: str
    #: `ready` (mountable), `creating` or `removing` (asking again finishes it).
    status: str = "ready"
    #: The sandboxes being created, running or paused that mount it (those the key
    #: sees).
    sandboxes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VolumeInfo:
        return cls(
            volume_id=data["volumeId"],
            name=data.get("name", ""),
            project_id=data.get("projectId", ""),
            server_id=data.get("serverId"),
            size_mb=int(data.get("sizeMb", 0)),
            created_at=data.get("createdAt", ""),
            status=data.get("status", "ready"),
            sandboxes=list(data.get("sandboxes") or []),
            raw=data,
        )


@dataclass(frozen=True)
class VolumeMount:
    """A volume mounted into a sandbox at `path`; `read_only`: nothing in the sandbox
    can write it."""

    volume: VolumeInfo | str
    path: str
    read_only: bool = False

    @property
    def volume_id(self) -> str:
        return self.volume.volume_id if isinstance(self.volume, VolumeInfo) else self.volume

    def to_json(self) -> dict[str, Any]:
        return {"volumeId": self.volume_id, "path": self.path, "readOnly": self.read_only}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VolumeMount:
        return cls(
            volume=data["volumeId"], path=data.get("path", ""), read_only=bool(data.get("readOnly"))
        )


@dataclass(frozen=True)
class Change:
    """A path a sandbox added, changed or removed since its template or snapshot."""

    path: str
    #: `added`, `changed` or `removed`.
    kind: str
    #: `file`, `directory`, `symlink`, `other`; `None` when removed (or unknown).
    type: str | None
    #: Bytes, for files and links.
    size: int | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Change:
        return cls(
            path=data["path"],
            kind=data.get("kind", ""),
            type=data.get("type"),
            size=data.get("size"),
        )


@dataclass(frozen=True)
class Changes:
    """What `changes()` found: the paths by name, the areas looked at, and whether the
    list was cut at its bound (10,000)."""

    changes: list[Change]
    areas: list[str]
    truncated: bool
    total_bytes: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Changes:
        return cls(
            changes=[Change.from_json(c) for c in data.get("changes") or []],
            areas=list(data.get("areas") or []),
            truncated=bool(data.get("truncated", False)),
            total_bytes=int(data.get("totalBytes", 0)),
        )


@dataclass(frozen=True)
class SandboxStats:
    """What a running sandbox uses now, against its limits."""

    #: CPU used since the previous reading, in percent of one CPU (200: two CPUs busy).
    cpu_percent: float
    cpu_limit: float
    cpu_time_ms: int
    memory_bytes: int
    memory_limit_bytes: int
    pids: int
    pids_limit: int
    sampled_at: str
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SandboxStats:
        return cls(
            cpu_percent=float(data.get("cpuPercent", 0)),
            cpu_limit=float(data.get("cpuLimit", 0)),
            cpu_time_ms=int(data.get("cpuTimeMs", 0)),
            memory_bytes=int(data.get("memoryBytes", 0)),
            memory_limit_bytes=int(data.get("memoryLimitBytes", 0)),
            pids=int(data.get("pids", 0)),
            pids_limit=int(data.get("pidsLimit", 0)),
            sampled_at=data.get("sampledAt", ""),
            raw=data,
        )


@dataclass(frozen=True)
class FileChange:
    """One change under a watched directory (`Sandbox.files.watch`)."""

    #: `create`, `write`, `remove`, `rename` or `chmod`.
    change: str
    #: The absolute path that changed.
    path: str
    #: The same, under the watched directory.
    name: str


@dataclass(frozen=True)
class MetricReading:
    """One reading of a sandbox's use over time (`Sandbox.metrics`), taken every 5 s."""

    #: When it was taken (RFC 3339).
    time: str
    #: CPU used since the reading before, in percent of one CPU.
    cpu_percent: float
    memory_bytes: int
    pids: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MetricReading:
        return cls(
            time=data.get("time", ""),
            cpu_percent=float(data.get("cpuPercent", 0)),
            memory_bytes=int(data.get("memoryBytes", 0)),
            pids=int(data.get("pids", 0)),
        )


@dataclass(frozen=True)
class ExposedPort:
    """A port of a sandbox reachable as a preview URL."""

    port: int
    public: bool
    #: The preview's address; a private port's carries its signed link.
    url: str
    expires_at: str
    created_at: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExposedPort:
        return cls(
            port=int(data["port"]),
            public=bool(data.get("public", False)),
            url=str(data["url"]),
            expires_at=data.get("expiresAt", ""),
            created_at=data.get("createdAt", ""),
        )


@dataclass(frozen=True)
class CommandResult:
    """How a command ended, with its output."""

    exit_code: int
    stdout: str
    stderr: str
    #: The command ran past its timeout and was killed (exit code 124).
    timed_out: bool = False
    #: Output past the server's 1 MiB per stream was not kept (callbacks saw it all).
    truncated: bool = False
    oom_killed: bool = False

    def check(self) -> CommandResult:
        """This result, or `CommandExitError` when the exit code is not 0."""
        if self.exit_code != 0:
            raise CommandExitError(self)
        return self


@dataclass(frozen=True)
class EntryInfo:
    """One directory entry."""

    name: str
    path: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int | None
    mode: str | None
    modified_at: str | None


@dataclass(frozen=True)
class ProcessInfo:
    """A background process as the sandbox's agent keeps it."""

    process_id: str
    pid: int
    cmd: str
    status: str
    exit_code: int | None
    stdin_open: bool
    stdout_bytes: int
    stderr_bytes: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessInfo:
        return cls(
            process_id=data["processId"],
            pid=int(data.get("pid", 0)),
            cmd=data.get("cmd", ""),
            status=data.get("status", ""),
            exit_code=data.get("exitCode"),
            stdin_open=bool(data.get("stdinOpen", False)),
            stdout_bytes=int(data.get("stdoutBytes", 0)),
            stderr_bytes=int(data.get("stderrBytes", 0)),
        )


@dataclass(frozen=True)
class OutputSlice:
    """Bytes `[start, end)` of a process's stream; pass `end` as the next offset.
    `start` is past the offset asked when older output was dropped (the agent keeps the
    last MiB of each stream)."""

    start: int
    end: int
    data: bytes
    exited: bool


@dataclass
class TemplateInfo:
    """A template built from a Dockerfile (`Template.build`): `Sandbox.create(name)`
    makes sandboxes of its newest ready version."""

    template_id: str
    name: str
    project_id: str
    #: The version a create uses; `None` while none is ready.
    version: int | None
    user: str | None
    workdir: str | None
    start_command: list[str] | None
    #: Run after the start command until it succeeds, before a create answers.
    ready_command: list[str] | None = None
    #: Every version, newest first: `buildId`, `version`, `status`, `createdAt`, `error`.
    versions: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TemplateInfo:
        return cls(
            template_id=data["templateId"],
            name=data.get("name", ""),
            project_id=data.get("projectId", ""),
            version=data.get("version"),
            user=data.get("user"),
            workdir=data.get("workdir"),
            start_command=data.get("startCommand"),
            ready_command=data.get("readyCommand"),
            versions=list(data.get("versions") or []),
            raw=data,
        )
