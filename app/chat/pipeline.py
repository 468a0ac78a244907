"""The use case: one recommendation, from validated input to a stream of events.

    validate -> session -> embed -> intent -> retrieve -> prompt -> upstream stream -> scrubber
    -> events

A free-text turn is embedded once: the intent step and retrieval read the same vector. When the
embedding model's queue is long, the turn is read by its words instead (lexical intent,
sparse-only search) rather than wait behind it.

Both entry points are async generators of ``StreamEvent``: any number of ``Delta``, then
exactly one ``Done`` or ``Failed``, then nothing. Input errors are the first and only event,
so the GET (SSE) and POST (JSON) routes share every line of this file.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from app.chat.intent import Intent, IntentKind, Intents, normalize_message
from app.chat.prompts import base_info_messages, free_text_messages
from app.chat.sessions import SessionState, SessionStore, Turn
from app.chat.slots import SessionSlots
from app.config import Settings
from app.domain.categories import LOCATIONS, WORK_TYPES, Category, normalize_choice, parse_category
from app.domain.errors import (
    BadInput,
    GatewayError,
    InternalFailure,
    InvalidValue,
    Overloaded,
    UpstreamFailed,
)
from app.domain.events import Delta, Done, Failed, StreamEvent
from app.llm.client import ChatMessage, LLMClient
from app.llm.repetition import RepetitionGuard, sentences
from app.llm.schema import (
    DESCRIPTION_MAX_CHARS,
    MAX_CHALLENGES,
    Answer,
    ChallengeItem,
    answer_schema,
)
from app.llm.scrubber import AnswerScrubber
from app.metrics import Metrics
from app.rag.retriever import EmbedderBusy, Hit, QueryVector, Retriever

__all__ = ["OFF_TOPIC_REPLY", "RecommendationService"]

log = logging.getLogger(__name__)

OFF_TOPIC_REPLY = (
    "저는 일상에서 실천할 수 있는 친환경 챌린지를 추천해 드리는 챗봇이에요. "
    "제로웨이스트, 플로깅, 탄소발자국, 에너지 절약, 업사이클, 문화 공유, 디지털 탄소, "
    "비건 중에서 궁금한 분야를 말씀해 주시거나 "
    "'사무실에서 할 수 있는 챌린지 추천해 줘'처럼 물어봐 주세요."
)
_FALLBACK_CATEGORY = Category.ZERO_WASTE
_SALVAGE_RECOMMEND = "상황에 맞는 챌린지를 골라 봤어요."


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

        hits = await self._retrieve(f"{chosen.label} {place} {work}", chosen)
        await self._sessions.record(
            session_id, base_category=chosen, category=chosen, location=place, work_type=work
        )
        messages = base_info_messages(location=place, work_type=work, category=chosen, hits=hits)
        user_text = f"사는 곳: {place}, 일하는 방식: {work}, 카테고리: {chosen.label}"
        async for event in self._generate(
            session_id, messages, chosen, hits, user_text, request_id, started
        ):
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
        try:
            vector: QueryVector | None = await self._retriever.embed(text)
        except EmbedderBusy:
            vector = None  # read by its words: lexical intent, sparse-only search
            self._metrics.lexical_turns.inc()
        intent = self._intents.decide(text, vector, state)
        by_words = vector is None
        if by_words and Intents.needs_embedding(intent):
            intent = await self._confirm_refusal(text, state, intent)
        self._metrics.intents.labels(intent.kind.value).inc()
        if intent.kind in (IntentKind.OFF_TOPIC, IntentKind.NONSENSE):
            async for event in _friendly_reply():
                yield event
            return
        category = _next_category(intent, state)
        hits = await self._retrieve(text, category, vector, by_words=by_words)
        if category is None:
            # Nothing chosen yet: the closest document decides (the server's choice, not the model's).
            category = hits[0].document.category if hits else _FALLBACK_CATEGORY
        # A conversation begun here, without base-info, begins in its first answer's category.
        began = category if state.base_category is None else None
        await self._sessions.record(session_id, category=category, base_category=began)

        keep = self._settings.prompt_history_turns
        # The turns replayed are those of this category: answers about another one would be
        # copied by a small model. Turns stored without a category count as the current one's.
        mine = [
            turn
            for turn in state.turns
            if turn.category is category or (turn.category is None and category is state.category)
        ]
        history = mine[-keep:] if keep else ()
        messages = free_text_messages(
            message=text,
            category=category,
            history=history,
            hits=hits,
            location=state.location,
            work_type=state.work_type,
        )
        async for event in self._generate(
            session_id, messages, category, hits, text, request_id, started
        ):
            yield event

    async def _confirm_refusal(self, text: str, state: SessionState, intent: Intent) -> Intent:
        """An off-topic verdict read by words alone, decided again on the turn's embedding
        (waited for, burst or not): the lexical reading refuses some plain questions ("전기
        아끼는 법 알려줘"), and a refused user is worse off than a burst a little slower. The
        turn's search stays by words: the burst's rule for search."""
        try:
            vector = await self._retriever.embed(text, wait=True)
        except EmbedderBusy:
            self._metrics.lexical_refusals.labels("unconfirmed").inc()
            return intent
        decided = self._intents.decide(text, vector, state)
        confirmed = decided.kind in (IntentKind.OFF_TOPIC, IntentKind.NONSENSE)
        self._metrics.lexical_refusals.labels("confirmed" if confirmed else "overturned").inc()
        return decided

    async def _retrieve(
        self,
        query: str,
        category: Category | None,
        vector: QueryVector | None = None,
        *,
        by_words: bool = False,
    ) -> list[Hit]:
        """Context for the prompt (by its words alone for a turn read without its embedding).
        A failing vector store degrades the answer (no context) instead of failing it: the
        model can still recommend, and /ready reports the store."""
        with self._metrics.retrieval.time():
            try:
                return await self._retriever.retrieve(
                    query,
                    k=self._settings.retrieval_k,
                    category=category,
                    vector=vector,
                    by_words=by_words,
                )
            except Exception:
                log.warning("retrieval failed; answering without context", exc_info=True)
                return []

    # ------------------------------------------------------------------ generation
    def _at_capacity(self) -> Failed | None:
        """The refusal past MAX_CONCURRENT_GENERATIONS, checked before retrieval too, so a
        refusal costs no embedding. Refuse at once rather than queue: open streams keep their
        speed, and the client (EventSource or relay) gets a retry hint, not a silent wait."""
        if self._generating < self._settings.max_concurrent_generations:
            return None
        return Failed(Overloaded("MAX_CONCURRENT_GENERATIONS reached", retry_after=2.0))

    async def _generate(
        self,
        session_id: str,
        messages: Sequence[ChatMessage],
        category: Category,
        hits: Sequence[Hit],
        user_text: str,
        request_id: str | None,
        started: float,
    ) -> AsyncIterator[StreamEvent]:
        if (busy := self._at_capacity()) is not None:  # again: retrieval took a while
            yield busy
            return
        with self._session_slots.hold(session_id) as refusal:
            if refusal is not None:
                yield Failed(refusal)
                return
            self._generating += 1
            try:
                async for event in self._generate_now(
                    session_id, messages, category, hits, user_text, request_id, started
                ):
                    yield event
            finally:
                self._generating -= 1

    async def _generate_now(
        self,
        session_id: str,
        messages: Sequence[ChatMessage],
        category: Category,
        hits: Sequence[Hit],
        user_text: str,
        request_id: str | None,
        started: float,
    ) -> AsyncIterator[StreamEvent]:
        scrubber = AnswerScrubber()
        guard = RepetitionGuard()
        metrics = self._metrics
        first_shown = False
        last = None
        titles = [hit.document.title for hit in hits] if self._settings.llm_grounded_titles else []
        pieces = self._llm.stream_chat(
            messages, request_id=request_id, schema=answer_schema(titles) if titles else None
        )
        try:
            async with aclosing(pieces):
                async for piece in pieces:
                    now = time.monotonic()
                    if last is not None:
                        metrics.itl.observe(now - last)
                    last = now
                    metrics.tokens_out.inc()
                    shown = guard.feed(scrubber.feed(piece))
                    if shown:
                        if not first_shown:
                            first_shown = True
                            metrics.ttft.observe(now - started)
                        yield Delta(shown)
                    if guard.looping:
                        break  # closing the stream aborts the generation upstream
            result = None if guard.looping else scrubber.finish()
        except GatewayError as exc:
            log.warning("upstream failed (%s): %s", exc.status, exc.detail)
            yield Failed(exc)
            return
        except Exception:
            log.exception("recommendation stream failed")
            yield Failed(InternalFailure("unexpected error in the stream"))
            return

        if result is None or result.truncated:
            # A loop, or an answer cut by max_tokens: close with what is complete, filled up
            # with catalogue items, rather than end a long answer with an error.
            reason = "loop" if result is None else "truncated"
            metrics.answers_salvaged.labels(reason).inc()
            log.warning("answer %s: closing with what is complete plus catalogue items", reason)
            answer, added = _salvage(scrubber.partial(), hits, guard)
            if added:
                yield Delta(added)
        else:
            tail = guard.feed(result.tail) + guard.finish()
            if tail:
                yield Delta(tail)
            read = result.answer
            if read is None and result.prose.strip() and not result.json_started:
                # The model ignored the format and wrote prose: it was shown, so it is the answer.
                read = Answer(recommend=result.prose.strip(), challenges=[])
            if read is None:
                metrics.upstream_errors.labels("invalid_answer").inc()
                log.warning("invalid answer from the model: %s", result.error)
                yield Failed(UpstreamFailed(f"invalid answer: {result.error}"))
                return
            answer = read
        await self._sessions.record(
            session_id,
            turn=Turn(user=user_text, assistant=answer.model_dump_json(), category=category),
        )
        yield Done(close_payload(answer, category))


def close_payload(answer: Answer, category: Category) -> dict[str, Any]:
    """The ``close`` data: the model's texts with the session's category, never the model's."""
    return {
        "recommend": answer.recommend,
        "challenges": [
            {
                "title": item.title,
                "description": item.description,
                "category": category.code,
                "label": category.label,
            }
            for item in answer.challenges
        ],
    }


def _salvage(partial: Answer, hits: Sequence[Hit], guard: RepetitionGuard) -> tuple[Answer, str]:
    """The answer to close an early-stopped stream with, and the display text it adds.

    Keeps the recommend text without sentences past their second copy and the challenges
    read whole, then fills up to three challenges with retrieved catalogue
    items, which are shown before the ``close`` like any challenge. A catalogue item that
    repeats a sentence the stream's ``guard`` has shown is passed over: the model often loops
    on text it copied from that very item."""
    recommend = _without_repeats(partial.recommend) or _SALVAGE_RECOMMEND
    # The items as they were shown, repeats included: the close matches the display text.
    items = list(partial.challenges[:MAX_CHALLENGES])
    added: list[str] = []
    for hit in hits:
        if len(items) >= MAX_CHALLENGES:
            break
        title = hit.document.title
        if any(item.title == title for item in items):
            continue
        description = _first_sentences(hit.document.body, DESCRIPTION_MAX_CHARS)
        if any(guard.has_shown(sentence) for sentence in sentences(description)):
            continue
        items.append(ChallengeItem(title=title, description=description))
        added.append(f"\n\n{title}\n{description}")
    return Answer(recommend=recommend, challenges=items), "".join(added)


def _without_repeats(text: str) -> str:
    """``text`` with each sentence kept at most twice (what the guard let through)."""
    guard = RepetitionGuard()
    kept = guard.feed(text) + guard.finish()
    return kept if kept.strip() else ""


def _first_sentences(text: str, limit: int) -> str:
    """Whole sentences from the start of ``text`` within ``limit`` characters (at least one,
    cut at ``limit`` when the first is longer)."""
    kept = ""
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        if kept and len(kept) + 1 + len(sentence) > limit:
            break
        kept = f"{kept} {sentence}" if kept else sentence
    return kept[:limit]


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
    if kind is IntentKind.ANOTHER:
        # Something the user has not seen in this session: neither the current category nor
        # the one picked in base-info.
        seen = {state.category, state.base_category}
        return random.choice([c for c in Category if c not in seen])
    return state.category
