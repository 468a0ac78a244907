"""How well the facet step (app/chat/constraints.py) reads critiques, situations and questions.

    .venv/bin/python bench/facet_eval.py [--split test] [--embedding-model NAME]

Splits: dev and test (one facet or two, in one clause mostly); clauses_dev and clauses_test
(situations and constraints told in two or three clauses: "바닷가 마을에 사는데 아이랑 …");
critiques_dev (80 critiques as strangers say them, reasons and indirect words: "지갑 사정이
좀…", "애들 데리고 나가서", "팀원들이랑은 이미 … 이번엔 개인적으로"; written by a helper that
read nothing of the gateway's, tuned on).

bench/data/facets/test.jsonl was written apart from the examples the reader votes with
(app/chat/data/facet_examples.jsonl) and is read only to report. Per message: its labels read
exactly (every constraint, situation and question, none more); per label: precision and
recall. Both readers: the embedding's (with its clauses, as the gateway reads, and on the whole
message alone, to compare) and the lexical one (a burst). Prints a table; writes
bench/results/facets.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.chat.constraints import Facets, clauses, without_field  # noqa: E402
from app.chat.intent_bank import build_facets  # noqa: E402
from app.rag.embedder import load_embedder  # noqa: E402


def labels_of(facets: Facets) -> set[str]:
    said = {c.value for c in facets.constraints}
    if facets.location:
        said.add(f"at:{facets.location}")
    if facets.work_type:
        said.add(f"job:{facets.work_type}")
    if facets.question:
        said.add("question")
    if facets.among:
        said.add("among")
    if facets.another:
        said.add("another")
    return said


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", default="test")
    parser.add_argument("--embedding-model", default=None)
    args = parser.parse_args()
    rows = [
        json.loads(line)
        for line in (ROOT / "bench" / "data" / "facets" / f"{args.split}.jsonl")
        .read_text()
        .splitlines()
    ]
    embedder = load_embedder(args.embedding_model)
    readers = build_facets(embedder)
    vectors = embedder.embed_queries([row["text"] for row in rows])
    # As the gateway reads them: a message told in clauses, clause by clause too.
    parts = [
        embedder.embed_queries(clauses(row["text"])) if clauses(row["text"]) else [] for row in rows
    ]
    # ... and without the field it names, for its constraints ("돈 안 드는 비건 챌린지").
    unnamed = [
        embedder.embed_queries([text])[0] if (text := without_field(row["text"])) else None
        for row in rows
    ]
    results: dict[str, object] = {"split": args.split, "messages": len(rows)}
    print(f"{'reader':<8} {'exact':>7}  per label (precision / recall)")
    # "whole": the embedding's reader on the whole message alone (no clauses), to compare.
    for name in ("dense", "whole", "lexical"):
        exact = 0
        tp: Counter[str] = Counter()
        fp: Counter[str] = Counter()
        fn: Counter[str] = Counter()
        misses = []
        for row, vector, pieces, alone in zip(rows, vectors, parts, unnamed, strict=True):
            dense = name != "lexical"
            pieces = pieces if name == "dense" else []
            alone = alone if name == "dense" else None
            got = labels_of(readers.read(row["text"], vector if dense else None, pieces, alone))
            want = set(row["labels"])
            exact += got == want
            if got != want:
                misses.append({"text": row["text"], "want": sorted(want), "got": sorted(got)})
            for label in got & want:
                tp[label] += 1
            for label in got - want:
                fp[label] += 1
            for label in want - got:
                fn[label] += 1
        per = {
            label: (
                round(tp[label] / (tp[label] + fp[label]), 2) if tp[label] + fp[label] else None,
                round(tp[label] / (tp[label] + fn[label]), 2) if tp[label] + fn[label] else None,
            )
            for label in sorted(set(tp) | set(fp) | set(fn))
        }
        share = exact / len(rows)
        print(f"{name:<8} {share:7.2f}  " + ", ".join(f"{k} {p}/{r}" for k, (p, r) in per.items()))
        for miss in misses:
            print(f"    miss: {miss['text']}  want {miss['want']} got {miss['got']}")
        results[name] = {"exact": round(share, 3), "per_label": per, "misses": misses}
    name = "facets.json" if args.split in ("dev", "test") else f"facets_{args.split}.json"
    out = ROOT / "bench" / "results" / name
    out.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
