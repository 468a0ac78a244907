"""Pure functions: a week's summary -> the feedback prompt, and the fallback text.

The numbers in the prompt come from :mod:`app.feedback.summary`; the model only words them.
Titles come from the backend's users: line breaks and control characters are flattened so a
title cannot pose as another line of the prompt. The fallback is written by code from the same
numbers: complete sentences, within the length limit, with no model at all.
"""

from __future__ import annotations

from datetime import datetime

from app.feedback.summary import Tally, WeekSummary
from app.feedback.text import MAX_CHARS
from app.llm.client import ChatMessage

__all__ = ["fallback_text", "feedback_messages"]

_WEEKDAYS = "월화수목금토일"

SYSTEM = (
    "너는 친환경 챌린지 앱의 다정한 코치야. 회원의 지난 7일 챌린지 기록을 보고, 회원에게 "
    "직접 말하듯 한국어로 짧은 피드백을 써.\n"
    "규칙:\n"
    f"- 2~4개의 완전한 문장으로, 전체 {MAX_CHARS}자 이내.\n"
    "- 성공한 챌린지는 이름을 들어 구체적으로 칭찬해.\n"
    "- 실패는 절대 탓하지 말고, 다음 주에 해 볼 수 있는 작은 방법으로 따뜻하게 응원해.\n"
    "- 기록에 있는 챌린지 이름과 숫자만 써. 없는 사실은 지어내지 마.\n"
    "- 이모지는 한두 개까지 써도 돼.\n"
    "- JSON, 마크다운, 목록, 제목, 코드 없이 평범한 문장만 답해."
)
RETRY_HINT = (
    "방금 답은 규칙에 맞지 않았어. 기호나 목록 없이, 완전한 한국어 문장 2~4개로 "
    f"{MAX_CHARS}자 이내로 다시 써."
)


def _when(moment: datetime) -> str:
    return f"{moment.month}월 {moment.day}일({_WEEKDAYS[moment.weekday()]})"


def _title(text: str) -> str:
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def _line(tally: Tally, *, group: bool) -> str:
    name = _title(tally.title)
    if tally.attempts == 0:
        return f"- {name}: 이번 주 인증 없음"
    noun = "인증 " if group else ""
    return f"- {name}: {noun}성공 {tally.successes}번, 실패 {tally.failures}번"


def facts(summary: WeekSummary) -> str:
    """The week as the lines the model reads."""
    lines = [f"기간: {_when(summary.start)} ~ {_when(summary.end)} (한국 시간)"]
    if summary.personal:
        lines.append("개인 챌린지:")
        lines.extend(_line(t, group=False) for t in summary.personal)
    if summary.group:
        lines.append("단체 챌린지:")
        lines.extend(_line(t, group=True) for t in summary.group)
    if not summary.personal and not summary.group:
        lines.append("이번 주에 기록된 챌린지가 없음")
    lines.append(f"합계: 성공 {summary.successes}번, 실패 {summary.failures}번")
    return "\n".join(lines)


def feedback_messages(summary: WeekSummary, *, retry: bool = False) -> list[ChatMessage]:
    messages: list[ChatMessage] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{facts(summary)}\n\n이 기록으로 피드백을 써 줘."},
    ]
    if retry:
        messages.append({"role": "user", "content": RETRY_HINT})
    return messages


def fallback_text(summary: WeekSummary) -> str:
    """A kind, correct feedback from the numbers alone (when the model's text will not do)."""
    wins, misses = summary.successes, summary.failures
    if wins and not misses:
        text = f"지난 7일 동안 챌린지를 {wins}번 모두 성공했어요! 🌱 꾸준한 실천이 정말 멋져요."
    elif wins:
        text = (
            f"지난 7일 동안 챌린지를 {wins}번 성공했어요! 🌱 {misses}번은 아쉬웠지만 "
            "도전한 것만으로도 충분히 의미 있어요."
        )
    elif misses:
        text = f"지난 7일 동안 챌린지에 {misses}번 도전했어요. 결과보다 시도한 마음이 소중해요 🌱"
    else:
        text = "지난 7일 동안은 기록된 챌린지 인증이 없었어요. 괜찮아요, 누구에게나 쉬어 가는 주가 있어요 🌱"
    best = max((*summary.personal, *summary.group), key=lambda t: t.successes, default=None)
    closing = " 다음 주에도 작은 실천부터 함께해요."
    if best is not None and best.successes:
        praise = f" 특히 {_title(best.title)} 챌린지를 잘 해냈어요."
        if len(text + praise + closing) <= MAX_CHARS:
            text += praise
    return text + closing
