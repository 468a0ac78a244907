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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from app.rag.fusion import Scored, open_tie, rrf, settle
from app.rag.scope import ANYWHERE, Scope
from app.rag.sparse import SparseVector

__all__ = [
    "DENSE",
    "FILTER_FIELDS",
    "SPARSE",
    "Match",
    "NearestQuery",
    "Point",
    "SearchHit",
    "StoreMismatch",
    "StoreUnavailable",
    "VectorStore",
    "mismatch",
    "scope_filter",
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


_C = TypeVar("_C")
_F = TypeVar("_F")


class Match(NamedTuple):
    """One payload condition: ``field`` holds ``value`` (a str), or any of them (a list)."""

    field: str
    value: str | list[str]


def scope_filter(
    scope: Scope, condition: Callable[[Match], _C], combine: Callable[..., _F]
) -> _F | None:
    """The engine's filter for ``scope`` (None: anything goes): ``condition`` writes one
    :class:`Match` in the engine's types, ``combine(must=..., must_not=...)`` the filter."""
    must, must_not = _conditions(scope)
    if not must and not must_not:
        return None
    return combine(
        must=[condition(m) for m in must] or None,
        must_not=[condition(m) for m in must_not] or None,
    )


def _conditions(scope: Scope) -> tuple[list[Match], list[Match]]:
    """What a point must match, and must not, to be within ``scope``."""
    must = [
        Match(field, value)
        for field, value in (
            ("category", scope.category.code if scope.category else None),
            ("locations", scope.location),
            ("work_types", scope.work_type),
        )
        if value is not None
    ]
    if scope.only:
        must.append(Match("doc_id", sorted(scope.only)))
    must_not = [Match("doc_id", sorted(scope.exclude))] if scope.exclude else []
    return must, must_not


class Point(NamedTuple):
    """One point to write: its id, both vectors and its payload."""

    point_id: str
    dense: list[float]
    sparse: SparseVector
    payload: dict[str, Any]


class _Stored(Protocol):
    """A point as an engine reads it back (qdrant-edge's and qdrant-client's records alike)."""

    @property
    def id(self) -> Any: ...
    @property
    def payload(self) -> Any: ...
    @property
    def vector(self) -> Any: ...


#: Records a store keeps read (payload and dense vector): the bundled corpus is 408 points,
#: about 1.6 KB each; past this many the kept ones are dropped and read again.
KEPT_RECORDS = 4096
_Record = tuple[dict[str, Any], "npt.NDArray[np.float32] | None"]


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
    #: What a call raises when the store did not answer (a folder in use, a server down): a
    #: server's client adds its own errors, so its callers need not import that client.
    unavailable: tuple[type[Exception], ...] = (OSError,)

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

    def stale(self, name: str, doc_ids: Sequence[str], keep: Sequence[str]) -> list[str]:
        """Points of these documents whose id (content hash) is not in ``keep``."""
        wanted = set(keep)
        found: list[str] = []
        offset: Any = None
        while True:
            page, offset = self._page(name, doc_ids, offset)
            found.extend(point_id for point_id in page if point_id not in wanted)
            if offset is None:
                return found

    @abc.abstractmethod
    def _page(self, name: str, doc_ids: Sequence[str], offset: Any) -> tuple[list[str], Any]:
        """One page of the ids of these documents' points, from ``offset`` (None: the first
        page), and the next page's offset (None after the last)."""

    @abc.abstractmethod
    def delete(self, name: str, point_ids: Sequence[str]) -> None: ...

    def upsert(
        self,
        name: str,
        point_ids: Sequence[str],
        dense: npt.NDArray[np.float32],
        sparse: Sequence[SparseVector],
        payloads: Sequence[dict[str, Any]],
    ) -> None:
        rows = zip(point_ids, dense.tolist(), sparse, payloads, strict=True)
        self._kept.pop(name, None)  # an id rewritten by another writer reads afresh
        self._write(name, [Point(*row) for row in rows])

    @abc.abstractmethod
    def _write(self, name: str, points: Sequence[Point]) -> None:
        """Insert or replace these points (the collection exists)."""

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
    def _fetch(self, name: str, point_ids: Sequence[str]) -> Iterable[_Stored]:
        """These points that exist, with their payload and their dense vector."""

    def _records(self, name: str, point_ids: Sequence[str]) -> dict[str, _Record]:
        """Payload and dense vector of each of these points that exists: read from the engine
        once, then kept (shared, never to be changed: a point's id is the hash of its content,
        app/rag/ingest.py, so what is kept under an id is what the engine holds under it)."""
        if not point_ids:
            return {}
        kept = self._kept.setdefault(name, {})
        # Read each kept record once: a search in a worker thread may clear them meanwhile.
        found = {p: record for p in point_ids if (record := kept.get(p)) is not None}
        missing = [point_id for point_id in point_ids if point_id not in found]
        if missing:
            if len(kept) + len(missing) > KEPT_RECORDS:
                kept.clear()
            for point in self._fetch(name, missing):
                vectors = point.vector
                dense = None
                if isinstance(vectors, dict) and DENSE in vectors:
                    dense = np.asarray(vectors[DENSE], dtype=np.float32)
                point_id = str(point.id)
                found[point_id] = kept[point_id] = (dict(point.payload or {}), dense)
        return found

    @property
    def _kept(self) -> dict[str, dict[str, _Record]]:
        """The records read so far, by collection (see :meth:`_records`)."""
        try:
            return self.__kept
        except AttributeError:
            self.__kept: dict[str, dict[str, _Record]] = {}
            return self.__kept

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
        """Hybrid (both given: RRF over ``candidates`` of each, ``limit`` at least), dense-only
        or sparse-only search within ``scope``; hits carry their payload and dense vector."""
        queries: list[NearestQuery] = []
        if dense is not None:
            queries.append((DENSE, dense))
        if sparse is not None:
            queries.append((SPARSE, sparse))
        if not queries:
            raise ValueError("search needs a dense or a sparse query")
        if limit <= 0:
            return []
        # Hybrid: RRF over ``candidates`` of each list, or over as many as asked for (a
        # critique's 36 within a field had found only the union of the two lists' 30: 33).
        keep = max(candidates, limit) if len(queries) == 2 else limit
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
