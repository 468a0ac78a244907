"""How often a caller may ask: rate limits per user and per client.

Checked after the caller is known (``app.web.access``: an unknown key is a 401 before any
bucket exists) and before any retrieval or upstream call; each refusal is one ``error`` event
(GET) or an HTTP status (POST) with a readable Korean message:

    more than RATE_LIMIT_PER_MINUTE from one user                    -> 429, retryAfterSeconds
    more than CLIENT_RATE_LIMIT_PER_MINUTE from one client           -> 429, retryAfterSeconds
    an API key that spent KEY_TOKEN_BUDGET model tokens in its window -> 429, retryAfterSeconds

(How many generations are held at once, by everyone, one client or one session, is
``app.web.admission``, which also asks this module.)

A user is a chat window: its ``sessionId`` within its client, or a page visitor. A client is
its API key, else its address (the one a TRUSTED_PROXIES proxy forwards), see
:class:`app.web.access.Caller`. A relay that serves many users from one address is therefore
limited per user by the first limit, and as a whole by the second, whose default leaves room
for a burst of a few hundred users. A reconnect (``Last-Event-ID``) counts like a request.

Each limit is a token bucket's two promises kept as moving windows (the ``limits`` library):
at most ``burst`` requests within the time the bucket takes to refill, and at most
``per_minute`` within a minute. The counters live in the process, or in Redis when REDIS_URL
is set, so that all gateway processes share them. When Redis cannot be reached the request is
admitted (logged): a rate limit must not take the service down with it.

The token budget is a fixed window of KEY_TOKEN_BUDGET_SECONDS (a day by default), aligned to
the clock (a day's ends at midnight UTC), per API key (relay keys too; callers without a key
have none: their rates bound them). A turn reserves what it may spend when its generation is
admitted (:meth:`Limits.reserve`: the ``tokens`` its caller states, an upper bound, see
``app.chat.generation.Generator.reservation``), in one atomic ``INCRBY``: admitted when the
key's count stood below its budget before it, else the reservation is taken back and the turn
refused. When the turn ends, however it ends, :meth:`Limits.settle` replaces the reservation
with what it spent (vLLM's prompt and output tokens, app/llm/usage.py). So turns sent at once
are admitted one reservation at a time: a key's count passes its budget by at most the last
admitted reservation, however many turns arrive together, on one process or many (Redis), and
by more only where a turn spends more than it reserved (never, while the reservation is an
upper bound). A cheap look (:meth:`Limits.budget_left`) refuses a spent key before the turn
is planned.

Bounded: each process tracks at most RATE_LIMIT_MAX_IDENTITIES users and clients at once; past
it, the one seen least recently is forgotten (its counters cleared, in Redis too), as nginx's
``limit_req`` zone does. Counters also expire by themselves a minute after their last request.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter

from app.config import AccessSettings
from app.domain.errors import RateLimited
from app.llm.usage import TokenUsage
from app.redis_client import LIMITS, RedisConnector
from app.web.access import Caller

__all__ = ["Limits", "Reservation", "open_limits", "rate_items"]

log = logging.getLogger(__name__)

_REDIS_PREFIX = "eco:limits"
TOKENS_SPENT_MESSAGE = "이 키로 쓸 수 있는 답변 분량을 모두 썼어요. 잠시 뒤에 다시 시도해 주세요."
#: A window's counter outlives the window by this much: a turn that ends just after it still
#: settles into its own (dead) counter, never into the next window's.
_WINDOW_SLACK_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class Reservation:
    """Tokens a turn holds in its key's budget until it settles, in the window it began in."""

    key: str  # the window's counter
    tokens: int
    window_end: float


