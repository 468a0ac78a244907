"""A backend stand-in that receives feedback callbacks on a loopback port.

``with CallbackReceiver() as rx:`` serves ``POST {rx.url}``; each request is recorded
(``rx.received``: headers and JSON body) and answered with the next status of ``rx.script``
(200 once the script is used up). ``rx.down()`` / ``rx.up()`` stop and restart the server on
the same port, for "the backend was away for a while".
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.gateway import free_port


class CallbackReceiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api/members/feedback/result"
        self.received: list[dict[str, Any]] = []
        self.script: list[int] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    async def _handle(self, request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        with self._lock:
            status = self.script.pop(0) if self.script else 200
            self.received.append(
                {
                    "headers": dict(request.headers),
                    "body": body,
                    "status": status,
                    "at": time.time(),
                }
            )
        return JSONResponse({"ok": status < 300}, status_code=status)

    def bodies(self, status: int | None = 200) -> list[dict[str, Any]]:
        with self._lock:
            return [r["body"] for r in self.received if status is None or r["status"] == status]

    def wait_for(self, count: int, timeout: float = 20.0, status: int | None = 200) -> None:
        deadline = time.monotonic() + timeout
        while len(self.bodies(status)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(self.bodies(status))} of {count} callbacks after {timeout} s"
                )
            time.sleep(0.02)

    def up(self) -> None:
        app = Starlette(
            routes=[Route("/api/members/feedback/result", self._handle, methods=["POST"])]
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("callback receiver did not start")
            time.sleep(0.01)

    def down(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> CallbackReceiver:
        self.up()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()


@contextmanager
def receiver() -> Iterator[CallbackReceiver]:
    with CallbackReceiver() as rx:
        yield rx
