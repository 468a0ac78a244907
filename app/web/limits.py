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

The token budget is a fixed window of KEY_TOKEN_BUDGET_SECONDS (a day by default) per API key
(relay keys too; callers without a key have none: their rates bound them): a turn is admitted
while the key has spent less than its budget, and what the turn spent (vLLM's prompt and output
tokens, app/llm/usage.py) is added when it ends, so the last turn may pass the budget by its
own size, as LiteLLM's budgets do.

Bounded: each process tracks at most RATE_LIMIT_MAX_IDENTITIES users and clients at once; past
it, the one seen least recently is forgotten (its counters cleared, in Redis too), as nginx's
``limit_req`` zone does. Counters also expire by themselves a minute after their last request.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

from app.config import AccessSettings
from app.domain.errors import RateLimited
from app.llm.usage import TokenUsage
from app.redis_client import LIMITS, RedisConnector
from app.web.access import Caller

__all__ = ["Limits", "open_limits", "rate_items"]

log = logging.getLogger(__name__)

_REDIS_PREFIX = "eco:limits"
TOKENS_SPENT_MESSAGE = "이 키로 쓸 수 있는 답변 분량을 모두 썼어요. 잠시 뒤에 다시 시도해 주세요."


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

    def __init__(self, settings: AccessSettings, storage: Storage | None = None) -> None:
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
        self._budget = (
            RateLimitItemPerSecond(s.key_token_budget, s.key_token_budget_seconds)
            if s.key_token_budget
            else None
        )
        self._spent = FixedWindowRateLimiter(storage)

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
        return self._budget is not None and caller.kind in ("key", "relay")

    async def budget_left(self, caller: Caller) -> RateLimited | None:
        """The refusal when ``caller``'s key has spent its token budget, or None."""
        if self._budget is None or not self.budgeted(caller):
            return None
        try:
            if await self._spent.test(self._budget, "tokens", caller.client):
                return None
            stats = await self._spent.get_window_stats(self._budget, "tokens", caller.client)
        except Exception:
            log.warning("token budget store unavailable; request admitted", exc_info=True)
            return None
        return RateLimited(
            f"token budget of {caller.client} spent",
            retry_after=_whole(stats.reset_time - time.time()),
            message=TOKENS_SPENT_MESSAGE,
        )

    async def spend(self, caller: Caller, usage: TokenUsage) -> None:
        """Adds what a turn of ``caller`` spent to its key's budget."""
        tokens = usage.input_tokens + usage.output_tokens
        if self._budget is None or not self.budgeted(caller) or tokens <= 0:
            return
        try:
            await self._spent.hit(self._budget, "tokens", caller.client, cost=tokens)
        except Exception:
            log.warning("token budget store unavailable; %d tokens not counted", tokens)

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
