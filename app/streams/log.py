"""A stream's events as kept for its readers and reconnects.

``LoggedEvent`` is one event of a stream's log; ``<streamId>.<seq>`` is its SSE id;
``StreamAborted`` and ``shutdown_error`` are the terminal errors a stream can end with besides
its pipeline's own; ``StreamSource`` is what one response reads; ``SharedLog`` is what the hub
asks of a log shared with other processes (``app.streams.redis_log``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import anyio

from app.domain.errors import GatewayError, Overloaded
from app.domain.events import (
    CHALLENGE,
    CLOSE,
    ERROR,
    MESSAGE_CHUNK,
    MESSAGE_DONE,
    Delta,
    Done,
    StreamEvent,
    envelope_json,
)

__all__ = [
    "SHUTDOWN_MESSAGE",
    "LoggedEvent",
    "SharedLog",
    "StreamAborted",
    "StreamSource",
    "parse_event_id",
    "shutdown_error",
]

SHUTDOWN_MESSAGE = "서버가 점검을 위해 잠시 멈춰요. 잠시 후 다시 시도해 주세요."
SHUTDOWN_RETRY_AFTER = 5.0
_STREAM_ID_CHARS = frozenset("0123456789abcdef")


class StreamAborted(GatewayError):
    """Sent to a reconnect when the generation had been stopped after its client left."""

    status = 499  # "client closed request", as the POST endpoints answer a caller that left
    default_message = "연결이 끊긴 사이 답변이 중단되었어요. 다시 질문해 주세요."


def shutdown_error() -> Overloaded:
    return Overloaded("shutting down", retry_after=SHUTDOWN_RETRY_AFTER, message=SHUTDOWN_MESSAGE)


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One event of a stream as kept in its log.

    ``body`` is the display text of a ``challenge`` (its envelope is built when sent: most
    events are a few characters), the whole envelope JSON of a ``close`` or ``error``.
    """

    seq: int
    name: str  # challenge | close | error
    status: int
    body: str

    @property
    def terminal(self) -> bool:
        return self.name != CHALLENGE

    @property
    def data(self) -> str:
        """The SSE ``data``: always the JSON envelope."""
        if self.name == CHALLENGE:
            return envelope_json(200, MESSAGE_CHUNK, self.body)
        return self.body

    @classmethod
    def of(cls, seq: int, event: StreamEvent) -> LoggedEvent:
        if isinstance(event, Delta):
            return cls(seq, CHALLENGE, 200, event.text)
        if isinstance(event, Done):
            return cls(seq, CLOSE, 200, envelope_json(200, MESSAGE_DONE, event.streamed))
        error = event.error
        return cls(seq, ERROR, error.status, envelope_json(error.status, error.message, error.data))


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``"<streamId>.<seq>"`` -> ``(streamId, seq)``; None for anything else."""
    stream_id, dot, seq = value.strip().rpartition(".")
    if not dot or len(stream_id) != 32 or not set(stream_id) <= _STREAM_ID_CHARS:
        return None
    if not seq.isascii() or not seq.isdigit() or len(seq) > 9:
        return None
    return stream_id, int(seq)


class StreamSource(Protocol):
    """What one response reads: a stream's events after a given one, live ones included."""

    @property
    def stream_id(self) -> str: ...

    def attach(self) -> None:
        """The response starts reading (called once, before the first ``events_after``)."""

    def release(self) -> None:
        """The response is over, whatever the reason (called once, never awaits)."""

    async def events_after(self, seq: int, wait: float) -> list[LoggedEvent]:
        """The events after ``seq``, waiting up to ``wait`` seconds for one; ``[]`` when none came."""
        ...


class SharedLog(Protocol):
    """A stream log shared by the gateway processes (Redis), as the hub uses it."""

    async def run(self, live_ids: Callable[[], list[str]]) -> None:
        """Flush and refresh in the background until cancelled; ``live_ids`` are this
        process's streams still generating."""
        ...

    def started(self, stream_id: str, owner: str) -> None: ...

    def record(self, stream_id: str, record: LoggedEvent) -> None: ...

    async def resume(
        self, stream_id: str, after: int, drain_expired: anyio.Event, owner: str
    ) -> StreamSource | None:
        """A source for a stream another process generates; None when there is nothing to
        send or the stream is not ``owner``'s. ``drain_expired`` is set when this process's
        shutdown grace is over."""
        ...

    async def has_reader(self, stream_id: str) -> bool: ...
