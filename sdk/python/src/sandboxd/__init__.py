"""The Python SDK of sandboxd: sandboxes made and driven through a sandboxd server.

    from sandboxd import Sandbox

    with Sandbox.create("python") as sb:
        print(sb.commands.run("python3 -c 'print(6 * 7)'").stdout)

The server and key come from the arguments `url` and `key`, else `SANDBOXD_URL` and
`SANDBOXD_KEY`, else the profile `sandboxd login` wrote, else the local server's
defaults. `AsyncSandbox` is the same API for asyncio.
"""

from ._code import Context, Execution, Result, RunError
from ._commands import AsyncCommands, AsyncCommandStream, AsyncProcess, OutputChunk
from ._egress import AsyncEgress
from ._files import AsyncFiles
from ._ports import AsyncPorts
from ._pty import AsyncPty, AsyncTerminal
from ._sandbox import AsyncSandbox
from ._templates import BuildLogLine, Template
from ._sync import (
    CommandStream,
    Commands,
    Files,
    Ports,
    Process,
    Pty,
    Sandbox,
    SandboxEgress,
    Terminal,
)
from .errors import (
    AuthenticationError,
    BuildFailed,
    CommandError,
    CommandExitError,
    ConfigurationError,
    Conflict,
    ConnectionFailed,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    RateLimited,
    SandboxdError,
    SandboxNotRunning,
    ServerError,
    TooLarge,
    Unavailable,
)
from .models import (
    ActivityEntry,
    ActivityPage,
    Change,
    Changes,
    CommandResult,
    Egress,
    EgressCredential,
    EgressEntry,
    EgressLog,
    EgressRequest,
    EntryInfo,
    ExposedPort,
    FileChange,
    MetricReading,
    OutputSlice,
    ProcessInfo,
    SandboxInfo,
    SandboxStats,
    SnapshotInfo,
    TemplateInfo,
    VolumeInfo,
    VolumeMount,
)

__all__ = [
    "ActivityEntry",
    "ActivityPage",
    "AsyncCommandStream",
    "AsyncCommands",
    "AsyncEgress",
    "AsyncFiles",
    "AsyncPorts",
    "AsyncProcess",
    "AsyncPty",
    "AsyncSandbox",
    "AsyncTerminal",
    "AuthenticationError",
    "BuildFailed",
    "BuildLogLine",
    "Change",
    "Changes",
    "CommandError",
    "CommandExitError",
    "CommandResult",
    "CommandStream",
    "Commands",
    "ConfigurationError",
    "Conflict",
    "ConnectionFailed",
    "Context",
    "Egress",
    "EgressCredential",
    "EgressEntry",
    "EgressLog",
    "EgressRequest",
    "EntryInfo",
    "ExposedPort",
    "FileChange",
    "MetricReading",
    "Execution",
    "Files",
    "InvalidRequest",
    "NotFound",
    "OutputChunk",
    "OutputSlice",
    "PermissionDenied",
    "Ports",
    "Process",
    "ProcessInfo",
    "Pty",
    "RateLimited",
    "Result",
    "RunError",
    "Sandbox",
    "SandboxEgress",
    "SandboxInfo",
    "SandboxStats",
    "SnapshotInfo",
    "VolumeInfo",
    "VolumeMount",
    "SandboxNotRunning",
    "SandboxdError",
    "ServerError",
    "Template",
    "TemplateInfo",
    "Terminal",
    "TooLarge",
    "Unavailable",
]
