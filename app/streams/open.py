"""The stream hub for the app's lifespan: its Redis log when REDIS_URL is set, its signals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from app.config import StreamSettings
from app.redis_client import CHAT, RedisConnector
from app.streams.hub import StreamHub
from app.streams.signals import SignalHook

if TYPE_CHECKING:
    from app.streams.redis_log import RedisStreamLog

__all__ = ["open_stream_hub"]


@asynccontextmanager
async def open_stream_hub(
    settings: StreamSettings, redis: RedisConnector | None
) -> AsyncIterator[StreamHub]:
    """The hub for the app's lifespan, with its Redis log when given Redis (``REDIS_URL``)."""
    remote: RedisStreamLog | None = None
    if redis is not None and settings.stream_resume_ttl_seconds > 0:
        from app.streams.redis_log import RedisStreamLog  # only deployments with Redis

        remote = RedisStreamLog(
            redis.client(CHAT),
            prefix=settings.redis_stream_prefix,
            ttl_seconds=settings.stream_resume_ttl_seconds,
        )
    hub = StreamHub(
        resume_ttl=settings.stream_resume_ttl_seconds,
        resume_grace=settings.stream_resume_grace_seconds,
        shutdown_grace=settings.shutdown_grace_seconds,
        remote=remote,
    )
    hook = SignalHook(hub.begin_drain)
    try:
        async with anyio.create_task_group() as group:
            await hub.run(group)
            hook.install()
            try:
                yield hub
            finally:
                hook.remove()
                await hub.close()
                group.cancel_scope.cancel()
    finally:
        if remote is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await remote.flush()
            await remote.close()
