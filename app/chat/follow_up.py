"""What a free-text turn carries over from the conversation, read with its facets.

    the intent, read again with the facets   "그 중에 …" is among, "아예 다른 분야로, …" another
    and with what it wants                   "쓰레기 얘기 말고, 먹을거리를 …" goes to that field
    the constraints in force                 the message's, and a follow-up's earlier ones
    the situation                            base-info's, else what was told in words

Constraints stay in force while the user follows up (more, among, another field, an ordinary
question in the same field) and end when the user moves on (another topic, back to the first);
a new place or company replaces the old one of its kind ("집에서" after "밖에서").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.chat.constraints import (
    Constraint,
    FacetReaders,
    Facets,
    asks_for_challenges,
    asks_if_doable,
    compares_with_shown,
    cued,
    in_question_form,
    points_back,
    requests_challenges,
    says_that_one,
    sets_aside_the_one_shown,
)
from app.chat.fit import FitBank
from app.chat.intent import (
    Intent,
    IntentClassifier,
    IntentKind,
    catalogue_evidence,
    named_category,
)
from app.chat.ranking import Situation
from app.chat.sessions import SessionState
from app.chat.subjects import Subjects, names_a_field
from app.chat.told import tells_who
from app.domain.categories import Category
from app.rag.corpus import COMPANY, PLACES, Document

__all__ = [
    "DOABLE_SHOWN_MARGIN",
    "ELSEWHERE_AGREE",
    "ONLY_CONSTRAINTS_MARGIN",
    "SHOWN_MARGIN",
    "USUAL_TOGETHER",
    "Readings",
    "about_something_else",
    "about_what_was_shown",
    "asked_as_who_one_is",
    "asked_elsewhere",
    "asked_if_doable",
    "asked_in_their_field",
    "asked_of_their_field",
    "beyond_what_was_shown",
    "in_conversation",
    "in_force",
    "in_its_field",
    "reads_no_situation",
    "situation_of",
    "told_so_far",
    "turned_to",
    "what_it_wants",
    "with_facets",
]

#: How much nearer an example of a constraint than any field's a critique must lie to say
#: nothing but its constraints (:func:`in_its_field`): "음 다시 출퇴근 얘기로 가자" lies
#: 0.008 nearer "출장 가서도 …" than its nearest field's, "애들도 같이 할 수 있는 걸로
#: 부탁해" 0.021 (cosines, the bundled embedder).
ONLY_CONSTRAINTS_MARGIN = 0.015
#: How much worse than the best of the rest of the catalogue the challenges just shown may fit
#: a question read as another field, and it still be about them ("재봉틀 없어도 돼?" after
#: "헌 청바지로 파우치 만들기"; cosines of app/chat/fit.py): the switches of the intent dev
#: split that ask for no challenge lie below it, 21 of its 41 "among" turns above.
SHOWN_MARGIN = -0.03
#: What a choice among the challenges just shown may have been read as, on its words alone.
_MAY_BE_AMONG = (IntentKind.MORE, IntentKind.ASK)
#: What a follow-up that leaves something aside may have been read as, on its whole.
_MAY_GO_ELSEWHERE = (IntentKind.MORE, IntentKind.ASK, IntentKind.ANOTHER, IntentKind.AMONG)
#: How usual a place kept from before must be with a company the message says, or a company
#: kept with a place it says, to stay in force (:func:`in_force`): of either's challenges in
#: the catalogue, the larger share that are also the other's
#: (:func:`app.rag.corpus.pairings_of`; bench/README.md "Twenty-seventh pass" lists them).
USUAL_TOGETHER = 0.2
#: Follow-ups that keep the constraints in force (an ordinary question too, in the same field).
_KEEPS_CONSTRAINTS = (IntentKind.MORE, IntentKind.AMONG, IntentKind.ANOTHER, IntentKind.ASK)


def with_facets(
    intent: Intent, facets: Facets, state: SessionState, *, sets_aside: bool = False
) -> Intent:
    """The intent, read again with the facets: a choice among the challenges just shown ("그
    중에 돈 안 드는 거") is "among", and another field asked for with a critique ("아예 다른
    분야로, 사무실에서 할 수 있는 거") is "another", whatever single label the intent step gave
    it (more, an ordinary question, or "among" with no pointer there: "먹는 얘기는 이제 됐고
    전혀 다른 주제로 가보자"); a question pointing at one of those shown is about it; and a
    critique read as about what was shown that points at nothing shown asks for new ones. A
    choice among what was just shown is never refused as off-topic ("그 중에 오늘 회의부터
    써먹을 수 있는 건?"); a constraint alone does not make a message on-topic ("오늘 주식 뭐
    살까" reads as one about money). One that ``sets_aside`` the one just shown ("이거
    말고") with no word of another field asks for more of its field."""
    kind = intent.kind
    # A pointer into what was shown outweighs another field read by the whole's meaning
    # alone ("거기 있는 것들 중에 팀 전체가 같이 바꿔야 의미 있는 건 뭐야?": "바꿔야"), not
    # one said in words ("그 중에 없으면 다른 분야로").
    voted_away = kind is IntentKind.ANOTHER and not facets.another
    pointed = kind in (*_MAY_BE_AMONG, IntentKind.OFF_TOPIC) or voted_away
    if sets_aside and state.last_shown and not facets.constraints and not facets.another:
        # "이거 말고", "첫 번째 거 말고": not that one, and no word of another field ("이거
        # 말고 딴 분야"): more of its field (SPEC: "그거 말고 딴 거"), neither the field left
        # (it lay nearest "이 주제 말고") nor the one it points at again.
        return Intent(IntentKind.MORE)
    if facets.among and state.last_shown and pointed:
        return Intent(IntentKind.AMONG)
    unpointed = kind is IntentKind.AMONG and not facets.among
    if facets.another and state.turns and (kind in _MAY_BE_AMONG or unpointed):
        return Intent(IntentKind.ANOTHER)
    if facets.question and facets.at_one and state.last_shown and kind is IntentKind.ASK:
        # A question about one of them ("2번은 아이폰에서도 되나요", "그거 하면 가스비 얼마나
        # 줄어요?"): about the one it points at.
        return Intent(IntentKind.AMONG)
    if kind is IntentKind.AMONG and not _about_shown(facets):
        # Read as about what was shown, but nothing in it points there: asking for more in
        # words ("여름에 전기 아끼는 방법 또 뭐 있어?") asks for new ones, and so does a
        # critique ("회사 사람들 끌어들여서 같이 해 볼 만한 건 없을까?").
        if facets.more:
            return Intent(IntentKind.MORE)
        if facets.constraints:
            return Intent(IntentKind.ASK)
    return intent


def in_its_field(
    intent: Intent,
    facets: Facets,
    state: SessionState,
    *,
    nearer_a_constraint: bool,
    says_only_constraints: bool = False,
    leaves_aside: bool = False,
    turns_to_a_place: bool = False,
    compares: bool = False,
) -> Intent:
    """A critique read as another field by its meaning stays in the conversation's field when
    it says nothing but its constraints, or asks for more in words ("다른 거", "또"): "애들도
    같이 할 수 있는 걸로 부탁해" after plogging, "출퇴근하면서 할 수 있는 걸로 다른 거 없을까요?"
    after a phone's carbon. ``nearer_a_constraint``: it names no field and lies nearer an
    example of a constraint than any field's by :data:`ONLY_CONSTRAINTS_MARGIN`;
    ``says_only_constraints``: it asks for challenges and names no field and no subject but
    the words of its constraints ("외근 다니는 길에 틈틈이 할 수 있는 걸로" after culture
    picks had gone to plogging's "외근길 틈새 플로깅" by its meaning). One that
    says another field ("이번엔 먹는 쪽으로 가 보자. 출장지에서 …"), or leaves its topic aside
    (``leaves_aside``: "쓰레기 얘기는 이쯤 하고, 완전 딴 걸로 …"), goes there.
    ``turns_to_a_place``: it says it turns to a place or company ("회사 쪽으로는 뭐 있어?":
    :meth:`app.chat.planning.Planner._turns_to`), which keeps "another" read by its meaning
    alone in the field too. ``compares``: it asks for something easier or lighter than what was
    shown ("요리는 영 자신이 없어서… 그보다 훨씬 간단한 방법은 없을까?" after delivery
    containers had gone to vegan recipes): a critique of it, in its field."""
    in_a_field = state.turns and state.category is not None
    voted_away = intent.kind is IntentKind.ANOTHER and not facets.another
    if turns_to_a_place and in_a_field and not leaves_aside:
        if intent.kind is IntentKind.SWITCH or voted_away:
            return Intent(IntentKind.ASK)
    if (
        intent.kind is IntentKind.SWITCH
        and (nearer_a_constraint or says_only_constraints or facets.more or compares)
        and not leaves_aside
        and facets.constraints
        and not facets.another
        and state.turns
        and state.category is not None
    ):
        return Intent(IntentKind.ASK)
    return intent


#: The challenges that fit the words a message turns to best, whose categories vote beside
#: the topic examples' (as a message's nearest documents do: app/chat/intent.py).
_TURNED_TO_K = 10


def turned_to(
    words: str,
    vector: npt.NDArray[np.float32],
    facets: FacetReaders,
    intents: IntentClassifier,
    fit: FitBank | None,
) -> Intent:
    """Where a follow-up says it turns, read from those ``words`` alone
    (:func:`app.chat.constraints.toward`; ``vector`` their embedding): a place, company or
    situation ("회사 쪽으로는": said in its words, or nearer a constraint's example than any
    field's) is an ordinary ask, in its field; anything else a switch to the field whose
    topic examples and best-fitting challenges the words are nearest ("먹는 거 쪽으로",
    "스마트폰 쪽도")."""
    # The facet examples are sentences: a word alone may read as one ("온라인" as at home),
    # so a place or company is read by its words, or as nearer a constraint's example.
    read = facets.read(words, vector)
    if (
        cued(words)
        or read.location
        or read.work_type
        or facets.dense.nearest_constraint(vector) >= intents.nearest_topic(vector)
    ):
        return Intent(IntentKind.ASK)
    evidence = (
        None if fit is None else catalogue_evidence(fit.categories(vector, _TURNED_TO_K, words))
    )
    return Intent(IntentKind.SWITCH, intents.topic_category(vector, evidence))


def about_what_was_shown(
    intent: Intent,
    state: SessionState,
    *,
    nearer_shown: float | None,
    question: bool,
    asks_for_challenges: bool,
) -> Intent:
    """A question read as another field by its meaning alone is about the challenges just
    shown when it asks for no challenge and they fit it about as well as anything in the
    catalogue (``nearer_shown`` at least :data:`SHOWN_MARGIN`:
    :meth:`app.chat.fit.FitBank.nearer_shown`): "곰팡이 안 펴요?" after "유리병으로 화분
    만들기". ``nearer_shown`` None: not measured (a field named or turned to, something left
    aside, nothing shown, or no embedding)."""
    if (
        intent.kind is IntentKind.SWITCH
        and state.last_shown
        and nearer_shown is not None
        and nearer_shown >= SHOWN_MARGIN
        and question
        and not asks_for_challenges
    ):
        return Intent(IntentKind.AMONG)
    return intent


def asked_in_their_field(
    intent: Intent,
    facets: Facets,
    state: SessionState,
    *,
    unsaid: bool,
    nearer_shown: float | None,
    fitting: Sequence[Category] | None,
) -> Intent:
    """A message read as about the challenges just shown, its words choosing none of them
    ("그 중에", "그거", "방금 말한 거": the caller's to tell), that names a subject none of them
    says (``unsaid``: app/chat/subjects.py) and that another challenge of their field fits
    better than any of them by :data:`SHOWN_MARGIN` (``nearer_shown``:
    :meth:`app.chat.fit.FitBank.nearer_shown`; ``fitting``: the categories of the
    best-fitting challenges, best first): an ask in their field, answered from what fits it.
    "냉장고는 어떻게 쓰는 게 좋아?" after standby power, "단백질은 어떻게 챙겨?" after eating
    less meat had been told their answer was not held, while "냉장고는 60%만 채우기" and "두부와
    콩으로 단백질 채우기" hold it. A question naming nothing ("일주일에 이틀이면 탄소가 얼마나
    줄어요?") stays about them however the rest fits it: the fit alone moved four labelled
    questions of what was shown away from them. None: not measured, kept as read."""
    if (
        intent.kind is not IntentKind.AMONG
        or facets.among
        or not unsaid
        or nearer_shown is None
        or nearer_shown >= SHOWN_MARGIN
        or not fitting
        or fitting[0] is not state.category
    ):
        return intent
    return Intent(IntentKind.ASK)


def asked_of_their_field(
    intent: Intent,
    state: SessionState,
    *,
    question: bool,
    asks_for_challenges: bool,
    names_a_field: bool,
    fitting: Sequence[Category] | None,
) -> Intent:
    """A question read as another field by its meaning alone, after challenges were shown,
    that names no field and asks for no challenge, and that a challenge of the conversation's
    field fits best (``fitting``: the categories of the best-fitting challenges, best first):
    a question in that field. "깨진 유리병은 어떻게 주워?" after plogging had gone to
    "유리병으로 화분 만들기" (upcycling), "화상회의 할 때는 어떻게 해?" after digital carbon to
    "출장 대신 화상회의", while "깨진 유리와 위험 쓰레기 안전하게 줍기" and "화상회의 카메라는
    필요할 때만" fit them best."""
    if (
        intent.kind is not IntentKind.SWITCH
        or not state.last_shown
        or state.category is None
        or not question
        or asks_for_challenges
        or names_a_field
        or not fitting
        or fitting[0] is not state.category
    ):
        return intent
    return Intent(IntentKind.ASK)


#: How many of the challenges that fit a request best must lie in one other field for the
#: request to be for that field (:func:`asked_elsewhere`): 3 of 2-5 on the intent bench's dev
#: and stranger_dev sets (2 and 3 alike, 4 and 5 missed one; bench/README.md "Tenth pass").
ELSEWHERE_AGREE = 3


def asked_elsewhere(
    intent: Intent, state: SessionState, fitting: Sequence[Category] | None
) -> Intent:
    """A request for challenges read as an ask in the current field ("헌 옷으로 뭐 만드는
    챌린지도 있어?" in zero waste, "광고성 메일 수신거부 하는 거 추천해줘" in culture) whose
    best-fitting challenges (``fitting``, best first) all lie in one other field: a switch to
    that field. The examples' vote leans on the field the conversation is in; the catalogue
    says where such challenges are."""
    if intent.kind is not IntentKind.ASK or not fitting or len(fitting) < ELSEWHERE_AGREE:
        return intent
    best = fitting[0]
    if best is state.category or any(c is not best for c in fitting[:ELSEWHERE_AGREE]):
        return intent
    return Intent(IntentKind.SWITCH, best)


#: How much worse than the best of the rest of the catalogue the challenges just shown may fit
#: a message asking whether it can be done, and it still be about them (cosines of
#: app/chat/fit.py): such questions of what was shown lay at -0.016 to -0.053 ("바느질 못해도
#: 할 수 있어?" after a jeans pouch), those naming their own subject at -0.064 to -0.136
#: ("음식물 쓰레기를 변기에 버려도 돼?" after a tumbler), bench/README.md "Twelfth pass".
DOABLE_SHOWN_MARGIN = -0.06


def asked_if_doable(
    intent: Intent,
    facets: Facets,
    state: SessionState,
    *,
    doable: bool,
    nearer_shown: float | None = None,
) -> tuple[Intent, Facets]:
    """A message asking whether it can be done (``doable``: "초등학교 저학년도 할 수
    있을까요?", "10키로 거리면 할만해?", "바느질 못해도 할 수 있어?"; app/chat/constraints.py
    ``asks_if_doable``) after challenges were shown, choosing none among them by a critique and
    asking for no more or another field: a question of them, answered from their text (or said
    plainly not to be), unless the rest of the catalogue fits it much better than they do
    (``nearer_shown`` below :data:`DOABLE_SHOWN_MARGIN`: "플라스틱 뚜껑은 안 떼고 버려도
    괜찮아?" asks of its own subject; None: not measured, a field named or no embedding, and
    then a switch stays one). Its words of ease, place or company
    ("할만해", "가족들이랑") are what it asks of them, not a critique: read as one, it had
    brought new challenges ("쉽게 할 수 있는 것을 찾으셔서 '지하철역에서 회사까지 공유
    자전거로'" after cycling to work)."""
    # Read as another field by its meaning alone ("회식 자리에서도 할 수 있을까?" after eating
    # less meat: zero waste's "회식 뒤 남은 음식 포장해 오기"), only where they were measured to fit.
    switch = intent.kind is IntentKind.SWITCH and nearer_shown is not None
    if (
        not doable
        or not state.last_shown
        or not (switch or intent.kind in (*_MAY_BE_AMONG, IntentKind.AMONG))
        or facets.among
        or facets.another
        or facets.more
        or (nearer_shown is not None and nearer_shown < DOABLE_SHOWN_MARGIN)
    ):
        return intent, facets
    return Intent(IntentKind.AMONG), replace(facets, question=True, constraints=frozenset())


def beyond_what_was_shown(
    intent: Intent, state: SessionState, *, unsaid: bool, best_fit: Category | None
) -> Intent:
    """A choice among what was shown, read by meaning alone (no pointer in its words), that is
    about something else (``unsaid``: it requests challenges about a subject, "에어컨 관련된
    것도 있어?", or asks of one none of them says, "화질 낮추면 탄소가 줄어?" after
    air-conditioning tips; app/chat/subjects.py) is its own ask, in the field ``best_fit``
    (the current one: an ask; None: unknown, kept as read)."""
    if intent.kind is not IntentKind.AMONG or not unsaid or best_fit is None:
        return intent
    if best_fit is state.category:
        return Intent(IntentKind.ASK)
    return Intent(IntentKind.SWITCH, best_fit)


async def about_something_else(
    message: str,
    state: SessionState,
    subjects: Subjects,
    shown: Callable[[], Awaitable[Sequence[Document]]],
    fitting: Callable[[], Sequence[Category] | None],
) -> tuple[bool, Category | None]:
    """Whether ``message``, pointing at none of the challenges just shown ("두 번째 거", "그
    다큐"), is about something else (:func:`beyond_what_was_shown`): it asks for challenges
    about a subject ("에어컨 관련된 것도 있어?"), or asks of a subject none of them says, nor
    any other challenge of their field ("화질 낮추면 탄소가 줄어?" after air-conditioning tips;
    "장갑은 목장갑이면 되나요" after plogging is theirs). And the field it is then about: theirs
    when a request's subject is in its keywords, otherwise, of the fields whose keywords say it,
    the one whose challenge fits the message best. ``shown``: the documents just shown (read
    only for a question); ``fitting``: the categories of the challenges that fit the message
    best, best first (None: not known, without its embedding)."""
    if not state.last_shown or says_that_one(message):
        return False, None
    about = subjects.named_in(message)
    if not about:
        return False, None
    asks = requests_challenges(message)
    if not asks:
        documents = await shown()
        if not documents:
            return False, None
        about = subjects.unsaid(message, documents, state.category)
        if not about:
            return False, None
    fields = subjects.fields_of(about)
    if asks and state.category in fields:
        return True, state.category
    ranked = fitting()
    if ranked is None:
        return True, next(iter(fields)) if len(fields) == 1 else None
    return True, next((c for c in ranked if c in fields), ranked[0] if ranked else None)


def _about_shown(facets: Facets) -> bool:
    """Whether the message points at what was shown or asks something of it."""
    return facets.among or facets.about_shown or facets.question


def what_it_wants(
    intent: Intent,
    wanted: Intent | None,
    state: SessionState,
    *,
    best_fit: Category | None = None,
) -> Intent:
    """The intent of a follow-up that leaves something aside ("쓰레기 얘기 말고, 산에 들고 가는
    먹을거리를 고기 없는 걸로", "디지털 얘긴 됐고, 이번엔 먹는 거 쪽으로"): read whole, what it
    leaves drowns the rest, and it reads as more of the current field; ``wanted`` is the
    reading of the words after what it leaves (:func:`app.chat.constraints.leaving_aside`;
    None when it leaves nothing aside), which names the field it goes to. ``best_fit``: the
    category of the challenge those words fit best, when known; another field counts only
    where it agrees (the examples alone hear "새참 얘기로 가자" as 문화 공유: "얘기").
    ``wanted`` is also where a message says it turns ("식단 쪽으로도 동료들이랑 …", read as
    more of the field whole: :func:`turned_to`)."""
    if wanted is None or not state.turns or intent.kind not in _MAY_GO_ELSEWHERE:
        return intent
    if wanted.kind is not IntentKind.SWITCH or wanted.category is state.category:
        return intent
    if best_fit is not None and wanted.category is not best_fit:
        return intent
    return wanted


def in_force(
    intent: Intent,
    facets: Facets,
    state: SessionState,
    *,
    afresh: bool = False,
    pairings: Mapping[tuple[str, str], float] | None = None,
) -> frozenset[Constraint]:
    """The constraints for this turn: the message's own, and, for a follow-up, those in force
    before (a new place or company replacing the old one of its kind; none it leaves aside;
    none at all when it starts ``afresh``: "전기 아끼는 건 대충 알겠어요 근데 …"). With the
    catalogue's ``pairings`` (:func:`app.rag.corpus.pairings_of`), a place or company kept
    from before that is rarely met with the other kind the message says (below
    :data:`USUAL_TOGETHER`) is dropped too: "회사 사람들 끌어들여서 같이" after plogging on the
    way to the subway asks for coworkers, not coworkers on the move."""
    mine = set(facets.constraints)
    if intent.kind is IntentKind.BACK_TO_BASE and (began := state.began) is not None:
        # "처음 얘기로 돌아가자": back to the first ask as it was asked ("아이랑", "혼자서").
        return frozenset(mine | set(_known(began.constraints)))
    if intent.kind not in _KEEPS_CONSTRAINTS or not state.turns or afresh:
        return frozenset(mine)
    kept = set()
    for constraint in _known(state.constraints):
        if constraint in facets.left_aside:  # "가게 일 말고, …": no longer at work
            continue
        for kind in (PLACES, COMPANY):
            if constraint.value in kind and any(c.value in kind for c in mine):
                break
        else:
            if pairings is None or _usual_with(constraint, mine, pairings):
                kept.add(constraint)
    return frozenset(kept | mine)


def _usual_with(
    kept: Constraint, mine: set[Constraint], pairings: Mapping[tuple[str, str], float]
) -> bool:
    """Whether ``kept`` (a constraint in force before) is usual with each place or company of
    the other kind in ``mine`` (:data:`USUAL_TOGETHER`); ease and cost go with anything."""
    for kind, other in ((PLACES, COMPANY), (COMPANY, PLACES)):
        if kept.value in kind:
            return all(
                pairings.get((kept.value, c.value), 0.0) >= USUAL_TOGETHER
                for c in mine
                if c.value in other
            )
    return True


def _known(values: tuple[str, ...]) -> Iterator[Constraint]:
    """The stored constraint values this release knows (another release's are skipped)."""
    for value in values:
        try:
            yield Constraint(value)
        except ValueError:
            continue


def told_so_far(
    facets: Facets, state: SessionState, personas: Collection[str] = ()
) -> tuple[str, ...]:
    """The situation told in words so far: this message's place and work replace what was told
    before; the ``personas`` it tells ("as:pet": app/chat/told.py ``personas_told``) join
    those told before (one may keep a dog and farm)."""
    told = {label.partition(":")[0]: label for label in state.told if not _a_persona(label)}
    if facets.location:
        told["at"] = f"at:{facets.location}"
    if facets.work_type:
        told["job"] = f"job:{facets.work_type}"
    return tuple(sorted({*told.values(), *filter(_a_persona, state.told), *personas}))


def _a_persona(label: str) -> bool:
    return label.startswith("as:")


def situation_of(state: SessionState, told: tuple[str, ...]) -> Situation:
    """What is known of the user's situation: base-info's, else what was told in words."""
    if state.location and state.work_type:
        return Situation(state.location, state.work_type, given=True)
    said = dict(label.split(":", 1) for label in told if not _a_persona(label))
    return Situation(said.get("at"), said.get("job"), personas=frozenset(filter(_a_persona, told)))


class Readings(Protocol):
    """What reading a turn in its conversation measures, each asked only where it can matter:
    the gateway's on its banks and store (app/chat/planning.py), the intent bench's on its own
    (bench/intent_eval.py), so that both read a turn in the one order of
    :func:`in_conversation`."""

    async def turns_to(self) -> Intent | None:
        """Where the message says it turns in its own words (:func:`turned_to`)."""
        ...

    def nearer_a_constraint(self) -> bool:
        """Whether it lies nearer a constraint's example than any field's, by
        :data:`ONLY_CONSTRAINTS_MARGIN` (asked for a switch read by meaning only)."""
        ...

    def says_only_constraints(self) -> bool:
        """Whether it names no field, in name or matter, and no subject but the words of its
        constraints (app/chat/subjects.py ``beyond_constraints``; asked for a switch read by
        meaning only)."""
        ...

    def shown_fit(self) -> float | None:
        """:meth:`app.chat.fit.FitBank.nearer_shown` for a message naming no field (asked of
        a switch, and of one asking whether it can be done); None without its embedding or
        nothing shown."""
        ...

    def wanted(self) -> tuple[Intent | None, Category | None]:
        """What a message that leaves something aside wants, read alone, and the field whose
        challenge fits those words best (asked only of such a message)."""
        ...

    async def beyond_shown(self) -> tuple[bool, Category | None]:
        """Whether a choice among what was shown is about something else, and its field
        (:func:`about_something_else`)."""
        ...

    def fitting(self) -> Sequence[Category] | None:
        """The categories of the challenges that fit the message best, best first (None:
        without its embedding)."""
        ...

    async def unsaid_by_shown(self) -> bool:
        """Whether the message names a subject none of the challenges just shown says
        (app/chat/subjects.py ``unsaid``; asked only of a choice among them)."""
        ...

    async def said_by_shown(self) -> bool:
        """Whether the message names a subject one of the challenges just shown says
        (app/chat/subjects.py ``said_by``; asked only of a question read as no choice among
        them)."""
        ...

    async def meets_nearest_in_field(self, constraints: frozenset[Constraint]) -> bool:
        """Whether, searched with the conversation's topic and the message, the challenge
        nearest it that meets ``constraints`` (fitting the situation, not shown yet) is of the
        conversation's field (asked only of a critique read as a switch by its matter alone:
        :func:`switched_by_matter`)."""
        ...


async def in_conversation(
    message: str,
    intent: Intent,
    facets: Facets,
    state: SessionState,
    readings: Readings,
    *,
    leaves_aside: bool,
) -> tuple[Intent, Facets]:
    """The intent read again with the facets and the conversation: a pointer, another field in
    words, a critique kept in its field, where the message says it turns, a question about what
    was just shown (then answered from their text) or about their field
    (:func:`asked_of_their_field`), what a message that leaves something aside
    (``leaves_aside``) wants, a choice among that is about something else, or that another
    challenge of their field holds (:func:`asked_in_their_field`), and a request whose
    best-fitting challenges lie in another field (:func:`asked_elsewhere`), and a first ask
    refused that says who asks (:func:`asked_as_who_one_is`); and the facets, a question of
    what was shown said to be one."""
    intent = with_facets(intent, facets, state, sets_aside=sets_aside_the_one_shown(message))
    # Where it says it turns ("이번엔 먹는 거 쪽으로", "회사 쪽으로는 뭐 있어?").
    turns_to = await readings.turns_to()
    intent = in_its_field(
        intent,
        facets,
        state,
        nearer_a_constraint=intent.kind is IntentKind.SWITCH and readings.nearer_a_constraint(),
        says_only_constraints=intent.kind is IntentKind.SWITCH
        and asks_for_challenges(message)
        and readings.says_only_constraints(),
        leaves_aside=leaves_aside,
        turns_to_a_place=turns_to is not None and turns_to.kind is IntentKind.ASK,
        compares=compares_with_shown(message),
    )
    if turns_to is not None and turns_to.kind is IntentKind.SWITCH:
        intent = what_it_wants(intent, turns_to, state)
    elif not leaves_aside:
        # "재봉틀 없어도 돼?" after a sewing challenge: about it, not another field.
        question, asks = in_question_form(message), asks_for_challenges(message)
        intent = about_what_was_shown(
            intent,
            state,
            nearer_shown=readings.shown_fit() if intent.kind is IntentKind.SWITCH else None,
            question=question,
            asks_for_challenges=asks,
        )
        if intent.kind is IntentKind.SWITCH:
            # "깨진 유리병은 어떻게 주워?" after plogging: its field's challenge fits it best.
            intent = asked_of_their_field(
                intent,
                state,
                question=question,
                asks_for_challenges=asks,
                names_a_field=named_category(message) is not None,
                fitting=readings.fitting(),
            )
    else:
        wanted, best_fit = readings.wanted()
        intent = what_it_wants(intent, wanted, state, best_fit=best_fit)
    if (
        intent.kind is IntentKind.AMONG
        and not (facets.among or facets.about_shown)
        and reads_no_situation(facets)
    ):
        # "화질 낮추면 탄소가 줄어?" after air-conditioning tips: not about them.
        unsaid, field = await readings.beyond_shown()
        intent = beyond_what_was_shown(intent, state, unsaid=unsaid, best_fit=field)
        if intent.kind is not IntentKind.AMONG and requests_challenges(message):
            # "에어컨 관련된 것도 있어?" asks for challenges, not a question of them.
            facets = replace(facets, question=False)
    if (
        intent.kind is IntentKind.AMONG
        and not facets.among
        and not (says_that_one(message) or points_back(message))
        and (nearer := readings.shown_fit()) is not None
        and nearer < SHOWN_MARGIN
    ):
        # "냉장고는 어떻게 쓰는 게 좋아?" after standby power: another of their field holds it
        # (what the shown say is read only where the rest of the catalogue fits better).
        intent = asked_in_their_field(
            intent,
            facets,
            state,
            unsaid=await readings.unsaid_by_shown(),
            nearer_shown=nearer,
            fitting=readings.fitting(),
        )
    if (
        intent.kind is IntentKind.ASK
        and state.turns
        and not (facets.among or facets.constraints)
        and requests_challenges(message)
    ):
        # "헌 옷으로 뭐 만드는 챌린지도 있어?" in zero waste: challenges of another field.
        intent = asked_elsewhere(intent, state, readings.fitting())
    if (
        intent.kind is IntentKind.MORE
        and state.last_shown
        and not (facets.among or facets.more or facets.another or facets.constraints)
        and in_question_form(message)
        and not (asks_for_challenges(message) or requests_challenges(message))
        and await readings.said_by_shown()
    ):
        # "망주머니는 다이소에서 팔아요?" after "채소는 속비닐 대신 망주머니에": a question of
        # what it names of them, read as more by its meaning, answered from their text. (Read
        # as an ordinary question, "데이터센터가 전기를 그렇게 많이 써요?" asks of its subject
        # beyond them; read as off the topic, "스타벅스 텀블러 신상 언제 나와?" stays so.)
        intent = Intent(IntentKind.AMONG)
    if (
        intent.kind is IntentKind.AMONG
        and not (facets.question or facets.among or facets.constraints)
        and in_question_form(message)
    ):
        # A question of what was shown that chooses nothing ("재봉틀 없어도 돼?", "비 와도
        # 돼?"), whatever the question reader's vote: answered from their text, or said plainly
        # that it does not say, not met with "the nearest of them".
        facets = replace(facets, question=True)
    # "바느질 못해도 할 수 있어?": whether what was shown can be done.
    doable = asks_if_doable(message)
    nearer = readings.shown_fit() if doable else None
    intent, facets = asked_if_doable(intent, facets, state, doable=doable, nearer_shown=nearer)
    if switched_by_matter(
        message, intent, facets, state, leaves_aside=leaves_aside
    ) and await readings.meets_nearest_in_field(in_force(Intent(IntentKind.ASK), facets, state)):
        # "지하철 타고 출퇴근하는 한 시간 동안" after a study of the climate: its field's own
        # podcast lies nearer than the subway itself.
        intent = Intent(IntentKind.ASK)
    return asked_as_who_one_is(message, intent, state), facets


def switched_by_matter(
    message: str, intent: Intent, facets: Facets, state: SessionState, *, leaves_aside: bool
) -> bool:
    """Whether a critique reads as a switch by its matter alone: it names no field, in name or
    in words, and leaves nothing aside. It stays in its field where the field meets it nearest
    (:meth:`Readings.meets_nearest_in_field`): "동호회는 … 나 혼자서, 평일 출근길이나 외근 다닐
    때" after a hiking club's plogging had moved to commuting."""
    return bool(
        intent.kind is IntentKind.SWITCH
        and facets.constraints
        and state.turns
        and state.category is not None
        and intent.category is not state.category
        and not leaves_aside
        and named_category(message) is None
        and not names_a_field(message)
    )


def asked_as_who_one_is(message: str, intent: Intent, state: SessionState) -> Intent:
    """A conversation's first ask refused as off the topic that says who the user is, as a
    person, and asks for something ("대학생 추천좀": :func:`tells_who`) asks for anything,
    not for something off the topic ("맛집 추천좀", "주식 추천좀" stay refused)."""
    if intent.kind is not IntentKind.OFF_TOPIC or state.turns:
        return intent
    if tells_who(message) and asks_for_challenges(message):
        return Intent(IntentKind.ASK)
    return intent


def reads_no_situation(facets: Facets) -> bool:
    """Whether the turn says no constraint, place or work: its words that name one ("집에서",
    "동료들이랑", "현장") are the facets', not a subject (app/chat/subjects.py)."""
    return not (facets.constraints or facets.location or facets.work_type)
