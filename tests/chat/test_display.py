"""AnswerDisplay, what a reader sees of an answer: whole titles without repeats, catalogue
descriptions, the gateway's recommend, and values that a length bound never leaves cut
mid-word, under every split of the stream; with no option, the plain display."""

from __future__ import annotations

import json
from collections.abc import Iterable

from app.chat.display import BOUND_MARGIN, AnswerDisplay
from app.llm.schema import Answer
from app.llm.scrubber import AnswerScrubber, ScrubResult
from tests.llm.test_scrubber import DOC, splits2

CATALOGUE = {
    "텀블러로 음료 마시기": "카페에서 일회용 컵 대신 개인 텀블러를 건네 보세요. 한 해 수백 개의 컵이 줄어요.",
    "장바구니 들고 장보기": "마트에 갈 때 접이식 장바구니를 챙겨 보세요.",
    "리필스테이션 이용하기": "다 쓴 세제 통을 씻어 필요한 만큼만 채워 오세요.",
}
T1, T2, T3 = CATALOGUE


def scrub(chunks: Iterable[str], **options: object) -> tuple[list[str], ScrubResult]:
    scrubber = AnswerDisplay(**options)  # type: ignore[arg-type]
    outputs = [scrubber.feed(chunk) for chunk in chunks]
    result = scrubber.finish()
    outputs.append(result.tail)
    return outputs, result


def every_split(doc: str) -> Iterable[list[str]]:
    for k in range(len(doc) + 1):
        yield [doc[:k], doc[k:]]


def layout(answer: Answer) -> str:
    return answer.recommend + "".join(
        f"\n\n{item.title}\n{item.description}" for item in answer.challenges
    )


def picks(recommend: str, *titles: str, **extra: str) -> str:
    return json.dumps(
        {"recommend": recommend, "challenges": [{"title": t, **extra} for t in titles]},
        ensure_ascii=False,
    )


def test_catalogue_descriptions_follow_their_titles_exactly() -> None:
    doc = picks("사무실에서 바로 시작할 수 있어요.", T1, T2)
    expected = (
        f"사무실에서 바로 시작할 수 있어요.\n\n{T1}\n{CATALOGUE[T1]}\n\n{T2}\n{CATALOGUE[T2]}"
    )
    for chunks in every_split(doc):
        outputs, result = scrub(chunks, catalogue=CATALOGUE)
        assert "".join(outputs) == expected, chunks
        assert result.answer is not None and layout(result.answer) == expected


def test_a_title_is_shown_only_once_complete() -> None:
    doc = picks("좋아요.", T1)
    scrubber = AnswerDisplay(catalogue=CATALOGUE)
    cut = doc.index(T1) + 3  # inside the title
    assert T1[:3] not in scrubber.feed(doc[:cut])
    rest = scrubber.feed(doc[cut:])
    assert rest.startswith(f"\n\n{T1}\n")


def test_a_repeated_title_is_dropped_before_it_is_shown() -> None:
    doc = picks("골라 봤어요.", T1, T2, T1)
    expected = f"골라 봤어요.\n\n{T1}\n{CATALOGUE[T1]}\n\n{T2}\n{CATALOGUE[T2]}"
    for chunks in every_split(doc):
        outputs, result = scrub(chunks, catalogue=CATALOGUE)
        assert "".join(outputs) == expected, chunks
        assert result.answer is not None
        assert [c.title for c in result.answer.challenges] == [T1, T2]


def test_a_title_the_catalogue_lacks_drops_its_challenge() -> None:
    doc = picks("골라 봤어요.", "우주에서 텀블러 쓰기", T3)
    outputs, result = scrub([doc], catalogue=CATALOGUE)
    assert "".join(outputs) == f"골라 봤어요.\n\n{T3}\n{CATALOGUE[T3]}"
    assert result.answer is not None and [c.title for c in result.answer.challenges] == [T3]


def test_the_models_own_description_is_neither_shown_nor_kept_with_a_catalogue() -> None:
    for description in ("모델이 베낀 헹꺼서 설명", None):
        extra = {"description": description} if description else {}
        doc = picks("골라 봤어요.", T1, **extra)
        if description is None:  # a description before its title, and a non-string one
            item = f'{{"description": null, "title": "{T1}"}}'
            doc = f'{{"recommend": "골라 봤어요.", "challenges": [{item}]}}'
        outputs, result = scrub([doc], catalogue=CATALOGUE)
        assert "".join(outputs) == f"골라 봤어요.\n\n{T1}\n{CATALOGUE[T1]}"
        assert result.answer is not None
        assert result.answer.challenges[0].description == CATALOGUE[T1]


