"""The gateway's own recommend (ANSWER_COMPOSITION=picks): for every category, kind of turn,
situation and constraint, whole Korean sentences that name the first challenge and speak to
the turn, pass the reader checks of bench/reader_checks.py, and differ between messages."""

from __future__ import annotations

import itertools

import pytest

from app.chat.constraints import Constraint
from app.chat.recommend import NO_ANSWER, Opening, compose_recommend
from app.domain.categories import LOCATIONS, WORK_TYPES, Category
from bench.reader_checks import Turn, ends_whole, judge, split_sentences

KINDS = ("first", "switch", "more", "among", "another", "back", "ask", "plain")
LEADS = ("텀블러로 음료 마시기", "장바구니 들고 장보기", "LED 전구로 바꾸기")


@pytest.mark.parametrize("category", list(Category))
def test_every_recommend_reads_as_whole_korean_sentences(category: Category) -> None:
    situations = [(None, None), *itertools.product(sorted(LOCATIONS), sorted(WORK_TYPES))]
    wants: list[tuple[Constraint, ...]] = [
        (),
        (Constraint.FREE,),
        (Constraint.EASY, Constraint.HOME),
    ]
    for kind, (location, work_type), lead, wanted, unmet in itertools.product(
        KINDS, situations, LEADS, wants, (False, True)
    ):
        opening = Opening(
            category, kind, location, work_type, lead=lead, constraints=wanted, unmet=unmet
        )
        text = compose_recommend(opening)
        sentences = split_sentences(text)
        assert 2 <= len(sentences) <= 3 and all(ends_whole(s) for s in sentences), text
        assert f"'{lead}'" in text, "it names the first challenge"
        if wanted:
            assert wanted[-1].phrase in text, text
        if wanted and unmet:
            assert "찾지 못했어요" in text, "it says plainly that none satisfies them"
        if location and kind == "first" and not wanted:
            assert location in text and work_type is not None, text
        checked = Turn(message=None, display=text, terminal="close", close={"recommend": text})
        problems = judge(checked, ("clean", "repeats"))
        assert not any(problems.values()), (text, problems)


def test_a_question_is_answered_first_or_said_plainly_not_held() -> None:
    answer = "물로만 헹구면 냄새가 남으니 베이킹소다를 푼 물에 담가 두세요."
    text = compose_recommend(
        Opening(
            Category.ZERO_WASTE, "first", lead="텀블러로 음료 마시기", question=True, answer=answer
        )
    )
    assert text.startswith(answer) and "'텀블러로 음료 마시기'" in text
    text = compose_recommend(
        Opening(Category.ZERO_WASTE, "first", lead="텀블러로 음료 마시기", question=True)
    )
    said = NO_ANSWER.format(subject="'텀블러로 음료 마시기' 챌린지")
    assert text.startswith(said) and len(split_sentences(said)) == 1
    assert "담겨 있지 않아요" in said, "plainly: the catalogue does not hold it"
    related = compose_recommend(
        Opening(
            Category.ZERO_WASTE,
            "first",
            lead="텀블러로 음료 마시기",
            question=True,
            answer=answer,
            answer_sure=False,
        )
    )
    first, second, *_ = split_sentences(related)
    assert "담겨 있지 않지만" in first and second == answer, "the closest, said to be only that"
    unanswered_more = compose_recommend(
        Opening(Category.ZERO_WASTE, "more", lead="텀블러로 음료 마시기", question=True)
    )
    for text in (related, unanswered_more):
        assert text.count("'텀블러로 음료 마시기'") == 1, "the first challenge named once"
    free = compose_recommend(
        Opening(
            Category.ZERO_WASTE,
            "ask",
            lead="텀블러로 음료 마시기",
            question=True,
            constraints=(Constraint.FREE,),
        )
    )
    assert "돈이 들지 않는" in free and free.count("'텀블러로 음료 마시기'") == 1


def test_different_messages_do_not_hear_the_same_opening() -> None:
    messages = [f"메시지 {n}" for n in range(8)]
    openings = {
        split_sentences(
            compose_recommend(Opening(Category.VEGAN, "first", lead="두부 요리", message=m))
        )[0]
        for m in messages
    }
    assert len(openings) >= 3, "the wording varies with the message"
    leads = {
        compose_recommend(Opening(Category.VEGAN, "first", lead=lead, message="같은 말"))
        for lead in LEADS
    }
    assert len(leads) == len(LEADS), "and with the challenge it puts first"


