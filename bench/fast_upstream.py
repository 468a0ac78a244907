"""A fast scripted OpenAI-compatible upstream for the load benchmarks, in its own process.

Unlike ``tests/upstream/scripted_openai.py`` (byte-exact faults, a request log, a thread),
this one is built to stream thousands of concurrent answers on a small share of one core: raw
asyncio protocols (uvloop when importable), one timer per stream, chunks pre-formatted.

Every answer follows a fixed schedule: after the response head and the role chunk, content
chunk ``i`` is due at ``t0 + first_delay + i * interval`` (``t0``: the request's arrival). Each
content chunk carries a marker ``~SCHED:SENT~`` (``time.monotonic()`` in µs: when the chunk was
due and when it was written), inside a JSON string of a valid answer::

    {"recommend":"가~..~나~..~ ... ","challenges":[{"title":"~..~","description":"~..~"}]}

so the gateway's scrubber shows every marker as display text, one ``challenge`` event per
upstream chunk, and a client on any path (direct, the gateway, LiteLLM) can tell how late
each chunk reached it. CLOCK_MONOTONIC is system-wide, so the processes share the clock.

Scenarios, chosen per request by a ``[[bench:NAME]]`` marker anywhere in the request body
(e.g. in a free-text message), else the configured default:

    ok            the answer above, ``chunks`` content chunks
    http_error    500 with an OpenAI error body, at once
    overloaded    429, at once
    inband_error  ``after`` chunks, then ``data: {"error": ...}`` and [DONE]
    cut           ``after`` chunks, then the connection is closed (no [DONE])
    stall         ``after`` chunks, then silence for ``hold`` seconds, then a close
    prose         plain text (no JSON) in ``chunks`` chunks

    python bench/fast_upstream.py [--port 0] [--interval 0.05] [--chunks 40]
prints ``READY <port>`` on stdout. ``GET /_stats`` gives counters; ``POST /_config`` with a
JSON object changes ``interval``, ``chunks``, ``first_delay``, ``after``, ``hold``,
``scenario`` for later requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from typing import Any

MODEL_ID = "scripted-model"
_SCENARIO = re.compile(rb"\[\[bench:([a-z_]+)\]\]")
_WORDS = ("가", "나무", "숲", "물", "빛", "길", "바다", "씨앗")


def _mono_us() -> int:
    return time.monotonic_ns() // 1000


def _esc(text: str) -> bytes:
    """``text`` as the inside of a JSON string (the chunk's delta.content)."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")


def _frame(payload: bytes) -> bytes:
    """One SSE event as one HTTP/1.1 chunk."""
    data = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


class Config:
    def __init__(self, **kw: Any) -> None:
        self.interval = 0.05
        self.chunks = 40
        self.first_delay = 0.0
        self.after = 3
        self.hold = 60.0
        self.scenario = "ok"
        self.update(kw)

    def update(self, kw: dict[str, Any]) -> None:
        for key, value in kw.items():
            if value is None:
                continue
            if not hasattr(self, key):
                raise ValueError(f"unknown setting {key!r}")
            setattr(self, key, type(getattr(self, key))(value))
        self.chunks = max(4, self.chunks)

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


class Stats:
    def __init__(self) -> None:
        self.requests = 0
        self.streams_started = 0
        self.streams_completed = 0
        self.streams_aborted = 0
        self.content_chunks = 0
        self.active = 0
        self.connections = 0
        self.open_connections = 0
        self.by_scenario: dict[str, int] = {}

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"transfer-encoding: chunked\r\nserver: fast-upstream\r\n\r\n"
)


def _json_response(status: int, obj: Any, reason: bytes = b"OK") -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        status,
        reason,
        len(body),
        body,
    )


