"""Pipeline events -> server-sent events, with the one guarantee the old server broke:
nothing is ever sent after the terminal event.

sse-starlette frames the events, pings while we wait, notices the client leaving and
cancels the generator (which closes the upstream request). Its ping task checks
``response.active`` under the send lock before each ping; we clear that flag *before*
yielding the terminal event, so a ping that wakes while the stream winds down (closing the
upstream, recording the turn) finds the gate shut. Without this, such a ping lands after
``close``: see tests/test_sse_terminal.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing

from sse_starlette import EventSourceResponse, ServerSentEvent

from app.chat.events import (
    MESSAGE_CHUNK,
    MESSAGE_DONE,
    Delta,
    Done,
    Failed,
    StreamEvent,
    envelope_json,
)
from app.errors import InternalFailure

__all__ = ["event_source_response", "to_sse"]


def to_sse(event: StreamEvent, event_id: int) -> ServerSentEvent:
    if isinstance(event, Delta):
        data = envelope_json(200, MESSAGE_CHUNK, event.text)
        return ServerSentEvent(data=data, event="challenge", id=str(event_id))
    if isinstance(event, Done):
        data = envelope_json(200, MESSAGE_DONE, event.payload)
        return ServerSentEvent(data=data, event="close", id=str(event_id))
    error = event.error
    data = envelope_json(error.status, error.message, error.data)
    return ServerSentEvent(data=data, event="error", id=str(event_id))


def event_source_response(
    events: AsyncIterator[StreamEvent],
    *,
    ping_interval: float,
    send_timeout: float,
    headers: Mapping[str, str] | None = None,
) -> EventSourceResponse:
    response: EventSourceResponse

    async def frames() -> AsyncIterator[ServerSentEvent]:
        async with aclosing(events):  # type: ignore[type-var]
            event_id = 0
            async for event in events:
                event_id += 1
                if not isinstance(event, Delta):
                    response.active = False  # shut the ping gate first (module docstring)
                    yield to_sse(event, event_id)
                    return
                yield to_sse(event, event_id)
            # A pipeline must end with Done or Failed; if one ever does not, say so.
            response.active = False
            yield to_sse(Failed(InternalFailure("stream ended without a result")), event_id + 1)

    response = EventSourceResponse(
        frames(), ping=ping_interval, send_timeout=send_timeout, headers=headers
    )
    return response
