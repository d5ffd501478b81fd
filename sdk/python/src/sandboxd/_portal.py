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


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="sandboxd-sync", daemon=True).start()
            _loop = loop
        return _loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs `coroutine` on the shared loop and waits for its result."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _running_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
