"""The one mapping from an overload to ``Retry-After`` (app/web/errors.py): whole seconds, at
least 1, for a 503 and a 429; nothing for any other error."""

from __future__ import annotations

import json

import pytest

from app.domain.errors import (
    BadInput,
    GatewayError,
    InternalFailure,
    Overloaded,
    RateLimited,
    Unauthorized,
    UpstreamFailed,
)
from app.web.errors import error_response, retry_after_headers


@pytest.mark.parametrize(
    ("error", "header"),
    [
        (Overloaded(retry_after=2.0), "2"),
        (Overloaded(retry_after=10.0), "10"),
        (Overloaded(retry_after=0.2), "1"),  # never 0: that would say "now"
        (Overloaded(retry_after=2.6), "3"),
        (RateLimited(retry_after=0.0), "1"),
        (RateLimited(retry_after=41.0), "41"),
    ],
)
def test_an_overload_says_when_to_retry(error: Overloaded, header: str) -> None:
    assert retry_after_headers(error) == {"retry-after": header}


@pytest.mark.parametrize(
    "error", [BadInput(), Unauthorized(), UpstreamFailed(), InternalFailure(), GatewayError()]
)
def test_other_errors_have_no_retry_after(error: GatewayError) -> None:
    assert retry_after_headers(error) == {}


def test_an_error_response_is_its_envelope_status_and_headers() -> None:
    response = error_response(RateLimited("x", retry_after=3), {"x-session-id": "s"})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3" and response.headers["x-session-id"] == "s"
    body = json.loads(response.body)
    assert body == {
        "status": 429,
        "message": RateLimited.default_message,
        "data": {"retryAfterSeconds": 3},
    }
    plain = error_response(BadInput("y"))
    assert plain.status_code == 400 and "retry-after" not in plain.headers
