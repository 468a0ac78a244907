"""The use case: one chat turn, from a validated request to a stream of events.

    plan      the request, the session and what the message means -> a frozen TurnPlan
              (app/chat/planning.py), or a Reply that needs no model (off-topic)
    admit     a slot for the generation (the gate the route gives: app/web/admission.py)
    generate  upstream -> scrubber -> guard -> events -> session (app/chat/generation.py)

Every turn is an async generator of ``StreamEvent``: any number of ``Delta``, then exactly
one ``Done`` or ``Failed``, then nothing. The GET (SSE) and POST (JSON) routes share it whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from app.chat.generation import Generator
from app.chat.plan import BaseInfoTurn, FreeTextTurn, Reply, TurnPlan
from app.chat.planning import Planner
from app.domain.errors import Refused
from app.domain.events import Failed, StreamEvent

__all__ = ["Gate", "RecommendationService"]


class Gate(Protocol):
    """The way to a generation slot for one turn; both raise :class:`Refused`."""

    def check(self) -> None:
        """Raises the refusal a slot would get now, taking nothing."""

    def hold(self) -> AbstractAsyncContextManager[None]:
        """A slot while the block runs (the answer generates)."""


class RecommendationService:
    def __init__(self, planner: Planner, generator: Generator) -> None:
        self._planner = planner
        self._generator = generator

    def base_info(self, turn: BaseInfoTurn, gate: Gate) -> AsyncIterator[StreamEvent]:
        return self._turn(lambda: self._planner.base_info(turn), gate)

    def free_text(self, turn: FreeTextTurn, gate: Gate) -> AsyncIterator[StreamEvent]:
        return self._turn(lambda: self._planner.free_text(turn), gate)

    async def _turn(
        self, plan: Callable[[], Awaitable[TurnPlan | Reply]], gate: Gate
    ) -> AsyncIterator[StreamEvent]:
        try:
            gate.check()  # before planning: a refusal costs no embedding
            planned = await plan()
        except Refused as refused:
            yield Failed(refused.error)
            return
        if isinstance(planned, Reply):
            for event in planned.events:
                yield event
            return
        try:
            async with gate.hold():  # checked again: planning took a while
                async for event in self._generator.run(planned):
                    yield event
        except Refused as refused:  # raised on entering only: nothing was shown yet
            yield Failed(refused.error)
