"""Request ids and logs: one JSON object per line, each carrying the request it belongs to.

``RequestIdMiddleware`` gives every HTTP request an id (the caller's ``X-Request-Id`` when it
is a sane token, so a relaying backend can trace its own id through, else a fresh one). The
id lives in a context variable, so every log line written while serving the request, in any
task it starts, carries it; it goes upstream to vLLM as ``X-Request-Id`` and back to the
client in the response header of the same name.

    {"ts": "2026-11-21T14:03:07.123Z", "level": "WARNING", "logger": "app.chat.generation",
     "message": "upstream failed (502): ...", "request_id": "9f0c..."}

``LOG_FORMAT=text`` gives the plain one-line format for a terminal.

uvicorn's access lines (``uvicorn.access``, on as ``scripts/run.sh`` starts it) would hold the
whole query string: a free-text GET's ``message``, a key a client wrongly put there. Each line
is rewritten before any handler sees it (:class:`AccessQueryFilter`, on the logger itself, so
whatever format or handler uvicorn was given): the path, and the query as the redaction the
caller passes (ACCESS_LOG_QUERY=redacted, the default: the one rule traces use,
``app.tracing.redact_query``); ACCESS_LOG_QUERY=full leaves lines whole, for debugging.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "AccessQueryFilter",
    "RequestIdMiddleware",
    "bound_request_id",
    "current_request_id",
    "request_id_of",
    "setup_logging",
]

_REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
_SANE_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
_HANDLER_NAME = "gateway"
_SCOPE_KEY = "eco.request_id"  # also kept in the scope, for the 500 handler outside this middleware


def current_request_id() -> str:
    """The id of the request being served (a fresh one outside a request)."""
    return _REQUEST_ID.get() or uuid.uuid4().hex


def request_id_of(scope: Scope) -> str | None:
    """The id :class:`RequestIdMiddleware` gave the request of ``scope``. Starlette answers an
    unhandled exception outside every middleware of the app, after this one has returned:
    there the scope still has it, the context variable no longer does."""
    value = scope.get(_SCOPE_KEY)
    return value if isinstance(value, str) else None


@contextmanager
def bound_request_id(request_id: str | None) -> Iterator[None]:
    """Log lines written inside carry ``request_id`` (the 500 handler's, see above)."""
    token = _REQUEST_ID.set(request_id)
    try:
        yield
    finally:
        _REQUEST_ID.reset(token)


class RequestIdMiddleware:
    """Pure ASGI (no per-chunk buffering): sets the id, echoes it in ``X-Request-Id``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"x-request-id", b"")
        request_id = given.decode() if _SANE_ID.fullmatch(given) else uuid.uuid4().hex
        scope[_SCOPE_KEY] = request_id
        token = _REQUEST_ID.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-request-id" for name, _ in headers):
                    headers.append((b"x-request-id", request_id.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _REQUEST_ID.reset(token)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = _REQUEST_ID.get()
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = _REQUEST_ID.get()
        return f"{line} [request {request_id}]" if request_id else line


class AccessQueryFilter(logging.Filter):
    """On ``uvicorn.access``: the query of each line's request target as ``redact`` makes it.

    uvicorn logs ``'%s - "%s %s HTTP/%s" %d'`` with the target third (its httptools and h11
    protocols alike). Never raises: a filter that raised would fail the response whose line
    it is."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__("uvicorn.access")
        self._redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path, mark, query = args[2].partition("?")
            if mark:
                try:
                    target = f"{path}?{self._redact(query)}"
                except Exception:
                    target = f"{path}?REDACTED"
                record.args = (*args[:2], target, *args[3:])
        return True


def _set_access_filter(redact: Callable[[str], str] | None) -> None:
    logger = logging.getLogger("uvicorn.access")
    for old in [f for f in logger.filters if isinstance(f, AccessQueryFilter)]:
        logger.removeFilter(old)
    if redact is not None:
        logger.addFilter(AccessQueryFilter(redact))


def setup_logging(
    level: str,
    fmt: Literal["json", "text"],
    access_query: Callable[[str], str] | None = None,
) -> None:
    """Route the app's and the libraries' records to stderr in ``fmt`` (idempotent); access
    lines with their query as ``access_query`` makes it (None: whole)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(
        _JsonFormatter()
        if fmt == "json"
        else _TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)
    root.setLevel(level.upper())
    if fmt == "json":
        # uvicorn's own lines (start-up, errors, access log) in the same format.
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logger = logging.getLogger(name)
            logger.handlers.clear()
            logger.propagate = True
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per upstream call is noise
    _set_access_filter(access_query)
