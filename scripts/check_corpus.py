#!/usr/bin/env python3
"""Validate app/rag/data/challenges.jsonl and print its counts table (stdlib only).

Usage: python3 scripts/check_corpus.py [PATH] [--markdown]
Exit status 0 when the corpus is valid, 1 otherwise (problems go to stderr).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "app" / "rag" / "data" / "challenges.jsonl"
CATEGORIES = {
    "ZERO_WASTE": "제로웨이스트",
    "PLOGGING": "플로깅",
    "CARBON_FOOTPRINT": "탄소발자국",
    "ENERGY_SAVING": "에너지 절약",
    "UPCYCLING": "업사이클",
    "MEDIA": "문화 공유",
    "DIGITAL_CARBON": "디지털 탄소",
    "VEGAN": "비건",
}
LOCATIONS = ["도시", "바닷가", "산", "농촌"]
WORK_TYPES = ["사무직", "현장직", "영업직", "재택근무"]
SHOP = "가게"  # a shop told alone (app/domain/categories.py SHOP): a firsts key, no work type
DRIVING = "운전"  # one who drives for a living (app/domain/categories.py DRIVING): the same
#: Who a narrow persona is, beyond a place or a work type (app/domain/categories.py PERSONAS).
PERSONAS = [
    "fishing",
    "farming",
    "garden",
    "forestry",
    "construction",
    "driver",
    "trip",
    "shop",
    "marketing",
    "it",
    "pet",
    "watersports",
    "climbing",
    "smoker",
    "parent",
    "dishwasher",
]
#: A persona as a situation told is labelled: a place lived (not the city), a work, a persona.
PERSONA_LABELS = {
    *(f"at:{place}" for place in LOCATIONS[1:]),
    *(f"job:{work}" for work in WORK_TYPES),
    *(f"as:{name}" for name in PERSONAS),
}
FIELDS = {
    "id",
    "title",
    "body",
    "category",
    "locations",
    "work_types",
    "keywords",
    "source",
    # What critiques select by (app/rag/corpus.py Traits), authored for every document.
    "effort",
    "cost",
    "places",
    "company",
    "anyone",
    "starter",
    "persona",
    # What a person for whom it is the best answer would type (app/chat/fit.py).
    "asks",
}
EFFORTS = ["easy", "medium", "hard"]
COSTS = ["free", "low", "some"]
PLACES = ["home", "work", "outside", "moving"]
COMPANY = ["alone", "family", "coworkers", "neighbours"]
#: Each critique must find something in each category: at least this many documents per
#: category satisfy it (easy, free, and each place and company value, counted separately).
MIN_PER_CRITIQUE = {"easy": 5, "free": 5, "home": 3, "alone": 5}
SOURCE = "eco-gateway team, original text (2026)"
ID_RE = re.compile(r"^[a-z]{2}-\d{3}$")
HANGUL_RE = re.compile(r"[\uac00-\ud7a3]")
MIN_PER_CATEGORY = 48  # the corpus holds 51 per category (408 in all; the issue asks >= 400)
MIN_PER_TAG = 40  # each location and work type at least this often
#: Each category ranks this many classic first steps (``starter`` 1 to 6, each rank once): what
#: a plain ask for the field is answered with (app/chat/planning.py).
STARTERS_PER_CATEGORY = 6


#: Beside the corpus: for a situation told alone, the challenges to show first (app/rag/
#: corpus.py SITUATION_FIRSTS), keyed by each location, work type and company.
FIRSTS = "situation_firsts.json"
FIRSTS_KEYS = [
    *(f"at:{x}" for x in LOCATIONS),
    *(f"job:{x}" for x in WORK_TYPES),
    f"job:{SHOP}",  # a shop's work: its firsts are checked for ease alone (see below)
    f"job:{DRIVING}",  # a driver's: done on the move (see below)
    *(f"with:{x}" for x in COMPANY),
]


def _str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)


def check(path: Path) -> tuple[list[str], list[dict]]:
    problems: list[str] = []
    docs: list[dict] = []
    seen_ids: set[str] = set()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        return [f"{path}: cannot read: {exc}"], []
    for n, line in enumerate(lines, 1):
        where = f"{path.name}:{n}"
        if not line.strip():
            problems.append(f"{where}: blank line")
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: invalid JSON: {exc}")
            continue
        if not isinstance(doc, dict):
            problems.append(f"{where}: not a JSON object")
            continue
        if set(doc) != FIELDS:
            missing, extra = FIELDS - set(doc), set(doc) - FIELDS
            problems.append(f"{where}: fields missing {sorted(missing)} extra {sorted(extra)}")
            continue
        did = doc["id"]
        if not isinstance(did, str) or not ID_RE.match(did):
            problems.append(f"{where}: bad id {did!r}")
        elif did in seen_ids:
            problems.append(f"{where}: duplicate id {did!r}")
        else:
            seen_ids.add(did)
        for key in ("title", "body"):
            val = doc[key]
            if not isinstance(val, str) or not val.strip() or not HANGUL_RE.search(val):
                problems.append(f"{where}: {key} must be non-empty Korean text")
        if isinstance(doc["body"], str):
            sentences = [s for s in re.split(r"(?<=[.!?])\s+", doc["body"].strip()) if s]
            if not 2 <= len(sentences) <= 4:
                problems.append(f"{where}: body has {len(sentences)} sentences, want 2-4")
        if doc["category"] not in CATEGORIES:
            problems.append(f"{where}: unknown category {doc['category']!r}")
        for key, allowed in (("locations", LOCATIONS), ("work_types", WORK_TYPES)):
            val = doc[key]
            if not _str_list(val) or not val:
                problems.append(f"{where}: {key} must be a non-empty list of strings")
            elif bad := [v for v in val if v not in allowed]:
                problems.append(f"{where}: unknown {key} {bad}")
            elif len(set(val)) != len(val):
                problems.append(f"{where}: duplicate {key}")
        kws = doc["keywords"]
        if not _str_list(kws) or not 3 <= len(kws) <= 6:
            problems.append(f"{where}: keywords must be 3-6 non-empty strings")
        elif len({k.lower() for k in kws}) != len(kws):
            problems.append(f"{where}: duplicate keywords")
        if doc["effort"] not in EFFORTS:
            problems.append(f"{where}: effort must be one of {EFFORTS}")
        if doc["cost"] not in COSTS:
            problems.append(f"{where}: cost must be one of {COSTS}")
        for key, allowed in (("places", PLACES), ("company", COMPANY)):
            val = doc[key]
            if not _str_list(val) or not val or any(v not in allowed for v in val):
                problems.append(f"{where}: {key} must be a non-empty list of {allowed}")
            elif len(set(val)) != len(val):
                problems.append(f"{where}: duplicate {key}")
        if not isinstance(doc["anyone"], bool):
            problems.append(f"{where}: anyone must be true or false")
        persona = doc["persona"]
        if not isinstance(persona, list) or any(p not in PERSONA_LABELS for p in persona):
            problems.append(f"{where}: persona must be a list of {sorted(PERSONA_LABELS)}")
        elif len(set(persona)) != len(persona):
            problems.append(f"{where}: duplicate persona")
        elif bool(persona) == (doc["anyone"] is True):
            problems.append(f"{where}: persona names who a narrow one is for (anyone: false) only")
        starter = doc["starter"]
        if starter is not None and (
            isinstance(starter, bool) or starter not in range(1, STARTERS_PER_CATEGORY + 1)
        ):
            problems.append(f"{where}: starter must be 1-{STARTERS_PER_CATEGORY} or null")
        asks = doc["asks"]
        if not _str_list(asks) or not 3 <= len(asks) <= 8:
            problems.append(f"{where}: asks must be 3-8 non-empty strings")
        elif len(set(asks)) != len(asks) or doc["title"] in asks:
            problems.append(f"{where}: asks must be distinct and not the title")
        elif any(not HANGUL_RE.search(a) or not 6 <= len(a) <= 60 for a in asks):
            problems.append(f"{where}: each ask is Korean, 6-60 characters")
        if doc["source"] != SOURCE:
            problems.append(f"{where}: source must be {SOURCE!r}")
        docs.append(doc)
    if not docs:
        problems.append(f"{path}: no documents")
    problems += _critique_coverage(docs)
    return problems, docs


def check_firsts(path: Path, docs: list[dict]) -> list[str]:
    """The situation firsts beside the corpus: every location, work type and company keyed,
    and a shop, and any of the personas (a persona's own challenge first), 3-8 distinct ids
    each, every one a document that fits its situation and is not
    hard (a shop's: not hard; the catalogue's work types tag a shop's everyday ones as any
    work's, "분리배출 네 가지 원칙 지키기")."""
    try:
        firsts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [f"{path}: {exc}"]
    personas = (
        {key for key in firsts if key.startswith("as:")} if isinstance(firsts, dict) else set()
    )
    if (
        not isinstance(firsts, dict)
        or sorted(set(firsts) - personas) != sorted(FIRSTS_KEYS)
        or not personas <= PERSONA_LABELS
    ):
        return [f"{path}: want exactly the keys {FIRSTS_KEYS}, and personas of {PERSONAS}"]
    by_id = {d["id"]: d for d in docs}
    problems = []
    for key, ids in firsts.items():
        if not _str_list(ids) or not 3 <= len(ids) <= 8 or len(set(ids)) != len(ids):
            problems.append(f"{path.name} {key}: want 3-8 distinct ids")
            continue
        kind, _, value = key.partition(":")
        if kind == "as":  # a persona's: its own challenge first, then any that is not hard
            first = by_id.get(ids[0])
            if first is None or key not in (first.get("persona") or ()):
                problems.append(f"{path.name} {key}: want one written for it first")
            if hard := [i for i in ids if (by_id.get(i) or {}).get("effort", "hard") == "hard"]:
                problems.append(f"{path.name} {key}: {hard} is no document, or is hard")
            continue
        field = {"at": "locations", "job": "work_types", "with": "company"}[kind]
        for doc_id in ids:
            doc = by_id.get(doc_id)
            if doc is None:
                problems.append(f"{path.name} {key}: {doc_id} is no document")
            elif (
                doc.get("effort") == "hard"
                or (value == DRIVING and "moving" not in (doc.get("places") or ()))
                or (value not in (SHOP, DRIVING) and value not in (doc.get(field) or ()))
            ):
                problems.append(f"{path.name} {key}: {doc_id} does not fit it, or is hard")
    return problems


def _satisfies(doc: dict, critique: str) -> bool:
    return (
        doc.get("effort") == critique
        or doc.get("cost") == critique
        or critique in (doc.get("places") or ())
        or critique in (doc.get("company") or ())
    )


def _critique_coverage(docs: list[dict]) -> list[str]:
    """Categories where a critique would find too few documents."""
    problems = []
    for code in CATEGORIES:
        sub = [d for d in docs if d.get("category") == code]
        for critique, least in MIN_PER_CRITIQUE.items():
            found = sum(_satisfies(d, critique) for d in sub)
            if sub and found < least:
                problems.append(f"{code}: {found} documents are {critique!r}, want >= {least}")
    return problems


def counts(docs: list[dict]) -> tuple[Counter, Counter, Counter]:
    cat: Counter = Counter(d["category"] for d in docs)
    loc: Counter = Counter(
        v for d in docs if isinstance(d["locations"], list) for v in d["locations"]
    )
    work: Counter = Counter(
        v for d in docs if isinstance(d["work_types"], list) for v in d["work_types"]
    )
    return cat, loc, work


def table(docs: list[dict]) -> str:
    """Markdown table: one row per category, columns = locations then work types."""
    head = ["category", "docs", *LOCATIONS, *WORK_TYPES]
    rows = [head, ["---"] * len(head)]
    for code, label in CATEGORIES.items():
        sub = [d for d in docs if d["category"] == code]
        _, loc, work = counts(sub)
        rows.append(
            [
                f"{code} ({label})",
                str(len(sub)),
                *(str(loc[x]) for x in LOCATIONS),
                *(str(work[x]) for x in WORK_TYPES),
            ]
        )
    _, loc, work = counts(docs)
    rows.append(
        [
            "**total**",
            str(len(docs)),
            *(str(loc[x]) for x in LOCATIONS),
            *(str(work[x]) for x in WORK_TYPES),
        ]
    )
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def traits_table(docs: list[dict]) -> str:
    """Markdown table: per category, how many documents satisfy each critique."""
    critiques = ["easy", "free", *PLACES, *COMPANY]
    head = ["category", *critiques, "anyone"]
    rows = [head, ["---"] * len(head)]
    for code, label in CATEGORIES.items():
        sub = [d for d in docs if d["category"] == code]
        rows.append(
            [
                f"{code} ({label})",
                *(str(sum(_satisfies(d, c) for d in sub)) for c in critiques),
                str(sum(d.get("anyone") is True for d in sub)),
            ]
        )
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    path = Path(args[0]) if args else DEFAULT_PATH
    problems, docs = check(path)
    if docs:
        cat, loc, work = counts(docs)
        for code in CATEGORIES:
            if cat[code] < MIN_PER_CATEGORY:
                problems.append(f"category {code}: {cat[code]} docs, want >= {MIN_PER_CATEGORY}")
            ranks = sorted(d["starter"] for d in docs if d["category"] == code and d.get("starter"))
            if ranks != list(range(1, STARTERS_PER_CATEGORY + 1)):
                problems.append(
                    f"category {code}: starter ranks {ranks}, want each of 1-"
                    f"{STARTERS_PER_CATEGORY} once"
                )
        firsts = path.with_name(FIRSTS)
        if firsts.exists() or path == DEFAULT_PATH:
            problems += check_firsts(firsts, docs)
        tags = loc + work  # location and work-type names do not overlap
        for name in (*LOCATIONS, *WORK_TYPES):
            if tags[name] < MIN_PER_TAG:
                problems.append(f"{name}: {tags[name]} docs, want >= {MIN_PER_TAG}")
        print(table(docs))
        print()
        print(traits_table(docs))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"FAIL: {len(problems)} problem(s) in {path}", file=sys.stderr)
        return 1
    print(f"OK: {len(docs)} documents in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
