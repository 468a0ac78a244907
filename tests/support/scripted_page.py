"""A stand-in gateway for the chat page: the real page route, and SSE answers a test scripts.

The page (``/``, ``/static/...``) comes from :mod:`app.routers.page` with its real headers; the
two GET endpoints the page calls play the next queued answer, event by event, and record each
request (path and query) so a test can assert what the page sent. For what the gateway does
not send yet, or not on demand (``suggestions`` in ``close``, an ``error`` after some text);
tests/browser/test_chat_page.py runs everything else against the real gateway.

    with ScriptedPage() as site:
        site.queue(answer_events(recommend, challenges, suggestions=["더 쉬운 거"]))
        browser.get(site.url + "/")
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from types import SimpleNamespace, TracebackType
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from app.config import AccessSettings
from app.domain.events import envelope_json
from app.routers import page
from app.web.access import Access
from app.web.sse import frame
from tests.support.threaded_server import serve_in_thread
from tests.upstream.scripted_openai import expected_display_text

__all__ = ["ScriptedPage", "answer_events", "error_events"]

Event = tuple[str, str]  # (event name, envelope JSON)
PATHS = ("base-info", "free-text")


def answer_events(
    recommend: str,
    challenges: list[dict[str, str]],
    suggestions: list[str] | None = None,
    *,
    piece_chars: int = 4,
) -> list[Event]:
    """A good stream as the gateway sends it: the display text in pieces, then ``close``."""
    text = expected_display_text({"recommend": recommend, "challenges": challenges})
    events = [
        ("challenge", envelope_json(200, "OK", text[i : i + piece_chars]))
        for i in range(0, len(text), piece_chars)
    ]
    data: dict[str, Any] = {"recommend": recommend, "challenges": challenges}
    if suggestions is not None:
        data["suggestions"] = suggestions
    events.append(("close", envelope_json(200, "OK", data)))
    return events


def error_events(shown: str, status: int, message: str) -> list[Event]:
    """Some display text, then the stream's ``error``."""
    return [
        ("challenge", envelope_json(200, "OK", shown)),
        ("error", envelope_json(status, message, None)),
    ]


class ScriptedPage:
    """``queue()`` answers, load ``url + "/"``; ``requests`` lists ``(path, query)`` as sent."""

    def __init__(self, event_delay: float = 0.01) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._answers: deque[list[Event]] = deque()
        self._lock = threading.Lock()
        self._delay = event_delay
        self._stack = ExitStack()
        self.url = ""

    def queue(self, events: list[Event]) -> None:
        with self._lock:
            self._answers.append(events)

    def reset(self) -> None:
        with self._lock:
            self._answers.clear()
            self.requests.clear()

    def _app(self) -> FastAPI:
        # What the lifespan hands the page route: its access decisions (no keys, no tokens).
        chat = SimpleNamespace(admission=SimpleNamespace(access=Access(AccessSettings())))

        @asynccontextmanager
        async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
            yield {"chat": chat}

        app = FastAPI(lifespan=lifespan)
        app.include_router(page.router)
        for name in PATHS:
            app.add_api_route(f"/ai/chatbot/recommendation/{name}", self._answer(name))
        return app

    def _answer(self, name: str) -> Any:
        async def answer(request: Request) -> Response:
            with self._lock:
                self.requests.append((name, dict(request.query_params)))
                events = self._answers.popleft() if self._answers else None
            if events is None:
                return Response(status_code=204)  # stops an EventSource for good
            stream_id = f"s{len(self.requests)}"
            return StreamingResponse(
                self._frames(stream_id, events), media_type="text/event-stream"
            )

        return answer

    async def _frames(self, stream_id: str, events: list[Event]) -> AsyncIterator[str]:
        for seq, (event, data) in enumerate(events, start=1):
            await asyncio.sleep(self._delay)
            yield frame(f"{stream_id}.{seq}", event, data)

    def __enter__(self) -> ScriptedPage:
        self.url = self._stack.enter_context(serve_in_thread(self._app()))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.close()
