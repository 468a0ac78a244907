"""Lexical vectors: a message's Korean bigrams and Latin words, hashed into a fixed width.

The intent step reads a message through its embedding. When the embedding model is busy (a
burst: every turn waits its turn on the one model), a turn is read through these vectors
instead, the same terms the sparse BM25 index matches (``app.rag.sparse.terms``), hashed into
``dim`` buckets with ``1 + log(tf)`` weights and unit length, so the same nearest-example vote
works on them. Encoding one message takes about a tenth of a millisecond and no model.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from app.rag.embedder import Vectors
from app.rag.sparse import terms

__all__ = ["LexicalEmbedder"]


class LexicalEmbedder:
    """Hashed bag-of-terms vectors; follows the ``Embedder`` protocol (queries = passages)."""

    def __init__(self, dim: int = 4096) -> None:
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return f"lexical-{self._dim}"

    def _bucket(self, term: str) -> int:
        digest = hashlib.blake2b(term.encode(), digest_size=4).digest()
        return int.from_bytes(digest, "big") % self._dim

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise TypeError("embed_queries takes a sequence of strings, not one string")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for term, count in Counter(terms(text)).items():
                out[row, self._bucket(term)] += 1.0 + math.log(count)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self.embed_queries(texts)
