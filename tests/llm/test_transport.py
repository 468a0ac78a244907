"""`UpstreamTransport` (httpx-aiohttp with our corrections) under a real `httpx.AsyncClient`,
against raw HTTP servers on loopback that each test scripts byte for byte; and `iter_sse_data`
fed SSE split at every byte."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from app.llm.sse_decode import iter_sse_data
from app.llm.transport import UpstreamTransport

pytestmark = pytest.mark.anyio

Handler = Callable[["Peer"], Awaitable[None]]

CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
BODY = b"hello\r\n0\r\n, world"  # the middle chunk's data looks like chunked framing
CHUNKED = CHUNKED_HEAD + (
    b'5;ext=1\r\nhello\r\n5\r\n\r\n0\r\n\r\n7;a="b;c"\r\n, world\r\n'
    b"0\r\nX-Trailer: yes\r\nX-Other: 2\r\n\r\n"
)
SIZED = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
TO_CLOSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + BODY


def ok(body: bytes = b"ok") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class Peer:
    """The server's end of one accepted connection (``number`` counts from 1)."""

    def __init__(
        self, server: RawServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.number = server.accepted
        self.reader = reader
        self.writer = writer

    async def request(self) -> bytes | None:
        """The next whole request (head, then a Content-Length body), recorded; None at EOF.
        Bytes left over at EOF are recorded too, as a request of their own."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                self.server.requests.append(exc.partial)
            self.server.client_closes += 1
            return None
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        raw = head + await self.reader.readexactly(length)
        self.server.requests.append(raw)
        return raw

    async def send(self, *pieces: bytes, pause: float = 0.001) -> None:
        """Write ``pieces`` one by one, with a pause between, so each arrives on its own."""
        for index, piece in enumerate(pieces):
            if index:
                await asyncio.sleep(pause)
            self.writer.write(piece)
            await self.writer.drain()

    async def until_closed(self) -> None:
        """Drop whatever arrives until the client closes its end."""
        with contextlib.suppress(ConnectionError):
            await self.reader.read()
        self.server.client_closes += 1


class RawServer:
    """A TCP server on 127.0.0.1 that runs ``handler`` for each accepted connection, then
    closes it; counts connections and client closes, and records the requests read."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.accepted = 0
        self.client_closes = 0
        self.requests: list[bytes] = []
        self.url = ""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[object]] = set()

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def closed_by_client(self, count: int, within: float = 1.0) -> None:
        """Until the client has closed ``count`` connections (TimeoutError after ``within``)."""
        async with asyncio.timeout(within):
            while self.client_closes < count:
                await asyncio.sleep(0.005)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.accepted += 1
        try:
            await self.handler(Peer(self, reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # cancelled by __aexit__: no "exception in callback" noise from asyncio
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def answering(*responses: bytes) -> Handler:
    """Answer the n-th request on a connection with the n-th response (the last repeats)."""

    async def handler(peer: Peer) -> None:
        for n in itertools.count():
            if await peer.request() is None:
                return
            await peer.send(responses[min(n, len(responses) - 1)])

    return handler


async def stream_or_answer(peer: Peer) -> None:
    """``/stream``: a chunked head and one chunk, then wait for the client to leave; else ok."""
    while (request := await peer.request()) is not None:
        if request.startswith(b"GET /stream "):
            await peer.send(CHUNKED_HEAD + b"5\r\nfirst\r\n")
            await peer.until_closed()
            return
        await peer.send(ok())


def make_client(transport: UpstreamTransport | None = None) -> httpx.AsyncClient:
    transport = transport or UpstreamTransport(max_connections=4)
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(2.0))


async def first_piece(reply: httpx.Response) -> bytes:
    async for piece in reply.aiter_raw():
        return piece
    raise AssertionError("empty body")


@pytest.mark.parametrize(
    ("response", "keeps_alive"),
    [(CHUNKED, True), (SIZED, True), (TO_CLOSE, False)],
    ids=["chunked", "content-length", "read-to-close"],
)
async def test_body_decoded_exactly_whatever_the_split(response: bytes, keeps_alive: bool) -> None:
    """Every split point of the response (two writes, a pause between) gives the same body."""

    async def split_at_path(peer: Peer) -> None:
        while (request := await peer.request()) is not None:
            at = int(request.split(b" ")[1].lstrip(b"/"))
            await peer.send(response[:at], response[at:])
            if not keeps_alive:
                return

    async with RawServer(split_at_path) as server, make_client() as http:
        for at in range(1, len(response)):
            reply = await http.get(f"{server.url}/{at}")
            assert (reply.status_code, reply.content) == (200, BODY), f"split at {at}"
    assert server.accepted == (1 if keeps_alive else len(response) - 1)


async def test_chunked_body_one_byte_at_a_time_streams() -> None:
    """Byte by byte, the chunked body arrives in several pieces that join to the exact body."""

    async def byte_by_byte(peer: Peer) -> None:
        await peer.request()
        await peer.send(*(CHUNKED[i : i + 1] for i in range(len(CHUNKED))))
        await peer.request()  # the connection stays usable after the trailer

    async with RawServer(byte_by_byte) as server, make_client() as http:
        async with http.stream("GET", server.url) as reply:
            pieces = [piece async for piece in reply.aiter_raw()]
    assert b"".join(pieces) == BODY
    assert len(pieces) > 3


async def test_keep_alive_reuses_one_connection() -> None:
    """Two requests in a row, the first read to its end: both on one connection."""
    async with RawServer(answering(ok(b"one"), ok(b"two"))) as server, make_client() as http:
        first = await http.get(server.url + "/a")
        second = await http.get(server.url + "/b")
    assert (first.content, second.content) == (b"one", b"two")
    assert server.accepted == 1
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "response",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ],
    ids=["connection-close", "http-1.0"],
)
async def test_response_without_keep_alive_is_not_reused(response: bytes) -> None:
    """The client closes such a connection itself and opens a new one for the next request."""
    async with RawServer(answering(response)) as server, make_client() as http:
        assert (await http.get(server.url)).content == b"ok"
        await server.closed_by_client(1)
        assert (await http.get(server.url)).content == b"ok"
        assert server.accepted == 2


