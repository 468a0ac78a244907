"""Vectors shipped beside the bundled data, used only when they are these texts by this
embedder.

Embedding is the slow part of starting on a new machine: the catalogue's 408 documents take
most of a minute on two cores, its sentences and asks as long again. So for the bundled corpus
and the default embedder their vectors ship in the repository (``*.<embedder>.npz``), each file
holding a digest of the embedder's name and every ``(id, text)`` row it embeds. A file whose
digest differs (an edited corpus, another embedder, another ``CORPUS_PATH``) is never read;
those texts are embedded instead.

The documents' own vectors (what retrieval ranks by, and the chat's fit bank reads) ship here,
exactly as embedded; the chat's sentences and asks beside its examples
(app/chat/sentence_bank.py). Rebuild all three after editing the corpus:

    python -m app.chat.sentence_bank
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.rag.corpus import Document
from app.rag.embedder import Vectors

__all__ = [
    "Rows",
    "document_rows",
    "documents_file",
    "save_vectors",
    "shipped_vectors",
    "vectors_file",
]

#: What is embedded: ``(document id, text)``, in order.
Rows = Sequence[tuple[str, str]]

_DATA = Path(__file__).resolve().parent / "data"


def document_rows(documents: Sequence[Document]) -> list[tuple[str, str]]:
    """The documents as retrieval embeds them: each one's title and body."""
    return [(d.id, d.text) for d in documents]


def vectors_file(stem: str, embedder_name: str, folder: Path) -> Path:
    """Where ``stem``'s vectors by ``embedder_name`` ship in ``folder``."""
    return folder / f"{stem}.{_slug(embedder_name)}.npz"


def documents_file(embedder_name: str) -> Path:
    """Where the bundled documents' vectors by ``embedder_name`` ship."""
    return vectors_file("challenges_documents", embedder_name, _DATA)


def shipped_vectors(path: Path, rows: Rows, embedder_name: str) -> Vectors | None:
    """``path``'s vectors when they are ``rows`` embedded by ``embedder_name``, else None."""
    if not path.exists():
        return None
    with np.load(path) as data:
        if str(data["digest"]) != _digest(rows, embedder_name):
            return None
        vectors: Vectors = data["vectors"].astype(np.float32)
    return vectors


def save_vectors(
    path: Path, rows: Rows, embedder_name: str, vectors: Vectors, *, half: bool = False
) -> None:
    """Store ``rows``' vectors with their digest; ``half``: as float16, which halves the file
    and moves a cosine by less than 1e-3."""
    stored = vectors.astype(np.float16 if half else np.float32)
    np.savez_compressed(path, vectors=stored, digest=_digest(rows, embedder_name))


def _digest(rows: Rows, embedder_name: str) -> str:
    blob = json.dumps([embedder_name, list(rows)], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _slug(embedder_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", embedder_name).strip("_") or "embedder"
