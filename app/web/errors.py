"""A gateway error as an HTTP answer: its envelope with its status, and ``Retry-After`` for an
overload (SPEC: 429 and 503 say when to try again). The one mapping from an error to that
header; the routes answer errors through :func:`error_response`."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi.responses import JSONResponse

from app.domain.errors import GatewayError, Overloaded
from app.domain.events import envelope

__all__ = ["error_response", "retry_after_headers"]


def retry_after_headers(error: GatewayError) -> dict[str, str]:
    """``{"retry-after": whole seconds, at least 1}`` for an overload or a rate limit, else
    ``{}``."""
    if isinstance(error, Overloaded):
        return {"retry-after": str(max(1, round(error.retry_after)))}
    return {}


def error_response(error: GatewayError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """``error`` as its envelope and status, with ``headers`` and ``Retry-After`` when due."""
    return JSONResponse(
        envelope(error.status, error.message, error.data),
        status_code=error.status,
        headers={**(headers or {}), **retry_after_headers(error)},
    )
