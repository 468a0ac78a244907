"""The use case: one recommendation, from validated input to a stream of events.

    plan:     validate -> session -> embed -> intent -> category -> candidates -> prompt
    admit:    capacity (MAX_CONCURRENT_GENERATIONS) and the session's own slots
    generate: upstream stream -> scrubber -> guard -> events (app/chat/generation.py)

A free-text turn is embedded once: the intent step and retrieval read the same vector. When the
embedding model's queue is long, the turn is read by its words instead (lexical intent,
sparse-only search) rather than wait behind it.

The candidates are the catalogue challenges the model chooses among: in the answer's category,
fitting the user's situation (base-info's location and work type), not shown before in the
session ("다른 거", "더 쉬운 거"), or exactly the ones just shown ("그 중에 …").

Both entry points are async generators of ``StreamEvent``: any number of ``Delta``, then
exactly one ``Done`` or ``Failed``, then nothing. Input errors are the first and only event,
so the GET (SSE) and POST (JSON) routes share every line of this file.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from app.chat.generation import generate
from app.chat.intent import (
    Evidence,
    Intent,
    IntentKind,
    Intents,
    catalogue_evidence,
    normalize_message,
)
from app.chat.plan import TurnPlan
from app.chat.prompts import PromptInput, answer_messages
from app.chat.recommend import Opening, compose_recommend
from app.chat.sessions import SessionState, SessionStore
from app.chat.slots import SessionSlots
from app.config import Settings
from app.domain.categories import LOCATIONS, WORK_TYPES, Category, normalize_choice, parse_category
from app.domain.errors import BadInput, InvalidValue, Overloaded
from app.domain.events import Delta, Done, Failed, StreamEvent
from app.llm.client import LLMClient
from app.llm.schema import Answer
from app.metrics import Metrics
from app.rag.retriever import EmbedderBusy, Hit, QueryVector, Retriever
from app.rag.scope import ANYWHERE, Scope

__all__ = ["OFF_TOPIC_REPLY", "RecommendationService"]

log = logging.getLogger(__name__)

OFF_TOPIC_REPLY = (
    "저는 일상에서 실천할 수 있는 친환경 챌린지를 추천해 드리는 챗봇이에요. "
    "제로웨이스트, 플로깅, 탄소발자국, 에너지 절약, 업사이클, 문화 공유, 디지털 탄소, "
    "비건 중에서 궁금한 분야를 말씀해 주시거나 "
    "'사무실에서 할 수 있는 챌린지 추천해 줘'처럼 물어봐 주세요."
)
_FALLBACK_CATEGORY = Category.ZERO_WASTE
#: Nearest catalogue documents whose categories are evidence of a message's category
#: (the weight: app/chat/intent.py CATALOGUE_WEIGHT).
_EVIDENCE_K = 10
#: Documents fitting the situation looked at to see which other categories still have some.
_ANOTHER_FIELD_K = 60
#: Tokens each composition needs at most: three titles of up to about 30 tokens in JSON; plus a
#: recommend at its length bound (160 characters, about 1.3 tokens each in Qwen's tokenizer);
#: plus three descriptions.
_MAX_TOKENS = {"titles": 128, "recommend": 320, "descriptions": 768}
#: What the gateway's recommend says the turn did, by what the message asked for.
_OPENING_KIND = {
    IntentKind.SWITCH: "switch",
    IntentKind.ANOTHER: "another",
    IntentKind.BACK_TO_BASE: "back",
    IntentKind.MORE: "more",
    IntentKind.AMONG: "among",
    IntentKind.ASK: "ask",
}


@dataclass(frozen=True, slots=True)
class _Query:
    """What a search looks for: the turn's words, and its embedding when it has one."""

    text: str
    vector: QueryVector | None = None
    by_words: bool = False  # read without its embedding (a burst): sparse-only search


