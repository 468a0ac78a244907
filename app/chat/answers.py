"""A question's answer, from the catalogue text that holds it, exactly.

    question + the turn's candidates (retrieval's order, best first)
      -> every sentence of their catalogue text
      -> the sentence sharing the most of the question's rare terms (Korean bigrams, weighted
         by how few of the candidates' sentences hold them, half for the words of its
         challenge's title: what it is about, not what was asked), a little more for a better
         candidate
      -> the sentence and its challenge, or None (the catalogue does not say: the answer says
         so in one sentence)

The sentence is shown as the catalogue has it, and its challenge is shown first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.rag.retriever import Hit
from app.rag.sparse import terms

__all__ = ["Found", "find_answer", "sentences_of"]

#: The least weight of shared terms for a sentence to count as the answer: about two rare
#: terms shared (a term held by one sentence alone weighs 1).
MIN_SCORE = 1.5
#: What a candidate's place in retrieval's order is worth, per place, in the same weight.
PLACE_WEIGHT = 0.15
#: What a term of the challenge's title weighs, against one that is not.
TOPIC_WEIGHT = 0.5
#: The candidates looked in: the best few (the answer is about what the question is about).
LOOK_IN = 5

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Found:
    hit: Hit  # the challenge whose text holds the answer
    sentence: str  # exactly as the catalogue has it


def sentences_of(body: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(body.strip()) if s]


def find_answer(question: str, hits: Sequence[Hit]) -> Found | None:
    """The catalogue sentence among ``hits`` that answers ``question``, or None."""
    asked = set(terms(question))
    if not asked:
        return None
    found = [
        (place, hit, sentence, set(terms(sentence)))
        for place, hit in enumerate(hits[:LOOK_IN])
        for sentence in sentences_of(hit.document.body)
    ]
    if not found:
        return None
    held: dict[str, int] = {}
    for *_, words in found:
        for word in words & asked:
            held[word] = held.get(word, 0) + 1
    rarest = math.log(1 + len(found))
    weight = {word: math.log(1 + len(found) / count) / rarest for word, count in held.items()}
    best: tuple[float, Found] | None = None
    for place, hit, sentence, words in found:
        # The title's words say what the challenge is about, not what was asked of it.
        topic = set(terms(hit.document.title))
        shared = sum(weight[w] * (TOPIC_WEIGHT if w in topic else 1) for w in words & asked)
        score = shared - PLACE_WEIGHT * place
        if shared >= MIN_SCORE and (best is None or score > best[0]):
            best = (score, Found(hit, sentence))
    return best[1] if best else None
