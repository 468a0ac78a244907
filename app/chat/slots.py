"""Per-session concurrency: SESSION_MAX_CONCURRENT generations at once on one session."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.domain.errors import GatewayError, RateLimited

__all__ = ["SessionSlots"]


class SessionSlots:
    """At most ``per_session`` generations at once on one session (two tabs are fine, a
    script hammering one session is not)."""

    def __init__(self, per_session: int) -> None:
        self._per_session = per_session
        self._running: dict[str, int] = {}

    @contextmanager
    def hold(self, session_id: str) -> Iterator[GatewayError | None]:
        """Hold one of the session's slots; yields the refusal instead when none is free."""
        running = self._running.get(session_id, 0)
        if running >= self._per_session:
            yield RateLimited(
                f"session {session_id} already runs {running}",
                message="이전 답변을 아직 만들고 있어요. 끝난 뒤에 다시 보내 주세요.",
                retry_after=2.0,
            )
            return
        self._running[session_id] = running + 1
        try:
            yield None
        finally:
            left = self._running[session_id] - 1
            if left:
                self._running[session_id] = left
            else:
                del self._running[session_id]
