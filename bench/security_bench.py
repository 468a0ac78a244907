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
    probe    (``probe``) issue 31's eight holes, replayed as its probe sent them, against the
             gateway of ``--tree`` started as that tree's scripts/run.sh starts it (a gateway
             with keys, a relay key and KEY_TOKEN_BUDGET=300 for holes 1 and 3, one without for
             the rest); a table case -> held/FAILED, and ``probe.<label>`` in
             bench/results/security.json (the rest of the file kept)

The gateway runs as ``make run`` starts it (uvloop; the httptools protocol with the head's
bounds when this version has it, plain httptools otherwise), on its default limits except the
rate limits (off, as in every bench: all traffic is from loopback). Run it on two versions
(``git worktree``) to compare; writes bench/results/security.json.

    .venv/bin/python bench/security_bench.py [--rounds 3] [--greedy 260] [--samples 20]
    .venv/bin/python bench/security_bench.py probe [--tree ../before --label before]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

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


# --------------------------------------------------------------------------- probe (issue 31)

PROBE_KEY = "probe-key"
PROBE_RELAY = "probe:probe-relay-key"  # NAME:KEY: its tokens are counted as client "probe"
PROBE_BUDGET = 300
PROBE_TURNS = 12
EVIL = "http://evil.example"
PROBE_COOKIE = b"eco_page=" + b"0123456789abcdef" * 2 + b".9999999999.\xff\xfe"
FEEDBACK = {
    "memberId": 7,
    "personalChallenges": [{"id": 1, "title": "텀블러 사용하기", "isSuccess": True}],
}
HOLES = {
    1: "a page cookie with one non-ASCII byte: 500 and tracebacks on every route",
    2: "another site's page makes the gateway act without keys (text/plain feedback: a job)",
    3: "turns sent at once overshoot a key's token budget",
    4: "a request head over 32 KiB in one write is served",
    5: '"memberId": true is member 1 (also "id": true, "isSuccess": 1)',
    6: "an unusable Idempotency-Key is silently ignored",
    7: "the chat page sends no protective headers",
    8: "access log lines record what users type",
}


@dataclass
class Case:
    hole: int
    name: str
    held: bool
    detail: str


class _LogWatch:
    """What the gateway logged since the last look."""

    def __init__(self, gw: harness.Proc) -> None:
        self._gw = gw
        self._seen = len(gw.log_text())

    def new(self) -> str:
        text = self._gw.log_text()
        fresh, self._seen = text[self._seen :], len(text)
        return fresh


def _errors(log: str) -> int:
    """Tracebacks and ERROR records in ``log`` (JSON lines or text)."""
    return log.count("Traceback") + sum(
        1 for line in log.splitlines() if '"level": "ERROR"' in line or " ERROR " in line
    )


def _raw_status(port: int, data: bytes, timeout: float = 20) -> tuple[int | None, bytes]:
    """``data`` sent in one write; the answer's status and whatever came back (an SSE stream
    to its terminal event)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(timeout)
        try:
            sock.sendall(data)
        except OSError:
            pass  # answered and closed before all was sent
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
                if b"event: close" in answer or b"event: error" in answer:
                    break
                if b"text/event-stream" not in answer and b"\r\n\r\n" in answer:
                    head, _, body = answer.partition(b"\r\n\r\n")
                    length = re.search(rb"content-length: *(\d+)", head, re.I)
                    if length and len(body) >= int(length.group(1)):
                        break
        except OSError:
            pass
    parts = answer.split(b"\r\n", 1)[0].split(b" ")
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return status, answer


def _sse_status(answer: bytes) -> str:
    """``"<event> <status>"`` of a stream's terminal event, else the HTTP status line."""
    for event in ("close", "error"):
        marker = f"event: {event}".encode()
        if marker in answer:
            data = answer.split(marker, 1)[1].split(b"data: ", 1)[1].split(b"\n", 1)[0]
            return f"{event} {json.loads(data)['status']}"
    return answer.split(b"\r\n", 1)[0].decode("latin-1")