async def test_idle_connection_past_keepalive_expiry_is_not_reused() -> None:
    transport = UpstreamTransport(max_connections=4, keepalive_expiry=0.1)
    async with RawServer(answering(ok())) as server, make_client(transport) as http:
        await http.get(server.url)
        await asyncio.sleep(0.2)
        await http.get(server.url)
        await server.closed_by_client(1)
        assert server.accepted == 2


async def test_leaving_a_stream_early_closes_its_connection() -> None:
    """The server sees EOF promptly (vLLM aborts the generation); the next request reconnects."""
    async with RawServer(stream_or_answer) as server, make_client() as http:
        async with http.stream("GET", server.url + "/stream") as reply:
            assert await first_piece(reply) == b"first"
        await server.closed_by_client(1, within=1.0)
        assert (await http.get(server.url)).content == b"ok"
        assert server.accepted == 2


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_stale_connection_dropped_after_reading_the_request_is_retried(method: str) -> None:
    """The keep-alive race: the server reads the next request and closes without an answer.
    aiohttp resends a GET itself but never a POST (every chat request); the transport does."""

    async def drop_the_second(peer: Peer) -> None:
        for n in itertools.count():
            if await peer.request() is None or (peer.number == 1 and n == 1):
                return
            await peer.send(ok(b"%d-%d" % (peer.number, n)))

    async with RawServer(drop_the_second) as server, make_client() as http:
        assert (await http.request(method, server.url, content=b"{}")).content == b"1-0"
        assert (await http.request(method, server.url, content=b"{}")).content == b"2-0"
    assert server.accepted == 2
    assert len(server.requests) == 3  # the dropped one, then the retry


@pytest.mark.parametrize("pause", [0.0, 0.05])
async def test_connection_closed_after_its_response_is_not_an_error(pause: float) -> None:
    """The server closes a kept-alive connection right after answering: the next one works."""

    async def answer_once(peer: Peer) -> None:
        await peer.request()
        await peer.send(ok(b"%d" % peer.number))

    async with RawServer(answer_once) as server, make_client() as http:
        assert (await http.get(server.url)).content == b"1"
        await asyncio.sleep(pause)
        assert (await http.get(server.url)).content == b"2"


