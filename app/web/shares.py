"""A fair share of the generations: how many one client holds at once, so others are served.

The pipeline refuses past MAX_CONCURRENT_GENERATIONS (503) for everyone alike, and a rate
limit bounds how often a client asks, not how many streams it keeps open: one client with
slow streams could hold every slot until LLM_TOTAL_TIMEOUT. So each stream also holds a slot
in the pools of its caller (:class:`app.web.access.Caller`), each with its own cap:

    every client (a key, an address, a trusted forwarded client)   CLIENT_GENERATIONS_SHARE
    a client with a relay key (RELAY_API_KEYS)                      RELAY_GENERATIONS_SHARE
    one page visitor (under keys)                                   SESSION_MAX_CONCURRENT
    all page visitors together (under keys)                         PAGE_GENERATIONS_SHARE

each a share of MAX_CONCURRENT_GENERATIONS (at least one; a share of 1 is no pool at all: the
global limit's 503 then speaks for it). A pool at its cap refuses the
stream: 429 for the client's own pools, 503 for the page as a whole, both with
``retryAfterSeconds``. The default client share (half) serves a relay's burst of a hundred
users from one address and still leaves half of the slots to everyone else.

The slot is taken when the stream's generation starts (its first step, in the stream hub's
task or the POST's fold, never in the response that may leave early) and given back when that
generation ends, however it ends: its terminal event, a cancel (the client left, shutdown), or
an error. A stream that never starts (refused while draining) never takes one. The counts are
this process's, as MAX_CONCURRENT_GENERATIONS is; a pool is dropped when its count is back to
zero, so there are never more pools than streams.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import aclosing

from app.config import Settings
from app.domain.errors import GatewayError, Overloaded, RateLimited
from app.domain.events import Failed, StreamEvent
from app.web.access import Caller

__all__ = ["GenerationShares"]

RETRY_AFTER_SECONDS = 2.0
CLIENT_FULL_MESSAGE = "동시에 만들고 있는 답변이 많아요. 앞의 답변이 끝난 뒤 다시 시도해 주세요."


class GenerationShares:
    def __init__(self, settings: Settings) -> None:
        total = settings.max_concurrent_generations
        self._client = _cap(total, settings.client_generations_share)
        self._relay = _cap(total, settings.relay_generations_share)
        self._page = _cap(total, settings.page_generations_share)
        self._visitor = settings.session_max_concurrent
        self._held: dict[str, int] = {}

    def held(self, pool: str) -> int:
        return self._held.get(pool, 0)

    def _pools(self, caller: Caller) -> list[tuple[str, int, bool]]:
        """``(pool, cap, whole_page)`` for each pool a stream of ``caller`` takes a slot in."""
        pools: list[tuple[str, int | None, bool]]
        if caller.kind == "page":
            pools = [
                (f"client:{caller.client}", self._client, False),
                (f"visitor:{caller.visitor}", self._visitor, False),
                ("page", self._page, True),
            ]
        else:
            cap = self._relay if caller.kind == "relay" else self._client
            pools = [(f"client:{caller.client}", cap, False)]
        return [(pool, cap, page) for pool, cap, page in pools if cap is not None]

    def hold(
        self, caller: Caller, events: AsyncIterator[StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        """``events``, run while holding the caller's slots; the refusal instead when a pool
        is full."""
        return self._held_while(self._pools(caller), events)

    async def _held_while(
        self, pools: list[tuple[str, int, bool]], events: AsyncIterator[StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        refusal = self._take(pools)
        if refusal is not None:
            await events.aclose()  # type: ignore[attr-defined]  # never started: runs nothing
            yield Failed(refusal)
            return
        try:
            async with aclosing(events):  # type: ignore[type-var]
                async for event in events:
                    yield event
        finally:
            self._give(pools)

    def _take(self, pools: list[tuple[str, int, bool]]) -> GatewayError | None:
        for pool, cap, whole_page in pools:
            if self._held.get(pool, 0) >= cap:
                if whole_page:
                    return Overloaded("page share full", retry_after=RETRY_AFTER_SECONDS)
                return RateLimited(
                    f"{pool} holds its {cap} generations",
                    message=CLIENT_FULL_MESSAGE,
                    retry_after=RETRY_AFTER_SECONDS,
                )
        for pool, _, _ in pools:
            self._held[pool] = self._held.get(pool, 0) + 1
        return None

    def _give(self, pools: list[tuple[str, int, bool]]) -> None:
        for pool, _, _ in pools:
            left = self._held[pool] - 1
            if left:
                self._held[pool] = left
            else:
                del self._held[pool]


def _cap(total: int, share: float) -> int | None:
    return None if share >= 1 else max(1, math.floor(total * share))
