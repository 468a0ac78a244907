"""Feedback requests as the backend sends them, dated relative to now (Asia/Seoul)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from app.feedback.dates import SEOUL

FEEDBACK_TEXT = (
    "이번 주에 텀블러 사용하기를 두 번이나 성공했어요! 🌱 "
    "플로깅 모임 인증도 꾸준히 해냈네요. 다음 주에도 작은 실천을 함께해요."
)


def jackson(moment: datetime, nanos: int | None = None) -> list[int]:
    parts = [moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second]
    return [*parts, moment.microsecond * 1000 if nanos is None else nanos]


def feedback_body(member_id: int = 7, **extra: Any) -> dict[str, Any]:
    now = datetime.now(SEOUL)
    body = {
        "memberId": member_id,
        "personalChallenges": [
            {"id": 1, "title": "텀블러 사용하기", "isSuccess": True},
            {"id": 2, "title": "계단 이용하기", "isSuccess": False},
        ],
        "groupChallenges": [
            {
                "id": 10,
                "title": "플로깅 모임",
                "startDate": jackson(now - timedelta(days=20)),
                "endDate": (now + timedelta(days=10)).date().isoformat(),
                "submissions": [
                    {"isSuccess": True, "submittedAt": jackson(now - timedelta(days=1), 123456789)},
                    {"isSuccess": False, "submittedAt": (now - timedelta(days=2)).isoformat()},
                    {"isSuccess": True, "submittedAt": jackson(now - timedelta(days=9))},
                ],
            }
        ],
    }
    body.update(extra)
    return body
