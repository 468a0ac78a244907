"""Server-sent events, decoded: the one reader of the SSE wire format in this repository.

Two views of the same rules (lines end in CRLF, LF or CR; a blank line ends an event; ``data``
lines join with LF; a field's value loses one leading space; a block without its closing
blank line is dropped):

- :func:`iter_sse_data`, from a body's bytes, yields each event's ``data`` only: what the
  upstream client reads from vLLM on every token, so it stays on bytes (``json.loads`` reads
  UTF-8 bytes itself) and skips everything else;
- :func:`iter_frames`, from text lines (``httpx.Response.aiter_lines``), yields every block
  with all its fields and comments, in order: what the tests and benches read from our own
  streams, where a ``: ping`` or a field out of place is the thing to check.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SseFrame", "iter_frames", "iter_sse_data"]


@dataclass
class SseFrame:
    """One block: an event (``event`` and/or ``data``), comments alone (``: ping``), or fields
    alone (a stream's opening ``id`` and ``retry``). ``unknown`` keeps lines of any other
    field, which the SSE rules ignore."""

    event: str | None = None
    id: str | None = None
    data: str | None = None
    retry: int | None = None
    comments: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def payload(self) -> Any:
        """``data`` read as JSON."""
        if self.data is None:
            raise ValueError("this block has no data")
        return json.loads(self.data)

    def __bool__(self) -> bool:
        return bool(
            self.event
            or self.data is not None
            or self.comments
            or self.id is not None
            or self.retry is not None
            or self.unknown
        )


async def iter_frames(
    lines: AsyncIterator[str], *, incomplete: bool = False
) -> AsyncIterator[SseFrame]:
    """Every block of a stream, from its lines (without their line ends). ``incomplete``
    also yields a last block that lacks its closing blank line (the SSE rules drop it; a test
    wants to see everything the server sent)."""
    frame = SseFrame()
    async for line in lines:
        if line == "":
            if frame:
                yield frame
            frame = SseFrame()
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
        elif name == "retry" and value.isdigit():
            frame.retry = int(value)
        else:
            frame.unknown.append(line)
    if incomplete and frame:
        yield frame


async def iter_sse_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The ``data`` of each server-sent event, per the SSE rules (lines end in CRLF, LF or CR;
    multi-line data joined by LF; comments and other fields skipped; an unfinished last event
    dropped), from the body's bytes.

    Bytes, not text: ``json.loads`` reads UTF-8 bytes itself, and the byte-level split is
    cheaper than httpx's text and line decoders stacked on the stream."""
    rest = b""
    data: list[bytes] = []
    async for chunk in chunks:
        if rest:
            chunk = rest + chunk
        lines = chunk.splitlines(keepends=True)
        # An unfinished last line waits for more; so does one ending in CR (an LF may follow).
        rest = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
        for line in lines:
            line = line.rstrip(b"\r\n")
            if not line:
                if data:
                    yield data[0] if len(data) == 1 else b"\n".join(data)
                    data.clear()
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
            elif line == b"data":
                data.append(b"")
            # Comments (":") and other fields (event, id, retry) carry nothing we use.
    # An event without its closing blank line is dropped, as the SSE rules say: a stream cut
    # there ends before [DONE] ("cut"), not with half a JSON object ("malformed").
