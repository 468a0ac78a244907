"""uvicorn's httptools protocol with the two bounds on a request's head that uvicorn lacks.

    uvicorn --http app.web.http_guard:GuardedHttpToolsProtocol app.main:app   (scripts/run.sh)

- **Time**: the request line and headers must arrive within REQUEST_HEADER_TIMEOUT_SECONDS of
  the connection opening (or of the next request's first byte on a kept-alive connection);
  else ``408`` and the connection is closed. uvicorn arms no timer before a connection's first
  request, and on a kept-alive one its keep-alive timer stops at the first byte and is armed
  again only after a response: a client that trickles a header line now and then holds its
  connection for ever (slowloris).
- **Size**: the request line and headers together may take REQUEST_HEADER_MAX_BYTES; past it
  ``431`` and the connection is closed, however the bytes arrive. Two counts, because
  httptools reports a head only once it is whole: while it is incomplete, the bytes received
  (so a head that never ends is refused within one read of the bound); once it is whole, its
  request line and header lines as parsed (so a head that came in one read, alone or behind
  another request, is measured too). httptools keeps an unfinished header or URL in its own
  buffer, and uvicorn keeps appending the finished ones, with no cap (h11 has one:
  ``--h11-max-incomplete-event-size``).

A refusal waits for the response in progress on the connection, if any (a pipelined request
is answered in order), then half-closes: the client can read it even while it is still
sending, and what it sends meanwhile is read and dropped for at most LINGER_SECONDS (as
nginx's ``lingering_close``: closing with unread bytes would reset the connection and lose
the answer).

The body is the app's: ``app.web.guards.BodyGuard`` bounds its size and time on any server.
Only the head is here, because the app is first called once the head is complete.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from app.config import get_settings

__all__ = ["GuardedHttpToolsProtocol"]

log = logging.getLogger(__name__)

HEAD_TOO_SLOW = "요청 헤더가 제시간에 다 오지 않았어요."
HEAD_TOO_LARGE = "요청 헤더가 너무 커요."
LINGER_SECONDS = 2.0  # after a refusal, how long what the client still sends is read and dropped


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        settings = get_settings()  # read once per process (cached)
        self._head_timeout = settings.request_header_timeout_seconds
        self._head_max = settings.request_header_max_bytes
        self._head_bytes = 0  # received while a request's head is incomplete
        self._head_parsed = 0  # the head's request line and header lines, as parsed
        self._head_pending = True
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._refusal: bytes | None = None  # waiting for the response in progress

    # ------------------------------------------------------------------ the deadline
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        if self._refused:
            return
        super().on_message_begin()
        self._head_pending = True
        self._head_parsed = _REQUEST_LINE
        if self._head_timer is None:  # the first request's deadline runs from the connection
            self._arm()

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        # Whole now, however it came (one read, a few, or behind another request).
        if self._head_parsed + len(self.parser.get_method()) > self._head_max:
            self._too_large()
            return
        self._head_pending = False
        self._head_bytes = 0
        self._disarm()
        super().on_headers_complete()

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(self._head_timeout, self._head_expired)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._refused:
            return
        log.debug("request head incomplete after %.0f s: connection dropped", self._head_timeout)
        self._refuse(408, HEAD_TOO_SLOW)

    # ------------------------------------------------------------------ the size
    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: read and dropped
        if self._head_pending:
            self._head_bytes += len(data)
        super().data_received(data)  # may complete the head (and begin the body)
        if self._head_pending and self._head_bytes > self._head_max and not self._refused:
            self._too_large()

    def on_url(self, url: bytes) -> None:
        if not self._refused:
            self._head_parsed += len(url)
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._refused:
            self._head_parsed += len(name) + len(value) + _HEADER_LINE
            super().on_header(name, value)

    def _too_large(self) -> None:
        log.debug("request head over %d bytes: connection dropped", self._head_max)
        self._refuse(431, HEAD_TOO_LARGE)

    # ------------------------------------------------------------------ after a refusal
    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            self._head_pending = True  # what comes next is the next request's head
            self._head_bytes = 0
            super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._refusal is not None and not self.transport.is_closing():
            self._answer(self._refusal)

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with the envelope (after the response in progress, if any),
        close, and read nothing more."""
        self._refused = True
        self._disarm()
        self.pipeline.clear()  # requests behind this one are not served either
        body = json.dumps(
            {"status": status, "message": message, "data": None}, ensure_ascii=False
        ).encode()
        head = [
            STATUS_LINE[status],
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        answer = b"".join([*head, body])
        if self.cycle is not None and not self.cycle.response_complete:
            self._refusal = answer  # on_response_complete sends it
            return
        self._answer(answer)

    def _answer(self, answer: bytes) -> None:
        """Write ``answer``, half-close, and close once the client has, or after the linger."""
        self._refusal = None
        self._unset_keepalive_if_required()
        self.flow.resume_reading()
        self.transport.write(answer)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self._close)
        else:
            self.transport.close()

    def _close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()


# What httptools does not report of a head's bytes: " " and " HTTP/1.1\r\n" around the URL
# and the blank line that ends the head (the method is added as parsed); ": " and "\r\n"
# around each header's name and value.
_REQUEST_LINE = 14
_HEADER_LINE = 4
