"""The gateway's own recommend (ANSWER_COMPOSITION=titles): for every category, kind of turn
and situation, two whole Korean sentences that name the category and speak to the situation,
pass the reader checks of bench/reader_checks.py, and vary from turn to turn."""

from __future__ import annotations

import itertools

import pytest

from app.chat.recommend import Opening, compose_recommend
from app.domain.categories import LOCATIONS, WORK_TYPES, Category
from bench.reader_checks import Turn, ends_whole, judge, split_sentences

KINDS = ("first", "switch", "more", "among", "another", "back", "ask")


@pytest.mark.parametrize("category", list(Category))
def test_every_recommend_reads_as_whole_korean_sentences(category: Category) -> None:
    situations = [(None, None), *itertools.product(sorted(LOCATIONS), sorted(WORK_TYPES))]
    for kind, (location, work_type), turn in itertools.product(KINDS, situations, range(3)):
        text = compose_recommend(Opening(category, kind, location, work_type, turn=turn))
        sentences = split_sentences(text)
        assert len(sentences) == 2 and all(ends_whole(s) for s in sentences), text
        if kind != "among":
            assert category.label in text, text
        if location and kind == "first":
            assert location in text and work_type is not None, text
        checked = Turn(message=None, display=text, terminal="close", close={"recommend": text})
        problems = judge(checked, ("clean", "repeats"))
        assert not any(problems.values()), (text, problems)


def test_a_conversation_does_not_hear_the_same_sentence_every_turn() -> None:
    said = [
        compose_recommend(Opening(Category.ENERGY_SAVING, "ask", turn=turn)) for turn in range(3)
    ]
    assert len(set(said)) == 3


def test_more_that_left_its_category_says_so() -> None:
    text = compose_recommend(
        Opening(Category.PLOGGING, "more", "산", "영업직", previous_category=Category.VEGAN)
    )
    assert "비건" in text and "플로깅" in text
    same = compose_recommend(Opening(Category.VEGAN, "more", previous_category=Category.VEGAN))
    assert "앞서 보여 드린 것 말고" in same
