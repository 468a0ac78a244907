"""The fit bench's labelled conversations (bench/data/fit/: dev and dev2 to tune on, test to
report, subjects: a field's asks that name their subject, questions: questions the catalogue
answers or does not, asked_after: questions asked after an answer, held by what was shown or
by another challenge of its field, and situations / situations_held: first asks that tell only
who the user is, tuned on and held out) are well formed: every id is a
catalogue one, labels use the known kinds, constraints and relations, first_ok lies within
ok, each split has at least 55 turns and covers every kind and category, and a base-info
session's acceptable challenges fit its location and work type (what the reader checks
demand)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.fit_scoring import CONSTRAINTS, HELD_OUT, KINDS, RELATIONS, SPLITS, docs_by_id

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "fit"
CATEGORIES = {
    "ZERO_WASTE",
    "PLOGGING",
    "CARBON_FOOTPRINT",
    "ENERGY_SAVING",
    "UPCYCLING",
    "MEDIA",
    "DIGITAL_CARBON",
    "VEGAN",
}
LOCATIONS = {"도시", "바닷가", "산", "농촌"}
WORK_TYPES = {"사무직", "현장직", "영업직", "재택근무"}


def _conversations(split: str) -> list[dict[str, Any]]:
    lines = (DATA / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


TUNED = tuple(split for split in SPLITS if split not in HELD_OUT)


@pytest.mark.parametrize("split", SPLITS)
def test_every_label_is_well_formed(split: str) -> None:
    docs = docs_by_id()
    for convo in _conversations(split):
        base = None
        for number, step in enumerate(convo["steps"]):
            where = f"{convo['id']}#{number}"
            label = step["label"]
            assert ("message" in step) != ("base" in step), where
            if "base" in step:
                base = step["base"]
                assert base["location"] in LOCATIONS and base["workType"] in WORK_TYPES, where
                assert base["category"] in CATEGORIES and label["kind"] == "base", where
            else:
                assert step["message"].strip() and label["kind"] != "base", where
            assert label["kind"] in KINDS, where
            assert set(label["constraints"]) <= set(CONSTRAINTS), where
            assert label["relation"] in RELATIONS, where
            assert label["categories"] and set(label["categories"]) <= CATEGORIES, where
            assert set(label["first_ok"]) <= set(label["ok"]), where
            assert set(label["ok"]) <= set(docs), where
            assert ("answer_ids" in label) == (label["kind"] == "question"), where
            assert set(label.get("answer_ids", [])) <= set(label["first_ok"]), where
            if "answer_sentence" in label:  # the very sentence, in the one text holding it
                (holder,) = label["answer_ids"]
                assert label["answer_sentence"] in docs[holder].body, where
            if label["kind"] in ("critique", "among", "more", "switch"):
                assert label["relation"] == ("among" if label["kind"] == "among" else "new"), where
            for doc_id in label["ok"]:
                doc = docs[doc_id]
                assert doc.category in label["categories"], f"{where} {doc_id}"
                if base:
                    assert base["location"] in doc.locations, f"{where} {doc_id}"
                    assert base["workType"] in doc.work_types, f"{where} {doc_id}"


@pytest.mark.parametrize("split", ["dev", "dev2", "test"])
def test_each_split_is_big_enough_and_covers_every_kind_and_category(split: str) -> None:
    convos = _conversations(split)
    labels = [step["label"] for convo in convos for step in convo["steps"]]
    assert len(labels) >= 55
    assert set(Counter(label["kind"] for label in labels)) == set(KINDS)
    assert {c for label in labels for c in label["categories"]} == CATEGORIES
    questions = [label for label in labels if label["kind"] == "question"]
    assert any(q["answer_ids"] for q in questions)
    if split != "dev2":  # the reported splits hold questions the catalogue cannot answer too
        assert any(not q["answer_ids"] for q in questions)


@pytest.mark.parametrize("held", HELD_OUT)
@pytest.mark.parametrize("tuned", TUNED)
def test_a_held_out_split_shares_no_conversation_or_message_with_a_tuned_one(
    tuned: str, held: str
) -> None:
    dev, test = _conversations(tuned), _conversations(held)
    assert not {c["id"] for c in dev} & {c["id"] for c in test}
    said = [
        {step["message"] for c in split for step in c["steps"] if "message" in step}
        for split in (dev, test)
    ]
    assert not said[0] & said[1]
