"""The second half of a turn: from a :class:`TurnPlan` to display text and one terminal event.

    the plan's opening (the gateway's recommend and first challenge), before the model is asked
    -> upstream tokens -> scrubber (JSON -> fields) -> display (catalogue descriptions; whole
    titles, none twice; bounded values end at a sentence) -> repetition guard -> Delta events
    -> Done (the answer, with the session's category) or Failed

The scrubber and its display are the only path from model tokens to display text. An answer
stopped early (a loop the guard caught, or JSON cut by ``max_tokens``) is closed with what is
complete plus candidate challenges from the catalogue, rather than ended with an error.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from opentelemetry import trace

from app.chat.display import AnswerDisplay
from app.chat.plan import TurnPlan
from app.chat.sessions import SessionStore, Turn
from app.domain.categories import Category
from app.domain.errors import GatewayError, InternalFailure, UpstreamFailed
from app.domain.events import Delta, Done, Failed, StreamEvent
from app.llm.client import LLMClient
from app.llm.repetition import RepetitionGuard, sentences
from app.llm.schema import DESCRIPTION_MAX_CHARS, RECOMMEND_MAX_CHARS, Answer, ChallengeItem
from app.llm.scrubber import ScrubResult
from app.llm.usage import TokenUsage
from app.metrics import Metrics
from app.rag.retriever import Hit

__all__ = ["Generator", "close_payload"]

log = logging.getLogger(__name__)

_SALVAGE_RECOMMEND = "상황에 맞는 챌린지를 골라 봤어요."
#: A sentence is shown once: its second showing is a loop (SPEC "What an answer must be").
_MAX_REPEATS = 1
#: Tokens each composition needs at most: three numbers in JSON (``{"picks":[2,1,3]}`` is 10 in
#: Qwen's tokenizer; room for whitespace where no grammar removes it); three titles of up to
#: about 30 tokens in JSON plus a recommend at its length bound (160 characters, about 1.3
#: tokens each); plus three descriptions.
_MAX_TOKENS = {"picks": 32, "recommend": 320, "descriptions": 768}
#: A chat template's tokens around each message (Qwen's: `<|im_start|>`, the role, a newline,
#: `<|im_end|>`, a newline: 5) and around the whole prompt (the assistant's opening, a default
#: system line some templates add): at most these.
_MESSAGE_TOKENS = 8
_PROMPT_TOKENS = 64


class Generator:
    def __init__(
        self,
        *,
        llm: LLMClient,
        sessions: SessionStore,
        metrics: Metrics,
        max_tokens: int | None = None,
    ) -> None:
        self._llm = llm
        self._sessions = sessions
        self._metrics = metrics
        self._max_tokens = max_tokens  # LLM_MAX_TOKENS; None: what the composition needs

    def reservation(self, plan: TurnPlan) -> int:
        """The most tokens the upstream can count for ``plan``, an upper bound, reserved in its
        key's budget while it runs (app/web/limits.py): the prompt's UTF-8 bytes (a token of a
        byte-level or byte-fallback tokenizer covers at least one byte) with the chat
        template's tokens around each message, plus the answer's ``max_tokens``."""
        prompt = sum(len(m["content"].encode()) + _MESSAGE_TOKENS for m in plan.messages)
        return _PROMPT_TOKENS + prompt + self._max_tokens_for(plan)

    def _max_tokens_for(self, plan: TurnPlan) -> int:
        return self._max_tokens or _MAX_TOKENS[plan.composition]

    async def run(self, plan: TurnPlan, usage: TokenUsage) -> AsyncGenerator[StreamEvent, None]:
        """Stream the answer of ``plan``: Delta events, then exactly one Done or Failed; the
        turn's log line (with its token usage, filled into ``usage``) when it ends, however it
        ends. One generator: each event passes through no more layers than it must."""
        outcome = "disconnected"  # until its terminal event: the reader left first
        display = _Display(plan)
        try:
            # The gateway's own opening (its recommend and first challenge) is shown before the
            # model is asked: the model's prefill of a new prompt takes seconds on a CPU.
            if opening := display.opening():
                self._metrics.ttft.observe(time.monotonic() - plan.started)
                yield Delta(opening)
            try:
                async for shown in self._shown(plan, display, usage, first=not opening):
                    yield Delta(shown)
                result = None if display.guard.looping else display.scrubber.finish()
            except GatewayError as exc:
                log.warning("upstream failed (%s): %s", exc.status, exc.detail)
                outcome = str(exc.status)
                yield Failed(exc)
                return
            except Exception:
                log.exception("recommendation stream failed")
                outcome = "500"
                yield Failed(InternalFailure("unexpected error in the stream"))
                return
            ending = self._ending(plan, display, result)
            if isinstance(ending, GatewayError):
                outcome = str(ending.status)
                yield Failed(ending)
                return
            answer, added = ending
            if added:
                yield Delta(added)
            whole = result is not None and not result.truncated  # not salvaged
            await self._remember(plan, answer, display.said() if whole else "")
            outcome = "close"
            # Follow-ups critique what was shown: none for an answer that shows nothing.
            suggestions = plan.suggestions if answer.challenges else ()
            yield Done(close_payload(answer, plan.category), suggestions)
        finally:
            _ended(plan, usage, outcome)

    async def compose(self, plan: TurnPlan) -> AsyncGenerator[StreamEvent, None]:
        """A plan the model has nothing to choose in (``plan.needs_model`` false): its opening,
        which holds the whole answer, then the close. No upstream call."""
        answer = Answer(recommend=plan.recommend or "", challenges=_led([], plan))
        yield Delta(plan.opening)
        await self._remember(plan, answer, "")
        yield Done(close_payload(answer, plan.category), plan.suggestions)

    async def _remember(self, plan: TurnPlan, answer: Answer, reply: str) -> None:
        """The turn in its session: what was said, which challenges it showed, and, for a
        prompt that replays the conversation, the exchange as the model had it (``reply``: its
        own text; empty when not replayed, or for an answer the gateway salvaged)."""
        titles = [item.title for item in answer.challenges]
        replayable = bool(reply)  # said() is empty unless the plan replays
        turn = Turn(
            user=plan.user_text,
            assistant=answer.model_dump_json(),
            category=plan.category,
            shown=plan.doc_ids(titles),
            asked=plan.messages[-1]["content"] if replayable else "",
            reply=reply if replayable else "",
            replayed=plan.replayed,
            constraints=plan.constraints,
            told=plan.told,
            topic=plan.topic,
        )
        await self._sessions.record(plan.session_id, turn=turn)

    async def _shown(
        self, plan: TurnPlan, display: _Display, usage: TokenUsage, *, first: bool
    ) -> AsyncIterator[str]:
        """The display text as the upstream's tokens arrive; stops at a loop (closing the
        stream aborts the generation upstream). ``first``: nothing has been shown yet."""
        metrics = self._metrics
        last = None
        pieces = self._llm.stream_chat(
            plan.messages,
            request_id=plan.request_id,
            schema=plan.schema(),
            max_tokens=self._max_tokens_for(plan),
            routing_key=plan.session_id,
            usage=usage,
        )
        async with aclosing(pieces):
            async for piece in pieces:
                now = time.monotonic()
                if last is not None:
                    metrics.itl.observe(now - last)
                last = now
                metrics.tokens_out.inc()
                if shown := display.feed(piece):
                    if first:
                        first = False
                        metrics.ttft.observe(now - plan.started)
                    yield shown
                if display.guard.looping:
                    break

    def _ending(
        self, plan: TurnPlan, display: _Display, result: ScrubResult | None
    ) -> tuple[Answer, str] | GatewayError:
        """The answer to close with, and the display text still to show before the close."""
        guard = display.guard
        if result is None or result.truncated:
            # A loop, or an answer cut by max_tokens: close with what is complete, filled up
            # with candidate challenges, rather than end the answer with an error.
            reason = "loop" if result is None else "truncated"
            self._metrics.answers_salvaged.labels(reason).inc()
            log.warning("answer %s: closing with what is complete plus catalogue items", reason)
            salvaged, added = _salvage(display.scrubber.partial(), plan, guard)
            return _with_lead(salvaged, plan), added
        tail = guard.feed(result.tail) + guard.finish()
        answer = result.answer
        if answer is None and result.prose.strip() and not result.json_started:
            # The model ignored the format and wrote prose: it was shown, so it is the answer.
            said = [plan.recommend, result.prose.strip()] if plan.recommend else [result.prose]
            answer = Answer(recommend="\n\n".join(said).strip(), challenges=[])
        if answer is None:
            self._metrics.upstream_errors.labels("invalid_answer").inc()
            log.warning("invalid answer from the model: %s", result.error)
            return UpstreamFailed(f"invalid answer: {result.error}")
        if answer.challenges or plan.composition != "descriptions":
            # Fewer challenges than asked for (a repeat was dropped): the next candidates.
            items, added = _fill_up(answer.challenges, plan, guard)
            if added:
                answer = Answer(recommend=answer.recommend, challenges=items)
                return _with_lead(answer, plan), tail + added
        return _with_lead(answer, plan), tail


class _Display:
    """What one answer shows: the gateway's opening, then the scrubber (the only path from
    model tokens to display text), all through one repetition guard."""

    def __init__(self, plan: TurnPlan) -> None:
        # A pick is a number in the candidates' list, as the prompt numbers them.
        numbered = [(hit.document.title, hit.document.body) for hit in plan.candidates]
        self.scrubber = AnswerDisplay(
            catalogue=plan.catalogue if plan.composition != "descriptions" else None,
            whole_titles=True,
            recommend=plan.recommend,
            bounds={"recommend": RECOMMEND_MAX_CHARS, "description": DESCRIPTION_MAX_CHARS},
            picks=numbered if plan.composition == "picks" else None,
        )
        self.guard = RepetitionGuard(max_repeats=_MAX_REPEATS)
        self._opening = plan.opening
        # The model's own text, for a prompt that replays the conversation.
        self._pieces: list[str] | None = [] if plan.replays else None

    def said(self) -> str:
        """What the model wrote, as it wrote it (when the plan replays the conversation)."""
        return "".join(self._pieces or ())

    def feed(self, piece: str) -> str:
        if self._pieces is not None:
            self._pieces.append(piece)
        return self.guard.feed(self.scrubber.feed(piece))

    def opening(self) -> str:
        """The gateway's opening as the guard lets it through (once)."""
        return self.guard.feed(self._opening) if self._opening else ""


