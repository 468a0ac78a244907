"""The weekly feedback job API (SPEC "Feedback"). Thin: validate, hand to the service.

    POST /ai/feedback                  202 {jobId} + Location; 400 / 401 / 403 / 415 / 422 / 503
    GET  /ai/feedback/{jobId}          the job's state, its text when done
    GET  /ai/feedback/results/stream   SSE: one ``feedback`` event per finished job

The body is parsed here (not by FastAPI) so that the answers are the contract's: unreadable
JSON, or JSON nested deeper than any request (MAX_DEPTH), is 400, a malformed field 422 with
``data.invalidFields`` naming its path. Its size and upload time are bounded before this
(``app.web.guards``), and it must be declared JSON (415 there). The same ``Idempotency-Key``
with the same request gives the same job; with another request it is a 422, and so is an
unusable one (empty, over 200 characters, not printable ASCII, sent twice), naming the header.
Without one, the caller's own ``X-Request-Id`` stands in, for the same request only: a request
id alone never merges two members' jobs. Keys are scoped per API key when keys are set.

Who may call (``app.web.access``): with API keys set, every endpoint here needs a key (a chat
page token is none). Without keys, a browser page of another site gets 403 on each; the
results stream, which carries every member's text, is served to loopback callers only, unless
FEEDBACK_RESULTS_PUBLIC; a job is polled by its id, random and 128 bits long.

The results stream is an endless SSE stream (no terminal event): event ids are cursors of
the results log, a reconnect with ``Last-Event-ID`` (or ``?lastEventId=``) gets what came
after, ``0`` replays every result still kept; the opening frame carries the id of "now" so a
listener that drops before its first event misses nothing either.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from app.domain.errors import BadInput, GatewayError, InvalidValue, Overloaded, Refused
from app.domain.events import FEEDBACK, Envelope, envelope, envelope_json
from app.feedback.metrics import FeedbackMetrics
from app.feedback.models import FeedbackRequest, invalid_fields
from app.web.access import Access, Caller
from app.web.deps import FeedbackDep
from app.web.errors import error_response
from app.web.sse import cursor_stream_response

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(prefix="/ai/feedback", tags=["feedback"])

_JOB_ID = re.compile(r"[0-9a-f]{32}")
_KEY = re.compile(r"[\x21-\x7e]{1,200}")  # visible ASCII, as HTTP header tokens are
MESSAGE_ACCEPTED = "피드백 요청을 받았어요. 완성되면 전달할게요."
MESSAGE_EMPTY = "개인 챌린지와 단체 챌린지가 모두 비어 있어요. 하나 이상 보내 주세요."
MESSAGE_INVALID = "요청 형식이 올바르지 않아요. invalidFields의 항목을 확인해 주세요."
MESSAGE_BAD_KEY = "Idempotency-Key는 공백 없는 영문·숫자·기호 200자 이내로 한 번만 보내 주세요."
IDEMPOTENCY_HEADER = "Idempotency-Key"
MESSAGE_NOT_FOUND = "해당 피드백 작업을 찾을 수 없어요."
MESSAGE_RESULT = "피드백이 완성되었어요."
MESSAGE_LOCAL_ONLY = (
    "피드백 결과 스트림은 이 서버 안에서만 볼 수 있어요. API 키를 설정하면 키로 받을 수 있어요."
)
MAX_DEPTH = 16  # a request nests 5 deep (object, list, object, list, date array)
_STATUS_MESSAGES = {
    "queued": "피드백 작업이 순서를 기다리고 있어요.",
    "running": "피드백을 만들고 있어요.",
    "done": MESSAGE_RESULT,
    "failed": "피드백을 만들지 못했어요. 다시 요청해 주세요.",
}


def _given_key(request: Request) -> str | None:
    """The ``Idempotency-Key`` sent, or None; raises the 422 naming the header when it is
    unusable (empty, over 200 characters, not printable ASCII, or sent twice): ignoring it
    would make two jobs of the retries its sender believes safe."""
    values = request.headers.getlist("idempotency-key")
    if not values:
        return None
    key = values[0].strip()
    if len(values) > 1 or not _KEY.fullmatch(key):
        raise InvalidValue(
            [IDEMPOTENCY_HEADER],
            f"unusable Idempotency-Key ({len(values)} given, {len(values[0])} chars)",
            message=MESSAGE_BAD_KEY,
        )
    return key


def _idempotency_key(
    request: Request, access: Access, feedback: FeedbackRequest, given: str | None
) -> str | None:
    """The job's key: the ``Idempotency-Key`` (``given``), else the request id together with
    the request itself; both within the caller's API key when keys are set."""
    scope = ""
    if access.keys_required:
        caller = access.identify(request)
        scope = caller.client if not isinstance(caller, GatewayError) else ""
    if given is not None:
        return f"idem:{scope}:{given}"
    request_id = request.headers.get("x-request-id", "").strip()
    if request_id and _KEY.fullmatch(request_id):
        return f"rid:{scope}:{request_id}:{feedback.fingerprint()}"
    return None


