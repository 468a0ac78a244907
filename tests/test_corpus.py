"""The bundled corpus is valid (scripts/check_corpus.py) and loads into the retriever."""

import json
import subprocess
import sys
from pathlib import Path

from app.config import Settings
from app.domain.categories import PERSONAS
from app.rag.corpus import SITUATION_FIRSTS, load_corpus, load_situation_firsts

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


def _check_edited(tmp_path: Path, old: str, new: str) -> subprocess.CompletedProcess[str]:
    """The checker run on the bundled corpus with the first ``old`` made ``new``."""
    corpus = (ROOT / "app" / "rag" / "data" / "challenges.jsonl").read_text(encoding="utf-8")
    broken = tmp_path / "challenges.jsonl"
    broken.write_text(corpus.replace(old, new, 1), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "scripts/check_corpus.py", str(broken)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_the_checker_refuses_a_trait_outside_the_vocabulary(tmp_path: Path) -> None:
    done = _check_edited(tmp_path, '"effort": "easy"', '"effort": "trivial"')
    assert done.returncode == 1 and "effort must be one of" in done.stderr


def test_every_narrow_persona_says_who_it_is_for(tmp_path: Path) -> None:
    """A challenge written for a narrow persona names who (``persona``, as a situation told is
    labelled), and one anyone can do names no one; the checker refuses either wrong, and an
    unknown persona, and it knows the app's vocabulary."""
    documents = load_corpus(Settings().corpus_path)
    for document in documents:
        assert document.traits is not None
        assert bool(document.traits.persona) != document.traits.anyone, document.id
    labels = {label.partition(":")[2] for d in documents if d.traits for label in d.traits.persona}
    assert {"fishing", "farming", "shop", "바닷가", "현장직"} <= labels
    for old, new, said in (
        ('"anyone": false, "persona": ["as:fishing"]', '"anyone": false, "persona": []', "narrow"),
        ('"anyone": true, "persona": []', '"anyone": true, "persona": ["as:pet"]', "narrow"),
        ('"persona": ["as:fishing"]', '"persona": ["as:sailor"]', "persona must be"),
        ('"persona": ["as:fishing"]', '"persona": ["at:도시"]', "persona must be"),
    ):
        done = _check_edited(tmp_path, old, new)
        assert done.returncode == 1 and said in done.stderr, (new, done.stderr)
    checker = (ROOT / "scripts" / "check_corpus.py").read_text(encoding="utf-8")
    assert all(f'"{name}"' in checker for name in PERSONAS), "the checker's list is the app's"


def test_the_checker_wants_each_categorys_classic_first_steps_ranked_once(tmp_path: Path) -> None:
    """Each category ranks its six classic first steps (``starter`` 1-6), what a plain ask for
    the field is answered with; a rank given twice (and so one missing) is refused."""
    documents = load_corpus(Settings().corpus_path)
    for category in {d.category for d in documents}:
        ranks = sorted(
            d.traits.starter
            for d in documents
            if d.category is category and d.traits and d.traits.starter
        )
        assert ranks == [1, 2, 3, 4, 5, 6], category
    done = _check_edited(tmp_path, '"starter": 2', '"starter": 1')
    assert done.returncode == 1 and "starter ranks [1, 1, 3, 4, 5, 6]" in done.stderr


def test_the_checker_wants_each_situations_firsts_to_fit_it(tmp_path: Path) -> None:
    """Beside the corpus, each location, work type and company names the challenges to show
    first when a user tells only that (app/rag/corpus.py SITUATION_FIRSTS); one that does not
    fit its situation is refused, and the bundled ones load."""
    firsts = load_situation_firsts(Settings().corpus_path.with_name(SITUATION_FIRSTS))
    assert {key.partition(":")[0] for key in firsts} == {"at", "job", "with", "as"}
    documents = {d.id: d for d in load_corpus(Settings().corpus_path)}
    assert all(doc_id in documents for ids in firsts.values() for doc_id in ids)
    seaside = {k: list(v) for k, v in firsts.items()}
    office_only = next(d.id for d in documents.values() if "바닷가" not in d.locations)
    seaside["at:바닷가"][0] = office_only
    (tmp_path / SITUATION_FIRSTS).write_text(json.dumps(seaside, ensure_ascii=False), "utf-8")
    done = _check_edited(tmp_path, '"effort": "easy"', '"effort": "easy"')
    assert done.returncode == 1, done.stdout
    assert f"at:바닷가: {office_only} does not fit it" in done.stderr


def test_the_checker_wants_a_personas_firsts_to_begin_with_its_own(tmp_path: Path) -> None:
    """A persona's firsts ("as:farming", told "사과 농사 짓고 있습니다") begin with a challenge
    written for it; one beginning with another's, or keyed by no persona, is refused."""
    firsts = load_situation_firsts(Settings().corpus_path.with_name(SITUATION_FIRSTS))
    documents = {d.id: d for d in load_corpus(Settings().corpus_path)}
    for key, ids in firsts.items():
        if key.startswith("as:"):
            first = documents[ids[0]]
            assert first.traits is not None and key in first.traits.persona, key
    for edit, said in (
        (lambda f: f["as:farming"].insert(0, "zw-001"), "as:farming: want one written for it"),
        (lambda f: f.update({"as:sailor": f["as:fishing"]}), "personas of"),
    ):
        edited = {k: list(v) for k, v in firsts.items()}
        edit(edited)
        (tmp_path / SITUATION_FIRSTS).write_text(json.dumps(edited, ensure_ascii=False), "utf-8")
        done = _check_edited(tmp_path, '"effort": "easy"', '"effort": "easy"')
        assert done.returncode == 1 and said in done.stderr, done.stderr
