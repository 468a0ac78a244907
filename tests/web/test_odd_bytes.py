"""Any bytes, on every route: a 2xx/3xx/4xx, never a 5xx, and never an ERROR or a traceback in
the log (SPEC "Access and limits"; issue 31: one non-ASCII byte in the page cookie was a 500 on
every route and two tracebacks per request, a log flood for any stranger).

Odd cookies, header values, query strings, paths and bodies, sent raw (bytes as they are, not as
a client library would escape them) to every route of the app, on two gateways started as
scripts/run.sh starts them (uvloop, the guarded httptools protocol, ``--no-proxy-headers``,
uvicorn's default log level with its access lines): one under keys (page tokens on, a trusted
proxy, CORS origins) and one without."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.config import Settings
from app.main import create_app
from tests.support.gateway import GatewayProcess
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

pytestmark = pytest.mark.slow

KEY = "odd-key"
BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
JOB = "/ai/feedback/" + "0" * 32
RESULTS = "/ai/feedback/results/stream"
#: Every route of the app as a request target, with the method it answers.
ROUTES: list[tuple[str, str]] = [
    ("GET", "/"),
    ("GET", "/static/chat.js"),
    ("GET", "/health"),
    ("GET", "/ready"),
    ("GET", "/metrics"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
    ("GET", "/openapi.json"),
    (
        "GET",
        BASE + "?location=%EB%8F%84%EC%8B%9C&workType=%EC%82%AC%EB%AC%B4%EC%A7%81&category=VEGAN",
    ),
    ("GET", FREE + "?message=%EB%B9%84%EA%B1%B4"),
    ("POST", BASE),
    ("POST", FREE),
    ("POST", "/ai/feedback"),
    ("GET", JOB),
    ("GET", RESULTS),
]
TOKEN_SHAPE = b"0123456789abcdef" * 2 + b".9999999999."
COOKIES = [
    TOKEN_SHAPE + b"\xff\xfe",  # the probe's
    TOKEN_SHAPE + b"0" * 63 + b"\xe9",
    b"\xc3\xa9",
    b"\x80" * 200,
    b"A" * 4000,
    b'"\xff"',
    b"a.b.c.d.e",
    b"..",
    b"%ff%00",
]
HEADERS: list[tuple[bytes, bytes]] = [
    (b"cookie", b"\xff=\xff; eco_page"),
    (b"cookie", b";;==;eco_page=;eco_page=x"),
    (b"authorization", b"Bearer \xff\xfe"),
    (b"authorization", b"Bearer " + b"\xe9" * 300),
    (b"authorization", b"\xff"),
    (b"x-api-key", b"\xe9\x80"),
    (b"x-api-key", f"{KEY}\xe9".encode("latin-1")),
    (b"idempotency-key", b"\xff"),
    (b"x-request-id", b"\xff\xfe"),
    (b"last-event-id", b"\xff.\xff"),
    (b"last-event-id", b"0" * 32 + b".\xff"),
    (b"last-event-id", b"9" * 400),
    (b"origin", b"\xff"),
    (b"origin", b"http://[::1"),
    (b"sec-fetch-site", b"\xff"),
    (b"content-type", b"\xff"),
    (b"content-type", b"application/json; charset=\xff"),
    (b"traceparent", b"\xff"),
    (b"traceparent", b"00-" + b"f" * 32 + b"-" + b"f" * 16 + b"-01"),
    (b"x-forwarded-for", b"\xff, ::1, 999.1.1.1"),
    (b"forwarded", b"for=\xff"),
    (b"accept", b"\xff"),
    (b"accept-encoding", b"\xff"),
    (b"if-none-match", b"\xff"),
    (b"if-modified-since", b"\xff"),
    (b"if-range", b"\xff"),
    (b"range", b"bytes=\xff"),
    (b"range", b"bytes=999999999999-1"),
    (b"content-length", b"\xff"),
    (b"transfer-encoding", b"\xff"),
    (b"host", b"\xff"),
    (b"host", b"[::1"),
]
QUERIES = [
    b"%ff%fe=%ff",
    b"message=%ED%A0%80&sessionId=%ff",  # an encoded lone surrogate
    b"sessionId=%00&lastEventId=%ff",
    b"a=%&b=%%&c=%zz",
    b"&&==&&",
    b"message=" + b"%EB%B9%84" * 2000,
    b"location=%ff&workType=%00&category=%ff",
    b"\xff=\xff",  # raw bytes: the parser's 400
]
PATHS = ["/ai/feedback/%ff%fe", "/static/%ff", "/static/..%2fchat.js", "/%ff", "/ai/%00"]
BODIES = [b"\xff\xfe", b'{"memberId": "\xff"}', b'{"message": "\xed\xa0\x80"}', b"\x00" * 10]


def _request(
    method: str,
    target: str | bytes,
    headers: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
    body: bytes | None = None,
) -> bytes:
    target = target.encode() if isinstance(target, str) else target
    names = {name for name, _ in headers}
    lines = [method.encode() + b" " + target + b" HTTP/1.1"]
    if b"host" not in names:
        lines.append(b"host: 127.0.0.1")
    lines.append(b"connection: close")
    if method == "POST" and body is None and b"content-length" not in names:
        body = b'{"message": "x"}'
    if body is not None:
        if b"content-type" not in names:
            lines.append(b"content-type: application/json")
        if b"content-length" not in names and b"transfer-encoding" not in names:
            lines.append(b"content-length: " + str(len(body)).encode())
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def _status(port: int, raw: bytes) -> int:
    """The answer's status; an SSE stream is read to its terminal event, the endless results
    stream only to its head."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(raw)
        answer = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            answer += chunk
            head, _, rest = answer.partition(b"\r\n\r\n")
            if b"text/event-stream" in head and RESULTS.encode() in raw.split(b"\r\n", 1)[0]:
                break
            if b"event: close" in rest or b"event: error" in rest:
                break
    line = answer.split(b"\r\n", 1)[0].split(b" ")
    assert len(line) >= 2 and line[1].isdigit(), (raw[:200], answer[:200])
    return int(line[1])


