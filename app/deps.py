"""Typed accessors for what the lifespan built (``request.state``), for ``Depends``.

``async def`` on purpose: FastAPI runs a plain ``def`` dependency in a worker thread, a
thread hop per dependency per request for a one-line attribute read."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.chat.pipeline import RecommendationService
from app.chat.streams import StreamHub
from app.config import Settings
from app.limits import Limits
from app.llm.client import LLMClient
from app.metrics import Metrics
from app.rag.retriever import Retriever

__all__ = [
    "LLMDep",
    "LimitsDep",
    "MetricsDep",
    "RetrieverDep",
    "ServiceDep",
    "SettingsDep",
    "StreamsDep",
]


async def _service(request: Request) -> RecommendationService:
    service: RecommendationService = request.state.service
    return service


async def _streams(request: Request) -> StreamHub:
    streams: StreamHub = request.state.streams
    return streams


async def _settings(request: Request) -> Settings:
    settings: Settings = request.state.settings
    return settings


async def _metrics(request: Request) -> Metrics:
    metrics: Metrics = request.state.metrics
    return metrics


async def _limits(request: Request) -> Limits:
    limits: Limits = request.state.limits
    return limits


async def _llm(request: Request) -> LLMClient:
    llm: LLMClient = request.state.llm
    return llm


async def _retriever(request: Request) -> Retriever:
    retriever: Retriever = request.state.retriever
    return retriever


ServiceDep = Annotated[RecommendationService, Depends(_service)]
SettingsDep = Annotated[Settings, Depends(_settings)]
StreamsDep = Annotated[StreamHub, Depends(_streams)]
LLMDep = Annotated[LLMClient, Depends(_llm)]
RetrieverDep = Annotated[Retriever, Depends(_retriever)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
LimitsDep = Annotated[Limits, Depends(_limits)]