@pytest.mark.parametrize("category", list(Category))
def test_a_plain_ask_hears_one_of_the_fields_first_steps_in_many_words(category: Category) -> None:
    """ "비건 챌린지 추천해줘" and "비건 뭐부터 해?" lead to the same first step: the wording
    varies with the message, in whole sentences whatever the particles."""
    firsts = set()
    asks = ("추천해 줘", "뭐부터 해?", "하나만 골라 줘")
    for n, ask, lead in itertools.product(range(8), asks, LEADS):
        text = compose_recommend(Opening(category, "plain", lead=lead, message=f"{ask} {n}"))
        sentences = split_sentences(text)
        assert len(sentences) == 2 and all(ends_whole(s) for s in sentences), text
        assert f"'{lead}'" in text and category.label in sentences[0], text
        checked = Turn(message=None, display=text, terminal="close", close={"recommend": text})
        assert not any(judge(checked, ("clean", "repeats")).values()), text
        if lead == LEADS[0]:
            firsts.add(sentences[0])
    assert len(firsts) >= 9  # by how it asked, then by the message


@pytest.mark.parametrize("category", list(Category))
def test_a_message_of_the_fields_name_alone_is_not_said_back(category: Category) -> None:
    """ "디지털탄소 챌린지 ㄱㄱ": "디지털 탄소 챌린지 가운데 …" would hold it word for word."""
    message = f"{category.label.replace(' ', '')} 챌린지 ㄱㄱ"
    for kind, n in itertools.product(KINDS, range(8)):
        opening = Opening(category, kind, lead=LEADS[0], message=f"{message}{'!' * n}")
        text = compose_recommend(opening)
        turn = Turn(
            message=opening.message, display=text, terminal="close", close={"recommend": text}
        )
        assert not judge(turn, ("echo",))["echo"], text


def test_more_that_left_its_category_says_so() -> None:
    text = compose_recommend(
        Opening(
            Category.PLOGGING, "more", "산", "영업직", previous_category=Category.VEGAN, lead="줍기"
        )
    )
    assert "비건" in text and "플로깅" in text


def test_a_critique_answered_in_another_field_says_its_own_had_none() -> None:
    text = compose_recommend(
        Opening(
            Category.MEDIA,
            "ask",
            previous_category=Category.PLOGGING,
            lead="아이와 환경 그림책 읽기",
            constraints=(Constraint.HOME, Constraint.FAMILY),
        )
    )
    assert text.startswith(
        "플로깅 챌린지에는 집에서 할 수 있고 가족과 함께 할 수 있는 마땅한 것이 더 없어서"
    )
    assert "문화 공유" in text and ends_whole(text)
    # Its own field: the usual opening.
    kept = compose_recommend(
        Opening(
            Category.MEDIA,
            "ask",
            previous_category=Category.MEDIA,
            lead="아이와 환경 그림책 읽기",
            constraints=(Constraint.HOME,),
        )
    )
    assert "더 없어서" not in kept


def test_korean_particles_follow_the_last_syllable() -> None:
    with_final = compose_recommend(Opening(Category.VEGAN, "another", lead="두부 반찬"))
    without = compose_recommend(Opening(Category.VEGAN, "another", lead="채식 도시락 싸기"))
    assert "'두부 반찬'을" in with_final and "'채식 도시락 싸기'를" in without


def test_no_challenge_left_is_said_plainly() -> None:
    text = compose_recommend(Opening(Category.MEDIA, "more"))
    assert "찾지 못했어요" in text and ends_whole(text)


@pytest.mark.parametrize(
    ("work_type", "said", "not_said"),
    [
        ("현장직", "현장에서 할 수 있는", "회사에서"),
        ("영업직", "일하면서 할 수 있는", "회사에서"),
        ("사무직", "회사에서 할 수 있는", "현장에서"),
        (None, "회사에서 할 수 있는", "현장에서"),
    ],
)
def test_work_asked_for_is_said_as_the_users_work_is(
    work_type: str | None, said: str, not_said: str
) -> None:
    # "현장에서 일하는데 할 수 있는 거 있어?" had heard "회사에서 할 수 있는 것을 찾으셔서".
    for kind, unmet, variant_lead in itertools.product(("ask", "among"), (False, True), LEADS):
        opening = Opening(
            Category.PLOGGING,
            kind,
            None,
            work_type,
            lead=variant_lead,
            constraints=(Constraint.FREE, Constraint.WORK),
            unmet=unmet,
        )
        text = compose_recommend(opening)
        assert said in text and not_said not in text, text
        checked = Turn(message=None, display=text, terminal="close", close={"recommend": text})
        problems = judge(checked, ("clean", "repeats"))
        assert not any(problems.values()), (text, problems)
