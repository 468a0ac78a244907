"""How well each catalogue challenge fits what was said: its text's meaning and its asks'.

A message is a person's words ("잼 병이 찬장에 잔뜩인데 버리기 아깝네"), a challenge is the
catalogue's ("유리병으로 화분 만들기 …"): the two can be far apart in meaning even when one
answers the other. So each document carries a few asks, authored by reading it: what a person
for whom it is the best answer would type (their problem, their situation, a question its text
answers). Embedded as queries, they meet a message where it is, query to query; the document's
own text, embedded as a passage, meets it where retrieval does.

    the turn's embedding -> per document: (its text's cosine + ASK_WEIGHT x its nearest ask's)
                            / (1 + ASK_WEIGHT)
    the turn's words     -> + the words it shares with the document's title and asks (BM25),
                            weighed by WORDS_WEIGHT on the cosines' own spread
        -> per candidate (:meth:`FitBank.fit`): how well it fits (app/chat/ranking.py)
        -> the categories of the best-fitting documents (:meth:`FitBank.categories`):
           evidence of what a message that names no category is about (app/chat/intent.py)
        -> the one document that fits far better than any other (:meth:`FitBank.outright`:
           the message says one of its asks nearly word for word): a first ask's field, and
           the text that answers a question (app/chat/planning.py)

A document without asks is fitted by its text alone. The vectors for the bundled corpus and
embedder ship beside the intent examples (app/chat/sentence_bank.py).

The words: the small embedder puts most documents of a category within a few hundredths of
each other for a message, so a word the message shares with a title or an ask ("화상회의",
"단백질", "카디건") is evidence the cosines blur. It is BM25 (``bm25s``) over the sparse index's
Korean character bigrams (app/rag/sparse.py), over title and asks only: the body's words (what
to do, why) matched messages worse on the fit bench's dev splits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import bm25s
import numpy as np
import numpy.typing as npt

from app.domain.categories import Category
from app.rag.sparse import terms

__all__ = ["ANSWERED_MARGIN", "ASK_WEIGHT", "OUTRIGHT_MARGIN", "WORDS_WEIGHT", "FitBank", "Words"]

#: What the nearest ask weighs beside the document's text (the best of 0.3-2.0 for the
#: nearest document being one a labeller puts first, on the fit bench's dev first turns).
ASK_WEIGHT = 0.7
#: How much better than every other document the best must fit a message for its field to be
#: the message's (a new ask's, naming none: app/chat/intent.py): near the words of one of its
#: asks ("다 쓴 건전지 어떻게 버려?": 0.095). 0.03 of 0.015-0.05 on the intent bench's dev
#: split and the fit bench's dev splits (bench/README.md "Tenth pass"); below it, the best is
#: one of several alike.
OUTRIGHT_MARGIN = 0.03
#: How much better the first candidate must fit a question than any other document for its
#: text to be said to answer it, its nearest sentence no longer hedged as only close (0.02 of
#: 0.01-0.03 on the fit bench's dev splits: 0.01 claimed an answer the catalogue lacks).
ANSWERED_MARGIN = 0.02
#: What the shared words weigh: their BM25 score, standardized over the documents, times this
#: share of the cosines' standard deviation (0.25 of 0.1-1.0 on the fit bench's dev splits).
WORDS_WEIGHT = 0.25


class Words:
    """BM25 of a message against each document's words (its title and asks), by ``bm25s``."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._count = len(texts)
        self._index = bm25s.BM25()
        if texts:
            self._index.index([terms(text) for text in texts], show_progress=False)

    def __len__(self) -> int:
        return self._count

    def scores(self, text: str) -> npt.NDArray[np.float32]:
        """Each document's BM25 score for ``text`` (zeros when it shares no term)."""
        query = list(dict.fromkeys(terms(text)))  # each term once, as the sparse index's query
        if not query or not self._count:
            return np.zeros(self._count, dtype=np.float32)
        return np.asarray(self._index.get_scores(query), dtype=np.float32)