async def test_pool_limit_raises_pool_timeout_until_a_connection_frees() -> None:
    limit = httpx.Timeout(5.0, pool=0.2)
    transport = UpstreamTransport(max_connections=1)
    async with RawServer(stream_or_answer) as server, make_client(transport) as http:
        async with http.stream("GET", server.url + "/stream") as reply:
            await first_piece(reply)
            started = time.monotonic()
            with pytest.raises(httpx.PoolTimeout):
                await http.get(server.url, timeout=limit)
            assert 0.15 < time.monotonic() - started < 1.0
        assert (await http.get(server.url, timeout=limit)).content == b"ok"
        assert transport.in_use == 0


async def test_waiting_request_gets_the_connection_freed() -> None:
    transport = UpstreamTransport(max_connections=1)
    async with RawServer(stream_or_answer) as server, make_client(transport) as http:
        async with http.stream("GET", server.url + "/stream") as reply:
            await first_piece(reply)
            waiting = asyncio.create_task(http.get(server.url))
            await asyncio.sleep(0.05)
            assert not waiting.done()
        assert (await asyncio.wait_for(waiting, 1.0)).content == b"ok"


async def test_waiting_request_reuses_the_connection_freed() -> None:
    """A request that waited for the only connection takes it over when it goes back to the
    pool: no new connection to the upstream."""
    split = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab"

    async def slow_then_ok(peer: Peer) -> None:
        await peer.request()
        await peer.send(split, b"cd", pause=0.1)
        while await peer.request() is not None:
            await peer.send(ok())

    transport = UpstreamTransport(max_connections=1)
    async with RawServer(slow_then_ok) as server, make_client(transport) as http:
        first = asyncio.create_task(http.get(server.url))
        await asyncio.sleep(0.02)
        second = await http.get(server.url)
        assert (await first).content == b"abcd"
        assert second.content == b"ok"
        assert server.accepted == 1


@pytest.mark.parametrize("reply", [CHUNKED_HEAD + b"5\r\nfirst\r\n", b""], ids=["head", "nothing"])
async def test_silent_server_raises_read_timeout(reply: bytes) -> None:
    """Headers and a chunk then silence, or no answer at all: ReadTimeout, connection closed."""

    async def then_silence(peer: Peer) -> None:
        await peer.request()
        await peer.send(reply)
        await peer.until_closed()

    async with RawServer(then_silence) as server, make_client() as http:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            async with asyncio.timeout(3.0):  # fail, not hang, if the read timeout is lost
                await http.get(server.url, timeout=httpx.Timeout(2.0, read=0.2))
        assert 0.15 < time.monotonic() - started < 1.5
        await server.closed_by_client(1)


async def test_connection_refused_raises_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    transport = UpstreamTransport(max_connections=1)
    async with make_client(transport) as http:
        for _ in range(2):  # the failed attempt gave its slot back: no PoolTimeout
            with pytest.raises(httpx.ConnectError):
                await http.get(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(2.0, pool=0.2))
        assert transport.in_use == 0


