"""A retriever that remembers: query vectors by text, and search results for a while.

Many turns repeat: base-info's query space is finite (8 categories x 4 locations x 4 work
types), and short follow-ups ("다른 거", "더 쉬운 거 없어?") recur across users. Embedding is
the costly part of retrieval on a CPU, so :class:`CachedRetriever` keeps

- the vector of each recent query text (least recently used first out; a text's vector never
  changes for one embedder), and
- the hits of each recent ``(query, k, scope)`` for ``ttl`` seconds, so that a store that
  is re-ingested elsewhere (a Qdrant server) is seen again after at most ``ttl``.

Concurrent misses on one key share one computation (``async-lru``): a burst of users asking
the same thing costs one embedding. Failures are not remembered, nor is a search made by words
alone while the embedding model was busy: the next one gets the full search. Readiness probes use the
inner retriever, so that they see the store itself.
"""

from __future__ import annotations

from async_lru import alru_cache

from app.rag.embedder import Embedder
from app.rag.retriever import EmbedderBusy, Hit, HybridRetriever, QueryVector, SearchMode
from app.rag.scope import ANYWHERE, Scope

__all__ = ["CachedRetriever"]


class CachedRetriever:
    def __init__(self, inner: HybridRetriever, *, size: int, ttl: float) -> None:
        self._inner = inner
        self._vectors = alru_cache(maxsize=size)(inner.embed)
        self._hits = alru_cache(maxsize=size, ttl=ttl)(self._search)

    @property
    def embedder(self) -> Embedder:
        return self._inner.embedder

    async def embed(self, query: str, *, wait: bool = False) -> QueryVector:
        if wait:  # rare (a refusal to confirm in a burst): not worth a cache of its own
            return await self._inner.embed(query, wait=True)
        return await self._vectors(query)

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: QueryVector | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        """As :meth:`HybridRetriever.retrieve`; ``vector`` is not needed: the query's own
        vector comes from the cache (it is the same one)."""
        if not lexical:
            try:
                return list(await self._hits(query, k, scope))
            except EmbedderBusy:
                pass
        return await self._inner.retrieve(query, k=k, scope=scope, lexical=True)

    async def _search(self, query: str, k: int, scope: Scope) -> tuple[Hit, ...]:
        vector = None if self._inner.mode is SearchMode.LEXICAL else await self._vectors(query)
        hits = await self._inner.retrieve(query, k=k, scope=scope, vector=vector)
        return tuple(hits)
