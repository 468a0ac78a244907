"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.chat.events import Envelope, envelope
from app.deps import LLMDep, MetricsDep, RetrieverDep
from app.errors import GatewayError

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/health", summary="Liveness: the process answers; calls no dependency")
async def health() -> JSONResponse:
    return JSONResponse(envelope(200, "정상 동작 중이에요.", {"status": "ok"}))


@router.get(
    "/ready",
    summary="Readiness: the LLM upstream and the retriever answer",
    response_model=Envelope,
    responses={503: {"model": Envelope, "description": "a dependency does not answer"}},
)
async def ready(llm: LLMDep, retriever: RetrieverDep) -> JSONResponse:
    checks: dict[str, str] = {}
    try:
        await llm.check()
        checks["llm"] = "ok"
    except GatewayError:
        checks["llm"] = "unavailable"
    try:
        await retriever.retrieve("제로웨이스트", k=1)
        checks["retriever"] = "ok"
    except Exception:
        checks["retriever"] = "unavailable"
    ok = all(value == "ok" for value in checks.values())
    status = 200 if ok else 503
    message = (
        "요청을 받을 준비가 되었어요." if ok else "아직 준비 중이에요. 잠시 후 다시 시도해 주세요."
    )
    return JSONResponse(envelope(status, message, checks), status_code=status)


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
async def metrics(metrics: MetricsDep) -> Response:
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
