"""Which challenge comes first: the turn's candidates ordered with everything the turn knows.

    retrieved (the message's meaning, within the category and situation scope)
      -> what was said: retrieval's order, and how well each candidate fits the message (its
         text's meaning and its asks', users' words against users' words: app/chat/fit.py)
      -> only those satisfying the constraints (none does: the nearest, and the answer says so)
      -> the situation: told in words ("바닷가 사는데") it lifts the challenges tagged for it;
         a challenge written for a narrow persona comes after what anyone can do unless the
         user's place is known to be its place; base-info's first answer lifts what is
         written for a place other than the city
      -> ease: easy challenges a little before hard ones (more when the turn asks nothing of
         its own, as base-info: the first is one to start with); on a conversation's first
         ask, the field's classic first steps a little before the rest
      -> what the message leaves aside ("텀블러 말고 또 뭐 있어?"): challenges whose titles
         say it come last
      -> a field asked for with nothing in it ("비건 챌린지 추천해줘"), or base-info in the
         city: its classic first steps first, in their order (the catalogue's ``starter``
         rank)
      -> the order; on a conversation's first ask whose subject spans fields, the other
         fields' challenges its own search of every field puts above the field's next ones
         join after the first (:func:`across_fields`)

Retrieval's own order is the base: its first pick was relevant 0.90 of the time on the choice
bench, the default model's 0.72 (bench/README.md "Choice"), so the gateway puts the first
challenge itself and the model orders what follows (app/chat/planning.py).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from app.chat.constraints import Constraint, satisfies
from app.domain.categories import CITY
from app.rag.corpus import COSTS, EFFORTS, Document
from app.rag.retriever import Hit

__all__ = ["ACROSS_TOP", "ACROSS_TOP_ASKED", "Ranked", "Situation", "across_fields", "rank"]

#: How many of the message's nearest challenges of every field may join a field's answer
#: (:func:`across_fields`).
ACROSS_TOP = 5
#: For a question, only the message's own nearest: the others near its words are seldom what it
#: asks ("식기세척기 쓰면 물이 덜 드는 거 맞아요?" is no phone case's).
ACROSS_TOP_ASKED = 1
#: How many places a narrow persona's challenge falls behind in retrieval's order unless its
#: persona is known (:func:`_persona_known`), and how many a challenge
#: tagged for the situation told in words rises (per tag).
NARROW_PENALTY = 4.0
TOLD_BONUS = 2.5
#: How many places after a first written for a narrow persona the user is not known to be a
#: challenge the user can do is taken first from (:func:`_theirs_first`).
OPENS_WITHIN = 3
#: How many places a narrow persona's challenge falls when the work or place told in words is
#: not its own (:func:`_persona_unlike`): behind whatever fits (30; at 12 an office worker's
#: "사무실에서 … 몇 가지만 더" still began with a shop's door, on the fit bench's dev2 split).
UNLIKE_PENALTY = 30.0
#: How many places a challenge written for base-info's place rises in its first answer when
#: that place is not the city, which most challenges are written for too: a seaside field
#: worker's first is "어촌계 바다 청소의 날", not "주운 쓰레기도 분리해서 버리기" (the fit
#: bench's dev splits: base-info's first fits 12 → 14 of 20, the test split unchanged).
LOCAL_BONUS = 2.0
#: How many places an easy challenge rises and a hard one falls: a little on every turn, more
#: on a turn with no ask of its own (base-info: the first is one to start with).
EASE_WEIGHT = 1.0
STARTER_EASE_WEIGHT = 3.0
#: How many places a field's classic first step (the catalogue's ``starter``) rises on a
#: conversation's first ask that is no question: of challenges alike for what was said, the
#: one anyone begins with ("아파트 관리비 고지서 보고 깜짝 놀랐어": "대기전력 차단하기" before
#: "베란다 미니 태양광 달기"). 3 of 1-6 on the fit bench's dev splits (bench/README.md
#: "Eighteenth pass": 6 moved a critique after it the wrong way).
OPENING_STARTER_LIFT = 3.0
#: How many places a candidate falls per 0.01 its fit is below the best candidate's (fits
#: are cosines: between about 0.75 and 0.95 for the bundled embedder).
FIT_WEIGHT = 3.0


@dataclass(frozen=True, slots=True)
class Situation:
    """What is known of where the user lives and works: given in base-info (the scope already
    holds only challenges tagged for it) or told in words (a preference, not a filter)."""

    location: str | None = None
    work_type: str | None = None
    given: bool = False  # base-info's
    personas: frozenset[str] = frozenset()  # told in words: "as:fishing" (app/chat/told.py)

    @property
    def labels(self) -> frozenset[str]:
        """What is known, labelled as the catalogue names a narrow challenge's persona; a trade
        tied to a place tells it (one who farms lives in the country: "농사짓는 마을 어르신들이랑"
        is a village's)."""
        place = () if self.location is None else (f"at:{self.location}",)
        work = () if self.work_type is None else (f"job:{self.work_type}",)
        lived = () if place else tuple(_LIVED_BY.get(told, "") for told in self.personas)
        return frozenset({*place, *work, *self.personas, *filter(None, lived)})


#: The place a trade told in words is carried on in, where no place is told.
_LIVED_BY = {"as:farming": "at:농촌", "as:fishing": "at:바닷가", "as:forestry": "at:산"}


@dataclass(frozen=True, slots=True)
class Ranked:
    hits: tuple[Hit, ...]
    unmet: bool = False  # constraints were asked and no candidate satisfies them all


def rank(
    hits: Sequence[Hit],
    *,
    constraints: Collection[Constraint] = (),
    situation: Situation = Situation(),
    starter: bool = False,
    fit: Mapping[str, float] | None = None,
    aside: Collection[str] = (),
    wanted: Collection[str] = (),
    classics: Sequence[str] = (),
    opening: bool = False,
    done: str = "",
) -> Ranked:
    """``hits`` (retrieval's order) in the order to show them; ``starter``: the turn asks
    nothing of its own, so challenges to start with (easy ones) come first; ``fit``: by
    document id, how well it fits what was said (:meth:`app.chat.fit.FitBank.fit`);
    ``aside``: words of what the message leaves aside (:func:`app.chat.constraints.left_words`):
    a challenge whose title says one comes after every other, unless it is one of ``wanted``
    (document ids: its title also says what the message wants instead, "두부 말고 콩으로 …":
    "두부와 콩으로 단백질 채우기"); ``classics``: the turn names a
    field and nothing in it (or is base-info in the city), so the field's classic first steps
    (document ids, in their order: :func:`app.rag.corpus.classics_of`) come first;
    ``opening``: the conversation's first ask, no question, so its field's classic first steps
    rise a little (:data:`OPENING_STARTER_LIFT`); ``done``: what the user says it already does
    (:func:`app.chat.told.already_done`): a challenge whose title it says comes after every
    other ("자전거로 출퇴근한 지 1년 된 회사원인데 …" is not offered "자전거로 출퇴근하기")."""
    ease = STARTER_EASE_WEIGHT if starter else EASE_WEIGHT

    place = {id(hit): float(position) for position, hit in enumerate(hits)}
    if fit:
        best = max(fit.values())
        for hit in hits:  # a candidate the bank does not hold keeps its place
            if (cosine := fit.get(hit.document.id)) is not None:
                place[id(hit)] += FIT_WEIGHT * (best - cosine) * 100

    def score(hit: Hit) -> float:
        document = hit.document
        value = -place[id(hit)]
        traits = document.traits
        if traits is not None:
            value += ease * (1 - EFFORTS.index(traits.effort))  # easy +1, medium 0, hard -1
            if opening and traits.starter is not None:
                value += OPENING_STARTER_LIFT
            if not traits.anyone:
                if _persona_unlike(situation, document):  # told to be someone else
                    return value - UNLIKE_PENALTY
                if not _persona_known(situation, document):
                    # Written for someone the user is not known to be: no lift for the part of
                    # the situation it shares either (a building-site worker's job is not a
                    # boat).
                    return value - NARROW_PENALTY
        if starter and situation.given and _local(situation, document):
            value += LOCAL_BONUS
        if not situation.given:
            if situation.location and situation.location in document.locations:
                value += TOLD_BONUS
            if situation.work_type and situation.work_type in document.work_types:
                value += TOLD_BONUS
        return value

    # stable: ties keep retrieval's order
    ordered = _theirs_first(sorted(hits, key=score, reverse=True), situation)
    if aside:
        ordered.sort(
            key=lambda hit: (
                hit.document.id not in wanted and any(word in hit.document.title for word in aside)
            )
        )
    if classics:
        classic = {doc_id: rank for rank, doc_id in enumerate(classics)}
        ordered.sort(key=lambda hit: classic.get(hit.document.id, len(classic)))
    if done:
        ordered.sort(key=lambda hit: _title_said(hit.document.title, done))
    if not constraints:
        return Ranked(tuple(ordered))
    meeting = [hit for hit in ordered if satisfies(hit.document.traits, constraints)]
    if meeting:
        return Ranked(tuple(meeting))

    # None satisfies them all: those satisfying the most come first, then the easiest and
    # cheapest when ease or cost was asked.
    def nearness(hit: Hit) -> tuple[int, int]:
        traits = hit.document.traits
        met = sum(satisfies(traits, (c,)) for c in constraints)
        if traits is None:
            return met, -9
        steps = EFFORTS.index(traits.effort) * (Constraint.EASY in constraints)
        steps += COSTS.index(traits.cost) * (Constraint.FREE in constraints)
        return met, -steps

    return Ranked(tuple(sorted(ordered, key=nearness, reverse=True)), unmet=True)


#: What ends a title's word besides its stem: a particle, or the verb's "-하기", "-기", "-며".
_TITLE_ENDING = re.compile(r"(?:으로|로|에서|에는|에|은|는|이|가|을|를|와|과|하기|기|하며|며|고)$")


def _title_said(title: str, clause: str) -> bool:
    """Whether ``clause`` says ``title``: its first word's stem, and at least half of its
    words' stems (of two syllables or more), as "자전거로 출퇴근한 지 1년" says "자전거로
    출퇴근하기" (not "자전거 타며 줍는 바이크 플로깅")."""
    stems = [_TITLE_ENDING.sub("", word) for word in re.findall(r"[가-힣A-Za-z0-9]+", title)]
    stems = [stem for stem in stems if len(stem) >= 2]
    if not stems or stems[0] not in clause:
        return False
    return 2 * sum(stem in clause for stem in stems) >= len(stems)


def _local(situation: Situation, document: Document) -> bool:
    """Whether the challenge is written for the user's place and not for the city too, the
    user's place not being the city."""
    place = situation.location
    return bool(place) and place != CITY and CITY not in document.locations


def _persona_unlike(situation: Situation, document: Document) -> bool:
    """Whether the user told a place, or a work, that a narrow persona's challenge is not
    written for (an office worker and a shop's door: "문 열고 냉방하지 않기"); a work other than
    its own is not, where the place told is its place (a seaside shop and "바닷가 어르신께 바다
    이야기 듣고 기록하기")."""
    if situation.given:
        return False
    work, place = situation.work_type, situation.location
    if place:
        return place not in document.locations
    return bool(work) and work not in document.work_types


def _theirs_first(ordered: list[Hit], situation: Situation) -> list[Hit]:
    """``ordered`` with a challenge the user can do first, when its first is written for a
    narrow persona the user is not known to be and one the user can do lies within
    :data:`OPENS_WITHIN` places after it ("고기 줄이고 채소 위주로": no fishing boat's lunch
    first, however near its words lie)."""
    if not ordered or _theirs(situation, ordered[0].document):
        return ordered
    after = ordered[1 : 1 + OPENS_WITHIN]
    mine = next((hit for hit in after if _theirs(situation, hit.document)), None)
    if mine is None:
        return ordered
    return [mine, *(hit for hit in ordered if hit is not mine)]


def _theirs(situation: Situation, document: Document) -> bool:
    """Whether the user can do the challenge as written: anyone can, or its persona is known."""
    traits = document.traits
    return traits is None or traits.anyone or _persona_known(situation, document)


def _persona_known(situation: Situation, document: Document) -> bool:
    """Whether the user is known to be who a narrow persona's challenge is written for:
    base-info's scope holds only challenges tagged for its situation; told in words, one of
    the personas the catalogue names for it (its ``persona``: a place lived, a work, a trade,
    a pastime, a household) must be told. A job alone is not a place's persona: "현장에서
    일하는데" is no fishing boat ("조업 도시락", "as:fishing"); "영업하느라 출장이 많아" is
    "외근길 틈새 플로깅"'s ("job:영업직", "as:trip")."""
    if situation.given:
        return True
    traits = document.traits
    return traits is not None and not traits.persona.isdisjoint(situation.labels)


def across_fields(
    ranked: Ranked,
    nearest: Sequence[Hit],
    *,
    shown: Collection[str] = (),
    constraints: Collection[Constraint] = (),
    situation: Situation = Situation(),
    top: int = ACROSS_TOP,
) -> Ranked:
    """``ranked`` (one field's, its first kept first) with the challenges of other fields that
    the message's own search of every field (``nearest``, best first) puts above the field's
    next ones: a subject that spans fields ("옷 관련해서 할 수 있는 거": buying less, second
    hand, a swap party) is not answered with the one field's unrelated rest ("대중교통으로
    출퇴근하기"). Only the ``top`` nearest are looked at; one shown before, or that does not
    satisfy the constraints, or is written for a narrow persona the user is not known to be
    (:func:`_persona_known`), is not taken."""
    if not ranked.hits or ranked.unmet:
        return ranked
    place = {hit.document.id: position for position, hit in enumerate(nearest[:top])}
    own = {hit.document.id for hit in ranked.hits}
    field = ranked.hits[0].document.category
    others = [
        hit
        for hit in nearest[:top]
        if hit.document.category is not field
        and hit.document.id not in own
        and hit.document.id not in shown
        and satisfies(hit.document.traits, constraints)
        and (
            hit.document.traits is None
            or hit.document.traits.anyone
            or _persona_known(situation, hit.document)
        )
    ]
    if not others:
        return ranked
    rest = list(ranked.hits[1:])
    merged: list[Hit] = []
    while rest or others:
        mine = place.get(rest[0].document.id, top) if rest else top + 1
        if others and place[others[0].document.id] < mine:
            merged.append(others.pop(0))
        else:
            merged.append(rest.pop(0))
    return Ranked((ranked.hits[0], *merged))
