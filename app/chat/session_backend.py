"""Pick the session store for the app's lifespan: Redis when ``REDIS_URL`` is set (shared by
every gateway process), otherwise bounded in-process memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.chat.sessions import InMemorySessionStore, SessionStore
from app.config import Settings

__all__ = ["open_session_store"]


@asynccontextmanager
async def open_session_store(settings: Settings) -> AsyncIterator[SessionStore]:
    if settings.redis_url is None:
        yield InMemorySessionStore(
            max_sessions=settings.session_max_count,
            max_turns=settings.session_max_turns,
            ttl_seconds=settings.session_ttl_seconds,
        )
        return
    from app.chat.redis_sessions import RedisSessionStore  # only deployments with Redis

    store = RedisSessionStore.from_url(
        settings.redis_url.get_secret_value(),
        max_turns=settings.session_max_turns,
        ttl_seconds=settings.session_ttl_seconds,
        prefix=settings.redis_session_prefix,
    )
    try:
        await store.ping()  # fail at start-up, not on the first chat
        yield store
    finally:
        await store.close()
