"""Last-Event-ID resume over real HTTP: a reconnect continues the same generation, never a new one.

Gateways under uvicorn in subprocesses against the scripted upstream: the session ``gateway``
(defaults: a client that leaves stops its generation at once), one with a resume grace (a
generation outlives its client for a few seconds), and two sharing a redis-server, so that a
reconnect lands on the process that did not generate the stream. What must hold (see
app/streams/hub.py): the text before the drop plus the text after the reconnect is exactly an
uninterrupted stream's; one upstream request per question; nothing more to send -> HTTP 204.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from app.streams.log import StreamAborted
from tests.support.gateway import GatewayProcess
from tests.support.redis_server import redis_server
from tests.support.sse import Frame, StreamResult, assert_well_formed, iter_frames, read_stream
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread, expected_display_text

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
GRACE = 3.0


def _params(tag: str) -> dict[str, str]:
    # A session of its own per stream: the per-session concurrency limit stays out of the way.
    return {"sessionId": f"{tag}-{uuid.uuid4().hex[:8]}", "location": "산",
            "workType": "현장직", "category": "PLOGGING"}  # fmt: skip


def _env(
    upstream: ScriptedUpstreamThread, template: Path, into: Path, **extra: str
) -> dict[str, str]:
    return {
        "QDRANT_PATH": str(store_copy(template, into / "qdrant")),
        "LLM_BASE_URL": upstream.base_url,
        "SSE_PING_INTERVAL": "0.3",
        **extra,
    }


@pytest.fixture(scope="module")
def grace_gateway(
    upstream: ScriptedUpstreamThread, store_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    env = _env(upstream, store_template, tmp_path_factory.mktemp("grace"),
               STREAM_RESUME_GRACE_SECONDS=str(GRACE))  # fmt: skip
    with GatewayProcess(env) as gw:
        yield gw


@dataclass
class Pair:
    a: GatewayProcess
    b: GatewayProcess


@pytest.fixture(scope="module")
def redis_pair(
    upstream: ScriptedUpstreamThread, store_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        shared = {
            "REDIS_URL": url,
            "REDIS_STREAM_PREFIX": f"test:{uuid.uuid4().hex}:stream:",
            "STREAM_RESUME_GRACE_SECONDS": str(GRACE),
        }
        with (
            GatewayProcess(_env(upstream, store_template, tmp_path_factory.mktemp("a"), **shared)) as a,
            GatewayProcess(_env(upstream, store_template, tmp_path_factory.mktemp("b"), **shared)) as b,
        ):  # fmt: skip
            yield Pair(a, b)


async def _read_until(
    http: httpx.AsyncClient, url: str, params: dict[str, str], challenges: int
) -> list[Frame]:
    """Open a stream, read until ``challenges`` challenge events arrived, then hang up."""
    frames: list[Frame] = []
    async with http.stream("GET", url, params=params) as response:
        assert response.status_code == 200
        async for frame in iter_frames(response.aiter_lines()):
            frames.append(frame)
            if sum(f.event == "challenge" for f in frames) >= challenges:
                break
    return frames


async def _reconnect(
    http: httpx.AsyncClient, url: str, params: dict[str, str], last_id: str
) -> StreamResult:
    """What an EventSource does: the same URL again, with ``Last-Event-ID``."""
    headers = {b"last-event-id": last_id.encode()}  # bytes: any text, as a browser may send
    async with http.stream("GET", url, params=params, headers=headers) as response:
        frames = [frame async for frame in iter_frames(response.aiter_lines())]
        return StreamResult(response.status_code, response.headers, frames)


def _text(frames: list[Frame]) -> str:
    return "".join(f.payload["data"] for f in frames if f.event == "challenge")


def _assert_resumed(result: StreamResult, after: Frame) -> None:
    """200, the events right after ``after`` numbered on, one terminal event, then nothing."""
    assert result.status_code == 200, result
    events = result.events
    assert events, result.frames
    assert {e.stream_id for e in events} == {after.stream_id}
    assert [e.seq for e in events] == list(range(after.seq + 1, after.seq + 1 + len(events)))
    assert [e.event for e in events[:-1]] == ["challenge"] * (len(events) - 1)
    assert events[-1].event in {"close", "error"}
    assert result.frames[-1] is events[-1], "nothing may follow the terminal event"
    assert not any(f.retry is not None for f in result.frames), "only a new stream opens"


async def _upstream_aborts(scripted: ScriptedUpstreamThread, within: float) -> float:
    start = time.monotonic()
    with anyio.fail_after(within):
        while not scripted.stats["streams_aborted_by_client"]:
            await anyio.sleep(0.01)
    return time.monotonic() - start


async def _gone(http: httpx.AsyncClient, url: str, params: dict[str, str], last_id: str) -> None:
    result = await _reconnect(http, url, params, last_id)
    assert result.status_code == 204, result
    assert result.frames == []


# --- one process, default settings: the generation stops when its client leaves -------------


async def test_reconnect_after_the_end_replays_the_rest_then_204(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    params = _params("end")
    full = await read_stream(client, BASE, params)
    assert_well_formed(full)
    assert full.terminal.event == "close"
    opening = full.frames[0]
    assert opening.retry == 1000 and opening.seq == 0

    third = full.events[2]
    rest = await _reconnect(client, BASE, params, third.id or "")
    _assert_resumed(rest, third)
    assert [(e.event, e.data) for e in rest.events] == [
        (e.event, e.data) for e in full.events[3:]
    ], "a replay is the very same events"
    everything = await _reconnect(client, BASE, params, opening.id or "")
    _assert_resumed(everything, opening)
    assert everything.text == expected_display_text()

    await _gone(client, BASE, params, full.terminal.id or "")  # it has the terminal event
    await _gone(client, BASE, params, f"{uuid.uuid4().hex}.3")  # no such stream
    for junk in ("3", "abc", f"{opening.stream_id}.x", f"{opening.stream_id}", "…"):
        await _gone(client, BASE, params, junk)
    assert len(scripted.chat_requests) == 1, "a reconnect never starts a generation"


async def test_a_stream_stopped_after_its_client_left_resumes_into_an_error(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.05)
    params = _params("abort")
    before = await _read_until(client, FREE, {**params, "message": "비건 챌린지 알려줘"}, 3)
    latency = await _upstream_aborts(scripted, within=2.0)
    assert latency < 1.0, "with no resume grace the generation stops at once"

    last = before[-1]
    result = await _reconnect(
        client, FREE, {**params, "message": "비건 챌린지 알려줘"}, last.id or ""
    )
    _assert_resumed(result, last)
    error = result.terminal
    assert error.event == "error"
    assert error.payload == {"status": 499, "message": StreamAborted.default_message, "data": None}
    text = _text(before) + result.text
    assert expected_display_text().startswith(text), "the text so far, nothing twice"
    assert len(scripted.chat_requests) == 1
    await _gone(client, FREE, params, error.id or "")


# --- with a resume grace: a reconnect continues the live generation ----------------------------


async def test_live_resume_continues_the_same_generation(
    grace_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.03)
    params = _params("live")
    async with httpx.AsyncClient(base_url=grace_gateway.url, timeout=30) as http:
        before = await _read_until(http, BASE, params, 5)
        assert before[0].seq == 0 and before[0].retry == 1000
        await anyio.sleep(0.3)  # the generation runs on meanwhile
        last = before[-1]
        result = await _reconnect(http, BASE, params, last.id or "")
        _assert_resumed(result, last)
        assert result.terminal.event == "close"
        assert _text(before) + result.text == expected_display_text()
        await _gone(http, BASE, params, result.terminal.id or "")
    assert len(scripted.chat_requests) == 1, "one generation for the whole answer"
    assert scripted.stats["streams_aborted_by_client"] == 0
    assert scripted.stats["streams_completed"] == 1


async def test_a_drop_before_the_first_token_resumes_from_the_opening_id(
    grace_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", first_delay=1.0)
    params = _params("early")
    async with httpx.AsyncClient(base_url=grace_gateway.url, timeout=30) as http:
        async with http.stream("GET", BASE, params=params) as response:
            opening = await anext(aiter(iter_frames(response.aiter_lines())))
        assert opening.event is None and opening.seq == 0
        result = await _reconnect(http, BASE, params, opening.id or "")
    _assert_resumed(result, opening)
    assert result.text == expected_display_text()
    assert len(scripted.chat_requests) == 1


async def test_without_a_reconnect_the_generation_stops_after_the_grace(
    grace_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.1)  # about 14 s in all
    params = _params("grace")
    async with httpx.AsyncClient(base_url=grace_gateway.url, timeout=30) as http:
        before = await _read_until(http, BASE, params, 2)
        latency = await _upstream_aborts(scripted, within=GRACE + 3)
        assert GRACE - 0.5 < latency, f"stopped after {latency:.2f}s, before the grace"
        result = await _reconnect(http, BASE, params, before[-1].id or "")
    _assert_resumed(result, before[-1])
    assert result.terminal.payload["status"] == 499
    assert len(result.text) > 0, "what it generated during the grace is replayed"
    assert expected_display_text().startswith(_text(before) + result.text)


# --- two processes sharing Redis: the reconnect lands on the other one -----------------------


async def test_resume_on_another_process_through_redis(
    redis_pair: Pair, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.03)
    params = _params("redis")
    async with (
        httpx.AsyncClient(base_url=redis_pair.a.url, timeout=30) as on_a,
        httpx.AsyncClient(base_url=redis_pair.b.url, timeout=30) as on_b,
    ):
        before = await _read_until(on_a, BASE, params, 5)
        last = before[-1]
        live = await _reconnect(on_b, BASE, params, last.id or "")  # follows A's generation
        _assert_resumed(live, last)
        assert live.terminal.event == "close", live.terminal.payload
        assert _text(before) + live.text == expected_display_text()
        assert scripted.stats["streams_aborted_by_client"] == 0, "A kept generating for B"

        # Finished: both processes replay it, and both say 204 once the client has it all.
        await anyio.sleep(0.2)  # A's write-behind (every 50 ms)
        for http in (on_a, on_b):
            again = await _reconnect(http, BASE, params, last.id or "")
            _assert_resumed(again, last)
            assert [e.data for e in again.events] == [e.data for e in live.events]
            await _gone(http, BASE, params, live.terminal.id or "")
    assert len(scripted.chat_requests) == 1


async def test_a_stream_stopped_on_one_process_ends_with_the_error_on_the_other(
    redis_pair: Pair, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.1)
    params = _params("redis-abort")
    async with (
        httpx.AsyncClient(base_url=redis_pair.a.url, timeout=30) as on_a,
        httpx.AsyncClient(base_url=redis_pair.b.url, timeout=30) as on_b,
    ):
        before = await _read_until(on_a, BASE, params, 2)
        await _upstream_aborts(scripted, within=GRACE + 3)
        await anyio.sleep(0.2)
        result = await _reconnect(on_b, BASE, params, before[-1].id or "")
    _assert_resumed(result, before[-1])
    assert result.terminal.payload["status"] == 499
    assert len(scripted.chat_requests) == 1
