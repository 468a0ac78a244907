"""What a stranger's requests cost the gateway (docs/security.md), measured on loopback:

    memory   RSS of the gateway process before and after rounds of 20 concurrent POSTs of
             10 MB (half to the chat, half to the feedback), each body sent whole
    drop     seconds until the gateway closes a request whose body never completes
             (Content-Length 1000 with 17 bytes sent; a chunked body without its end) and one
             whose headers never complete (capped at --drop-cap seconds: "open" past it)
    share    one client (127.0.0.2) opens --greedy slow streams at once (50 s answers from the
             fast scripted upstream); how many it holds, how many are refused; then another
             user (127.0.0.3) asks --samples times, one after the other: its time to the first
             event, against the same user on the idle gateway just before

The gateway runs as ``make run`` starts it (uvloop; the httptools protocol with the head's
bounds when this version has it, plain httptools otherwise), on its default limits except the
rate limits (off, as in every bench: all traffic is from loopback). Run it on two versions
(``git worktree``) to compare; writes bench/results/security.json.

    .venv/bin/python bench/security_bench.py [--rounds 3] [--greedy 260] [--samples 20]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

from app.llm.sse_decode import iter_frames

MB = 1024 * 1024
GUARD = "app.web.http_guard:GuardedHttpToolsProtocol"


def _http_flag() -> str:
    # The version under test is the tree the gateway starts from (harness.ROOT), not whatever
    # `app` this process imports.
    return GUARD if (harness.ROOT / "app" / "web" / "http_guard.py").exists() else "httptools"


def _rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / MB


def _post_whole(port: int, path: str, size: int) -> tuple[str, float]:
    """Send a POST of ``size`` bytes whole (as far as the server lets us); its status line."""
    started = time.monotonic()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {size}\r\n\r\n"
    ).encode()
    body = b'{"message": "' + b"x" * (size - 16) + b'"}  '
    status = "no answer"
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(60)
        try:
            sock.sendall(head + body)
        except OSError:
            pass  # the server answered and closed before the body was sent: the point
        try:
            answer = sock.recv(200)
            status = answer.split(b"\r\n", 1)[0].decode("latin-1") or "closed"
        except OSError as exc:
            status = type(exc).__name__
    return status, time.monotonic() - started


def memory(port: int, pid: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"rss_mb": [round(_rss_mb(pid), 1)], "statuses": {}, "seconds": []}
    for _ in range(rounds):
        results: list[tuple[str, float]] = []
        paths = [harness.FREE_TEXT, "/ai/feedback"] * 10

        def one(path: str, into: list[tuple[str, float]]) -> None:
            into.append(_post_whole(port, path, 10 * MB))

        threads = [threading.Thread(target=one, args=(path, results)) for path in paths]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        time.sleep(1)
        out["rss_mb"].append(round(_rss_mb(pid), 1))
        for status, seconds in results:
            out["statuses"][status] = out["statuses"].get(status, 0) + 1
            out["seconds"].append(seconds)
    out["seconds_p50"] = round(statistics.median(out.pop("seconds")), 3)
    return out


def _open_for(port: int, data: bytes, cap: float) -> tuple[float | None, str]:
    """Seconds until the server closes a connection that sent ``data`` (None: still open)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(data)
        sock.settimeout(cap)
        said = b""
        try:
            while chunk := sock.recv(4096):
                said += chunk
        except TimeoutError:
            return None, said.split(b"\r\n", 1)[0].decode("latin-1")
        except OSError:
            pass
    return round(time.monotonic() - started, 2), said.split(b"\r\n", 1)[0].decode("latin-1")


def drop(port: int, cap: float) -> dict[str, Any]:
    head = "POST /ai/feedback HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    cases = {
        "body_content_length": (head + 'content-length: 1000\r\n\r\n{"memberId": 7, ').encode(),
        "body_chunked": (head + 'transfer-encoding: chunked\r\n\r\n5\r\n{"mem\r\n').encode(),
        "headers": b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: 1\r\n",
    }
    out: dict[str, Any] = {}

    def one(name: str, data: bytes) -> None:
        seconds, status = _open_for(port, data, cap)
        out[name] = {"closed_after_s": seconds, "answer": status or None}

    threads = [threading.Thread(target=one, args=item) for item in cases.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


async def _first_event(http: httpx.AsyncClient, session: str) -> tuple[str, float]:
    started = time.monotonic()
    params = {**harness.BASE_INFO_QUERY, "sessionId": session}
    async with http.stream("GET", harness.BASE_INFO, params=params) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge":
                return "challenge", time.monotonic() - started
            if frame.event is not None:
                return f"{frame.event} {frame.payload['status']}", time.monotonic() - started
    return "none", time.monotonic() - started


async def share(url: str, greedy: int, samples: int) -> dict[str, Any]:
    def client(address: str) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=greedy + 10)
        transport = httpx.AsyncHTTPTransport(local_address=address, limits=limits)
        return httpx.AsyncClient(base_url=url, transport=transport, timeout=120)

    async with client("127.0.0.2") as hog, client("127.0.0.3") as user:
        idle = [await _first_event(user, f"idle-{n}") for n in range(samples)]
        holding: list[str] = []
        stop = asyncio.Event()

        async def hold(n: int) -> None:
            params = {**harness.BASE_INFO_QUERY, "sessionId": f"hog-{n}"}
            async with hog.stream("GET", harness.BASE_INFO, params=params) as response:
                async for frame in iter_frames(response.aiter_lines()):
                    if frame.event is None:
                        continue
                    holding.append(frame.event if frame.event == "challenge" else "refused")
                    if frame.event != "challenge":
                        return
                    await stop.wait()
                    return

        tasks = [asyncio.create_task(hold(n)) for n in range(greedy)]
        deadline = time.monotonic() + 60
        while len(holding) < greedy and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        busy = [await _first_event(user, f"busy-{n}") for n in range(samples)]
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def summary(runs: list[tuple[str, float]]) -> dict[str, Any]:
        served = [seconds * 1000 for outcome, seconds in runs if outcome == "challenge"]
        outcomes: dict[str, int] = {}
        for outcome, _ in runs:
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        return {
            "outcomes": outcomes,
            "first_event_ms_p50": round(statistics.median(served), 1) if served else None,
            "first_event_ms_max": round(max(served), 1) if served else None,
        }

    return {
        "greedy_asked": greedy,
        "greedy_held": holding.count("challenge"),
        "greedy_refused": holding.count("refused"),
        "other_user_idle": summary(idle),
        "other_user_while_held": summary(busy),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--greedy", type=int, default=260)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--drop-cap", type=float, default=70.0)
    parser.add_argument("--name", default="security")
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": harness.machine(), "http": _http_flag()}
    with (
        harness.upstream(interval=0.5, chunks=100) as up,
        harness.gateway(up.url + "/v1", loop="uvloop", http=_http_flag()) as gw,
    ):
        pid = gw.popen.pid
        print("memory ...", flush=True)
        result["memory"] = memory(gw.port, pid, args.rounds)
        print(result["memory"], flush=True)
        print("drop ...", flush=True)
        result["drop"] = drop(gw.port, args.drop_cap)
        print(result["drop"], flush=True)
        print("share ...", flush=True)
        result["share"] = asyncio.run(share(gw.url, args.greedy, args.samples))
        print(result["share"], flush=True)
    print(harness.write_result(args.name, result))


if __name__ == "__main__":
    main()