def _ended(plan: TurnPlan, usage: TokenUsage, outcome: str) -> None:
    """The turn's log line, and its model and usage on the turn's span."""
    span = trace.get_current_span()
    if span.is_recording():
        if usage.model is not None:
            span.set_attribute("gen_ai.request.model", usage.model)
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    log.info(
        "turn %s %s: %s, %.2f s, tokens in %d out %d%s",
        plan.endpoint,
        plan.client,
        outcome,
        time.monotonic() - plan.started,
        usage.input_tokens,
        usage.output_tokens,
        "" if usage.reported else " (counted from the stream)",
    )


def close_payload(answer: Answer, category: Category) -> dict[str, Any]:
    """The ``close`` data: the answer's texts with the session's category, never the model's."""
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


def _led(items: Sequence[ChallengeItem], plan: TurnPlan) -> list[ChallengeItem]:
    """``items`` after the plan's first challenge (the gateway's), without a second copy of it."""
    lead = plan.lead_item
    if lead is None:
        return list(items)
    return [lead, *(item for item in items if item.title != lead.title)]


def _with_lead(answer: Answer, plan: TurnPlan) -> Answer:
    if plan.lead is None:
        return answer
    return Answer(recommend=answer.recommend, challenges=_led(answer.challenges, plan))


def _salvage(partial: Answer, plan: TurnPlan, guard: RepetitionGuard) -> tuple[Answer, str]:
    """The answer to close an early-stopped stream with, and the display text it adds.

    Keeps the recommend text without a sentence past its first copy and the challenges read
    whole, then fills up to the plan's number of challenges with candidates, which are shown
    before the ``close`` like any challenge. A candidate that repeats a sentence the stream's
    ``guard`` has shown is passed over: the model often loops on text it copied from that very
    item."""
    recommend = _without_repeats(partial.recommend) or _SALVAGE_RECOMMEND
    items, added = _fill_up(partial.challenges, plan, guard)
    return Answer(recommend=recommend, challenges=items), added


