"""The weekly feedback job API (SPEC "Feedback"). Thin: validate, hand to the service.

    POST /ai/feedback                  202 {jobId} + Location; 400 / 422 / 401 / 503
    GET  /ai/feedback/{jobId}          the job's state, its text when done
    GET  /ai/feedback/results/stream   SSE: one ``feedback`` event per finished job

The body is parsed here (not by FastAPI) so that the answers are the contract's: unreadable
JSON is 400, a malformed field 422 with ``data.invalidFields`` naming its path. The same
``Idempotency-Key`` (else the caller's own ``X-Request-Id``) gives the same job.

The results stream is an endless SSE stream (no terminal event): event ids are cursors of
the results log, a reconnect with ``Last-Event-ID`` (or ``?lastEventId=``) gets what came
after, ``0`` replays every result still kept; the opening frame carries the id of "now" so a
listener that drops before its first event misses nothing either.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from app.config import Settings
from app.domain.errors import BadInput, GatewayError, InvalidValue, Overloaded, Unauthorized
from app.domain.events import Envelope, envelope, envelope_json
from app.feedback.metrics import FeedbackMetrics
from app.feedback.models import FeedbackRequest, invalid_fields
from app.feedback.records import ResultLog
from app.feedback.service import FeedbackService
from app.web.sse import EventStreamResponse

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(prefix="/ai/feedback", tags=["feedback"])

_JOB_ID = re.compile(r"[0-9a-f]{32}")
_KEY = re.compile(r"[\x21-\x7e]{1,200}")  # visible ASCII, as HTTP header tokens are
MESSAGE_ACCEPTED = "피드백 요청을 받았어요. 완성되면 전달할게요."
MESSAGE_EMPTY = "개인 챌린지와 단체 챌린지가 모두 비어 있어요. 하나 이상 보내 주세요."
MESSAGE_INVALID = "요청 형식이 올바르지 않아요. invalidFields의 항목을 확인해 주세요."
MESSAGE_NOT_FOUND = "해당 피드백 작업을 찾을 수 없어요."
MESSAGE_RESULT = "피드백이 완성되었어요."
_STATUS_MESSAGES = {
    "queued": "피드백 작업이 순서를 기다리고 있어요.",
    "running": "피드백을 만들고 있어요.",
    "done": MESSAGE_RESULT,
    "failed": "피드백을 만들지 못했어요. 다시 요청해 주세요.",
}


def _service(request: Request) -> FeedbackService:
    service: FeedbackService = request.state.feedback
    return service


def _error(error: GatewayError) -> JSONResponse:
    headers = {}
    if isinstance(error, Overloaded):
        headers["retry-after"] = str(max(1, round(error.retry_after)))
    return JSONResponse(
        envelope(error.status, error.message, error.data), status_code=error.status, headers=headers
    )


def _key_refusal(request: Request, settings: Settings) -> Unauthorized | None:
    """API_KEYS applies to the backend's calls as to any non-browser caller."""
    if not settings.api_keys:
        return None
    auth = request.headers.get("authorization", "")
    presented = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    presented = presented or request.headers.get("x-api-key", "").strip()
    given = presented.encode()
    keys = [key.get_secret_value().encode() for key in settings.api_keys]
    if given and any(hmac.compare_digest(given, key) for key in keys):
        return None
    return Unauthorized("missing or wrong API key on a feedback call")


def _idempotency_key(request: Request) -> str | None:
    for header in ("idempotency-key", "x-request-id"):
        value = request.headers.get(header, "").strip()
        if value and _KEY.fullmatch(value):
            return value
    return None


_DOC: dict[int | str, dict[str, Any]] = {
    code: {"model": Envelope, "description": text}
    for code, text in (
        (400, "unreadable JSON, or both challenge lists empty"),
        (401, "API_KEYS is set and the request has no valid key"),
        (
            422,
            "a malformed field; `data.invalidFields` names each (e.g. `groupChallenges[0].endDate`)",
        ),
        (503, "the queue is full (or its store is down); retry after `Retry-After` seconds"),
    )
}