def _get(path: str, *headers: bytes) -> bytes:
    return (
        b"\r\n".join(
            [f"GET {path} HTTP/1.1".encode(), b"host: 127.0.0.1", b"connection: close", *headers]
        )
        + b"\r\n\r\n"
    )


def _post(path: str, body: bytes, *headers: bytes) -> bytes:
    lines = [f"POST {path} HTTP/1.1".encode(), b"host: 127.0.0.1", b"connection: close"]
    lines += [*headers, f"content-length: {len(body)}".encode()]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


JSON_TYPE = b"content-type: application/json"


def _probe_keyed(gw: harness.Proc, up: harness.Proc) -> list[Case]:
    """Holes 1 and 3, on a gateway with API_KEYS, a relay key and KEY_TOKEN_BUDGET."""
    cases: list[Case] = []
    log = _LogWatch(gw)
    cookie = b"cookie: " + PROBE_COOKIE
    query = "?" + "&".join(f"{k}={quote(v)}" for k, v in harness.BASE_INFO_QUERY.items())
    for name, request, want in (
        ("GET base-info (SSE)", _get(harness.BASE_INFO + query, cookie), "error 401"),
        ("POST free-text", _post(harness.FREE_TEXT, b'{"message": "hi"}', JSON_TYPE, cookie), 401),
        ("GET /metrics", _get("/metrics", cookie), 401),
        ("GET /ai/feedback/{id}", _get("/ai/feedback/" + "0" * 32, cookie), 401),
        ("GET /", _get("/", cookie), 200),
    ):
        status, answer = _raw_status(gw.port, request)
        seen = _sse_status(answer) if isinstance(want, str) else status
        time.sleep(0.2)
        errors = _errors(log.new())
        held = seen == want and errors == 0
        cases.append(
            Case(1, f"non-ASCII page cookie: {name}", held, f"{seen}, {errors} tracebacks/errors")
        )

    relay = PROBE_RELAY.partition(":")[2]

    async def turns() -> list[int]:
        async with httpx.AsyncClient(base_url=gw.url, timeout=120) as http:
            answers = await asyncio.gather(
                *(
                    http.post(
                        harness.FREE_TEXT,
                        json={"sessionId": f"budget-{n}", "message": "비건 챌린지 알려줘"},
                        headers={"authorization": f"Bearer {relay}"},
                    )
                    for n in range(PROBE_TURNS)
                )
            )
        return [answer.status_code for answer in answers]

    statuses = asyncio.run(turns())
    metrics = httpx.get(gw.url + "/metrics", headers={"x-api-key": PROBE_KEY}, timeout=10).text
    counted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("gateway_llm_tokens_total{") and 'client="probe"' in line
    )
    admitted = statuses.count(200)
    one_turn = counted / admitted if admitted else 0.0
    held = admitted >= 1 and counted <= PROBE_BUDGET + one_turn and max(statuses) < 500
    cases.append(
        Case(
            3,
            f"KEY_TOKEN_BUDGET={PROBE_BUDGET}, {PROBE_TURNS} POST turns at once, one relay key",
            held,
            f"{admitted} admitted ({statuses.count(429)} × 429), {counted:.0f} tokens counted "
            f"(bound: budget + one turn ≈ {PROBE_BUDGET + one_turn:.0f})",
        )
    )
    return cases


def _feedback(port: int, body: object, *headers: bytes) -> tuple[int | None, dict[str, Any]]:
    status, answer = _raw_status(port, _post("/ai/feedback", json.dumps(body).encode(), *headers))
    payload = answer.partition(b"\r\n\r\n")[2]
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, {}