class RecommendationService:
    def __init__(
        self,
        *,
        llm: LLMClient,
        retriever: Retriever,
        intents: Intents,
        sessions: SessionStore,
        settings: Settings,
        metrics: Metrics | None = None,
    ) -> None:
        self._llm = llm
        self._retriever = retriever
        self._intents = intents
        self._sessions = sessions
        self._settings = settings
        self._metrics = metrics or Metrics()
        self._generating = 0  # one event loop: a plain counter is exact
        self._session_slots = SessionSlots(settings.session_max_concurrent)
        self._max_tokens = settings.llm_max_tokens or _MAX_TOKENS[settings.answer_composition]

    # ------------------------------------------------------------------ base-info
    async def base_info(
        self,
        *,
        session_id: str,
        location: str | None,
        work_type: str | None,
        category: str | None,
        request_id: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        started = time.monotonic()
        given = {"location": location, "workType": work_type, "category": category}
        missing = [name for name, value in given.items() if not (value or "").strip()]
        if missing:
            yield Failed(
                BadInput(
                    f"missing {missing}",
                    message="위치, 근무 형태, 카테고리를 모두 선택해 주세요.",
                    data={"missingFields": missing},
                )
            )
            return
        place = normalize_choice(location or "", LOCATIONS)
        work = normalize_choice(work_type or "", WORK_TYPES)
        chosen = parse_category(category or "")
        invalid = [
            name
            for name, ok in (("location", place), ("workType", work), ("category", chosen))
            if ok is None
        ]
        if place is None or work is None or chosen is None:
            yield Failed(InvalidValue(invalid, f"invalid {invalid}"))
            return
        if (busy := self._at_capacity()) is not None:
            yield busy
            return

        state = await self._sessions.record(
            session_id, base_category=chosen, category=chosen, location=place, work_type=work
        )
        query = _Query(f"{chosen.label} {place} {work}")
        _, candidates = await self._fitting(query, chosen, state, more=False)
        prompt = PromptInput(category=chosen, candidates=candidates, location=place, work_type=work)
        plan = self._plan(
            session_id,
            request_id,
            started,
            prompt,
            Opening(chosen, "first", place, work, turn=len(state.turns)),
            user_text=f"사는 곳: {place}, 일하는 방식: {work}, 카테고리: {chosen.label}",
        )
        async for event in self._admit_and_generate(plan):
            yield event

    # ------------------------------------------------------------------ free-text
    async def free_text(
        self, *, session_id: str, message: str | None, request_id: str | None = None
    ) -> AsyncIterator[StreamEvent]:
        started = time.monotonic()
        text = normalize_message(message or "")
        if not text:
            yield Failed(BadInput("empty message", message="메시지를 입력해 주세요."))
            return
        limit = self._settings.max_message_chars
        if len(text) > limit:
            yield Failed(
                InvalidValue(
                    ["message"],
                    f"message of {len(text)} chars",
                    message=f"메시지는 {limit}자 이내로 입력해 주세요.",
                )
            )
            return
        if (busy := self._at_capacity()) is not None:
            yield busy
            return

        state = await self._sessions.load(session_id)
        query, nearest, intent = await self._understand(text, state)
        if intent.kind in (IntentKind.OFF_TOPIC, IntentKind.NONSENSE):
            async for event in _friendly_reply():
                yield event
            return
        category, candidates = await self._choose(query, intent, state, nearest)
        # A conversation begun here, without base-info, begins in its first answer's category.
        began = category if state.base_category is None else None
        await self._sessions.record(session_id, category=category, base_category=began)

        follow_up = intent.kind in (IntentKind.ASK, IntentKind.MORE, IntentKind.AMONG)
        previous = _previous_exchange(state) if follow_up and category is state.category else None
        keep = self._settings.prompt_history_turns
        # The turns replayed are those of this category: answers about another one would be
        # copied by a small model. Turns stored without a category count as the current one's.
        mine = [
            turn
            for turn in state.turns
            if turn.category is category or (turn.category is None and category is state.category)
        ]
        prompt = PromptInput(
            category=category,
            candidates=candidates,
            message=text,
            location=state.location,
            work_type=state.work_type,
            previous=previous,
            history=mine[-keep:] if keep else (),
        )
        among = intent.kind is IntentKind.AMONG and bool(state.last_shown)
        kind = _OPENING_KIND.get(intent.kind, "ask") if state.turns else "first"
        if intent.kind is IntentKind.AMONG and not among:
            kind = "ask"
        opening = Opening(
            category,
            kind,
            state.location,
            state.work_type,
            turn=len(state.turns),
            previous_category=state.category,
        )
        plan = self._plan(
            session_id, request_id, started, prompt, opening, user_text=text, among=among
        )
        async for event in self._admit_and_generate(plan):
            yield event

    async def _understand(
        self, text: str, state: SessionState
    ) -> tuple[_Query, tuple[Hit, ...], Intent]:
        """The turn as a search query (its embedding, or its words alone in a burst), its
        nearest catalogue documents, and what it asks for: the examples' reading, with those
        documents' categories as evidence of the category it is about."""
        try:
            vector: QueryVector | None = await self._retriever.embed(text)
        except EmbedderBusy:
            vector = None  # read by its words: lexical intent, sparse-only search
            self._metrics.lexical_turns.inc()
        query = _Query(text, vector, by_words=vector is None)
        nearest = await self._search(query, ANYWHERE, k=_EVIDENCE_K) or ()
        evidence = catalogue_evidence([hit.document.category for hit in nearest])
        intent = self._intents.decide(text, vector, state, evidence=evidence)
        if vector is None and Intents.needs_embedding(intent):
            intent = await self._confirm_refusal(text, state, intent, evidence)
        self._metrics.intents.labels(intent.kind.value).inc()
        return query, nearest, intent

    async def _confirm_refusal(
        self, text: str, state: SessionState, intent: Intent, evidence: Evidence | None
    ) -> Intent:
        """An off-topic verdict read by words alone, decided again on the turn's embedding
        (waited for, burst or not): the lexical reading refuses some plain questions ("전기
        아끼는 법 알려줘"), and a refused user is worse off than a burst a little slower. The
        turn's search stays by words: the burst's rule for search."""
        try:
            vector = await self._retriever.embed(text, wait=True)
        except EmbedderBusy:
            self._metrics.lexical_refusals.labels("unconfirmed").inc()
            return intent
        decided = self._intents.decide(text, vector, state, evidence=evidence)
        confirmed = decided.kind in (IntentKind.OFF_TOPIC, IntentKind.NONSENSE)
        self._metrics.lexical_refusals.labels("confirmed" if confirmed else "overturned").inc()
        return decided

    # ------------------------------------------------------------------ candidates
    async def _choose(
        self, query: _Query, intent: Intent, state: SessionState, nearest: tuple[Hit, ...]
    ) -> tuple[Category, tuple[Hit, ...]]:
        """The answer's category and the challenges the model chooses among."""
        kind = intent.kind
        if kind is IntentKind.AMONG and state.last_shown:
            last = state.last_shown
            among = await self._search(query, Scope(only=frozenset(last)), k=len(last))
            if among:
                return state.category or among[0].document.category, among
        if kind is IntentKind.ANOTHER:
            category: Category | None = await self._another_field(query, state)
        else:
            category = _next_category(intent, state)
        if category is None:
            # Nothing chosen yet: the closest document decides (the server's choice, not the
            # model's).
            category = nearest[0].document.category if nearest else _FALLBACK_CATEGORY
        return await self._fitting(query, category, state, more=kind is IntentKind.MORE)

    async def _another_field(self, query: _Query, state: SessionState) -> Category:
        """The user asked for '아예 다른 분야로': a category the user has not been in (neither the current nor
        base-info's), at random among those that still hold challenges fitting the user's
        situation and not shown yet (some situations fit none in some categories)."""
        seen = {state.category, state.base_category}
        others = [c for c in Category if c not in seen]
        if state.location and state.work_type:
            scope = Scope(None, state.location, state.work_type, exclude=state.shown)
            hits = await self._search(query, scope, k=_ANOTHER_FIELD_K) or ()
            fitting = {hit.document.category for hit in hits} - seen
            others = [c for c in others if c in fitting] or others
        return random.choice(others)

    async def _fitting(
        self, query: _Query, category: Category, state: SessionState, *, more: bool
    ) -> tuple[Category, tuple[Hit, ...]]:
        """The best candidates for the session's situation, searched scope after scope
        (:func:`_scopes`) until one holds any. A scope without a category (``more``, when the
        category has no fitting challenge left) moves the answer to its best hit's category."""
        for scope in _scopes(category, state.location, state.work_type, state.shown, more=more):
            hits = await self._search(query, scope)
            if hits is None:  # the store failed: no use asking it again
                break
            if hits:
                if scope.category is None:
                    category = hits[0].document.category
                    hits = tuple(h for h in hits if h.document.category is category)
                return category, hits
        return category, ()

    async def _search(
        self, query: _Query, scope: Scope, *, k: int | None = None
    ) -> tuple[Hit, ...] | None:
        """Search within ``scope`` (by its words alone for a turn read without its embedding).
        A failing vector store (None) degrades the answer (no candidates: the model writes it
        all) instead of failing it, and /ready reports the store."""
        with self._metrics.retrieval.time():
            try:
                hits = await self._retriever.retrieve(
                    query.text,
                    k=k or self._settings.retrieval_k,
                    scope=scope,
                    vector=query.vector,
                    lexical=query.by_words,
                )
            except Exception:
                log.warning("retrieval failed; answering without candidates", exc_info=True)
                return None
        return tuple(hits)

    # ------------------------------------------------------------------ plan, admit, generate
    def _plan(
        self,
        session_id: str,
        request_id: str | None,
        started: float,
        prompt: PromptInput,
        opening: Opening,
        *,
        user_text: str,
        among: bool = False,
    ) -> TurnPlan:
        settings = self._settings
        # Without candidates (the vector store failed) there is nothing to choose among: the
        # model writes the whole answer.
        composition = settings.answer_composition if prompt.candidates else "descriptions"
        picks = settings.answer_challenges
        recommend = compose_recommend(opening) if composition == "titles" else None
        return TurnPlan(
            session_id=session_id,
            request_id=request_id,
            started=started,
            category=prompt.category,
            candidates=tuple(prompt.candidates),
            messages=tuple(answer_messages(prompt, composition, examples=settings.prompt_examples)),
            composition=composition,
            # "그 중에 제일 쉬운 건?": the one that answers it, not the same list again.
            min_picks=1 if among else min(picks, len(prompt.candidates)) or 1,
            max_picks=1 if among else picks,
            grounded=settings.llm_grounded_titles and bool(prompt.candidates),
            user_text=user_text,
            recommend=recommend,
        )

    def _at_capacity(self) -> Failed | None:
        """The refusal past MAX_CONCURRENT_GENERATIONS, checked before retrieval too, so a
        refusal costs no embedding. Refuse at once rather than queue: open streams keep their
        speed, and the client (EventSource or relay) gets a retry hint, not a silent wait."""
        if self._generating < self._settings.max_concurrent_generations:
            return None
        return Failed(Overloaded("MAX_CONCURRENT_GENERATIONS reached", retry_after=2.0))

    async def _admit_and_generate(self, plan: TurnPlan) -> AsyncIterator[StreamEvent]:
        if (busy := self._at_capacity()) is not None:  # again: retrieval took a while
            yield busy
            return
        with self._session_slots.hold(plan.session_id) as refusal:
            if refusal is not None:
                yield Failed(refusal)
                return
            self._generating += 1
            try:
                async for event in generate(
                    plan,
                    llm=self._llm,
                    sessions=self._sessions,
                    metrics=self._metrics,
                    max_tokens=self._max_tokens,
                ):
                    yield event
            finally:
                self._generating -= 1


def _scopes(
    category: Category,
    location: str | None,
    work_type: str | None,
    shown: frozenset[str],
    *,
    more: bool,
) -> Iterator[Scope]:
    """Where to look for candidates, best first. Always first: in the category, fitting the
    situation (base-info's location and work type, when given), not shown before. Then, for an
    ordinary turn, shown before too, then fitting less of the situation. For "more" (SPEC: in
    the current category while it has fitting ones left): the nearest other category's fitting
    ones not shown, then fitting less, then anything."""
    situated = bool(location and work_type)
    tried: set[Scope] = set()
    order = [Scope(category, location, work_type, exclude=shown)]
    if more:
        order.append(Scope(None, location, work_type, exclude=shown))
    else:
        order.append(Scope(category, location, work_type))
    if situated:
        order += [
            Scope(category, work_type=work_type, exclude=shown),
            Scope(category, location=location, exclude=shown),
        ]
    order += [Scope(category, exclude=shown), Scope(category)]
    for scope in order:
        if scope not in tried:
            tried.add(scope)
            yield scope


def _previous_exchange(state: SessionState) -> tuple[str, list[str]] | None:
    """The last turn's words and the titles it showed, for a follow-up's prompt."""
    if not state.turns:
        return None
    last = state.turns[-1]
    try:
        answer = Answer.model_validate_json(last.assistant)
    except ValueError:  # a turn stored by another release
        return last.user, []
    return last.user, [item.title for item in answer.challenges]


async def _friendly_reply() -> AsyncIterator[StreamEvent]:
    """What the bot can do, as a normal stream, for off-topic or nonsense input."""
    for sentence in re.split(r"(?<=\. )", OFF_TOPIC_REPLY):
        yield Delta(sentence)
    yield Done({"recommend": OFF_TOPIC_REPLY, "challenges": []})


def _next_category(intent: Intent, state: SessionState) -> Category | None:
    kind = intent.kind
    if kind is IntentKind.SWITCH:
        return intent.category
    if kind is IntentKind.BACK_TO_BASE:
        return state.base_category or state.category
    return state.category
