"""Conversation state per chat window, behind an interface a shared store can implement.

The in-memory store is bounded three ways: by session count (least recently used goes
first), by turns per session, and by age since last use. Every method runs without an
``await`` between its read and its write, so on one event loop each call is atomic: two
tabs on one session interleave whole turns, never half-updates.
"""

from __future__ import annotations

import abc
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from app.domain.categories import Category

__all__ = [
    "InMemorySessionStore",
    "SessionState",
    "SessionStore",
    "SessionUpdate",
    "Turn",
    "new_session_id",
]


@dataclass(frozen=True, slots=True)
class Turn:
    user: str
    assistant: str
    category: Category | None = None  # the answer's category (None: stored by an older release)
    shown: tuple[str, ...] = ()  # the doc ids of the challenges the answer showed
    # The exchange as the model had it, for a later prompt to replay word for word (its
    # prefix then is this turn's prompt: app/chat/planning.py): the last user message sent
    # upstream, the model's own text ("" for a turn not to replay), and how many earlier
    # turns that prompt replayed.
    asked: str = ""
    reply: str = ""
    replayed: int = 0
    # What the turn asked of its challenges (app/chat/constraints.py Constraint values), kept
    # by the next turns until the user moves on, and the situation told in words so far
    # ("at:바닷가", "job:현장직"), kept for the session.
    constraints: tuple[str, ...] = ()
    told: tuple[str, ...] = ()
    # What the conversation is about (the words a follow-up searches with before its own).
    topic: str = ""


@dataclass(frozen=True, slots=True)
class SessionState:
    session_id: str
    # Where the conversation began: base-info's choice, else the first free-text answer's
    # category. "처음 카테고리로" returns to it.
    base_category: Category | None = None
    category: Category | None = None  # the current one (free-text may switch it)
    location: str | None = None
    work_type: str | None = None
    turns: tuple[Turn, ...] = ()
    updated_at: float = field(default_factory=time.monotonic)

    @property
    def shown(self) -> frozenset[str]:
        """The doc ids of every challenge shown in the turns remembered."""
        return frozenset(doc_id for turn in self.turns for doc_id in turn.shown)

    @property
    def constraints(self) -> tuple[str, ...]:
        """The constraints in force: the last turn's."""
        return self.turns[-1].constraints if self.turns else ()

    @property
    def topic(self) -> str:
        """What the conversation is about: the last turn's topic."""
        return self.turns[-1].topic if self.turns else ""

    @property
    def told(self) -> tuple[str, ...]:
        """The situation told in words so far: the last turn's."""
        return self.turns[-1].told if self.turns else ()

    @property
    def began(self) -> Turn | None:
        """The first turn remembered in the category the conversation began in, with a topic:
        where "처음 얘기로 돌아가자" goes back to."""
        first = self.base_category
        return next((turn for turn in self.turns if turn.category is first and turn.topic), None)

    @property
    def last_shown(self) -> tuple[str, ...]:
        """The doc ids of the challenges of the last answer that showed any."""
        for turn in reversed(self.turns):
            if turn.shown:
                return turn.shown
        return ()

    @property
    def last_list(self) -> tuple[str, ...]:
        """The list "그 중에" points into: the last answer that showed any, or, when that answer
        only chose among the one before it (fewer, all shown there), that one's."""
        answers = [turn.shown for turn in self.turns if turn.shown]
        if not answers:
            return ()
        pointed = answers[-1]
        for earlier in reversed(answers[:-1]):
            if not set(pointed) < set(earlier):
                break
            pointed = earlier
        return pointed


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    """What one ``record`` call changes: a field left None (or empty) keeps the stored one."""

    turn: Turn | None = None
    base_category: Category | None = None
    category: Category | None = None
    location: str | None = None
    work_type: str | None = None

    def fields(self) -> dict[str, Category | str]:
        """The fields this update replaces, by name: the given, non-empty ones."""
        given = {
            "base_category": self.base_category,
            "category": self.category,
            "location": self.location,
            "work_type": self.work_type,
        }
        return {name: value for name, value in given.items() if value}


class SessionStore(abc.ABC):
    """Where conversations are kept; ``record`` is one atomic update in every store."""

    @abc.abstractmethod
    async def load(self, session_id: str) -> SessionState:
        """The session's state; a fresh one when unknown or expired."""

    async def record(
        self,
        session_id: str,
        *,
        turn: Turn | None = None,
        base_category: Category | None = None,
        category: Category | None = None,
        location: str | None = None,
        work_type: str | None = None,
    ) -> SessionState:
        """Atomically set the given fields and append ``turn``; returns the new state."""
        update = SessionUpdate(turn, base_category, category, location, work_type)
        return await self._apply(session_id, update)

    @abc.abstractmethod
    async def _apply(self, session_id: str, update: SessionUpdate) -> SessionState:
        """``record``'s work, in one step that nothing else interleaves."""


def new_session_id() -> str:
    return f"anon-{uuid.uuid4().hex}"


class InMemorySessionStore(SessionStore):
    def __init__(self, *, max_sessions: int, max_turns: int, ttl_seconds: float) -> None:
        self._sessions: OrderedDict[str, SessionState] = OrderedDict()
        self._max_sessions = max_sessions
        self._max_turns = max_turns
        self._ttl = ttl_seconds

    def __len__(self) -> int:
        return len(self._sessions)

    def _get(self, session_id: str, now: float) -> SessionState:
        state = self._sessions.get(session_id)
        if state is None or now - state.updated_at > self._ttl:
            return SessionState(session_id=session_id, updated_at=now)
        return state

    async def load(self, session_id: str) -> SessionState:
        return self._get(session_id, time.monotonic())

    async def _apply(self, session_id: str, update: SessionUpdate) -> SessionState:
        now = time.monotonic()
        state = self._get(session_id, now)
        turns = state.turns
        if update.turn is not None and self._max_turns > 0:
            turns = (*turns, update.turn)[-self._max_turns :]
        state = replace(state, **update.fields(), turns=turns, updated_at=now)  # type: ignore[arg-type]
        self._sessions[session_id] = state
        self._sessions.move_to_end(session_id)
        self._evict(now)
        return state

    def _evict(self, now: float) -> None:
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)
        # Oldest first: stop at the first session still fresh.
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.updated_at <= self._ttl:
                break
            self._sessions.popitem(last=False)
