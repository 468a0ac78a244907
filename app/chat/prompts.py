"""Pure functions from what we know about a request to the chat messages sent upstream."""

from __future__ import annotations

from collections.abc import Sequence

from app.chat.sessions import Turn
from app.domain.categories import Category
from app.llm.client import ChatMessage
from app.rag.retriever import Hit

__all__ = ["base_info_messages", "free_text_messages"]

_SYSTEM = """당신은 일상에서 실천할 수 있는 친환경 챌린지를 추천하는 도우미입니다.
반드시 JSON 객체 하나로만 답하세요. 다른 설명은 쓰지 마세요.
- "recommend": 사용자의 상황에 맞춘 따뜻한 추천 인사 한두 문장
- "challenges": 챌린지 정확히 3개의 배열. 각 항목은 "title"(짧은 챌린지 이름)과
  "description"(무엇을 어떻게 하는지 한두 문장)만 가집니다.
- 참고 자료가 있으면 그 내용을 바탕으로 하되 그대로 베끼지 말고 상황에 맞게 다듬으세요.
- 모든 문장은 자연스러운 한국어 존댓말로 씁니다.
- 이번 추천의 카테고리: {label}"""


def _system(category: Category | None) -> ChatMessage:
    label = category.label if category is not None else "사용자의 질문에 맞는 분야"
    return {"role": "system", "content": _SYSTEM.format(label=label)}


def _history(turns: Sequence[Turn]) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for turn in turns:
        messages.append({"role": "user", "content": turn.user})
        messages.append({"role": "assistant", "content": turn.assistant})
    return messages


def _context(hits: Sequence[Hit]) -> str:
    if not hits:
        return ""
    lines = [f"- {hit.document.title}: {hit.document.body}" for hit in hits]
    return "참고할 챌린지 자료:\n" + "\n".join(lines) + "\n\n"


def base_info_messages(
    *, location: str, work_type: str, category: Category, hits: Sequence[Hit] = ()
) -> list[ChatMessage]:
    question = (
        f"{_context(hits)}사는 곳: {location}\n일하는 방식: {work_type}\n"
        f"'{category.label}' 카테고리에서 제 상황에 맞는 챌린지 3개를 추천해 주세요."
    )
    return [_system(category), {"role": "user", "content": question}]


def free_text_messages(
    *,
    message: str,
    category: Category | None,
    history: Sequence[Turn],
    hits: Sequence[Hit],
    location: str | None = None,
    work_type: str | None = None,
) -> list[ChatMessage]:
    about_me = ""
    if location and work_type:
        about_me = f"(참고: 사는 곳 {location}, 일하는 방식 {work_type})\n"
    question = f"{_context(hits)}{about_me}{message}"
    return [_system(category), *_history(history), {"role": "user", "content": question}]
