"""A scripted OpenAI-compatible upstream for deterministic gateway tests.

Written on raw asyncio streams (no framework) so that faults are byte-exact and so
that the moment a client leaves a stream can be timestamped precisely: while a
stream is being written, a watcher task reads the socket concurrently and records
``time.time()`` as soon as EOF or a reset is seen, even when the stream is idle
between tokens.

It speaks HTTP/1.1 with keep-alive, Content-Length (or chunked) request bodies and
``Transfer-Encoding: chunked`` SSE answers shaped like vLLM's (served by uvicorn).

Endpoints::

    GET  /v1/models               {"object": "list", "data": [{"id": MODEL_ID, ...}]}
    POST /v1/chat/completions     behaviour chosen by the current scenario
    GET  /health                  200
    POST /_control/scenario       {"name": ..., "once": false, **params}
    GET  /_control/scenario       the current scenario and the queued ones
    GET  /_control/stats          counters (see ScriptedUpstream.stats)
    GET  /_control/requests       the recorded requests
    POST /_control/reset          clear recorded requests, stats and the queue

In-process use::

    async with ScriptedUpstream() as up:          # or: await up.start(); await up.stop()
        up.set_scenario("slow", token_delay=0.01)
        ... point the gateway at up.base_url ...

From synchronous code, or when the test's loop is busy, run it in a thread::

    with ScriptedUpstreamThread() as up:
        up.set_scenario("cut", after_chars=10)
        ...

Manual use / benchmarks::

    python -m tests.upstream.scripted_openai --port 8899 --scenario ok --token-delay 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import socket
import struct
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs, urlsplit

MODEL_ID = "scripted-model"

DEFAULT_ANSWER: dict[str, Any] = {
    "recommend": "오늘은 일회용품을 줄이는 작은 실천부터 시작해 보세요.",
    "challenges": [
        {
            "title": "텀블러 사용하기",
            "description": "카페에서 일회용 컵 대신 개인 텀블러를 사용해 보세요.",
        },
        {
            "title": "장바구니 챙기기",
            "description": "장을 볼 때 비닐봉지 대신 장바구니를 가져가세요.",
        },
        {
            "title": "다회용기로 포장하기",
            "description": "음식을 포장할 때 집에 있는 다회용기를 가져가 보세요.",
        },
    ],
}

#: The default streamed content: DEFAULT_ANSWER as pretty JSON in a ```json fence.
DEFAULT_CONTENT = "```json\n" + json.dumps(DEFAULT_ANSWER, ensure_ascii=False, indent=2) + "\n```"

#: Default content of the ``raw`` scenario: prose, not JSON.
DEFAULT_PROSE = "죄송해요, 저는 친환경 챌린지를 추천해 드리는 도우미예요. 어떤 실천이 궁금하신가요?"

#: Default lines of the ``malformed`` scenario (each is sent followed by a blank line).
DEFAULT_MALFORMED_LINES: list[str] = [
    "data: {not json",
    'data: {"choices": 5}',
    "garbage without data prefix",
    ": comment",
]


def expected_display_text(answer: dict[str, Any] | None = None) -> str:
    """The display text of an answer per the SPEC: recommend, then per challenge
    ``"\\n\\n" + title + "\\n" + description``."""
    answer = DEFAULT_ANSWER if answer is None else answer
    text = str(answer.get("recommend", ""))
    for item in answer.get("challenges", []):
        text += "\n\n" + str(item.get("title", "")) + "\n" + str(item.get("description", ""))
    return text


# --------------------------------------------------------------------------- scenarios

#: Parameters shared by every scenario that produces a normal-looking stream.
STREAM_PARAMS: dict[str, Any] = {
    "content": DEFAULT_CONTENT,  # the assistant text
    "pieces": None,  # explicit list of content deltas (overrides content/chunk_chars)
    "chunk_chars": 3,  # characters per token when slicing `content`
    "tokens_per_chunk": 1,  # tokens joined into one SSE chunk
    "token_delay": 0.0,  # seconds slept before each content chunk
    "first_delay": 0.0,  # seconds between the response headers and the role chunk
    "headers_delay": 0.0,  # seconds before the response headers are sent
    "include_usage": True,  # send the usage chunk when the request asked for it
    "finish_reason": "stop",
    "ensure_ascii": False,  # JSON-escape non-ASCII in the SSE data (\\uXXXX)
    "eol": "\n",  # line ending of the SSE framing ("\n" like vLLM, or "\r\n")
    "wire_chunk_bytes": None,  # re-slice each SSE event into HTTP chunks of N bytes
    "wire_delay": 0.0,  # seconds between those slices (forces separate reads)
    # Answer by the request's JSON schema instead of ``content``: the candidates at these
    # positions (``picks``, 0-based), as their numbers where the schema asks for ``picks``, else
    # as the titles of its ``enum``, with a ``recommend`` and ``description`` when the schema
    # asks for them (a grounded answer, as vLLM's grammar makes the model write it).
    "picks": None,
    "picks_recommend": "오늘부터 하나씩 시작해 보세요.",
    "picks_description": "모델이 쓴 설명이에요.",
}

SCENARIOS: dict[str, dict[str, Any]] = {
    "ok": dict(STREAM_PARAMS),
    "raw": {**STREAM_PARAMS, "content": DEFAULT_PROSE},
    "http_error": {
        "status": 500,
        "message": "Scripted upstream failure",
        "type": None,  # default derived from status
        "body": None,  # dict/list (JSON) or str (raw) replaces the OpenAI error body
        "headers": {},  # extra response headers, e.g. {"retry-after": "1"}
        "delay": 0.0,  # seconds before answering
    },
    "inband_error": {
        **STREAM_PARAMS,
        "after_chunks": 2,
        "message": "Scripted in-band error",
        "error_type": "InternalServerError",
        "code": 500,
    },
    "stall": {
        **STREAM_PARAMS,
        "after_chunks": 1,  # content chunks sent before stalling
        "hold": 60.0,
        "before_headers": False,  # stall before even sending the response headers
        "after_hold": "close",  # "close": FIN without terminator; "finish": finish the stream
    },
    "cut": {
        **STREAM_PARAMS,
        "after_chars": 20,  # content characters sent before the cut
        "mode": "close",  # "close": FIN; "reset": RST (SO_LINGER 0)
        "partial_event": "",  # raw text sent (as one HTTP chunk) just before the cut
    },
    "malformed": {
        "lines": DEFAULT_MALFORMED_LINES,
        "role_chunk": False,  # send a valid role chunk before the lines
        "then_content": None,  # str: after the lines, stream it validly (+ finish, usage)
        "done": True,  # send data: [DONE] at the end
        "line_delay": 0.0,
        "eol": "\n",
        "include_usage": True,
        "ensure_ascii": False,
    },
    "slow": {**STREAM_PARAMS, "token_delay": 0.05},
    # GET /v1/models fails; chat requests behave like "ok" (the stream params apply)
    "models_error": {**STREAM_PARAMS, "status": 500, "message": "Scripted model listing failure"},
}

_STREAMING = {"ok", "raw", "inband_error", "stall", "cut", "slow", "models_error"}
_CHOICES = {"after_hold": {"close", "finish"}, "mode": {"close", "reset"}}


def resolve_scenario(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Merge params over the scenario defaults; ValueError on unknown names/params."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known: {sorted(SCENARIOS)}")
    defaults = SCENARIOS[name]
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"unknown params for scenario {name!r}: {unknown}")
    merged = copy.deepcopy(defaults)
    merged.update(copy.deepcopy(params))
    for key, allowed in _CHOICES.items():
        if key in merged and merged[key] not in allowed:
            raise ValueError(f"{key} must be one of {sorted(allowed)}")
    if "chunk_chars" in merged and int(merged["chunk_chars"]) < 1:
        raise ValueError("chunk_chars must be >= 1")
    if "tokens_per_chunk" in merged and int(merged["tokens_per_chunk"]) < 1:
        raise ValueError("tokens_per_chunk must be >= 1")
    return merged


# --------------------------------------------------------------------------- helpers

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_ERROR_TYPES = {
    400: "BadRequestError",
    401: "UnauthorizedError",
    404: "NotFoundError",
    422: "BadRequestError",
    429: "TooManyRequestsError",
    503: "ServiceUnavailableError",
}


def openai_error(message: str, status: int, type_: str | None = None) -> dict[str, Any]:
    return {
        "object": "error",
        "message": message,
        "type": type_ or _ERROR_TYPES.get(status, "InternalServerError"),
        "param": None,
        "code": status,
    }


def _dumps(obj: Any, ensure_ascii: bool = False) -> str:
    return json.dumps(obj, ensure_ascii=ensure_ascii, separators=(",", ":"))


class _ChunkFactory:
    """Builds vLLM-shaped chat.completion.chunk objects for one stream."""

    def __init__(self, completion_id: str, model: str) -> None:
        self.id = completion_id
        self.model = model
        self.created = int(time.time())

    def _base(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def role(self) -> dict[str, Any]:
        return self._base(
            [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ]
        )

    def content(self, text: str) -> dict[str, Any]:
        return self._base(
            [{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}]
        )

    def finish(self, reason: str | None) -> dict[str, Any]:
        return self._base(
            [
                {
                    "index": 0,
                    "delta": {},
                    "logprobs": None,
                    "finish_reason": reason,
                    "stop_reason": None,
                }
            ]
        )

    def usage(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        chunk = self._base([])
        chunk["usage"] = {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        }
        return chunk


def content_chunk_line(text: str, model: str = MODEL_ID, completion_id: str = "chatcmpl-x") -> str:
    """A valid ``data: {...}`` content line, for composing ``malformed`` scenarios."""
    return "data: " + _dumps(_ChunkFactory(completion_id, model).content(text))


def role_chunk_line(model: str = MODEL_ID, completion_id: str = "chatcmpl-x") -> str:
    return "data: " + _dumps(_ChunkFactory(completion_id, model).role())


def finish_chunk_line(
    reason: str = "stop", model: str = MODEL_ID, completion_id: str = "chatcmpl-x"
) -> str:
    return "data: " + _dumps(_ChunkFactory(completion_id, model).finish(reason))


def _prompt_tokens(body: Any) -> int:
    chars = 0
    if isinstance(body, dict):
        for msg in body.get("messages") or []:
            if isinstance(msg, dict) and isinstance(msg.get("content"), str):
                chars += len(msg["content"])
    return max(1, chars // 2)


def _wants_usage(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    opts = body.get("stream_options")
    return isinstance(opts, dict) and bool(opts.get("include_usage"))


def _wants_continuous_usage(body: Any) -> bool:
    """vLLM's ``continuous_usage_stats``: the usage so far in every event."""
    return _wants_usage(body) and bool(body["stream_options"].get("continuous_usage_stats"))