def _too_deep(value: object) -> bool:
    """Nested deeper than MAX_DEPTH (without recursion: the depth is what is in question)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


_DOC: dict[int | str, dict[str, Any]] = {
    code: {"model": Envelope, "description": text}
    for code, text in (
        (400, "unreadable JSON, nested too deep, or both challenge lists empty"),
        (401, "API_KEYS is set and the request has no valid key"),
        (403, "a browser page of another site, without a key (`Sec-Fetch-Site`, `Origin`)"),
        (
            422,
            "a malformed field; `data.invalidFields` names each (e.g. `groupChallenges[0].endDate`); "
            "or an `Idempotency-Key` that is unusable (over 200 characters, not printable ASCII) "
            'or another request\'s (`invalidFields: ["Idempotency-Key"]`)',
        ),
        (413, "the body is larger than FEEDBACK_BODY_MAX_BYTES"),
        (415, "the body is not declared JSON (`Content-Type: application/json`)"),
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
async def submit_feedback(request: Request, jobs: FeedbackDep) -> Response:
    metrics: FeedbackMetrics = jobs.service.metrics
    try:
        jobs.admission.key_holder(request)
    except Refused as refused:
        return error_response(refused.error)
    try:
        given = _given_key(request)
    except InvalidValue as exc:
        metrics.jobs.labels("invalid").inc()
        log.info("feedback request refused: %s", exc.detail)
        return error_response(exc)
    try:
        body = json.loads(await request.body())
    except ValueError:
        metrics.jobs.labels("invalid").inc()
        return error_response(BadInput("feedback body is not JSON"))
    except RecursionError:  # nested past the interpreter's limit
        metrics.jobs.labels("invalid").inc()
        return error_response(BadInput("feedback body nested too deep"))
    if _too_deep(body):
        metrics.jobs.labels("invalid").inc()
        return error_response(BadInput("feedback body nested too deep"))
    if not isinstance(body, dict):
        metrics.jobs.labels("invalid").inc()
        return error_response(BadInput("feedback body is not an object"))
    try:
        feedback = FeedbackRequest.model_validate(body)
    except ValidationError as exc:
        metrics.jobs.labels("invalid").inc()
        fields = invalid_fields(exc)
        log.info("feedback request refused: invalid %s", ", ".join(fields)[:300])
        return error_response(
            InvalidValue(fields, "invalid feedback request", message=MESSAGE_INVALID)
        )
    if feedback.empty:
        metrics.jobs.labels("invalid").inc()
        return error_response(BadInput("both challenge lists empty", message=MESSAGE_EMPTY))
    try:
        key = _idempotency_key(request, jobs.admission.access, feedback, given)
        caller = jobs.admission.access.identify(request)
        client = caller.name if isinstance(caller, Caller) else "anonymous"
        record, created = await jobs.service.submit(feedback, key, client)
    except InvalidValue as exc:
        log.info("feedback request refused: %s", exc.detail)
        return error_response(exc)
    except Overloaded as exc:
        log.warning("feedback request refused: %s", exc.detail)
        return error_response(exc)
    headers = {"location": f"/ai/feedback/{record.jobId}"}
    if not created:
        headers["idempotent-replayed"] = "true"
    data = {"jobId": record.jobId, "status": record.status}
    return JSONResponse(envelope(202, MESSAGE_ACCEPTED, data), status_code=202, headers=headers)


# Left out of the OpenAPI schema: an endless stream is no request/response operation, and the
# schema fuzzer (tests/test_fuzz_http.py) would wait on it until its timeout for every example.
@router.get("/results/stream", include_in_schema=False)
async def feedback_results(request: Request, jobs: FeedbackDep) -> Response:
    access = jobs.admission.access
    try:
        jobs.admission.key_holder(request)
    except Refused as refused:
        return error_response(refused.error)
    if not access.keys_required and not jobs.results_public:
        if not access.local(request):
            log.info("results stream refused to a caller beyond loopback (no API_KEYS)")
            return JSONResponse(envelope(403, MESSAGE_LOCAL_ONLY, None), status_code=403)
    results = jobs.service.results
    asked = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    cursor = asked.strip() if asked else ""
    if not results.valid_cursor(cursor):
        if cursor:
            log.info("results stream: unreadable Last-Event-ID %r, starting from now", cursor[:40])
        cursor = await results.tail()

    async def events_after(after: str, wait: float) -> list[tuple[str, str, str]]:
        return [
            (event_id, FEEDBACK, envelope_json(200, MESSAGE_RESULT, json.loads(data)))
            for event_id, data in await results.after(after, wait)
        ]

    return cursor_stream_response(
        cursor,
        events_after,
        retry_ms=jobs.sse.sse_retry_ms,
        ping_interval=jobs.sse.sse_ping_interval,
        send_timeout=jobs.sse.sse_send_timeout,
    )


@router.get(
    "/{job_id}",
    summary="A feedback job's state (queued, running, done, failed) and its text when done",
    response_model=Envelope,
    responses={404: {"model": Envelope, "description": "no such job (or expired)"}},
)
async def feedback_job(job_id: str, request: Request, jobs: FeedbackDep) -> Response:
    try:
        jobs.admission.key_holder(request)
    except Refused as refused:
        return error_response(refused.error)
    record = await jobs.service.get(job_id) if _JOB_ID.fullmatch(job_id) else None
    if record is None:
        return JSONResponse(envelope(404, MESSAGE_NOT_FOUND, None), status_code=404)
    return JSONResponse(envelope(200, _STATUS_MESSAGES[record.status], record.public()))
