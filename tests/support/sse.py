"""A strict reader of our SSE streams, keeping comments and order so tests can assert
exactly what came after what."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Frame:
    """One SSE block: an event (``event`` set), a comment-only block (``comments``), or the
    opening block of a stream (``id`` and ``retry``, no data: nothing is dispatched)."""

    event: str | None = None
    id: str | None = None
    data: str | None = None
    retry: int | None = None
    comments: list[str] = field(default_factory=list)

    @property
    def seq(self) -> int:
        """The event's number in its stream (ids are ``<streamId>.<seq>``)."""
        assert self.id is not None, self
        return int(self.id.rpartition(".")[2])

    @property
    def stream_id(self) -> str:
        assert self.id is not None, self
        return self.id.rpartition(".")[0]

    @property
    def payload(self) -> dict[str, Any]:
        assert self.data is not None, self
        value = json.loads(self.data)
        assert isinstance(value, dict)
        return value


def _filled(frame: Frame) -> bool:
    return bool(
        frame.event
        or frame.data is not None
        or frame.comments
        or frame.id is not None
        or frame.retry is not None
    )


async def iter_frames(lines: AsyncIterator[str]) -> AsyncIterator[Frame]:
    frame = Frame()
    async for line in lines:
        if line == "":
            if _filled(frame):
                yield frame
            frame = Frame()
            continue
        if line.startswith(":"):
            frame.comments.append(line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            frame.event = value
        elif name == "id":
            frame.id = value
        elif name == "data":
            frame.data = value if frame.data is None else frame.data + "\n" + value
        elif name == "retry":
            assert value.isdigit(), line
            frame.retry = int(value)
        else:
            raise AssertionError(f"unexpected SSE field {line!r}")
    if _filled(frame):
        yield frame


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
    client: httpx.AsyncClient, url: str, params: dict[str, str] | None = None
) -> StreamResult:
    async with client.stream("GET", url, params=params) as response:
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
