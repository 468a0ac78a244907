"""Pure parts of the feedback job: dates, the week's numbers, the text validator, the fallback."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from app.feedback.dates import SEOUL, parse_moment, week_window
from app.feedback.models import FeedbackRequest, invalid_fields
from app.feedback.prompt import fallback_text
from app.feedback.summary import Tally, WeekSummary, summarize
from app.feedback.text import MAX_CHARS, clean


def test_jackson_arrays_and_nanos_beyond_micro() -> None:
    moment = parse_moment([2026, 5, 1, 9, 30, 15, 123456789])
    assert moment == datetime(2026, 5, 1, 9, 30, 15, 123456, tzinfo=SEOUL)
    assert parse_moment([2026, 5, 1, 9, 30]) == datetime(2026, 5, 1, 9, 30, tzinfo=SEOUL)
    assert parse_moment([2026, 5, 1]).hour == 0
    assert parse_moment([2026, 5, 1], end_of_day=True).hour == 23


def test_iso_strings_become_aware_seoul_time() -> None:
    assert parse_moment("2026-05-01T00:30:00Z") == datetime(2026, 5, 1, 9, 30, tzinfo=SEOUL)
    naive = parse_moment("2026-05-01T09:30:00.123456789")
    assert naive.tzinfo is not None and naive.utcoffset() == timedelta(hours=9)
    assert parse_moment("2026-05-01", end_of_day=True).date().day == 1


@pytest.mark.parametrize(
    "bad", [[2026, 2, 30, 0, 0], [2026, 5, 1, 0, 0, 0, -1], [True, 1, 1], "x", None]
)
def test_bad_dates_raise(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_moment(bad)


@given(st.integers(0, 999_999_999))
def test_any_nanos_parse(nanos: int) -> None:
    assert parse_moment([2026, 5, 1, 0, 0, 0, nanos]).microsecond == nanos // 1000


def test_invalid_fields_are_paths() -> None:
    body = {"memberId": 1, "groupChallenges": [{"id": 1, "title": "t", "startDate": "x"}]}
    with pytest.raises(ValidationError) as info:
        FeedbackRequest.model_validate(body)
    fields = invalid_fields(info.value)
    assert "groupChallenges[0].startDate" in fields and "groupChallenges[0].endDate" in fields


def test_week_is_seven_days_in_seoul_and_counts_by_code() -> None:
    accepted = datetime(2026, 5, 8, 0, 30, tzinfo=SEOUL)
    start, end = week_window(accepted)
    assert end - start == timedelta(days=7) and start.tzinfo is not None
    request = FeedbackRequest.model_validate(
        {
            "memberId": 1,
            "groupChallenges": [
                {
                    "id": 3,
                    "title": "플로깅",
                    "startDate": [2026, 4, 1],
                    "endDate": [2026, 4, 20],  # ended before the week, but a late submission counts
                    "submissions": [
                        # 2026-05-01T00:29 Seoul is 2026-04-30T15:29Z: just outside the week
                        {"isSuccess": True, "submittedAt": "2026-04-30T15:29:00Z"},
                        {"isSuccess": True, "submittedAt": "2026-04-30T15:31:00Z"},
                    ],
                },
                {"id": 4, "title": "옛 챌린지", "startDate": [2026, 1, 1], "endDate": [2026, 1, 2]},
            ],
        }
    )
    summary = summarize(request, accepted)
    assert [(t.title, t.successes, t.failures) for t in summary.group] == [("플로깅", 1, 0)]


def test_validator_keeps_good_text_and_refuses_markup() -> None:
    good = "이번 주 텀블러 챌린지를 세 번 성공했어요! 🌱 다음 주에도 함께해요."
    assert clean(good).text == good
    for bad in (
        '{"feedback": "좋아요"}',
        "## 피드백\n잘했어요.",
        "- 텀블러: 성공",
        "Great job this week!",
    ):
        assert clean(bad).text is None, bad
    long = "정말 잘했어요. " * 60
    cut = clean(long).text
    assert cut is not None and len(cut) <= MAX_CHARS and cut.endswith(".")
    cut_off = "이번 주에도 챌린지를 정말 잘했어요. 다음 주에는 조금 더"
    assert clean(cut_off).text == "이번 주에도 챌린지를 정말 잘했어요."


@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=100), st.integers(0, 50), st.integers(0, 50)),
        max_size=5,
    )
)
def test_fallback_is_always_valid(tallies: list[tuple[str, int, int]]) -> None:
    now = datetime(2026, 5, 8, tzinfo=SEOUL)
    summary = WeekSummary(now - timedelta(days=7), now, [Tally(t, s, f) for t, s, f in tallies])
    text = fallback_text(summary)
    assert len(text) <= MAX_CHARS and text.endswith(".")
