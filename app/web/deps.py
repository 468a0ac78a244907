"""Typed accessors for what the lifespan built (``request.state``), for ``Depends``.

``async def`` on purpose: FastAPI runs a plain ``def`` dependency in a worker thread, a
thread hop per dependency per request for a one-line attribute read. The chat routes take one
dependency, :class:`ChatContext` (the feedback routes :class:`FeedbackContext`), not five: FastAPI resolves each dependency on every
request, and these are always used together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.chat.turn import RecommendationService
from app.config import ChatSettings, StreamSettings
from app.feedback.service import FeedbackService
from app.metrics import Metrics
from app.streams.hub import StreamHub
from app.web.admission import Admission

__all__ = ["ChatContext", "ChatDep", "FeedbackContext", "FeedbackDep", "MetricsDep"]


@dataclass(frozen=True, slots=True)
class ChatContext:
    """What a recommendation route uses, built once by the lifespan."""

    service: RecommendationService
    admission: Admission
    turns: ChatSettings  # the message's bound
    sse: StreamSettings  # pings, send timeout, retry hint
    metrics: Metrics
    streams: StreamHub


@dataclass(frozen=True, slots=True)
class FeedbackContext:
    """What a feedback route uses, built once by the lifespan."""

    service: FeedbackService
    admission: Admission
    sse: StreamSettings  # the results stream's pings, send timeout, retry hint
    results_public: bool  # FEEDBACK_RESULTS_PUBLIC


async def _chat(request: Request) -> ChatContext:
    chat: ChatContext = request.state.chat
    return chat


async def _feedback(request: Request) -> FeedbackContext:
    feedback: FeedbackContext = request.state.feedback
    return feedback


async def _metrics(request: Request) -> Metrics:
    metrics: Metrics = request.state.metrics
    return metrics


ChatDep = Annotated[ChatContext, Depends(_chat)]
FeedbackDep = Annotated[FeedbackContext, Depends(_feedback)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
