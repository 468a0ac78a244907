"""Put documents into the vector store, idempotently.

Each point's id is a hash of everything that shapes its vectors and payload (the document's
fields and the embedder's name), so a second run finds every id present and changes
nothing; an edited document gets a new id, and its old point is deleted. Embedding runs in
batches, with progress reported per batch; the bundled corpus by the default embedder is not
embedded at all: its vectors ship (app/rag/shipped.py), which takes a new machine's first
start from about a minute to seconds. Last, the store builds its search index
(``VectorStore.optimize``): here, at ingest, because it blocks for as long as it runs (the
embedded engine holds the GIL throughout), which a serving gateway could not afford.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.rag.corpus import Document
from app.rag.embedder import Embedder, Vectors
from app.rag.shipped import document_rows, documents_file, shipped_vectors
from app.rag.sparse import SparseEncoder, terms
from app.rag.store import VectorStore

__all__ = ["IngestReport", "ingest", "point_id"]

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class IngestReport:
    total: int
    added: int
    unchanged: int
    replaced: int


def _payload(document: Document) -> dict[str, Any]:
    traits = document.traits.as_payload() if document.traits else {}
    return {
        "doc_id": document.id,
        "title": document.title,
        "body": document.body,
        "category": document.category.code,
        "locations": list(document.locations),
        "work_types": list(document.work_types),
        "keywords": list(document.keywords),
        "source": document.source,
        **traits,
    }


def point_id(document: Document, embedder_name: str) -> str:
    blob = json.dumps([embedder_name, _payload(document)], ensure_ascii=False, sort_keys=True)
    return str(uuid.UUID(bytes=hashlib.sha256(blob.encode()).digest()[:16]))


def ingest(
    store: VectorStore,
    collection: str,
    embedder: Embedder,
    documents: Sequence[Document],
    *,
    batch_size: int = 64,
    progress: Progress | None = None,
) -> IngestReport:
    store.ensure_collection(collection, embedder.dim)
    ids = [point_id(d, embedder.name) for d in documents]
    present = store.existing(collection, ids) if ids else set()
    todo = [index for index, pid in enumerate(ids) if pid not in present]
    lengths = [len(terms(d.text)) for d in documents] or [1]
    sparse = SparseEncoder(average_length=sum(lengths) / len(lengths))
    shipped = _shipped(documents, embedder) if todo else None

    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        docs = [documents[index] for index in batch]
        store.upsert(
            collection,
            [ids[index] for index in batch],
            shipped[batch]
            if shipped is not None
            else embedder.embed_passages([d.text for d in docs]),
            [sparse.encode_passage(f"{d.text}\n{' '.join(d.keywords)}") for d in docs],
            [_payload(d) for d in docs],
        )
        if progress is not None:
            progress(start + len(batch), len(todo))

    replaced = store.stale(collection, [documents[i].id for i in todo], ids) if todo else []
    store.delete(collection, replaced)
    # Also when nothing changed: a run cut short before this line left the index unbuilt.
    log.info("building the search index of %r", collection)
    started = time.monotonic()
    rebuilt = store.optimize(collection)
    outcome = "built" if rebuilt else "had nothing to rebuild"
    log.info("search index %s (%.1f s)", outcome, time.monotonic() - started)
    return IngestReport(
        total=len(documents),
        added=len(todo),
        unchanged=len(documents) - len(todo),
        replaced=len(replaced),
    )


def _shipped(documents: Sequence[Document], embedder: Embedder) -> Vectors | None:
    """The documents' shipped vectors, in order, when they are these texts by this embedder."""
    vectors = shipped_vectors(
        documents_file(embedder.name), document_rows(documents), embedder.name
    )
    if vectors is not None:
        log.info("using the shipped vectors of %d documents", len(documents))
    return vectors
