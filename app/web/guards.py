"""Pure ASGI guards in front of the routes: bounded request bodies, key-only operator pages.

``BodyGuard``: every request body (any method but GET, HEAD and OPTIONS) is read here before a
route sees it, within a size and a time:

    Content-Length over the route's bound     -> 413 at once, nothing read
    more bytes than that arriving (chunked)   -> 413 as soon as they do, the rest never read
    the body not complete within the time     -> 408
    the client gone mid-upload                -> one INFO line, no answer (nobody reads it)

each 413/408 an envelope with ``Connection: close`` (the rest of the body is never read, so the
connection cannot carry another request). The route then gets the whole body at once, so no
route waits on a slow client or meets a ``ClientDisconnect``. Bounds: CHAT_BODY_MAX_BYTES for
the chat POSTs (and anything else), FEEDBACK_BODY_MAX_BYTES for ``POST /ai/feedback``;
REQUEST_BODY_TIMEOUT_SECONDS from the end of the headers. Ours because neither uvicorn nor
starlette bounds a body (starlette reads ``request.body()`` whole, whatever its size: 20
uploads of 10 MB took the process from 374 to 775 MB, and a body announced and never sent held
its connection open past 65 s).

``JsonOnly``: a POST to a route that reads JSON (every POST route of the app: the chat POSTs
and ``POST /ai/feedback``) must say its body is JSON (``application/json`` or ``+json``), or it is
refused 415 unread, with ``Connection: close``. One rule for every such route, before any of
them runs: a browser page of any site may send ``text/plain``, a form, or a body with no type at
all without a preflight (a "simple" request), and a JSON body under such a type would otherwise
be read (FastAPI parses a body without ``Content-Type`` as JSON; our feedback route parsed any).
A POST with no body at all passes: its route answers the missing input (400).

``KeyGate``: under API_KEYS, ``/metrics`` (it names the upstream hosts) and the API docs
(``/docs``, ``/redoc``, ``/openapi.json``) need a key, unless METRICS_PUBLIC / DOCS_PUBLIC.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

import anyio
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.domain.events import envelope
from app.web.access import Access

__all__ = ["DOCS_PATHS", "BodyGuard", "JsonOnly", "KeyGate", "is_json"]

log = logging.getLogger(__name__)

DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
_NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
TOO_LARGE_MESSAGE = "요청 본문이 너무 커요. {limit}바이트 이내로 보내 주세요."
TOO_SLOW_MESSAGE = "요청 본문이 제시간에 다 오지 않았어요. 다시 보내 주세요."
BAD_LENGTH_MESSAGE = "요청의 Content-Length가 올바르지 않아요."
NOT_JSON_MESSAGE = "요청 본문은 JSON(Content-Type: application/json)으로 보내 주세요."


class BodyGuard:
    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int], timeout: float) -> None:
        self.app = app
        self._limit_for = limit_for
        self._timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _NO_BODY_METHODS:
            await self.app(scope, receive, send)
            return
        limit = self._limit_for(scope["path"])
        declared = _content_length(scope)
        if declared == -1:
            await _refuse(scope, receive, send, 400, BAD_LENGTH_MESSAGE, None)
            return
        if declared is not None and declared > limit:
            log.info("request body of %d bytes refused unread (413): over %d", declared, limit)
            await _too_large(scope, receive, send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self._timeout) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    log.info(
                        "client left during its upload (%d bytes read): nothing to answer", size
                    )
                    return
                chunk: bytes = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    log.info("request body over %d bytes refused while reading (413)", limit)
                    await _too_large(scope, receive, send, limit)
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            log.info(
                "request body incomplete after %.0f s (%d bytes read): dropped (408)",
                self._timeout,
                size,
            )
            await _refuse(scope, receive, send, 408, TOO_SLOW_MESSAGE, None)
            return
        await self.app(scope, _replay(b"".join(chunks), receive), send)


def _content_length(scope: Scope) -> int | None:
    """The declared length; None when absent (chunked, or no body); -1 when unreadable."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdecimal() and len(text) <= 18 else -1
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body in one message, then the connection's own messages (its disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _too_large(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    message = TOO_LARGE_MESSAGE.format(limit=limit)
    await _refuse(scope, receive, send, 413, message, {"maxBytes": limit})


async def _refuse(
    scope: Scope, receive: Receive, send: Send, status: int, message: str, data: object
) -> None:
    response = JSONResponse(
        envelope(status, message, data), status_code=status, headers={"connection": "close"}
    )
    await response(scope, receive, send)


def is_json(content_type: bytes) -> bool:
    """``application/json`` or ``application/<anything>+json``, parameters aside."""
    media = content_type.decode("latin-1").partition(";")[0].strip().lower()
    kind, slash, subtype = media.partition("/")
    return (
        kind == "application" and bool(slash) and (subtype == "json" or subtype.endswith("+json"))
    )


def _has_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length" and value.strip() not in (b"", b"0"):
            return True
    return False


class JsonOnly:
    """415 for a POST to one of ``paths`` whose body is not declared JSON (module docstring)."""

    def __init__(self, app: ASGIApp, *, paths: Collection[str]) -> None:
        self.app = app
        self._paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self._paths:
            types = [value for name, value in scope["headers"] if name == b"content-type"]
            declared = bool(types) and all(is_json(value) for value in types)
            if not declared and (types or _has_body(scope)):
                log.info("POST %s refused (415): its body is not declared JSON", scope["path"])
                response = JSONResponse(
                    envelope(415, NOT_JSON_MESSAGE, None),
                    status_code=415,
                    headers={"connection": "close", "accept-post": "application/json"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class KeyGate:
    """401 on ``paths`` for callers without an API key (a page token is no key)."""

    def __init__(self, app: ASGIApp, *, access: Access, paths: Collection[str]) -> None:
        self.app = app
        self._access = access
        self._paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self._paths:
            refusal = self._access.key_refusal(HTTPConnection(scope))
            if refusal is not None:
                response = JSONResponse(
                    envelope(refusal.status, refusal.message, None),
                    status_code=refusal.status,
                    headers={"www-authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
