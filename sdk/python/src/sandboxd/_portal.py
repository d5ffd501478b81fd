"""The sync API runs the async one on an event loop of its own, on a daemon thread
shared by every sync object; a call blocks until its coroutine is done, and an
interrupt (Ctrl-C) cancels it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=loop.run_forever, name="sandboxd-sync", daemon=True)
            _thread.start()
            _loop = loop
        return _loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs `coroutine` on the shared loop and waits for its result."""
    loop = _running_loop()
    if threading.current_thread() is _thread:
        coroutine.close()
        raise RuntimeError(
            "a sync sandboxd call from an output callback would wait on itself; "
            "use the async API (AsyncSandbox) for callbacks that call the SDK"
        )
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
