"""Bounded bodies and key-only operator pages (``app.web.guards``), driven as raw ASGI so that
a body can arrive in pieces, slowly, or never."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

import anyio
import pytest

from app.config import Settings
from app.web.access import Access
from app.web.guards import BodyGuard, KeyGate

pytestmark = pytest.mark.anyio

LIMIT = 1000


class _Route:
    """The app behind the guard: records the body it was given."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _call(
    app: Any,
    messages: Iterable[dict[str, Any]],
    headers: dict[str, str] | None = None,
    *,
    method: str = "POST",
    path: str = "/ai/chatbot/recommendation/free-text",
    then_wait: bool = False,
) -> tuple[int | None, dict[str, str], bytes, int]:
    """Status, headers and body of the answer, and how many messages the guard read."""
    queue = list(messages)
    read = 0

    async def receive() -> dict[str, Any]:
        nonlocal read
        if queue:
            read += 1
            return queue.pop(0)
        if then_wait:
            await anyio.sleep_forever()
        return {"type": "http.disconnect"}

    answer: dict[str, Any] = {"status": None, "headers": {}, "body": b""}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            answer["body"] += message.get("body", b"")

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("10.0.0.1", 1),
    }
    await app(scope, receive, send)
    return answer["status"], answer["headers"], answer["body"], read


def _guard(route: _Route, timeout: float = 5.0) -> BodyGuard:
    return BodyGuard(route, limit_for=lambda path: LIMIT, timeout=timeout)


async def test_a_declared_length_over_the_bound_is_refused_unread() -> None:
    route = _Route()
    chunk = {"type": "http.request", "body": b"x" * 100, "more_body": True}
    status, headers, body, read = await _call(
        _guard(route), [chunk] * 200, {"content-length": str(10 * 1024 * 1024)}
    )
    assert status == 413 and read == 0 and route.bodies == []
    assert headers["connection"] == "close"
    payload = json.loads(body)
    assert payload["status"] == 413 and payload["data"] == {"maxBytes": LIMIT}
    assert "바이트" in payload["message"]


async def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_bound() -> None:
    route = _Route()
    chunk = {"type": "http.request", "body": b"x" * 300, "more_body": True}
    status, _, _, read = await _call(_guard(route), [chunk] * 1000)
    assert status == 413 and read == 4, "the fourth piece crossed 1000 bytes; no more was read"
    assert route.bodies == []


async def test_a_body_that_never_completes_is_dropped_after_the_timeout() -> None:
    route = _Route()
    partial = {"type": "http.request", "body": b'{"message": "', "more_body": True}
    with anyio.fail_after(3):
        status, headers, body, _ = await _call(
            _guard(route, timeout=0.2), [partial], {"content-length": "1000"}, then_wait=True
        )
    assert status == 408 and headers["connection"] == "close"
    assert json.loads(body)["status"] == 408 and route.bodies == []


async def test_a_client_gone_mid_upload_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    route = _Route()
    partial = {"type": "http.request", "body": b"{", "more_body": True}
    with caplog.at_level(logging.INFO, logger="app.web.guards"):
        status, _, _, _ = await _call(_guard(route), [partial])  # then http.disconnect
    assert status is None and route.bodies == []
    [record] = caplog.records
    assert record.levelno == logging.INFO and record.exc_info is None
    assert "left during its upload" in record.getMessage()


async def test_a_good_body_reaches_the_route_whole() -> None:
    route = _Route()
    pieces = [
        {"type": "http.request", "body": b'{"a":', "more_body": True},
        {"type": "http.request", "body": b" 1}", "more_body": False},
    ]
    status, _, body, _ = await _call(_guard(route), pieces)
    assert (status, body, route.bodies) == (200, b"ok", [b'{"a": 1}'])
    get = await _call(_guard(route), [], method="GET")
    assert get[0] == 200, "a GET is not read here"


async def test_an_unreadable_length_is_400() -> None:
    status, _, _, read = await _call(_guard(_Route()), [], {"content-length": "12x"})
    assert status == 400 and read == 0


async def test_operator_pages_need_a_key_under_api_keys() -> None:
    access = Access(Settings(_env_file=None, api_keys="k"))  # type: ignore[call-arg]
    gate = KeyGate(_Route(), access=access, paths={"/metrics", "/openapi.json"})
    refused = await _call(gate, [], method="GET", path="/metrics")
    assert refused[0] == 401 and refused[1]["www-authenticate"] == "Bearer"
    assert json.loads(refused[2])["status"] == 401
    assert (await _call(gate, [], method="GET", path="/openapi.json"))[0] == 401
    keyed = await _call(gate, [], {"x-api-key": "k"}, method="GET", path="/metrics")
    assert keyed[0] == 200
    assert (await _call(gate, [], method="GET", path="/health"))[0] == 200
