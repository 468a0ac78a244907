"""What went wrong upstream, in the gateway's terms: each failure becomes a row of the error
table (``app.domain.errors``) and a ``gateway_upstream_errors`` kind, and says whether another
replica is worth trying.

    pool full (PoolTimeout)                      -> Overloaded 503 (retry hint)
    429 / 503 from vLLM                          -> Overloaded 503 (retry hint)
    other status, refused, reset, malformed      -> UpstreamFailed 502
    read or write timeout                        -> UpstreamTimedOut 504
"""

from __future__ import annotations

import json

import httpx

from app.domain.errors import GatewayError, Overloaded, UpstreamFailed, UpstreamTimedOut

__all__ = [
    "error_kind",
    "error_of_status",
    "error_of_transport",
    "event_error_kind",
    "is_connect_failure",
    "worth_another_replica",
]


def worth_another_replica(status: int) -> bool:
    """A status another replica may not answer: busy (429) or failing (5xx)."""
    return status == 429 or status >= 500


def is_connect_failure(exc: BaseException) -> bool:
    """No answer at all: refused, unreachable, connect timeout, or reset before the status line."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return True
    return isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError)


def error_kind(exc: BaseException) -> str:
    """The ``gateway_upstream_errors`` kind of an error before the stream starts."""
    if isinstance(exc, httpx.HTTPStatusError):
        return "status"
    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        return "timeout"
    if isinstance(exc, httpx.HTTPError):
        return "connect"
    return "malformed"  # a model list we cannot read


def event_error_kind(event: bytes) -> str:
    """``inband`` for an ``{"error": ...}`` event, else ``malformed`` (error path only)."""
    try:
        chunk = json.loads(event)
    except ValueError:
        return "malformed"
    return "inband" if isinstance(chunk, dict) and "error" in chunk else "malformed"


def error_of_status(status: int, body: str) -> GatewayError:
    detail = f"upstream answered {status}: {body}"
    if status in (429, 503):
        return Overloaded(detail, retry_after=2.0)
    return UpstreamFailed(detail)


def error_of_transport(exc: BaseException, during: str) -> GatewayError:
    detail = f"upstream {type(exc).__name__} while {during}: {exc}"
    if isinstance(exc, httpx.PoolTimeout):
        return Overloaded(detail)
    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        return UpstreamTimedOut(detail)
    if isinstance(exc, httpx.HTTPStatusError):
        return error_of_status(exc.response.status_code, "")
    return UpstreamFailed(detail)
