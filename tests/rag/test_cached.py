"""CachedRetriever over the real store and embedder: one embedding per distinct text, one
search per distinct query while fresh, shared by concurrent callers; the same hits."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import pytest

from app.config import Settings
from app.domain.categories import Category
from app.rag.cached import CachedRetriever
from app.rag.retriever import HybridRetriever
from app.rag.scope import Scope
from app.rag.startup import open_retriever

pytestmark = pytest.mark.anyio


@pytest.fixture
async def counted(store_path: str) -> AsyncIterator[tuple[HybridRetriever, Counter[str]]]:
    """The gateway's retriever on a copy of the bundled store, counting embeddings and searches."""
    calls: Counter[str] = Counter()
    async with open_retriever(Settings(qdrant_path=store_path)) as retriever:
        embed_query, search = retriever.embed_query, retriever.search

        def counted_embed(query: str) -> Any:
            calls["embed"] += 1
            return embed_query(query)

        def counted_search(query: str, **kwargs: Any) -> Any:
            calls["search"] += 1
            return search(query, **kwargs)

        retriever.embed_query = counted_embed  # type: ignore[method-assign]
        retriever.search = counted_search  # type: ignore[method-assign]
        yield retriever, calls


async def test_a_burst_of_one_question_costs_one_embedding_and_one_search(
    counted: tuple[HybridRetriever, Counter[str]],
) -> None:
    inner, calls = counted
    cached = CachedRetriever(inner, size=16, ttl=60)
    results: list[list[str]] = []

    async def user() -> None:
        vector = await cached.embed("텀블러 쓰는 챌린지")
        hits = await cached.retrieve("텀블러 쓰는 챌린지", k=3, vector=vector)
        results.append([hit.document.id for hit in hits])

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(user)
    assert calls == Counter(embed=1, search=1)
    fresh = await inner.retrieve("텀블러 쓰는 챌린지", k=3)
    assert results == [[hit.document.id for hit in fresh]] * 20


async def test_keys_are_the_query_k_and_scope(
    counted: tuple[HybridRetriever, Counter[str]],
) -> None:
    inner, calls = counted
    cached = CachedRetriever(inner, size=16, ttl=60)
    query = "비건 사무직 도시"  # a base-info query: no vector from the caller
    vegan = await cached.retrieve(query, k=3, scope=Scope(category=Category.VEGAN))
    assert {hit.document.category for hit in vegan} == {Category.VEGAN}
    await cached.retrieve(query, k=3, scope=Scope(category=Category.VEGAN))
    await cached.retrieve(query, k=2, scope=Scope(category=Category.VEGAN))
    await cached.retrieve(query, k=3)
    assert calls == Counter(embed=1, search=3)
    vector = await cached.embed(query)
    assert np.array_equal(vector, inner.embed_query(query))


async def test_results_are_searched_again_after_their_ttl(
    counted: tuple[HybridRetriever, Counter[str]],
) -> None:
    inner, calls = counted
    cached = CachedRetriever(inner, size=16, ttl=0.2)
    await cached.retrieve("플로깅", k=3)
    await anyio.sleep(0.4)
    await cached.retrieve("플로깅", k=3)
    assert calls == Counter(embed=1, search=2)  # the vector is kept; the hits are not
