"""The stream hub in-process: who stops a generation when, and what a reconnect can still get.

The HTTP side (ids, 204, Redis, the browser) is in tests/test_stream_resume.py,
tests/test_shutdown.py and tests/browser/test_chat_page.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from app.config import Settings
from app.domain.events import Delta, Done, StreamEvent
from app.redis_client import redis_connector
from app.streams.hub import StreamHub
from app.streams.log import (
    SHUTDOWN_MESSAGE,
    LoggedEvent,
    StreamAborted,
    StreamSource,
    parse_event_id,
)
from app.streams.open import open_stream_hub

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Pipeline:
    """A pipeline that yields ``count`` deltas ``delay`` apart, then Done; records its fate."""

    def __init__(self, count: int = 5, delay: float = 0.01, *, fail: bool = False) -> None:
        self.count, self.delay, self.fail = count, delay, fail
        self.started = self.closed = False
        self.cancelled = False

    async def __call__(self) -> AsyncIterator[StreamEvent]:
        self.started = True
        try:
            for i in range(self.count):
                await anyio.sleep(self.delay)
                yield Delta(f"{i},")
            if self.fail:
                raise RuntimeError("boom")
            yield Done({"recommend": "r", "challenges": []})
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        finally:
            self.closed = True


@asynccontextmanager
async def hub(**settings: Any) -> AsyncIterator[StreamHub]:
    config = Settings(_env_file=None, **settings)
    async with open_stream_hub(config, redis_connector(config.redis_url)) as streams:
        yield streams


async def drain(source: StreamSource, after: int = 0, wait: float = 5.0) -> list[LoggedEvent]:
    """Read a source to its terminal event, as a response would."""
    got: list[LoggedEvent] = []
    seq = after
    source.attach()
    try:
        with anyio.fail_after(wait):
            while not got or not got[-1].terminal:
                for record in await source.events_after(seq, 1.0):
                    got.append(record)
                    seq = record.seq
    finally:
        source.release()
    return got


def test_event_ids() -> None:
    sid = "0123456789abcdef0123456789abcdef"
    assert parse_event_id(f"{sid}.0") == (sid, 0)
    assert parse_event_id(f" {sid}.17 ") == (sid, 17)
    for junk in ("", "7", f"{sid}", f"{sid}.", f"{sid}.-1", f"{sid}.1e3", f"{sid.upper()}.1",
                 f"{sid}0.1", f"{sid}.١", f"{sid}.{'9' * 10}"):  # fmt: skip
        assert parse_event_id(junk) is None, junk


async def test_a_stream_is_read_whole_and_kept_for_a_reconnect() -> None:
    pipeline = Pipeline()
    async with hub() as streams:
        source = streams.start(pipeline())
        events = await drain(source)
        assert [e.name for e in events] == ["challenge"] * 5 + ["close"]
        assert [e.seq for e in events] == list(range(1, 7))
        again = await streams.resume(source.stream_id, 2)
        assert again is not None
        assert await drain(again, 2) == events[2:]
        assert await streams.resume(source.stream_id, 6) is None, "it has everything"
        assert await streams.resume("f" * 32, 0) is None, "unknown"
    assert pipeline.closed


async def test_the_log_expires_after_the_ttl() -> None:
    async with hub(stream_resume_ttl_seconds=0.2) as streams:
        source = streams.start(Pipeline(count=1, delay=0)())
        await drain(source)
        assert await streams.resume(source.stream_id, 0) is not None
        await anyio.sleep(0.3)
        assert await streams.resume(source.stream_id, 0) is None


async def test_with_no_grace_the_generation_stops_when_its_reader_leaves() -> None:
    pipeline = Pipeline(count=100, delay=0.01)
    async with hub() as streams:
        source = streams.start(pipeline())
        source.attach()
        with anyio.fail_after(2):
            while not await source.events_after(0, 1.0):
                pass
        source.release()
        with anyio.fail_after(0.5):
            while not pipeline.closed:
                await anyio.sleep(0.001)
        assert pipeline.cancelled
        resumed = await streams.resume(source.stream_id, 1)
        assert resumed is not None
        rest = await drain(resumed, 1)
        assert rest[-1].name == "error" and rest[-1].status == StreamAborted.status


async def test_a_grace_keeps_the_generation_for_a_reconnect_then_stops_it() -> None:
    pipeline = Pipeline(count=60, delay=0.02)  # 1.2 s
    async with hub(stream_resume_grace_seconds=0.3) as streams:
        first = streams.start(pipeline())
        first.attach()
        first.release()  # the client left at once
        await anyio.sleep(0.2)
        assert not pipeline.closed, "still within the grace"
        second = await streams.resume(first.stream_id, 0)
        assert second is not None
        second.attach()
        await anyio.sleep(0.4)
        assert not pipeline.closed, "a reader came back"
        second.release()
        with anyio.fail_after(1):
            while not pipeline.closed:
                await anyio.sleep(0.01)
        assert pipeline.cancelled, "nobody came back within the grace"
        third = await streams.resume(first.stream_id, 0)
        assert third is not None
        events = await drain(third)
        assert events[-1].status == StreamAborted.status
        assert 10 < len(events) < 61


async def test_a_pipeline_that_raises_ends_with_error_500() -> None:
    async with hub() as streams:
        events = await drain(streams.start(Pipeline(count=2, fail=True)()))
    assert [e.name for e in events] == ["challenge", "challenge", "error"]
    assert events[-1].status == 500


async def test_drain_lets_short_streams_finish_and_ends_the_rest_with_503() -> None:
    short, long = Pipeline(count=5, delay=0.02), Pipeline(count=1000, delay=0.01)
    async with hub(shutdown_grace_seconds=0.4) as streams:
        a, b = streams.start(short()), streams.start(long())
        streams.begin_drain()
        refused = streams.start(Pipeline()())
        late = await drain(refused)
        assert [(e.name, e.status) for e in late] == [("error", 503)], "no new generation"
        started = anyio.current_time()
        a_events, b_events = await drain(a), await drain(b)
        assert a_events[-1].name == "close"
        assert b_events[-1].name == "error" and b_events[-1].status == 503
        assert SHUTDOWN_MESSAGE in b_events[-1].data
        assert '"retryAfterSeconds"' in b_events[-1].data
        assert 0.3 < anyio.current_time() - started < 1.0
    assert long.cancelled


async def test_closing_the_hub_stops_what_is_left() -> None:
    pipeline = Pipeline(count=1000, delay=0.01)
    async with hub(stream_resume_grace_seconds=30) as streams:
        source = streams.start(pipeline())
        source.attach()
        source.release()  # orphaned, waiting for a reconnect
        await anyio.sleep(0.05)
    assert pipeline.cancelled and pipeline.closed
