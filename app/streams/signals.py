"""SIGTERM and SIGINT tell the stream hub to drain before uvicorn stops."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["SignalHook"]


class SignalHook:
    """Chains a handler in front of uvicorn's SIGTERM/SIGINT handlers, restored on exit.

    uvicorn (``Server.capture_signals``) installs plain ``signal.signal`` handlers on the main
    thread before the lifespan starts; this one tells the hub first, then calls uvicorn's, which
    stops the accept loop and waits for open connections. Off the main thread (a server in a
    test thread), or when no Python handler is installed, there is nothing to chain.
    """

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback
        self._installed: list[tuple[signal.Signals, Any, Any]] = []

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue

            def handler(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
                loop.call_soon_threadsafe(self._callback)
                previous(signum, frame)

            signal.signal(sig, handler)
            self._installed.append((sig, handler, previous))

    def remove(self) -> None:
        for sig, handler, previous in self._installed:
            if signal.getsignal(sig) is handler:
                signal.signal(sig, previous)
        self._installed.clear()
