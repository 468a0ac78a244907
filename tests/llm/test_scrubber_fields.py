"""FieldParser: the answer's fields as they arrive, the same under every split of the stream."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from app.llm.scrubber import (
    AnswerScrubber,
    ChallengeEnded,
    ChallengeStarted,
    Closed,
    FieldEvent,
    FieldParser,
    Opened,
    Parsed,
    Prose,
)
from tests.llm.test_scrubber import CHALLENGES, DOC, RECOMMEND, splits2, splits3


def parse(chunks: Iterable[str]) -> tuple[list[FieldEvent], Parsed]:
    """All events, text pieces of one value merged (how text is cut depends on the split)."""
    parser = FieldParser()
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    end = parser.finish()
    merged: list[FieldEvent] = []
    for event in [*events, *end.events]:
        if isinstance(event, str) and merged and isinstance(merged[-1], str):
            merged[-1] += event
        elif event != "":
            merged.append(event)
    return merged, end


def value(key: str, challenge: int, text: str) -> list[FieldEvent]:
    return (
        [Opened(key, challenge), text, Closed(key, challenge, text)]
        if text
        else [
            Opened(key, challenge),
            Closed(key, challenge, text),
        ]
    )


EXPECTED: list[FieldEvent] = [*value("recommend", -1, RECOMMEND)]
for _i, _item in enumerate(CHALLENGES):
    EXPECTED += [
        ChallengeStarted(_i),
        *value("title", _i, _item["title"]),
        *value("description", _i, _item["description"]),
        ChallengeEnded(_i),
    ]


def test_every_split_gives_the_same_fields() -> None:
    for chunks in [*splits2(DOC), *splits3(DOC, 300), list(DOC)]:
        events, end = parse(chunks)
        assert events == EXPECTED, chunks
        assert end.complete and end.error is None and end.json_started and not end.truncated
        assert end.document == {"recommend": RECOMMEND, "challenges": CHALLENGES}


class Layout:
    """The SPEC's plain layout written over field events: blocks joined by a blank line,
    a challenge's fields by a newline, each separator when its value opens."""

    def __init__(self) -> None:
        self.blocks = 0
        self.fields = 0

    def show(self, events: list[FieldEvent]) -> str:
        out = []
        for event in events:
            if isinstance(event, str):
                out.append(event)
            elif isinstance(event, Prose):
                out.append(event.text)
                self.blocks = max(self.blocks, 1)
            elif isinstance(event, ChallengeStarted):
                self.fields = 0
            elif isinstance(event, Opened):
                if event.challenge >= 0 and self.fields:
                    out.append("\n")
                else:
                    out.append("\n\n" if self.blocks else "")
                    self.blocks += 1
                self.fields += event.challenge >= 0
        return "".join(out)


@pytest.mark.parametrize(
    "doc",
    [
        DOC,
        '산문 ```json\n{"challenges": [{"description": "D", "title": ""}, {}], "recommend": "R"}',
        '{"recommend": "A", "x": {"recommend": "no"}, "recommend": "B", "challenges": [{"title": "T"}]}',
    ],
)
def test_the_plain_display_is_the_layout_of_the_fields(doc: str) -> None:
    for chunks in [*splits2(doc), list(doc)]:
        parser, plain, layout = FieldParser(), AnswerScrubber(), Layout()
        for chunk in chunks:
            assert layout.show(parser.feed(chunk)) == plain.feed(chunk), chunks
        assert layout.show(parser.finish().events) == plain.finish().tail


def test_values_nobody_shows_give_no_events() -> None:
    doc = (
        '```json\n{"category": "x", "recommend": "R", "n": [1, {"title": "no"}], '
        '"challenges": ["str", {"label": "L", "title": "T", "x": {"description": "no"}}]}\n```'
    )
    events, end = parse(list(doc))
    assert events == [
        *value("recommend", -1, "R"),
        ChallengeStarted(1),  # its position in the array: a string came first
        *value("title", 1, "T"),
        ChallengeEnded(1),
    ]
    assert end.complete


def test_prose_before_the_object_is_a_prose_event() -> None:
    doc = '먼저 한마디 ```json\n{"recommend": "R"}'
    events, end = parse([doc])
    assert events == [Prose("먼저 한마디"), *value("recommend", -1, "R")]
    assert end.prose == "먼저 한마디"
    events, _ = parse(list(doc))  # a character at a time: the same text, in more pieces
    assert "".join(e.text for e in events if isinstance(e, Prose)) == "먼저 한마디"


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        ("그냥 산문", "the model output holds no JSON object"),
        ('{"recommend": "R" "x"}', "invalid JSON at character 18"),
        ('{"recommend": "반쯤', "the stream ended inside a string"),
    ],
)
def test_how_a_stream_ended(doc: str, error: str) -> None:
    _, end = parse([doc])
    assert not end.complete
    assert end.error is not None and end.error.startswith(error)


def test_a_recommend_cut_by_the_end_is_kept_as_read() -> None:
    events, end = parse(['{"recommend": "반쯤 \\ud83c'])
    assert events == [Opened("recommend", -1), "반쯤 \ufffd"]
    assert end.truncated and end.document == {"recommend": "반쯤 \ufffd"}


def test_feed_after_finish_and_finish_twice_are_errors() -> None:
    parser = FieldParser()
    parser.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        parser.feed("{")
    with pytest.raises(RuntimeError, match="twice"):
        parser.finish()
