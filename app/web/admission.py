"""Admission: whether a request is served, decided in one place. Every refusal is raised as
:class:`app.domain.errors.Refused`, carrying the error the client gets.

    who        the caller: API key, the page's visitor token, or the address     401
               (app/web/access.py); a browser page of another site without a key 403
    how often  requests per user and per client (app/web/limits.py)               429
    how much   model tokens per API key and window, KEY_TOKEN_BUDGET (limits.py)  429
               (a look before planning; a turn's expected tokens reserved with its slot)
    how many   generations at once, each holding a slot in every pool it is in:
                 everyone              MAX_CONCURRENT_GENERATIONS                  503
                 its client            CLIENT_GENERATIONS_SHARE of that            429
                   (a relay key:       RELAY_GENERATIONS_SHARE)
                 all page visitors     PAGE_GENERATIONS_SHARE (under keys)         503
                 its session (or its page visitor)  SESSION_MAX_CONCURRENT         429

A chat turn meets them in this order (app/chat/turn.py): the caller, the rates and the token
budget before anything else (a stranger learns nothing, a refusal costs nothing); a look at
the pools before the turn is planned (a refusal costs no embedding); a slot in each pool once
it is planned, with the tokens it may spend reserved in its key's budget, held while the answer
generates and given back however it ends (its terminal event, the client leaving, shutdown,
an error), when what it spent replaces the reservation.
Refused at once rather than queued: open streams keep their speed, and the client
(EventSource or relay) gets ``retryAfterSeconds``, not a silent wait.

Why pools: a rate limit bounds how often a client asks, not how many streams it keeps open;
one client with slow streams could otherwise hold every slot until LLM_TOTAL_TIMEOUT. The
default client share (half) serves a relay's burst of a hundred users from one address and
leaves half of the slots to everyone else. A share of 1 is no pool of its own (the global
limit then speaks for it). The counts are this process's; a pool is forgotten when its count
is back to zero, so there are never more pools than streams.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from starlette.requests import HTTPConnection

from app.config import AccessSettings
from app.domain.errors import Overloaded, RateLimited, Refused, Unauthorized
from app.llm.usage import TokenUsage
from app.web.access import Access, Caller
from app.web.limits import Limits, Reservation

__all__ = ["Admission", "Gate"]

RETRY_AFTER_SECONDS = 2.0
CLIENT_FULL_MESSAGE = "동시에 만들고 있는 답변이 많아요. 앞의 답변이 끝난 뒤 다시 시도해 주세요."
SESSION_BUSY_MESSAGE = "이전 답변을 아직 만들고 있어요. 끝난 뒤에 다시 보내 주세요."


@dataclass(frozen=True, slots=True)
class _Pool:
    name: str
    cap: int
    refusal: type[Overloaded]  # Overloaded (503): everyone's; RateLimited (429): the caller's own
    message: str | None = None


class Admission:
    def __init__(self, settings: AccessSettings, *, access: Access, limits: Limits) -> None:
        self.access = access
        self.limits = limits
        total = settings.max_concurrent_generations
        self._total = total
        self._client = _cap(total, settings.client_generations_share)
        self._relay = _cap(total, settings.relay_generations_share)
        self._page = _cap(total, settings.page_generations_share)
        self._session = settings.session_max_concurrent
        self._held: dict[str, int] = {}

    # ------------------------------------------------------------------ who, how often
    def caller(self, conn: HTTPConnection) -> Caller:
        """Who is calling; raises the 401 when keys are required and none is valid."""
        caller = self.access.identify(conn)
        if isinstance(caller, Unauthorized):
            raise Refused(caller)
        if (foreign := self.access.foreign_page(conn, caller)) is not None:
            raise Refused(foreign)
        return caller

    def key_holder(self, conn: HTTPConnection) -> None:
        """For the key-only endpoints (feedback, metrics, docs): raises the 401 unless keys
        are off or the caller holds one (a page token is no key); without keys, the 403 for
        a browser page of another site."""
        if (refusal := self.access.key_refusal(conn)) is not None:
            raise Refused(refusal)
        if not self.access.keys_required:
            if (foreign := self.access.foreign_page(conn, None)) is not None:
                raise Refused(foreign)

    async def rates(self, caller: Caller, session_id: str) -> None:
        """Counts one request of ``caller`` on ``session_id``; raises the 429 past a rate."""
        if (refusal := await self.limits.admit(caller, session_id)) is not None:
            raise Refused(refusal)

    async def budget(self, caller: Caller) -> None:
        """Raises the 429 when ``caller``'s API key has spent its token budget."""
        if (refusal := await self.limits.budget_left(caller)) is not None:
            raise Refused(refusal)

    async def page_load(self, caller: Caller) -> None:
        """Counts a page load against its client alone (it mints a visitor); raises the 429."""
        if (refusal := await self.limits.admit_client(caller)) is not None:
            raise Refused(refusal)

    # ------------------------------------------------------------------ how many
    def gate(self, caller: Caller, session_id: str) -> Gate:
        """The pools a generation of ``caller`` on ``session_id`` takes a slot in."""
        pools = [_Pool("all", self._total, Overloaded)]
        if caller.kind == "page":
            pools += [
                _Pool(f"client:{caller.client}", self._client, RateLimited, CLIENT_FULL_MESSAGE),
                _Pool("page", self._page, Overloaded),
                _Pool(
                    f"visitor:{caller.visitor}", self._session, RateLimited, SESSION_BUSY_MESSAGE
                ),
            ]
        else:
            share = self._relay if caller.kind == "relay" else self._client
            pools.append(_Pool(f"client:{caller.client}", share, RateLimited, CLIENT_FULL_MESSAGE))
            pools.append(
                _Pool(
                    f"session:{caller.client}|{session_id}",
                    self._session,
                    RateLimited,
                    SESSION_BUSY_MESSAGE,
                )
            )
        return Gate(self, tuple(pool for pool in pools if pool.cap > 0), caller)

    def held(self, pool: str) -> int:
        """Slots held now in ``pool`` ("all", "client:<client>", "page", ...)."""
        return self._held.get(pool, 0)

    def _check(self, pools: tuple[_Pool, ...]) -> None:
        for pool in pools:
            if self._held.get(pool.name, 0) >= pool.cap:
                detail = f"{pool.name} holds its {pool.cap} generations"
                raise Refused(
                    pool.refusal(detail, retry_after=RETRY_AFTER_SECONDS, message=pool.message)
                )

    def _take(self, pools: tuple[_Pool, ...]) -> None:
        self._check(pools)
        for pool in pools:
            self._held[pool.name] = self._held.get(pool.name, 0) + 1

    def _give(self, pools: tuple[_Pool, ...]) -> None:
        for pool in pools:
            left = self._held[pool.name] - 1
            if left:
                self._held[pool.name] = left
            else:
                del self._held[pool.name]