class _Answer:
    """One streamed answer on one connection, driven by loop timers."""

    __slots__ = (
        "after",
        "base",
        "cfg",
        "conn",
        "handle",
        "i",
        "interval",
        "loop",
        "mono0",
        "n",
        "prefix",
        "scenario",
        "suffix",
        "t0",
        "usage",
    )

    def __init__(self, conn: _Conn, scenario: str, cfg: Config, usage: bool, rid: int) -> None:
        self.conn = conn
        self.loop = conn.loop
        self.scenario = scenario
        self.cfg = cfg
        self.usage = usage
        self.n = cfg.chunks
        self.after = cfg.after
        self.interval = cfg.interval
        self.i = 0
        self.handle: asyncio.TimerHandle | None = None
        self.base = (
            b'{"id":"chatcmpl-b%d","object":"chat.completion.chunk","created":%d,"model":"%s",'
            % (
                rid,
                int(time.time()),
                MODEL_ID.encode(),
            )
        )
        self.prefix = self.base + b'"choices":[{"index":0,"delta":{"content":"'
        self.suffix = b'"},"logprobs":null,"finish_reason":null}]}'
        self.t0 = self.loop.time() + cfg.first_delay
        self.mono0 = _mono_us() + int(cfg.first_delay * 1e6)

    def start(self) -> None:
        conn = self.conn
        role = b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
        conn.write(_HEAD + _frame(self.base + role + b'"logprobs":null,"finish_reason":null}]}'))
        self.handle = self.loop.call_at(self.t0, self.tick)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def _text(self, i: int, marker: str) -> str:
        if self.scenario == "prose":
            return _WORDS[i % len(_WORDS)] + marker + " "
        last = self.n - 1
        if i == 0:
            return '{"recommend":"' + _WORDS[0] + marker
        if i == last - 1:
            return '","challenges":[{"title":"' + marker
        if i == last:
            return '","description":"' + marker + '"}]}'
        return _WORDS[i % len(_WORDS)] + marker

    def tick(self) -> None:
        self.handle = None
        conn = self.conn
        if conn.closed:
            return
        i = self.i
        sc = self.scenario
        if sc in ("cut", "stall", "inband_error") and i >= self.after:
            if sc == "cut":
                conn.finish_stream(completed=False)
                conn.transport.close()
            elif sc == "stall":
                self.handle = self.loop.call_later(self.cfg.hold, self._stall_over)
            else:
                err = b'{"error":{"message":"bench in-band error","type":"InternalServerError","param":null,"code":500}}'
                conn.write(_frame(err) + _frame(b"[DONE]") + b"0\r\n\r\n")
                conn.finish_stream(completed=True)
            return
        sched = self.mono0 + int(i * self.interval * 1e6)
        marker = f"~{sched}:{_mono_us()}~"
        conn.write(_frame(self.prefix + _esc(self._text(i, marker)) + self.suffix))
        conn.stats.content_chunks += 1
        self.i = i + 1
        if self.i < self.n:
            self.handle = self.loop.call_at(self.t0 + self.i * self.interval, self.tick)
            return
        out = _frame(
            self.base + b'"choices":[{"index":0,"delta":{},"logprobs":null,'
            b'"finish_reason":"stop","stop_reason":null}]}'
        )
        if self.usage:
            usage = b'"choices":[],"usage":{"prompt_tokens":10,"total_tokens":%d,"completion_tokens":%d}}'
            out += _frame(self.base + usage % (10 + self.n, self.n))
        conn.write(out + _frame(b"[DONE]") + b"0\r\n\r\n")
        conn.finish_stream(completed=True)

    def _stall_over(self) -> None:
        self.handle = None
        self.conn.finish_stream(completed=False)
        self.conn.transport.close()


class _Conn(asyncio.Protocol):
    def __init__(self, server: FastUpstream) -> None:
        self.server = server
        self.stats = server.stats
        self.loop = asyncio.get_running_loop()
        self.buf = bytearray()
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.answer: _Answer | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.stats.connections += 1
        self.stats.open_connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.stats.open_connections -= 1
        if self.answer is not None:
            self.answer.cancel()
            self.answer = None
            self.stats.active -= 1
            self.stats.streams_aborted += 1

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    def finish_stream(self, *, completed: bool) -> None:
        if self.answer is not None:
            self.answer = None
            self.stats.active -= 1
            if completed:
                self.stats.streams_completed += 1
            else:
                self.stats.streams_aborted += 1
        if completed and self.buf:
            self._parse()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.answer is None:
            self._parse()

    def _parse(self) -> None:
        while self.answer is None and not self.closed:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end])
            lines = head.split(b"\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if len(self.buf) < end + 4 + length:
                return
            body = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            parts = lines[0].split(b" ")
            self._request(parts[0], parts[1] if len(parts) > 1 else b"/", body)

    def _request(self, method: bytes, target: bytes, body: bytes) -> None:
        server = self.server
        stats = self.stats
        path = target.split(b"?", 1)[0]
        if path == b"/v1/chat/completions" and method == b"POST":
            stats.requests += 1
            found = _SCENARIO.search(body)
            scenario = found.group(1).decode() if found else server.cfg.scenario
            stats.by_scenario[scenario] = stats.by_scenario.get(scenario, 0) + 1
            if scenario == "http_error":
                err = {"error": {"message": "bench failure", "type": "InternalServerError"}}
                self.write(_json_response(500, err, b"Internal Server Error"))
                return
            if scenario == "overloaded":
                err = {"error": {"message": "bench overload", "type": "TooManyRequestsError"}}
                self.write(_json_response(429, err, b"Too Many Requests"))
                return
            usage = b'"include_usage":true' in body or b'"include_usage": true' in body
            stats.streams_started += 1
            stats.active += 1
            self.answer = _Answer(self, scenario, server.cfg, usage, stats.requests)
            self.answer.start()
        elif path == b"/v1/models":
            obj = {
                "object": "list",
                "data": [{"id": MODEL_ID, "object": "model", "owned_by": "vllm"}],
            }
            self.write(_json_response(200, obj))
        elif path == b"/health":
            self.write(_json_response(200, {"status": "ok"}))
        elif path == b"/_stats":
            self.write(_json_response(200, {**stats.as_dict(), "config": server.cfg.as_dict()}))
        elif path == b"/_config" and method == b"POST":
            try:
                server.cfg.update(json.loads(body or b"{}"))
            except (ValueError, TypeError) as exc:
                self.write(_json_response(400, {"error": str(exc)}, b"Bad Request"))
                return
            self.write(_json_response(200, server.cfg.as_dict()))
        else:
            self.write(_json_response(404, {"detail": "Not Found"}, b"Not Found"))


class FastUpstream:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.stats = Stats()

    async def serve(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Conn(self), host, port, backlog=4096)
        print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--first-delay", type=float, default=0.0)
    parser.add_argument("--scenario", default="ok")
    args = parser.parse_args()
    cfg = Config(
        interval=args.interval,
        chunks=args.chunks,
        first_delay=args.first_delay,
        scenario=args.scenario,
    )
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(FastUpstream(cfg).serve(args.host, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