@router.post(
    "",
    summary="Accept a weekly feedback job (generated in the background)",
    status_code=202,
    response_model=Envelope,
    responses=_DOC,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": FeedbackRequest.model_json_schema()}},
        }
    },
)
async def submit_feedback(request: Request) -> Response:
    settings: Settings = request.state.settings
    metrics: FeedbackMetrics = _service(request).metrics
    if (refusal := _key_refusal(request, settings)) is not None:
        return _error(refusal)
    try:
        body = json.loads(await request.body())
    except ValueError:
        metrics.jobs.labels("invalid").inc()
        return _error(BadInput("feedback body is not JSON"))
    if not isinstance(body, dict):
        metrics.jobs.labels("invalid").inc()
        return _error(BadInput("feedback body is not an object"))
    try:
        feedback = FeedbackRequest.model_validate(body)
    except ValidationError as exc:
        metrics.jobs.labels("invalid").inc()
        fields = invalid_fields(exc)
        log.info("feedback request refused: invalid %s", ", ".join(fields)[:300])
        return _error(InvalidValue(fields, "invalid feedback request", message=MESSAGE_INVALID))
    if feedback.empty:
        metrics.jobs.labels("invalid").inc()
        return _error(BadInput("both challenge lists empty", message=MESSAGE_EMPTY))
    try:
        record, created = await _service(request).submit(feedback, _idempotency_key(request))
    except Overloaded as exc:
        log.warning("feedback request refused: %s", exc.detail)
        return _error(exc)
    headers = {"location": f"/ai/feedback/{record.jobId}"}
    if not created:
        headers["idempotent-replayed"] = "true"
    data = {"jobId": record.jobId, "status": record.status}
    return JSONResponse(envelope(202, MESSAGE_ACCEPTED, data), status_code=202, headers=headers)


# Left out of the OpenAPI schema: an endless stream is no request/response operation, and the
# schema fuzzer (tests/test_fuzz_http.py) would wait on it until its timeout for every example.
@router.get("/results/stream", include_in_schema=False)
async def feedback_results(request: Request) -> Response:
    settings: Settings = request.state.settings
    if (refusal := _key_refusal(request, settings)) is not None:
        return _error(refusal)
    results = _service(request).results
    asked = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    cursor = asked.strip() if asked else ""
    if not results.valid_cursor(cursor):
        if cursor:
            log.info("results stream: unreadable Last-Event-ID %r, starting from now", cursor[:40])
        cursor = await results.tail()
    frames = _frames(results, cursor, settings)
    return EventStreamResponse(frames, send_timeout=settings.sse_send_timeout, prime=True)


async def _frames(results: ResultLog, cursor: str, settings: Settings) -> AsyncIterator[bytes]:
    yield f"id: {cursor}\r\nretry: {settings.sse_retry_ms}\r\n\r\n".encode()
    quiet_since = time.monotonic()
    while True:
        wait = settings.sse_ping_interval - (time.monotonic() - quiet_since)
        if wait <= 0:
            yield b": ping\r\n\r\n"
            quiet_since = time.monotonic()
            continue
        batch = await results.after(cursor, wait)
        if not batch:
            continue
        quiet_since = time.monotonic()
        frames = []
        for event_id, data in batch:
            body = envelope_json(200, MESSAGE_RESULT, json.loads(data))
            frames.append(f"id: {event_id}\r\nevent: feedback\r\ndata: {body}\r\n\r\n")
            cursor = event_id
        yield "".join(frames).encode()


@router.get(
    "/{job_id}",
    summary="A feedback job's state (queued, running, done, failed) and its text when done",
    response_model=Envelope,
    responses={404: {"model": Envelope, "description": "no such job (or expired)"}},
)
async def feedback_job(job_id: str, request: Request) -> Response:
    settings: Settings = request.state.settings
    if (refusal := _key_refusal(request, settings)) is not None:
        return _error(refusal)
    record = await _service(request).get(job_id) if _JOB_ID.fullmatch(job_id) else None
    if record is None:
        return JSONResponse(envelope(404, MESSAGE_NOT_FOUND, None), status_code=404)
    return JSONResponse(envelope(200, _STATUS_MESSAGES[record.status], record.public()))