class Gate:
    """One generation's way through the pools (``app.chat.turn.Gate``)."""

    def __init__(self, admission: Admission, pools: tuple[_Pool, ...], caller: Caller) -> None:
        self._admission = admission
        self._pools = pools
        self._caller = caller

    def check(self) -> None:
        """Raises the refusal a slot would get now, taking nothing."""
        self._admission._check(self._pools)

    @asynccontextmanager
    async def hold(self, usage: TokenUsage, expected: int = 0) -> AsyncIterator[None]:
        """A slot in every pool while the block runs, and ``expected`` tokens of the caller's
        budget (its key's); raises the refusal instead. When the block ends, however it ends,
        what it spent (``usage``, filled as it runs) replaces the reservation."""
        admission = self._admission
        limits = admission.limits
        budgeted = limits.budgeted(self._caller)
        admission._take(self._pools)
        reservation: Reservation | None = None
        if budgeted:
            try:
                with anyio.CancelScope(shield=True):  # taken whole or not at all
                    held = await limits.reserve(self._caller, expected)
            except BaseException:
                admission._give(self._pools)
                raise
            if isinstance(held, RateLimited):
                admission._give(self._pools)
                raise Refused(held)
            reservation = held
        try:
            yield
        finally:
            admission._give(self._pools)
            if budgeted:
                # Shielded: a cancelled turn (the client left) is settled too. The store's own
                # timeouts bound the wait (app/redis_client.py).
                with anyio.CancelScope(shield=True):
                    await limits.settle(self._caller, reservation, usage)


def _cap(total: int, share: float) -> int:
    """A share of ``total`` (at least one); 0 for a share of 1: no pool of its own."""
    return 0 if share >= 1 else max(1, math.floor(total * share))
