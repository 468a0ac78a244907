"""The four recommendation endpoints. Thin: read the request into a validated turn, admit the
caller (app/web/admission.py), and hand the turn's events to SSE (GET) or fold them into one
JSON envelope (POST). Input errors are the stream's only event on GET (an EventSource cannot
read a 4xx body), an HTTP status on POST."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from app.chat.intent import normalize_message
from app.chat.plan import BaseInfoTurn, FreeTextTurn
from app.chat.sessions import new_session_id
from app.domain.categories import (
    LOCATIONS,
    WORK_TYPES,
    Category,
    normalize_choice,
    parse_category,
)
from app.domain.errors import (
    BadInput,
    GatewayError,
    InternalFailure,
    InvalidValue,
    Refused,
)
from app.domain.events import (
    CHALLENGE,
    CLOSE,
    ERROR,
    MESSAGE_DONE,
    Delta,
    Done,
    Envelope,
    Failed,
    StreamEvent,
    envelope,
)
from app.logs import current_request_id
from app.metrics import Metrics
from app.web.deps import ChatContext, ChatDep
from app.web.errors import error_response
from app.web.sse import EventStreamResponse, event_source_response, resume_response

__all__ = ["router"]

router = APIRouter(prefix="/ai/chatbot/recommendation", tags=["recommendation"])

# ASCII only: the id is echoed in the X-Session-Id header, which must stay latin-1.
_SESSION_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")


_SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A stream of `challenge` events, then one `close` or `error` event "
        "(input errors too, as an `error` event: an EventSource cannot read a 4xx body).",
        "content": {
            "text/event-stream": {
                "schema": {  # one server-sent event; `data` is a JSON envelope
                    "type": "object",
                    "properties": {
                        "event": {"enum": [CHALLENGE, CLOSE, ERROR]},
                        "id": {"type": "string"},
                        "data": {"type": "string", "contentMediaType": "application/json"},
                    },
                    "required": ["event", "id", "data"],
                }
            }
        },
    },
    204: {
        "description": "An EventSource reconnecting with `Last-Event-ID` when that stream has "
        "nothing left to send or is no longer kept (the browser then stops reconnecting). "
        "A reconnect to a kept stream gets its remaining events instead, never a new answer."
    },
}
_JSON_DOC: dict[int | str, dict[str, Any]] = {
    code: {"model": Envelope, "description": text}
    for code, text in (
        (400, "bad input (empty message, missing selection, unreadable body)"),
        (401, "API_KEYS is set and the request has no valid key"),
        (403, "a browser page of another site, without a key (`Sec-Fetch-Site`, `Origin`)"),
        (415, "the body is not declared JSON (`Content-Type: application/json`)"),
        (422, "an invalid value; `data.invalidFields` names it"),
        (
            429,
            "too many requests from this client or on this session; retry after `Retry-After` seconds",
        ),
        (499, "the client left before the answer was ready (nobody reads this)"),
        (502, "the LLM upstream failed"),
        (503, "overloaded; retry after `Retry-After` seconds"),
        (504, "the LLM upstream timed out"),
    )
}


#: The GET routes' parameters: query strings as the EventSource sends them (a repeated name
#: counts once, its last value), and the header of an EventSource reconnecting (its protocol,
#: not an input: left out of the schema, as the 204 it may get is described there). Plain
#: strings: the route validates them, so a GET gets an SSE ``error`` event, never a 422 body.
SessionIdQuery = Annotated[str | None, Query(alias="sessionId")]
WorkTypeQuery = Annotated[str | None, Query(alias="workType")]
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", include_in_schema=False)]


_SSE_ROUTE: dict[str, Any] = {
    "response_class": EventStreamResponse,
    "status_code": 200,
    "responses": _SSE_DOC,
}


class BaseInfoBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sessionId: str | None = None
    location: str | None = None
    workType: str | None = None
    category: str | None = None


class FreeTextBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sessionId: str | None = None
    message: str | None = None


def _session(session_id: str | None) -> tuple[str, InvalidValue | None]:
    """The session to use, or the error for an id we will not store."""
    if session_id is None or not session_id.strip():
        return new_session_id(), None
    if not _SESSION_ID.fullmatch(session_id):
        error = InvalidValue(
            ["sessionId"], "bad session id", message="세션 ID 형식이 올바르지 않아요."
        )
        return new_session_id(), error
    return session_id, None


def _base_info_turn(body: BaseInfoBody) -> tuple[str, str, Category]:
    """The selection, validated: 400 naming what is missing, 422 naming what is unknown."""
    given = {"location": body.location, "workType": body.workType, "category": body.category}
    missing = [name for name, value in given.items() if not (value or "").strip()]
    if missing:
        raise BadInput(
            f"missing {missing}",
            message="위치, 근무 형태, 카테고리를 모두 선택해 주세요.",
            data={"missingFields": missing},
        )
    place = normalize_choice(body.location or "", LOCATIONS)
    work = normalize_choice(body.workType or "", WORK_TYPES)
    chosen = parse_category(body.category or "")
    if place is None or work is None or chosen is None:
        read = (("location", place), ("workType", work), ("category", chosen))
        invalid = [name for name, value in read if value is None]
        raise InvalidValue(invalid, f"invalid {invalid}")
    return place, work, chosen


def _free_text_turn(body: FreeTextBody, limit: int) -> str:
    """The message, normalized: 400 when empty, 422 past MAX_MESSAGE_CHARS."""
    text = normalize_message(body.message or "")
    if not text:
        raise BadInput("empty message", message="메시지를 입력해 주세요.")
    if len(text) > limit:
        raise InvalidValue(
            ["message"],
            f"message of {len(text)} chars",
            message=f"메시지는 {limit}자 이내로 입력해 주세요.",
        )
    return text


async def _only(event: StreamEvent) -> AsyncIterator[StreamEvent]:
    yield event


async def _as_json(
    request: Request,
    metrics: Metrics,
    endpoint: str,
    events: AsyncIterator[StreamEvent],
    headers: dict[str, str],
) -> Response:
    """Drain a pipeline into one envelope with a real HTTP status.

    Starlette does not cancel a plain handler when its client leaves, so a caller that gives
    up would keep vLLM generating for nobody: the fold races a watch for the disconnect, and
    the loser is cancelled (closing the upstream request).
    """
    response: Response | None = None
    async with anyio.create_task_group() as group:

        async def fold() -> None:
            nonlocal response
            async with aclosing(events):  # type: ignore[type-var]
                response = await _fold(events, headers)
            group.cancel_scope.cancel()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(fold)
        group.start_soon(watch)
    # None only when the client left: nobody reads this answer.
    if response is None:
        metrics.client_disconnects.inc()
        metrics.requests.labels(endpoint, "disconnected").inc()
        return Response(status_code=499)
    outcome = "close" if response.status_code == 200 else str(response.status_code)
    metrics.requests.labels(endpoint, outcome).inc()
    return response


async def _fold(events: AsyncIterator[StreamEvent], headers: dict[str, str]) -> Response:
    async for event in events:
        if isinstance(event, Delta):
            continue
        if isinstance(event, Done):
            return JSONResponse(envelope(200, MESSAGE_DONE, event.payload), headers=headers)
        return error_response(event.error, headers)
    return error_response(InternalFailure("stream ended without a result"), headers)


async def _start(
    request: Request, chat: ChatContext, endpoint: str, body: BaseInfoBody | FreeTextBody
) -> tuple[AsyncIterator[StreamEvent], dict[str, str], str]:
    """The turn's events for ``body``, the headers that name its session and request, and
    who may resume its stream. Checked in order: the caller (401: a stranger learns nothing
    else), the session id (422), the rates and the key's token budget (429), the input
    (400/422); the generation slots (429/503) as the turn runs."""
    started = time.monotonic()
    request_id = current_request_id()
    session_id, bad_session = _session(body.sessionId)
    headers = {"x-session-id": session_id, "x-request-id": request_id}
    admission = chat.admission
    try:
        caller = admission.caller(request)
        if caller.renew_cookie is not None:
            headers["set-cookie"] = caller.renew_cookie
        if bad_session is not None:
            raise bad_session
        await admission.rates(caller, session_id)
        await admission.budget(caller)
        known = {"endpoint": endpoint, "client": caller.name}
        if isinstance(body, BaseInfoBody):
            place, work, chosen = _base_info_turn(body)
            turn: BaseInfoTurn | FreeTextTurn = BaseInfoTurn(
                session_id, request_id, started, place, work, chosen, **known
            )
        else:
            text = _free_text_turn(body, chat.turns.max_message_chars)
            turn = FreeTextTurn(session_id, request_id, started, text, **known)
    except Refused as refused:
        return _only(Failed(refused.error)), headers, ""
    except GatewayError as error:
        return _only(Failed(error)), headers, ""
    gate = admission.gate(caller, session_id)
    if isinstance(turn, BaseInfoTurn):
        events = chat.service.base_info(turn, gate)
    else:
        events = chat.service.free_text(turn, gate)
    return events, headers, caller.owner(body.sessionId or "")


def _sse(
    events: AsyncIterator[StreamEvent],
    headers: dict[str, str],
    chat: ChatContext,
    endpoint: str,
    owner: str = "",
) -> EventStreamResponse:
    sse = chat.sse
    return event_source_response(
        events,
        streams=chat.streams,
        ping_interval=sse.sse_ping_interval,
        send_timeout=sse.sse_send_timeout,
        retry_ms=sse.sse_retry_ms,
        metrics=chat.metrics,
        endpoint=endpoint,
        headers=headers,
        owner=owner,
    )


async def _stream(
    request: Request,
    chat: ChatContext,
    endpoint: str,
    body: BaseInfoBody | FreeTextBody,
    last_event_id: str | None,
) -> Response:
    """A GET: the stream a reconnecting EventSource left (``Last-Event-ID``), else a new turn."""
    if last_event_id and last_event_id.strip():
        return await _resume(request, chat, endpoint, last_event_id.strip(), body.sessionId)
    events, headers, owner = await _start(request, chat, endpoint, body)
    return _sse(events, headers, chat, endpoint, owner)


async def _resume(
    request: Request, chat: ChatContext, endpoint: str, last_event_id: str, given: str | None
) -> Response:
    """An EventSource reconnecting (``Last-Event-ID``) continues its stream, never a new one.
    Only the client that started it (and with the same ``sessionId``) gets it: anyone else
    gets the 204 of an unknown stream. A reconnect counts against the rate limits."""
    headers = {"x-request-id": current_request_id()}
    try:
        caller = chat.admission.caller(request)
        await chat.admission.rates(caller, given or "")
    except Refused as refused:
        return _sse(_only(Failed(refused.error)), headers, chat, endpoint)
    return await resume_response(
        last_event_id,
        streams=chat.streams,
        ping_interval=chat.sse.sse_ping_interval,
        send_timeout=chat.sse.sse_send_timeout,
        metrics=chat.metrics,
        endpoint=endpoint,
        headers=headers,
        owner=caller.owner(given or ""),
    )


@router.get(
    "/base-info",
    summary="Recommend challenges for a base-info selection (SSE)",
    **_SSE_ROUTE,
)
async def base_info_stream(
    request: Request,
    chat: ChatDep,
    session_id: SessionIdQuery = None,
    location: str | None = None,
    work_type: WorkTypeQuery = None,
    category: str | None = None,
    last_event_id: LastEventId = None,
) -> Response:
    body = BaseInfoBody(
        sessionId=session_id, location=location, workType=work_type, category=category
    )
    return await _stream(request, chat, "base-info", body, last_event_id)


@router.get(
    "/free-text",
    summary="Answer a free-text message with retrieval (SSE)",
    **_SSE_ROUTE,
)
async def free_text_stream(
    request: Request,
    chat: ChatDep,
    session_id: SessionIdQuery = None,
    message: str | None = None,
    last_event_id: LastEventId = None,
) -> Response:
    body = FreeTextBody(sessionId=session_id, message=message)
    return await _stream(request, chat, "free-text", body, last_event_id)


@router.post(
    "/base-info",
    summary="Recommend challenges for a base-info selection (JSON)",
    response_model=Envelope,
    responses=_JSON_DOC,
)
async def base_info_json(request: Request, chat: ChatDep, body: BaseInfoBody) -> Response:
    events, headers, _ = await _start(request, chat, "base-info-json", body)
    return await _as_json(request, chat.metrics, "base-info-json", events, headers)


@router.post(
    "/free-text",
    summary="Answer a free-text message with retrieval (JSON)",
    response_model=Envelope,
    responses=_JSON_DOC,
)
async def free_text_json(request: Request, chat: ChatDep, body: FreeTextBody) -> Response:
    events, headers, _ = await _start(request, chat, "free-text-json", body)
    return await _as_json(request, chat.metrics, "free-text-json", events, headers)
