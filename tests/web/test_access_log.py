"""Access lines keep what users type out of the log (issue 31, item 8): uvicorn's access log
held the whole query, a free-text GET's ``message`` and a key a client wrongly put there, while
traces redacted it. Now the line holds the path and the traces' rule (``redact_query``), unless
ACCESS_LOG_QUERY=full; checked on the gateway started as scripts/run.sh starts it (uvicorn's
default log level: access lines on)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from app.logs import AccessQueryFilter
from app.tracing import redact_query
from tests.support.gateway import GatewayProcess
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

FREE = "/ai/chatbot/recommendation/free-text"
PHONE = "010-1234-5678"
SECRET_TEXT = f"내 전화번호는 {PHONE}"
LEAKED_KEY = "sk-leaked-key-123"


def test_redact_query_keeps_the_four_identifying_values_only() -> None:
    query = (
        f"sessionId=s-1&location=%EB%8F%84%EC%8B%9C&workType=x&category=VEGAN"
        f"&message={quote(SECRET_TEXT)}&lastEventId=abc.1&api_key={LEAKED_KEY}&{LEAKED_KEY}"
    )
    redacted = redact_query(query)
    assert "sessionId=s-1" in redacted and "category=VEGAN" in redacted
    assert "location=%EB%8F%84%EC%8B%9C" in redacted and "workType=x" in redacted
    assert "message=REDACTED" in redacted and "lastEventId=REDACTED" in redacted
    assert LEAKED_KEY not in redacted and "010" not in redacted and "api_key" not in redacted
    for odd in ("%", "%ff%fe=%ff", "&&==&", "a=%ED%A0%80", "\x00", "é=é"):
        redact_query(odd)  # never raises


def _uvicorn_record(target: str) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", target, "1.1", 200),
        None,
    )


def test_the_filter_rewrites_uvicorns_line_and_never_raises() -> None:
    record = _uvicorn_record(f"{FREE}?sessionId=s1&message={quote(SECRET_TEXT)}")
    assert AccessQueryFilter(redact_query).filter(record)
    line = record.getMessage()
    assert f"{FREE}?sessionId=s1&message=REDACTED" in line and "010" not in line

    def broken(query: str) -> str:
        raise ValueError(query)

    record = _uvicorn_record("/x?message=secret")
    assert AccessQueryFilter(broken).filter(record)
    assert "secret" not in record.getMessage() and "/x?REDACTED" in record.getMessage()
    plain = _uvicorn_record("/health")
    AccessQueryFilter(redact_query).filter(plain)
    assert '"GET /health HTTP/1.1" 200' in plain.getMessage()


class _Stores:
    """A store copy per gateway: a store folder serves one process at a time."""

    def __init__(self, template: Path, factory: pytest.TempPathFactory) -> None:
        self._template, self._factory = template, factory

    def new(self) -> Path:
        return store_copy(self._template, self._factory.mktemp("store") / "q")


@pytest.fixture(scope="module")
def stores(store_template: Path, tmp_path_factory: pytest.TempPathFactory) -> _Stores:
    return _Stores(store_template, tmp_path_factory)


def _run_sh_gateway(
    upstream: ScriptedUpstreamThread, stores: _Stores, **env: str
) -> GatewayProcess:
    full = {"LLM_BASE_URL": upstream.base_url, "QDRANT_PATH": str(stores.new()), **env}
    return GatewayProcess(full, startup_timeout=90, log_level=None)  # uvicorn's default: info


def _access_lines(gateway: GatewayProcess, marker: str) -> list[str]:
    deadline = time.monotonic() + 5
    while True:
        lines = [line for line in gateway.log_text().splitlines() if marker in line]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def _ask(gateway: GatewayProcess, session: str) -> None:
    params = {"sessionId": session, "message": SECRET_TEXT, "api_key": LEAKED_KEY}
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        with http.stream("GET", FREE, params=params) as response:
            response.read()


def test_access_lines_carry_the_path_and_the_session_never_the_message(
    upstream: ScriptedUpstreamThread, stores: _Stores, scripted: ScriptedUpstreamThread
) -> None:
    for log_format in ("json", "text"):  # our JSON lines, and uvicorn's own access formatter
        with _run_sh_gateway(upstream, stores, LOG_FORMAT=log_format) as gateway:
            _ask(gateway, "access-log-1")
            [line] = _access_lines(gateway, "access-log-1")
            assert f"GET {FREE}?sessionId=access-log-1&message=REDACTED" in line, line
            log = gateway.log_text()
            assert PHONE not in log and LEAKED_KEY not in log, line
    # A setting turns the whole query on, for debugging.
    with _run_sh_gateway(upstream, stores, ACCESS_LOG_QUERY="full") as gateway:
        _ask(gateway, "access-log-full")
        [line] = _access_lines(gateway, "access-log-full")
        assert PHONE in line and LEAKED_KEY in line, line
