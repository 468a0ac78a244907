"""Retrieval behind a small interface, and a lexical implementation over the bundled corpus.

``LexicalRetriever`` scores documents by TF-IDF cosine over Korean character bigrams (and
whole Latin words), which needs no model and copes with spacing and particles. It is the
stand-in until the Qdrant + embedding retriever lands (issue 4); both answer the same
``Retriever`` protocol. Scoring a query over a few hundred documents takes well under a
millisecond, so it runs on the event loop; an embedding retriever must go off-loop.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.chat.categories import Category
from app.rag.corpus import Document

__all__ = ["Hit", "LexicalRetriever", "Retriever"]


@dataclass(frozen=True, slots=True)
class Hit:
    document: Document
    score: float  # 0..1, higher is closer


class Retriever(Protocol):
    async def retrieve(self, query: str, *, k: int, category: Category | None = None) -> list[Hit]:
        """The ``k`` best documents for ``query``, preferring ``category`` when given."""
        ...


_WORD = re.compile(r"[0-9a-z]+|[가-힣]+")
_CATEGORY_BOOST = 0.15


def _features(text: str) -> Counter[str]:
    text = unicodedata.normalize("NFKC", text).lower()
    features: Counter[str] = Counter()
    for word in _WORD.findall(text):
        if word.isascii():
            features[word] += 1
        elif len(word) == 1:
            features[word] += 1
        else:
            features.update(word[i : i + 2] for i in range(len(word) - 1))
    return features


class LexicalRetriever:
    def __init__(self, documents: Sequence[Document]) -> None:
        self._documents = list(documents)
        doc_features = [
            _features(f"{d.title} {d.title} {d.body} {' '.join(d.keywords)}")
            for d in self._documents
        ]
        frequency: Counter[str] = Counter()
        for features in doc_features:
            frequency.update(features.keys())
        count = len(self._documents)
        self._idf = {term: math.log((1 + count) / (1 + df)) + 1.0 for term, df in frequency.items()}
        self._vectors = [self._weigh(features) for features in doc_features]

    def __len__(self) -> int:
        return len(self._documents)

    def _weigh(self, features: Counter[str]) -> dict[str, float]:
        weights = {t: (1 + math.log(n)) * self._idf.get(t, 0.0) for t, n in features.items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {t: w / norm for t, w in weights.items() if w}

    def score_all(self, query: str) -> list[float]:
        query_vector = self._weigh(_features(query))
        return [
            sum(weight * vector.get(term, 0.0) for term, weight in query_vector.items())
            for vector in self._vectors
        ]

    async def retrieve(self, query: str, *, k: int, category: Category | None = None) -> list[Hit]:
        if k <= 0 or not self._documents:
            return []
        scores = self.score_all(query)
        ranked = sorted(
            range(len(scores)),
            key=lambda i: (
                scores[i] + (_CATEGORY_BOOST if self._documents[i].category is category else 0.0)
            ),
            reverse=True,
        )
        return [Hit(self._documents[i], scores[i]) for i in ranked[:k]]
