"""Each reader check of bench/answer_quality.py on fixed strings: one answer it must pass and
the failures it must catch (the kinds seen on make run: garbled catalogue copies, repeated
sentences and titles, the message said back, other scripts, values cut by a length bound)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.reader_checks import Turn, catalogue, ends_whole, judge, passed, repeated_sentences

TUMBLER = "텀블러로 음료 마시기"
BAG = "장바구니 들고 장보기"


def _body(title: str) -> str:
    return catalogue().by_title[title].body


def _item(title: str, description: str | None = None, category: str = "ZERO_WASTE") -> dict:
    return {
        "title": title,
        "description": _body(title) if description is None else description,
        "category": category,
        "label": "제로웨이스트",
    }


def _turn(
    recommend: str = "사무실에서 일회용품을 줄이는 챌린지 두 가지를 골라 봤어요.",
    items: list[dict[str, Any]] | None = None,
    *,
    message: str | None = "회사에서 쓰레기 줄이는 방법 알려줘",
    display: str | None = None,
    **expect: Any,
) -> Turn:
    items = [_item(TUMBLER), _item(BAG)] if items is None else items
    close = {"recommend": recommend, "challenges": items}
    layout = recommend + "".join(f"\n\n{i['title']}\n{i['description']}" for i in items)
    return Turn(
        message=message,
        display=layout if display is None else display,
        terminal="close",
        close=close,
        **expect,
    )


def _failed(turn: Turn) -> set[str]:
    return {name for name, problems in judge(turn).items() if problems}


def test_a_good_answer_passes_every_check() -> None:
    turn = _turn(categories=["ZERO_WASTE"], location="도시", work_type="사무직")
    assert passed(judge(turn)), turn.problems


def test_an_error_or_a_display_that_differs_from_the_close_fails_close() -> None:
    error = Turn(message="안녕", display="", terminal="error", status=502)
    assert "close" in _failed(error)
    differs = _turn(display="사무실에서 일회용품을 줄이는 챌린지 두 가지를 골라 봤어요.")
    assert _failed(differs) == {"close"}


@pytest.mark.parametrize(
    "recommend",
    [
        "물티슈 대신 쓸 만한 거 없나?",  # the whole message
        "물티슈 대신 쓸 만한 거를 없나요? 제가 골라 볼게요.",  # nearly, as its first sentence
        "네, 물티슈 대신 쓸 만한 거 없나 궁금하시군요.",  # the message inside
    ],
)
def test_the_message_said_back_fails_echo(recommend: str) -> None:
    assert "echo" in _failed(_turn(recommend, message="물티슈 대신 쓸 만한 거 없나?"))


def test_a_recommend_that_answers_the_message_is_no_echo() -> None:
    recommend = "물티슈 대신 손수건과 다회용 행주를 써 보세요. 아이와 함께 시작하기 좋아요."
    assert "echo" not in _failed(_turn(recommend, message="물티슈 대신 쓸 만한 거 없나?"))


def test_a_sentence_twice_or_a_title_twice_fails_repeats() -> None:
    twice = _turn("텀블러를 챙겨 보세요. 오늘부터 시작해요. 텀블러를 챙겨 보세요.")
    assert _failed(twice) == {"repeats"}
    doubled = _turn(items=[_item(TUMBLER), _item(TUMBLER)])
    assert "repeats" in _failed(doubled)
    assert repeated_sentences("짧아. 짧아.") == []  # short pieces may repeat


def test_a_garbled_catalogue_copy_fails_catalogue() -> None:
    body = _body(TUMBLER)
    garbled = body.replace("텀블러", "텀블로", 1).replace("일회용", "일휘용", 1)
    assert "catalogue" in _failed(_turn(items=[_item(TUMBLER, garbled), _item(BAG)]))
    assert "catalogue" not in _failed(_turn(items=[_item(TUMBLER), _item(BAG)]))


def test_an_unknown_title_or_an_unrelated_description_fails_catalogue() -> None:
    unknown = _item(TUMBLER)
    unknown["title"] = "우주에서 텀블러 쓰기"
    assert "catalogue" in _failed(_turn(items=[unknown]))
    unrelated = _item(TUMBLER, "주말마다 자전거를 타고 한강까지 다녀오며 바람을 쐬어 보세요.")
    assert "catalogue" in _failed(_turn(items=[unrelated]))


@pytest.mark.parametrize(
    "recommend",
    [
        "한국에너지공단이 韩国에서 추천하는 챌린지예요.",  # Chinese characters
        "エコ 챌린지를 추천해요.",  # kana
        "회사 타FK비실에서 시작해 보세요.",  # a Latin piece inside a Korean word
        '추천해요. "title": 텀블러',  # JSON debris
        "오늘부터 사무실 조명을 덜 켤",  # cut mid-sentence by a length bound
    ],
)
def test_other_scripts_debris_and_cut_values_fail_clean(recommend: str) -> None:
    assert "clean" in _failed(_turn(recommend))


def test_values_ending_as_korean_sentences_end_are_whole() -> None:
    for value in ("해 보세요", "좋아요!", "시작해 볼까", "추천합니다.", "같이 해요 🌱"):
        assert ends_whole(value), value
    for value in ("조명을 덜 켤", "텀블러를 챙기고", "에너지 절약 챌린지"):
        assert not ends_whole(value), value


def test_a_category_the_turn_did_not_ask_for_fails_category() -> None:
    assert "category" in _failed(_turn(categories=["VEGAN"]))
    assert "category" in _failed(_turn(not_categories=["ZERO_WASTE"]))
    assert "category" not in _failed(_turn(categories=["ZERO_WASTE", "UPCYCLING"]))


def test_a_refusal_an_empty_recommend_or_no_challenge_fails_substance() -> None:
    apology = "죄송합니다, 저는 일상에서 실천할 수 있는 친환경 챌린지를 추천하지 않습니다."
    assert "substance" in _failed(_turn(apology))
    assert "substance" in _failed(_turn("좋아요."))
    assert "substance" in _failed(_turn(items=[]))


def test_a_challenge_outside_the_base_info_situation_fails_fits() -> None:
    doc = catalogue().by_title[TUMBLER]
    assert "바닷가" not in doc.locations
    assert "fits" in _failed(_turn(location="바닷가", work_type="사무직"))
    assert "fits" not in _failed(_turn(location="도시", work_type="사무직"))


def test_more_must_bring_new_challenges_and_among_must_stay_among_the_last() -> None:
    assert "relation" in _failed(_turn(relation="new", earlier_titles=[TUMBLER]))
    assert "relation" not in _failed(_turn(relation="new", earlier_titles=["메일함 비우기"]))
    among = _turn(items=[_item(TUMBLER)], relation="among", previous_titles=[TUMBLER, BAG])
    assert "relation" not in _failed(among)
    outside = _turn(relation="among", previous_titles=[TUMBLER])
    assert "relation" in _failed(outside)
