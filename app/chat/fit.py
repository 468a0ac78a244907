"""How well each catalogue challenge fits what was said: its text's meaning and its asks'.

A message is a person's words ("잼 병이 찬장에 잔뜩인데 버리기 아깝네"), a challenge is the
catalogue's ("유리병으로 화분 만들기 …"): the two can be far apart in meaning even when one
answers the other. So each document carries a few asks, authored by reading it: what a person
for whom it is the best answer would type (their problem, their situation, a question its text
answers). Embedded as queries, they meet a message where it is, query to query; the document's
own text, embedded as a passage, meets it where retrieval does.

    the turn's embedding -> per document: (its text's cosine + ASK_WEIGHT x its nearest ask's)
                            / (1 + ASK_WEIGHT)
        -> per candidate (:meth:`FitBank.fit`): how well it fits (app/chat/ranking.py)
        -> the categories of the best-fitting documents (:meth:`FitBank.categories`):
           evidence of what a message that names no category is about (app/chat/intent.py)

A document without asks is fitted by its text alone. The vectors for the bundled corpus and
embedder ship beside the intent examples (app/chat/sentence_bank.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from app.domain.categories import Category

__all__ = ["ASK_WEIGHT", "FitBank"]

#: What the nearest ask weighs beside the document's text (the best of 0.3-2.0 for the
#: nearest document being one a labeller puts first, on the fit bench's dev first turns).
ASK_WEIGHT = 0.7


class FitBank:
    """Every document's text vector (a passage) and its asks' vectors (queries)."""

    def __init__(
        self,
        documents: Sequence[tuple[str, Category]],
        passages: npt.NDArray[np.float32],
        asks: Sequence[str],
        ask_vectors: npt.NDArray[np.float32],
    ) -> None:
        """``asks``: the document id of each row of ``ask_vectors``."""
        if len(documents) != len(passages) or len(asks) != len(ask_vectors):
            raise ValueError("one vector per document and per ask")
        self._ids = [doc_id for doc_id, _ in documents]
        self._categories = [category for _, category in documents]
        self._row = {doc_id: row for row, doc_id in enumerate(self._ids)}
        self._passages = np.ascontiguousarray(np.asarray(passages, dtype=np.float32).T)
        self._asks = np.ascontiguousarray(np.asarray(ask_vectors, dtype=np.float32).T)
        # For each document, the columns of its asks, padded with the column past the last
        # (read as -inf): one gather and one max per message.
        asks_of: list[list[int]] = [[] for _ in self._ids]
        for column, doc_id in enumerate(asks):
            if (row := self._row.get(doc_id)) is not None:
                asks_of[row].append(column)
        width = max((len(columns) for columns in asks_of), default=0)
        self._ask_index = np.full((len(self._ids), width), len(asks), dtype=np.intp)
        for row, columns in enumerate(asks_of):
            self._ask_index[row, : len(columns)] = columns
        self._has_asks = np.array([bool(columns) for columns in asks_of])
        # The last message's scores: a first turn asks for its categories, then its
        # candidates' fit, with the same vector (kept, so that ``is`` cannot mistake another).
        self._last: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]] | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def _scores(self, vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        if self._last is not None and self._last[0] is vector:
            return self._last[1]
        scores = self._score(np.asarray(vector, dtype=np.float32))
        self._last = (vector, scores)
        return scores

    def _score(self, vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        scores = vector @ self._passages
        if self._ask_index.shape[1]:
            cosines = np.append(vector @ self._asks, -np.inf)
            nearest = cosines[self._ask_index].max(axis=1)
            fused = (scores + ASK_WEIGHT * nearest) / (1 + ASK_WEIGHT)
            scores = np.where(self._has_asks, fused, scores)
        return scores

    def fit(self, vector: npt.NDArray[np.float32], doc_ids: Iterable[str]) -> dict[str, float]:
        """For each of ``doc_ids`` in the bank, how well it fits the message (a cosine)."""
        if not self._ids:
            return {}
        scores = self._scores(vector)
        return {
            doc_id: float(scores[row])
            for doc_id in doc_ids
            if (row := self._row.get(doc_id)) is not None
        }

    def categories(self, vector: npt.NDArray[np.float32], k: int) -> list[Category]:
        """The categories of the ``k`` best-fitting documents, best first."""
        if not self._ids:
            return []
        best = np.argsort(-self._scores(vector))[:k]
        return [self._categories[row] for row in best]
