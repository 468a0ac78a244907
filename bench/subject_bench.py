"""Reading a request's subject: our word rules against a morphological analyser.

app/chat/subjects.py tells whether a request names something the catalogue's challenges are
about ("냉장고 전기 아끼는 방법 알려줘": "냉장고"; "비건 챌린지 추천해줘": nothing): the
message's words, the field's name blanked, less closed classes of asking, counts and the
fields' own words, that meet a keyword's word (a particle or a verb's final consonant aside).
Kiwi (``kiwipiepy``, a Korean morphological analyser with its model in a package) finds the
nouns instead (``NNG``/``NNP``); this bench meets them with the same keyword words (alone,
and less the rules' closed classes, so that only the cutting of words differs), and scores
them in one run on
``bench/data/subjects/asks.jsonl``: 125 requests labelled by whether they name a subject (the
facet bank's 55 plain examples, 30 plain asks in my own words, and the `subjects` fit split's
40 turns). The rules' closed classes were written against these same requests: this is the
comparison with the library, not a held-out score.

    .venv/bin/pip install kiwipiepy    # the bench extra
    .venv/bin/python bench/subject_bench.py

Prints a table; writes bench/results/subjects.json.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import app.chat.subjects as subjects_rules  # noqa: E402
from app.chat.constraints import field_blanked  # noqa: E402
from app.chat.subjects import Subjects  # noqa: E402
from app.config import Settings  # noqa: E402
from app.rag.corpus import load_corpus  # noqa: E402

DATA = ROOT / "bench" / "data" / "subjects" / "asks.jsonl"
RESULTS = ROOT / "bench" / "results" / "subjects.json"


def kiwi_reader(subjects: Subjects, *, less: bool) -> Callable[[str], tuple[str, ...]]:
    """The nouns Kiwi finds in the message (its field's name blanked) that a keyword says;
    ``less``: and that the rules' closed classes (asking, counts, the fields' own words) do
    not hold, so that only the cutting of words differs."""
    from kiwipiepy import Kiwi

    kiwi = Kiwi()
    kiwi.tokenize("모델을 먼저 읽어 둔다")  # its model loads on first use: not timed
    about = subjects._about  # the same keyword words as the rules meet

    def read(message: str) -> tuple[str, ...]:
        tokens = kiwi.tokenize(field_blanked(message))
        nouns = [t.form for t in tokens if t.tag in ("NNG", "NNP")]
        if less:
            nouns = [noun for noun in nouns if not _closed(noun)]
        return tuple(noun for noun in nouns if about.meets(noun))

    return read


def _closed(word: str) -> bool:
    return bool(
        subjects_rules._ASKING.fullmatch(word) or subjects_rules._FIELD_STUFF.fullmatch(word)
    )


def score(
    read: Callable[[str], tuple[str, ...]], rows: list[dict[str, object]]
) -> dict[str, object]:
    right, wrong, times = 0, [], []
    for row in rows:
        text = str(row["text"])
        started = time.perf_counter()
        named = read(text)
        times.append(time.perf_counter() - started)
        if bool(named) == row["subject"]:
            right += 1
        else:
            wrong.append({"text": text, "subject": row["subject"], "read": list(named)})
    times.sort()
    return {
        "accuracy": round(right / len(rows), 3),
        "false_subject": sum(1 for w in wrong if not w["subject"]),
        "missed_subject": sum(1 for w in wrong if w["subject"]),
        "p50_us": round(times[len(times) // 2] * 1e6, 1),
        "wrong": wrong,
    }


def main() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    subjects = Subjects(load_corpus(Settings().corpus_path))
    results = {
        "rules (app/chat/subjects.py)": score(subjects.named_in, rows),
        "Kiwi nouns": score(kiwi_reader(subjects, less=False), rows),
        "Kiwi nouns, less the closed classes": score(kiwi_reader(subjects, less=True), rows),
    }
    print(f"{len(rows)} requests, {sum(bool(r['subject']) for r in rows)} naming a subject")
    print(f"{'reader':36} {'accuracy':>8} {'false':>6} {'missed':>7} {'p50 µs':>8}")
    for name, result in results.items():
        print(
            f"{name:36} {result['accuracy']:>8} {result['false_subject']:>6} "
            f"{result['missed_subject']:>7} {result['p50_us']:>8}"
        )
    RESULTS.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"written: {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
