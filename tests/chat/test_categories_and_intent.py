import pytest

from app.chat.categories import LOCATIONS, WORK_TYPES, Category, normalize_choice, parse_category
from app.chat.intent import IntentKind, classify, has_eco_vocabulary, normalize_message


@pytest.mark.parametrize("category", list(Category))
def test_category_accepts_label_and_code(category: Category) -> None:
    assert parse_category(category.label) is category
    assert parse_category(category.code) is category
    assert parse_category(category.code.lower()) is category
    assert parse_category(f"  {category.label.replace(' ', '')} ") is category


@pytest.mark.parametrize("text", ["", "채식주의", "ZERO", "비 건건", "DROP TABLE"])
def test_unknown_category_is_none(text: str) -> None:
    assert parse_category(text) is None


def test_locations_and_work_types_are_closed_sets() -> None:
    assert normalize_choice(" 바닷가 ", LOCATIONS) == "바닷가"
    assert normalize_choice("우주", LOCATIONS) is None
    assert normalize_choice("재택근무", WORK_TYPES) == "재택근무"
    assert normalize_choice("재택", WORK_TYPES) is None


@pytest.mark.parametrize(
    ("message", "kind", "category"),
    [
        ("비건 챌린지 알려줘", IntentKind.SWITCH, Category.VEGAN),
        ("플로깅 하고 싶어", IntentKind.SWITCH, Category.PLOGGING),
        ("디지털 탄소 줄이는 법", IntentKind.SWITCH, Category.DIGITAL_CARBON),
        ("ENERGY_SAVING 추천", IntentKind.SWITCH, Category.ENERGY_SAVING),
        ("다른 거", IntentKind.ANOTHER, None),
        ("아무거나 추천해줘", IntentKind.ANOTHER, None),
        ("처음 카테고리로", IntentKind.BACK_TO_BASE, None),
        ("처음으로 돌아가줘", IntentKind.BACK_TO_BASE, None),
        ("ㅁㄴㅇㄹ", IntentKind.NONSENSE, None),
        ("?!?! 123", IntentKind.NONSENSE, None),
        ("오늘 주식 어때?", IntentKind.ASK, None),
        ("회사에서 할 만한 거 추천해줘", IntentKind.ASK, None),
    ],
)
def test_classify(message: str, kind: IntentKind, category: Category | None) -> None:
    intent = classify(normalize_message(message))
    assert intent.kind is kind
    assert intent.category is category


def test_eco_vocabulary() -> None:
    assert has_eco_vocabulary("환경에 좋은 습관")
    assert not has_eco_vocabulary("오늘 주식 어때?")
    assert not has_eco_vocabulary("계산 생산 산업")  # no accidental substring hits


def test_normalize_message_drops_controls_and_collapses_space() -> None:
    assert normalize_message("  비건\x00\t 챌린지\n") == "비건 챌린지"
    assert normalize_message("100% 재활용") == "100% 재활용"
