"""The one SSE writer (app/web/sse.py), byte for byte: the chat streams' frames and the
feedback results stream's come out of the same functions, in SPEC's format."""

from __future__ import annotations

import json

import anyio
import pytest

from app.domain.errors import Overloaded
from app.domain.events import FEEDBACK, Delta, Done, Failed, StreamEvent, envelope_json
from app.metrics import Metrics
from app.streams.log import LoggedEvent
from app.web.sse import _frames, cursor_stream_response, frame

pytestmark = pytest.mark.anyio

STREAM = "0123456789abcdef0123456789abcdef"
CHUNK = "추천 내용을 보내고 있어요."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_frame_is_id_event_data_and_a_blank_line() -> None:
    assert (
        frame("a.1", "challenge", '{"x":1}')
        == 'id: a.1\r\nevent: challenge\r\ndata: {"x":1}\r\n\r\n'
    )


class _Source:
    """A stream whose log gives ``batches`` one per read (an empty one waits it out)."""

    stream_id = STREAM

    def __init__(self, *batches: list[StreamEvent]) -> None:
        seq = 0
        self.batches: list[list[LoggedEvent]] = []
        for batch in batches:
            records = []
            for event in batch:
                seq += 1
                records.append(LoggedEvent.of(seq, event))
            self.batches.append(records)
        self.released = False

    def attach(self) -> None:
        pass

    def release(self) -> None:
        self.released = True

    async def events_after(self, seq: int, wait: float) -> list[LoggedEvent]:
        batch = self.batches.pop(0)
        if not batch:
            await anyio.sleep(wait + 0.002)  # past the ping: asyncio may wake a little early
        return batch


async def test_a_chat_stream_opens_pings_batches_and_ends_at_its_terminal_event() -> None:
    source = _Source(
        [], [Delta('가\n"')], [Delta("나"), Done({"recommend": "r"}), Failed(Overloaded())]
    )
    frames = _frames(
        lambda: source, 0, opening=1000, ping_interval=0.01, metrics=Metrics(), endpoint="t"
    )
    chunks = [chunk async for chunk in frames]
    assert [c.decode() for c in chunks] == [
        f"id: {STREAM}.0\r\nretry: 1000\r\n\r\n",
        ": ping\r\n\r\n",
        f'id: {STREAM}.1\r\nevent: challenge\r\ndata: {{"status":200,"message":"{CHUNK}",'
        '"data":"가\\n\\""}\r\n\r\n',
        # one write for the batch, and nothing after ``close`` (not the error behind it)
        f'id: {STREAM}.2\r\nevent: challenge\r\ndata: {{"status":200,"message":"{CHUNK}",'
        f'"data":"나"}}\r\n\r\nid: {STREAM}.3\r\nevent: close\r\ndata: {{"status":200,'
        '"message":"추천이 완료되었어요.","data":{"recommend":"r"}}\r\n\r\n',
    ]
    assert source.released


async def test_a_resumed_chat_stream_has_no_opening_frame() -> None:
    source = _Source([Delta("가"), Failed(Overloaded(retry_after=2))])
    source.batches[0] = source.batches[0][1:]  # the client had event 1
    frames = _frames(
        lambda: source, 1, opening=None, ping_interval=10, metrics=Metrics(), endpoint="t"
    )
    [chunk] = [chunk async for chunk in frames]
    assert chunk.decode().startswith(f"id: {STREAM}.2\r\nevent: error\r\ndata: ")


async def test_the_feedback_stream_goes_through_the_same_writer() -> None:
    results = [[], [("1-0", '{"a":"한"}')], [("2-0", "{}"), ("3-0", "[1]")]]
    cursors = []

    async def events_after(cursor: str, wait: float) -> list[tuple[str, str, str]]:
        cursors.append(cursor)
        batch = results.pop(0) if results else []
        if not batch:
            await anyio.sleep(wait + 0.002)  # past the ping: asyncio may wake a little early
        return [(i, FEEDBACK, envelope_json(200, "m", json.loads(d))) for i, d in batch]

    response = cursor_stream_response(
        "0-0", events_after, retry_ms=1000, ping_interval=0.01, send_timeout=5
    )
    chunks = []
    async for chunk in response._frames:
        chunks.append(chunk.decode())
        if len(chunks) == 5:
            break
    assert chunks == [
        "id: 0-0\r\nretry: 1000\r\n\r\n",
        ": ping\r\n\r\n",
        'id: 1-0\r\nevent: feedback\r\ndata: {"status":200,"message":"m","data":{"a":"한"}}\r\n\r\n',
        'id: 2-0\r\nevent: feedback\r\ndata: {"status":200,"message":"m","data":{}}\r\n\r\n'
        'id: 3-0\r\nevent: feedback\r\ndata: {"status":200,"message":"m","data":[1]}\r\n\r\n',
        ": ping\r\n\r\n",
    ]
    assert cursors[:4] == ["0-0", "0-0", "1-0", "3-0"]  # each read after the last sent