def _fill_up(
    shown: Sequence[ChallengeItem], plan: TurnPlan, guard: RepetitionGuard
) -> tuple[list[ChallengeItem], str]:
    """``shown`` (as it was shown: the close matches the display text), filled up to the
    plan's number of challenges with the candidates not shown, best first; and the display
    text the filling adds. A candidate that repeats a sentence the stream's ``guard`` has shown
    is passed over: a model often loops on text it copied from that very item."""
    items = list(shown[: plan.max_picks])
    added: list[str] = []
    titles = {item.title for item in items}
    for hit in plan.candidates:
        if len(items) >= max(plan.min_picks, 1):
            break
        if hit.document.title in titles:
            continue
        description = _description(hit, plan)
        if any(guard.has_shown(sentence) for sentence in sentences(description)):
            continue
        items.append(ChallengeItem(title=hit.document.title, description=description))
        added.append(f"\n\n{hit.document.title}\n{description}")
    return items, "".join(added)


def _description(hit: Hit, plan: TurnPlan) -> str:
    body = hit.document.body
    if plan.composition != "descriptions":
        return body
    return _first_sentences(body, DESCRIPTION_MAX_CHARS)


def _without_repeats(text: str) -> str:
    """``text`` with each sentence kept once (what the guard let through)."""
    guard = RepetitionGuard(max_repeats=_MAX_REPEATS)
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