def test_whole_titles_without_a_catalogue_keep_the_models_descriptions() -> None:
    doc = json.dumps(
        {
            "recommend": "추천해요.",
            "challenges": [
                {"title": T1, "description": "첫 설명이에요."},
                {"title": T1, "description": "반복된 설명이에요."},
                {"title": T2, "description": "둘째 설명이에요."},
            ],
        },
        ensure_ascii=False,
    )
    expected = f"추천해요.\n\n{T1}\n첫 설명이에요.\n\n{T2}\n둘째 설명이에요."
    for chunks in every_split(doc):
        outputs, result = scrub(chunks, whole_titles=True)
        assert "".join(outputs) == expected, chunks
        assert result.answer is not None and layout(result.answer) == expected


def test_partial_lists_catalogue_challenges_as_soon_as_their_title_is_complete() -> None:
    scrubber = AnswerDisplay(catalogue=CATALOGUE)
    doc = picks("골라 봤어요.", T1, T2)
    scrubber.feed(doc[: doc.index(T2) + 2])  # inside the second title
    partial = scrubber.partial()
    assert partial.recommend == "골라 봤어요."
    assert [(c.title, c.description) for c in partial.challenges] == [(T1, CATALOGUE[T1])]


BOUND = 100


def test_a_value_far_from_its_bound_streams_as_it_arrives() -> None:
    short = "오늘부터 한 가지씩 해 봐요. 분명 달라질 거예요"
    scrubber = AnswerDisplay(bounds={"recommend": BOUND})
    shown = scrubber.feed('{"recommend": "' + short[:10])
    assert shown == short[:10]
    assert scrubber.feed(short[10:]) == short[10:]


def test_a_value_cut_by_its_bound_ends_at_its_last_sentence_end() -> None:
    first = "가" * (BOUND - BOUND_MARGIN - 5) + "요. "
    second = "나" * 30 + "다. "
    cut = ("다" * BOUND)[: BOUND - len(first) - len(second)]  # the grammar stopped it here
    value = first + second + cut
    assert len(value) == BOUND
    doc = picks(value, T1)
    expected = f"{(first + second).rstrip()}\n\n{T1}\n{CATALOGUE[T1]}"
    for chunks in every_split(doc):
        outputs, result = scrub(chunks, catalogue=CATALOGUE, bounds={"recommend": BOUND})
        assert "".join(outputs) == expected, chunks
        assert result.answer is not None
        assert result.answer.recommend == (first + second).rstrip()
    # Near the bound nothing past the last sentence end is shown before the value ends.
    scrubber = AnswerDisplay(bounds={"recommend": BOUND})
    shown = scrubber.feed('{"recommend": "' + value)
    assert shown == (first + second).rstrip()


def test_a_value_that_ends_before_its_bound_is_shown_whole() -> None:
    value = "가" * (BOUND - 10) + " 끝"
    outputs, result = scrub([picks(value, T1)], catalogue=CATALOGUE, bounds={"recommend": BOUND})
    assert "".join(outputs).startswith(value + "\n\n")
    assert result.answer is not None and result.answer.recommend == value


def test_a_value_past_its_bound_had_no_grammar_and_is_shown_whole() -> None:
    long = "가" * (BOUND * 3) + " 끝"  # no sentence end anywhere: held near the bound, then shown
    for chunks in list(every_split(picks(long, T1)))[::37]:
        outputs, result = scrub(chunks, catalogue=CATALOGUE, bounds={"recommend": BOUND})
        assert "".join(outputs) == f"{long}\n\n{T1}\n{CATALOGUE[T1]}", chunks
        assert result.answer is not None and result.answer.recommend == long


PLAIN_DOCS = [
    DOC,
    '산문 ```json\n{"challenges": [{"description": "D", "title": ""}, {}], "recommend": "R"}',
    '{"recommend": "A", "recommend": 5, "challenges": [{"title": 1, "description": "D"}]}',
    '{"recommend": "잘린 \\ud83c',
]


def test_without_options_it_is_the_plain_display() -> None:
    for doc in PLAIN_DOCS:
        for chunks in [*splits2(doc), list(doc)]:
            plain, display = AnswerScrubber(), AnswerDisplay()
            for chunk in chunks:
                assert display.feed(chunk) == plain.feed(chunk), chunks
                assert display.partial() == plain.partial(), chunks
            assert display.finish() == plain.finish(), chunks
            assert display.partial() == plain.partial(), chunks


def test_the_gateway_recommend_prose_repeats_and_unknown_titles_together() -> None:
    """The caller shows the gateway's recommend first; what follows starts a new block."""
    doc = (
        "골랐어요 ```json\n"
        + picks("모델이 쓴 추천", T1, T1, "없는 제목", T2, description="모델이 베낀 설명")
        + "\n```"
    )
    given = "게이트웨이 추천이에요."
    expected = f"\n\n골랐어요\n\n{T1}\n{CATALOGUE[T1]}\n\n{T2}\n{CATALOGUE[T2]}"
    for chunks in every_split(doc):
        outputs, result = scrub(chunks, catalogue=CATALOGUE, recommend=given)
        assert "".join(outputs) == expected, chunks
        assert result.answer is not None
        assert layout(result.answer) == given + expected.replace("\n\n골랐어요", "")
        assert result.prose == "골랐어요"


