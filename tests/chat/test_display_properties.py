"""Property tests for AnswerDisplay over any answer and any chunking: with no option, or with
options that have nothing to change, it is the plain display (AnswerScrubber, itself checked
against a reference parser in tests/llm/test_scrubber_properties.py)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.chat.display import AnswerDisplay
from app.llm.scrubber import AnswerScrubber
from tests.llm.test_scrubber_properties import (
    ENDINGS,
    FENCES,
    answers,
    chunk,
    profile,
    prose_text,
    seeds,
    serialize,
    text_values,
)

#: A tenth of the parser's examples: the composer adds little state per example.
few = settings(profile, max_examples=max(profile.max_examples // 10, 100))


def fed(display: AnswerDisplay | AnswerScrubber, chunks: list[str]) -> list[str]:
    return [display.feed(piece) for piece in chunks]


@few
@given(
    obj=answers,
    fmt=st.integers(0, 35),
    prose=prose_text,
    fence=st.sampled_from(FENCES),
    ending=st.sampled_from(ENDINGS),
    cut=st.integers(0, 2**16),
    seed=seeds,
)
def test_without_options_the_display_is_the_plain_one(
    obj: dict[str, Any], fmt: int, prose: str, fence: str, ending: str, cut: int, seed: int
) -> None:
    """Feed by feed, partial by partial, and at the end; also for a stream cut anywhere, and
    with bounds no value comes near."""
    document = prose.replace("{", "") + fence + serialize(obj, fmt) + ending
    document = document[: cut % (len(document) + 1)] if cut % 3 == 0 else document
    chunks = chunk(document, seed)
    for options in ({}, {"bounds": {key: 10**6 for key in ("recommend", "description")}}):
        plain, display = AnswerScrubber(), AnswerDisplay(**options)  # type: ignore[arg-type]
        for piece in chunks:
            assert display.feed(piece) == plain.feed(piece)
            assert display.partial() == plain.partial()
        assert display.finish() == plain.finish()


items = st.lists(st.tuples(text_values, text_values), max_size=4, unique_by=lambda t: t[0])


@few
@given(recommend=text_values, pairs=items, fmt=st.integers(0, 35), seed=seeds)
def test_options_with_nothing_to_change_change_nothing_shown(
    recommend: str, pairs: list[tuple[str, str]], fmt: int, seed: int
) -> None:
    """Distinct titles, each before its description: whole titles only change when a title
    is shown; a catalogue that holds every title with the model's own description shows the
    same; the gateway's recommend takes the model's recommend's place and nothing else's."""
    answer = {
        "recommend": recommend,
        "challenges": [{"title": t, "description": d} for t, d in pairs],
    }
    chunks = chunk(serialize(answer, fmt), seed)
    plain = AnswerScrubber()
    expected = "".join(fed(plain, chunks)) + plain.finish().tail
    want = json.loads(json.dumps(answer))
    for options in ({"whole_titles": True}, {"catalogue": dict(pairs)}):
        display = AnswerDisplay(**options)  # type: ignore[arg-type]
        shown = "".join(fed(display, chunks))
        result = display.finish()
        assert shown + result.tail == expected
        assert result.answer is not None and result.answer.model_dump() == want
    display = AnswerDisplay(recommend="G")
    shown = "".join(fed(display, chunks))
    result = display.finish()
    assert shown + result.tail == expected[len(recommend) :]
    assert result.answer is not None and result.answer.model_dump() == {**want, "recommend": "G"}