def rate_items(per_minute: float, burst: int) -> list[RateLimitItem]:
    """A bucket of ``burst`` tokens refilled at ``per_minute``, as two moving windows
    (none when ``per_minute`` is 0: that limit is off)."""
    if per_minute <= 0:
        return []
    refill_seconds = max(1, round(burst * 60 / per_minute))
    return [
        RateLimitItemPerSecond(burst, refill_seconds),
        RateLimitItemPerMinute(max(1, math.ceil(per_minute))),
    ]


class _RateLimit:
    """One named limit over a shared limiter: ``hit(identity)`` -> seconds to wait, or 0."""

    def __init__(self, name: str, limiter: MovingWindowRateLimiter, items: list[RateLimitItem]):
        self.name = name
        self._limiter = limiter
        self._items = items

    async def hit(self, identity: str) -> float:
        for item in self._items:
            if not await self._limiter.hit(item, self.name, identity):
                stats = await self._limiter.get_window_stats(item, self.name, identity)
                return max(1.0, stats.reset_time - time.time())
        return 0.0

    @property
    def on(self) -> bool:
        return bool(self._items)

    async def forget(self, identity: str) -> None:
        for item in self._items:
            await self._limiter.clear(item, self.name, identity)


class Limits:
    """The checks of the module docstring; counters in ``storage`` (in memory by default)."""

    def __init__(
        self,
        settings: AccessSettings,
        storage: Storage | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        storage = storage or MemoryStorage()
        limiter = MovingWindowRateLimiter(storage)
        s = settings
        self._per_user = _RateLimit(
            "user", limiter, rate_items(s.rate_limit_per_minute, s.rate_limit_burst)
        )
        self._per_client = _RateLimit(
            "client", limiter, rate_items(s.client_rate_limit_per_minute, s.client_rate_limit_burst)
        )
        self._max_identities = s.rate_limit_max_identities
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()  # least recent first
        self._budget = s.key_token_budget  # 0: none
        self._window = s.key_token_budget_seconds
        self._storage = storage
        self._clock = clock

    @property
    def tracked(self) -> int:
        """Users and clients whose counters this process keeps now."""
        return len(self._seen)

    async def admit(self, caller: Caller, session_id: str) -> RateLimited | None:
        """The refusal for this request of ``session_id``, or None. Counts it when admitted."""
        checks = ((self._per_user, caller.user(session_id)), (self._per_client, caller.client))
        for limit, identity in checks:
            refusal = await self._hit(limit, identity, caller.client)
            if refusal is not None:
                return refusal
        return None

    async def admit_client(self, caller: Caller) -> RateLimited | None:
        """Counts one request against the client alone (a page load: it mints a visitor)."""
        return await self._hit(self._per_client, caller.client, caller.client)

    def budgeted(self, caller: Caller) -> bool:
        """Whether ``caller``'s turns count against a token budget (an API key's, when set)."""
        return self._budget > 0 and caller.kind in ("key", "relay")

    async def budget_left(self, caller: Caller) -> RateLimited | None:
        """The refusal when ``caller``'s key has spent (or reserved) its token budget, or None.
        A look, taking nothing: :meth:`reserve` decides."""
        if not self.budgeted(caller):
            return None
        key, end = self._counter(caller)
        try:
            counted = await self._storage.get(key)
        except Exception:
            log.warning("token budget store unavailable; request admitted", exc_info=True)
            return None
        return None if counted < self._budget else self._spent_refusal(caller, end)

    async def counted(self, caller: Caller) -> int:
        """Tokens ``caller``'s key has spent and reserved in the current window."""
        if not self.budgeted(caller):
            return 0
        return await self._storage.get(self._counter(caller)[0])

    async def reserve(self, caller: Caller, tokens: int) -> Reservation | RateLimited | None:
        """Holds ``tokens`` of ``caller``'s budget for a turn: the reservation to settle when
        the turn ends, the refusal when the key's count already stood at its budget, or None
        (no budget, or its store unavailable: admitted without counting, logged)."""
        if not self.budgeted(caller):
            return None
        tokens = max(0, tokens)
        key, end = self._counter(caller)
        expiry = self._expiry(end)
        try:
            counted = await self._storage.incr(key, expiry, amount=tokens)
            if counted - tokens >= self._budget:  # spent before this turn: take it back
                await self._storage.incr(key, expiry, amount=-tokens)
                return self._spent_refusal(caller, end)
        except Exception:
            log.warning("token budget store unavailable; turn admitted", exc_info=True)
            return None
        return Reservation(key, tokens, end)

    async def settle(
        self, caller: Caller, reservation: Reservation | None, usage: TokenUsage
    ) -> None:
        """Replaces ``reservation`` (None: there was none) with what the turn spent."""
        if reservation is None:
            await self.spend(caller, usage)
            return
        change = usage.input_tokens + usage.output_tokens - reservation.tokens
        if change == 0:
            return
        try:  # the window the turn began in, even when it is over
            await self._storage.incr(
                reservation.key, self._expiry(reservation.window_end), amount=change
            )
        except Exception:
            log.warning("token budget store unavailable; %+d tokens not settled", change)

    async def spend(self, caller: Caller, usage: TokenUsage) -> None:
        """Adds what a turn of ``caller`` spent to its key's budget (a turn that reserved
        nothing: its store was unavailable when it began)."""
        tokens = usage.input_tokens + usage.output_tokens
        if not self.budgeted(caller) or tokens <= 0:
            return
        key, end = self._counter(caller)
        try:
            await self._storage.incr(key, self._expiry(end), amount=tokens)
        except Exception:
            log.warning("token budget store unavailable; %d tokens not counted", tokens)

    def _counter(self, caller: Caller) -> tuple[str, float]:
        """The counter of ``caller``'s key in the current window, and when that window ends."""
        window = int(self._clock() // self._window)
        return f"tokens/{caller.client}/{window}", float((window + 1) * self._window)

    def _expiry(self, window_end: float) -> int:
        return max(1, math.ceil(window_end - self._clock())) + _WINDOW_SLACK_SECONDS

    def _spent_refusal(self, caller: Caller, window_end: float) -> RateLimited:
        return RateLimited(
            f"token budget of {caller.client} spent",
            retry_after=_whole(window_end - self._clock()),
            message=TOKENS_SPENT_MESSAGE,
        )

    async def _hit(self, limit: _RateLimit, identity: str, client: str) -> RateLimited | None:
        if not limit.on:
            return None
        try:
            await self._track(limit, identity)
            wait = await limit.hit(identity)
        except Exception:  # the shared store is down: admit, and say so
            log.warning("rate limit store unavailable; request admitted", exc_info=True)
            return None
        if wait > 0:
            return RateLimited(f"{limit.name} rate limit for {client}", retry_after=_whole(wait))
        return None

    async def _track(self, limit: _RateLimit, identity: str) -> None:
        entry = (limit.name, identity)
        if entry in self._seen:
            self._seen.move_to_end(entry)
            return
        self._seen[entry] = None
        while len(self._seen) > self._max_identities:
            (name, oldest), _ = self._seen.popitem(last=False)
            await (self._per_user if name == "user" else self._per_client).forget(oldest)


@asynccontextmanager
async def open_limits(
    settings: AccessSettings, redis: RedisConnector | None
) -> AsyncIterator[Limits]:
    """The limits, counted in Redis when given it (its connections closed on exit)."""
    if redis is None:
        yield Limits(settings)
        return
    client = redis.client(LIMITS)  # past its timeouts a request is admitted without counting
    try:
        storage = RedisStorage(
            f"async+{redis.url}",
            implementation="redispy",
            key_prefix=_REDIS_PREFIX,
            # limits types its options narrowly
            connection_pool=client.connection_pool,  # type: ignore[arg-type]
        )
        yield Limits(settings, storage)
    finally:
        await client.aclose()


def _whole(seconds: float) -> float:
    return float(max(1, math.ceil(seconds)))
