"""The gateway's start brings a stored corpus up to date: a store filled by a former release's
catalogue (a trait edited since) is ranked by the new one, and an unchanged one is not written."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from app.config import Settings
from app.rag.startup import open_retriever
from tests.support.store import CORPUS, stored_points

pytestmark = pytest.mark.anyio

IDS = ("pl-007", "pl-001", "zw-001", "vg-001")


def _write(corpus: Path, anyone: bool) -> None:
    lines = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    chosen = [doc for doc in lines if doc["id"] in IDS]
    for doc in chosen:
        if doc["id"] == "pl-007":
            doc["anyone"] = anyone
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in chosen), "utf-8")


def _stored(store: Path) -> dict[str, bool]:
    """Each stored point's ``anyone`` trait, by document id."""
    return {p["doc_id"]: p["anyone"] for p in stored_points(store).payloads}


async def _start(store: Path, corpus: Path) -> None:
    async with open_retriever(Settings(qdrant_path=str(store), corpus_path=corpus)):
        pass


async def test_a_changed_corpus_is_stored_anew_and_an_unchanged_one_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, corpus = tmp_path / "qdrant", tmp_path / "corpus.jsonl"
    _write(corpus, anyone=True)
    await _start(store, corpus)
    assert _stored(store) == dict.fromkeys(IDS, True)

    _write(corpus, anyone=False)  # the next release: one trait edited
    with caplog.at_level(logging.INFO, logger="app.rag.startup"):
        await _start(store, corpus)
    assert "updating 1 of 4 documents" in caplog.text
    assert _stored(store) == {**dict.fromkeys(IDS, True), "pl-007": False}
    assert len(stored_points(store).ids) == len(IDS), "the former point is removed"

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="app.rag.startup"):
        await _start(store, corpus)
    assert "updating" not in caplog.text and "ingest" not in caplog.text
