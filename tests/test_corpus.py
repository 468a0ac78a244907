"""The bundled corpus is valid (scripts/check_corpus.py) and loads into the retriever."""

import subprocess
import sys
from pathlib import Path

from app.config import Settings
from app.rag.corpus import load_corpus

ROOT = Path(__file__).resolve().parents[1]


def test_corpus_passes_its_checker() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/check_corpus.py"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_corpus_loads_every_document() -> None:
    documents = load_corpus(Settings().corpus_path)
    assert len(documents) >= 400
    assert len({d.id for d in documents}) == len(documents)
    assert all(d.traits is not None for d in documents), "every document carries its traits"


def test_the_checker_refuses_a_trait_outside_the_vocabulary(tmp_path: Path) -> None:
    corpus = (ROOT / "app" / "rag" / "data" / "challenges.jsonl").read_text(encoding="utf-8")
    broken = tmp_path / "challenges.jsonl"
    broken.write_text(
        corpus.replace('"effort": "easy"', '"effort": "trivial"', 1), encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "scripts/check_corpus.py", str(broken)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "effort must be one of" in done.stderr
