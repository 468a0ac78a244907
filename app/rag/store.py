"""The vector store's interface: one collection with a dense and a sparse vector per document.

Two engines implement it, with the same collection layout (a named dense vector, cosine; a
named sparse vector with Qdrant's IDF modifier; keyword indexes on the filter fields):

- ``EdgeStore`` (app/rag/store_edge.py): qdrant-edge, Qdrant's engine inside this process,
  on disk in ``QDRANT_PATH``. The default.
- ``ServerStore`` (app/rag/store_server.py): a Qdrant server or cluster at ``QDRANT_URL``
  through qdrant-client (and qdrant-client's in-memory mode, for tests and benchmarks).

app/rag/store_open.py picks one from the settings. Both are synchronous: async code calls
them through ``anyio.to_thread``, except a search of an engine whose ``searches_in_place`` is
set (short CPU work that holds the GIL anyway: a worker thread would only add its hop).

Search is written once, here: each engine returns its ranked candidates per vector, and
app/rag/fusion.py fuses them with a fixed order for ties, so that both engines (and every
restart of either) rank alike. An engine only answers "nearest points" and "these points".
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from app.rag.fusion import Scored, open_tie, rrf, settle
from app.rag.scope import ANYWHERE, Scope
from app.rag.sparse import SparseVector

__all__ = [
    "DENSE",
    "FILTER_FIELDS",
    "SPARSE",
    "NearestQuery",
    "SearchHit",
    "StoreMismatch",
    "StoreUnavailable",
    "VectorStore",
    "mismatch",
]

DENSE = "dense"
SPARSE = "sparse"
FILTER_FIELDS = ("category", "locations", "work_types", "doc_id")
#: Points fetched beyond the ones kept, so that a tie at the cut is seen whole; when it runs
#: past them too, one more fetch takes four times as many.
_TIE_MARGIN = 8

#: One ranked list to ask for: the vector's name and the query vector.
NearestQuery: TypeAlias = tuple[str, "npt.NDArray[np.float32] | SparseVector"]


class StoreMismatch(RuntimeError):
    """The collection exists with another vector size than the embedder's."""


class StoreUnavailable(OSError):
    """The store could not be opened (a folder in use by another process, unreadable files)."""


def mismatch(name: str, size: int | None, dim: int) -> StoreMismatch:
    return StoreMismatch(
        f"collection {name!r} holds {size}-wide vectors but the embedder makes {dim}: use "
        f"another QDRANT_COLLECTION or run `python -m app.rag ingest --recreate`"
    )


@dataclass(frozen=True, slots=True)
class SearchHit:
    point_id: str
    payload: dict[str, Any]
    dense: npt.NDArray[np.float32] | None


class VectorStore(abc.ABC):
    """What app/rag needs from a vector store; ``name`` is the collection."""

    #: A search is short CPU work holding the GIL (the embedded engine): async code runs it in
    #: place. False: network or slow work, run in a worker thread.
    searches_in_place = False

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def ensure_collection(self, name: str, dim: int) -> bool:
        """Create ``name`` for ``dim``-wide vectors if missing; True when it was created.
        Raises ``StoreMismatch`` when it exists with another width."""

    @abc.abstractmethod
    def drop(self, name: str) -> None: ...

    @abc.abstractmethod
    def count(self, name: str) -> int:
        """Points in ``name`` (0 when it does not exist)."""

    @abc.abstractmethod
    def existing(self, name: str, point_ids: Sequence[str]) -> set[str]:
        """Which of these ids are stored."""

    @abc.abstractmethod
    def stale(self, name: str, doc_ids: Sequence[str], keep: Sequence[str]) -> list[str]:
        """Points of these documents whose id (content hash) is not in ``keep``."""

    @abc.abstractmethod
    def delete(self, name: str, point_ids: Sequence[str]) -> None: ...

    @abc.abstractmethod
    def upsert(
        self,
        name: str,
        point_ids: Sequence[str],
        dense: npt.NDArray[np.float32],
        sparse: Sequence[SparseVector],
        payloads: Sequence[dict[str, Any]],
    ) -> None: ...

    @abc.abstractmethod
    def optimize(self, name: str) -> bool:
        """Build the search index after an ingest (blocking; never while serving); True when
        anything was rebuilt. A server indexes by itself: there, nothing to do."""

    @abc.abstractmethod
    def _nearest(
        self, name: str, queries: Sequence[NearestQuery], limit: int, scope: Scope
    ) -> list[list[Scored]]:
        """For each query, up to ``limit`` nearest points within ``scope``, best first."""

    @abc.abstractmethod
    def _records(
        self, name: str, point_ids: Sequence[str]
    ) -> dict[str, tuple[dict[str, Any], npt.NDArray[np.float32] | None]]:
        """Payload and dense vector of each of these points that exists."""

    def search(
        self,
        name: str,
        *,
        dense: npt.NDArray[np.float32] | None,
        sparse: SparseVector | None,
        limit: int,
        scope: Scope = ANYWHERE,
        candidates: int = 30,
    ) -> list[SearchHit]:
        """Hybrid (both given: RRF over ``candidates`` of each), dense-only or sparse-only
        search within ``scope``; hits carry their payload and dense vector."""
        queries: list[NearestQuery] = []
        if dense is not None:
            queries.append((DENSE, dense))
        if sparse is not None:
            queries.append((SPARSE, sparse))
        if not queries:
            raise ValueError("search needs a dense or a sparse query")
        if limit <= 0:
            return []
        keep = candidates if len(queries) == 2 else limit
        fetch = keep + _TIE_MARGIN
        lists = self._nearest(name, queries, fetch, scope)
        if any(open_tie(ranked, keep, fetch) for ranked in lists):
            fetch *= 4
            lists = self._nearest(name, queries, fetch, scope)
        if len(queries) == 2:
            dense_ids = settle(lists[0], keep)
            dense_rank = {point_id: rank for rank, point_id in enumerate(dense_ids)}
            # Equal BM25 scores go to the document whose meaning is closer, then by id.
            sparse_ids = settle(lists[1], keep, lambda p: dense_rank.get(p, keep))
            ids = rrf(dense_ids, sparse_ids)[:limit]
        else:
            ids = settle(lists[0], limit)
        records = self._records(name, ids)
        return [SearchHit(p, *records[p]) for p in ids if p in records]
