"""The member's week in numbers, computed by code (never left to the model to count).

The window is the 7 days before the job was accepted, in Asia/Seoul (:func:`week_window`),
fixed at acceptance: a job that waits or is retried still describes the same week.

- Personal challenges carry no date: each one sent counts. The same ``id`` twice is the same
  challenge tried twice (counted per challenge, the first title kept).
- A group challenge counts when its period overlaps the window or it has a submission in the
  window; only submissions inside the window are counted. The same ``id`` twice merges their
  submissions, and one submission sent twice (same time, same result) counts once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from app.feedback.dates import week_window
from app.feedback.models import FeedbackRequest

__all__ = ["Tally", "WeekSummary", "summarize"]


@dataclass
class Tally:
    """One challenge's week: how often it succeeded and failed."""

    title: str
    successes: int = 0
    failures: int = 0

    @property
    def attempts(self) -> int:
        return self.successes + self.failures


@dataclass(frozen=True)
class WeekSummary:
    start: datetime  # aware, Asia/Seoul
    end: datetime
    personal: list[Tally] = field(default_factory=list)
    group: list[Tally] = field(default_factory=list)

    @property
    def successes(self) -> int:
        return sum(t.successes for t in (*self.personal, *self.group))

    @property
    def failures(self) -> int:
        return sum(t.failures for t in (*self.personal, *self.group))


def summarize(request: FeedbackRequest, accepted_at: datetime) -> WeekSummary:
    start, end = week_window(accepted_at)
    personal: dict[int, Tally] = {}
    for item in request.personalChallenges:
        tally = personal.setdefault(item.id, Tally(item.title))
        if item.isSuccess:
            tally.successes += 1
        else:
            tally.failures += 1
    group: dict[int, Tally] = {}
    seen: dict[int, set[tuple[datetime, bool]]] = {}
    for challenge in request.groupChallenges:
        inside = [s for s in challenge.submissions if start <= s.submittedAt <= end]
        overlaps = challenge.startDate <= end and challenge.endDate >= start
        if not inside and not overlaps:
            continue
        tally = group.setdefault(challenge.id, Tally(challenge.title))
        done = seen.setdefault(challenge.id, set())
        for submission in inside:
            key = (submission.submittedAt, submission.isSuccess)
            if key in done:
                continue
            done.add(key)
            if submission.isSuccess:
                tally.successes += 1
            else:
                tally.failures += 1
    return WeekSummary(start, end, list(personal.values()), list(group.values()))