def _title_enum(schema: dict[str, Any]) -> list[str]:
    for definition in schema.get("$defs", {}).values():
        title = definition.get("properties", {}).get("title", {})
        if "enum" in title:
            return list(title["enum"])
    return []


def answer_by_schema(p: dict[str, Any], body: Any) -> dict[str, Any]:
    """``p`` with its ``content`` written from the request's schema when ``picks`` is set."""
    if p.get("picks") is None or not isinstance(body, dict):
        return p
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    if "picks" in schema.get("properties", {}):
        most = schema["properties"]["picks"].get("maxItems")
        numbers = [index + 1 for index in p["picks"][:most]]
        return {**p, "content": json.dumps({"picks": numbers}), "pieces": None}
    titles = _title_enum(schema)
    items: list[dict[str, str]] = []
    # As vLLM's grammar makes a model answer: no more items than the schema allows.
    most = schema.get("properties", {}).get("challenges", {}).get("maxItems")
    for index in p["picks"][:most]:
        item = {"title": titles[index] if index < len(titles) else f"없는 챌린지 {index}"}
        if "description" in schema.get("$defs", {}).get("ChallengeItem", {}).get("properties", {}):
            item["description"] = p["picks_description"]
        items.append(item)
    answer: dict[str, Any] = {}
    if "recommend" in schema.get("properties", {}):
        answer["recommend"] = p["picks_recommend"]
    answer["challenges"] = items
    return {**p, "content": json.dumps(answer, ensure_ascii=False), "pieces": None}


