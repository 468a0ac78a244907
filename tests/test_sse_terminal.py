"""The old server sent a keep-alive ping after the stream had closed. Ours cannot: the
terminal event shuts the ping gate before it is sent (app/web/sse.py).

Both tests serve a stream whose pipeline, after its terminal event, spends a while
cleaning up (as ours does when it closes the upstream and records the turn) while pings
are due every few milliseconds. The naive EventSourceResponse leaks a ping after the
terminal event, which proves the check can fail; ours never does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from app.config import Settings
from app.domain.events import Delta, Done, StreamEvent
from app.metrics import Metrics
from app.streams.log import LoggedEvent
from app.streams.open import open_stream_hub
from app.web.sse import event_source_response
from tests.support.sse import assert_well_formed, read_stream
from tests.support.threaded_server import serve_in_thread

pytestmark = pytest.mark.anyio

PING = 0.002
CLEANUP = 0.05


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _pipeline() -> AsyncIterator[StreamEvent]:
    try:
        for word in ("가", "나", "다"):
            await anyio.sleep(0.01)
            yield Delta(word)
        yield Done({"recommend": "가나다", "challenges": []})
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(CLEANUP)  # closing upstream, saving the turn...


async def _naive(request: object) -> EventSourceResponse:
    async def frames() -> AsyncIterator[ServerSentEvent]:
        event_id = 0
        async for event in _pipeline():
            event_id += 1
            record = LoggedEvent.of(event_id, event)
            yield ServerSentEvent(data=record.data, event=record.name, id=str(event_id))

    return EventSourceResponse(frames(), ping=PING)


async def _ours(request: Request) -> EventSourceResponse:
    return event_source_response(
        _pipeline(),
        streams=request.state.streams,
        ping_interval=PING,
        send_timeout=5,
        retry_ms=1000,
        metrics=Metrics(),
        endpoint="test",
    )


@asynccontextmanager
async def _lifespan(_: Starlette) -> AsyncIterator[dict[str, object]]:
    async with open_stream_hub(Settings(_env_file=None), None) as streams:
        yield {"streams": streams}


APP = Starlette(routes=[Route("/naive", _naive), Route("/ours", _ours)], lifespan=_lifespan)


async def test_naive_response_pings_after_close() -> None:
    with serve_in_thread(APP) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            result = await read_stream(client, "/naive")
    terminal_index = result.frames.index(result.terminal)
    after = result.frames[terminal_index + 1 :]
    assert after and all(frame.comments for frame in after), "the old bug should reproduce"


async def test_our_response_sends_nothing_after_the_terminal_event() -> None:
    with serve_in_thread(APP) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            for _ in range(20):
                result = await read_stream(client, "/ours")
                assert_well_formed(result)
                assert result.terminal.event == "close"
                assert result.text == "가나다"
                assert any(frame.comments for frame in result.frames), "pings were due"
