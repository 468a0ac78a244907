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
