import pytest

from app.chat.intent import named_category, normalize_message
from app.domain.categories import LOCATIONS, WORK_TYPES, Category, normalize_choice, parse_category


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
    ("message", "category"),
    [
        ("비건 챌린지 알려줘", Category.VEGAN),
        ("비건챌린지", Category.VEGAN),
        ("에너지절약 하는 법", Category.ENERGY_SAVING),
        ("제로 웨이스트 시작", Category.ZERO_WASTE),
        ("ENERGY_SAVING 추천", Category.ENERGY_SAVING),
        ("zero_waste please", Category.ZERO_WASTE),
        ("디지털 탄소 줄이는 법", Category.DIGITAL_CARBON),
        ("우유 대신 두유", None),  # described, not named: the vectors decide
        ("비건 플로깅", None),  # two names: the vectors decide
        ("비건 말고 플로깅", Category.PLOGGING),  # the one it leaves aside is not asked for
        ("탄소", None),
    ],
)
def test_named_category_is_an_exact_spelling_of_one_label_or_code(
    message: str, category: Category | None
) -> None:
    assert named_category(normalize_message(message)) is category


def test_normalize_message_drops_controls_and_collapses_space() -> None:
    assert normalize_message("  비건\x00\t 챌린지\n") == "비건 챌린지"
    assert normalize_message("100% 재활용") == "100% 재활용"
