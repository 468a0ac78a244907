"""Cutting a message into clauses: our connective pattern against a morphological analyser.

The facet step reads a message told in clauses clause by clause too
(app/chat/constraints.py ``clauses``): it cuts after a connective of background or reason
("-는데", "-어서", "-니까", "-지만") or a comma. Kiwi (``kiwipiepy``, a Korean morphological
analyser with its model in a package) tags those endings as ``EC``; this bench cuts after the
same classes of ``EC`` (and the "-느라", "-(이)라" it also tags) and reads the facets both ways,
in one run, on the four facet sets: each message's labels read exactly, and the time to cut
one message.

    .venv/bin/pip install kiwipiepy    # the bench extra
    .venv/bin/python bench/clause_bench.py

Prints a table; writes bench/results/clauses.json.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.chat.constraints import clauses  # noqa: E402
from app.chat.intent_bank import build_facets  # noqa: E402
from app.rag.embedder import load_embedder  # noqa: E402
from bench.facet_eval import labels_of  # noqa: E402

SPLITS = ("dev", "test", "clauses_dev", "clauses_test")
#: The connective endings cut after: background or reason, as the pattern's.
REASONS = frozenset(
    {"는데", "ᆫ데", "은데", "인데", "니까", "으니까", "어서", "아서", "라서", "해서", "지만"}
)
#: Also tagged as such by the analyser, and not in the pattern.
MORE = frozenset({"느라", "라", "이라"})


def kiwi_cutter(endings: frozenset[str]) -> Callable[[str], list[str]]:
    from kiwipiepy import Kiwi

    kiwi = Kiwi()
    kiwi.tokenize("모델을 먼저 읽어 둔다")  # its model loads on first use: not timed

    def cut(message: str) -> list[str]:
        tokens = kiwi.tokenize(message)
        ends = [t.start + t.len for t in tokens if t.tag == "EC" and t.form in endings]
        ends += [i + 1 for i, ch in enumerate(message) if ch in ",.!?"]
        parts, start = [], 0
        for end in sorted(set(ends)):
            parts.append(message[start:end])
            start = end
        parts.append(message[start:])
        found = [p.strip(" ,.!?") for p in parts]
        found = [p for p in found if len(p) >= 3]
        return found if len(found) > 1 else []

    return cut


def main() -> int:
    embedder = load_embedder(None)
    readers = build_facets(embedder)
    cutters: dict[str, Callable[[str], list[str]]] = {
        "pattern (served)": clauses,
        "kiwi, the same endings": kiwi_cutter(REASONS),
        "kiwi, and -느라 -(이)라": kiwi_cutter(REASONS | MORE),
    }
    rows = {
        split: [
            json.loads(line)
            for line in (ROOT / "bench" / "data" / "facets" / f"{split}.jsonl")
            .read_text(encoding="utf-8")
            .splitlines()
            if line.strip()
        ]
        for split in SPLITS
    }
    results: dict[str, dict[str, object]] = {}
    print(f"{'cutter':<26}" + "".join(f"{s:>14}" for s in SPLITS) + f"{'µs / message':>14}")
    for name, cut in cutters.items():
        exact: dict[str, float] = {}
        spent = 0.0
        count = 0
        for split, messages in rows.items():
            hits = 0
            for row in messages:
                started = time.perf_counter()
                parts = cut(row["text"])
                spent += time.perf_counter() - started
                count += 1
                vector = embedder.embed_queries([row["text"]])[0]
                pieces = embedder.embed_queries(parts) if parts else []
                got = labels_of(readers.read(row["text"], vector, pieces))
                hits += got == set(row["labels"])
            exact[split] = round(hits / len(messages), 3)
        micros = round(spent / count * 1e6, 1)
        results[name] = {"exact": exact, "us_per_message": micros}
        print(f"{name:<26}" + "".join(f"{exact[s]:>14.2f}" for s in SPLITS) + f"{micros:>14.1f}")
    out = ROOT / "bench" / "results" / "clauses.json"
    out.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
