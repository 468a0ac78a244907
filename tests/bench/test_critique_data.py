"""The stranger's critiques (bench/data/critiques/stranger.jsonl, read by
bench/critique_probe.py) name real fields and constraints."""

from __future__ import annotations

import json
from pathlib import Path

from app.chat.constraints import Constraint
from app.domain.categories import Category

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "critiques" / "stranger.jsonl"


def test_every_chat_names_a_field_and_constraints_the_gateway_knows() -> None:
    chats = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    assert len(chats) >= 60
    for chat in chats:
        assert chat["first"].strip() and chat["critique"].strip()
        assert Category[chat["field"]]
        assert 1 <= len(chat["constraints"]) <= 2
        assert all(Constraint(c) for c in chat["constraints"])
    assert {c for chat in chats for c in chat["constraints"]} == {c.value for c in Constraint}
