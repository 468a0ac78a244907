"""Who may start a generation now: API key, rate limits per user and per client.

Checked in this order before any retrieval or upstream call; each refusal is one ``error``
event (GET) or an HTTP status (POST) with a readable Korean message:

    API_KEYS set, no valid key (and not an allowed browser)          -> 401
    more than RATE_LIMIT_PER_MINUTE from one user (its sessionId)    -> 429, retryAfterSeconds
    more than CLIENT_RATE_LIMIT_PER_MINUTE from one client           -> 429, retryAfterSeconds

(Per-session concurrency, SESSION_MAX_CONCURRENT -> 429, is ``app.chat.slots``; the global
MAX_CONCURRENT_GENERATIONS -> 503 lives in the pipeline.)

A user is a chat window: its ``sessionId`` within its client. A client is its API key when it
presents one, else its address; behind a proxy listed in TRUSTED_PROXIES the address is the
one the proxy forwards (``X-Forwarded-For``, read by uvicorn's ProxyHeadersMiddleware, see
``app.main``). A relay that serves many users from one address is therefore limited per user
by the first limit, and as a whole by the second, whose default leaves room for a burst of a
few hundred users.

Each limit is a token bucket's two promises kept as moving windows (the ``limits`` library):
at most ``burst`` requests within the time the bucket takes to refill, and at most
``per_minute`` within a minute. The counters live in the process, or in Redis when REDIS_URL
is set, so that all gateway processes share them. When Redis cannot be reached the request is
admitted (logged): a rate limit must not take the service down with it.
"""

from __future__ import annotations

import hmac
import logging
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter
from redis.asyncio import ConnectionPool
from starlette.requests import HTTPConnection

from app.config import Settings
from app.domain.errors import GatewayError, RateLimited, Unauthorized

__all__ = ["Limits", "open_limits", "rate_items"]

log = logging.getLogger(__name__)

_REDIS_PREFIX = "eco:limits"
_REDIS_TIMEOUT = 1.0  # seconds; past it the request is admitted without counting


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


class Limits:
    """The checks of the module docstring; counters in ``storage`` (in memory by default)."""

    def __init__(self, settings: Settings, storage: Storage | None = None) -> None:
        self._settings = settings
        self._keys = [key.get_secret_value().encode() for key in settings.api_keys]
        limiter = MovingWindowRateLimiter(storage or MemoryStorage())
        s = settings
        self._per_user = _RateLimit(
            "user", limiter, rate_items(s.rate_limit_per_minute, s.rate_limit_burst)
        )
        self._per_client = _RateLimit(
            "client", limiter, rate_items(s.client_rate_limit_per_minute, s.client_rate_limit_burst)
        )

    async def admit(self, conn: HTTPConnection, session_id: str) -> GatewayError | None:
        """The refusal for this request of ``session_id``, or None. Counts it when admitted."""
        key = _presented_key(conn)
        if self._keys and not self._browser(conn):
            if key is None or not any(hmac.compare_digest(key, k) for k in self._keys):
                return Unauthorized("missing or wrong API key")
        client = f"key:{key.decode(errors='replace')}" if key else _client_address(conn)
        checks = ((self._per_user, f"{client}|{session_id}"), (self._per_client, client))
        for limit, identity in checks:
            try:
                wait = await limit.hit(identity)
            except Exception:  # the shared store is down: admit, and say so
                log.warning("rate limit store unavailable; request admitted", exc_info=True)
                return None
            if wait > 0:
                return RateLimited(
                    f"{limit.name} rate limit for {client}", retry_after=_whole(wait)
                )
        return None

    def _browser(self, conn: HTTPConnection) -> bool:
        """A request the chat page made: same origin, or an origin on CORS_ALLOW_ORIGINS.

        Browsers set these headers and scripts cannot forge them inside a browser; curl can,
        so API_KEYS keeps casual non-browser callers out, and the rate limits still apply.
        """
        if not self._settings.api_keys_exempt_browsers:
            return False
        if conn.headers.get("sec-fetch-site") == "same-origin":
            return True
        origin = conn.headers.get("origin")
        return origin is not None and origin in self._settings.cors_allow_origins


@asynccontextmanager
async def open_limits(settings: Settings) -> AsyncIterator[Limits]:
    """The limits, counted in Redis when REDIS_URL is set (its connections closed on exit)."""
    if settings.redis_url is None:
        yield Limits(settings)
        return
    pool = ConnectionPool.from_url(
        settings.redis_url.get_secret_value(),
        socket_connect_timeout=_REDIS_TIMEOUT,
        socket_timeout=_REDIS_TIMEOUT,
    )
    try:
        storage = RedisStorage(
            f"async+{settings.redis_url.get_secret_value()}",
            implementation="redispy",
            key_prefix=_REDIS_PREFIX,
            connection_pool=pool,  # type: ignore[arg-type]  # limits types its options narrowly
        )
        yield Limits(settings, storage)
    finally:
        await pool.aclose()


def _presented_key(conn: HTTPConnection) -> bytes | None:
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip().encode()
    key = conn.headers.get("x-api-key", "").strip()
    return key.encode() if key else None


def _client_address(conn: HTTPConnection) -> str:
    # The forwarded client when the peer is a trusted proxy (ProxyHeadersMiddleware).
    return f"ip:{conn.client.host}" if conn.client else "ip:unknown"


def _whole(seconds: float) -> float:
    return float(max(1, math.ceil(seconds)))
