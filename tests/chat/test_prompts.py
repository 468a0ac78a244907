"""The prompt of each composition: the candidates listed as its answer names them, and worked
examples whose answers choose what their text says."""

from __future__ import annotations

import json
import re

import pytest

from app.chat.prompts import PromptInput, answer_messages
from app.domain.categories import Category
from app.llm.schema import Composition
from app.rag.corpus import load_corpus
from app.rag.retriever import Hit
from tests.support.store import CORPUS

DOCS = [doc for doc in load_corpus(CORPUS) if doc.category is Category.ZERO_WASTE][:3]


def _turn() -> PromptInput:
    return PromptInput(
        category=Category.ZERO_WASTE,
        candidates=[Hit(doc, 0.5) for doc in DOCS],
        message="일회용품을 줄이고 싶어요",
        chosen="장바구니 들고 장보기",
    )


def test_picks_numbers_the_candidates_in_order() -> None:
    question = answer_messages(_turn(), "picks")[-1]["content"]
    listed = re.findall(r"^(\d+)\. (.+)$", question, re.MULTILINE)
    assert listed == [(str(n), doc.title) for n, doc in enumerate(DOCS, 1)]
    assert "일회용품을 줄이고 싶어요" in question and "장바구니 들고 장보기" in question
    assert all(doc.body not in question for doc in DOCS), "titles only: nothing to re-type"


@pytest.mark.parametrize("composition", ["picks", "recommend"])
def test_each_worked_example_answers_in_its_compositions_form(composition: Composition) -> None:
    messages = answer_messages(_turn(), composition, examples=3)
    examples = messages[1:-1]
    assert [m["role"] for m in examples] == ["user", "assistant"] * 3
    for asked, answered in zip(examples[::2], examples[1::2], strict=True):
        answer = json.loads(answered["content"])
        if composition == "picks":
            numbered = dict(re.findall(r"^(\d+)\. (.+)$", asked["content"], re.MULTILINE))
            chosen = [numbered[str(n)] for n in answer["picks"]]
            assert len(set(chosen)) == len(chosen) >= 2
        else:
            assert answer["recommend"] and answer["challenges"]
            listed = asked["content"].split("후보: ")[1].split(" / ")
            assert all(item["title"] in listed for item in answer["challenges"])


def test_descriptions_lists_each_candidates_catalogue_text() -> None:
    question = answer_messages(_turn(), "descriptions")[-1]["content"]
    for doc in DOCS:
        assert f"- {doc.title}: {doc.body}" in question
