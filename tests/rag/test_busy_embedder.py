"""A long embedding queue is a burst: its turns are searched by their words at once.

The gateway's retriever on a copy of the bundled store, its embedding held by a gate so that
the queue's length is exact: with EMBEDDING_QUEUE_MAX=1, one query being embedded and one
waiting, the next ``embed`` raises ``EmbedderBusy``, so does the one that was waiting, and
``retrieve`` gives the sparse-only hits without waiting; for EMBEDDING_BURST_SECONDS after,
every turn is read by its words even with the model free, except a refusal to confirm
(``wait=True``), which waits its turn; the cache does not keep those searches; with 0 every
query waits its turn.
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
async def gated(
    store_path: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[HybridRetriever, threading.Event]]:
    gate = threading.Event()
    burst_seconds = getattr(request, "param", 0.0)
    settings = Settings(
        qdrant_path=store_path,
        embedding_queue_max=1,
        embedding_burst_seconds=burst_seconds,
        embedding_confirm_max=1,
    )
    async with open_retriever(settings) as retriever:
        embed_query = retriever.embed_query

        def held(query: str) -> Any:
            gate.wait(10)
            return embed_query(query)

        retriever.embed_query = held  # type: ignore[method-assign]
        yield retriever, gate
        gate.set()


async def _fill_queue(retriever: HybridRetriever, group: anyio.abc.TaskGroup) -> dict[str, str]:
    """One query being embedded, one waiting. Returns what each of them got, filled in once
    it has ("embedded" or "busy")."""
    outcomes: dict[str, str] = {}

    async def ask(query: str) -> None:
        try:
            await retriever.embed(query)
            outcomes[query] = "embedded"
        except EmbedderBusy:
            outcomes[query] = "busy"

    group.start_soon(ask, "첫 번째 질문")
    group.start_soon(ask, "두 번째 질문")
    with anyio.fail_after(5):
        while retriever.embeddings_waiting < 1:
            await anyio.sleep(0.01)
    return outcomes


async def test_a_turn_behind_a_long_queue_is_searched_by_words_at_once(
    gated: tuple[HybridRetriever, threading.Event],
) -> None:
    retriever, gate = gated
    words_only = retriever.search(QUERY, k=3, mode=SearchMode.LEXICAL)
    async with anyio.create_task_group() as group:
        outcomes = await _fill_queue(retriever, group)
        with pytest.raises(EmbedderBusy):
            await retriever.embed("세 번째 질문")
        with anyio.fail_after(2):  # no wait for the gate
            hits = await retriever.retrieve(QUERY, k=3)
            while "두 번째 질문" not in outcomes:  # the turn that was waiting is let go too
                await anyio.sleep(0.01)
        assert outcomes == {"두 번째 질문": "busy"}
        assert retriever.embeddings_waiting == 0
        gate.set()
    assert outcomes == {"두 번째 질문": "busy", "첫 번째 질문": "embedded"}
    assert [h.document.id for h in hits] == [h.document.id for h in words_only]
    assert all(h.score == 0.0 for h in hits)  # no vector was read
    full = await retriever.retrieve(QUERY, k=3)  # the queue is empty again: hybrid
    assert all(h.score > 0.5 for h in full)


@pytest.mark.parametrize("gated", [0.5], indirect=True)
async def test_after_a_burst_turns_are_read_by_words_for_a_while(
    gated: tuple[HybridRetriever, threading.Event],
) -> None:
    retriever, gate = gated
    async with anyio.create_task_group() as group:
        await _fill_queue(retriever, group)
        with pytest.raises(EmbedderBusy):
            await retriever.embed("세 번째 질문")
        gate.set()
    assert retriever.embeddings_waiting == 0  # the model is free: still a burst for a while
    with pytest.raises(EmbedderBusy):
        await retriever.embed("네 번째 질문")
    await anyio.sleep(0.6)
    with anyio.fail_after(10):
        assert (await retriever.embed("다섯 번째 질문")).shape == (retriever.embedder.dim,)


@pytest.mark.parametrize("gated", [5.0], indirect=True)
async def test_a_refusal_to_confirm_waits_for_its_embedding_even_in_a_burst(
    gated: tuple[HybridRetriever, threading.Event],
) -> None:
    """``wait=True`` queues behind the burst instead of being read by its words, and neither
    counts as nor is cancelled by the burst; past EMBEDDING_CONFIRM_MAX (1) such turns waiting,
    it is refused."""
    retriever, gate = gated
    cached = CachedRetriever(retriever, size=16, ttl=600)
    confirmed: list[int] = []

    async def confirm(query: str) -> None:
        confirmed.append(len(await cached.embed(query, wait=True)))

    async with anyio.create_task_group() as group:
        await _fill_queue(retriever, group)
        with pytest.raises(EmbedderBusy):
            await retriever.embed("세 번째 질문")  # the burst begins
        group.start_soon(confirm, "전기 아끼는 법 알려줘")
        await anyio.sleep(0.1)
        assert retriever.embeddings_waiting == 0  # not one of the burst's waiting turns
        with pytest.raises(EmbedderBusy):  # EMBEDDING_CONFIRM_MAX (1) are waiting already
            await retriever.embed("물 아끼는 법 알려줘", wait=True)
        assert confirmed == []
        gate.set()
    assert confirmed == [retriever.embedder.dim]
    with pytest.raises(EmbedderBusy):  # still the burst for anyone else
        await retriever.embed("네 번째 질문")


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
