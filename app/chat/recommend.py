"""The recommend the gateway writes itself (``ANSWER_COMPOSITION=titles``): the user's situation,
what the turn asked for, and the category, in two warm Korean sentences.

With the default 0.5B model a recommend of its own said the message back, copied the candidate
titles as a list or read as nonsense in most answers (bench/README.md "Answers"), while its
choice among the candidates is sound. So in this composition the model only chooses; the
opening words are ours, written from what the turn knows, and shown before the model's first
token. Variants are picked by the turn's number, so a conversation does not hear the same
sentence every turn.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    kind: str  # "first", "switch", "more", "among", "another", "back", "ask"
    location: str | None = None
    work_type: str | None = None
    turn: int = 0  # the session's turn number: picks the variant
    previous_category: Category | None = None  # for "more" that had to leave its category


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


def compose_recommend(opening: Opening) -> str:
    """Two sentences: what was chosen and for whom, then why it is worth it."""
    label = opening.category.label
    who = _situation(opening)
    for_whom = f"{who}께 맞는 " if who else ""
    kind = opening.kind
    if kind == "more":
        moved = opening.previous_category
        if moved is not None and moved is not opening.category:
            first = (
                f"{moved.label} 챌린지는 상황에 맞는 것을 모두 보여 드려서, 이번에는 "
                f"{for_whom}{label} 챌린지를 골라 봤어요."
            )
        else:
            first = f"앞서 보여 드린 것 말고 다른 {label} 챌린지를 더 골라 봤어요."
    elif kind == "among":
        first = "앞서 보여 드린 챌린지 가운데 말씀하신 것에 가장 가까운 것을 골라 봤어요."
    elif kind == "another":
        first = f"이번에는 분야를 바꿔 {for_whom}{label} 챌린지를 골라 봤어요."
    elif kind == "back":
        first = f"처음 이야기하던 {label} 챌린지로 돌아가 {for_whom}것들을 골라 봤어요."
    elif kind == "switch":
        first = f"이번에는 {for_whom}{label} 챌린지로 골라 봤어요."
    elif kind == "ask":
        first = f"말씀하신 내용에 맞춰 {for_whom}{label} 챌린지를 골라 봤어요."
    elif who:
        first = f"{who}께 맞는 {label} 챌린지를 골라 봤어요."
    else:
        first = f"말씀하신 고민에 어울리는 {label} 챌린지를 골라 봤어요."
    variants = _WHY[opening.category]
    why = variants[opening.turn % len(variants)]
    return f"{first} {why}"
