"""Pick the session store for the app's lifespan: Redis when the lifespan has a connector for
``REDIS_URL`` (shared by every gateway process), otherwise bounded in-process memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.chat.sessions import InMemorySessionStore, SessionStore
from app.config import SessionSettings
from app.redis_client import CHAT, RedisConnector

__all__ = ["open_session_store"]


@asynccontextmanager
async def open_session_store(
    settings: SessionSettings, redis: RedisConnector | None
) -> AsyncIterator[SessionStore]:
    if redis is None:
        yield InMemorySessionStore(
            max_sessions=settings.session_max_count,
            max_turns=settings.session_max_turns,
            ttl_seconds=settings.session_ttl_seconds,
        )
        return
    from app.chat.redis_sessions import RedisSessionStore  # only deployments with Redis

    store = RedisSessionStore(
        redis.client(CHAT),
        max_turns=settings.session_max_turns,
        ttl_seconds=settings.session_ttl_seconds,
        prefix=settings.redis_session_prefix,
    )
    try:
        await store.ping()  # fail at start-up, not on the first chat
        yield store
    finally:
        await store.close()