def _probe_open(gw: harness.Proc, up: harness.Proc) -> list[Case]:
    """Holes 2 and 4-8, on a gateway without keys."""
    cases: list[Case] = []
    evil = (b"origin: " + EVIL.encode(), b"sec-fetch-site: cross-site")
    plain = b"content-type: text/plain"
    for n, (name, path, headers) in enumerate(
        (
            ("POST /ai/feedback text/plain from Origin evil", "/ai/feedback", (plain, evil[0])),
            ("POST /ai/feedback JSON, cross-site", "/ai/feedback", (JSON_TYPE, *evil)),
            ("POST free-text text/plain from Origin evil", harness.FREE_TEXT, (plain, evil[0])),
            ("EventSource from evil.example", "", (*evil, b"accept: text/event-stream")),
        )
    ):
        # A marker the upstream counts requests by: what this very case made the gateway ask.
        marker = f"probe_two_{'abcd'[n]}"
        text = f"비건 챌린지 [[bench:{marker}]]"
        if path == "/ai/feedback":
            challenge = {"id": 1, "title": text, "isSuccess": True}
            body = {**FEEDBACK, "personalChallenges": [challenge]}
            request = _post(path, json.dumps(body).encode(), *headers)
        elif path:
            request = _post(path, json.dumps({"message": text}).encode(), *headers)
        else:
            request = _get(harness.free_text_path(text), *headers)
        status, answer = _raw_status(gw.port, request)
        time.sleep(1.0)  # a job would be generating by now
        acted = int(harness.upstream_stats(up)["by_scenario"].get(marker, 0))
        seen = _sse_status(answer) if b"text/event-stream" in answer else status
        refused = (status is not None and 400 <= status < 500) or seen == "error 403"
        cases.append(Case(2, name, acted == 0 and refused, f"{seen}, {acted} upstream requests"))
    status, _ = _feedback(gw.port, FEEDBACK, JSON_TYPE)
    cases.append(
        Case(
            2, "POST /ai/feedback JSON without Origin (curl, the relay)", status == 202, str(status)
        )
    )

    for size in (40 * 1024, 100 * 1024):
        request = _get("/health", b"x-big: " + b"a" * size)  # one sendall: one write
        status, _ = _raw_status(gw.port, request)
        cases.append(
            Case(4, f"a {size // 1024} KB header in one write", status == 431, str(status))
        )

    for name, change, field in (
        ('"memberId": true', {"memberId": True}, "memberId"),
        (
            '"id": true',
            {"personalChallenges": [{"id": True, "title": "t", "isSuccess": True}]},
            "personalChallenges[0].id",
        ),
        (
            '"isSuccess": 1',
            {"personalChallenges": [{"id": 1, "title": "t", "isSuccess": 1}]},
            "personalChallenges[0].isSuccess",
        ),
    ):
        status, payload = _feedback(gw.port, {**FEEDBACK, **change}, JSON_TYPE)
        fields = (payload.get("data") or {}).get("invalidFields")
        cases.append(Case(5, name, status == 422 and fields == [field], f"{status} {fields}"))

    for name, key in (
        ("300 characters", b"k" * 300),
        ("a space", b"weekly 2026-w20"),
        ("non-ASCII", "주간-2026".encode()),
    ):
        header = b"idempotency-key: " + key
        status, payload = _feedback(gw.port, FEEDBACK, JSON_TYPE, header)
        fields = (payload.get("data") or {}).get("invalidFields")
        again, _ = _feedback(gw.port, FEEDBACK, JSON_TYPE, header)
        held = status == again == 422 and fields == ["Idempotency-Key"]
        cases.append(Case(6, f"Idempotency-Key: {name}", held, f"{status}, {again} {fields}"))

    headers = httpx.get(gw.url + "/", timeout=10).headers
    csp = headers.get("content-security-policy", "")
    framing = "x-frame-options" in headers or "frame-ancestors" in csp
    nosniff = headers.get("x-content-type-options", "").lower() == "nosniff"
    cases.append(
        Case(
            7,
            "GET /: frame protection, nosniff, a CSP",
            framing and nosniff and bool(csp),
            f"frame {framing}, nosniff {nosniff}, CSP {bool(csp)}",
        )
    )

    log = _LogWatch(gw)
    secret, leaked = "probe-secret-8", "probe-key-in-query"
    path = harness.free_text_path(secret, sessionId="probe-8", api_key=leaked)
    _raw_status(gw.port, _get(path))
    time.sleep(0.5)
    text = log.new()
    lines = [line for line in text.splitlines() if "probe-8" in line]
    held = bool(lines) and secret not in text and leaked not in text
    detail = f"{len(lines)} access line(s); message {'in' if secret in text else 'not in'} the log"
    cases.append(Case(8, "GET free-text?message=...&api_key=...", held, detail))
    return cases


