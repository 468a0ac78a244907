"""What a message says beyond its intent: critiques, the situation told in words, a question.

    message -> the turn's one embedding -> its nearest labelled examples
            (``app/chat/data/facet_examples.jsonl``) -> the labels most of them carry
            -> :class:`Facets`

A critique or constraint ("더 쉬운 거", "돈 안 드는 거", "집에서 할 수 있는 걸로", "혼자서",
"아이랑", "출장 다닐 때") is a :class:`Constraint` on the catalogue's traits
(app/rag/corpus.py ``Traits``); the situation told in words ("바닷가 사는데", "현장에서 일해요")
is a location or work type, as base-info would give; a question ("어떻게 세척해?", "정말 도움이
돼?") asks for something the catalogue may hold, not only for challenges; "among" marks a
choice among the challenges just shown ("그 중에 …", "거기서 …"), which the intent step's
single label may miss when a constraint comes with it. One message may say several ("그 중에
돈 안 드는 거, 집에서 할 수 있는"). Each example carries the labels it says
(none for a plain ask), and a label is read when the neighbours that carry it outweigh those
that do not: by meaning, not by a list of words.

A message told in clauses ("바닷가 마을에 사는데 아이랑 주말에 할 만한 거") splits the vote
between its facets, and the whole reads neither: each clause (:func:`clauses`, cut after a
connective of background or reason, "-는데", "-어서", "-니까", "-지만", or a comma) is read
too, for the situation, the place and company, and a question it tells.

The session keeps a turn's constraints until the user moves on (app/chat/planning.py).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from app.domain.categories import (
    LOCATIONS,
    WORK_TYPES,
    Category,
    parse_category,
)
from app.rag.corpus import COMPANY, PLACES, Traits

__all__ = [
    "CLAUSES_READ",
    "MINDING",
    "PLAIN",
    "Constraint",
    "FacetExample",
    "FacetReader",
    "FacetReaders",
    "Facets",
    "asks_a_fact",
    "asks_for_challenges",
    "asks_if_doable",
    "asks_to_see_again",
    "clauses",
    "compares_with_shown",
    "cue_spans",
    "cued",
    "field_blanked",
    "in_question_form",
    "leaving_aside",
    "left_aside",
    "left_words",
    "moves_on",
    "off_work",
    "ordinal",
    "ordinal_blanked",
    "points_among",
    "points_at_one",
    "points_back",
    "requests_challenges",
    "satisfies",
    "says_that_one",
    "sets_aside_the_one_shown",
    "takes_a_pet",
    "tells_others_doing",
    "toward",
    "wanting",
    "without_field",
]


class Constraint(enum.Enum):
    """A critique: what every challenge of the answer must be. Values are the trait values."""

    EASY = "easy"
    FREE = "free"
    HOME = "home"
    WORK = "work"
    OUTSIDE = "outside"
    MOVING = "moving"
    ALONE = "alone"
    FAMILY = "family"
    COWORKERS = "coworkers"
    NEIGHBOURS = "neighbours"

    @property
    def phrase(self) -> str:
        """The constraint as the recommend says it, before a noun ("쉽게 할 수 있는 챌린지")."""
        return _PHRASES[self][0]

    @property
    def suggestion(self) -> str:
        """A follow-up a user can tap to ask for it (understood as this constraint)."""
        return _PHRASES[self][1]


_PHRASES = {
    Constraint.EASY: ("쉽게 할 수 있는", "더 쉬운 거"),
    Constraint.FREE: ("돈이 들지 않는", "돈 안 드는 거"),
    Constraint.HOME: ("집에서 할 수 있는", "집에서 할 수 있는 거"),
    Constraint.WORK: ("회사에서 할 수 있는", "회사에서 할 수 있는 거"),
    Constraint.OUTSIDE: ("밖에서 하는", "밖에서 하는 거"),
    Constraint.MOVING: ("이동하면서 할 수 있는", "출장 다닐 때 할 수 있는 거"),
    Constraint.ALONE: ("혼자서 할 수 있는", "혼자서 할 수 있는 거"),
    Constraint.FAMILY: ("가족과 함께 할 수 있는", "아이랑 같이 할 수 있는 거"),
    Constraint.COWORKERS: ("동료들과 함께 할 수 있는", "동료들이랑 할 수 있는 거"),
    Constraint.NEIGHBOURS: ("이웃과 함께 할 수 있는", "이웃이랑 할 수 있는 거"),
}


def satisfies(traits: Traits | None, constraints: Iterable[Constraint]) -> bool:
    """Whether a challenge with ``traits`` is everything ``constraints`` ask (a challenge
    without traits satisfies none)."""
    for constraint in constraints:
        if traits is None:
            return False
        value = constraint.value
        if constraint is Constraint.EASY:
            ok = traits.effort == value
        elif constraint is Constraint.FREE:
            ok = traits.cost == value
        else:
            ok = value in traits.places or value in traits.company
        if not ok:
            return False
    return True


#: The labels an example may carry: each constraint, each location and work type told,
#: "question", "among" (it chooses among the challenges just shown: "그 중에 …") and
#: "another" (it asks for another field: "아예 다른 분야로, …").
QUESTION = "question"
AMONG = "among"
ANOTHER = "another"
ABOUT_SHOWN = "about_shown"  # read by its words alone (:data:`_ABOUT_SHOWN`), not a label
AT_ONE = "at_one"  # read by its words alone (:data:`_POINTS_AT_ONE`), not a label
MORE = "more"  # read by its words alone (:data:`_MORE`), not a label
PLAIN = "plain"  # asks for a field and nothing in it ("비건 챌린지 추천해줘")
_SITUATION = tuple(f"at:{p}" for p in sorted(LOCATIONS)) + tuple(
    f"job:{w}" for w in sorted(WORK_TYPES)
)
_POINTERS = frozenset({AMONG, ANOTHER})
LABELS: tuple[str, ...] = (
    *(c.value for c in Constraint),
    *_SITUATION,
    QUESTION,
    AMONG,
    ANOTHER,
    PLAIN,
)


@dataclass(frozen=True, slots=True)
class FacetExample:
    text: str
    labels: frozenset[str]


@dataclass(frozen=True, slots=True)
class Facets:
    """What one message says besides its intent."""

    constraints: frozenset[Constraint] = frozenset()
    location: str | None = None  # told in words ("바닷가 사는데")
    work_type: str | None = None  # told in words ("현장에서 일하는데")
    question: bool = False  # asks for something to know, not only for challenges
    among: bool = False  # chooses among the challenges just shown ("그 중에 돈 안 드는 거")
    # Points at a challenge shown, or asks how, how long or how much of one ("이거", "두 번째
    # 거", "얼마나 걸려요?"): a message the examples read as about what was shown may be.
    about_shown: bool = False
    # Points at one challenge shown: a demonstrative or an ordinal ("그거", "2번은", "두 번째 거").
    at_one: bool = False
    another: bool = False  # asks for another field ("아예 다른 분야로, 집에서 할 수 있는 거")
    # Asks for more by its words ("또 뭐 있어?", "몇 개 더", "다른 것도"), when nothing in it
    # points at what was shown: a message the examples read as about what was shown may be.
    more: bool = False
    # Where and with whom it leaves aside ("가게 일 말고, 동네 분들이랑"): not kept from before.
    left_aside: frozenset[Constraint] = frozenset()
    # Asks for a field and nothing in it ("비건 챌린지 추천해줘", "에너지 절약 뭐부터 해?").
    plain: bool = False


NO_FACETS = Facets()

#: What a place or a company says: where and with whom.
_WHERE_AND_WITH_WHOM = frozenset(
    c for c in Constraint if c not in (Constraint.EASY, Constraint.FREE)
)


def wanting(whole: Facets, wanted: Facets) -> Facets:
    """The facets of a message that leaves something aside ("현장 말고 집에서", "사무실 안에서
    말고 바깥에서", "집은 그렇고, 출퇴근길에"): where and with whom come from what it wants
    (``wanted``: the words after what it leaves, :func:`leaving_aside`), not from what it
    leaves, which is not kept from earlier turns either (``left_aside``: what the whole read
    there and the rest did not); another field from either; ease, cost and the rest from the
    whole."""
    kept = whole.constraints - _WHERE_AND_WITH_WHOM
    asked = wanted.constraints & _WHERE_AND_WITH_WHOM
    left = (whole.constraints & _WHERE_AND_WITH_WHOM) - asked
    # "먹는 얘기는 이제 됐고 전혀 다른 주제로 가보자": another field, which the part left
    # aside drowned in the whole.
    another = whole.another or wanted.another
    return replace(whole, constraints=kept | asked, left_aside=left, another=another)


class FacetReader:
    """Nearest labelled examples; a label is read when its share of the neighbours' vote
    (weights ``exp((cos - best) / temperature)``, as the intent step votes) is over half, and
    nothing when no example is as near as ``floor`` (a message unlike every example, "오늘
    주식 어때?", is not voted on by examples that are merely the least far)."""

    def __init__(
        self,
        examples: Sequence[FacetExample],
        vectors: npt.NDArray[np.float32],
        *,
        k: int = 7,
        temperature: float = 0.02,
        floor: float = -1.0,
    ) -> None:
        if len(examples) != len(vectors) or not examples:
            raise ValueError("one vector per example, and at least one example")
        self._columns = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).T)
        # One row per example, one column per label: 1 where the example carries it.
        self._carries = np.array(
            [[label in e.labels for label in LABELS] for e in examples], dtype=np.float64
        )
        constraint = [LABELS.index(c.value) for c in Constraint]
        self._constraint_examples = np.flatnonzero(self._carries[:, constraint].any(axis=1))
        told = constraint + [LABELS.index(label) for label in _SITUATION]
        self._told_examples = np.flatnonzero(self._carries[:, told].any(axis=1))
        self._k = k
        self._temperature = temperature
        self._floor = floor  # a message no example is this near says nothing

    def shares(self, vector: npt.NDArray[np.float32]) -> dict[str, float]:
        """Each label's share of the neighbours' vote."""
        nonzero = np.flatnonzero(vector)
        if len(nonzero) * 8 < len(vector):  # a lexical vector: read only its few buckets
            sims = vector[nonzero] @ self._columns[nonzero]
        else:
            sims = vector @ self._columns
        k = min(self._k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        if sims[top].max() < self._floor:
            return dict.fromkeys(LABELS, 0.0)
        weights = np.exp((sims[top] - sims[top].max()) / self._temperature)
        shares = weights @ self._carries[top] / weights.sum()
        return {label: float(share) for label, share in zip(LABELS, shares, strict=True)}

    def nearest_constraint(self, vector: npt.NDArray[np.float32]) -> float:
        """The cosine of the example nearest ``vector`` among those that carry a constraint
        (an embedding: every example is read)."""
        sims = vector @ self._columns[:, self._constraint_examples]
        return float(sims.max()) if sims.size else -1.0

    def nearest_told(self, vector: npt.NDArray[np.float32]) -> float:
        """The cosine of the example nearest ``vector`` among those that tell where or with
        whom: a constraint, a location or a work type."""
        sims = vector @ self._columns[:, self._told_examples]
        return float(sims.max()) if sims.size else -1.0

    def said(self, vector: npt.NDArray[np.float32]) -> set[str]:
        """The labels over half the neighbours' vote carry."""
        return over_half(self.shares(vector))

    def read(self, vector: npt.NDArray[np.float32]) -> Facets:
        return facets_of(self.said(vector))


def over_half(shares: dict[str, float]) -> set[str]:
    """The labels a vote's ``shares`` (:meth:`FacetReader.shares`) give over half."""
    return {label for label, share in shares.items() if share > 0.5}


def facets_of(said: set[str]) -> Facets:
    """The facets the labels ``said`` name."""
    return Facets(
        constraints=frozenset(c for c in Constraint if c.value in said),
        location=_one(said, "at:"),
        work_type=_one(said, "job:"),
        question=QUESTION in said,
        among=AMONG in said,
        about_shown=ABOUT_SHOWN in said,
        at_one=AT_ONE in said,
        more=MORE in said,
        another=ANOTHER in said,
        plain=PLAIN in said,
    )


def _one(said: set[str], prefix: str) -> str | None:
    found = [label.removeprefix(prefix) for label in said if label.startswith(prefix)]
    return found[0] if len(found) == 1 else None


#: "Among" is a pointer at the answer just shown, and pointers are a closed set of words:
#: a demonstrative or a reference to what was said, then 중 or 가운데 ("그 중에", "그중",
#: "이 가운데", "셋 중에", "방금 보여 준 것 중에", "아까 추천한 거 중에서"), or 거기서
#: beginning the message. Neither vote reads them reliably: an embedding drowns them under the
#: critique beside them, and bigrams miss "그중에" against "그 중에" (bench/README.md "Facets").
#: Nothing may follow 중 but a particle ("그 중요한", "이중 포장" are not pointers).
_AMONG_END = r"(?:중(?:에서|에선|에는|에|엔)?|가운데(?:서|에서)?)(?![가-힣])"
_AMONG = re.compile(
    r"(?:^|[\s,.!?])(?:(?:"
    r"그|저|이(?=\s|중에|가운데)"
    r"|(?:그|이|저)\s*(?:것들|거들|것|거|셋|둘|넷|세\s*개|두\s*개|세\s*가지|두\s*가지)"
    r"|셋|둘|넷|세\s*개|두\s*개|세\s*가지|두\s*가지"
    r"|(?:위|위에|방금|아까|앞서|앞에서|앞에|거기|저기|보여\s*주신|보여\s*준|추천해\s*주신|추천해\s*준"
    r"|추천한|말해\s*주신|말해\s*준|말한|알려\s*주신|알려\s*준|골라\s*준|나온)"
    r"[^.?!]{0,10}?(?:것들|거들|것|거|애들|챌린지들|챌린지)"
    r")\s*" + _AMONG_END + r")"
    # "거기서" begins the message to point at the list; after a place it names, it is that
    # place ("근처 산에 자주 올라가는데 거기서 할 수 있는 건요?").
    r"|^\s*(?:(?:그럼|그러면|근데|음+|아+|오+)[\s,.!~]*)?(?:거기|저기)\s*서"
)


#: A numbered one of the list shown ("2번은 아이폰에서도 되나요", "1번 거", "3번째"): a digit
#: 1-4 and 번, then a particle or 째 ("주 2번 하면" counts times, not a place).
_NUMBERED = (
    r"(?:^|[\s,])(?<!주 )(?<!루 )(?<!일에 )(?<!달에 )(?P<number>[1-4])\s*번\s*"
    r"(?:째|(?:거|것|꺼|챌린지)\s*(?:은|는|이|가|도|을|를|요)?|이요|은|는|이|가|도|을|를|요"
    r"|(?=[.?!]*$))"
    r"(?=[\s,.?!]|$)"
)


#: A message about one challenge already shown points at it: a demonstrative ("이거", "그건",
#: "저것"), an ordinal ("두 번째 거", "마지막 꺼", "맨 처음 방법"), a reference to what was
#: said ("위에", "방금", "아까"); or it asks how, why, how long or how much ("하나 만드는데
#: 시간 얼마나 걸려요?"). Without any of these, a critique that the examples' vote reads as
#: about what was shown ("회사 사람들이랑 같이 할 만한 건 없을까?") asks for new ones.
_AT_ONE = (
    r"(?:^|[\s,.!?])(?:이|그|저)(?:거|것|건|걸|게|꺼)"
    r"|(?:첫|두|세|네)\s*(?:번째|째)|(?:마지막|맨\s*(?:처음|앞|뒤|끝|마지막))\s*"
    r"(?:거|것|꺼|걸|방법|챌린지)"
    r"|" + _NUMBERED
)
_POINTS_AT_ONE = re.compile(_AT_ONE)
#: "그 다큐", "저 챌린지", "이 방법": a demonstrative before a noun points at what was shown.
_DEMONSTRATIVE = re.compile(r"(?:^|[\s,.!?])(?:이|그|저)\s+[가-힣]")
_NUMBERED_ONE = re.compile(_NUMBERED)
#: Asking how, why, how much, when or where: the words that make a message ask something of a
#: challenge, whatever else it asks for. Not their indefinite forms ("언제든", "어디서나",
#: "어떻게든": any time, anywhere, somehow), nor "어디 놀러 갈 때" (somewhere).
_HOW_WHY = (
    r"어떻게(?!든)|어떡|왜|얼마(?!든)|언제(?!든|나)"
    r"|어디(?!\s*놀러|든|서든|에서든|서나|에서나|나|에나)"
)
_ABOUT_SHOWN = re.compile(
    _AT_ONE + r"|위에|방금|아까|" + _HOW_WHY + r"|몇(?!\s*(?:개|가지))|무슨|어느"
)


#: Comparing with what was shown ("그보다 훨씬 간단한 방법", "저것보다 덜 번거로운 건", "좀 더
#: 쉬운 걸로"): a critique of it, in its field.
_COMPARES = re.compile(
    r"(?:그|이|저)(?:것|거)?보다"
    r"|(?:더|훨씬)\s*(?:쉬운|쉽|간단|싼|저렴|편한|편하|가벼운|적게|짧|빠른|빨리|덜|부담)"
)


def compares_with_shown(message: str) -> bool:
    """Whether ``message`` asks for something easier, cheaper or lighter than what was shown."""
    return _COMPARES.search(message) is not None


#: Pointing back at what was said ("방금 말한 거", "아까 추천해 준 것들"): about what was shown.
_POINTS_BACK = re.compile(r"위에|방금|아까|말한|말씀하신|추천한|추천해\s*준|보여\s*준|알려\s*준")


def points_back(message: str) -> bool:
    """Whether ``message`` points back at what the bot said ("방금 말한 거 노트북에서도
    적용돼?")."""
    return _POINTS_BACK.search(message) is not None


#: The first answer's challenges asked for again ("처음 거로 다시 보여줘", "처음에 추천해 준 거
#: 다시", "맨 처음 것들 다시 알려 줘", "처음에 얘기한 거 다시", "처음에 나온 거 다시"), not
#: the first field or topic ("처음 카테고리로", "처음 얘기로 돌아가자"): what was shown first,
#: said as things, with "again".
_THE_FIRST_ONES = re.compile(
    r"(?:맨\s*)?(?:처음|첨)\s*(?:에\s*)?"
    r"(?:(?:보여|추천해|추천|알려|얘기해|얘기|이야기|말해|말씀해|말씀)\s*(?:준|줬던|주신|한|했던|하신)\s*"
    r"|(?:나온|나왔던|봤던|본)\s*)?"
    r"(?:거|것|꺼|걸|챌린지)"
)
_AGAIN = re.compile(r"다시|또\s*(?:보여|알려)")


def asks_to_see_again(message: str) -> bool:
    """Whether ``message`` asks to be shown the first answer's challenges again."""
    return _THE_FIRST_ONES.search(message) is not None and _AGAIN.search(message) is not None


#: Setting aside the one just shown ("이거 말고", "그건 빼고", "그거 말구 딴 거").
_NOT_THIS_ONE = re.compile(
    r"(?:(?:이|그|저)(?:거|것|건)|(?:첫|두|세)\s*번째(?:\s*(?:거|것|꺼|건))?)\s*(?:말고|말구|빼고)"
)


def sets_aside_the_one_shown(message: str) -> bool:
    """Whether ``message`` sets aside what was just shown by pointing at it ("이거 말고", "첫
    번째 거 말고")."""
    return _NOT_THIS_ONE.search(message) is not None


def says_that_one(message: str) -> bool:
    """Whether ``message`` points at something shown by a demonstrative before its noun ("그
    다큐 제목 몇 개만 알려줄 수 있어?") or as one (:func:`points_at_one`)."""
    return bool(_DEMONSTRATIVE.search(message)) or points_at_one(message)


def points_at_one(message: str) -> bool:
    """Whether ``message`` points at one challenge shown: a demonstrative or an ordinal."""
    return _POINTS_AT_ONE.search(message) is not None


#: An ordinal pointing at one challenge shown, and its place in the list (-1: the last).
_ORDINAL = re.compile(r"(첫|두|세|네)\s*(?:번째|째)|(마지막|맨\s*(?:처음|앞|뒤|끝))")
_ORDINAL_PLACES = {"첫": 0, "두": 1, "세": 2, "네": 3}


def ordinal_blanked(message: str) -> str:
    """``message`` without the ordinals that point at one challenge shown ("두 번째 거 어떻게
    해?": its "두" names no subject)."""
    return _ORDINAL.sub(" ", message)


def ordinal(message: str) -> int | None:
    """The place in the list shown that ``message`` names ("두 번째 거": 1, "2번은": 1, "마지막
    거": -1), or None."""
    if numbered := _NUMBERED_ONE.search(message):
        return int(numbered.group("number")) - 1
    found = _ORDINAL.search(message)
    if found is None:
        return None
    if found.group(1):
        return _ORDINAL_PLACES[found.group(1)]
    return 0 if re.search(r"처음|앞", found.group(2)) else -1


#: Money, or buying, said in words: "free" is read only with one. The vote alone read "장 볼 때
#: 비닐 안 쓰는 방법" as free ("안 쓰는": not spending), and a constraint read in error hides
#: the answer ("장바구니 들고 장보기" costs a bag). Every "free" labelled in the facet and fit
#: sets says one of these.
_MONEY = re.compile(
    r"돈|공짜|무료|유료|비용|비싸|비싼|비쌀|저렴|값|지갑|회비|장비|원\b|[0-9]\s*원|만\s*원"
    r"|살\s*필요|사지|안\s*사|사야|사는|사거나|구매|구입|지출|들이"
)


#: Asking for more, in words: "또", "다른", "딴", "추가로", "말고도", "더 있어?", "몇 개 더" ("더"
#: alone compares: "뭐가 더 나아?", "좀 더 쉽게 설명해 줘").
_MORE = re.compile(
    r"(?:^|[\s,.!?])(?:또|다른|딴|추가로)(?=[\s,.!?]|$)|말고도"
    r"|더\s*(?:있|없|알려|줘|보여|추천)|(?:하나|몇\s*개|몇\s*가지)\s*(?:만\s*)?더"
)


#: Asking where to begin ("쓰레기 줄이기 뭐부터 하면 돼?", "전기 아끼려면 어디서부터 시작해?"):
#: not a question (the vote read some as questions, answered "그 질문에 꼭 맞는 답은 …
#: 없지만" with one challenge's text), and a plain ask when what it begins is said in two
#: words at most ("쓰레기 줄이기", "채식 해보고싶은데"): a field's first steps. A longer one
#: says its own subject ("옷을 너무 자주 사는 것 같아서 좀 줄여 보고 싶은데").
_WHERE_TO_START = re.compile(
    r"(?:(?:뭐|뭘|무엇|무얼|어떤\s*(?:거|것|걸))\s*부터|어디\s*(?:서)?부터|처음에?\s*(?:뭐|뭘|무엇)(?:을|를)?)"
    r"\s*(?:하|해|시작|실천|도전|손|보|바꾸|바꿔|챙기|챙겨)"
)
_SUBJECT_WORDS = 2
#: Asking what there is ("업사이클 뭐 있어?", "제로웨이스트 챌린지 뭐가 있나요?"): a request for
#: challenges, not a question (the vote read "업사이클 뭐 있어?" as one, answered "그 질문에
#: 대한 답은 … 담겨 있지 않아요"), and a plain ask when what it asks of is said in two words at
#: most, as :data:`_WHERE_TO_START`.
_WHAT_IS_THERE = re.compile(r"(?:뭐|뭣|무엇)\s*(?:이|가)?\s*(?:좀\s*)?(?:있|없)")
#: Words that say the user is beginning, not what ("처음 해보는데", "이제 막 시작하려는데", "완전
#: 초보인데"): not counted among the words of what it begins.
_BEGINNING = re.compile(r"처음\w*|해\s*보\w*|해보\w*|시작\w*|초보\w*|입문\w*|완전|이제|막|한번")


#: Asking for another field, in words: another field, category or topic ("딴 분야 없어?",
#: "다른카테고리", "새로운 분야로 넘어가죠"), something wholly other ("완전 다른 걸로"), or
#: changing it ("분야 바꿔서"). The vote of the words misses those it has no example of;
#: "다른 종류로" may mean more of the same field.
_ANOTHER = re.compile(
    r"(?:다른|딴|새로운|새)\s*(?:분야|카테고리|주제)"
    # wholly other ("완전 다른 걸로", "결이 완전 다른 걸로", "전혀 상관없는 쪽으로")
    r"|(?:완전히?|전혀|아예|확)\s*(?:다른|상관\s*없는)"
    r"|(?:분야|카테고리|주제)\s*(?:를|을)?\s*(?:바꿔|바꾸|바꿀|변경|전환)"
    r"|(?:another|other|different)\s+(?:category|field|topic)",
    re.IGNORECASE,
)


#: A question has the form of one: a question mark, or an interrogative word or ending. The
#: vote alone reads some statements of a problem as questions ("회사에서 종이컵을 너무 많이
#: 써": 0.65 of it), and their answer then opens with what the catalogue does not say about a
#: question nobody asked. Every labelled question (the examples, the facet sets, the fit
#: bench's question turns) has this form.
_ASKING = re.compile(
    r"[?？]|어떻게|어떡|왜|뭐|무엇|무슨|언제|어디|얼마|몇|어느|어때|맞아|맞나|맞지|인가|일까"
    r"|을까|할까|될까|되나|는지|나요|까요|냐|니\s*$"
)


#: What a question asks of a challenge: asking for more in words ("러닝 플로깅 말고 다른 거
#: 있어?", "또 뭐 있어?") or for a field plainly ("채식은 뭐부터 하면 돼?") has a question's
#: form, and asks nothing the catalogue could answer
#: unless it says one of these (its answer had opened with "그 질문에 꼭 맞는 답은 …
#: 없지만"); "플로깅이랑 다른 거야?" asks how two differ.
_ASKS_OF_IT = re.compile(
    _HOW_WHY + r"|무슨|어느|효과|도움|의미|차이|뜻|달라|다른\s*(?:거야|건가|건지)"
)


#: Asking whether there is something ("환경에 도움 되는 거 있을까", "집에서 할 만한 거
#: 있어?") asks for challenges, not for something to know, unless it asks how, why, how much,
#: when or where too.
_ASKS_FOR_ONE = re.compile(
    r"(?:거|것|게|건|챌린지)\s*(?:도\s*)?(?:뭐\s*)?(?:좀\s*)?(?:있|없)(?:을까|어|나|나요|어요|을까요|니|는지|냐|습니까)"
)
_HOW_OR_WHY = re.compile(_HOW_WHY)
#: Asking how, why, how much, when or where, how many of a measure ("몇 분", "몇 년", not "몇
#: 개 더"), whether it is really so ("정말 나아?", "진짜야?") or helps ("도움이 돼?", "효과
#: 있어?"): a question of fact, in question form, is one whatever the vote (it missed "소금기는
#: 어떻게 빼?", "몇 분 지나면 눅눅해져?", "휴지 쓰는 것보다 정말 환경에 나아?"). Not a critique,
#: a pointer, more or another field, nor a request for challenges that asks no how or why.
_ASKS_A_FACT = re.compile(
    _HOW_WHY + r"|몇(?!\s*(?:개|가지|번째))|정말|진짜|실제로|효과|도움|의미|차이|소용"
    # what to mind or bring ("조심할 게 뭐야?"), whether it can be known ("있는지 알 수 있어?"),
    # whether it wears or uses less ("덜 닳아?"), whether what is said is so ("물이 덜 드는 거
    # 맞아요?", "그게 사실이야?")
    r"|조심|주의할|준비물|는지\s*(?:미리\s*)?(?:알|확인)|덜\s*[가-힣]+\s*[?？]"
    r"|(?:거|게|것|건|말|데)\s*(?:이\s*)?맞(?:아|나|죠|지|습니까)|사실(?:이|인)"
)
#: What to mind ("조심할 거 있어?", "주의할 점 있을까요?"): a question, though it asks for
#: something there is.
MINDING = re.compile(r"조심(?:할|해야)|주의(?:할|해야|\s*(?:점|사항))|유의(?:할|해야)")
#: Whether one way is better than another ("팔고 카셰어링 쓰는 게 나을까?"): a question of
#: fact, unless it asks which to do ("뭘 하는 게 좋을까?" asks for challenges).
_BETTER = re.compile(r"(?:게|것이|편이)\s*(?:더\s*)?(?:나을까|나아|낫|좋을까)")
_WHICH = re.compile(r"뭐|뭘|무엇|어떤|어느")


def asks_a_fact(message: str) -> bool:
    """Whether ``message`` asks a question of fact (:data:`_ASKS_A_FACT`)."""
    better = _BETTER.search(message) is not None and not _WHICH.search(message)
    if not ((_ASKS_A_FACT.search(message) or better) and _ASKING.search(message)):
        return False
    if _ASKS_FOR_ONE.search(message) is None:
        return True
    # "… 거 있어?" asks for challenges, unless it asks how, why or what to mind
    return bool(_HOW_OR_WHY.search(message) or MINDING.search(message))


#: A plain ask names its field and nothing of where, with whom, when, how easy or what it
#: costs: a message saying one of these is not one, whatever the vote (the plain examples had
#: outvoted "사무실에서 할 수 있는 비건 챌린지 추천해 줘", read then for no constraint at all).
_SAYS_MORE = re.compile(
    r"사무실|회사|직장|집|혼자|가족|아이|애들|동료|이웃|친구|쉬운|쉽게|간단|돈|공짜|무료|비용"
    r"|밖|야외|출퇴근|출장|이동|현장|학교|주말|여행"
)


#: The words that say where, with whom, how little effort or no money ("현장에서", "애들
#: 데리고", "마을 분들이랑", "부담 없이", "회비 안 걷고"): the embedding of a whole message,
#: or of a clause, blurs them under its form ("~할 수 있는 걸로" sits nearer "출장 가서도 할 수
#: 있는 거" than "일하는 곳에서 …"). A constraint whose words the message says is read when the
#: neighbours' vote gives it at least ``CUE_FLOOR`` (0.05-0.45 differ by a turn or two on the
#: fit bench's dev splits): by its meaning and its words together. Look-alikes are kept out by
#: the letters around them ("아이폰", "딸기", "잠깐만", "쉽게 설명해", "귀찮아도"), and "부담
#: 없는" beside 비용 is the cost's, not the effort's.
_CUES = {
    Constraint.HOME: r"집에서|재택|집\s*안|집안에서|우리\s*집|집콕|(?<![가-힣])방에서|내\s*방|베란다"
    r"|원룸|자취방|(?<![가-힣])방\s*안|집에\s*(?:만\s*)?(?:있(?!으면(?!서))|머물)"
    # a home's kitchen, not a shop's ("가게 주방", "식당 부엌에서 일해요")
    r"|(?<!가게)(?<!식당)(?<!매장)(?<!가게\s)(?<!식당\s)(?<!매장\s)(?:주방|부엌)",
    Constraint.WORK: r"회사에서|사무실|직장(?!인)|현장에서|일터|근무\s*중|업무|장사"
    r"|가게(?!\s*(?:되|돼|까지|에\s*가|로\s*가))|매장"
    r"|탕비실|교무실|(?:우리|저희)\s*회사|회사\s*(?:안|내)|사내|공장|(?:제|내|각자|자기)\s*자리에서",
    # (near a place is out around it: "회사 근처에서", "집 주변에서")
    Constraint.OUTSIDE: r"밖에서|밖으로|밖에\s*나가|바깥|야외|공원|산책|데리고\s*나가|(?:근처|주변)에서"
    r"|나가(?:서)?\s*(?:놀|하는|할|해)|캠핑장|캠핑\s*(?:가|갈|와)",
    Constraint.MOVING: r"출퇴근|지하철|버스|이동|출장|운전|(?<![가-힣])차로|자차|타고|여행"
    r"|(?:가는|오는|오가는|다니는|가던|오던|돌아오는)\s*길에"
    r"|(?:출근|퇴근|등굣|하굣|외근)길"
    r"|나들이|놀러\s*(?:가|갈|간|다니|나가)|외근|비행기|기차|차\s*(?:를\s*)?(?:몰|끌)",
    # (living alone is who one is: "혼자 사는 직장인인데", "자취 3년차인데")
    Constraint.ALONE: r"혼자(?!\s*(?:살|사는|사니|삽|산\s))|(?<![가-힣])나만(?!의)|개인적으로",
    Constraint.FAMILY: r"가족|아이(?![폰스디템콘])|애들|애랑|(?<![가-힣])애(?:가|\s*(?:둘|셋|키우))"
    r"|아들|(?<![가-힣])딸(?!기)|남편|아내"
    r"|와이프|부모님|식구|엄마|아빠|손주|손자|손녀|조카|할머니|할아버지|시댁|처가",
    Constraint.COWORKERS: r"동료|팀원|회식|우리\s*팀|팀\s*전체|회사\s*사람|부서|직원"
    r"|같이\s*일하는\s*사람",
    Constraint.EASY: r"간단|쉬운|쉽고|후딱|까딱\s*(?:안|않)|쉽게(?!\s*(?:설명|말해|풀어))|손쉽|손\s*(?:안|덜)\s*가"
    r"|금방(?!\s*(?:지치|지쳐|질리|질려|포기|심심|까먹|잊))"
    r"|잠깐(?!만)|(?<!비용\s)(?<!비용)(?<!돈\s)부담\s*(?:없|안)|가볍게|가벼운"
    r"|귀찮(?!아도|더라도|지만)|번거롭(?!더라도|지만)|[0-9]+\s*분(?:이면|만)|바로\s*(?:시작|할|해)"
    r"|당장|시간\s*(?:이\s*)?(?:얼마\s*)?(?:안|덜|적게)\s*(?:걸리|드는|들)"
    r"|(?:빡세|힘들|어렵)지\s*않|품\s*(?:이\s*)?(?:적게|덜|안)\s*(?:들|드|가)"
    r"|힘\s*(?:이\s*)?(?:안|덜)\s*(?:드|들)",
    Constraint.FREE: r"돈\s*(?:이|은|도)?\s*(?:안|없이|들지|들이지|한\s*푼)|큰돈\s*(?:안|없이)|공짜|무료"
    r"|지갑\s*(?:안|을\s*안|(?:을\s*)?열\s*(?:일|필요)\s*(?:이\s*)?없)"
    r"|비용\s*(?:없|안|부담\s*없)|(?:안|않고)\s*사고|사지\s*않"
    r"|살\s*필요\s*(?:없|는\s*없)|(?:회비|재료비|장비)[^.?!]{0,8}(?:없|안)"
    r"|돈\s*(?:이\s*)?(?:드는|더\s*쓰는|쓰는)\s*(?:건|거|것)\s*(?:좀|싫|별로|부담|빼)",
    Constraint.NEIGHBOURS: r"이웃|(?:동네|마을)\s*(?:사람|분|어르신|어른)|주민|반상회"
    r"|아파트\s*사람"
    r"|옆집|윗집|아랫집",
}
_CUE = {c: re.compile(pattern) for c, pattern in _CUES.items()}
CUE_FLOOR = 0.15


#: Someone who keeps the user busy, told as a reason ("주말엔 애들 보느라 바쁘고", "부모님
#: 모시느라"): the family looked after, then a verb ending in "-느라", is no company asked for.
#: ("영업 뛰느라 …" tells a job, and stays.)
_BUSY_WITH = re.compile(
    r"(?:애들|아이|아기|애기|손주|손자|손녀|조카|부모님|가족|식구|남편|아내)[가-힣]*\s+[가-힣]+느라"
)


#: A child the user is raising, told as who the user is ("아기 키우는데 물티슈 대신 …", "애 둘
#: 키우면서", "딸 키우는 엄마인데"): a parent's own challenge ("물티슈 대신 젖은 수건 챙기기",
#: done alone) fits as well as one done with the child, unless the message asks to do it
#: together (:data:`_TOGETHER`: "아들 키우는데 같이 할 만한 거").
_RAISING = re.compile(
    r"(?:애들|아이들?|아기|애기|(?<![가-힣])애|아들|(?<![가-힣])딸|손주)[가-힣]*"
    r"(?:\s+(?:둘|셋|넷|하나|한\s*명|두\s*명|세\s*명))?"
    r"\s+키우(?:는(?:\s*(?:엄마|아빠|부모|집))?|고|면서|다|며)"
)
_TOGETHER = re.compile(r"같이|함께|데리고|이?랑\s+(?:할|해|하는|놀)")


#: The people told as the ones who do what the message is about ("우리 팀이 회의 자료를 너무
#: 많이 뽑아서", "애들이 고기 없으면 밥을 안 먹어요"): the subject of what is told, no company
#: asked for, unless the message asks to do it together (:data:`_TOGETHER`). Having them is
#: who the user is, and stays ("아이가 둘 있어서", "애들이 있는 집이라").
_DOING = re.compile(
    r"(?:우리\s*팀|팀원들?|동료들?|직원들?|부서|회사\s*사람들?|애들|아이들?|식구들?|가족들?"
    r"|남편|아내|와이프|엄마|아빠|부모님|아들|(?<![가-힣])딸|손주들?|조카들?"
    r"|이웃들?|(?:동네|마을)\s*(?:사람|분)들?)(?:이|가)(?![가-힣])"
    r"(?!\s*(?:있|없|둘|셋|넷|하나|한\s*명|두\s*명|세\s*명|생겨|생겼|태어))"
)


#: A pet, called "애" as people call theirs ("강아지 산책시키는데 … 애가 자꾸 주워먹으려고
#: 해요"): then "애가", "애랑" is the pet, no family asked for.
_PET = re.compile(
    r"강아지|반려견|반려묘|반려동물|고양이|댕댕이|멍멍이|냥이|말티즈|푸들|진돗개|포메|시츄|비숑"
)
_PET_AS_CHILD = re.compile(r"(?<![가-힣])애(?:가|랑|는|도|를|한테|하고)?(?![가-힣])")


def raises_a_child(message: str) -> bool:
    """Whether the only family ``message`` tells of is a child the user raises, not asked to
    do it with (:data:`_RAISING`)."""
    return bool(_RAISING.search(message)) and Constraint.FAMILY not in cued(message)


def takes_a_pet(message: str) -> bool:
    """Whether the only one ``message`` takes along is a pet ("주말엔 댕댕이 데리고 근처 산에
    자주 올라가는데": read as family by the vote, it brought "아이와 함께하는 가족 플로깅"): no
    family unless the message says it in words."""
    return bool(_PET.search(message)) and Constraint.FAMILY not in cued(message)


def said_in_words(message: str, constraints: Iterable[Constraint]) -> frozenset[Constraint]:
    """Those of ``constraints`` that ``message`` says in words (:func:`cued`)."""
    words = cued(message)
    return frozenset(c for c in constraints if c in words)


def tells_others_doing(message: str) -> bool:
    """Whether ``message`` tells people doing what it is about, not asked to come along
    (:data:`_DOING`: "우리 애들이 편식이 심해"): it says something of its own."""
    return _DOING.search(message) is not None and not _TOGETHER.search(message)


def cue_spans(message: str) -> list[tuple[int, int]]:
    """Where ``message`` says a place, a company, ease or cost in words (:data:`_CUES`)."""
    return [m.span() for pattern in _CUE.values() for m in pattern.finditer(message)]


def cued(message: str) -> dict[Constraint, int]:
    """The places, companies, ease and cost ``message`` says in words, each at where it last
    says it (not in what it says keeps the user busy: :data:`_BUSY_WITH`, nor in the child it
    says the user raises or the people it tells doing something, unless it asks to do it
    together: :data:`_RAISING`, :data:`_DOING`, nor in a pet called "애": :data:`_PET`)."""
    busy = [m.span() for m in _BUSY_WITH.finditer(message)]
    if not _TOGETHER.search(message):
        busy += [m.span() for m in _RAISING.finditer(message)]
        busy += [m.span() for m in _DOING.finditer(message)]
    if _PET.search(message):
        busy += [m.span() for m in _PET_AS_CHILD.finditer(message)]
    found: dict[Constraint, int] = {}
    for constraint, pattern in _CUE.items():
        ends = [
            m.end()
            for m in pattern.finditer(message)
            if not any(start <= m.start() and m.end() <= end for start, end in busy)
        ]
        if ends:
            found[constraint] = ends[-1]
    return found


#: Where a message's clauses end: after a connective of background or reason ("사는데",
#: "원룸인데", "많아서", "키우니까", "좋지만") or a punctuation mark. Not after "-고" ("살고
#: 있어", "타고") or "-면" ("낮추면 줄어?"): cut there, a clause read alone said what the
#: whole did not (bench/README.md "Facets").
_CLAUSE_END = re.compile(
    r"(?<=[가-힣])(?:는데|은데|인데|ㄴ데|한데|니까|라서|어서|아서|해서|지만)(?=[\s,])|[,.!?]"
)
#: What a clause may add to the whole's reading: the situation, the place and company, and a
#: question it tells. Ease and cost are asked in the request itself, which the whole reads; a
#: clause alone ("줄이고 싶은데") was read as one.
_TOLD_IN_CLAUSES = frozenset(
    {
        QUESTION,
        *_SITUATION,
        *(c.value for c in Constraint if c not in (Constraint.EASY, Constraint.FREE)),
    }
)


_CONSTRAINTS = frozenset(c.value for c in Constraint)
#: A field as people name it ("에너지절약", "업사이클링") or call it ("환경", "채식", "줍깅",
#: "쓰레기 줄이기"), with the word after it ("챌린지", "활동", "실천").
#: Each field's name, spaces optional ("에너지절약", "에너지 절약").
_LABELS = tuple(r"\s*".join(map(re.escape, c.label.replace(" ", ""))) for c in Category)
_FIELD_SAID = (  # the longer before the shorter it holds ("업사이클링", "업사이클")
    "업사이클링",
    "친환경",
    *_LABELS,
    "환경",
    "채식",
    "줍깅",
    "재활용",
    r"(?:쓰레기|일회용품|플라스틱|탄소|전기|에너지)\s*(?:줄이기|줄이는|아끼기|아끼는|절약)",
)
_A_FIELD = re.compile(
    "(?:" + "|".join(_FIELD_SAID) + r")(?:\s*(?:챌린지|활동|실천))?",
    re.I,
)


def field_blanked(message: str) -> str:
    """``message`` with the fields it names blanked ("아침 식사 비건 챌린지 추천해줘" → "아침
    식사   추천해줘"): what else it says (app/chat/subjects.py)."""
    return _A_FIELD.sub(" ", message)


def without_field(message: str) -> str | None:
    """``message`` with the field it names said as "거" ("돈 안 드는 비건 챌린지 알려 줘" →
    "돈 안 드는 거 알려 줘", "집에서 할 수 있는 환경 챌린지" → "집에서 할 수 있는 거"), for its
    constraints: the field's meaning drowns them in the whole's embedding. None when it names no field, or says nothing of where, with whom, how
    easy or what it costs (:data:`_SAYS_MORE`: then nothing is worth another embedding)."""
    unnamed, named = _A_FIELD.subn("거", message)
    if not named or not _SAYS_MORE.search(unnamed):
        return None
    return unnamed


#: At most this many of a message's clauses are read (an embedding each): a message told in
#: clauses has two or three; one of 200 characters cut by commas would have had sixty.
CLAUSES_READ = 4


def clauses(message: str) -> list[str]:
    """The first ``CLAUSES_READ`` clauses of a message told in several (none for a message of
    one), without the words telling what keeps the user busy ("주말엔 애들 보느라 바쁘고" is
    read as "주말엔 바쁘고": a reason given, whose place or company is not asked for, the rest
    of the clause still told: :data:`_BUSY_WITH`)."""
    parts, start = [], 0
    for end in _CLAUSE_END.finditer(message):
        parts.append(message[start : end.end()])
        start = end.end()
    parts.append(message[start:])
    found = [part.strip(" ,.!?") for part in parts]
    found = [part for part in found if len(part) >= 3]
    if len(found) < 2:
        return []
    told = (" ".join(_BUSY_WITH.sub(" ", part).split()) for part in found)
    return [part for part in told if len(part) >= 3][:CLAUSES_READ]


#: What a user leaves ("종이 얘기는 됐고 아예 다른 분야로", "쓰레기 얘기는 이쯤 하고, …",
#: "비건 말고 다른 거", "현장 말고 집에서", "집은 그렇고 출퇴근길에"): the words up to it name
#: the old subject or place.
#: Searched with, they found it again in another field (이면지 after "종이 얘기는 됐고"); read
#: for a place, they asked for the one left ("현장 말고 집에서" read as work).
_LEAVING = re.compile(
    r"^.*?(?:말고|빼고|됐고|됐으니|제외하고|그만\s*하고|이쯤\s*하고|[은는]\s*그렇고)(?=[\s,.]|$)"
)


#: Words about a field or the act of leaving it, not about a challenge ("플로깅 얘기는 말고").
_FIELD_WORD = re.compile(
    r"말고|빼고|됐고|됐으니|제외하고|그만하고|그만|이쯤|그렇고|얘기|이야기|얘긴|분야|챌린지|관련|종류"
    r"|카테고리|주제|이런|그런|이거|그거|저거|이건|그건|아니|아냐"
)


#: A verb's clause made a noun ("바꾸는 거", "사는 것", "먹을 건").
_A_CLAUSE = re.compile(r"[가-힣](?:는|은|을|던|ㄴ|ㄹ)\s*(?:거|것|건|걸)(?![가-힣])")
_FIELD_NAMES = tuple(re.compile(label, re.I) for label in _LABELS)


#: The user done with what was talked about ("전기 아끼는 건 대충 알겠어요 근데 …", "여행 얘기는
#: 됐고", "회사 얘기는 이쯤 하고"): what it asks next starts afresh, without the ease, cost,
#: place or company asked for before.
_MOVES_ON = re.compile(
    r"(?:얘기|이야기|얘긴|건|거|것)[은는]?\s*(?:이제|대충|다|충분히|웬만큼|많이)?\s*"
    r"(?:됐|알겠|알았|이쯤|그만|충분)"
)


def moves_on(message: str) -> bool:
    """Whether ``message`` says the user is done with what was talked about (:data:`_MOVES_ON`)."""
    return _MOVES_ON.search(message) is not None


#: Time off work ("가게 쉬는 날", "마감하고 나서", "퇴근하고 집에서", "오프날", "일 끝나고"): not
#: at work, whatever the workplace named beside it or asked before. Not "퇴근 전" (still at
#: work) and not "주말" alone ("주말엔 힘드니 평일에 회사에서").
_OFF_WORK = re.compile(
    r"(?<!출)퇴근(?:하고|한\s*(?:뒤|후|다음)|\s*후|해서|하면|하고서|하는\s*길|길)"
    r"|마감(?:하고|한\s*(?:뒤|후|다음)|\s*후|하면|치고)"
    r"|(?:일|근무|장사|영업)\s*(?:끝나|마치|마친|끝난|없는)"
    r"|쉬는\s*날|휴무|오프\s*(?:날|데이|때|인\s*날)|비번\s*(?:날|일|때)|휴일"
)


def off_work(message: str) -> bool:
    """Whether ``message`` asks for time off work (:data:`_OFF_WORK`)."""
    return _OFF_WORK.search(message) is not None


def leaving_aside(message: str) -> str:
    """``message`` without the words naming what the user leaves (the whole message when it
    names nothing left, or nothing else)."""
    rest = _LEAVING.sub("", message, count=1).strip(" ,.")
    return rest if re.search(r"[가-힣].*[가-힣]", rest) else message


#: Where a message turns, in the user's words for a field ("이번엔 먹는 거 쪽으로 봐 줘",
#: "식단 쪽으로도 동료들이랑 …", "스마트폰 쪽도 알려줘"): the words before "쪽" in its clause,
#: not a pointer ("이쪽", "그 쪽", "반대쪽") and not a side left ("먹는 쪽 말고").
_TOWARD = re.compile(
    r"([^,.!?]*?)\s*쪽(?:으로[도는]?|으론|에서도?|도|은|는|을|이)?(?![가-힣])"
    r"(?!\s*(?:말고|빼고|제외))"
)
_NOT_A_FIELD = frozenset(
    {
        "이",
        "그",
        "저",
        "요",
        "반대",
        "다른",
        "딴",
        "어느",
        "어떤",
        "양",
        "한",
        "우리",
        "이번",
        "저번",
    }
)
#: A clause made a noun before "쪽" ("포장 쓰레기 안 생기게 하는 쪽", "먹는 거 쪽"): its words
#: up to this many say where it turns; a noun alone ("식단 쪽") says it in one.
_CLAUSE_WORDS = 5


def toward(message: str) -> str | None:
    """The words naming where the message turns (:data:`_TOWARD`), None when it says none."""
    for found in reversed(list(_TOWARD.finditer(message))):
        words = found.group(1).split()
        if not words or words[-1] in _NOT_A_FIELD:
            continue
        if words[-1] in ("거", "것") or re.search(r"[는던]$", words[-1]):
            return " ".join(words[-_CLAUSE_WORDS:])
        if len(words) > 1 and re.search(r"(?:이나|나|랑|와|과|하고)$", words[-2]):
            return " ".join(words[-2:])  # "책이나 영상 쪽으로"
        return words[-1]
    return None


def left_words(message: str) -> tuple[str, ...]:
    """The words naming what the user leaves aside, as a title would say them ("텀블러" of
    "텀블러 말고 또 뭐 있어?", "러닝" of "러닝 플로깅은 빼고"): words of two syllables or more,
    their particles cut, neither a field's name nor a word about the field ("얘기", "쪽"). A
    clause left aside ("나 혼자 바꾸는 거 말고") names a way of doing, not a challenge: none."""
    left = left_aside(message)
    if _A_CLAUSE.search(left):
        return ()
    for name in _FIELD_NAMES:
        left = name.sub(" ", left)
    words = []
    for word in re.findall(r"[가-힣A-Za-z]+", left):
        word = re.sub(r"(?:은|는|이|가|을|를|도|이랑|랑|하고|같은)$", "", word)
        if len(word) >= 2 and not _FIELD_WORD.fullmatch(word) and parse_category(word) is None:
            words.append(word)
    return tuple(words)


def left_aside(message: str) -> str:
    """The words naming what the user leaves, with the word that leaves it ("플로깅 말고" of
    "플로깅 말고 다른 거 추천해줘", and of "플로깅 말고" said alone); empty when it leaves
    nothing."""
    found = _LEAVING.match(message)
    return found.group(0) if found else ""


#: Asking for challenges, not about one: a request ("추천해 줘", "알려 줘", "보여 줘"),
#: challenges named ("챌린지도 있어?"), or whether there is one to do ("뭐가 있을까요", "할
#: 만한 거 있어?", "그런 것도 있어?"). "방법 있어?" may ask how to do one shown ("한 번에 지우는
#: 방법 있어?"). The words both readings below share; ``things``: what "…도 있어?" may follow.
_WANTS = (
    r"추천|알려|보여|소개|챌린지|뭐가?\s*(?:있|없)|(?:{things})\s*(?:도\s*)?(?:있|없)"
    r"|할\s*만한|해\s*볼\s*만한"
    # "여름에 할 수 있는 건?": what there is to do, said short
    r"|할\s*수\s*있는\s*(?:{things})\s*(?:은|는)?\s*요?\s*[?？]*\s*$"
)
_ASKS_FOR_CHALLENGES = re.compile(_WANTS.format(things="거|것|게|건|걸") + r"|쪽으로|걸로")

#: Asking for challenges in so many words ("에어컨 관련된 것도 있어?", "추천해 줘", "할 만한
#: 거", "두부 요리도 있어?"): :data:`_ASKS_FOR_CHALLENGES` without the words that say how
#: they are wanted ("걸로", "쪽으로"), which a question of a challenge shown says too
#: ("멀티탭 스위치 있는 걸로 새로 사야 돼?").
_REQUESTS_CHALLENGES = re.compile(
    _WANTS.format(things="거|것|게|건")
    + r"|도\s*(?:있|없)(?:어|어요|나요|나|을까|을까요|니|냐)?\s*[?？]*\s*$"  # "두부 요리도 있어?"
)


def requests_challenges(message: str) -> bool:
    """Whether ``message`` asks for challenges in so many words (:data:`_REQUESTS_CHALLENGES`)."""
    return _REQUESTS_CHALLENGES.search(message) is not None


def asks_for_challenges(message: str) -> bool:
    """Whether ``message`` asks for challenges (:data:`_ASKS_FOR_CHALLENGES`), not about one."""
    return _ASKS_FOR_CHALLENGES.search(message) is not None


def in_question_form(message: str) -> bool:
    """Whether ``message`` is said as a question ("재봉틀 없어도 돼?", "곰팡이 안 펴요?")."""
    return _ASKING.search(message) is not None


#: Asking whether it can be done, by whom or when, or whether it is hard ("초등학교 저학년도 할
#: 수 있을까요?", "10키로 거리면 할만해?", "재봉틀 없어도 돼?", "비 오는 날에도 해도 돼?",
#: "매일 하기 힘들지 않아?"): after challenges were shown, a question of them. Its words of
#: ease, place or company ("할만해", "가족들이랑") are what it asks of them, not a critique
#: asking for new ones; "할 수 있는 거 있어?" asks for challenges, "어떤 거야?" chooses.
_ASKS_IF_DOABLE = re.compile(
    r"할\s*수\s*(?:있|있을|있겠|있나)(?:을까|어|나|나요|을까요|는지|겠|어요|니|냐|습니까)"
    r"|할\s*만(?:해|할까|하나|한가|한지|할지)"
    r"|(?:가능|무리|괜찮)(?:해|할까|한가|할지|일까|야|아|을까|나요|하나|한지|은가|은\s*거|은지|지\s*않|겠)"
    r"|(?:힘들|어렵|번거롭|귀찮|부담스럽|벅차)(?:지\s*않|진\s*않|나|을까|어|겠|울까|냐)"
    r"|[가-힣]도\s*(?:돼|되|괜찮|상관)"  # "없어도 돼?", "바꿔도 되나요?", "밤에도 괜찮아?"
)


def asks_if_doable(message: str) -> bool:
    """Whether ``message`` asks whether it can be done (:data:`_ASKS_IF_DOABLE`), as a
    question, asking for no challenge and choosing none by what it is."""
    return (
        _ASKS_IF_DOABLE.search(message) is not None
        and in_question_form(message)
        and not asks_for_challenges(message)
        and not requests_challenges(message)
        and not _WHICH.search(message)
        and not _MORE.search(message)
    )


def points_among(message: str) -> bool:
    """Whether ``message`` chooses among the challenges just shown ("그중에 돈 안 드는 거")."""
    return _AMONG.search(message.strip()) is not None


class FacetReaders:
    """The embedding's reader, and the lexical one (as :class:`app.chat.intent.IntentClassifiers`).

    With an embedding, the embedding's reader reads the constraints, the situation and a
    question, and the lexical reader "another": the embedding of a whole message drowns a
    short pointer such as "다른 분야로" under the critique beside it, which its words keep.
    Without an embedding (a burst), the lexical reader alone. "Among" is read by its words in
    both (:func:`points_among`)."""

    def __init__(
        self,
        dense: FacetReader,
        lexical: FacetReader,
        lexical_vector: Callable[[str], npt.NDArray[np.float32]],
        questions: FacetReader | None = None,
    ) -> None:
        """``questions``: the embedding's reader of a question, over the examples that are
        not plain asks alone: those sit near questions about their field ("채식은 뭐부터
        시작하면 좋아?" beside "채식만 하면 영양이 부족해지지 않아?") and would outvote them, while
        telling nothing of whether a message asks something."""
        self.dense = dense
        self.lexical = lexical
        self._lexical_vector = lexical_vector
        self._questions = questions

    @staticmethod
    def _cued(message: str, votes: Sequence[dict[str, float]], said: set[str]) -> set[str]:
        """``said`` with the place, the company, the ease and the cost the message says in
        words, once it is read to ask for any: the vote reads a constraint, or gives one said
        in words some weight (:data:`CUE_FLOOR` in one of ``votes``: the whole's or a
        clause's). Then every constraint said in words counts, a second of another kind the
        vote drowns ("혼자서 부담없이", "출장 다닐 때 … 간단하게": ease 0.0-0.05; "부모님 모시고
        밖에서 돈 안 쓰고": outside 0.0), and of several of a kind the one said last, which
        replaces the vote's others of its kind ("집에서는 답답한데, 밖에서"; "혼자 주워서는 끝이
        없더라. 마을 분들이랑"; "현장에서 챙길 수 있는 걸로", which the vote read as "출장 가서도
        할 수 있는 거"; "어디 놀러 갈 때 해 볼 만한 건", at home by the vote)."""
        kinds = (PLACES, COMPANY, (Constraint.EASY.value,), (Constraint.FREE.value,))
        words = cued(message)
        asks = any(said & set(kind) for kind in kinds) or any(
            max(vote[c.value] for vote in votes) >= CUE_FLOOR for c in words
        )
        weighed = words if asks else {}
        said = set(said)
        for kind in kinds:
            of_kind = {c: at for c, at in weighed.items() if c.value in kind}
            if not of_kind:
                continue
            said = (said - set(kind)) | {max(of_kind, key=lambda c: of_kind[c]).value}
        return said

    def read(
        self,
        message: str,
        vector: npt.NDArray[np.float32] | None,
        parts: Sequence[npt.NDArray[np.float32]] = (),
        unnamed: npt.NDArray[np.float32] | None = None,
    ) -> Facets:
        """``parts``: the embeddings of the message's :func:`clauses`, when it has them;
        ``unnamed``: the embedding of the message without its field's name
        (:func:`without_field`), when it names one."""
        # Each vote once: what it says, and the weight it gives a constraint said in words
        # (the words' own in a burst; the whole's and each clause's embedding's otherwise).
        votes = [self.lexical.shares(self._lexical_vector(message))]
        said = over_half(votes[0]) - {AMONG}
        if vector is not None:
            votes = [self.dense.shares(v) for v in (vector, *parts)]
            # "another" points at the conversation in a few words ("다른 분야로"): the words
            # decide it; the embedding, the rest.
            said = (over_half(votes[0]) - _POINTERS) | (said & _POINTERS)
            if self._questions is not None:
                said = (said - {QUESTION}) | (self._questions.said(vector) & {QUESTION})
            if unnamed is not None:  # "돈 안 드는 비건 챌린지": the field's name drowned "free"
                said |= self.dense.said(unnamed) & _CONSTRAINTS
            told: set[str] = set()
            for part in votes[1:]:
                told |= over_half(part) & _TOLD_IN_CLAUSES
            for kind in (PLACES, COMPANY):
                # The whole's place is the one asked for; a clause's is then a reason given
                # ("집에만 있으니까 답답한데, 밖에 나가서 하는 걸로"): so for company.
                if said & set(kind):
                    told -= set(kind)
            said |= told
        if QUESTION not in said:  # a question's words name its subject, not a place
            said = self._cued(message, votes, said)
        if raises_a_child(message) or takes_a_pet(message):
            # who the user is, whatever the vote ("아기 키우는데 …", "댕댕이 데리고 …")
            said.discard(Constraint.FAMILY.value)
        if points_among(message):
            said.add(AMONG)
        if _ABOUT_SHOWN.search(message):
            said.add(ABOUT_SHOWN)
        if _POINTS_AT_ONE.search(message):
            said.add(AT_ONE)
        if _MORE.search(message):
            said.add(MORE)
        if _ANOTHER.search(message):
            said.add(ANOTHER)
        if not _MONEY.search(message):  # before the question: "다 쓴 건전지 …" read as free
            said.discard(Constraint.FREE.value)
        if asks_a_fact(message) and not said & {AMONG, MORE, ANOTHER}:
            # "어떻게 빼?", "몇 분 지나면 …?", "정말 나아?", whatever the vote; a constraint the
            # vote alone reads in it, in no words of its own, is its form's ("창문에 … 어떻게
            # 붙여?", "꽁초는 집에 와서 어디다 비워요?": home), not a critique's.
            unsaid = _CONSTRAINTS - {c.value for c in cued(message)}
            if not said & _CONSTRAINTS - unsaid:
                said = (said - unsaid) | {QUESTION}
        # "쓰레기 줄이기 뭐부터 하면 돼?", "업사이클 뭐 있어?" (not "또 뭐 있어?": more)
        start = _WHERE_TO_START.search(message)
        if start is None and MORE not in said:
            start = _WHAT_IS_THERE.search(message)
        if start is not None:
            said.discard(QUESTION)
            begun = [w for w in message[: start.start()].split() if not _BEGINNING.fullmatch(w)]
            if len(begun) <= _SUBJECT_WORDS:
                said.add(PLAIN)
        if _SAYS_MORE.search(message):  # "사무실에서 할 수 있는 비건 챌린지": not plain
            said.discard(PLAIN)
        asks_more = MORE in said or PLAIN in said  # "또 뭐 있어?", "비건은 뭐부터 해?"
        if not _ASKING.search(message) or (asks_more and not _ASKS_OF_IT.search(message)):
            said.discard(QUESTION)
        if _ASKS_FOR_ONE.search(message) and not (
            _HOW_OR_WHY.search(message) or MINDING.search(message)
        ):
            said.discard(QUESTION)  # "환경에 도움 되는 거 있을까": asks for challenges
        return facets_of(said)
