"""The recommend the gateway writes itself (``ANSWER_COMPOSITION=picks``): what this turn does
for this person, in warm Korean sentences.

With the default 0.5B model a recommend of its own said the message back, copied the candidate
titles as a list or read as nonsense in most answers (bench/README.md "Answers"). So in this
composition the opening words are ours, written from what the turn knows, and shown before the
model's first token:

- a question's answer first, the catalogue's sentence exactly (app/chat/answers.py), or one
  plain sentence saying the catalogue does not hold it;
- a constraint that nothing satisfies, said plainly, with the nearest offered instead;
- then the first challenge by name and why it fits: the constraints kept, the situation
  (base-info's, or told in words), the field changed, or what was asked among those shown;
- a second sentence on why the category's challenges are worth it.

Nothing is said that the turn does not know, and never the message back. The wording varies
by the message (a stable hash) and the turn's number, so two messages leading to one
challenge do not hear the same opening either.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from app.chat.constraints import Constraint
from app.domain.categories import Category

__all__ = ["Opening", "compose_recommend"]

_WHERE = {
    "도시": "도시에 사시며",
    "바닷가": "바닷가에 사시며",
    "산": "산 가까이 사시며",
    "농촌": "농촌에 사시며",
}
_WORK = {
    "사무직": "사무실에서 일하시는",
    "현장직": "현장에서 일하시는",
    "영업직": "외근이 많은 영업직으로 일하시는",
    "재택근무": "집에서 일하시는",
}
#: Why the category's challenges are worth it: a second sentence per category, in variants.
_WHY: dict[Category, tuple[str, ...]] = {
    Category.ZERO_WASTE: (
        "작은 습관 하나가 버려지는 쓰레기를 눈에 띄게 줄여 줘요.",
        "한 번 쓰고 버리던 것부터 하나씩 바꿔 보세요.",
        "익숙해지면 따로 애쓰지 않아도 이어 가는 습관이 돼요.",
    ),
    Category.PLOGGING: (
        "걷거나 달리는 김에 동네도 한결 깨끗해져요.",
        "장갑과 봉투 하나면 오늘 바로 시작할 수 있어요.",
        "주운 만큼 눈에 보이니 하는 재미도 커요.",
    ),
    Category.CARBON_FOOTPRINT: (
        "매일 움직이고 먹는 방식만 바꿔도 탄소가 꾸준히 줄어요.",
        "익숙한 이동과 소비를 조금씩 바꾸는 데서 시작해 보세요.",
        "작은 선택이 쌓이면 한 해 동안 꽤 큰 차이가 돼요.",
    ),
    Category.ENERGY_SAVING: (
        "아낀 전기는 요금으로도 돌아와요.",
        "스위치 하나, 설정 하나부터 바꿔 보세요.",
        "한 번 바꿔 두면 매일 저절로 아껴지는 것들이에요.",
    ),
    Category.UPCYCLING: (
        "버리려던 물건이 쓸모 있는 물건으로 다시 태어나요.",
        "집에 있는 재료로 부담 없이 시작해 보세요.",
        "만드는 재미에 쓰레기까지 줄어드니 일석이조예요.",
    ),
    Category.MEDIA: (
        "함께 보고 나누면 실천이 더 오래가요.",
        "좋은 이야기를 나누는 것도 훌륭한 환경 실천이에요.",
        "혼자보다 여럿이 할 때 더 멀리 퍼져요.",
    ),
    Category.DIGITAL_CARBON: (
        "화면 속 습관을 바꾸는 것도 탄소를 줄이는 실천이에요.",
        "설정 몇 가지만 바꿔도 오늘부터 효과가 있어요.",
        "눈에 보이지 않는 전기도 쌓이면 적지 않아요.",
    ),
    Category.VEGAN: (
        "한 끼씩 바꿔 가면 부담 없이 이어 갈 수 있어요.",
        "맛있게 즐길 수 있는 것부터 골라 시작해 보세요.",
        "새로운 맛을 알아 가는 즐거움도 함께 누려 보세요.",
    ),
}


@dataclass(frozen=True, slots=True)
class Opening:
    """What the recommend is written from."""

    category: Category
    kind: str  # "first", "switch", "more", "among", "another", "back", "again", "ask", "plain"
    location: str | None = None
    work_type: str | None = None
    turn: int = 0  # the session's turn number: picks the variant
    previous_category: Category | None = None  # for "more" that had to leave its category
    lead: str | None = None  # the first challenge's title
    constraints: Sequence[Constraint] = ()  # what every challenge shown satisfies
    unmet: bool = False  # constraints asked that no challenge left satisfies
    question: bool = False  # the message asks something to know
    answer: str | None = None  # the catalogue's sentence that answers it
    answer_sure: bool = True  # False: only the closest the catalogue says
    message: str = ""  # picks the variant with the turn (never shown)


def _situation(opening: Opening) -> str | None:
    where = _WHERE.get(opening.location or "")
    work = _WORK.get(opening.work_type or "")
    if where and work:
        return f"{where} {work} 분"
    if work:
        return f"{work} 분"
    if where:
        return f"{where.removesuffix('사시며')}사시는 분"
    return None


def _batchim(word: str) -> bool:
    """Whether ``word`` ends in a final consonant (Hangul; other endings read as a vowel,
    digits as Korean numerals do)."""
    last = word.rstrip(" )'\"")[-1:] or "가"
    if "가" <= last <= "힣":
        return (ord(last) - 0xAC00) % 28 != 0
    return last in "013678"


def _josa(word: str, with_final: str, without: str) -> str:
    return f"{word}{with_final if _batchim(word) else without}"


#: Where work is done, said as the user's work is: "회사에서" is not a building site's or a
#: farm's ("현장에서 일하는데 할 수 있는 거" had been answered "회사에서 할 수 있는 것을 찾으셔서").
_AT_WORK = {"현장직": "현장에서 할 수 있는", "영업직": "일하면서 할 수 있는"}


def _phrases(constraints: Sequence[Constraint], work_type: str | None = None) -> str:
    """ "돈이 들지 않고 집에서 할 수 있는": the constraints as one phrase before a noun."""
    said = [
        _AT_WORK.get(work_type or "", c.phrase) if c is Constraint.WORK else c.phrase
        for c in constraints
    ]
    joined = [p.removesuffix("는") + "고" if p.endswith("는") else p for p in said[:-1]]
    return " ".join([*joined, said[-1]])


def _first_sentence(opening: Opening, variant: int) -> str:
    label = opening.category.label
    lead = f"'{opening.lead}'"
    who = _situation(opening)
    kind = opening.kind
    wanted = _phrases(opening.constraints, opening.work_type) if opening.constraints else ""
    if kind == "again":  # "처음 거로 다시 보여줘": nothing new chosen, nothing to say of it
        return f"처음에 보여 드린 {label} 챌린지를 다시 모았어요. 맨 앞은 {_josa(lead, '이에요', '예요')}."
    if opening.unmet and wanted:
        where = "앞서 보여 드린 것 가운데" if kind == "among" else "남은 챌린지 가운데"
        return (
            f"{where} {wanted} {label} 챌린지는 찾지 못했어요. "
            f"대신 가장 가까운 {_josa(lead, '을', '를')} 골라 봤어요."
        )
    if kind == "among":
        if tuple(opening.constraints) == (Constraint.EASY,):
            return f"앞서 보여 드린 것 가운데 가장 손쉬운 건 {_josa(lead, '이에요', '예요')}."
        if wanted:
            return f"앞서 보여 드린 것 가운데 {wanted} 것은 {_josa(lead, '이에요', '예요')}."
        return f"앞서 보여 드린 챌린지 가운데 말씀하신 것에 가장 가까운 건 {_josa(lead, '이에요', '예요')}."
    moved = opening.previous_category
    if wanted and kind in ("ask", "more") and moved is not None and moved is not opening.category:
        # Its field had nothing left that satisfies the critique, or nothing near it, another
        # field did.
        return (
            f"{moved.label} 챌린지에는 {wanted} 마땅한 것이 더 없어서, {label} 챌린지 가운데 "
            f"{_josa(lead, '을', '를')} 골라 봤어요."
        )
    options: tuple[str, ...]
    if wanted:  # five ways: asks telling one situation alike ("아이랑", "애들이랑") share a lead
        options = (
            f"{wanted} {label} 챌린지로 {_josa(lead, '을', '를')} 먼저 골라 봤어요.",
            f"{wanted} 것을 찾으셔서 {_josa(lead, '을', '를')} 가장 먼저 권해 드려요.",
            f"{wanted} 것으로는 {lead}부터 해 보시길 권해요.",
            f"{_josa(lead, '은', '는')} {wanted} {label} 챌린지예요.",
            f"{wanted} {label} 챌린지 가운데 {_josa(lead, '이', '가')} 첫손에 꼽혀요.",
        )
        return options[variant % len(options)]
    if kind == "more":
        if moved is not None and moved is not opening.category:
            return (
                f"{moved.label} 챌린지는 상황에 맞는 것을 모두 보여 드려서, 이번에는 {label} "
                f"챌린지 {_josa(lead, '을', '를')} 골라 봤어요."
            )
        options = (
            f"앞서 보여 드린 것 말고 {_josa(lead, '은', '는')} 어떠세요?",
            f"다른 {label} 챌린지로는 {_josa(lead, '이', '가')} 있어요.",
        )
        return options[variant % len(options)]
    if kind == "another":
        return f"이번에는 분야를 바꿔 {label} 챌린지 {_josa(lead, '을', '를')} 권해 드려요."
    if kind == "back":
        return (
            f"처음 이야기하던 {label} 챌린지로 돌아가 {_josa(lead, '을', '를')} 먼저 골라 봤어요."
        )
    if kind == "plain":  # the field asked for and nothing in it: one of its first steps
        return _plain_sentence(label, lead, opening.message, variant)
    if who:
        options = (
            f"{who}께는 {label} 챌린지 가운데 {_josa(lead, '이', '가')} 잘 맞아요.",
            f"{who}께 맞는 {label} 챌린지로 {_josa(lead, '을', '를')} 먼저 골라 봤어요.",
        )
        return options[variant % len(options)]
    options = (
        f"{label} 챌린지로는 {_josa(lead, '을', '를')} 먼저 권해 드려요.",
        f"{_josa(lead, '이', '가')} 말씀하신 것에 가장 잘 맞는 {label} 챌린지예요.",
        f"먼저 {_josa(lead, '을', '를')} 시작해 보시면 어떨까요?",
        f"가장 먼저 떠오른 {label} 챌린지는 {_josa(lead, '이에요', '예요')}.",
    )
    return options[variant % len(options)]


#: How a plain ask asked ("비건은 뭐부터 해?", "하나만 골라 줘", "추천해 줘"): its opening
#: answers that form, so that two plain asks for one field (one first step) seldom open alike.
_BEGINNING = re.compile(r"뭐부터|처음|시작|입문|초보")
_ONE = re.compile(r"하나|한\s*가지|골라")


def _plain_sentence(label: str, lead: str, message: str, variant: int) -> str:
    """The first sentence for a plain ask for the field ``label``, led by one of its first
    steps."""
    field = _josa(label, "을", "를")
    options: tuple[str, ...]
    if _BEGINNING.search(message):
        options = (
            f"{field} 처음 시작하신다면 {_josa(lead, '이', '가')} 부담 없는 출발점이에요.",
            f"{field} 막 시작하는 분께 {_josa(lead, '을', '를')} 가장 먼저 권해 드려요.",
            f"{_josa(lead, '은', '는')} {field} 시작하기에 좋은 첫 챌린지예요.",
        )
    elif _ONE.search(message):
        options = (
            f"하나만 고르자면 {label} 챌린지는 {lead}부터 해 보시길 권해요.",
            f"{label} 챌린지를 딱 하나 꼽는다면 {_josa(lead, '이에요', '예요')}.",
            f"{label} 챌린지 하나로는 {_josa(lead, '을', '를')} 골라 봤어요.",
        )
    else:
        options = (
            f"{label} 챌린지 가운데 누구나 바로 시작할 수 있는 첫걸음은 {_josa(lead, '이에요', '예요')}.",
            f"{label}의 기본이 되는 챌린지로 {_josa(lead, '을', '를')} 먼저 권해 드려요.",
            f"{label} 하면 먼저 꼽히는 기본 챌린지가 {_josa(lead, '이에요', '예요')}.",
            f"{label} 첫걸음으로는 {_josa(lead, '을', '를')} 추천해요.",
            f"누구나 쉽게 해 볼 수 있는 {label} 챌린지로 {_josa(lead, '을', '를')} 권해 드려요.",
        )
    return options[variant % len(options)]


#: What a question the catalogue does not answer hears, before the recommendation; and before
#: the closest it says, when that is only related. Each names the subject the catalogue does
#: hold (the first challenge: "'아이와 함께하는 가족 플로깅' 챌린지는 있지만"; else the field:
#: "비건에 관한 챌린지는 있지만"), so two questions do not open alike.
NO_ANSWER = "{subject}는 있지만, 그 질문에 대한 답은 제가 가진 자료에 담겨 있지 않아요."
NOT_EXACTLY = (
    "그 질문에 꼭 맞는 답은 제가 가진 자료에 담겨 있지 않지만, {subject}에 가까운 내용이 있어요."
)


def compose_recommend(opening: Opening) -> str:
    """The answer's opening: a question's answer (or that there is none), the first challenge
    and why it fits, then why the category's challenges are worth it. A message that is its
    field's name and little else ("디지털탄소 챌린지 ㄱㄱ") is not said back in it."""
    text = _composed(opening)
    if _holds(text, opening.message):
        label = opening.category.label
        text = text.replace(f"{label} 챌린지", f"{label} 분야의 챌린지")
    return text


