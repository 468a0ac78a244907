"""The vector store: one Qdrant collection with a dense and a sparse vector per document.

One code path for both deployments: ``QDRANT_URL`` set -> a Qdrant server or cluster;
unset -> qdrant-client's embedded local mode in ``QDRANT_PATH`` (or ``:memory:``). The
client is the synchronous one on purpose: the local mode computes inside the calling
thread, so every call goes through ``anyio.to_thread`` from async code (``AsyncStore``),
which keeps the event loop free for both modes alike.

A local store folder is locked by the process that opened it: stop the gateway before
running ``python -m app.rag ingest`` on the same folder (or use a Qdrant server).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from qdrant_client import QdrantClient, models

from app.config import Settings
from app.rag.sparse import SparseVector

__all__ = [
    "DENSE",
    "SPARSE",
    "SearchHit",
    "StoreMismatch",
    "VectorStore",
    "configured_store",
    "open_store",
]

DENSE = "dense"
SPARSE = "sparse"
_FILTER_FIELDS = ("category", "locations", "work_types", "doc_id")


class StoreMismatch(RuntimeError):
    """The collection exists with another vector size than the embedder's."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    point_id: str
    payload: dict[str, Any]
    dense: npt.NDArray[np.float32] | None


def configured_store(settings: Settings) -> VectorStore:
    """The store the settings name: ``QDRANT_URL`` when set, else the local ``QDRANT_PATH``."""
    api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    return open_store(url=settings.qdrant_url, path=settings.qdrant_path, api_key=api_key)


def open_store(
    *, url: str | None, path: Path | str | None, api_key: str | None = None, timeout: float = 10
) -> VectorStore:
    if url:
        # No version probe: it runs in a background thread that dies noisily when the server is
        # down at start-up; the first real call reports an unreachable server clearly instead.
        client = QdrantClient(
            url=url, api_key=api_key, timeout=int(timeout), check_compatibility=False
        )
        return VectorStore(client, local=False)
    location = str(path) if path is not None else ":memory:"
    if location == ":memory:":
        return VectorStore(QdrantClient(location=":memory:"), local=True)
    Path(location).mkdir(parents=True, exist_ok=True)
    return VectorStore(QdrantClient(path=location), local=True)


class VectorStore:
    def __init__(self, client: QdrantClient, *, local: bool) -> None:
        self.client = client
        self.local = local

    def close(self) -> None:
        self.client.close()

    def ensure_collection(self, name: str, dim: int) -> bool:
        """Create ``name`` for ``dim``-wide vectors if missing; True when it was created."""
        if self.client.collection_exists(name):
            info = self.client.get_collection(name)
            vectors = info.config.params.vectors
            size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
            if size != dim:
                raise StoreMismatch(
                    f"collection {name!r} holds {size}-wide vectors but the embedder makes "
                    f"{dim}: use another QDRANT_COLLECTION or run "
                    f"`python -m app.rag ingest --recreate`"
                )
            return False
        self.client.create_collection(
            name,
            vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if not self.local:  # the local mode ignores payload indexes (and warns)
            for field in _FILTER_FIELDS:
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

    def stale(self, name: str, doc_ids: Sequence[str], keep: Sequence[str]) -> list[str]:
        """Points of these documents whose id (content hash) is not in ``keep``."""
        points, _ = self.client.scroll(
            name,
            scroll_filter=models.Filter(
                must=[models.FieldCondition(key="doc_id", match=models.MatchAny(any=list(doc_ids)))]
            ),
            limit=len(doc_ids) * 4 + 10,
            with_payload=False,
        )
        wanted = set(keep)
        return [str(p.id) for p in points if str(p.id) not in wanted]

    def delete(self, name: str, point_ids: Sequence[str]) -> None:
        if point_ids:
            self.client.delete(name, models.PointIdsList(points=list(point_ids)))

    def upsert(
        self,
        name: str,
        point_ids: Sequence[str],
        dense: npt.NDArray[np.float32],
        sparse: Sequence[SparseVector],
        payloads: Sequence[dict[str, Any]],
    ) -> None:
        points = [
            models.PointStruct(
                id=point_id,
                vector={
                    DENSE: vector.tolist(),
                    SPARSE: models.SparseVector(indices=sv.indices, values=sv.values),
                },
                payload=payload,
            )
            for point_id, vector, sv, payload in zip(
                point_ids, dense, sparse, payloads, strict=True
            )
        ]
        self.client.upsert(name, points, wait=True)

    def search(
        self,
        name: str,
        *,
        dense: npt.NDArray[np.float32] | None,
        sparse: SparseVector | None,
        limit: int,
        category: str | None = None,
        candidates: int = 30,
    ) -> list[SearchHit]:
        """Hybrid (both given: RRF over both), dense-only or sparse-only search."""
        query_filter = None
        if category is not None:
            query_filter = models.Filter(
                must=[
                    models.FieldCondition(key="category", match=models.MatchValue(value=category))
                ]
            )
        sparse_query = (
            models.SparseVector(indices=sparse.indices, values=sparse.values) if sparse else None
        )
        dense_query = dense.tolist() if dense is not None else None
        common: dict[str, Any] = {
            "limit": limit,
            "query_filter": query_filter,
            "with_payload": True,
            "with_vectors": [DENSE],
        }
        with warnings.catch_warnings():
            # qdrant-client warns on every local-mode query about payload indexes it ignores.
            warnings.simplefilter("ignore", UserWarning)
            if dense_query is not None and sparse_query is not None:
                response = self.client.query_points(
                    name,
                    prefetch=[
                        models.Prefetch(
                            query=dense_query, using=DENSE, limit=candidates, filter=query_filter
                        ),
                        models.Prefetch(
                            query=sparse_query, using=SPARSE, limit=candidates, filter=query_filter
                        ),
                    ],
                    query=models.FusionQuery(fusion=models.Fusion.RRF),
                    **common,
                )
            elif dense_query is not None:
                response = self.client.query_points(name, query=dense_query, using=DENSE, **common)
            elif sparse_query is not None:
                response = self.client.query_points(
                    name, query=sparse_query, using=SPARSE, **common
                )
            else:
                raise ValueError("search needs a dense or a sparse query")
        hits: list[SearchHit] = []
        for point in response.points:
            vectors = point.vector
            vector = None
            if isinstance(vectors, dict) and DENSE in vectors:
                vector = np.asarray(vectors[DENSE], dtype=np.float32)
            hits.append(SearchHit(str(point.id), dict(point.payload or {}), vector))
        return hits
