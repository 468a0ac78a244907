"""Who may start a generation now: API key, per-client rate limit, per-session concurrency.

Checked in this order before any retrieval or upstream call; each refusal is one ``error``
event (GET) or an HTTP status (POST) with a readable Korean message:

    API_KEYS set, no valid key (and not an allowed browser)   -> 401
    more than RATE_LIMIT_PER_MINUTE from one client            -> 429, retryAfterSeconds
    SESSION_MAX_CONCURRENT streams already running on a session -> 429, retryAfterSeconds

(The global MAX_CONCURRENT_GENERATIONS -> 503 lives in the pipeline.) The counters are per
gateway process: behind N gateways a client gets up to N times the rate unless the load
balancer keeps a client on one gateway; see README "Deployment".
"""

from __future__ import annotations

import hmac
import math
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from starlette.requests import HTTPConnection

from app.config import Settings
from app.errors import GatewayError, RateLimited, Unauthorized

__all__ = ["Limits", "SessionSlots"]

_MAX_CLIENTS = 100_000  # buckets kept; the least recently seen go first


class _TokenBuckets:
    """Per-key token buckets: ``per_minute`` refill, ``burst`` capacity."""

    def __init__(self, per_minute: float, burst: int) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> float:
        """0.0 when allowed; otherwise the seconds until a token is free."""
        now = time.monotonic()
        tokens, last = self._buckets.pop(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - last) * self._rate)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > _MAX_CLIENTS:
            self._buckets.popitem(last=False)
        return 0.0 if allowed else (1.0 - tokens) / self._rate


class Limits:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._keys = [key.get_secret_value().encode() for key in settings.api_keys]
        self._buckets = (
            _TokenBuckets(settings.rate_limit_per_minute, settings.rate_limit_burst)
            if settings.rate_limit_per_minute > 0
            else None
        )

    def admit(self, conn: HTTPConnection) -> GatewayError | None:
        """The refusal for this request, or None. Takes a rate-limit token when admitted."""
        key = _presented_key(conn)
        if self._keys and not self._browser(conn):
            if key is None or not any(hmac.compare_digest(key, k) for k in self._keys):
                return Unauthorized("missing or wrong API key")
        if self._buckets is not None:
            client = f"key:{key.decode(errors='replace')}" if key else _client_address(conn)
            wait = self._buckets.take(client)
            if wait > 0:
                return RateLimited(f"rate limit for {client}", retry_after=_whole(wait))
        return None

    def _browser(self, conn: HTTPConnection) -> bool:
        """A request the chat page made: same origin, or an origin on CORS_ALLOW_ORIGINS.

        Browsers set these headers and scripts cannot forge them inside a browser; curl can,
        so API_KEYS keeps casual non-browser callers out, and the rate limit still applies.
        """
        if not self._settings.api_keys_exempt_browsers:
            return False
        if conn.headers.get("sec-fetch-site") == "same-origin":
            return True
        origin = conn.headers.get("origin")
        return origin is not None and origin in self._settings.cors_allow_origins


class SessionSlots:
    """At most ``per_session`` generations at once on one session (two tabs are fine, a
    script hammering one session is not)."""

    def __init__(self, per_session: int) -> None:
        self._per_session = per_session
        self._running: dict[str, int] = {}

    @contextmanager
    def hold(self, session_id: str) -> Iterator[GatewayError | None]:
        """Hold one of the session's slots; yields the refusal instead when none is free."""
        running = self._running.get(session_id, 0)
        if running >= self._per_session:
            yield RateLimited(
                f"session {session_id} already runs {running}",
                message="이전 답변을 아직 만들고 있어요. 끝난 뒤에 다시 보내 주세요.",
                retry_after=2.0,
            )
            return
        self._running[session_id] = running + 1
        try:
            yield None
        finally:
            left = self._running[session_id] - 1
            if left:
                self._running[session_id] = left
            else:
                del self._running[session_id]


def _presented_key(conn: HTTPConnection) -> bytes | None:
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip().encode()
    key = conn.headers.get("x-api-key", "").strip()
    return key.encode() if key else None


def _client_address(conn: HTTPConnection) -> str:
    # Behind a proxy run uvicorn with --proxy-headers --forwarded-allow-ips, so this is the
    # caller, not the load balancer.
    return f"ip:{conn.client.host}" if conn.client else "ip:unknown"


def _whole(seconds: float) -> float:
    return float(max(1, math.ceil(seconds)))
