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
    """One SSE block: an event (``event`` set) or a comment-only block (``comments``)."""

    event: str | None = None
    id: str | None = None
    data: str | None = None
    comments: list[str] = field(default_factory=list)

    @property
    def payload(self) -> dict[str, Any]:
        assert self.data is not None, self
        value = json.loads(self.data)
        assert isinstance(value, dict)
        return value


async def iter_frames(lines: AsyncIterator[str]) -> AsyncIterator[Frame]:
    frame = Frame()
    async for line in lines:
        if line == "":
            if frame.event or frame.data is not None or frame.comments:
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
        else:
            raise AssertionError(f"unexpected SSE field {line!r}")
    if frame.event or frame.data is not None or frame.comments:
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
    terminals = [e for e in events if e.event in {"close", "error"}]
    assert len(terminals) == 1, terminals
    assert result.frames[-1] is terminals[0], "nothing may follow the terminal event"
    for event in events:
        payload = event.payload
        assert set(payload) == {"status", "message", "data"}
        assert isinstance(payload["message"], str) and payload["message"]
    for event in events[:-1]:
        assert event.event == "challenge" and event.payload["status"] == 200
