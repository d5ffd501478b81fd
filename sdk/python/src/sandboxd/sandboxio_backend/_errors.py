"""The SDK's errors as sandboxio's, each chained to the SDK error it came from."""

from __future__ import annotations

from sandboxio.errors import (
    AuthError,
    ConfigurationError,
    ConnectError,
    CreationError,
    ExecutionError,
    FileSystemError,
    PathNotFound,
    RateLimitError,
    SandboxError,
    SandboxGone,
)
from sandboxio.models import ExecResult

from .. import errors as sdk

BACKEND = "sandboxd"
KEY_VARIABLE = "SANDBOXD_KEY"
KILLED_EXIT = 137
KILL_HINT = (
    "The sandbox may still be running; `sandboxd reap` (or `sandboxio reap --kill`) "
    "removes it."
)


def _common(error: sdk.SandboxdError, sandbox_id: str | None) -> SandboxError | None:
    """The mappings every operation shares; None where the operation decides."""
    if isinstance(error, sdk.AuthenticationError):
        return AuthError(BACKEND, env_var=KEY_VARIABLE)
    if isinstance(error, sdk.RateLimited):
        return RateLimitError(f"sandboxd throttled the request: {error.message}")
    if sandbox_id is not None and isinstance(error, sdk.SandboxNotRunning | sdk.NotFound):
        return SandboxGone(f"sandbox {sandbox_id} no longer runs on sandboxd ({error.message})")
    return None


def on_create(error: sdk.SandboxdError) -> SandboxError:
    # A field out of its bounds is the caller's; an image that cannot be had, the provider's.
    if isinstance(error, sdk.ConfigurationError):
        return ConfigurationError(str(error))
    if isinstance(error, sdk.InvalidRequest) and error.issues:
        return ConfigurationError(f"sandboxd refused the sandbox: {error.message}")
    return _common(error, None) or CreationError(f"sandboxd could not create a sandbox: {error.message}")


def on_connect(error: sdk.SandboxdError, sandbox_id: str) -> SandboxError:
    if isinstance(error, sdk.AuthenticationError):
        return AuthError(BACKEND, env_var=KEY_VARIABLE)
    return ConnectError(f"no sandbox {sandbox_id!r} on sandboxd: {error.message}")


def on_run(error: sdk.SandboxdError, sandbox_id: str) -> SandboxError:
    if isinstance(error, sdk.InvalidRequest):
        return ConfigurationError(f"sandboxd refused the command: {error.message}")
    return _common(error, sandbox_id) or ExecutionError(
        ExecResult(KILLED_EXIT, "", f"sandboxd: {error.message}")
    )


def on_kill(error: sdk.SandboxdError, sandbox_id: str) -> SandboxError:
    return ConnectError(f"sandboxd could not kill sandbox {sandbox_id!r}: {error.message}", hint=KILL_HINT)


def on_files(error: sdk.SandboxdError, sandbox_id: str, path: str) -> SandboxError:
    if isinstance(error, sdk.NotFound):
        return PathNotFound(path)
    common = _common(error, sandbox_id)
    if common is not None:
        return common
    return FileSystemError(f"sandboxd: {error.message}")