@pytest.mark.parametrize(
    "response",
    [
        b"HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n",
        CHUNKED_HEAD + b"zz\r\nhello\r\n0\r\n\r\n",
        CHUNKED_HEAD + b"5\r\nhello!!0\r\n\r\n",
        CHUNKED_HEAD + b"5\r\nhello\r\n7\r\n, wo",
        b"",
        CHUNKED_HEAD + b"-1\r\n5\r\nhello\r\n0\r\n\r\n",
        CHUNKED_HEAD + b"0x5\r\nhello\r\n0\r\n\r\n",
        CHUNKED_HEAD + b"+5\r\nhello\r\n0\r\n\r\n",
        CHUNKED_HEAD + b"1_0\r\nhello, world!!!!\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\nhello, wor",
        b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
    ],
    ids=[
        "bad-status-line",
        "bad-chunk-size",
        "chunk-longer-than-its-size",
        "closed-mid-chunked-body",
        "closed-before-anything",
        "negative-chunk-size",
        "0x-chunk-size",
        "signed-chunk-size",
        "underscore-chunk-size",
        "underscore-content-length",
        "signed-content-length",
    ],
)
async def test_malformed_or_cut_response_raises_remote_protocol_error(response: bytes) -> None:
    """On a new connection (no retry); the connection is closed and its slot given back."""

    async def answer_and_close(peer: Peer) -> None:
        await peer.request()
        await peer.send(response)

    transport = UpstreamTransport(max_connections=1)
    async with RawServer(answer_and_close) as server, make_client(transport) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(server.url)
        assert transport.in_use == 0
        # A server that closes without a word may have closed a stale keep-alive connection:
        # the request is sent again (by us, and for an idempotent GET by aiohttp too);
        # anything the server did say is not resent.
        assert server.accepted >= 2 if response == b"" else server.accepted == 1


@pytest.mark.parametrize(
    "tail",
    [b"%x\r\n" % 0 + b"X-Long: " + b"x" * 70_000, b"1" * 5_000],
    ids=["endless-trailer", "endless-size-line"],
)
async def test_endless_framing_line_is_refused_without_waiting(tail: bytes) -> None:
    """A trailer or chunk-size line that never ends is an error at once, not a buffer that
    grows until the read timeout."""

    async def endless(peer: Peer) -> None:
        await peer.request()
        await peer.send(CHUNKED_HEAD + tail)
        await peer.until_closed()

    async with RawServer(endless) as server, make_client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            async with asyncio.timeout(3.0):
                await http.get(server.url, timeout=httpx.Timeout(10.0))


async def test_post_json_arrives_as_one_exact_request() -> None:
    payload = {"model": "m", "messages": [{"role": "user", "content": "안녕 🌱"}], "stream": True}
    target = "/v1/chat/completions?x=1&y=a%20b"
    async with RawServer(answering(ok())) as server:
        async with make_client() as http:
            await http.post(server.url + target, json=payload)
        await server.closed_by_client(1)  # nothing after the request: no second one recorded
    [raw] = server.requests
    head, body = raw.split(b"\r\n\r\n", 1)
    request_line, *lines = head.split(b"\r\n")
    assert request_line == b"POST %s HTTP/1.1" % target.encode()
    headers = {name.lower(): value.strip() for name, _, value in (x.partition(b":") for x in lines)}
    assert headers[b"host"] == server.url.removeprefix("http://").encode()
    assert int(headers[b"content-length"]) == len(body)
    assert b"transfer-encoding" not in headers
    assert json.loads(body) == payload


SSE = (
    b": ping\r\n\r\n"
    b'event: message\r\nid: 7\r\ndata: {"a": 1}\r\n\r\n'
    b"data: line one\r\ndata:line two\n\n"
    b"retry: 1000\rdata\rdata:  two spaces\r\r"
    + "data: 안녕하세요 🌱\r\n\r\n".encode()
    + b"data: [DONE]\n\n"
)
SSE_DATA = [
    b'{"a": 1}',
    b"line one\nline two",
    b"\n two spaces",
    "안녕하세요 🌱".encode(),
    b"[DONE]",
]


async def sse_data(pieces: list[bytes]) -> list[bytes]:
    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return [data async for data in iter_sse_data(chunks())]


async def test_sse_data_whatever_the_split() -> None:
    """Every split point (inside CRLF, after a lone CR, inside a UTF-8 character) and byte by
    byte: the same data payloads."""
    for at in range(len(SSE) + 1):
        assert await sse_data([SSE[:at], SSE[at:]]) == SSE_DATA, f"split at {at}"
    assert await sse_data([SSE[i : i + 1] for i in range(len(SSE))]) == SSE_DATA


async def test_sse_event_without_its_blank_line_is_dropped() -> None:
    """A stream cut inside its last event yields the complete events only (SSE rules)."""
    assert await sse_data([b"data: 1\n\n", b'data: {"cho']) == [b"1"]
    assert await sse_data([b"data: 1\n\ndata: 2\n"]) == [b"1"]
