"""The ASGI app: ``create_app()`` and the lifespan that builds every shared client once.

uvicorn app.main:app            (``app`` is created lazily on first attribute access)
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from app.chat.generation import Generator
from app.chat.intent_bank import build_facets, build_intents
from app.chat.planning import Planner
from app.chat.sentence_bank import build_fit_bank, build_sentence_bank
from app.chat.session_backend import open_session_store
from app.chat.subjects import Subjects
from app.chat.turn import RecommendationService
from app.config import (
    AccessSettings,
    ChatSettings,
    FeedbackSettings,
    RetrievalSettings,
    SessionSettings,
    Settings,
    StreamSettings,
    UpstreamSettings,
    get_settings,
)
from app.domain.errors import BadInput, InternalFailure
from app.domain.events import envelope
from app.feedback.service import open_feedback
from app.llm.client import LLMClient, build_http_client
from app.llm.upstreams import UpstreamPool
from app.logs import RequestIdMiddleware, bound_request_id, request_id_of, setup_logging
from app.metrics import Metrics
from app.rag.cached import CachedRetriever
from app.rag.corpus import (
    SITUATION_FIRSTS,
    classics_of,
    load_corpus,
    load_situation_firsts,
    pairings_of,
)
from app.rag.startup import open_retriever
from app.redis_client import redis_connector
from app.routers import feedback as feedback_routes
from app.routers import health, page, recommendation
from app.streams.open import open_stream_hub
from app.tracing import SERVER_TELEMETRY, open_tracing, redact_query
from app.web.access import Access, PeerMiddleware, exposure_warning
from app.web.admission import Admission
from app.web.deps import ChatContext, FeedbackContext
from app.web.guards import DOCS_PATHS, BodyGuard, JsonOnly, KeyGate
from app.web.limits import open_limits

__all__ = ["create_app"]

_HTTP_MESSAGES = {
    404: "요청한 주소를 찾을 수 없어요.",
    405: "이 주소에서 지원하지 않는 요청 방식이에요.",
}

log = logging.getLogger("app")

GC_YOUNG_THRESHOLD = 10_000  # allocations between young collections (Python's default: 700)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    # Each part is given its own settings, and nothing else (app/config.py).
    upstream = settings.part(UpstreamSettings)
    retrieval = settings.part(RetrievalSettings)
    turns = settings.part(ChatSettings)
    sse = settings.part(StreamSettings)
    guard = settings.part(AccessSettings)
    access = Access(guard)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        setup_logging(
            settings.log_level,
            settings.log_format,
            access_query=redact_query if settings.access_log_query == "redacted" else None,
        )
        if (warning := exposure_warning(guard)) is not None:
            log.warning(warning)
        # Tracing first (OTEL_* variables only): it outlives every part, so spans of the
        # shutdown are exported too.
        with open_tracing():
            async with _parts() as state:
                yield state

    @asynccontextmanager
    async def _parts() -> AsyncIterator[dict[str, Any]]:
        metrics = Metrics()
        metrics.watch_loop(asyncio.get_running_loop())
        redis = redis_connector(settings.redis_url)  # None: sessions, limits, jobs in memory
        async with (
            open_session_store(settings.part(SessionSettings), redis) as sessions,
            open_retriever(retrieval) as retriever,
            build_http_client(upstream) as http,
            UpstreamPool.from_settings(upstream, http, metrics) as upstreams,  # health checks
            open_limits(guard, redis) as limits,
            # Last: on exit it stops the generations before the clients they use close.
            open_stream_hub(sse, redis) as streams,
            AsyncExitStack() as jobs,  # closed first: feedback workers stop before the clients
        ):
            llm = LLMClient(http, upstream, metrics=metrics, upstreams=upstreams)
            feedback = await jobs.enter_async_context(
                open_feedback(settings.part(FeedbackSettings), llm, metrics.registry, redis)
            )
            intents = await anyio.to_thread.run_sync(build_intents, retriever.embedder)
            facets = await anyio.to_thread.run_sync(build_facets, retriever.embedder)
            sentences = await anyio.to_thread.run_sync(
                build_sentence_bank, retriever.embedder, retrieval.corpus_path
            )
            fit = await anyio.to_thread.run_sync(
                build_fit_bank, retriever.embedder, retrieval.corpus_path
            )
            corpus = await anyio.to_thread.run_sync(load_corpus, retrieval.corpus_path)
            firsts = await anyio.to_thread.run_sync(
                load_situation_firsts, retrieval.corpus_path.with_name(SITUATION_FIRSTS)
            )
            size = retrieval.retrieval_cache_size
            service = RecommendationService(
                Planner(
                    retriever=CachedRetriever(
                        retriever, size=size, ttl=retrieval.retrieval_cache_seconds
                    )
                    if size
                    else retriever,
                    intents=intents,
                    facets=facets,
                    sentences=sentences,
                    fit=fit,
                    classics=classics_of(corpus),
                    firsts=firsts,
                    subjects=Subjects(corpus),
                    pairings=pairings_of(corpus),
                    sessions=sessions,
                    settings=turns,
                    metrics=metrics,
                ),
                Generator(
                    llm=llm,
                    sessions=sessions,
                    metrics=metrics,
                    max_tokens=upstream.llm_max_tokens,
                ),
            )
            admission = Admission(guard, access=access, limits=limits)
            log.info(
                "gateway ready: upstream %s, retrieval %s with %s",
                ", ".join(upstreams.labels),  # host:port only: a URL may hold credentials
                retrieval.retrieval_mode,
                retriever.embedder_name,
            )
            # Everything built so far lives as long as the process: take it out of the
            # collector's sight, or each full collection walks it again (long pauses under
            # load; bench/README.md "Profile").
            gc.collect()
            gc.freeze()
            # Rarer young collections: each streamed event stays in its stream's log until
            # the resume TTL, so with Python's default the young generation fills every few
            # hundred events under load, and each collection pushes them on towards the
            # older generations, whose collections walk every kept log (bench/README.md
            # "Profile" has the CPU per chunk and the streams served with and without).
            gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
            # What the routes read (``request.state``); everything else lives in these.
            yield {
                "metrics": metrics,
                "readiness": health.Readiness(llm, retriever, settings.ready_cache_seconds),
                "chat": ChatContext(service, admission, turns, sse, metrics, streams),
                "feedback": FeedbackContext(
                    feedback, admission, sse, guard.feedback_results_public
                ),
            }

    app = FastAPI(
        title="Eco-challenge chatbot gateway",
        summary="Streams eco-challenge recommendations from vLLM over Server-Sent Events.",
        version="0.1.0",
        lifespan=lifespan,
        # No redirect built from the Host header ("/health/" -> "http://<Host>/health"): a
        # path that is not a route is a 404.
        redirect_slashes=False,
        telemetry=SERVER_TELEMETRY,  # the request's span, when tracing is on (app/tracing.py)
    )
    routers = (recommendation.router, health.router, page.router, feedback_routes.router)
    # Added innermost first: the request meets them in the opposite order.
    gated = set()
    if access.keys_required and not guard.metrics_public:
        gated.add("/metrics")
    if access.keys_required and not guard.docs_public:
        gated |= DOCS_PATHS
    if gated:
        app.add_middleware(KeyGate, access=access, paths=gated)
    app.add_middleware(
        BodyGuard,
        limit_for=lambda path: (
            guard.feedback_body_max_bytes if path == "/ai/feedback" else guard.chat_body_max_bytes
        ),
        timeout=guard.request_body_timeout_seconds,
    )
    # Before the body is read: a POST route reads JSON, and only a body declared JSON (415).
    app.add_middleware(
        JsonOnly,
        paths={
            route.path
            for router in routers
            for route in router.routes
            if isinstance(route, APIRoute) and "POST" in (route.methods or ())
        },
    )
    if guard.cors_allow_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=guard.cors_allow_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
            expose_headers=["x-session-id", "x-request-id"],
        )
    # The client's address (the one a trusted proxy forwards), before anything reads it.
    app.add_middleware(
        PeerMiddleware, trusted_proxies=guard.trusted_proxies, keys=access.keys_required
    )
    if guard.allowed_hosts:
        # Starlette's check, without its www. redirect (built from the Host header).
        app.add_middleware(
            TrustedHostMiddleware, allowed_hosts=guard.allowed_hosts, www_redirect=False
        )
    app.add_middleware(RequestIdMiddleware)
    for router in routers:
        app.include_router(router)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        # The locations only: the input itself may be anything (huge, or nested too deep to print).
        where = [".".join(str(part) for part in error["loc"])[:80] for error in exc.errors()[:5]]
        log.info("request refused (400): invalid %s", ", ".join(where))
        error = BadInput()
        return JSONResponse(envelope(400, error.message, None), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # 404, 405, an unreadable body...: our envelope, never FastAPI's {"detail": ...}.
        message = _HTTP_MESSAGES.get(exc.status_code, BadInput.default_message)
        return JSONResponse(
            envelope(exc.status_code, message, None),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Outside every middleware: the request id comes from the scope (app/logs.py).
        request_id = request_id_of(request.scope)
        with bound_request_id(request_id):
            log.exception("unhandled error", exc_info=exc)
        error = InternalFailure()
        headers = {"x-request-id": request_id} if request_id else None
        return JSONResponse(envelope(500, error.message, None), status_code=500, headers=headers)

    return app


def __getattr__(name: str) -> FastAPI:
    # ``uvicorn app.main:app`` without building anything at import time.
    if name == "app":
        return create_app()
    raise AttributeError(name)
