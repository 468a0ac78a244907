"""The gateway's errors and what the user reads for each.

    GatewayError                 status  when
    ├── BadInput                   400   empty message, malformed request
    ├── InvalidValue               422   unknown category/location/work type, message too long
    ├── Unauthorized               401   API_KEYS set and no valid key
    ├── Forbidden                  403   a browser page of another site, without a key
    ├── Overloaded                 503   no upstream connection free (carries a retry hint)
    │   └── RateLimited            429   per-client rate or per-session concurrency exceeded
    ├── UpstreamFailed             502   refused, 4xx/5xx, in-band error, cut stream, bad answer
    │   └── UpstreamTimedOut       504   no byte within LLM_READ_TIMEOUT, or past the total
    └── InternalFailure            500   a bug of ours

Before streaming, an error is an HTTP status (POST) or the only event of the stream (GET,
because an EventSource cannot read a 4xx body). Mid-stream it is one in-band ``error`` event,
then the end. ``message`` is always short readable Korean; ``detail`` is for the log only
and never reaches a client.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BadInput",
    "Forbidden",
    "GatewayError",
    "InternalFailure",
    "InvalidValue",
    "Overloaded",
    "RateLimited",
    "Refused",
    "Unauthorized",
    "UpstreamFailed",
    "UpstreamTimedOut",
]


class GatewayError(Exception):
    status: ClassVar[int] = 500
    default_message: ClassVar[str] = "일시적인 오류가 발생했어요. 잠시 후 다시 시도해 주세요."

    def __init__(self, detail: str = "", *, message: str | None = None, data: Any = None) -> None:
        super().__init__(detail or self.default_message)
        self.detail = detail
        self.message = message or self.default_message
        self.data = data


class BadInput(GatewayError):
    status = 400
    default_message = "요청을 이해하지 못했어요. 입력을 확인해 주세요."


class InvalidValue(GatewayError):
    status = 422
    default_message = "올바르지 않은 값이 있어요. 선택한 항목을 확인해 주세요."

    def __init__(self, fields: list[str], detail: str = "", *, message: str | None = None):
        super().__init__(detail, message=message, data={"invalidFields": fields})


class Overloaded(GatewayError):
    status = 503
    default_message = "지금은 요청이 많아요. 잠시 후 다시 시도해 주세요."

    def __init__(
        self, detail: str = "", *, retry_after: float = 1.0, message: str | None = None
    ) -> None:
        super().__init__(detail, message=message, data={"retryAfterSeconds": retry_after})
        self.retry_after = retry_after


class RateLimited(Overloaded):
    status = 429
    default_message = "요청이 너무 잦아요. 잠시 후 다시 시도해 주세요."


class Unauthorized(GatewayError):
    status = 401
    default_message = "인증 정보가 올바르지 않아요. API 키를 확인해 주세요."


class Forbidden(GatewayError):
    status = 403
    default_message = "다른 사이트의 페이지에서 보낸 요청은 받을 수 없어요."


class Refused(Exception):
    """A request not admitted (app/web/admission.py): ``error`` is what the client gets, an
    :class:`Unauthorized`, a :class:`Forbidden`, a :class:`RateLimited` or an
    :class:`Overloaded`. One type for every refusal, raised, so that no caller can forget to
    check one."""

    def __init__(self, error: Unauthorized | Forbidden | Overloaded) -> None:
        super().__init__(error.detail)
        self.error = error


class UpstreamFailed(GatewayError):
    status = 502
    default_message = "추천을 만드는 중에 문제가 생겼어요. 잠시 후 다시 시도해 주세요."


class UpstreamTimedOut(UpstreamFailed):
    status = 504
    default_message = "추천 서버의 응답이 늦어지고 있어요. 잠시 후 다시 시도해 주세요."


class InternalFailure(GatewayError):
    status = 500
