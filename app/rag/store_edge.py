"""The embedded vector store: qdrant-edge, Qdrant's engine inside this process, in QDRANT_PATH.

One shard folder per collection, ``QDRANT_PATH/<collection>``, with the layout of
app/rag/store.py. Deliberate choices:

- The engine builds its HNSW index only in ``optimize()``, which holds the GIL for its whole
  run: ingest calls it at its end (``python -m app.rag ingest`` and the first-start ingest,
  both before serving), never a search.
- The binding holds the GIL during every call; a search is short (a few milliseconds at
  100,000 points), so the retriever runs it in place (``searches_in_place``): a worker
  thread would hold the GIL for the same time, plus its hop.
- A shard folder is locked by the process that opened it (its write-ahead log): stop the
  gateway before running ``python -m app.rag ingest`` on the same folder, or use a server.
- ``QDRANT_PATH=:memory:`` means a throwaway folder, removed on close.
- The width check reads the shard's persisted ``edge_config.json``: the binding has no
  getter for a loaded shard's configuration.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import qdrant_edge as qe

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
    StoreUnavailable,
    VectorStore,
    mismatch,
    scope_filter,
)

__all__ = ["EdgeStore"]

log = logging.getLogger(__name__)

_CONFIG = "edge_config.json"
_SCROLL_PAGE = 256


def _stored_width(folder: Path) -> int | None:
    try:
        size = json.loads((folder / _CONFIG).read_text(encoding="utf-8"))["vectors"][DENSE]["size"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return int(size) if isinstance(size, int) else None


def _query_vector(vector: npt.NDArray[np.float32] | SparseVector) -> list[float] | qe.SparseVector:
    if isinstance(vector, SparseVector):
        return qe.SparseVector(vector.indices, vector.values)
    values: list[float] = vector.tolist()
    return values


def _condition(match: Match) -> qe.FieldCondition:
    if isinstance(match.value, list):
        return qe.FieldCondition(key=match.field, match=qe.MatchAny(match.value))
    return qe.FieldCondition(key=match.field, match=qe.MatchValue(match.value))


class EdgeStore(VectorStore):
    searches_in_place = True

    def __init__(self, path: Path | str) -> None:
        self._temporary = str(path) == ":memory:"
        self.root = Path(tempfile.mkdtemp(prefix="eco-edge-")) if self._temporary else Path(path)
        self.root.mkdir(parents=True, exist_ok=True)
        self._shards: dict[str, qe.EdgeShard] = {}
        self._lock = threading.Lock()  # opening a shard twice would fail on its own lock
        if (self.root / "meta.json").is_file() and (self.root / "collection").is_dir():
            log.warning(
                "%s also holds a store of qdrant-client's local mode (meta.json, collection/), "
                "which this engine does not read: it keeps its own folder per collection; "
                "the old files can be deleted",
                self.root,
            )

    def _folder(self, name: str) -> Path:
        return self.root / name

    def _shard(self, name: str) -> qe.EdgeShard | None:
        """The open shard of ``name``; None when the collection does not exist."""
        with self._lock:
            shard = self._shards.get(name)
            if shard is not None:
                return shard
            folder = self._folder(name)
            if not (folder / _CONFIG).is_file():
                return None
            try:
                shard = qe.EdgeShard.load(str(folder))
            except Exception as exc:  # the binding raises plain Exception
                raise StoreUnavailable(
                    f"cannot open {folder}: {exc} (a store folder serves one process at a "
                    f"time: stop the gateway before `python -m app.rag ingest`)"
                ) from exc
            self._shards[name] = shard
            return shard

    def _existing_shard(self, name: str) -> qe.EdgeShard:
        shard = self._shard(name)
        if shard is None:
            raise StoreUnavailable(
                f"no collection {name!r} in {self.root}: run `python -m app.rag ingest`"
            )
        return shard

    def close(self) -> None:
        with self._lock:
            for shard in self._shards.values():
                shard.close()  # flushes
            self._shards.clear()
        if self._temporary:
            shutil.rmtree(self.root, ignore_errors=True)

    def ensure_collection(self, name: str, dim: int) -> bool:
        if self._shard(name) is not None:
            size = _stored_width(self._folder(name))
            if size != dim:
                raise mismatch(name, size, dim)
            return False
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        with self._lock:
            shard = qe.EdgeShard.create(str(self._folder(name)), config)
            self._shards[name] = shard
        for field in FILTER_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
        return True

    def drop(self, name: str) -> None:
        # Open it first: that fails while another process (a running gateway) holds the folder,
        # instead of deleting its files from under it.
        if self._shard(name) is not None:
            with self._lock:
                self._shards.pop(name).close()
        shutil.rmtree(self._folder(name), ignore_errors=True)

    def count(self, name: str) -> int:
        shard = self._shard(name)
        return 0 if shard is None else shard.count(qe.CountRequest(exact=True))

    def existing(self, name: str, point_ids: Sequence[str]) -> set[str]:
        shard = self._shard(name)
        if shard is None or not point_ids:
            return set()
        return {str(r.id) for r in shard.retrieve(list(point_ids), False, False)}

    def _page(self, name: str, doc_ids: Sequence[str], offset: Any) -> tuple[list[str], Any]:
        records, offset = self._existing_shard(name).scroll(
            qe.ScrollRequest(
                offset=offset,
                limit=_SCROLL_PAGE,
                filter=qe.Filter(must=[_condition(Match("doc_id", list(doc_ids)))]),
                with_payload=False,
                with_vector=False,
            )
        )
        return [str(r.id) for r in records], offset

    def delete(self, name: str, point_ids: Sequence[str]) -> None:
        if point_ids:
            self._existing_shard(name).update(qe.UpdateOperation.delete_points(list(point_ids)))

    def _write(self, name: str, points: Sequence[Point]) -> None:
        written = [
            qe.Point(
                p.point_id,
                {DENSE: p.dense, SPARSE: qe.SparseVector(p.sparse.indices, p.sparse.values)},
                p.payload,
            )
            for p in points
        ]
        self._existing_shard(name).update(qe.UpdateOperation.upsert_points(written))

    def optimize(self, name: str) -> bool:
        shard = self._existing_shard(name)
        rebuilt = shard.optimize()
        shard.flush()
        return rebuilt

    def _nearest(
        self, name: str, queries: Sequence[NearestQuery], limit: int, scope: Scope
    ) -> list[list[Scored]]:
        condition = scope_filter(scope, _condition, qe.Filter)
        batch = qe.QueryBatchRequest(
            [
                qe.QueryRequest(
                    limit=limit,
                    query=qe.Query.Nearest(_query_vector(vector), using=using),
                    filter=condition,
                    with_payload=False,
                    with_vector=False,
                )
                for using, vector in queries
            ]
        )
        results = self._existing_shard(name).query_batch(batch)
        return [[Scored(str(p.id), p.score) for p in points] for points in results]

    def _fetch(self, name: str, point_ids: Sequence[str]) -> list[qe.Record]:
        return self._existing_shard(name).retrieve(list(point_ids), True, [DENSE])
