"""The benchmarks' load generator: many concurrent HTTP/1.1 streams from one process.

Raw asyncio protocols (uvloop when importable), one TCP connection per stream (as an
EventSource opens one), a small incremental parser for the response head, chunked framing
and SSE events. Every event that carries ``bench/fast_upstream.py`` markers ``~SCHED:SENT~``
is timestamped on arrival (``time.monotonic()``, µs), which gives per chunk:

    delay    arrival - SENT   (what the path added after the upstream wrote the chunk)
    late     arrival - SCHED  (the same, plus the upstream's own lateness)
    gap      arrival - previous arrival (client-side inter-token latency)
    ttft     first marker arrival - stream start (connect included)

Run by the benchmarks as a subprocess: a JSON spec on stdin, a JSON result on stdout::

    {"host": "127.0.0.1", "port": 8000, "timeout": 60,
     "groups": [{"name": "g", "kind": "sse_get" | "openai" | "post_json",
                 "paths": [[weight, "/path?query", body_or_null, hangup_after_or_null], ...],
                 "headers": {...},
                 "concurrency": 100, "streams": 5          # closed loop: streams per worker
                 | "duration": 10.0                        #   or until this many seconds
                 | "rate": 500, "duration": 10.0,          # open loop: arrivals per second
                 "ramp": 2.0, "delay": 0.0}]}

Each group reports outcomes (``close``, ``error_503``, ``done``, ``hangup``, ``eof``,
``http_500``, ``connect_error``, ``timeout``, ...), percentiles of the measures above and, per
second of the run, the p99 chunk delay (for plots).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import resource
import sys
import time
from collections import Counter
from typing import Any

_MARKER = re.compile(rb"~(\d+):(\d+)~")
_STATUS = re.compile(rb'"status":\s*(\d+)')
QUANTILES = (0.5, 0.9, 0.99, 0.999)


def _mono_us() -> int:
    return time.monotonic_ns() // 1000


class Samples:
    """Measures of one group, in µs."""

    def __init__(self) -> None:
        self.ttft: list[int] = []
        self.delay: list[int] = []
        self.late: list[int] = []
        self.gap: list[int] = []
        self.terminal: list[int] = []  # stream start -> terminal event (close/error/[DONE])
        self.upstream_late: list[int] = []
        self.per_second: dict[int, list[int]] = {}
        self.outcomes: Counter[str] = Counter()
        self.windows: dict[str, tuple[float, float, Samples]] = {}
        self.events = 0
        self.markers = 0
        self.after_terminal = 0
        self.streams = 0


class StreamProtocol(asyncio.Protocol):
    """One request and its (streamed) answer."""

    def __init__(
        self,
        request: bytes,
        kind: str,
        samples: Samples,
        t_start: int,
        t0_run: int,
        hangup_after: int | None,
        done: asyncio.Future[str],
    ) -> None:
        self.request = request
        self.kind = kind
        self.s = samples
        self.t_start = t_start
        self.t0_run = t0_run
        self.hangup_after = hangup_after
        self.done = done
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.body = bytearray()  # de-chunked body not yet split into events
        self.state = "head"
        self.chunk_left = 0
        self.cstate = "size"
        self.chunked = False
        self.length = -1
        self.status = 0
        self.outcome = ""
        self.terminal = False
        self.last_arrival = 0
        self.marker_events = 0

    # -- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = _mono_us()
        self.buf += data
        try:
            self._parse(now)
        except Exception as exc:  # a parser bug must not hang the stream
            self._finish(f"client_parse_error:{type(exc).__name__}")

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            if self.outcome:
                self.done.set_result(self.outcome)
            elif self.terminal:
                self.done.set_result("eof_after_terminal")
            else:
                self.done.set_result("eof" if self.status == 200 else f"eof_http_{self.status}")

    # -- parsing
    def _finish(self, outcome: str) -> None:
        if not self.outcome:
            self.outcome = outcome
        if self.transport is not None:
            self.transport.close()
        if not self.done.done():
            self.done.set_result(self.outcome)

    def _parse(self, now: int) -> None:
        buf = self.buf
        if self.state == "head":
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[:end]).split(b"\r\n")
            del buf[: end + 4]
            self.status = int(head[0].split(b" ")[1])
            for line in head[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"transfer-encoding" and b"chunked" in value.lower():
                    self.chunked = True
                elif name == b"content-length":
                    self.length = int(value.strip())
            self.state = "body"
            if self.kind != "post_json" and self.status != 200:
                self.outcome = f"http_{self.status}"
        if self.state != "body":
            return
        if not self.chunked:
            self.body += buf
            buf.clear()
            if self.length >= 0 and len(self.body) >= self.length:
                self._complete_plain()
            return
        while buf:
            if self.cstate == "size":
                nl = buf.find(b"\r\n")
                if nl < 0:
                    break
                size = int(bytes(buf[:nl]).split(b";")[0], 16)
                del buf[: nl + 2]
                if size == 0:
                    self.state = "end"
                    self._events(now)
                    self._end()
                    return
                self.chunk_left = size
                self.cstate = "data"
            elif self.cstate == "data":
                take = min(self.chunk_left, len(buf))
                self.body += buf[:take]
                del buf[:take]
                self.chunk_left -= take
                if self.chunk_left == 0:
                    self.cstate = "crlf"
            else:
                if len(buf) < 2:
                    break
                del buf[:2]
                self.cstate = "size"
        self._events(now)

    def _events(self, now: int) -> None:
        body = self.body
        if b"\r" in body:
            body = bytearray(body.replace(b"\r\n", b"\n"))
        s = self.s
        start = 0
        while True:
            end = body.find(b"\n\n", start)
            if end < 0:
                break
            event = bytes(body[start:end])
            start = end + 2
            s.events += 1
            if self.terminal:
                s.after_terminal += 1
                continue
            if self.kind == "sse_get" and b"event: challenge" not in event:
                markers = []  # close repeats the whole answer: count challenge events only
            else:
                markers = _MARKER.findall(event)
            if markers:
                if self.marker_events == 0:
                    s.ttft.append(now - self.t_start)
                else:
                    s.gap.append(now - self.last_arrival)
                gap = now - self.last_arrival if self.marker_events else -1
                self.marker_events += 1
                self.last_arrival = now
                second = (now - self.t0_run) // 1_000_000
                bucket = s.per_second.setdefault(second, [])
                targets = [s]
                if s.windows:
                    at = (now - self.t0_run) / 1e6
                    targets += [w for lo, hi, w in s.windows.values() if lo <= at < hi]
                for sched_b, sent_b in markers:
                    sched, sent = int(sched_b), int(sent_b)
                    bucket.append(now - sent)
                    for t in targets:
                        t.markers += 1
                        t.delay.append(now - sent)
                        t.late.append(now - sched)
                        t.upstream_late.append(sent - sched)
                if gap >= 0:
                    for t in targets[1:]:
                        t.gap.append(gap)
                if self.hangup_after is not None and self.marker_events >= self.hangup_after:
                    self._finish("hangup")
                    return
            if self.kind == "sse_get":
                if event.startswith(b"event: close") or b"\nevent: close" in event:
                    self.terminal = True
                    self.outcome = "close"
                    s.terminal.append(now - self.t_start)
                elif event.startswith(b"event: error") or b"\nevent: error" in event:
                    self.terminal = True
                    found = _STATUS.search(event)
                    self.outcome = f"error_{found.group(1).decode() if found else '?'}"
                    s.terminal.append(now - self.t_start)
            elif self.kind == "openai" and b"data: [DONE]" in event:
                self.terminal = True
                self.outcome = self.outcome or "done"
                s.terminal.append(now - self.t_start)
        del body[:start]
        self.body = body

    def _end(self) -> None:
        if not self.outcome:
            self.outcome = "no_terminal" if self.status == 200 else f"http_{self.status}"
        self._finish(self.outcome)

    def _complete_plain(self) -> None:
        self.s.terminal.append(_mono_us() - self.t_start)
        if self.kind == "post_json":
            self._finish(f"post_{self.status}")
        else:
            self._finish(self.outcome or f"http_{self.status}")


class Group:
    def __init__(self, spec: dict[str, Any], host: str, port: int, timeout: float) -> None:
        self.spec = spec
        self.name = str(spec["name"])
        self.kind = str(spec["kind"])
        self.host = host
        self.port = port
        self.timeout = timeout
        self.s = Samples()
        for wname, (lo, hi) in dict(spec.get("windows") or {}).items():
            self.s.windows[wname] = (float(lo), float(hi), Samples())
        self.paths: list[tuple[float, bytes, int | None, str]] = []
        self.by_label: Counter[str] = Counter()
        headers = {"host": f"{host}:{port}", **dict(spec.get("headers") or {})}
        for entry in spec["paths"]:
            weight, target, body, hangup = entry[:4]
            label = str(entry[4]) if len(entry) > 4 else ""
            method = "GET" if body is None else "POST"
            lines = [f"{method} {target} HTTP/1.1"]
            lines += [f"{k}: {v}" for k, v in headers.items()]
            payload = b""
            if body is not None:
                payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
                lines += ["content-type: application/json", f"content-length: {len(payload)}"]
            if self.kind != "post_json":
                lines.append("accept: text/event-stream")
            request = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + payload
            self.paths.append((float(weight), request, hangup, label))
        self.weights = [p[0] for p in self.paths]
        self.rng = random.Random(spec.get("seed", 1))
        self.open_now = 0
        self.max_open = 0

    async def one(self, t0_run: int) -> None:
        loop = asyncio.get_running_loop()
        _, request, hangup, label = self.rng.choices(self.paths, weights=self.weights)[0]
        done: asyncio.Future[str] = loop.create_future()
        t_start = _mono_us()
        self.open_now += 1
        self.max_open = max(self.max_open, self.open_now)
        transport = None
        try:
            transport, _ = await asyncio.wait_for(
                loop.create_connection(
                    lambda: StreamProtocol(
                        request, self.kind, self.s, t_start, t0_run, hangup, done
                    ),
                    self.host,
                    self.port,
                ),
                self.timeout,
            )
            outcome = await asyncio.wait_for(done, self.timeout)
        except TimeoutError:
            outcome = "timeout"
        except OSError as exc:
            outcome = f"connect_error:{type(exc).__name__}"
        finally:
            self.open_now -= 1
            if transport is not None:
                transport.close()
        self.s.outcomes[outcome] += 1
        self.s.streams += 1
        if label:
            self.by_label[f"{label} -> {outcome}"] += 1

    async def run(self, t0_run: int) -> None:
        spec = self.spec
        if spec.get("delay"):
            await asyncio.sleep(float(spec["delay"]))
        if "rate" in spec:
            await self._open_loop(t0_run, float(spec["rate"]), float(spec["duration"]))
            return
        n = int(spec.get("concurrency", 1))
        ramp = float(spec.get("ramp", 0.0))
        started = time.monotonic()
        deadline = started + float(spec["duration"]) if "duration" in spec else None

        async def worker(w: int) -> None:
            if ramp:
                await asyncio.sleep(ramp * w / n)
            count = 0
            while True:
                if deadline is not None:
                    if time.monotonic() >= deadline:
                        return
                elif count >= int(spec.get("streams", 1)):
                    return
                await self.one(t0_run)
                count += 1

        await asyncio.gather(*(worker(w) for w in range(n)))

    async def _open_loop(self, t0_run: int, rate: float, duration: float) -> None:
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()
        start = loop.time()
        i = 0
        while True:
            due = start + i / rate
            if due - start >= duration:
                break
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            task = loop.create_task(self.one(t0_run))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            i += 1
        if tasks:
            await asyncio.gather(*tasks)

    def report(self) -> dict[str, Any]:
        s = self.s
        return {
            "name": self.name,
            "streams": s.streams,
            "outcomes": dict(s.outcomes),
            "by_label": dict(sorted(self.by_label.items())),
            "events": s.events,
            "marker_chunks": s.markers,
            "events_after_terminal": s.after_terminal,
            "max_open": self.max_open,
            "ttft_us": summarize(s.ttft),
            "delay_us": summarize(s.delay),
            "late_us": summarize(s.late),
            "gap_us": summarize(s.gap),
            "terminal_us": summarize(s.terminal),
            "upstream_late_us": summarize(s.upstream_late),
            "windows": {
                wname: {
                    "from_s": lo,
                    "to_s": hi,
                    "marker_chunks": w.markers,
                    "delay_us": summarize(w.delay),
                    "late_us": summarize(w.late),
                    "gap_us": summarize(w.gap),
                    "upstream_late_us": summarize(w.upstream_late),
                }
                for wname, (lo, hi, w) in s.windows.items()
            },
            "per_second_p99_delay_us": {
                str(k): pct(sorted(v), 0.99) for k, v in sorted(s.per_second.items())
            },
            "per_second_chunks": {str(k): len(v) for k, v in sorted(s.per_second.items())},
        }


def pct(ordered: list[int], q: float) -> float:
    if not ordered:
        return float("nan")
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def summarize(values: list[int]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    out: dict[str, Any] = {"n": len(ordered), "mean": sum(ordered) / len(ordered)}
    for q in QUANTILES:
        out[f"p{q * 100:g}"] = pct(ordered, q)
    out["max"] = float(ordered[-1])
    out["cdf"] = [pct(ordered, i / 100) for i in range(101)]
    return out


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    host, port = spec.get("host", "127.0.0.1"), int(spec["port"])
    timeout = float(spec.get("timeout", 60))
    groups = [Group(g, host, port, timeout) for g in spec["groups"]]
    t0 = _mono_us()
    wall = time.monotonic()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    await asyncio.gather(*(g.run(t0) for g in groups))
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "wall_s": time.monotonic() - wall,
        "client_cpu_s": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime),
        "event_loop": type(asyncio.get_running_loop()).__module__,
        "groups": {g.name: g.report() for g in groups},
    }


def main() -> None:
    spec = json.load(sys.stdin)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        import uvloop

        result = uvloop.run(run(spec))
    except ImportError:
        result = asyncio.run(run(spec))
    json.dump(result, sys.stdout)
    sys.stdout.flush()
    os._exit(0)  # skip the teardown of thousands of closed transports


if __name__ == "__main__":
    main()
