"""The Python SDK of sandboxd: sandboxes made and driven through a sandboxd server.

    from sandboxd import Sandbox

    with Sandbox.create("python") as sb:
        print(sb.commands.run("python3 -c 'print(6 * 7)'").stdout)

The server and key come from the arguments `url` and `key`, else `SANDBOXD_URL` and
`SANDBOXD_KEY`, else the profile `sandboxd login` wrote, else the local server's
defaults. `AsyncSandbox` is the same API for asyncio.
"""

from ._commands import AsyncCommands, AsyncProcess
from ._files import AsyncFiles
from ._sandbox import AsyncSandbox
from ._sync import Commands, Files, Process, Sandbox
from .errors import (
    AuthenticationError,
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
from .models import CommandResult, EntryInfo, OutputSlice, ProcessInfo, SandboxInfo

__all__ = [
    "AsyncCommands",
    "AsyncFiles",
    "AsyncProcess",
    "AsyncSandbox",
    "AuthenticationError",
    "CommandError",
    "CommandExitError",
    "CommandResult",
    "Commands",
    "ConfigurationError",
    "Conflict",
    "ConnectionFailed",
    "EntryInfo",
    "Files",
    "InvalidRequest",
    "NotFound",
    "OutputSlice",
    "PermissionDenied",
    "Process",
    "ProcessInfo",
    "RateLimited",
    "Sandbox",
    "SandboxInfo",
    "SandboxNotRunning",
    "SandboxdError",
    "ServerError",
    "TooLarge",
    "Unavailable",
]
