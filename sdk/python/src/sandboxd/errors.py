"""Errors, one class per stable error code of the server."""

from __future__ import annotations

from typing import Any


class SandboxdError(Exception):
    """Base of every error this SDK raises."""

    #: The server's stable error code (`NOT_FOUND`, …), when the server answered.
    code: str = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        issues: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code
        #: For `InvalidRequest`: every bad field, `{"path": [...], "message": ...}`.
        self.issues = issues or []


class ConfigurationError(SandboxdError):
    """The client was given a URL, key or option it cannot use."""


class InvalidRequest(SandboxdError):
    """400: a field is out of its bounds; `issues` names each."""

    code = "BAD_REQUEST"


class AuthenticationError(SandboxdError):
    """401: the key is missing, wrong, revoked or expired."""

    code = "UNAUTHORIZED"


class PermissionDenied(SandboxdError):
    """403: the key or its member may not do this."""

    code = "FORBIDDEN"


class NotFound(SandboxdError):
    """404: no such sandbox (or one of another organization), file or process."""

    code = "NOT_FOUND"


class Conflict(SandboxdError):
    """409: the request conflicts with the current state (a name taken, a limit)."""

    code = "CONFLICT"


class SandboxNotRunning(SandboxdError):
    """412: the sandbox was killed, expired or failed."""

    code = "PRECONDITION_FAILED"


class TooLarge(SandboxdError):
    """413: over a size limit (a file, a transfer)."""

    code = "PAYLOAD_TOO_LARGE"


class RateLimited(SandboxdError):
    """429: too many requests, or a quota reached; `retry_after` in seconds."""

    code = "TOO_MANY_REQUESTS"

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(SandboxdError):
    """500: a fault of the server (its log has the cause)."""

    code = "INTERNAL_SERVER_ERROR"


class Unavailable(SandboxdError):
    """503: the sandbox's agent or server cannot be reached right now; safe to retry."""

    code = "SERVICE_UNAVAILABLE"


class ConnectionFailed(SandboxdError):
    """The server could not be reached at all."""


class CommandError(SandboxdError):
    """A command could not be run (the streaming exec session refused or lost it)."""


class CommandExitError(SandboxdError):
    """Raised by `CommandResult.check()` for a command that did not exit with 0."""

    def __init__(self, result: Any) -> None:
        super().__init__(f"the command exited with {result.exit_code}: {result.stderr[-500:]}")
        self.result = result


class BuildFailed(SandboxdError):
    """A template's build failed: `step` names the step, the message its last lines."""

    def __init__(self, message: str, *, step: int, build_id: str) -> None:
        super().__init__(message)
        self.step = step
        self.build_id = build_id


_BY_CODE: dict[str, type[SandboxdError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest,
        AuthenticationError,
        PermissionDenied,
        NotFound,
        Conflict,
        SandboxNotRunning,
        TooLarge,
        RateLimited,
        ServerError,
        Unavailable,
    )
}


def from_answer(status: int, body: Any, retry_after: str | None = None) -> SandboxdError:
    """The error of a refused request, from its status and error body."""
    code = body.get("code") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    issues = body.get("issues") if isinstance(body, dict) else None
    cls = _BY_CODE.get(code or "") or {
        400: InvalidRequest,
        401: AuthenticationError,
        403: PermissionDenied,
        404: NotFound,
        409: Conflict,
        412: SandboxNotRunning,
        413: TooLarge,
        429: RateLimited,
        503: Unavailable,
    }.get(status, ServerError)
    text = str(message or f"the server answered {status}")
    if cls is AuthenticationError:
        text += " (check the key: SANDBOXD_KEY, or `sandboxd login`)"
    kwargs: dict[str, Any] = {"status": status, "code": code or cls.code, "issues": issues}
    if cls is RateLimited:
        try:
            kwargs["retry_after"] = float(retry_after) if retry_after else None
        except ValueError:
            kwargs["retry_after"] = None
    return cls(text, **kwargs)
