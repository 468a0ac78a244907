"""What a stranger on the network can do (issue 25), one test per finding, over real HTTP
against gateway subprocesses and the scripted upstream. docs/security.md is the threat model.

Two gateways: ``keyed`` (API_KEYS and a relay key, four generation slots, short request
timeouts, an allowed-hosts list) and ``open_gw`` (no keys, the default rate limits, four
slots). Different clients without keys are different loopback addresses (127.0.0.x).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.support.gateway import GatewayProcess
from tests.support.raw_socket import closed_within, send_raw
from tests.support.sse import assert_well_formed, iter_frames, read_stream
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
PARAMS = {"location": "도시", "workType": "사무직", "category": "VEGAN"}
KEY = "s3cret-key"
RELAY = "relay-key"
TIMEOUT_S = 1.0  # REQUEST_BODY_TIMEOUT_SECONDS and REQUEST_HEADER_TIMEOUT_SECONDS of `keyed`
COOKIE = "eco_page"  # the page's visitor token (app/web/page_token.py)


def _store(template: Path, factory: pytest.TempPathFactory) -> str:
    return str(store_copy(template, factory.mktemp("store") / "q"))


@pytest.fixture(scope="module")
def keyed(
    upstream: ScriptedUpstreamThread, store_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    env = {
        "LLM_BASE_URL": upstream.base_url,
        "QDRANT_PATH": _store(store_template, tmp_path_factory),
        "API_KEYS": KEY,
        "RELAY_API_KEYS": RELAY,
        "MAX_CONCURRENT_GENERATIONS": "4",  # a client holds 2, the relay 3
        "SESSION_MAX_CONCURRENT": "4",
        "SSE_PING_INTERVAL": "0.3",
        "REQUEST_BODY_TIMEOUT_SECONDS": str(TIMEOUT_S),
        "REQUEST_HEADER_TIMEOUT_SECONDS": str(TIMEOUT_S),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "LOG_FORMAT": "json",
    }
    with GatewayProcess(env, startup_timeout=90) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def open_gw(
    upstream: ScriptedUpstreamThread, store_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    env = {
        "LLM_BASE_URL": upstream.base_url,
        "QDRANT_PATH": _store(store_template, tmp_path_factory),
        "MAX_CONCURRENT_GENERATIONS": "4",  # a client (an address) holds 2
        "SESSION_MAX_CONCURRENT": "4",
        "SSE_PING_INTERVAL": "0.3",
        "LOG_FORMAT": "json",
    }
    with GatewayProcess(env, default_limits=True, startup_timeout=90) as gateway:
        yield gateway


def _http(
    gateway: GatewayProcess, address: str = "127.0.0.1", **kwargs: object
) -> httpx.AsyncClient:
    """A client whose connections come from ``address`` (one of loopback's many)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=gateway.url, timeout=30, transport=transport, **kwargs)  # type: ignore[arg-type]


# -- 1. keys that hold --------------------------------------------------------------------


async def test_1_no_forgeable_header_stands_in_for_a_key(
    keyed: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    browserish = {"sec-fetch-site": "same-origin", "origin": keyed.url, "referer": keyed.url + "/"}
    async with _http(keyed, headers=browserish) as http:
        stream = await read_stream(http, BASE, PARAMS)
        assert_well_formed(stream)
        assert stream.terminal.event == "error" and stream.terminal.payload["status"] == 401
        post = await http.post(BASE, json=PARAMS)
        assert post.status_code == 401
        free = await http.post(FREE, json={"message": "비건 챌린지 알려줘"})
        assert free.status_code == 401
    assert scripted.chat_requests == []


async def test_1_the_chat_page_gets_in_with_the_token_issued_with_the_page(
    keyed: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    async with _http(keyed) as http:
        page = await http.get("/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        cookie = page.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        # httpx keeps the cookie, as the browser does: the page's EventSource sends it.
        stream = await read_stream(http, BASE, {**PARAMS, "sessionId": "page-1"})
        assert_well_formed(stream)
        assert stream.terminal.event == "close", stream.terminal.payload
        # The token is no key: the feedback API and the metrics stay closed to it.
        assert (await http.get("/ai/feedback/" + "0" * 32)).status_code == 401
        assert (await http.get("/metrics")).status_code == 401
    async with _http(keyed) as stranger:
        token = cookie.split(";")[0].partition("=")[2]
        forged = token[:-4] + "0000"
        stranger.cookies.set(COOKIE, forged)
        refused = await read_stream(stranger, BASE, PARAMS)
        assert refused.terminal.payload["status"] == 401
        assert "새로 고침" in refused.terminal.payload["message"]


# -- 2. identities that cannot be made up ---------------------------------------------------


async def test_2_a_made_up_key_is_no_new_client_without_api_keys(
    open_gw: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    statuses: list[int] = []
    async with _http(open_gw, "127.0.0.11") as http:
        for n in range(30):
            answer = await http.post(
                FREE,
                json={"sessionId": "one-session", "message": "ㅁㄴㅇㄹ"},
                headers={"x-api-key": f"made-up-{n}"},
            )
            statuses.append(answer.status_code)
    assert statuses[:20] == [200] * 20, statuses
    assert set(statuses[20:]) == {429}, "the 21st on one session is over RATE_LIMIT_BURST"


async def test_2_an_unknown_key_is_401_and_counts_against_nothing(
    keyed: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    async with _http(keyed) as http:
        for n in range(5):
            wrong = await http.post(BASE, json=PARAMS, headers={"x-api-key": f"guess-{n}"})
            assert wrong.status_code == 401 and "API 키" in wrong.json()["message"]
    assert scripted.chat_requests == []


# -- 3. a fair share of generations ---------------------------------------------------------


async def _hold(http: httpx.AsyncClient, session: str, started: list[float]) -> None:
    async with http.stream("GET", BASE, params={**PARAMS, "sessionId": session}) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge":
                started.append(time.monotonic())
            if frame.event in ("close", "error"):
                return


async def _first_event(http: httpx.AsyncClient, params: dict[str, str]) -> str | None:
    async with http.stream("GET", BASE, params=params) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event is not None:
                return frame.event
    return None


async def test_3_one_client_holds_its_share_and_another_is_still_served(
    open_gw: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.2)  # each answer runs for several seconds
    started: list[float] = []
    async with _http(open_gw, "127.0.0.21") as greedy, _http(open_gw, "127.0.0.22") as other:
        async with anyio.create_task_group() as group:
            for n in range(2):
                group.start_soon(_hold, greedy, f"greedy-{n}", started)
            with anyio.fail_after(20):
                while len(started) < 2:
                    await anyio.sleep(0.02)
            refused = await read_stream(greedy, BASE, {**PARAMS, "sessionId": "greedy-3"})
            assert refused.terminal.event == "error"
            assert refused.terminal.payload["status"] == 429
            assert refused.terminal.payload["data"]["retryAfterSeconds"] > 0
            post = await greedy.post(BASE, json={**PARAMS, "sessionId": "greedy-4"})
            assert post.status_code == 429 and int(post.headers["retry-after"]) >= 1
            served = await _first_event(other, {**PARAMS, "sessionId": "other-1"})
            assert served == "challenge", "the other user is served"
            group.cancel_scope.cancel()
    # The greedy client's slots came back when its streams ended (the client left).
    scripted.set_scenario("ok")
    async with _http(open_gw, "127.0.0.21") as greedy:
        with anyio.fail_after(10):
            while True:
                again = await read_stream(greedy, BASE, {**PARAMS, "sessionId": "greedy-5"})
                if again.terminal.event == "close":
                    break
                await anyio.sleep(0.1)


async def test_3_a_relay_key_gets_its_larger_share(
    keyed: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.2)
    started: list[float] = []
    async with _http(keyed, headers={"authorization": f"Bearer {RELAY}"}) as relay:
        async with anyio.create_task_group() as group:
            for n in range(3):  # 3 of the 4 slots; a plain key holds 2
                group.start_soon(_hold, relay, f"relayed-{n}", started)
            with anyio.fail_after(20):
                while len(started) < 3:
                    await anyio.sleep(0.02)
            fourth = await read_stream(relay, BASE, {**PARAMS, "sessionId": "relayed-4"})
            assert fourth.terminal.payload["status"] == 429
            group.cancel_scope.cancel()


# -- 5. bounded requests -----------------------------------------------------------------------


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _post_head(gateway: GatewayProcess, path: str, length: str) -> bytes:
    framing = "transfer-encoding: chunked" if length == "chunked" else f"content-length: {length}"
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{gateway.port}\r\n"
        f"content-type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


def test_5_a_10_mb_body_is_413_before_it_is_read(open_gw: GatewayProcess) -> None:
    """The answer comes while most of the body is still unsent, and the process does not grow
    with what was announced; a chunked body is cut as soon as it passes the bound."""
    assert open_gw.process is not None
    before = _rss_kb(open_gw.process.pid)
    started = time.monotonic()
    for path in [FREE, "/ai/feedback"] * 10:
        sock = send_raw(open_gw, _post_head(open_gw, path, str(10 * 1024 * 1024)))
        sock.sendall(b'{"message": "' + b"x" * 65536)  # the rest never comes
        closed, said = closed_within(sock, 5)
        assert closed and said.startswith(b"HTTP/1.1 413"), said[:80]
        body = json.loads(said.partition(b"\r\n\r\n")[2])
        assert body["status"] == 413 and body["data"]["maxBytes"] > 0
    chunk = b"x" * 200_000
    sock = send_raw(open_gw, _post_head(open_gw, FREE, "chunked"))
    sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")  # no last chunk
    closed, said = closed_within(sock, 5)
    assert closed and said.startswith(b"HTTP/1.1 413"), said[:80]
    assert time.monotonic() - started < 10
    assert _rss_kb(open_gw.process.pid) - before < 30_000, "memory does not grow with the claim"


def test_5_a_body_that_never_completes_is_dropped(keyed: GatewayProcess) -> None:
    head = (
        "POST /ai/feedback HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"x-api-key: {KEY}\r\n"
    )
    started = time.monotonic()
    announced = send_raw(keyed, (head + 'content-length: 1000\r\n\r\n{"memberId": 7, ').encode())
    unended = send_raw(keyed, (head + 'transfer-encoding: chunked\r\n\r\n5\r\n{"mem\r\n').encode())
    for sock in (announced, unended):
        closed, said = closed_within(sock, TIMEOUT_S + 5)
        assert closed, "the connection was still open"
        assert said.startswith(b"HTTP/1.1 408"), said[:80]
    assert time.monotonic() - started < TIMEOUT_S + 5


def test_5_a_request_head_that_never_completes_is_dropped(keyed: GatewayProcess) -> None:
    started = time.monotonic()
    idle = send_raw(keyed, b"")
    trickle = send_raw(keyed, b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n")
    for sock in (idle, trickle):
        closed, _ = closed_within(sock, TIMEOUT_S + 5)
        assert closed, "a connection without its headers was kept"
    assert time.monotonic() - started < TIMEOUT_S + 5
    huge = send_raw(keyed, b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * 100_000)
    closed, said = closed_within(huge, 5)
    assert closed and said.startswith(b"HTTP/1.1 431"), said[:80]


async def test_4_a_chat_body_nested_deep_is_400(open_gw: GatewayProcess) -> None:
    async with _http(open_gw, "127.0.0.32") as http:
        for depth in (5000, 500):
            raw = '{"sessionId": ' + "[" * depth + "]" * depth + ', "message": "x"}'
            answer = await http.post(
                FREE, content=raw.encode(), headers={"content-type": "application/json"}
            )
            assert answer.status_code == 400, (depth, answer.text[:200])
    log = open_gw.log_text()
    assert "RecursionError" not in log and "unhandled error" not in log


# -- 9. a resume belongs to its stream -------------------------------------------------------


async def test_9_only_the_streams_own_client_resumes_it_and_resumes_are_counted(
    open_gw: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    params = {**PARAMS, "sessionId": "resumer"}
    async with _http(open_gw, "127.0.0.41") as owner, _http(open_gw, "127.0.0.42") as stranger:
        first = await read_stream(owner, BASE, params)
        assert first.terminal.event == "close"
        resume = {"last-event-id": f"{first.events[0].stream_id}.1"}
        theirs = await stranger.get(BASE, params=params, headers=resume)
        assert theirs.status_code == 204, "another client cannot replay it"
        other_session = await owner.get(BASE, params={**params, "sessionId": "x"}, headers=resume)
        assert other_session.status_code == 204, "nor another session of the same client"
        mine = await owner.get(BASE, params=params, headers=resume)
        assert mine.status_code == 200 and "event: close" in mine.text
        outcomes = []
        for _ in range(25):
            async with owner.stream("GET", BASE, params=params, headers=resume) as response:
                frames = [frame async for frame in iter_frames(response.aiter_lines())]
            outcomes.append(frames[-1].payload["status"] if frames else response.status_code)
    # The user's burst is 20: the first request, the own resume above, 18 more, then 429s.
    assert outcomes[:18] == [200] * 18, outcomes
    assert set(outcomes[18:]) == {429}, outcomes


# -- 10. hosts ---------------------------------------------------------------------------------


async def test_10_no_redirect_is_built_from_the_host_header(open_gw: GatewayProcess) -> None:
    async with _http(open_gw, headers={"host": "evil.example"}) as http:
        answer = await http.get("/health/")
    assert answer.status_code == 404 and "location" not in answer.headers
    assert answer.json()["status"] == 404


async def test_10_allowed_hosts_refuse_another_host(keyed: GatewayProcess) -> None:
    async with _http(keyed, headers={"host": "evil.example"}) as http:
        assert (await http.get("/health")).status_code == 400
    async with _http(keyed) as http:
        assert (await http.get("/health")).status_code == 200


# -- 11. operator pages under keys --------------------------------------------------------------


async def test_11_metrics_and_docs_need_a_key_under_api_keys(keyed: GatewayProcess) -> None:
    async with _http(keyed) as http:
        for path in ("/metrics", "/docs", "/openapi.json", "/redoc"):
            answer = await http.get(path)
            assert answer.status_code == 401, path
            assert answer.json()["status"] == 401
            keyed_answer = await http.get(path, headers={"x-api-key": KEY})
            assert keyed_answer.status_code == 200, path
        assert (await http.get("/health")).status_code == 200, "probes stay open"
        assert json.loads((await http.get("/ready")).text)["status"] in (200, 503)