def probe(tree: Path, label: str) -> dict[str, Any]:
    """The probe's cases for holes 1-8 against the gateway of ``tree``, started as its
    scripts/run.sh starts it; a table on stdout, the result returned."""
    cases: list[Case] = []
    keyed = {
        "API_KEYS": PROBE_KEY,
        "RELAY_API_KEYS": PROBE_RELAY,
        "KEY_TOKEN_BUDGET": str(PROBE_BUDGET),
        "LOG_FORMAT": "json",
    }
    with harness.upstream(interval=0.05, chunks=40) as up:
        with harness.run_sh_gateway(up.url + "/v1", env=keyed, tree=tree) as gw:
            cases += _probe_keyed(gw, up)
        with harness.run_sh_gateway(up.url + "/v1", env={"LOG_FORMAT": "json"}, tree=tree) as gw:
            cases += _probe_open(gw, up)
            command = gw.extra["cmd"][2:]
    holes = {
        str(hole): {
            "title": title,
            "held": all(case.held for case in cases if case.hole == hole),
        }
        for hole, title in HOLES.items()
    }
    width = max(len(case.name) for case in cases)
    print(f"\nprobe: {label} ({tree})\n")
    print(f"{'hole':<5} {'case':<{width}}  {'':<6}  detail")
    for case in sorted(cases, key=lambda c: c.hole):
        verdict = "held" if case.held else "FAILED"
        print(f"{case.hole:<5} {case.name:<{width}}  {verdict:<6}  {case.detail}")
    held = sum(1 for hole in holes.values() if hole["held"])
    print(f"\n{held} of {len(holes)} holes held")
    return {
        "label": label,
        "tree": str(tree),
        "machine": harness.machine(),
        "command": command,
        "holes": holes,
        "held": held,
        "cases": [asdict(case) for case in cases],
    }


def _merge(name: str, key: str, value: dict[str, Any]) -> Path:
    """``value`` under ``key`` of results/<name>.json, the rest of that file kept."""
    path = harness.RESULTS / f"{name}.json"
    result = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    result.setdefault(key, {}).update(value)
    return harness.write_result(name, result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "mode",
        nargs="?",
        choices=["costs", "probe"],
        default="costs",
        help="costs: memory, drop, share (the default); probe: issue 31's eight holes",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--greedy", type=int, default=260)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--drop-cap", type=float, default=70.0)
    parser.add_argument("--name", default="security")
    parser.add_argument(
        "--tree", type=Path, default=harness.ROOT, help="probe: the checkout whose gateway runs"
    )
    parser.add_argument("--label", default="after", help="probe: its key under results 'probe'")
    args = parser.parse_args()
    if args.mode == "probe":
        print(_merge(args.name, "probe", {args.label: probe(args.tree.resolve(), args.label)}))
        return
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
    kept = harness.RESULTS / f"{args.name}.json"
    if kept.exists():  # a probe's results in the same file stay
        probed = json.loads(kept.read_text(encoding="utf-8")).get("probe")
        if probed is not None:
            result["probe"] = probed
    print(harness.write_result(args.name, result))


if __name__ == "__main__":
    main()