def _tokens(p: dict[str, Any], forever: bool = False) -> Iterator[str]:
    pieces = p.get("pieces")
    if pieces is not None:
        source = [str(x) for x in pieces]
    else:
        content = str(p["content"])
        n = int(p["chunk_chars"])
        source = [content[i : i + n] for i in range(0, len(content), n)]
    if not source:
        return
    while True:
        yield from source
        if not forever:
            return


def _groups(tokens: Iterator[str], per_chunk: int) -> Iterator[tuple[str, int]]:
    """Join tokens into SSE chunks: yields (text, token_count)."""
    buf: list[str] = []
    for tok in tokens:
        buf.append(tok)
        if len(buf) >= per_chunk:
            yield "".join(buf), len(buf)
            buf = []
    if buf:
        yield "".join(buf), len(buf)


# --------------------------------------------------------------------------- connection


class _BadRequest(Exception):
    pass


class _ClientGone(Exception):
    def __init__(self, at: float, reason: str) -> None:
        super().__init__(reason)
        self.at = at
        self.reason = reason


class _Conn:
    """A StreamReader/StreamWriter pair with a push-back buffer, so that the EOF
    watcher can read concurrently without losing bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buf = bytearray()
        self.eof = False

    async def _fill(self) -> bool:
        if self.eof:
            return False
        try:
            data = await self.reader.read(65536)
        except (ConnectionError, OSError):
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    async def read_head(self, limit: int = 65536) -> bytes | None:
        while True:
            while self.buf.startswith(b"\r\n"):
                del self.buf[:2]
            idx = self.buf.find(b"\r\n\r\n")
            if idx >= 0:
                head = bytes(self.buf[:idx])
                del self.buf[: idx + 4]
                return head
            if len(self.buf) > limit:
                raise _BadRequest("request head too large")
            if not await self._fill():
                return None

    async def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not await self._fill():
                raise _BadRequest("incomplete request body")
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    async def read_line(self) -> bytes:
        while True:
            idx = self.buf.find(b"\r\n")
            if idx >= 0:
                line = bytes(self.buf[:idx])
                del self.buf[: idx + 2]
                return line
            if not await self._fill():
                raise _BadRequest("incomplete chunked body")

    async def read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            size_line = await self.read_line()
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while await self.read_line():  # trailers
                    pass
                return bytes(body)
            body += await self.read_exact(size)
            await self.read_line()

    async def watch(self) -> tuple[str, float]:
        """Return (reason, time.time()) as soon as the client closes or resets."""
        while True:
            try:
                data = await self.reader.read(65536)
            except (ConnectionError, OSError):
                return "reset", time.time()
            if not data:
                at = time.time()
                self.eof = True
                return "eof", at
            self.buf += data  # unexpected (pipelined) bytes: keep them

    async def write(self, data: bytes) -> None:
        if self.writer.transport.is_closing():
            raise _ClientGone(time.time(), "write_error")
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise _ClientGone(time.time(), "write_error") from exc


def _response_head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines.append(f"date: {formatdate(usegmt=True)}")
    lines.append("server: uvicorn")
    lines.extend(f"{k}: {v}" for k, v in headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Stream:
    """Writes one chunked SSE answer and counts what it sent."""

    def __init__(self, conn: _Conn, record: dict[str, Any], p: dict[str, Any]) -> None:
        self.conn = conn
        self.record = record  # the stream record kept in stats (mutated under lock)
        self.eol = str(p.get("eol", "\n"))
        self.ensure_ascii = bool(p.get("ensure_ascii", False))
        self.wire_chunk_bytes = p.get("wire_chunk_bytes")
        self.wire_delay = float(p.get("wire_delay", 0.0) or 0.0)
        self.headers_sent = False

    async def headers(self, request_id: str) -> None:
        await self.conn.write(
            _response_head(
                200,
                [
                    ("content-type", "text/event-stream; charset=utf-8"),
                    ("transfer-encoding", "chunked"),
                    ("x-request-id", request_id),
                ],
            )
        )
        self.headers_sent = True

    async def http_chunk(self, data: bytes) -> None:
        if data:
            await self.conn.write(b"%x\r\n" % len(data) + data + b"\r\n")

    async def raw_event(self, text: str) -> None:
        """Send ``text`` + blank line as one SSE event (sliced per wire_chunk_bytes)."""
        data = (text + self.eol + self.eol).encode("utf-8")
        n = self.wire_chunk_bytes
        if n:
            for i in range(0, len(data), int(n)):
                if i and self.wire_delay:
                    await asyncio.sleep(self.wire_delay)
                await self.http_chunk(data[i : i + int(n)])
        else:
            await self.http_chunk(data)
        self.record["chunks_sent"] += 1

    async def event(self, obj: Any) -> None:
        await self.raw_event("data: " + _dumps(obj, self.ensure_ascii))

    async def done(self) -> None:
        await self.raw_event("data: [DONE]")

    async def end(self) -> None:
        await self.conn.write(b"0\r\n\r\n")


# --------------------------------------------------------------------------- server


class ScriptedUpstream:
    """The scripted server, run on the current event loop.

    Thread-safe reads: ``requests``, ``chat_requests``, ``stats``, ``scenario`` return
    copies taken under a lock; ``set_scenario``/``queue_scenario``/``reset`` may be
    called from any thread.
    """

    def __init__(
        self,
        model_id: str = MODEL_ID,
        scenario: str = "ok",
        api_key: str | None = None,
        max_recent: int = 200,
        **params: Any,
    ) -> None:
        self.model_id = model_id
        self.api_key = api_key
        self._lock = threading.Lock()
        self._scenario: tuple[str, dict[str, Any]] = (scenario, resolve_scenario(scenario, params))
        self._queue: deque[tuple[str, dict[str, Any]]] = deque()
        self._requests: list[dict[str, Any]] = []
        self._max_recent = max_recent
        self._seq = 0
        self._open_connections = 0
        self._active_streams = 0
        self._reset_counters()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.host = "127.0.0.1"
        self.port = 0

    # ----------------------------------------------------------------- lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> ScriptedUpstream:
        self._server = await asyncio.start_server(self._handle, host, port)
        sock = self._server.sockets[0]
        self.host = host
        self.port = sock.getsockname()[1]
        return self

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> ScriptedUpstream:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # ----------------------------------------------------------------- control

    def set_scenario(self, name: str, **params: Any) -> dict[str, Any]:
        """Set the global scenario for subsequent requests; clears the queue.
        Returns the merged params. ValueError for unknown names or params."""
        merged = resolve_scenario(name, params)
        with self._lock:
            self._scenario = (name, merged)
            self._queue.clear()
        return copy.deepcopy(merged)

    def queue_scenario(self, name: str, **params: Any) -> dict[str, Any]:
        """Use this scenario for the next chat request only (FIFO, before the global)."""
        merged = resolve_scenario(name, params)
        with self._lock:
            self._queue.append((name, merged))
        return copy.deepcopy(merged)

    @property
    def scenario(self) -> dict[str, Any]:
        with self._lock:
            name, params = self._scenario
            return {
                "name": name,
                "params": copy.deepcopy(params),
                "queued": [{"name": n, "params": copy.deepcopy(p)} for n, p in self._queue],
            }

    def reset(self) -> None:
        """Clear recorded requests, counters, recent disconnects/streams and the queue.
        The global scenario and the live gauges (open_connections, active_streams) stay."""
        with self._lock:
            self._requests.clear()
            self._queue.clear()
            self._reset_counters()

    def _reset_counters(self) -> None:
        self._connections_total = 0
        self._requests_total = 0
        self._streams_started = 0
        self._streams_completed = 0
        self._streams_aborted = 0
        self._streams_cut = 0
        self._disconnects: deque[dict[str, Any]] = deque(maxlen=self._max_recent)
        self._streams: deque[dict[str, Any]] = deque(maxlen=self._max_recent)

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"] == "/v1/chat/completions"]

    @property
    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "open_connections": self._open_connections,
                "connections_total": self._connections_total,
                "requests_total": self._requests_total,
                "active_streams": self._active_streams,
                "streams_started": self._streams_started,
                "streams_completed": self._streams_completed,
                "streams_aborted_by_client": self._streams_aborted,
                "streams_cut_by_server": self._streams_cut,
                "disconnects": copy.deepcopy(list(self._disconnects)),
                "streams": copy.deepcopy(list(self._streams)),
            }

    async def wait_until(
        self, predicate: Callable[[], bool], timeout_s: float = 2.0, interval: float = 0.005
    ) -> None:
        """Poll ``predicate()`` until true; TimeoutError after ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout_s:.2f}s")
            await asyncio.sleep(interval)

    def _next_scenario(self) -> tuple[str, dict[str, Any]]:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            name, params = self._scenario
            return name, copy.deepcopy(params)

    # ----------------------------------------------------------------- HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        with self._lock:
            self._open_connections += 1
            self._connections_total += 1
        conn = _Conn(reader, writer)
        try:
            while True:
                try:
                    keep_alive = await self._one_request(conn)
                except _BadRequest as exc:
                    body = _dumps(openai_error(str(exc), 400)).encode()
                    with contextlib.suppress(_ClientGone):
                        await conn.write(self._plain_head(400, body, close=True) + body)
                    break
                if not keep_alive:
                    break
        except (ConnectionError, OSError, _ClientGone, asyncio.CancelledError):
            pass
        except Exception:  # a bug in this test double: show it, drop the connection
            traceback.print_exc()
        finally:
            with self._lock:
                self._open_connections -= 1
            self._writers.discard(writer)
            self._tasks.discard(task)
            if not writer.transport.is_closing():
                writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    @staticmethod
    def _plain_head(
        status: int,
        body: bytes,
        content_type: str = "application/json",
        close: bool = False,
        extra: list[tuple[str, str]] | None = None,
    ) -> bytes:
        headers = [("content-type", content_type), ("content-length", str(len(body)))]
        headers.extend(extra or [])
        if close:
            headers.append(("connection", "close"))
        return _response_head(status, headers)

    async def _send_json(
        self,
        conn: _Conn,
        status: int,
        obj: Any,
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        if isinstance(obj, str):
            body, ctype = obj.encode("utf-8"), "text/plain; charset=utf-8"
        else:
            body, ctype = _dumps(obj).encode("utf-8"), "application/json"
        await conn.write(self._plain_head(status, body, ctype, extra=extra) + body)

    async def _one_request(self, conn: _Conn) -> bool:
        """Serve one request; return True to keep the connection open."""
        head = await conn.read_head()
        if head is None:
            return False
        received_at = time.time()
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError as exc:
            raise _BadRequest("malformed request line") from exc
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest("malformed header line")
            key = name.strip().lower()
            headers[key] = (headers[key] + ", " if key in headers else "") + value.strip()
        if headers.get("expect", "").lower() == "100-continue":
            await conn.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raw = await conn.read_chunked()
        else:
            try:
                length = int(headers.get("content-length", "0") or 0)
            except ValueError as exc:
                raise _BadRequest("bad content-length") from exc
            raw = await conn.read_exact(length)
        connection = headers.get("connection", "").lower()
        keep_alive = "close" not in connection and (
            version.upper() != "HTTP/1.0" or "keep-alive" in connection
        )
        split = urlsplit(target)
        path = split.path
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None

        if path.startswith("/_control/"):
            await self._control(conn, method, path, body)
            return keep_alive

        with self._lock:
            self._seq += 1
            request_id = f"req-{self._seq}"
            self._requests_total += 1
            self._requests.append(
                {
                    "request_id": request_id,
                    "method": method,
                    "path": path,
                    "query": {k: v[-1] for k, v in parse_qs(split.query).items()},
                    "headers": dict(headers),
                    "body": copy.deepcopy(body),
                    "raw_body": raw.decode("utf-8", "replace"),
                    "received_at": received_at,
                }
            )

        if path == "/health" and method == "GET":
            await self._send_json(conn, 200, {"status": "ok"})
            return keep_alive
        if path.startswith("/v1/") and self.api_key is not None:
            if headers.get("authorization") != f"Bearer {self.api_key}":
                await self._send_json(conn, 401, {"error": "Unauthorized"})
                return keep_alive
        if path == "/v1/models" and method == "GET":
            with self._lock:
                name, params = self._scenario
                params = copy.deepcopy(params)
            if name == "models_error":
                status = int(params["status"])
                await self._send_json(conn, status, openai_error(params["message"], status))
            else:
                await self._send_json(
                    conn,
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": self.model_id,
                                "object": "model",
                                "created": int(time.time()),
                                "owned_by": "vllm",
                                "root": self.model_id,
                                "parent": None,
                                "max_model_len": 4096,
                            }
                        ],
                    },
                )
            return keep_alive
        if path == "/v1/chat/completions" and method == "POST":
            if not isinstance(body, dict):
                err = openai_error("request body must be a JSON object", 400)
                await self._send_json(conn, 400, err)
                return keep_alive
            name, params = self._next_scenario()
            if body.get("stream"):
                return await self._stream(conn, request_id, name, params, body) and keep_alive
            return await self._non_stream(conn, request_id, name, params, body) and keep_alive
        await self._send_json(conn, 404, {"detail": "Not Found"})
        return keep_alive

    async def _control(self, conn: _Conn, method: str, path: str, body: Any) -> None:
        if path == "/_control/scenario" and method == "POST":
            if not isinstance(body, dict) or not isinstance(body.get("name"), str):
                await self._send_json(conn, 400, {"error": 'expected {"name": ..., **params}'})
                return
            params = dict(body)
            name = params.pop("name")
            once = bool(params.pop("once", False))
            try:
                merged = (self.queue_scenario if once else self.set_scenario)(name, **params)
            except ValueError as exc:
                await self._send_json(conn, 400, {"error": str(exc)})
                return
            await self._send_json(conn, 200, {"name": name, "once": once, "params": merged})
        elif path == "/_control/scenario" and method == "GET":
            await self._send_json(conn, 200, self.scenario)
        elif path == "/_control/stats" and method == "GET":
            await self._send_json(conn, 200, self.stats)
        elif path == "/_control/requests" and method == "GET":
            await self._send_json(conn, 200, self.requests)
        elif path == "/_control/reset" and method == "POST":
            self.reset()
            await self._send_json(conn, 200, {"reset": True})
        else:
            await self._send_json(conn, 404, {"detail": "Not Found"})

    # ----------------------------------------------------------------- chat

    async def _non_stream(
        self, conn: _Conn, request_id: str, name: str, p: dict[str, Any], body: dict[str, Any]
    ) -> bool:
        if name == "http_error":
            return await self._http_error(conn, p)
        if name == "inband_error":
            await self._send_json(conn, 500, openai_error(p["message"], 500, p["error_type"]))
            return True
        if name == "stall":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(conn.watch(), float(p["hold"]))
            return False
        content = "".join(_tokens(p)) if name != "malformed" else str(p.get("then_content") or "")
        tokens = len(list(_tokens(p))) if name != "malformed" else 1
        prompt = _prompt_tokens(body)
        obj = {
            "id": f"chatcmpl-scripted-{request_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_id,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "tool_calls": []},
                    "logprobs": None,
                    "finish_reason": p.get("finish_reason", "stop"),
                    "stop_reason": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "total_tokens": prompt + tokens,
                "completion_tokens": tokens,
            },
        }
        data = _dumps(obj).encode("utf-8")
        if name == "cut":
            # Promise the full body, deliver part of it, then close.
            await conn.write(self._plain_head(200, data) + data[: max(0, len(data) // 2)])
            return False
        await self._send_json(conn, 200, obj)
        return True

    async def _http_error(self, conn: _Conn, p: dict[str, Any]) -> bool:
        if p["delay"]:
            await asyncio.sleep(float(p["delay"]))
        status = int(p["status"])
        body = p["body"] if p["body"] is not None else openai_error(p["message"], status, p["type"])
        extra = [(str(k).lower(), str(v)) for k, v in dict(p["headers"]).items()]
        await self._send_json(conn, status, body, extra=extra)
        return True

    async def _stream(
        self, conn: _Conn, request_id: str, name: str, p: dict[str, Any], body: dict[str, Any]
    ) -> bool:
        """Run one streaming answer; return True when the connection can be reused."""
        if name == "http_error":
            return await self._http_error(conn, p)
        p = answer_by_schema(p, body)
        record: dict[str, Any] = {
            "request_id": request_id,
            "scenario": name,
            "started_at": time.time(),
            "ended_at": None,
            "chunks_sent": 0,
            "outcome": "running",
        }
        with self._lock:
            self._streams_started += 1
            self._active_streams += 1
            self._streams.append(record)
        stream = _Stream(conn, record, p)
        producer = asyncio.create_task(self._produce(stream, request_id, name, p, body))
        watcher = asyncio.create_task(conn.watch())
        gone: tuple[str, float] | None = None
        outcome = "error"
        try:
            done, _ = await asyncio.wait({producer, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if producer in done:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
                try:
                    outcome = producer.result()
                except _ClientGone as exc:
                    gone = (exc.reason, exc.at)
            else:
                gone = watcher.result()
                producer.cancel()
                with contextlib.suppress(asyncio.CancelledError, _ClientGone):
                    await producer
        finally:
            if not producer.done():
                producer.cancel()
            if not watcher.done():
                watcher.cancel()
            with self._lock:
                self._active_streams -= 1
                record["ended_at"] = time.time()
                if gone is not None:
                    outcome = "aborted_by_client"
                    self._streams_aborted += 1
                    self._disconnects.append(
                        {
                            "request_id": request_id,
                            "disconnect_at": gone[1],
                            "chunks_sent": record["chunks_sent"],
                            "reason": gone[0],
                            "scenario": name,
                            "started_at": record["started_at"],
                        }
                    )
                elif outcome in ("completed", "inband_error"):
                    self._streams_completed += 1
                elif outcome in ("cut", "hold_expired"):
                    self._streams_cut += 1
                record["outcome"] = outcome
        if outcome == "cut" and p.get("mode") == "reset":
            with contextlib.suppress(OSError):
                sock = conn.writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.writer.transport.abort()
        return outcome in ("completed", "inband_error")

    async def _produce(
        self, s: _Stream, request_id: str, name: str, p: dict[str, Any], body: dict[str, Any]
    ) -> str:
        """Write the stream; returns the outcome. Raises _ClientGone on write errors."""
        if name == "malformed":
            return await self._produce_malformed(s, request_id, p, body)
        if name == "stall" and p["before_headers"]:
            await asyncio.sleep(float(p["hold"]))
            return "hold_expired"
        if p["headers_delay"]:
            await asyncio.sleep(float(p["headers_delay"]))
        await s.headers(request_id)
        if p["first_delay"]:
            await asyncio.sleep(float(p["first_delay"]))
        chunks = _ChunkFactory(f"chatcmpl-scripted-{request_id}", self.model_id)
        continuous = bool(p["include_usage"]) and _wants_continuous_usage(body)
        prompt_tokens = _prompt_tokens(body)
        await s.event(chunks.role())

        token_delay = float(p["token_delay"])
        completion_tokens = 0
        chars_sent = 0
        sent_content = 0
        groups = _groups(_tokens(p, forever=(name == "slow")), int(p["tokens_per_chunk"]))

        held = False

        for text, ntok in groups:
            if name == "inband_error" and sent_content >= int(p["after_chunks"]):
                break
            if name == "stall" and not held and sent_content >= int(p["after_chunks"]):
                held = True
                await asyncio.sleep(float(p["hold"]))
                if p["after_hold"] == "close":
                    return "hold_expired"
            if name == "cut":
                room = int(p["after_chars"]) - chars_sent
                if room <= 0:
                    break
                text = text[:room]
            if token_delay:
                await asyncio.sleep(token_delay)
            completion_tokens += ntok
            event = chunks.content(text)
            if continuous:
                event["usage"] = chunks.usage(prompt_tokens, completion_tokens)["usage"]
            await s.event(event)
            sent_content += 1
            chars_sent += len(text)

        if name == "inband_error":
            await s.event({"error": openai_error(p["message"], int(p["code"]), p["error_type"])})
            await s.done()
            await s.end()
            return "inband_error"
        if name == "stall" and not held:
            # The content had no more than after_chunks chunks: stall before the finish.
            await asyncio.sleep(float(p["hold"]))
            if p["after_hold"] == "close":
                return "hold_expired"
        if name == "cut":
            if p["partial_event"]:
                await s.http_chunk(str(p["partial_event"]).encode("utf-8"))
            if p["mode"] == "close":
                s.conn.writer.close()
            return "cut"

        await s.event(chunks.finish(p["finish_reason"]))
        if p["include_usage"] and _wants_usage(body):
            await s.event(chunks.usage(prompt_tokens, completion_tokens))
        await s.done()
        await s.end()
        return "completed"

    async def _produce_malformed(
        self, s: _Stream, request_id: str, p: dict[str, Any], body: dict[str, Any]
    ) -> str:
        await s.headers(request_id)
        chunks = _ChunkFactory(f"chatcmpl-scripted-{request_id}", self.model_id)
        if p["role_chunk"]:
            await s.event(chunks.role())
        for line in p["lines"]:
            if p["line_delay"]:
                await asyncio.sleep(float(p["line_delay"]))
            await s.raw_event(str(line))
        if p["then_content"] is not None:
            ntok = 0
            for text in _tokens({"content": p["then_content"], "pieces": None, "chunk_chars": 3}):
                await s.event(chunks.content(text))
                ntok += 1
            await s.event(chunks.finish("stop"))
            if p["include_usage"] and _wants_usage(body):
                await s.event(chunks.usage(_prompt_tokens(body), ntok))
        if p["done"]:
            await s.done()
        await s.end()
        return "completed"


# --------------------------------------------------------------------------- thread wrapper


class ScriptedUpstreamThread:
    """Runs a ScriptedUpstream on its own event loop in a daemon thread.

    Same read API (``port``, ``base_url``, ``root_url``, ``requests``,
    ``chat_requests``, ``stats``, ``scenario``) and control API (``set_scenario``,
    ``queue_scenario``, ``reset``), plus a blocking ``wait_until``.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, **kwargs: Any) -> None:
        self.upstream = ScriptedUpstream(**kwargs)
        self._host = host
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ScriptedUpstreamThread:
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.upstream.start(self._host, self._port))
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="scripted-upstream", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted upstream did not start")
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        fut = asyncio.run_coroutine_threadsafe(self.upstream.stop(), loop)
        with contextlib.suppress(Exception):
            fut.result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    def __enter__(self) -> ScriptedUpstreamThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self.upstream.port

    @property
    def base_url(self) -> str:
        return self.upstream.base_url

    @property
    def root_url(self) -> str:
        return self.upstream.root_url

    @property
    def model_id(self) -> str:
        return self.upstream.model_id

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.upstream.requests

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return self.upstream.chat_requests

    @property
    def stats(self) -> dict[str, Any]:
        return self.upstream.stats

    @property
    def scenario(self) -> dict[str, Any]:
        return self.upstream.scenario

    def set_scenario(self, name: str, **params: Any) -> dict[str, Any]:
        return self.upstream.set_scenario(name, **params)

    def queue_scenario(self, name: str, **params: Any) -> dict[str, Any]:
        return self.upstream.queue_scenario(name, **params)

    def reset(self) -> None:
        self.upstream.reset()

    def wait_until(
        self, predicate: Callable[[], bool], timeout_s: float = 2.0, interval: float = 0.005
    ) -> None:
        """Block until ``predicate()`` is true; TimeoutError after ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout_s:.2f}s")
            time.sleep(interval)


# --------------------------------------------------------------------------- CLI


async def _serve(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {}
    defaults = SCENARIOS[args.scenario]
    if args.token_delay is not None and "token_delay" in defaults:
        params["token_delay"] = args.token_delay
    if args.chunk_chars is not None and "chunk_chars" in defaults:
        params["chunk_chars"] = args.chunk_chars
    up = ScriptedUpstream(
        model_id=args.model_id, scenario=args.scenario, api_key=args.api_key, **params
    )
    await up.start(args.host, args.port)
    print(f"scripted upstream on {up.base_url} scenario={args.scenario} {params}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await up.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible upstream")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8899)
    parser.add_argument("--scenario", default="ok", choices=sorted(SCENARIOS))
    parser.add_argument("--token-delay", type=float, default=None)
    parser.add_argument("--chunk-chars", type=int, default=None)
    parser.add_argument("--model-id", default=MODEL_ID)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
