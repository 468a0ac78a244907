"""The bundled eco-challenge corpus: one JSON document per line (see data/README.md).

Besides its text and situation tags, each document carries :class:`Traits`: what a user can
ask to change about a recommendation ("더 쉬운 거", "돈 안 드는 거", "집에서", "혼자서"), authored
by reading the document (critiquing recommenders: the items carry the attributes a critique
names). A document without them (an operator's own corpus) has none: no critique can select
it or rule it out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.categories import CITY, LOCATIONS, PERSONAS, WORK_TYPES, Category

__all__ = [
    "COMPANY",
    "COSTS",
    "EFFORTS",
    "PLACES",
    "SITUATION_FIRSTS",
    "Document",
    "Traits",
    "classics_of",
    "load_corpus",
    "load_situation_firsts",
    "pairings_of",
    "persona_label",
]

#: The file beside a corpus naming, for a situation told alone ("at:바닷가", "job:현장직",
#: "with:family", "as:farming"), the challenges to show first, best first (authored by
#: reading the catalogue, as the fields' classic first steps are: :attr:`Traits.starter`).
SITUATION_FIRSTS = "situation_firsts.json"
_SITUATION_KEY = ("at:", "job:", "with:", "as:")

#: The values of each trait, in order (an effort or a cost: from the least).
EFFORTS = ("easy", "medium", "hard")
COSTS = ("free", "low", "some")
PLACES = ("home", "work", "outside", "moving")
COMPANY = ("alone", "family", "coworkers", "neighbours")


@dataclass(frozen=True, slots=True)
class Traits:
    """How easy a challenge is, what it costs, where it is done, with whom, whether anyone
    can do it as written (False: written for one narrow persona, a fishing boat, a farm), and
    its place among its field's classic first steps (``starter``: 1 first; None for the rest),
    what a plain ask for the field ("비건 챌린지 추천해줘") is answered with. ``persona``: for
    a narrow one, who it is written for, as the situation told is labelled (any one of them
    known makes it the user's: :func:`persona_label`)."""

    effort: str
    cost: str
    places: frozenset[str]
    company: frozenset[str]
    anyone: bool
    starter: int | None = None
    persona: frozenset[str] = frozenset()

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> Traits | None:
        """The traits in a corpus line or a stored payload; None when it has none. Raises
        ValueError on a value outside the vocabulary."""
        if "effort" not in raw:
            return None
        traits = cls(
            effort=str(raw["effort"]),
            cost=str(raw["cost"]),
            places=frozenset(map(str, raw["places"])),
            company=frozenset(map(str, raw["company"])),
            anyone=bool(raw["anyone"]),
            starter=raw.get("starter"),
            persona=frozenset(map(str, raw.get("persona") or ())),
        )
        if traits.starter is not None and (
            isinstance(traits.starter, bool)
            or not isinstance(traits.starter, int)
            or traits.starter < 1
        ):
            raise ValueError(f"starter must be a rank from 1, or null: {traits.starter!r}")
        if (
            traits.effort not in EFFORTS
            or traits.cost not in COSTS
            or not traits.places
            or not traits.places <= set(PLACES)
            or not traits.company
            or not traits.company <= set(COMPANY)
            or not all(map(persona_label, traits.persona))
        ):
            raise ValueError(f"traits outside the vocabulary: {traits}")
        return traits

    def as_payload(self) -> dict[str, Any]:
        return {
            "effort": self.effort,
            "cost": self.cost,
            "places": sorted(self.places, key=PLACES.index),
            "company": sorted(self.company, key=COMPANY.index),
            "anyone": self.anyone,
            "starter": self.starter,
            "persona": sorted(self.persona),
        }


def persona_label(label: str) -> bool:
    """Whether ``label`` names a persona as a situation told is labelled: a place lived other
    than the city ("at:바닷가"), a work type ("job:현장직"), or one of
    :data:`app.domain.categories.PERSONAS` ("as:fishing")."""
    kind, _, value = label.partition(":")
    allowed = {"at": LOCATIONS - {CITY}, "job": WORK_TYPES, "as": PERSONAS}.get(kind, ())
    return value in allowed


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    title: str
    body: str
    category: Category
    locations: tuple[str, ...]
    work_types: tuple[str, ...]
    keywords: tuple[str, ...]
    source: str
    traits: Traits | None = None
    #: What a person for whom this is the best answer would type (app/chat/fit.py).
    asks: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return f"{self.title}\n{self.body}"


def load_corpus(path: Path) -> list[Document]:
    """Read ``path``; a malformed line fails loudly with its line number."""
    documents: list[Document] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                documents.append(
                    Document(
                        id=str(raw["id"]),
                        title=str(raw["title"]),
                        body=str(raw["body"]),
                        category=Category[raw["category"]],
                        locations=tuple(raw.get("locations", ())),
                        work_types=tuple(raw.get("work_types", ())),
                        keywords=tuple(raw.get("keywords", ())),
                        source=str(raw.get("source", "")),
                        traits=Traits.read(raw),
                        asks=_asks(raw),
                    )
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: bad corpus line ({exc!r})") from exc
    return documents


def _asks(raw: Mapping[str, Any]) -> tuple[str, ...]:
    asks = raw.get("asks", [])
    if not isinstance(asks, list) or not all(isinstance(a, str) and a.strip() for a in asks):
        raise ValueError("asks must be a list of non-empty strings")
    return tuple(asks)


def classics_of(documents: Sequence[Document]) -> dict[Category, tuple[str, ...]]:
    """Each field's classic first steps (:attr:`Traits.starter`): document ids by category,
    in their order."""
    ranked: dict[Category, list[tuple[int, str]]] = {}
    for document in documents:
        if document.traits is not None and document.traits.starter:
            ranked.setdefault(document.category, []).append((document.traits.starter, document.id))
    return {category: tuple(i for _, i in sorted(ids)) for category, ids in ranked.items()}


def pairings_of(documents: Sequence[Document]) -> dict[tuple[str, str], float]:
    """How usual each place is with each company in the catalogue: for a pair of a place and
    a company, the larger of two shares: of the place's challenges done with the company, and
    of the company's done at the place (most of the coworkers' are done at work; few are done
    on the move, and few on the move are done with coworkers). Keyed both ways round; a pair
    with no challenge of either is 0."""
    counts: dict[str, int] = {}
    both: dict[tuple[str, str], int] = {}
    for document in documents:
        traits = document.traits
        if traits is None:
            continue
        for value in (*traits.places, *traits.company):
            counts[value] = counts.get(value, 0) + 1
        for place in traits.places:
            for company in traits.company:
                both[place, company] = both.get((place, company), 0) + 1
    pairings: dict[tuple[str, str], float] = {}
    for place in PLACES:
        for company in COMPANY:
            n = both.get((place, company), 0)
            share = max(n / counts[v] if counts.get(v) else 0.0 for v in (place, company))
            pairings[place, company] = pairings[company, place] = share
    return pairings


def load_situation_firsts(path: Path) -> dict[str, tuple[str, ...]]:
    """The challenges to show first for a situation told alone, by situation ("at:바닷가",
    "job:현장직", "with:family"); none when ``path`` does not exist (an operator's own corpus).
    Raises ValueError on a key of another kind or a list that is not of ids."""
    if not path.exists():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    firsts: dict[str, tuple[str, ...]] = {}
    for key, ids in raw.items():
        if not key.startswith(_SITUATION_KEY) or not isinstance(ids, list):
            raise ValueError(f"{path.name}: {key!r} is not a situation with a list of ids")
        firsts[key] = tuple(str(i) for i in ids)
    return firsts
