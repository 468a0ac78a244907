"""The four recommendation endpoints. Thin: know the caller, resolve the session, admit, hand
the pipeline's events (holding the caller's share of generations) to SSE (GET) or fold them
into one JSON envelope (POST)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import aclosing
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict

from app.chat.sessions import new_session_id
from app.domain.errors import InternalFailure, InvalidValue, Overloaded, Unauthorized
from app.domain.events import (
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
from app.web.deps import ChatContext, ChatDep, chat_context
from app.web.sse import EventStreamResponse, event_source_response, resume_response

__all__ = ["router"]

router = APIRouter(prefix="/ai/chatbot/recommendation", tags=["recommendation"])

# ASCII only: the id is echoed in the X-Session-Id header, which must stay latin-1.
_SESSION_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")


def _text_queries(*names: str) -> dict[str, Any]:
    """OpenAPI ``parameters`` for the GET routes' optional text fields. The routes are
    ``_StreamRoute``s, so FastAPI never reads their parameters: the handlers read
    ``request.query_params`` themselves, and this is the only place the schema learns of them.
    Plain strings: the pipeline validates, so a GET gets an SSE error event, not a 422 body; a
    repeated name counts once, its last value (as FastAPI's ``Query`` did)."""
    schema = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    return {
        "parameters": [
            {
                "name": name,
                "in": "query",
                "required": False,
                "schema": {**schema, "title": name.capitalize()},
            }
            for name in names
        ]
    }


_SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A stream of `challenge` events, then one `close` or `error` event "
        "(input errors too, as an `error` event: an EventSource cannot read a 4xx body).",
        "content": {
            "text/event-stream": {
                "schema": {  # one server-sent event; `data` is a JSON envelope
                    "type": "object",
                    "properties": {
                        "event": {"enum": ["challenge", "close", "error"]},
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


class _StreamRoute(APIRoute):
    """An SSE route: in the OpenAPI schema like any other (declared by ``_stream_route``), but
    its endpoint is called with the request alone. FastAPI's request handler (body reading,
    dependency solving, its telemetry hooks, the response checks) is a visible share of each
    stream's start, on the way to the upstream call (bench/README.md "Profile"); these
    endpoints read
    what they need from the request themselves (the lifespan's ``ChatContext`` in
    ``request.state``, the query parameters)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint: Callable[[Request], Coroutine[Any, Any, Response]] = self.endpoint
        return endpoint


def _stream_route(
    path: str, **doc: Any
) -> Callable[[Callable[[Request], Coroutine[Any, Any, Response]]], Any]:
    """``@router.get(path, ...)`` for an SSE endpoint ``async def (request) -> Response``."""

    def register(endpoint: Callable[[Request], Coroutine[Any, Any, Response]]) -> Any:
        router.add_api_route(
            path,
            endpoint,
            methods=["GET"],
            response_class=EventStreamResponse,
            status_code=200,
            responses=_SSE_DOC,
            route_class_override=_StreamRoute,
            **doc,
        )
        return endpoint

    return register


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


def _session(session_id: str | None) -> tuple[str, StreamEvent | None]:
    """The session to use, or an error event for an id we will not store."""
    if session_id is None or not session_id.strip():
        return new_session_id(), None
    if not _SESSION_ID.fullmatch(session_id):
        error = InvalidValue(
            ["sessionId"], "bad session id", message="세션 ID 형식이 올바르지 않아요."
        )
        return new_session_id(), Failed(error)
    return session_id, None


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
        error = event.error
        extra = {}
        if isinstance(error, Overloaded):
            extra["retry-after"] = str(max(1, round(error.retry_after)))
        return JSONResponse(
            envelope(error.status, error.message, error.data),
            status_code=error.status,
            headers={**headers, **extra},
        )
    failure = InternalFailure("stream ended without a result")
    return JSONResponse(envelope(500, failure.message, None), status_code=500, headers=headers)


async def _start(
    request: Request, chat: ChatContext, body: BaseInfoBody | FreeTextBody
) -> tuple[AsyncIterator[StreamEvent], dict[str, str], str]:
    """The pipeline's events for ``body``, the headers that name its session and request, and
    who may resume its stream. Checked first: the caller (401), then the session id, the rate
    limits (429); the caller's share of generations (429/503) when the generation starts."""
    request_id = current_request_id()
    session_id, problem = _session(body.sessionId)
    headers = {"x-session-id": session_id, "x-request-id": request_id}
    caller = chat.access.identify(request)
    if isinstance(caller, Unauthorized):  # before anything else: a stranger learns nothing
        return _only(Failed(caller)), headers, ""
    if caller.renew_cookie is not None:
        headers["set-cookie"] = caller.renew_cookie
    if problem is None:
        refusal = await chat.limits.admit(caller, session_id)
        problem = None if refusal is None else Failed(refusal)
    if problem is not None:
        return _only(problem), headers, ""
    events: AsyncIterator[StreamEvent]
    if isinstance(body, BaseInfoBody):
        events = chat.service.base_info(
            session_id=session_id,
            location=body.location,
            work_type=body.workType,
            category=body.category,
            request_id=request_id,
        )
    else:
        events = chat.service.free_text(
            session_id=session_id, message=body.message, request_id=request_id
        )
    return chat.shares.hold(caller, events), headers, caller.owner(body.sessionId or "")


def _sse(
    events: AsyncIterator[StreamEvent],
    headers: dict[str, str],
    chat: ChatContext,
    endpoint: str,
    owner: str = "",
) -> EventStreamResponse:
    settings = chat.settings
    return event_source_response(
        events,
        streams=chat.streams,
        ping_interval=settings.sse_ping_interval,
        send_timeout=settings.sse_send_timeout,
        retry_ms=settings.sse_retry_ms,
        metrics=chat.metrics,
        endpoint=endpoint,
        headers=headers,
        owner=owner,
    )


async def _resume(request: Request, chat: ChatContext, endpoint: str) -> Response | None:
    """An EventSource reconnecting (``Last-Event-ID``) continues its stream, never a new one.
    Only the client that started it (and with the same ``sessionId``) gets it: anyone else
    gets the 204 of an unknown stream. A reconnect counts against the rate limits."""
    last_event_id = request.headers.get("last-event-id", "").strip()
    if not last_event_id:
        return None
    given = request.query_params.get("sessionId") or ""
    headers = {"x-request-id": current_request_id()}
    caller = chat.access.identify(request)
    if isinstance(caller, Unauthorized):
        return _sse(_only(Failed(caller)), headers, chat, endpoint)
    refusal = await chat.limits.admit(caller, given)
    if refusal is not None:
        return _sse(_only(Failed(refusal)), headers, chat, endpoint)
    return await resume_response(
        last_event_id,
        streams=chat.streams,
        ping_interval=chat.settings.sse_ping_interval,
        send_timeout=chat.settings.sse_send_timeout,
        metrics=chat.metrics,
        endpoint=endpoint,
        headers=headers,
        owner=caller.owner(given),
    )


@_stream_route(
    "/base-info",
    summary="Recommend challenges for a base-info selection (SSE)",
    openapi_extra=_text_queries("sessionId", "location", "workType", "category"),
)
async def base_info_stream(request: Request) -> Response:
    chat = chat_context(request)
    if (resumed := await _resume(request, chat, "base-info")) is not None:
        return resumed
    query = request.query_params
    body = BaseInfoBody(
        sessionId=query.get("sessionId"),
        location=query.get("location"),
        workType=query.get("workType"),
        category=query.get("category"),
    )
    events, headers, owner = await _start(request, chat, body)
    return _sse(events, headers, chat, "base-info", owner)


@_stream_route(
    "/free-text",
    summary="Answer a free-text message with retrieval (SSE)",
    openapi_extra=_text_queries("sessionId", "message"),
)
async def free_text_stream(request: Request) -> Response:
    chat = chat_context(request)
    if (resumed := await _resume(request, chat, "free-text")) is not None:
        return resumed
    query = request.query_params
    body = FreeTextBody(sessionId=query.get("sessionId"), message=query.get("message"))
    events, headers, owner = await _start(request, chat, body)
    return _sse(events, headers, chat, "free-text", owner)


@router.post(
    "/base-info",
    summary="Recommend challenges for a base-info selection (JSON)",
    response_model=Envelope,
    responses=_JSON_DOC,
)
async def base_info_json(
    request: Request,
    chat: ChatDep,
    body: BaseInfoBody,
) -> Response:
    events, headers, _ = await _start(request, chat, body)
    return await _as_json(request, chat.metrics, "base-info-json", events, headers)


@router.post(
    "/free-text",
    summary="Answer a free-text message with retrieval (JSON)",
    response_model=Envelope,
    responses=_JSON_DOC,
)
async def free_text_json(
    request: Request,
    chat: ChatDep,
    body: FreeTextBody,
) -> Response:
    events, headers, _ = await _start(request, chat, body)
    return await _as_json(request, chat.metrics, "free-text-json", events, headers)
