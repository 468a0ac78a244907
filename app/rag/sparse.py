"""BM25-style sparse vectors over Korean character bigrams, for Qdrant's sparse index.

Korean glues particles to words ("텀블러를", "텀블러로"), so whole-word terms miss; the
character bigrams of each Hangul run ("텀블", "블러", "러를") match across particles and
spacing mistakes. Latin words and digits are kept whole (lower-cased). Terms are hashed to
31-bit indices (stable across processes: blake2b, not ``hash()``).

Documents carry the BM25 term-frequency part, ``tf·(k1+1) / (tf + k1·(1-b+b·len/avglen))``;
queries carry 1 per distinct term; Qdrant multiplies in the IDF at query time
(``Modifier.IDF`` on the collection), so the score is BM25.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

__all__ = ["SparseEncoder", "SparseVector", "terms"]

_WORD = re.compile(r"[0-9a-z]+|[가-힣]+")
_K1 = 1.2
_B = 0.75


@dataclass(frozen=True, slots=True)
class SparseVector:
    indices: list[int]
    values: list[float]


def terms(text: str) -> list[str]:
    """The lexical terms of ``text``: Hangul bigrams (a lone syllable stays whole), Latin words."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[str] = []
    for word in _WORD.findall(text):
        if word.isascii() or len(word) == 1:
            out.append(word)
        else:
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
    return out


def _index(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "big") >> 1


class SparseEncoder:
    def __init__(self, average_length: float = 60.0) -> None:
        self.average_length = average_length

    def encode_passage(self, text: str) -> SparseVector:
        counts = Counter(_index(t) for t in terms(text))
        length = sum(counts.values())
        norm = _K1 * (1 - _B + _B * length / self.average_length)
        indices = sorted(counts)
        values = [counts[i] * (_K1 + 1) / (counts[i] + norm) for i in indices]
        return SparseVector(indices, values)

    def encode_query(self, text: str) -> SparseVector:
        indices = sorted({_index(t) for t in terms(text)})
        return SparseVector(indices, [1.0] * len(indices))
