"""A strict reader of our SSE streams, keeping comments and order so tests can assert
exactly what came after what. The parsing is ``app.llm.sse_decode``'s, the one SSE reader."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from app.llm.sse_decode import SseFrame
from app.llm.sse_decode import iter_frames as decode_frames


@dataclass
class Frame(SseFrame):
    """One SSE block of our streams, with our id format (``<streamId>.<seq>``) read."""

    @property
    def seq(self) -> int:
        """The event's number in its stream."""
        assert self.id is not None, self
        return int(self.id.rpartition(".")[2])

    @property
    def stream_id(self) -> str:
        assert self.id is not None, self
        return self.id.rpartition(".")[0]

    @property
    def payload(self) -> dict[str, Any]:
        value = super().payload
        assert isinstance(value, dict), self
        return value


async def iter_frames(lines: AsyncIterator[str]) -> AsyncIterator[Frame]:
    """The gateway's blocks, strictly: a field SSE does not define fails the test, and a
    last block without its blank line is shown, not dropped."""
    async for frame in decode_frames(lines, incomplete=True):
        assert not frame.unknown, f"unexpected SSE fields {frame.unknown}"
        yield Frame(**vars(frame))


@dataclass
class StreamResult:
    status_code: int
    headers: httpx.Headers
    frames: list[Frame]

    @property
    def events(self) -> list[Frame]:
        return [f for f in self.frames if f.event is not None]

    @property
    def terminal(self) -> Frame:
        return self.events[-1]

    @property
    def text(self) -> str:
        return "".join(f.payload["data"] for f in self.events if f.event == "challenge")


async def read_stream(
    client: httpx.AsyncClient,
    url: str,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> StreamResult:
    async with client.stream("GET", url, params=params, headers=headers) as response:
        frames = [frame async for frame in iter_frames(response.aiter_lines())]
        return StreamResult(response.status_code, response.headers, frames)


def assert_well_formed(result: StreamResult) -> None:
    """SPEC: ids on every event, one terminal event, and it is the very last frame."""
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("text/event-stream")
    events = result.events
    assert events, "no events"
    assert all(e.event in {"challenge", "close", "error"} for e in events), events
    assert all(e.id for e in events), "every event carries an id"
    opening = result.frames[0]
    assert opening.event is None and opening.data is None, "a stream opens with its id alone"
    assert opening.retry is not None and opening.id is not None and opening.seq == 0, opening
    assert {e.stream_id for e in events} == {opening.stream_id}, "one stream id"
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "numbered from 1"
    terminals = [e for e in events if e.event in {"close", "error"}]
    assert len(terminals) == 1, terminals
    assert result.frames[-1] is terminals[0], "nothing may follow the terminal event"
    for event in events:
        payload = event.payload
        assert set(payload) == {"status", "message", "data"}
        assert isinstance(payload["message"], str) and payload["message"]
    for event in events[:-1]:
        assert event.event == "challenge" and event.payload["status"] == 200