def _cases(key: list[tuple[bytes, bytes]]) -> Iterator[bytes]:
    """Every odd input on every route; ``key``: headers sent with each (a valid key, to get
    past the 401 into the routes themselves)."""
    for method, target in ROUTES:
        for cookie in COOKIES:
            yield _request(method, target, [*key, (b"cookie", b"eco_page=" + cookie)])
        for header in HEADERS:
            yield _request(method, target, [*key, header])
        path = target.partition("?")[0].encode()
        for query in QUERIES:
            yield _request(method, path + b"?" + query, key)
        if method == "POST":
            for body in BODIES:
                yield _request(method, target, key, body=body)
    for path in PATHS:
        yield _request("GET", path, key)
    yield _request(
        "OPTIONS", BASE, [(b"origin", b"\xff"), (b"access-control-request-method", b"\xff")]
    )
    yield _request("HEAD", "/", [(b"cookie", b"eco_page=" + COOKIES[0])])


def _gateway(upstream: ScriptedUpstreamThread, store: Path, **env: str) -> GatewayProcess:
    full = {
        "LLM_BASE_URL": upstream.base_url,
        "QDRANT_PATH": str(store),
        "LOG_FORMAT": "json",
        "REQUEST_BODY_TIMEOUT_SECONDS": "2",
        **env,
    }
    return GatewayProcess(full, startup_timeout=90, log_level=None)  # as scripts/run.sh: info


@pytest.fixture(scope="module")
def gateways(
    upstream: ScriptedUpstreamThread,
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, GatewayProcess]]:
    """One gateway under keys (page tokens on, a trusted proxy, CORS origins), one without."""
    keyed = {
        "API_KEYS": KEY,
        "RELAY_API_KEYS": "relay-" + KEY,
        "TRUSTED_PROXIES": "127.0.0.1",
        "CORS_ALLOW_ORIGINS": "http://page.example",
    }
    with (
        _gateway(upstream, _store(store_template, tmp_path_factory), **keyed) as under_keys,
        _gateway(upstream, _store(store_template, tmp_path_factory)) as without,
    ):
        yield {"keys": under_keys, "no keys": without}


def _store(template: Path, factory: pytest.TempPathFactory) -> Path:
    return store_copy(template, factory.mktemp("store") / "q")


def _routes_covered() -> None:
    """The routes above are every route of the app (a new one must join them)."""
    app = create_app(Settings(_env_file=None, llm_model="m"))  # type: ignore[call-arg]
    paths = set(app.openapi()["paths"]) | {"/", "/static/{name}", RESULTS}
    paths |= {"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
    named = {target.partition("?")[0] for _, target in ROUTES}
    named = {"/static/{name}" if p.startswith("/static/") else p for p in named}
    named = {"/ai/feedback/{job_id}" if p == JOB else p for p in named}
    assert named == paths


def test_odd_bytes_anywhere_are_never_a_5xx_nor_an_error_in_the_log(
    gateways: dict[str, GatewayProcess], scripted: ScriptedUpstreamThread
) -> None:
    _routes_covered()
    for name, gateway in gateways.items():
        cases = list(_cases([]))
        if name == "keys":  # and past the 401, into the routes themselves
            cases += _cases([(b"x-api-key", KEY.encode())])
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda raw, gw=gateway: _status(gw.port, raw), cases))
        failures = [
            (status, raw[:160])
            for status, raw in zip(statuses, cases, strict=True)
            if status >= 500
        ]
        assert not failures, (name, failures[:10])
        assert gateway.alive(), name
        log = gateway.log_text()
        records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        errors = [r for r in records if r["level"] in ("ERROR", "CRITICAL") or "exc" in r]
        assert not errors, (name, errors[:3])
        assert "Traceback" not in log, name