class FitBank:
    """Every document's text vector (a passage), its asks' vectors (queries), and its words."""

    def __init__(
        self,
        documents: Sequence[tuple[str, Category]],
        passages: npt.NDArray[np.float32],
        asks: Sequence[str],
        ask_vectors: npt.NDArray[np.float32],
        words: Words | None = None,
    ) -> None:
        """``asks``: the document id of each row of ``ask_vectors``; ``words``: one row per
        document, in the order of ``documents`` (None: fitted by the vectors alone)."""
        if len(documents) != len(passages) or len(asks) != len(ask_vectors):
            raise ValueError("one vector per document and per ask")
        if words is not None and len(words) != len(documents):
            raise ValueError("one row of words per document")
        self._words = words
        self._ids = [doc_id for doc_id, _ in documents]
        self._categories = [category for _, category in documents]
        self._category_of = np.array(self._categories, dtype=object)  # for a category's rows
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
        self._last: tuple[npt.NDArray[np.float32], str | None, npt.NDArray[np.float32]] | None
        self._last = None

    def __len__(self) -> int:
        return len(self._ids)

    def _scores(self, vector: npt.NDArray[np.float32], text: str | None) -> npt.NDArray[np.float32]:
        if self._last is not None and self._last[0] is vector and self._last[1] == text:
            return self._last[2]
        scores = self._score(np.asarray(vector, dtype=np.float32), text)
        self._last = (vector, text, scores)
        return scores

    def _score(self, vector: npt.NDArray[np.float32], text: str | None) -> npt.NDArray[np.float32]:
        scores = vector @ self._passages
        if self._ask_index.shape[1]:
            cosines = np.append(vector @ self._asks, -np.inf)
            nearest = cosines[self._ask_index].max(axis=1)
            fused = (scores + ASK_WEIGHT * nearest) / (1 + ASK_WEIGHT)
            scores = np.where(self._has_asks, fused, scores)
        if text is not None and self._words is not None:
            shared = self._words.scores(text)
            if (spread := float(shared.std())) > 0:  # some document shares a word with it
                standardized = (shared - shared.mean()) / spread
                scores = scores + WORDS_WEIGHT * float(scores.std()) * standardized
        return scores

    def fit(
        self, vector: npt.NDArray[np.float32], doc_ids: Iterable[str], text: str | None = None
    ) -> dict[str, float]:
        """For each of ``doc_ids`` in the bank, how well it fits the message (a cosine, moved
        by the words ``text`` shares with it: the words the vector embeds)."""
        if not self._ids:
            return {}
        scores = self._scores(vector, text)
        return {
            doc_id: float(scores[row])
            for doc_id in doc_ids
            if (row := self._row.get(doc_id)) is not None
        }

    def best(
        self,
        vector: npt.NDArray[np.float32],
        k: int,
        text: str | None = None,
        *,
        category: Category | None = None,
    ) -> list[str]:
        """The ids of the ``k`` best-fitting documents (of ``category``, when given), best
        first."""
        if not self._ids or k <= 0:
            return []
        scores = self._scores(vector, text)
        if category is not None:
            scores = np.where(self._category_of == category, scores, -np.inf)
        best = np.argsort(-scores)[:k]
        return [self._ids[row] for row in best if np.isfinite(scores[row])]

    def nearer_shown(
        self, vector: npt.NDArray[np.float32], shown: Iterable[str], text: str | None = None
    ) -> float | None:
        """How much better the best-fitting of ``shown`` fits the message than the best of
        the rest of the catalogue (negative: something else fits it better); None when the
        bank holds none of them."""
        rows = [row for doc_id in shown if (row := self._row.get(doc_id)) is not None]
        if not rows or len(rows) == len(self._ids):
            return None
        scores = self._scores(vector, text)
        rest = np.delete(scores, rows)
        return float(scores[rows].max() - rest.max())

    def outright(
        self,
        vector: npt.NDArray[np.float32],
        text: str | None = None,
        *,
        margin: float = OUTRIGHT_MARGIN,
    ) -> str | None:
        """The id of the document that fits the message better than every other by ``margin``
        at least (the message says one of its asks nearly word for word: its text answers
        it); None when none stands out so."""
        if len(self._ids) < 2:
            return None
        scores = self._scores(vector, text)
        second, best = np.argpartition(scores, -2)[-2:]
        if scores[best] - scores[second] < margin:
            return None
        return self._ids[int(best)]

    def category(self, doc_id: str) -> Category | None:
        """The category of the document ``doc_id`` (None: not in the bank)."""
        row = self._row.get(doc_id)
        return None if row is None else self._categories[row]

    def categories(
        self, vector: npt.NDArray[np.float32], k: int, text: str | None = None
    ) -> list[Category]:
        """The categories of the ``k`` best-fitting documents, best first."""
        if not self._ids:
            return []
        best = np.argsort(-self._scores(vector, text))[:k]
        return [self._categories[row] for row in best]
