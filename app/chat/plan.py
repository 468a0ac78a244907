"""A turn's input, and the turn decided: what the model is asked, among which challenges, and
what to remember.

The routes validate the request into a :class:`BaseInfoTurn` or :class:`FreeTextTurn`;
planning (app/chat/planning.py) reads it with the session and the message's meaning and
produces a :class:`TurnPlan`, or a :class:`Reply` when no model is needed; generation
(app/chat/generation.py) takes only the plan. The plan is frozen: nothing decided before the
upstream call changes while the answer streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from app.domain.categories import Category
from app.domain.events import StreamEvent
from app.llm.client import ChatMessage
from app.llm.schema import ChallengeItem, Composition, answer_schema
from app.rag.retriever import Hit

__all__ = ["BaseInfoTurn", "FreeTextTurn", "Reply", "TurnPlan"]


@dataclass(frozen=True, slots=True)
class BaseInfoTurn:
    """A base-info selection, validated: the user's situation and the category chosen."""

    session_id: str
    request_id: str | None
    started: float  # time.monotonic() when the request arrived
    location: str
    work_type: str
    category: Category
    endpoint: str = "base-info"  # the metrics' labels: the route, and the caller's name
    client: str = "anonymous"


@dataclass(frozen=True, slots=True)
class FreeTextTurn:
    """A free-text message, validated (normalized, not empty, within MAX_MESSAGE_CHARS)."""

    session_id: str
    request_id: str | None
    started: float
    message: str
    endpoint: str = "free-text"
    client: str = "anonymous"


@dataclass(frozen=True, slots=True)
class Reply:
    """A turn answered without the model (off-topic: what the bot can do), its whole stream."""

    events: tuple[StreamEvent, ...]


@dataclass(frozen=True)
class TurnPlan:
    session_id: str
    request_id: str | None
    started: float  # time.monotonic() when the request arrived
    category: Category  # the answer's category (the session's, never the model's)
    candidates: tuple[Hit, ...]  # the catalogue challenges the model chooses among, best first
    messages: tuple[ChatMessage, ...]
    composition: Composition
    min_picks: int  # challenges the answer lists at least (when there are as many candidates)
    max_picks: int
    grounded: bool  # titles restricted to the candidates' (a JSON-schema enum)
    user_text: str  # what the session remembers of the user's side of the turn
    # The picks prompt replays the conversation (PROMPT_REPLAY_TURNS; app/chat/planning.py):
    # the session keeps this exchange word for word; ``replayed`` earlier ones are in it.
    replays: bool = False
    replayed: int = 0
    recommend: str | None = None  # the gateway's own recommend (the ``picks`` composition)
    # The first challenge, put by the gateway before the model's choices (the ``picks``
    # composition: app/chat/ranking.py), and the description shown for it: the catalogue's,
    # less the sentence the recommend already quotes as a question's answer.
    lead: Hit | None = None
    lead_description: str = ""
    suggestions: tuple[str, ...] = ()  # follow-ups to tap (the SSE close)
    constraints: tuple[str, ...] = ()  # in force for this turn (the session keeps them)
    told: tuple[str, ...] = ()  # the situation told in words so far
    topic: str = ""  # what the conversation is about (a follow-up searches with it)
    endpoint: str = "other"  # the token counters' labels (the turn's)
    client: str = "anonymous"

    @property
    def titles(self) -> list[str]:
        return [hit.document.title for hit in self.candidates]

    @property
    def needs_model(self) -> bool:
        """Whether the model has anything to choose: not when the gateway's first challenge
        is the whole answer (one is asked for, or no other candidate is left)."""
        return self.lead is None or (bool(self.candidates) and self.max_picks > 0)

    @property
    def lead_item(self) -> ChallengeItem | None:
        if self.lead is None:
            return None
        return ChallengeItem(title=self.lead.document.title, description=self.lead_description)

    @property
    def opening(self) -> str:
        """What is shown before the model's choices: the recommend, then the first challenge
        laid out as every challenge is (SPEC "Display text")."""
        text = self.recommend or ""
        if self.lead is not None:
            text += f"\n\n{self.lead.document.title}\n{self.lead_description}"
        return text

    @cached_property
    def catalogue(self) -> Mapping[str, str]:
        """Each candidate's title and its catalogue description."""
        return {hit.document.title: hit.document.body for hit in self.candidates}

    def doc_ids(self, titles: list[str]) -> tuple[str, ...]:
        """The doc ids of the challenges with these titles (what the session remembers)."""
        hits = (*self.candidates, self.lead) if self.lead else self.candidates
        by_title = {hit.document.title: hit.document.id for hit in hits}
        return tuple(by_title[title] for title in titles if title in by_title)

    def schema(self) -> dict[str, Any]:
        # Picks are numbers in the candidates' list: always that list's.
        grounded = self.grounded or self.composition == "picks"
        return answer_schema(
            self.titles if grounded else (),
            composition=self.composition,
            min_items=self.min_picks,
            max_items=self.max_picks,
        )
