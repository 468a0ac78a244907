"""Retrieval behind a small interface, and its implementation over the vector store.

``HybridRetriever`` embeds the query (dense) and encodes its lexical terms (sparse BM25),
asks Qdrant for both candidate lists and fuses them with reciprocal rank fusion; a
:class:`~app.rag.scope.Scope` (the category, the user's situation, documents to keep or skip)
filters the candidates. The order is the fused one; each
hit's ``score`` is the dense cosine similarity, a closeness that means the same for every
query (RRF scores are ranks). Embedding runs off the event loop; so does a search, unless the
store runs it in place (the embedded engine: short, and holding the GIL anyway).

One embedding per turn: ``embed`` gives the query's vector, which the intent step reads, and
``retrieve(..., vector=...)`` searches with that same vector instead of embedding again.

Embeddings wait in one queue, in arrival order. A queue of ``queue_max`` waiting queries is a
burst: the turn that finds it, the turns waiting in it, and every turn for ``burst_seconds``
after get :class:`EmbedderBusy` at once, and ``retrieve`` searches by words alone
(``SearchMode.LEXICAL``). In a burst a turn then costs a tenth of a millisecond instead of a share of the
queue's embeddings, whose CPU the burst's other turns need (recall and latency in
bench/README.md "Retrieval" and "Burst"). A turn that its words alone would refuse asks again
with ``wait=True``: it waits for its embedding, so that a burst refuses nobody on the weaker
reading.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import numpy as np

from app.domain.categories import Category
from app.rag.corpus import Document, Traits
from app.rag.embedder import Embedder, Vectors
from app.rag.scope import ANYWHERE, Scope
from app.rag.sparse import SparseEncoder
from app.rag.store import KEPT_RECORDS, SearchHit, VectorStore

__all__ = [
    "EmbedderBusy",
    "Hit",
    "HybridRetriever",
    "QueryVector",
    "Retriever",
    "Scope",
    "SearchMode",
]

#: One L2-normalized query embedding, shape ``(dim,)``.
QueryVector = Vectors


@dataclass(frozen=True, slots=True)
class Hit:
    document: Document
    score: float  # dense cosine similarity to the query, -1..1


class EmbedderBusy(Exception):
    """Too many queries are waiting for the embedding model: read this one by its words."""


class Retriever(Protocol):
    async def embed(self, query: str, *, wait: bool = False) -> QueryVector:
        """The query's embedding (computed off the event loop); raises :class:`EmbedderBusy`
        rather than wait behind a long queue. ``wait``: wait in the queue even in a burst (a
        refusal to confirm), refused only past ``confirm_max`` such turns waiting."""
        ...

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: QueryVector | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        """The ``k`` best documents for ``query`` within ``scope``; ``vector``
        is the query's embedding when the caller already has it. ``lexical`` (a turn read
        without its embedding), or no vector with the embedding model busy: a lexical search."""
        ...


class SearchMode(enum.Enum):
    """Which of a document's vectors a search reads. The values are ``RETRIEVAL_MODE``'s."""

    HYBRID = "hybrid"  # both, fused
    DENSE = "dense"  # the embedding's
    LEXICAL = "sparse"  # the words' alone (the store's sparse BM25 vector): no embedding


def _document(payload: dict[str, Any]) -> Document:
    return Document(
        id=str(payload["doc_id"]),
        title=str(payload["title"]),
        body=str(payload["body"]),
        category=Category[str(payload["category"])],
        locations=tuple(payload.get("locations", ())),
        work_types=tuple(payload.get("work_types", ())),
        keywords=tuple(payload.get("keywords", ())),
        source=str(payload.get("source", "")),
        traits=Traits.read(payload),
    )


class HybridRetriever:
    def __init__(
        self,
        store: VectorStore,
        collection: str,
        embedder: Embedder,
        *,
        mode: SearchMode = SearchMode.HYBRID,
        concurrency: int = 1,
        queue_max: int = 0,
        burst_seconds: float = 0.0,
        confirm_max: int = 0,
    ) -> None:
        self._store = store
        self._collection = collection
        self._embedder = embedder
        self._sparse = SparseEncoder()
        self.mode = mode
        # Embeddings in arrival order, ``concurrency`` at a time (one in process: more at once
        # would take the cores that the event loop and the streams it serves need).
        self._embedding = anyio.CapacityLimiter(concurrency)
        self._queue_max = queue_max  # 0: always wait
        self._burst_seconds = burst_seconds
        self._burst_until = 0.0  # time.monotonic() until which turns are read by their words
        # The turns waiting for the limiter, each in a scope that a burst cancels. Kept here,
        # not read from the limiter: a burst's turns all ask within one tick of the event loop,
        # before any of them has reached the limiter's queue.
        self._waiting: set[anyio.CancelScope] = set()
        self._confirm_max = confirm_max  # 0: no turn waits past a burst
        self._confirming = 0  # turns waiting with ``wait=True``
        self._documents: dict[str, Document] = {}  # by point id (:meth:`_document`)

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def embedder_name(self) -> str:
        return self._embedder.name

    def embed_query(self, query: str) -> QueryVector:
        """The query's embedding (synchronous; ``embed`` is the async face)."""
        vector: QueryVector = self._embedder.embed_queries([query])[0]
        return vector

    def search(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: QueryVector | None = None,
        mode: SearchMode | None = None,
    ) -> list[Hit]:
        """Synchronous search (for the CLI and benchmarks); ``retrieve`` is the async face.
        ``mode`` overrides the retriever's own for this search."""
        if k <= 0:
            return []
        mode = mode or self.mode
        if mode is SearchMode.LEXICAL:
            vector = None  # a lexical search reads no vector; its hits then carry score 0
        elif vector is None:
            vector = self.embed_query(query)
        hits: list[SearchHit] = self._store.search(
            self._collection,
            dense=vector,
            sparse=self._sparse.encode_query(query) if mode is not SearchMode.DENSE else None,
            limit=k,
            scope=scope,
        )
        return [
            Hit(
                self._document(hit.point_id, hit.payload),
                float(np.dot(vector, hit.dense))
                if vector is not None and hit.dense is not None
                else 0.0,
            )
            for hit in hits
        ]

    def _document(self, point_id: str, payload: dict[str, Any]) -> Document:
        """The hit's document, read from its payload once (by its point id: the hash of its
        content, app/rag/ingest.py)."""
        document = self._documents.get(point_id)
        if document is None:
            if len(self._documents) >= KEPT_RECORDS:
                self._documents.clear()
            document = self._documents[point_id] = _document(payload)
        return document

    @property
    def embeddings_waiting(self) -> int:
        """Queries waiting for the embedding model now (not counting those being embedded)."""
        return len(self._waiting)

    async def embed(self, query: str, *, wait: bool = False) -> QueryVector:
        if not wait:
            await self._queue_up()
            return await self._embed_holding(query)
        if self._queue_max and self._confirming >= self._confirm_max:
            raise EmbedderBusy(f"{self._confirming} refusals waiting for the embedder")
        self._confirming += 1
        try:
            await self._embedding.acquire()
            return await self._embed_holding(query)
        finally:
            self._confirming -= 1

    async def _queue_up(self) -> None:
        """Take a place with the embedding model, or raise :class:`EmbedderBusy` in a burst."""
        if self._queue_max:
            now = time.monotonic()
            if now < self._burst_until:
                raise EmbedderBusy("a burst: turns are read by their words for a while")
            if len(self._waiting) >= self._queue_max:
                self._burst_until = now + self._burst_seconds
                for waiting in self._waiting:
                    waiting.cancel()
                raise EmbedderBusy(f"{len(self._waiting)} queries waiting for the embedder")
        try:
            self._embedding.acquire_nowait()
        except anyio.WouldBlock:
            with anyio.CancelScope() as scope:
                self._waiting.add(scope)
                try:
                    await self._embedding.acquire()
                finally:
                    self._waiting.discard(scope)
            if scope.cancelled_caught:
                raise EmbedderBusy("a burst overtook the embedding queue") from None

    async def _embed_holding(self, query: str) -> QueryVector:
        """Embed ``query`` in a worker thread with the place already taken; gives it back."""
        try:
            return await anyio.to_thread.run_sync(self.embed_query, query)
        finally:
            self._embedding.release()

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: QueryVector | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        if k <= 0:  # RETRIEVAL_K=0: no thread hop for nothing
            return []
        mode = SearchMode.LEXICAL if lexical else self.mode
        if vector is None and mode is not SearchMode.LEXICAL:
            try:
                vector = await self.embed(query)
            except EmbedderBusy:
                mode = SearchMode.LEXICAL
        if self._store.searches_in_place:
            return self.search(query, k=k, scope=scope, vector=vector, mode=mode)
        return await anyio.to_thread.run_sync(
            lambda: self.search(query, k=k, scope=scope, vector=vector, mode=mode)
        )
