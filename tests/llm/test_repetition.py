"""RepetitionGuard: loops end the stream, ordinary text passes whole, any chunking."""

from __future__ import annotations

import itertools
import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from app.llm.repetition import RepetitionGuard

SENTENCES = [
    "오늘은 대중교통을 이용해요.",
    "텀블러를 챙겨서 일회용 컵을 줄여 보세요!",
    "장바구니를 들고 시장에 가요.",
    "Try a meatless Monday this week?",
    "계단을 이용하면 전기도 아끼고 건강도 챙길 수 있어요…",
    "샤워 시간을 5분 줄여 볼까요\n",
]


def run(text: str, cuts: list[int]) -> tuple[str, bool]:
    """Feed ``text`` cut at ``cuts``; the shown text and whether the guard saw a loop."""
    guard = RepetitionGuard()
    bounds = [0, *sorted(cuts), len(text)]
    shown = "".join(guard.feed(text[a:b]) for a, b in itertools.pairwise(bounds))
    return shown + guard.finish(), guard.looping


def sentences_of(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?…\n])", text) if len(s.strip()) >= 8]


def chunkings(text: str, rng: random.Random) -> list[list[int]]:
    """Per character, as one piece, and a few random cuts."""
    size = len(text)
    return [
        list(range(1, size)),
        [],
        *(sorted(rng.sample(range(1, size), min(size - 1, 12))) for _ in range(3)),
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=12), st.integers(0, 2**32))
def test_text_without_a_third_copy_passes_whole_in_any_chunking(
    picks: list[str], seed: int
) -> None:
    kept: list[str] = []
    for sentence in picks:
        if kept.count(sentence) < 2:
            kept.append(sentence)
    text = " ".join(kept)
    for cuts in chunkings(text, random.Random(seed)):
        assert run(text, cuts) == (text, False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(SENTENCES), min_size=3, max_size=12), st.integers(0, 2**32))
def test_no_sentence_is_shown_a_third_time_in_any_chunking(picks: list[str], seed: int) -> None:
    text = " ".join([*picks, picks[0], picks[0], picks[0]])  # a third copy at least
    for cuts in chunkings(text, random.Random(seed)):
        shown, looping = run(text, cuts)
        assert looping
        assert text.startswith(shown)
        seen = sentences_of(shown)
        assert all(seen.count(s) <= 2 for s in seen), shown
        assert shown.count(picks[0].rstrip(".!?…")) <= 2, shown  # not even its start


def test_a_held_prefix_is_released_when_the_sentence_turns_out_different() -> None:
    same_start = "오늘은 대중교통을 이용해요."
    text = f"{same_start} {same_start} 오늘은 대중교통 대신 자전거를 타요."
    assert run(text, list(range(1, len(text)))) == (text, False)


def test_the_blank_line_before_a_repeated_block_is_dropped_with_it() -> None:
    """The display's blocks are separated by blank lines: when the third copy of an item
    starts, its separator must not be left shown (the close would not have it)."""
    item = "이동 중에 환경 팟캐스트 듣기\n출퇴근길에 들어 보세요."
    text = f"추천이에요.\n\n{item}\n\n{item}\n\n{item}"
    for cuts in ([], list(range(1, len(text))), [len(text) - len(item) - 1]):
        shown, looping = run(text, cuts)
        assert looping
        assert shown == f"추천이에요.\n\n{item}\n\n{item}", cuts


def test_whitespace_waits_for_the_text_that_follows_it() -> None:
    guard = RepetitionGuard()
    assert guard.feed("첫 문장이에요.\n\n") == "첫 문장이에요."
    assert guard.feed("  ") == ""
    assert guard.feed("둘째") == "\n\n  둘째"
    assert guard.feed("\n") == ""
    assert guard.finish() == "\n"  # a normal end shows what the model ended with


def test_a_short_phrase_repeated_inside_one_sentence_is_a_loop() -> None:
    shown, looping = run("추천: " + "좋아요 " * 40, list(range(1, 200)))
    assert looping
    assert shown.count("좋아요") < 15


def test_a_long_phrase_repeated_without_sentence_ends_is_a_loop() -> None:
    phrase = "방법: 사무실에서 개인 컵을 사용하고 종이컵을 줄이는 습관, "
    shown, looping = run(phrase * 6, [])
    assert looping
    assert shown.count("방법") <= 1  # one piece: caught before any of it is shown


def test_short_pieces_such_as_list_numbers_repeat_freely() -> None:
    text = "1. 걷기\n2. 걷기\n3. 걷기\n4. 걷기\n"
    assert run(text, list(range(1, len(text)))) == (text, False)


def test_a_very_long_value_streams_through_in_linear_time() -> None:
    """Two million varied characters with no sentence end: all shown, no loop, and quickly
    (a per-character or quadratic guard takes minutes here; this takes well under a second)."""
    pieces = [
        "".join(chr(0xAC00 + (i * 101 + j * 13) % 11172) for j in range(100)) for i in range(20_000)
    ]
    guard = RepetitionGuard()
    shown = sum(len(guard.feed(p)) for p in pieces) + len(guard.finish())
    assert (shown, guard.looping) == (2_000_000, False)
