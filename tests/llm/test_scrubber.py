"""AnswerScrubber: display text per SPEC "Display text", under awkward splits."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable

import pytest

from app.llm.schema import Answer
from app.llm.scrubber import AnswerScrubber, ScrubResult
from tests.support.display import display_of

KEYS = ("recommend", "challenges", "title", "description", "category")
_SURROGATE = re.compile("[\ud800-\udfff]")
_FENCE = re.compile(r"`{3,}(?:[jJ][sS][oO][nN])?")


def scrub(chunks: Iterable[str]) -> tuple[list[str], ScrubResult]:
    """Feed every chunk; return the outputs (the tail last) and the result."""
    scrubber = AnswerScrubber()
    outputs = [scrubber.feed(chunk) for chunk in chunks]
    result = scrubber.finish()
    outputs.append(result.tail)
    return outputs, result


def prose_of(before: str) -> str:
    """The shown prose of the text before the object: fences removed, trimmed."""
    return _FENCE.sub("", before).strip()


def assert_clean(outputs: list[str], expected: str = "") -> None:
    """No output, however small, holds half a surrogate pair, or a key in quotes (unless the
    expected display text itself holds that key in quotes, inside a value)."""
    keys = [f'"{key}"' for key in KEYS if f'"{key}"' not in expected]
    for out in outputs:
        assert not _SURROGATE.search(out), out
        for key in keys:
            assert key not in out, out


def splits2(text: str) -> Iterable[list[str]]:
    for k in range(len(text) + 1):
        yield [text[:k], text[k:]]


def splits3(text: str, count: int, seed: int = 0) -> Iterable[list[str]]:
    rng = random.Random(seed)
    for _ in range(count):
        a, b = sorted(rng.randrange(len(text) + 1) for _ in range(2))
        yield [text[:a], text[a:b], text[b:]]


# A document that holds every escape kind, Korean, emoji raw and as an escaped surrogate pair.
RECOMMEND = (
    '따옴표 " 역슬래시 \\ 슬래시 / 백스페이스 \b 폼피드 \f 줄바꿈 \n 복귀 \r 탭 \t '
    "é 새싹 🌱 그대로🌱 한글 끝"
)
CHALLENGES = [
    {"title": "텀블러 챌린지 ☕", "description": '일회용 컵 대신 "텀블러"를 써요.\n하루 1번!'},
    {"title": "플로깅 🏃", "description": "지구 🌍 를 위해 \\ 쓰레기 줍기"},
    {"title": "", "description": "제목 없는 챌린지"},
]
ANSWER = {"recommend": RECOMMEND, "challenges": CHALLENGES}
EXPECTED = RECOMMEND + "".join("\n\n" + c["title"] + "\n" + c["description"] for c in CHALLENGES)
# Hand-written so that every escape kind appears, the pair 🌱 both raw and escaped, and "/" both
# raw and as "\/".
DOC = (
    '{"recommend": "따옴표 \\" 역슬래시 \\\\ 슬래시 \\/ 백스페이스 \\b 폼피드 \\f 줄바꿈 \\n '
    '복귀 \\r 탭 \\t \\u00e9 새싹 \\ud83c\\udf31 그대로🌱 한글 끝", '
    '"challenges": [{"title": "텀블러 챌린지 \\u2615", '
    '"description": "일회용 컵 대신 \\"텀블러\\"를 써요.\\n하루 1번!"}, '
    '{"title": "플로깅 \\uD83C\\uDFC3", "description": "지구 🌍 를 위해 \\\\ 쓰레기 줍기"}, '
    '{"title": "", "description": "제목 없는 챌린지"}]}'
)


def test_document_is_what_the_test_says() -> None:
    assert json.loads(DOC) == ANSWER
    assert display_of(json.loads(DOC)) == EXPECTED


@pytest.mark.parametrize(
    "doc",
    [
        DOC,
        json.dumps(ANSWER, ensure_ascii=True),
        json.dumps(ANSWER, ensure_ascii=False, indent=2),
        "```json\n" + DOC + "\n```",
    ],
    ids=["handwritten", "ensure_ascii", "indented", "fenced"],
)
def test_every_split_point(doc: str) -> None:
    for chunks in splits2(doc):
        outputs, result = scrub(chunks)
        assert "".join(outputs) == EXPECTED, chunks
        assert_clean(outputs)
        assert result.complete and result.error is None
        assert result.answer == Answer.model_validate(ANSWER)


@pytest.mark.parametrize("doc", [DOC, json.dumps(ANSWER)], ids=["handwritten", "ensure_ascii"])
def test_sample_of_three_way_splits(doc: str) -> None:
    for chunks in splits3(doc, 3000):
        outputs, result = scrub(chunks)
        assert "".join(outputs) == EXPECTED, chunks
        assert_clean(outputs)
        assert result.answer == Answer.model_validate(ANSWER)


@pytest.mark.parametrize("doc", [DOC, json.dumps(ANSWER)], ids=["handwritten", "ensure_ascii"])
def test_one_character_at_a_time(doc: str) -> None:
    outputs, result = scrub(doc)
    assert "".join(outputs) == EXPECTED
    assert_clean(outputs)
    assert result == ScrubResult(
        tail="",
        answer=Answer.model_validate(ANSWER),
        complete=True,
        error=None,
        prose="",
        json_started=True,
    )


def test_values_stream_as_they_arrive() -> None:
    scrubber = AnswerScrubber()
    assert scrubber.feed('{"recommend": "오늘') == "오늘"
    assert scrubber.feed("의 추천") == "의 추천"
    assert scrubber.feed("\\") == ""  # could be any escape: held
    assert scrubber.feed("n다음") == "\n다음"
    assert scrubber.feed("\\ud83c") == ""  # half a pair: held
    assert scrubber.feed("\\udf31") == "🌱"
    assert scrubber.feed('", "challenges": [{"title": "T') == "\n\nT"
    assert scrubber.feed('", "description": "') == "\n"
    assert scrubber.feed('D"}]}') == "D"
    assert scrubber.finish().answer == Answer(
        recommend="오늘의 추천\n다음🌱", challenges=[{"title": "T", "description": "D"}]
    )


def test_keys_split_across_tokens_never_leak() -> None:
    # The old per-token regex leaked pieces of these keys.
    steps = [
        ('{"', ""),
        ("rec", ""),
        ("omm", ""),
        ('end"', ""),
        (":", ""),
        (' "', ""),
        ("안녕", "안녕"),
        ('",', ""),
        (' "chall', ""),
        ('enges":', ""),
        (" [{", ""),
        ('"ti', ""),
        ('tle":"', "\n\n"),
        ("제목", "제목"),
        ('","desc', ""),
        ("ription", ""),
        ('":"', "\n"),
        ("설명", "설명"),
        ('"', ""),
        ("}]", ""),
        ("}", ""),
    ]
    scrubber = AnswerScrubber()
    for token, shown in steps:
        assert scrubber.feed(token) == shown, token
    result = scrubber.finish()
    assert result.tail == ""
    assert result.answer == Answer(
        recommend="안녕", challenges=[{"title": "제목", "description": "설명"}]
    )


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("```json\n", "\n```"),
        ("```\n", "\n```\n"),
        ("```JSON\n", "```"),
        ("```json", "```"),
        ("", ""),
        ("\n\n  ", "\n\n"),
        ("````json\n", "\n````"),
    ],
)
def test_fences_are_never_shown(before: str, after: str) -> None:
    doc = before + DOC + after
    for chunks in [list(doc), *splits3(doc, 300)]:
        outputs, result = scrub(chunks)
        assert "".join(outputs) == EXPECTED
        assert result.prose == ""
        assert result.answer == Answer.model_validate(ANSWER)


def test_prose_before_is_shown_and_prose_after_is_not() -> None:
    doc = "네, 추천해 드릴게요!\n\n```json\n" + DOC + '\n```\n도움이 되었나요? {"x": 1}'
    for chunks in [list(doc), *splits2(doc)]:
        outputs, result = scrub(chunks)
        assert "".join(outputs) == "네, 추천해 드릴게요!\n\n" + EXPECTED
        assert result.prose == "네, 추천해 드릴게요!"
        assert result.json_started
        assert result.answer == Answer.model_validate(ANSWER)
        assert_clean(outputs)


def test_plain_prose_answer() -> None:
    doc = "  ```\n죄송해요, 저는 환경 챌린지만 추천할 수 있어요.\n\n예: `플로깅` ``x``\n```\n  "
    expected = "죄송해요, 저는 환경 챌린지만 추천할 수 있어요.\n\n예: `플로깅` ``x``"
    assert prose_of(doc) == expected
    for chunks in [list(doc), *splits2(doc)]:
        outputs, result = scrub(chunks)
        assert "".join(outputs) == expected
        assert result.prose == expected
        assert result.answer is None and not result.complete
        assert not result.json_started
        assert result.error == "the model output holds no JSON object"


def test_prose_fence_edge_cases() -> None:
    for doc, expected in [
        ("a ``` b", "a  b"),
        ("a ```js", "a js"),
        ("a ```jsonx", "a x"),
        ("a ```Json", "a"),
        ("``", "``"),
        ("[1, 2] 목록", "[1, 2] 목록"),
    ]:
        assert prose_of(doc) == expected
        for chunks in [list(doc), *splits2(doc)]:
            outputs, result = scrub(chunks)
            assert "".join(outputs) == expected, (doc, chunks)
            assert result.prose == expected


def test_unknown_keys_and_nested_values_are_skipped() -> None:
    doc = (
        '{"category": "VEGAN", "meta": {"recommend": "no", "title": "no", '
        '"list": [[1, {"description": "no"}], -1.5e3, 0, true, false, null, "s\\"x"]}, '
        '"recommend": "R", "n": 12345678901234567890, '
        '"challenges": [{"title": "T", "extra": {"title": "nested"}, "category": "ZERO_WASTE", '
        '"description": "D", "n": 3, "tags": ["title", "description"]}, "stray", 7, '
        '{"label": "x", "points": [1.0e+2]}], "title": "not in an item"}'
    )
    for chunks in [list(doc), *splits2(doc)]:
        outputs, result = scrub(chunks)
        assert "".join(outputs) == "R\n\nT\nD" == display_of(json.loads(doc))
        assert_clean(outputs)
        assert result.complete
        # "stray" and 7 are not challenge objects: the answer is invalid, with the reason.
        assert result.answer is None
        assert result.error is not None and "challenges.1" in result.error


def test_trailing_commas_are_tolerated() -> None:
    doc = '{"recommend": "R", "challenges": [{"title": "T", "description": "D",},], "x": [1,],}'
    for chunks in [list(doc), *splits2(doc)]:
        outputs, result = scrub(chunks)
        assert "".join(outputs) == "R\n\nT\nD"
        assert result.answer == Answer(
            recommend="R", challenges=[{"title": "T", "description": "D"}]
        )


def test_truncated_stream_at_every_point() -> None:
    doc = "```json\n" + DOC
    for k in range(len(doc)):
        outputs, result = scrub([doc[:k]])
        shown = "".join(outputs[:-1])
        assert EXPECTED.startswith(shown), k
        assert result.answer is None and not result.complete
        assert result.error is not None
        if k > len("```json\n"):
            assert result.tail in ("", "\ufffd")  # only a pending high surrogate is released
            assert "truncated" in result.error
        else:  # cut inside the fence: "`", "``" and "js" are prose until proven a fence
            assert result.tail == result.prose == prose_of(doc[:k])


def test_truncated_inside_a_surrogate_pair_releases_replacement() -> None:
    scrubber = AnswerScrubber()
    assert scrubber.feed('{"recommend": "a\\ud83c') == "a"
    result = scrubber.finish()
    assert result.tail == "\ufffd"
    assert result.error is not None and "inside a string" in result.error


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("it\\'s", "it's"),  # unknown escape: the character without its backslash
        ("\\x41", "x41"),
        ("\\u12G4", "\ufffdG4"),  # \u cut short: U+FFFD, then the rest as text
        ("\\u12", "\ufffd"),  # ... even when the quote cut it
        ("\\u", "\ufffd"),
        ("a\\ud83cb", "a\ufffdb"),  # lone high surrogate
        ("a\\ud83c", "a\ufffd"),  # lone high at the end of the string
        ("\\udf31a", "\ufffda"),  # lone low surrogate
        ("\\ud83c\\u0041", "\ufffdA"),  # high followed by a non-surrogate escape
        ("\\ud83c\\n", "\ufffd\n"),  # high followed by a simple escape
        ("\\ud83c\\ud83c\\udf31", "\ufffd🌱"),  # two highs, then a low
        ("\\ud83c\\q", "\ufffdq"),
        ("\\ud83c\\u12", "\ufffd\ufffd"),
        ("\\udf31\\ud83c", "\ufffd\ufffd"),
        ("raw\tcontrol\x01", "raw\tcontrol\x01"),  # raw control characters are kept
    ],
)
def test_invalid_escapes_and_lone_surrogates(raw: str, shown: str) -> None:
    doc = '{"recommend": "' + raw + '", "challenges": []}'
    for chunks in [list(doc), *splits2(doc)]:
        outputs, result = scrub(chunks)
        assert "".join(outputs) == shown, chunks
        assert_clean(outputs)
        assert result.answer == Answer(recommend=shown, challenges=[])


def test_escaped_keys_are_keys() -> None:
    doc = '{"\\u0072ecommend": "R", "challenges": [{"\\u0074itle": "T", "descr\\u0069ption": "D"}]}'
    outputs, result = scrub(doc)
    assert "".join(outputs) == "R\n\nT\nD" == display_of(json.loads(doc))
    assert result.answer == Answer(recommend="R", challenges=[{"title": "T", "description": "D"}])


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        # description before title: description "\n" title
        ('{"recommend": "R", "challenges": [{"description": "D", "title": "T"}]}', "R\n\nD\nT"),
        # challenges before recommend: recommend comes last, as its own block
        ('{"challenges": [{"title": "T", "description": "D"}], "recommend": "R"}', "T\nD\n\nR"),
        # an empty recommend keeps the usual layout exactly
        ('{"recommend": "", "challenges": [{"title": "T", "description": "D"}]}', "\n\nT\nD"),
        ('{"recommend": "R", "challenges": [{"title": "", "description": ""}]}', "R\n\n\n"),
        ('{"recommend": "R", "challenges": [{"title": "T"}, {"description": "D"}]}', "R\n\nT\n\nD"),
        ('{"recommend": "R", "challenges": [{}, {"x": 1}, {"title": "T"}]}', "R\n\nT"),
        ('{"recommend": "A", "recommend": "B"}', "A\n\nB"),  # shown as they arrive
        ('{"recommend": 5, "challenges": [{"title": ["T"], "description": null}]}', ""),
        ("{}", ""),
    ],
)
def test_unusual_orders(doc: str, expected: str) -> None:
    for chunks in [list(doc), *splits2(doc)]:
        outputs, _ = scrub(chunks)
        assert "".join(outputs) == expected


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ('{"recommend": "R", "challenges": "none"}', "challenges: Input should be a valid list"),
        ('{"challenges": []}', "recommend: Field required"),
        ('{"recommend": 5}', "recommend: Input should be a valid string"),
        (
            '{"recommend": "R", "challenges": [{"title": 1, "description": "D"}]}',
            "challenges.0.title: Input should be a valid string",
        ),
        ('{"recommend": "R", "challenges": [{"title": "T"}]}', "challenges.0.description: Field"),
    ],
)
def test_schema_invalid_answers_give_a_reason(doc: str, reason: str) -> None:
    _, result = scrub([doc])
    assert result.complete
    assert result.answer is None
    assert result.error is not None
    assert result.error.startswith("the JSON answer does not match the schema: ")
    assert reason in result.error


@pytest.mark.parametrize(
    ("doc", "shown", "where"),
    [
        ('{"recommend": "R" "challenges": []}', "R", "character 18"),
        ('{"recommend" "R"}', "", "expected ':' after a key"),
        ("{'recommend': 'R'}", "", "expected a key in double quotes"),
        ('{"recommend": "R", "x": tru}', "R", "found 'tru'"),
        ('{"recommend": "R", "x": [1,,2]}', "R", "expected a value"),
        ('{"recommend": "R", "x": [1}', "R", "expected ',' or ']'"),
        ('{"recommend": "R",, "x": 1}', "R", "expected a key"),
    ],
)
def test_syntax_errors_stop_the_display_with_a_position(doc: str, shown: str, where: str) -> None:
    for chunks in [list(doc), [doc]]:
        outputs, result = scrub([*chunks, ', "challenges": [{"title": "T"}]}'])
        assert "".join(outputs) == shown
        assert result.answer is None and not result.complete
        assert result.error is not None and where in result.error
        assert result.error.startswith("invalid JSON at character ")


def test_whitespace_and_numbers_anywhere() -> None:
    doc = (
        '\r\n{ \t"recommend"\n:\r\n"R"\t,\n "n" : -0.5e-3 , "i":0,"b" :true ,"z": null,'
        ' "big": ' + "9" * 5000 + ' , "challenges" : [ ] }'
    )
    outputs, result = scrub(doc)
    assert "".join(outputs) == "R"
    assert result.answer == Answer(recommend="R", challenges=[])


def test_empty_feeds_and_misuse() -> None:
    scrubber = AnswerScrubber()
    assert scrubber.feed("") == ""
    assert scrubber.feed('{"recommend": "') == ""
    assert scrubber.feed("") == ""
    assert scrubber.feed('R"}') == "R"
    assert scrubber.feed("") == ""
    assert scrubber.finish().answer == Answer(recommend="R")
    with pytest.raises(RuntimeError):
        scrubber.feed("x")
    with pytest.raises(RuntimeError):
        scrubber.finish()


def test_nothing_at_all() -> None:
    outputs, result = scrub([])
    assert outputs == [""]
    assert result == ScrubResult(
        tail="",
        answer=None,
        complete=False,
        error="the model output holds no JSON object",
        prose="",
        json_started=False,
    )