#: What is compared when a recommend may hold the message word for word: letters and digits.
_NOT_A_LETTER = re.compile(r"[^0-9A-Za-z가-힣]+")
_SAID_BACK_CHARS = 6


def _holds(text: str, message: str) -> bool:
    """Whether ``text`` holds ``message`` (six letters or more) word for word, spacing and
    punctuation aside."""
    said = _NOT_A_LETTER.sub("", message)
    return len(said) >= _SAID_BACK_CHARS and said in _NOT_A_LETTER.sub("", text)


def _composed(opening: Opening) -> str:
    variant = zlib.crc32(opening.message.encode()) + opening.turn
    said: list[str] = []
    subject = f"'{opening.lead}'" if opening.lead else f"{opening.category.label}"
    if opening.question:
        if opening.answer and not opening.answer_sure:
            said += [NOT_EXACTLY.format(subject=subject), opening.answer]
        else:
            held = f"{subject} 챌린지" if opening.lead else f"{subject}에 관한 챌린지"
            said.append(opening.answer or NO_ANSWER.format(subject=held))
    if opening.lead is None:
        said.append(f"지금은 알맞은 {opening.category.label} 챌린지를 찾지 못했어요.")
        return " ".join(said)
    if opening.answer and opening.answer_sure and not opening.unmet:
        lead = f"'{opening.lead}'"
        said.append(f"{_josa(lead, '이', '가')} 바로 그 이야기를 담은 챌린지예요.")
        return " ".join(said)
    if opening.question and not opening.unmet:
        # The sentence above named the first challenge: this one points at it, not names it
        # again.
        wanted = _phrases(opening.constraints, opening.work_type) if opening.constraints else ""
        if wanted:
            said.append(f"{wanted} 것 가운데서는 이 챌린지를 먼저 권해 드려요.")
        else:
            said.append("이 챌린지부터 시작해 보세요.")
    else:
        said.append(_first_sentence(opening, variant))
    if not opening.answer:
        variants = _WHY[opening.category]
        said.append(variants[variant % len(variants)])
    return " ".join(said)
