"""Typed accessors for what the lifespan built (``request.state``), for ``Depends``.

``async def`` on purpose: FastAPI runs a plain ``def`` dependency in a worker thread, a
thread hop per dependency per request for a one-line attribute read. The chat routes take one
dependency, :class:`ChatContext`, not seven: FastAPI resolves each dependency
on every request, and these are always used together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.chat.pipeline import RecommendationService
from app.config import Settings
from app.metrics import Metrics
from app.streams.hub import StreamHub
from app.web.access import Access
from app.web.limits import Limits
from app.web.shares import GenerationShares

__all__ = ["ChatContext", "ChatDep", "MetricsDep", "chat_context"]


@dataclass(frozen=True, slots=True)
class ChatContext:
    """What a recommendation route uses, built once by the lifespan."""

    service: RecommendationService
    limits: Limits
    settings: Settings
    metrics: Metrics
    streams: StreamHub
    access: Access
    shares: GenerationShares


def chat_context(request: Request) -> ChatContext:
    """The lifespan's :class:`ChatContext` (also read directly by the SSE routes, which take
    no dependencies: ``app/routers/recommendation.py``)."""
    chat: ChatContext = request.state.chat
    return chat


async def _chat(request: Request) -> ChatContext:
    return chat_context(request)


async def _metrics(request: Request) -> Metrics:
    metrics: Metrics = request.state.metrics
    return metrics


ChatDep = Annotated[ChatContext, Depends(_chat)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
