"""Stateful code: interpreter contexts (Python, JavaScript, bash) that keep their
variables, imports and definitions between runs, as a notebook's kernel does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import errors

if TYPE_CHECKING:
    from ._handle import SandboxHandle


@dataclass(frozen=True)
class Context:
    """An interpreter context in a sandbox."""

    context_id: str
    language: str
    status: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Context:
        return cls(
            context_id=data["contextId"],
            language=data.get("language", "python"),
            status=data.get("status", ""),
        )


@dataclass(frozen=True)
class RunError:
    """The exception a run raised."""

    name: str
    value: str
    traceback: str


@dataclass(frozen=True)
class Result:
    """Something a run displayed, or its final value, in every format it has."""

    #: Each format by its MIME type (`image/png` in base64, `text/html`, ...).
    data: dict[str, Any]
    #: The run's final value rather than something it displayed.
    is_main_result: bool = False

    @property
    def text(self) -> str | None:
        return self.data.get("text/plain")

    @property
    def html(self) -> str | None:
        return self.data.get("text/html")

    @property
    def png(self) -> str | None:
        """A picture, PNG in base64."""
        return self.data.get("image/png")

    @property
    def chart(self) -> dict[str, Any] | None:
        """What a matplotlib figure draws, as data (its `type`, `title`, `elements`...)."""
        return self.data.get("application/vnd.sandboxd.chart+json")

    @property
    def table(self) -> dict[str, list[Any]] | None:
        """A pandas data frame's columns."""
        return self.data.get("application/vnd.sandboxd.data+json")


@dataclass(frozen=True)
class Execution:
    """What a run printed, the text of its final expression, what it displayed, or its
    exception."""

    stdout: str
    stderr: str
    #: `repr()` of the final expression's value, when the code ends with one.
    result: str | None
    error: RunError | None
    #: The run went past its timeout and was interrupted (the context stays).
    timed_out: bool
    #: The run's number in its context: 1 for its first.
    execution_count: int = 0
    #: stdout or stderr was cut at 1 MiB, or results left out.
    truncated: bool = False
    #: What it displayed, in order, then its final value, each in every format it has.
    results: tuple[Result, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Execution:
        error = data.get("error")
        return cls(
            stdout=data.get("stdout", ""),
            stderr=data.get("stderr", ""),
            result=data.get("result"),
            error=None
            if not error
            else RunError(
                name=error.get("name", ""),
                value=error.get("value", ""),
                traceback=error.get("traceback", ""),
            ),
            timed_out=bool(data.get("timedOut", False)),
            execution_count=int(data.get("executionCount", 0)),
            truncated=bool(data.get("truncated", False)),
            results=tuple(
                Result(data=dict(r.get("data") or {}), is_main_result=bool(r.get("isMainResult")))
                for r in data.get("results") or ()
            ),
        )


class AsyncCode:
    """Runs code in a sandbox's contexts; behind `AsyncSandbox.run_code`."""

    def __init__(self, sandbox: SandboxHandle) -> None:
        self._sandbox = sandbox
        self._default: Context | None = None

    async def create_context(self, language: str = "python") -> Context:
        """A new context: `python` (the image needs `python3`), `javascript` (`node`)
        or `bash`."""
        answer = await self._sandbox._conn.call(
            "sandbox.contextCreate", {"sandboxId": self._sandbox.id, "language": language}
        )
        return Context.from_json(answer)

    async def remove_context(self, context: Context | str) -> None:
        """Ends a context and forgets its state."""
        context_id = context if isinstance(context, str) else context.context_id
        await self._sandbox._conn.call(
            "sandbox.contextRemove", {"sandboxId": self._sandbox.id, "contextId": context_id}
        )
        if self._default is not None and self._default.context_id == context_id:
            self._default = None

    async def run(
        self, code: str, *, context: Context | str | None = None, timeout: float = 60
    ) -> Execution:
        """Runs `code` in `context` (by default one context of this sandbox, made on
        first use and shared by every run without a context)."""
        if context is None:
            if self._default is None:
                self._default = await self.create_context()
            context = self._default
        context_id = context if isinstance(context, str) else context.context_id
        # A caller that gives up closes the request, and the server interrupts the run
        # then (once: a second interrupt of our own could reach the next run).
        answer = await self._sandbox._conn.call(
            "sandbox.contextRun",
            {
                "sandboxId": self._sandbox.id,
                "contextId": context_id,
                "code": code,
                "timeoutMs": max(1000, int(timeout * 1000)),
            },
            timeout=timeout + 30,
        )
        return Execution.from_json(answer)

    async def interrupt(self, context: Context | str) -> None:
        """Interrupts what runs in `context` (a `KeyboardInterrupt` in it)."""
        context_id = context if isinstance(context, str) else context.context_id
        try:
            await self._sandbox._conn.call(
                "sandbox.processSignal",
                {"sandboxId": self._sandbox.id, "processId": context_id, "signal": "INT"},
                timeout=10,
            )
        except errors.SandboxdError:
            pass  # it ended, or the sandbox did
