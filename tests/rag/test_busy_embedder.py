"""A long embedding queue: a turn that would wait behind it is searched by its words at once.

The gateway's retriever on a copy of the bundled store, its embedding held by a gate so that
the queue's length is exact: with EMBEDDING_QUEUE_MAX=1, one query being embedded and one
waiting, the next ``embed`` raises ``EmbedderBusy`` and ``retrieve`` gives the sparse-only
hits without waiting; the cache does not keep them; with 0 every query waits its turn.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from app.config import Settings
from app.rag.cached import CachedRetriever
from app.rag.retriever import EmbedderBusy, HybridRetriever, SearchMode
from app.rag.startup import open_retriever

pytestmark = pytest.mark.anyio

QUERY = "텀블러 쓰는 챌린지"


@pytest.fixture
async def gated(store_path: str) -> AsyncIterator[tuple[HybridRetriever, threading.Event]]:
    gate = threading.Event()
    settings = Settings(qdrant_path=store_path, embedding_queue_max=1)
    async with open_retriever(settings) as retriever:
        embed_query = retriever.embed_query

        def held(query: str) -> Any:
            gate.wait(10)
            return embed_query(query)

        retriever.embed_query = held  # type: ignore[method-assign]
        yield retriever, gate
        gate.set()


async def _fill_queue(retriever: HybridRetriever, group: anyio.abc.TaskGroup) -> None:
    """One query being embedded, one waiting."""
    group.start_soon(retriever.embed, "첫 번째 질문")
    group.start_soon(retriever.embed, "두 번째 질문")
    with anyio.fail_after(5):
        while retriever.embeddings_waiting < 1:
            await anyio.sleep(0.01)


async def test_a_turn_behind_a_long_queue_is_searched_by_words_at_once(
    gated: tuple[HybridRetriever, threading.Event],
) -> None:
    retriever, gate = gated
    words_only = retriever.search(QUERY, k=3, mode=SearchMode.SPARSE)
    async with anyio.create_task_group() as group:
        await _fill_queue(retriever, group)
        with pytest.raises(EmbedderBusy):
            await retriever.embed("세 번째 질문")
        with anyio.fail_after(2):  # no wait for the gate
            hits = await retriever.retrieve(QUERY, k=3)
        gate.set()
    assert [h.document.id for h in hits] == [h.document.id for h in words_only]
    assert all(h.score == 0.0 for h in hits)  # no vector was read
    full = await retriever.retrieve(QUERY, k=3)  # the queue is empty again: hybrid
    assert all(h.score > 0.5 for h in full)


async def test_the_cache_keeps_only_full_searches(
    gated: tuple[HybridRetriever, threading.Event],
) -> None:
    retriever, gate = gated
    cached = CachedRetriever(retriever, size=16, ttl=600)
    async with anyio.create_task_group() as group:
        await _fill_queue(retriever, group)
        with anyio.fail_after(2):
            busy = await cached.retrieve(QUERY, k=3)
        gate.set()
    assert all(h.score == 0.0 for h in busy)
    later = await cached.retrieve(QUERY, k=3)
    assert all(h.score > 0.5 for h in later)


async def test_queue_max_0_always_waits(store_path: str) -> None:
    gate = threading.Event()
    async with open_retriever(Settings(qdrant_path=store_path, embedding_queue_max=0)) as retriever:
        embed_query = retriever.embed_query
        retriever.embed_query = lambda q: (gate.wait(10), embed_query(q))[1]  # type: ignore[method-assign]
        async with anyio.create_task_group() as group:
            await _fill_queue(retriever, group)
            with anyio.move_on_after(0.3) as waited:
                await retriever.embed("세 번째 질문")
            assert waited.cancelled_caught  # it queued instead of being refused
            gate.set()
