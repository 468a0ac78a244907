"""The vector store on a Qdrant server or cluster (``QDRANT_URL``), through qdrant-client.

The scale-out path: the same collection layout and the same search (app/rag/store.py) as
the embedded store, so moving from ``QDRANT_PATH`` to ``QDRANT_URL`` changes no ranking. The
client is the synchronous one: async code calls it through ``anyio.to_thread`` as it does
the embedded store.

``in_memory()`` is qdrant-client's local mode without a server: the tests' stand-in for a
server (same client calls, no binary to install) and the benchmarks' "old engine". It
computes in the calling thread and ignores payload indexes.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from app.rag.fusion import Scored
from app.rag.scope import Scope
from app.rag.sparse import SparseVector
from app.rag.store import (
    DENSE,
    FILTER_FIELDS,
    SPARSE,
    Match,
    NearestQuery,
    Point,
    VectorStore,
    mismatch,
    scope_filter,
)

__all__ = ["ServerStore", "connect", "in_memory"]

_SCROLL_PAGE = 256


def connect(url: str, *, api_key: str | None = None, timeout: float = 10) -> ServerStore:
    # No version probe: it runs in a background thread that dies noisily when the server is
    # down at start-up; the first real call reports an unreachable server clearly instead.
    client = QdrantClient(url=url, api_key=api_key, timeout=int(timeout), check_compatibility=False)
    return ServerStore(client, local=False)


def in_memory() -> ServerStore:
    return ServerStore(QdrantClient(location=":memory:"), local=True)


def _query_vector(
    vector: npt.NDArray[np.float32] | SparseVector,
) -> list[float] | models.SparseVector:
    if isinstance(vector, SparseVector):
        return models.SparseVector(indices=vector.indices, values=vector.values)
    values: list[float] = vector.tolist()
    return values


def _condition(match: Match) -> models.FieldCondition:
    if isinstance(match.value, list):
        return models.FieldCondition(key=match.field, match=models.MatchAny(any=match.value))
    return models.FieldCondition(key=match.field, match=models.MatchValue(value=match.value))


class ServerStore(VectorStore):
    unavailable = (OSError, ResponseHandlingException, UnexpectedResponse)

    def __init__(self, client: QdrantClient, *, local: bool) -> None:
        self.client = client
        self.local = local

    def close(self) -> None:
        self.client.close()

    def ensure_collection(self, name: str, dim: int) -> bool:
        if self.client.collection_exists(name):
            vectors = self.client.get_collection(name).config.params.vectors
            size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
            if size != dim:
                raise mismatch(name, size, dim)
            return False
        self.client.create_collection(
            name,
            vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if not self.local:  # the local mode ignores payload indexes (and warns)
            for field in FILTER_FIELDS:
                self.client.create_payload_index(name, field, models.PayloadSchemaType.KEYWORD)
        return True

    def drop(self, name: str) -> None:
        if self.client.collection_exists(name):
            self.client.delete_collection(name)

    def count(self, name: str) -> int:
        if not self.client.collection_exists(name):
            return 0
        return self.client.count(name, exact=True).count

    def existing(self, name: str, point_ids: Sequence[str]) -> set[str]:
        found = self.client.retrieve(name, list(point_ids), with_payload=False)
        return {str(point.id) for point in found}

    def _page(self, name: str, doc_ids: Sequence[str], offset: Any) -> tuple[list[str], Any]:
        points, offset = self.client.scroll(
            name,
            scroll_filter=models.Filter(must=[_condition(Match("doc_id", list(doc_ids)))]),
            limit=_SCROLL_PAGE,
            offset=offset,
            with_payload=False,
        )
        return [str(p.id) for p in points], offset

    def delete(self, name: str, point_ids: Sequence[str]) -> None:
        if point_ids:
            self.client.delete(name, models.PointIdsList(points=list(point_ids)))

    def _write(self, name: str, points: Sequence[Point]) -> None:
        written = [
            models.PointStruct(
                id=p.point_id,
                vector={DENSE: p.dense, SPARSE: _query_vector(p.sparse)},
                payload=p.payload,
            )
            for p in points
        ]
        self.client.upsert(name, written, wait=True)

    def optimize(self, name: str) -> bool:
        return False  # the server builds its indexes in the background

    def _nearest(
        self, name: str, queries: Sequence[NearestQuery], limit: int, scope: Scope
    ) -> list[list[Scored]]:
        condition = scope_filter(scope, _condition, models.Filter)
        requests = [
            models.QueryRequest(
                query=_query_vector(vector),
                using=using,
                limit=limit,
                filter=condition,
                with_payload=False,
                with_vector=False,
            )
            for using, vector in queries
        ]
        with warnings.catch_warnings():
            # qdrant-client warns on every local-mode query about payload indexes it ignores.
            warnings.simplefilter("ignore", UserWarning)
            responses = self.client.query_batch_points(name, requests)
        return [[Scored(str(p.id), p.score) for p in r.points] for r in responses]

    def _fetch(self, name: str, point_ids: Sequence[str]) -> list[models.Record]:
        return self.client.retrieve(name, list(point_ids), with_payload=True, with_vectors=[DENSE])
