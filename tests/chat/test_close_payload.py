"""The ``close`` payload built from the model's answer."""

from __future__ import annotations

from app.chat.pipeline import close_payload
from app.domain.categories import Category
from app.llm.schema import Answer, ChallengeItem


def test_the_session_category_is_stamped_and_a_repeated_title_is_one_button() -> None:
    answer = Answer(
        recommend="포장재를 줄여 보세요.",
        challenges=[
            ChallengeItem(title="직거래로 포장재 줄이기", description="첫 설명"),
            ChallengeItem(title="구내식당에서 먹을 만큼만 받기", description="둘째"),
            ChallengeItem(title=" 직거래로  포장재 줄이기", description="반복"),
        ],
    )
    payload = close_payload(answer, Category.ZERO_WASTE)
    assert payload["recommend"] == "포장재를 줄여 보세요."
    assert [(c["title"], c["description"]) for c in payload["challenges"]] == [
        ("직거래로 포장재 줄이기", "첫 설명"),
        ("구내식당에서 먹을 만큼만 받기", "둘째"),
    ]
    assert {(c["category"], c["label"]) for c in payload["challenges"]} == {
        ("ZERO_WASTE", "제로웨이스트")
    }
