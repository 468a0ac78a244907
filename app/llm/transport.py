"""A lean HTTP/1.1 transport for the httpx client that talks to vLLM.

httpx's own transport (httpcore on anyio, h11) costs, per upstream request, a pass over the
pooled connections with a ``select()`` for each idle one and several lock checkpoints (each a
trip through the event loop); and per streamed chunk an anyio cancel scope for the read
timeout, h11's event machinery and four stacked generators. Measured on the 2-core VM against
the bench upstream, one stream at a time, the request alone (send to response headers) took
about 1.4 ms with it and 0.7 ms with this one, and under 100 streams the gateway's CPU per
streamed chunk went from about 260 to 100 µs (bench/README.md, "Profile"). This transport does
the same work with asyncio protocols: one write for the request, a dict lookup and a list pop
for a pooled connection, a timer per wait for the read timeout, and a chunked decoder that
hands on everything that has arrived in one piece. The client (``app/llm/client.py``) is still
an ``httpx.AsyncClient``: requests, responses, timeouts and exceptions are httpx's, and
``LLM_TRANSPORT=httpx`` puts httpx's own transport back.

Scope, on purpose small:
- plain ``http://`` only (``build_http_client`` mounts httpx's own transport for https);
- request bodies are read whole (the gateway sends JSON), response bodies stream;
- responses framed by ``Transfer-Encoding: chunked``, ``Content-Length`` or the end of the
  connection; 1xx responses are skipped; no HTTP/2, no proxies, no upgrades.

Behaviour the gateway relies on:
- a response closed before its end closes its connection, so vLLM sees the disconnect and
  aborts the generation; a response read to its end returns the connection to the pool;
- idle connections are kept ``keepalive_expiry`` seconds (below uvicorn's 5 s server-side
  keep-alive, so vLLM does not close one just as it is reused), at most ``max_connections``
  open in all; a request waits up to the pool timeout for a free one (``httpx.PoolTimeout``);
- a reused connection that the server closed before answering (the keep-alive race) does not
  fail the request: nothing was generated for it, so it goes again on another pooled
  connection (twice at most), then on a new one;
- failures raise the httpx exceptions httpcore would: ``ConnectError``/``ConnectTimeout``,
  ``ReadTimeout`` after the read timeout without a byte, ``RemoteProtocolError`` for a
  connection closed early or a malformed response, ``WriteError``/``WriteTimeout``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import cast

import httpx

__all__ = ["StreamingTransport"]

_MAX_HEAD = 64 * 1024  # bytes of status line and headers
_MAX_SIZE_LINE = 4096  # a chunk-size line with its extensions
_NO_BODY = frozenset({204, 304})
_STALE_RETRIES = 2  # reused connections found closed before a new one is opened
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class _Closed(Exception):
    """The connection ended (EOF or reset) while a reader waited for more."""


class _Connection(asyncio.Protocol):
    """One TCP connection: what arrived, whether it ended, and one reader waiting for more."""

    def __init__(self, origin: tuple[str, int]) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.ended = False  # EOF or connection lost: nothing more will arrive
        self.idle_since = 0.0
        self.on_lost: Callable[[_Connection], None] | None = None  # the pool's, while idle
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._paused = False

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is a transport without subclassing asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self._wake()
        _resolve(self._drained)
        if self.on_lost is not None:
            self.on_lost(self)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        _resolve(self._drained)

    def _wake(self) -> None:
        _resolve(self._waiter)

    # -- used by the transport
    @property
    def reusable_now(self) -> bool:
        """Open, and nothing unread on it (an idle connection never gets data)."""
        return not self.ended and not self.buffer and self.transport is not None

    def take(self) -> bytes:
        data = bytes(self.buffer)
        self.buffer.clear()
        return data

    async def wait(self, limit_s: float | None) -> None:
        """Until more data arrives or the connection ends; ``_Closed`` if it had ended,
        ``TimeoutError`` after ``limit_s`` seconds."""
        if self.ended:
            raise _Closed
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await _within(self._waiter, limit_s)
        finally:
            self._waiter = None

    async def write(self, data: bytes, limit_s: float | None) -> None:
        assert self.transport is not None
        if self.ended:
            raise _Closed
        self.transport.write(data)
        if not self._paused:
            return
        self._drained = asyncio.get_running_loop().create_future()
        try:
            await _within(self._drained, limit_s)
        finally:
            self._drained = None

    def close(self) -> None:
        self.ended = True
        if self.transport is not None:
            self.transport.close()


def _resolve(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


async def _within(future: asyncio.Future[None], limit_s: float | None) -> None:
    """Await ``future``; ``TimeoutError`` after ``limit_s`` seconds (a timer, not a cancel
    scope: this runs once per streamed chunk)."""
    timer = (
        None if limit_s is None else asyncio.get_running_loop().call_later(limit_s, _expire, future)
    )
    try:
        await future
    finally:
        if timer is not None:
            timer.cancel()


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


class _Pool:
    """Idle connections per origin (newest first) and the limit on open ones."""

    def __init__(self, max_connections: int, keepalive_expiry: float) -> None:
        self._max = max_connections
        self._expiry = keepalive_expiry
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._open = 0  # connected or connecting
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def open_connections(self) -> int:
        return self._open

    async def acquire(
        self, origin: tuple[str, int], pool_timeout: float | None, *, fresh: bool = False
    ) -> _Connection | None:
        """A pooled connection to ``origin``, or None with room counted for a new one
        (``fresh``: always the latter); ``TimeoutError`` when none frees in time."""
        deadline = None if pool_timeout is None else time.monotonic() + pool_timeout
        while True:
            if not fresh and (conn := self._idle_to(origin)) is not None:
                return conn
            if self._open < self._max:
                self._open += 1
                return None
            if self._close_one_idle():
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, then cancelled: hand the wake-up on
                raise

    def _idle_to(self, origin: tuple[str, int]) -> _Connection | None:
        stack = self._idle.get(origin)
        if not stack:
            return None
        now = time.monotonic()
        while stack:
            conn = stack.pop()
            conn.on_lost = None
            if conn.reusable_now and now - conn.idle_since < self._expiry:
                return conn
            self._forget(conn)
        return None

    def unreserve(self) -> None:
        """A reserved connection that never opened."""
        self._open -= 1
        self._wake_one()

    def put_back(self, conn: _Connection) -> None:
        if not conn.reusable_now:
            self._forget(conn)
            return
        conn.idle_since = time.monotonic()
        conn.on_lost = self._lost_while_idle
        self._idle.setdefault(conn.origin, []).append(conn)
        self._wake_one()

    def discard(self, conn: _Connection) -> None:
        """Close a connection that is not idle (its response was not read to the end)."""
        self._forget(conn)

    def close_all(self) -> None:
        for stack in self._idle.values():
            for conn in stack:
                conn.on_lost = None
                conn.close()
            self._open -= len(stack)
            stack.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.cancel()

    def _forget(self, conn: _Connection) -> None:
        conn.on_lost = None
        conn.close()
        self._open -= 1
        self._wake_one()

    def _lost_while_idle(self, conn: _Connection) -> None:
        stack = self._idle.get(conn.origin, [])
        if conn in stack:
            stack.remove(conn)
            self._forget(conn)

    def _close_one_idle(self) -> bool:
        """Make room by closing the longest-idle connection to any origin."""
        oldest: _Connection | None = None
        for stack in self._idle.values():
            if stack and (oldest is None or stack[0].idle_since < oldest.idle_since):
                oldest = stack[0]
        if oldest is None:
            return False
        self._idle[oldest.origin].remove(oldest)
        self._forget(oldest)
        return True

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


class _Body(httpx.AsyncByteStream):
    """A response body as it arrives; see the module docstring for what closing does."""

    def __init__(
        self,
        pool: _Pool,
        conn: _Connection,
        request: httpx.Request,
        *,
        length: int | None,
        chunked: bool,
        keep_alive: bool,
        read_timeout: float | None,
    ) -> None:
        self._pool = pool
        self._conn = conn
        self._request = request
        self._length = length  # None with chunked or read-to-close
        self._chunked = chunked
        self._keep_alive = keep_alive and (chunked or length is not None)
        self._timeout = read_timeout
        self._complete = length == 0
        self._closed = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        if self._complete:
            return _nothing()
        if self._chunked:
            return self._chunks()
        if self._length is not None:
            return self._sized(self._length)
        return self._to_close()

    async def _more(self, during: str) -> None:
        try:
            await self._conn.wait(self._timeout)
        except TimeoutError:
            raise httpx.ReadTimeout(
                f"no data for {self._timeout} s {during}", request=self._request
            ) from None
        except _Closed:
            raise httpx.RemoteProtocolError(
                f"peer closed connection without sending complete message body ({during})",
                request=self._request,
            ) from None

    async def _sized(self, left: int) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            if conn.buffer:
                data = conn.take()
                if len(data) > left:
                    raise httpx.RemoteProtocolError(
                        "more body than Content-Length", request=self._request
                    )
                left -= len(data)
                if not left:
                    self._complete = True
                yield data
                if self._complete:
                    return
            await self._more("reading a sized body")

    async def _to_close(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            if conn.buffer:
                yield conn.take()
            if conn.ended and not conn.buffer:
                self._complete = True
                return
            try:
                await conn.wait(self._timeout)
            except TimeoutError:
                raise httpx.ReadTimeout(
                    f"no data for {self._timeout} s", request=self._request
                ) from None
            except _Closed:
                pass

    async def _chunks(self) -> AsyncIterator[bytes]:
        """Decode ``Transfer-Encoding: chunked``, yielding all the data of what has arrived."""
        conn = self._conn
        rest = b""
        size = -1  # bytes left in the current chunk's data; -1: a size line comes next
        trailer = False
        while True:
            data = rest + conn.take() if rest else conn.take()
            pos, end = 0, len(data)
            out: list[bytes] = []
            while pos < end:
                if trailer:  # trailer fields until an empty line
                    eol = data.find(b"\r\n", pos)
                    if eol < 0:
                        if end - pos > _MAX_HEAD:
                            raise httpx.RemoteProtocolError(
                                "trailer line too long", request=self._request
                            )
                        break
                    line_empty = eol == pos
                    pos = eol + 2
                    if line_empty:
                        self._complete = True
                        if pos != end:
                            self._keep_alive = False  # bytes nobody asked for: do not reuse
                        break
                    continue
                if size < 0:
                    eol = data.find(b"\r\n", pos)
                    if eol < 0:
                        if end - pos > _MAX_SIZE_LINE:
                            raise httpx.RemoteProtocolError(
                                "chunk size line too long", request=self._request
                            )
                        break
                    size = _chunk_size(data[pos:eol], self._request)
                    pos = eol + 2
                    if size == 0:
                        trailer = True
                    continue
                if size > 0:
                    take = min(size, end - pos)
                    out.append(data[pos : pos + take])
                    pos += take
                    size -= take
                    continue
                # size == 0 after a chunk's data: its CRLF
                if end - pos < 2:
                    break
                if data[pos : pos + 2] != b"\r\n":
                    raise httpx.RemoteProtocolError(
                        "chunk data not followed by CRLF", request=self._request
                    )
                pos += 2
                size = -1
            rest = data[pos:] if pos < end else b""
            if out:
                yield out[0] if len(out) == 1 else b"".join(out)
            if self._complete:
                return
            if conn.buffer:
                continue
            await self._more("reading a chunked body")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._complete and self._keep_alive:
            self._pool.put_back(self._conn)
        else:
            self._pool.discard(self._conn)


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield  # an async generator that yields nothing


def _chunk_size(line: bytes, request: httpx.Request) -> int:
    digits = line.split(b";", 1)[0].rstrip(b" \t")  # chunk extensions are ignored
    if not _HEX.fullmatch(digits):
        raise httpx.RemoteProtocolError(f"bad chunk size line {line[:40]!r}", request=request)
    return int(digits, 16)


class StreamingTransport(httpx.AsyncBaseTransport):
    """See the module docstring."""

    def __init__(self, *, max_connections: int, keepalive_expiry: float = 4.0) -> None:
        self._pool = _Pool(max_connections, keepalive_expiry)

    @property
    def open_connections(self) -> int:
        """Connections open or opening now, idle ones included."""
        return self._pool.open_connections

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"StreamingTransport speaks http://, not {url.scheme}://", request=request
            )
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        origin = (url.host, url.port or 80)
        head = await _request_bytes(request)
        fresh = False
        for attempt in range(_STALE_RETRIES + 1):
            conn = await self._checkout(origin, request, timeouts, fresh=fresh)
            reused = conn.idle_since > 0  # it has been in the pool
            try:
                return await self._exchange(conn, request, head, timeouts, reused=reused)
            except _StaleConnection:
                # The server closed it as we reused it (keep-alive race): nothing was
                # generated for this request, so it goes again; the last try on a new one.
                fresh = attempt == _STALE_RETRIES - 1
        raise httpx.RemoteProtocolError(
            "Server disconnected without sending a response.", request=request
        )

    async def aclose(self) -> None:
        self._pool.close_all()

    async def _checkout(
        self,
        origin: tuple[str, int],
        request: httpx.Request,
        timeouts: dict[str, float | None],
        *,
        fresh: bool,
    ) -> _Connection:
        """A pooled connection, or a new one (``fresh``: always new)."""
        try:
            pooled = await self._pool.acquire(origin, timeouts.get("pool"), fresh=fresh)
        except TimeoutError:
            raise httpx.PoolTimeout(
                "no upstream connection free in time", request=request
            ) from None
        if pooled is not None:
            return pooled
        loop = asyncio.get_running_loop()
        conn = _Connection(origin)
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                await loop.create_connection(lambda: conn, origin[0], origin[1])
        except TimeoutError:
            self._pool.unreserve()
            raise httpx.ConnectTimeout(
                f"connecting to {origin[0]}:{origin[1]}", request=request
            ) from None
        except OSError as exc:
            self._pool.unreserve()
            raise httpx.ConnectError(f"{exc.strerror or exc}", request=request) from exc
        except BaseException:
            self._pool.unreserve()
            conn.close()
            raise
        return conn

    async def _exchange(
        self,
        conn: _Connection,
        request: httpx.Request,
        head: bytes,
        timeouts: dict[str, float | None],
        *,
        reused: bool,
    ) -> httpx.Response:
        """Send the request on ``conn`` and read the response head; the body streams later."""
        try:
            try:
                await conn.write(head, timeouts.get("write"))
            except _Closed:
                raise _StaleConnection from None
            except TimeoutError:
                raise httpx.WriteTimeout("request not sent in time", request=request) from None
            status, reason, headers, version = await self._read_head(
                conn, request, timeouts.get("read"), reused
            )
        except BaseException:
            self._pool.discard(conn)
            raise
        return self._response(conn, request, status, reason, headers, version, timeouts.get("read"))

    async def _read_head(
        self, conn: _Connection, request: httpx.Request, limit_s: float | None, reused: bool
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
        got_any = False
        while True:
            end = conn.buffer.find(b"\r\n\r\n")
            if end >= 0:
                got_any = True
                raw = bytes(conn.buffer[:end])
                del conn.buffer[: end + 4]
                status, reason, headers, version = _parse_head(raw, request)
                if 100 <= status < 200 and status != 101:
                    continue  # 100 Continue and friends: the real answer follows
                return status, reason, headers, version
            if conn.buffer:
                got_any = True
                if len(conn.buffer) > _MAX_HEAD:
                    raise httpx.RemoteProtocolError("response head too large", request=request)
            try:
                await conn.wait(limit_s)
            except TimeoutError:
                raise httpx.ReadTimeout(f"no response for {limit_s} s", request=request) from None
            except _Closed:
                if reused and not got_any:
                    raise _StaleConnection from None
                raise httpx.RemoteProtocolError(
                    "Server disconnected without sending a response."
                    if not got_any
                    else "incomplete response head",
                    request=request,
                ) from None

    def _response(
        self,
        conn: _Connection,
        request: httpx.Request,
        status: int,
        reason: bytes,
        headers: list[tuple[bytes, bytes]],
        version: bytes,
        read_timeout: float | None,
    ) -> httpx.Response:
        length: int | None = None
        chunked = False
        keep_alive = version == b"HTTP/1.1"
        framed = False
        for name, value in headers:
            lower = name.lower()
            if lower == b"transfer-encoding":
                chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
                framed = True
            elif lower == b"content-length" and not framed:
                if not value.isdigit() or len(value) > 18:  # ASCII digits only: no sign, no _
                    self._pool.discard(conn)
                    raise httpx.RemoteProtocolError(
                        f"bad Content-Length {value[:40]!r}", request=request
                    )
                length = int(value)
            elif lower == b"connection":
                tokens = {token.strip() for token in value.lower().split(b",")}
                if b"close" in tokens:
                    keep_alive = False
                elif b"keep-alive" in tokens:
                    keep_alive = True
        if framed:
            length = None
        if request.method == "HEAD" or status in _NO_BODY:
            length, chunked = 0, False
        body = _Body(
            self._pool,
            conn,
            request,
            length=length,
            chunked=chunked,
            keep_alive=keep_alive,
            read_timeout=read_timeout,
        )
        return httpx.Response(
            status,
            headers=headers,
            stream=body,
            extensions={"http_version": version, "reason_phrase": reason},
        )


class _StaleConnection(Exception):
    """A reused connection ended before any byte of the response."""


async def _request_bytes(request: httpx.Request) -> bytes:
    """The whole request: request line, headers and body in one write."""
    body = await request.aread()
    target = request.url.raw_path
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), target)]
    chunked = False
    for name, value in request.headers.raw:
        if name.lower() == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        lines.append(name + b": " + value)
    if chunked and body:
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    elif chunked:
        body = b"0\r\n\r\n"
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _parse_head(
    raw: bytes, request: httpx.Request
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
    lines = raw.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError(f"bad status line {lines[0][:80]!r}", request=request)
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"bad header line {line[:80]!r}", request=request)
        headers.append((name, value.strip(b" \t")))
    reason = parts[2] if len(parts) == 3 else b""
    return int(parts[1]), reason, headers, parts[0]
