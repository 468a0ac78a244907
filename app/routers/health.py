"""Liveness and readiness.

``/ready`` asks every vLLM replica (``GET /models``) and the vector store, at most once per
``READY_CACHE_SECONDS``: a load balancer probing every 100 ms does not become load on vLLM.
Concurrent probes while a check runs wait for it and share its answer.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.domain.errors import GatewayError
from app.domain.events import Envelope, envelope
from app.llm.client import LLMClient
from app.rag.retriever import Retriever
from app.web.deps import MetricsDep

__all__ = ["Readiness", "router"]

router = APIRouter(tags=["health"])

_READY = "요청을 받을 준비가 되었어요."
_RETRY = "잠시 후 다시 시도해 주세요."
# What each check is called in the 503 message (never a URL or a host).
_PARTS = {"llm": "언어 모델 서버", "retriever": "챌린지 검색 저장소"}


class Readiness:
    """The dependency checks behind ``/ready``, cached for ``ttl`` seconds (one at a time)."""

    def __init__(self, llm: LLMClient, retriever: Retriever, ttl: float) -> None:
        self._llm = llm
        self._retriever = retriever
        self._ttl = ttl
        self._lock = asyncio.Lock()
        self._checked_at = -math.inf
        self._checks: dict[str, str] = {}

    async def checks(self) -> dict[str, str]:
        """``{"llm": "ok" | "unavailable", "retriever": ...}``, fresh or up to ``ttl`` old."""
        async with self._lock:
            if time.monotonic() - self._checked_at >= self._ttl:
                llm, retriever = await asyncio.gather(self._llm_ok(), self._retriever_ok())
                self._checks = {"llm": _word(llm), "retriever": _word(retriever)}
                self._checked_at = time.monotonic()
            return dict(self._checks)

    async def _llm_ok(self) -> bool:
        try:
            await self._llm.check()  # at least one replica answers
        except GatewayError:
            return False
        return True

    async def _retriever_ok(self) -> bool:
        try:
            await self._retriever.retrieve("제로웨이스트", k=1)
        except Exception:
            return False
        return True


def _word(ok: bool) -> str:
    return "ok" if ok else "unavailable"


async def _readiness(request: Request) -> Readiness:
    readiness: Readiness = request.state.readiness
    return readiness


ReadinessDep = Annotated[Readiness, Depends(_readiness)]


@router.get("/health", summary="Liveness: the process answers; calls no dependency")
async def health() -> JSONResponse:
    return JSONResponse(envelope(200, "정상 동작 중이에요.", {"status": "ok"}))


@router.get(
    "/ready",
    summary="Readiness: an LLM replica and the retriever answer (cached READY_CACHE_SECONDS)",
    response_model=Envelope,
    responses={503: {"model": Envelope, "description": "a dependency does not answer"}},
)
async def ready(readiness: ReadinessDep) -> JSONResponse:
    checks = await readiness.checks()
    failed = [_PARTS[name] for name, value in checks.items() if value != "ok"]
    if not failed:
        return JSONResponse(envelope(200, _READY, checks))
    message = f"아직 준비 중이에요: {'와 '.join(failed)}에 연결할 수 없어요. {_RETRY}"
    return JSONResponse(envelope(503, message, checks), status_code=503)


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
async def metrics(metrics: MetricsDep) -> Response:
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
