"""A browser page of another site (issue 31, item 2): what it can send without a preflight
(a GET, an EventSource, a ``text/plain`` or form POST, a body of no declared type) must not make
the gateway act, with or without keys. Two rules, one for each door:

- ``JsonOnly`` (``app.web.guards``): a POST to a route that reads JSON must declare a JSON body,
  or it is 415, unread. The probe's ``POST /ai/feedback`` as ``text/plain`` from
  ``Origin: http://evil.example`` was accepted (202, a job, a delivery); the chat POSTs already
  refused it, as FastAPI's 400 for an unparsed body.
- ``Access.cross_site`` (``app.web.access``): a browser's request for a page of another origin
  (``Sec-Fetch-Site``, else ``Origin`` against ``Host``) without a key is 403 on every route that
  acts: the chat GETs (an SSE ``error`` event), the chat POSTs, feedback. A request without
  those headers (curl, the relay) is no browser's and goes on; CORS_ALLOW_ORIGINS are trusted.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from app.config import Settings
from app.domain.errors import Forbidden, Refused
from app.main import create_app
from app.web.access import Access
from app.web.admission import Admission
from app.web.guards import JsonOnly, is_json
from app.web.limits import Limits
from tests.support.gateway import GatewayProcess
from tests.support.sse import assert_well_formed, read_stream
from tests.upstream.scripted_openai import ScriptedUpstreamThread

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
PARAMS = {"location": "도시", "workType": "사무직", "category": "VEGAN"}
EVIL = "http://evil.example"


def _request(headers: dict[str, str], host: str = "127.0.0.1:8000") -> Request:
    raw = [(b"host", host.encode())] + [(k.encode(), v.encode()) for k, v in headers.items()]
    return Request(
        {
            "type": "http",
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
            "headers": raw,
            "scheme": "http",
        }
    )


def _access(**overrides: object) -> Access:
    return Access(Settings(_env_file=None, **overrides))  # type: ignore[call-arg, arg-type]


# -- who is a page of another site -------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "cross"),
    [
        ({}, False),  # curl, the relay
        ({"sec-fetch-site": "same-origin", "origin": "http://127.0.0.1:8000"}, False),
        ({"sec-fetch-site": "none"}, False),  # typed in the address bar
        ({"sec-fetch-site": "cross-site"}, True),
        ({"sec-fetch-site": "cross-site", "origin": EVIL}, True),
        ({"sec-fetch-site": "same-site", "origin": "http://other.127.0.0.1:8000"}, True),
        ({"sec-fetch-site": "\xff"}, True),  # garbled: not the page's own
        ({"origin": EVIL}, True),  # an older browser: Origin against Host
        ({"origin": "null"}, True),  # a sandboxed frame, a file
        ({"origin": "http://127.0.0.1:8000"}, False),
        ({"origin": "HTTP://127.0.0.1:8000/"}, False),
        ({"origin": "http://127.0.0.1:9999"}, True),
        ({"origin": "http://[::1"}, True),  # unreadable
        ({"referer": EVIL + "/"}, False),  # no Origin, no Sec-Fetch-Site: not a browser's
    ],
)
def test_a_page_of_another_site_is_told_by_sec_fetch_site_else_origin(
    headers: dict[str, str], cross: bool
) -> None:
    assert _access().cross_site(_request(headers)) is cross


def test_cors_allow_origins_are_trusted_and_only_they() -> None:
    access = _access(cors_allow_origins="https://page.example, http://other.example/")
    for origin in ("https://page.example", "http://other.example", "HTTPS://PAGE.EXAMPLE"):
        for fetch in ({"sec-fetch-site": "cross-site"}, {}):
            assert not access.cross_site(_request({**fetch, "origin": origin})), origin
    assert access.cross_site(_request({"sec-fetch-site": "cross-site", "origin": EVIL}))
    assert access.cross_site(_request({"sec-fetch-site": "cross-site"}))
    anyone = _access(cors_allow_origins="*")
    assert not anyone.cross_site(_request({"sec-fetch-site": "cross-site", "origin": EVIL}))


def test_admission_refuses_it_403_unless_a_key_is_presented() -> None:
    cross = {"sec-fetch-site": "cross-site", "origin": EVIL}
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    open_admission = Admission(settings, access=Access(settings), limits=Limits(settings))
    for check in (open_admission.caller, open_admission.key_holder):
        with pytest.raises(Refused) as refused:
            check(_request(cross))
        assert isinstance(refused.value.error, Forbidden) and refused.value.error.status == 403
        check(_request({}))  # curl: served
    keyed = Settings(_env_file=None, api_keys="k1")  # type: ignore[call-arg]
    admission = Admission(keyed, access=Access(keyed), limits=Limits(keyed))
    assert admission.caller(_request({**cross, "x-api-key": "k1"})).kind == "key"
    admission.key_holder(_request({**cross, "x-api-key": "k1"}))


# -- a JSON route takes a body declared JSON ----------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "json_"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/merge-patch+json", True),
        ("text/plain", False),
        ("text/plain;charset=UTF-8", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        ("application/jsonp", False),
        ("json", False),
        ("\xff", False),
        ("", False),
    ],
)
def test_is_json(content_type: str, json_: bool) -> None:
    assert is_json(content_type.encode("latin-1")) is json_


async def _call_json_only(headers: list[tuple[bytes, bytes]], method: str = "POST") -> int:
    reached: list[bool] = []

    async def route(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    status: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    async def receive() -> dict[str, Any]:
        raise AssertionError("a refused body is never read")

    scope = {"type": "http", "method": method, "path": "/ai/feedback", "headers": headers}
    await JsonOnly(route, paths={"/ai/feedback"})(scope, receive, send)
    assert bool(reached) == (status == [200])
    return status[0]


async def test_json_only_refuses_a_body_not_declared_json_unread() -> None:
    body = (b"content-length", b"2")
    assert await _call_json_only([(b"content-type", b"application/json"), body]) == 200
    assert await _call_json_only([(b"content-type", b"text/plain"), body]) == 415
    assert await _call_json_only([body]) == 415, "a body with no type (a Blob, a beacon)"
    assert await _call_json_only([(b"transfer-encoding", b"chunked")]) == 415
    two = [(b"content-type", b"application/json"), (b"content-type", b"text/plain"), body]
    assert await _call_json_only(two) == 415
    assert await _call_json_only([]) == 200, "no body at all: the route says what is missing"
    assert await _call_json_only([(b"content-type", b"text/plain")], method="GET") == 200


# -- over HTTP: no job, no generation -------------------------------------------------------------


async def test_a_chat_post_not_declared_json_is_415(
    gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        for path, body in ((BASE, PARAMS), (FREE, {"message": "비건 챌린지 알려줘"})):
            for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
                headers = {"content-type": content_type} if content_type else {}
                answer = await http.post(path, content=json.dumps(body), headers=headers)
                assert answer.status_code == 415, (path, content_type, answer.text)
                assert answer.json()["status"] == 415 and answer.json()["message"]
    assert scripted.chat_requests == []


async def test_another_sites_page_starts_no_generation_without_keys(
    gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        for headers in (
            {"sec-fetch-site": "cross-site", "origin": EVIL},  # an EventSource on evil.example
            {"sec-fetch-site": "cross-site"},  # an <img src>, a link's prefetch
            {"origin": EVIL},  # a browser without Sec-Fetch-Site
        ):
            stream = await read_stream(http, FREE, {"message": "비건 챌린지"}, headers=headers)
            assert_well_formed(stream)
            assert stream.terminal.event == "error", headers
            assert stream.terminal.payload["status"] == 403, stream.terminal.payload
            post = await http.post(BASE, json=PARAMS, headers=headers)
            assert post.status_code == 403, (headers, post.text)
        assert scripted.chat_requests == []
        # The page's own requests, and requests that are no browser's, are served.
        own = {"sec-fetch-site": "same-origin", "origin": gateway.url}
        for headers in (own, {}):
            stream = await read_stream(http, BASE, PARAMS, headers=headers)
            assert stream.terminal.event == "close", (headers, stream.terminal.payload)
            assert (await http.post(BASE, json=PARAMS, headers=headers)).status_code == 200


def test_every_post_route_of_the_app_is_a_json_only_path() -> None:
    app = create_app(Settings(_env_file=None, llm_model="m"))  # type: ignore[call-arg]
    posts = {path for path, ops in app.openapi()["paths"].items() if "post" in ops}
    [guard] = [m for m in app.user_middleware if m.cls is JsonOnly]
    assert set(guard.kwargs["paths"]) == posts == {BASE, FREE, "/ai/feedback"}
