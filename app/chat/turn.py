"""The use case: one chat turn, from a validated request to a stream of events.

    plan      the request, the session and what the message means -> a frozen TurnPlan
              (app/chat/planning.py), or a Reply that needs no model (off-topic); a plan
              whose first challenge is the whole answer ("그 중에 …") is composed without one
    admit     a slot for the generation (the gate the route gives: app/web/admission.py)
    generate  upstream -> scrubber -> display -> guard -> events -> session
              (app/chat/generation.py)

Every turn is an async generator of ``StreamEvent``: any number of ``Delta``, then exactly
one ``Done`` or ``Failed``, then nothing. The GET (SSE) and POST (JSON) routes share it whole.

A turn is one span (``turn ENDPOINT``, a child of the request's), current while the turn
runs: planning's intent and retrieval spans and each upstream attempt's are its children. It
ends with the generator: after the terminal event, or when its reader closes it (the client
left; GET generations run in the stream hub, so that is when the stream stops, not when the
response's headers leave).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, aclosing
from typing import Protocol

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from app.chat.generation import Generator
from app.chat.plan import BaseInfoTurn, FreeTextTurn, Reply, TurnPlan
from app.chat.planning import Planner
from app.domain.errors import GatewayError, Refused
from app.domain.events import Done, Failed, StreamEvent
from app.llm.usage import TokenUsage

__all__ = ["Gate", "RecommendationService"]

_tracer = trace.get_tracer(__name__)  # a proxy: app/tracing.py


class Gate(Protocol):
    """The way to a generation slot for one turn; both raise :class:`Refused`."""

    def check(self) -> None:
        """Raises the refusal a slot would get now, taking nothing."""

    def hold(self, usage: TokenUsage, expected: int = 0) -> AbstractAsyncContextManager[None]:
        """A slot while the block runs (the answer generates), and ``expected`` tokens
        reserved in the caller's token budget; ``usage``, what it spent, replaces the
        reservation when it ends."""


class RecommendationService:
    def __init__(self, planner: Planner, generator: Generator) -> None:
        self._planner = planner
        self._generator = generator

    def base_info(self, turn: BaseInfoTurn, gate: Gate) -> AsyncIterator[StreamEvent]:
        return self._turn(turn, lambda: self._planner.base_info(turn), gate)

    def free_text(self, turn: FreeTextTurn, gate: Gate) -> AsyncIterator[StreamEvent]:
        return self._turn(turn, lambda: self._planner.free_text(turn), gate)

    async def _turn(
        self,
        turn: BaseInfoTurn | FreeTextTurn,
        plan: Callable[[], Awaitable[TurnPlan | Reply]],
        gate: Gate,
    ) -> AsyncIterator[StreamEvent]:
        # One generator for the whole turn, span included: each event passes through no
        # more layers than it must (bench/README.md "Tracing off and on").
        with _tracer.start_as_current_span(
            f"turn {turn.endpoint}",
            attributes=_attributes(turn),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                gate.check()  # before planning: a refusal costs no embedding
                planned = await plan()
            except Refused as refused:
                _ended(span, refused.error)
                yield Failed(refused.error)
                return
            if isinstance(planned, Reply):
                _ended(span, None)
                for event in planned.events:
                    yield event
                return
            if not planned.needs_model:  # the gateway's answer is whole: no slot, no upstream
                _ended(span, None)
                async with aclosing(self._generator.compose(planned)) as composed:
                    async for event in composed:
                        yield event
                return
            usage = TokenUsage(planned.endpoint, planned.client)
            try:
                # Checked again (planning took a while), and the most it may spend reserved.
                async with gate.hold(usage, self._generator.reservation(planned)):
                    async with aclosing(self._generator.run(planned, usage)) as events:
                        async for event in events:
                            if isinstance(event, Failed):
                                _ended(span, event.error)
                            elif isinstance(event, Done):
                                _ended(span, None)
                            yield event
            except Refused as refused:  # raised on entering only: nothing was shown yet
                _ended(span, refused.error)
                yield Failed(refused.error)


def _attributes(turn: BaseInfoTurn | FreeTextTurn) -> dict[str, str]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": turn.session_id,
        "gateway.endpoint": turn.endpoint,
        "gateway.client": turn.client,
        "gateway.outcome": "disconnected",  # until its terminal event: the reader left first
    }


def _ended(span: Span, error: GatewayError | None) -> None:
    """The turn's outcome on its span: ``close``, or the error's status."""
    if error is None:
        span.set_attribute("gateway.outcome", "close")
        return
    span.set_attribute("gateway.outcome", str(error.status))
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