def test_partial_never_lists_a_dropped_challenge() -> None:
    """A repeat is dropped whole, even when the model writes a second title into it: neither
    shown nor in the answer a stopped stream closes with."""
    doc = (
        f'{{"recommend": "R", "challenges": [{{"title": "{T1}", "description": "D1"}}, '
        f'{{"title": "{T1}", "description": "D2", "title": "{T2}"}}, '
        f'{{"title": "{T3}", "description": "D3"}}]}}'
    )
    display = AnswerDisplay(whole_titles=True)
    cut = doc.index(f'"{T2}"') + len(T2) + 2  # the second title read, the challenge still open
    assert display.feed(doc[:cut]) == f"R\n\n{T1}\nD1"
    assert [c.title for c in display.partial().challenges] == [T1]
    assert display.feed(doc[cut:]) == f"\n\n{T3}\nD3"
    result = display.finish()
    assert result.answer is not None and [c.title for c in result.answer.challenges] == [T1, T3]


def test_a_bounded_recommend_cut_by_the_stream_end_keeps_what_was_shown() -> None:
    value = "가" * (BOUND - BOUND_MARGIN - 5) + "요." + " 나" * 20  # no end near its bound
    doc = '{"recommend": "' + value
    for chunks in every_split(doc):
        display = AnswerDisplay(bounds={"recommend": BOUND})
        shown = "".join(display.feed(chunk) for chunk in chunks)
        assert value.startswith(shown) and len(shown) < len(value), chunks
        assert display.partial().recommend == shown  # while it is still being read
        result = display.finish()
        assert result.tail == "" and result.truncated and result.answer is None
        assert display.partial().recommend == shown
    display = AnswerDisplay(bounds={"recommend": BOUND})
    assert display.feed(doc) == value[: value.index(".") + 1]


# The picks composition: the model writes the numbers of the candidates it chooses.
PICKS = list(CATALOGUE.items())  # numbered 1, 2, 3 in the prompt


def test_each_pick_is_the_catalogues_title_and_description_once_read_whole() -> None:
    doc = '{"picks":[3,1]}'
    expected = f"골랐어요.\n\n{T3}\n{CATALOGUE[T3]}\n\n{T1}\n{CATALOGUE[T1]}"
    for chunks in every_split(doc):
        outputs, result = scrub(chunks, picks=PICKS, recommend="골랐어요.")
        # The gateway shows its recommend itself, before the first feed.
        assert "골랐어요." + "".join(outputs) == expected, chunks
        assert result.answer is not None and layout(result.answer) == expected


def test_a_pick_is_shown_when_its_number_ends_not_before() -> None:
    display = AnswerDisplay(picks=[(f"제목 {n}", f"설명 {n}.") for n in range(1, 13)])
    assert display.feed('{"picks":[1') == ""  # "1" may still become "12"
    assert display.feed("2,") == "제목 12\n설명 12."
    assert display.feed("3]}") == "\n\n제목 3\n설명 3."


def test_a_repeated_or_unknown_pick_is_dropped() -> None:
    for doc in ('{"picks":[2,2,9,0,true,"1",1]}', '{"picks": [2, 2, 9, 0, true, "1", 1]}'):
        outputs, result = scrub([doc], picks=PICKS, recommend="")
        assert "".join(outputs) == f"\n\n{T2}\n{CATALOGUE[T2]}\n\n{T1}\n{CATALOGUE[T1]}"
        assert result.answer is not None
        assert [c.title for c in result.answer.challenges] == [T2, T1]


def test_picks_cut_by_the_stream_end_keep_those_read_whole() -> None:
    display = AnswerDisplay(picks=PICKS, recommend="골랐어요.")
    assert display.feed('{"picks":[2,3') == f"\n\n{T2}\n{CATALOGUE[T2]}"
    result = display.finish()
    assert result.truncated and result.answer is None and result.tail == ""
    partial = display.partial()
    assert partial.recommend == "골랐어요."
    assert [(c.title, c.description) for c in partial.challenges] == [(T2, CATALOGUE[T2])]


def test_titles_still_read_from_the_catalogue_where_picks_are_asked() -> None:
    # A server without structured output may answer in titles anyway: still the catalogue's.
    doc = picks("", T2)
    outputs, result = scrub([doc], picks=PICKS, catalogue=CATALOGUE, recommend="골랐어요.")
    assert "".join(outputs) == f"\n\n{T2}\n{CATALOGUE[T2]}"
    assert result.answer is not None and [c.title for c in result.answer.challenges] == [T2]
