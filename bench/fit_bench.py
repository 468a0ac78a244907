"""Answers that fit what was asked: labelled conversations through a running gateway.

    make run                                         # vLLM + the default model + gateway
    .venv/bin/python bench/fit_bench.py --split test --concurrency 4 --label default-test-4

Conversations: bench/data/fit/{dev,test}.jsonl (bench/README.md, "Fit"): first turns (plain
asks, questions, situations told in words), base-info sessions, and follow-ups that critique
("더 쉬운 거", "돈 안 드는 거", "집에서"), choose among ("그 중에 …"), ask for more or switch
field. Every turn is labelled by reading the catalogue: the challenges acceptable first
(``first_ok``), those acceptable at all (``ok``), the constraints and the relation a follow-up
keeps, and for questions the documents that hold the answer. Tune on dev; test is run only to
report.

Each conversation runs its turns in order in its own session; ``--concurrency`` conversations
at once. Per answer (bench/fit_scoring.py): first_fits, share_fits, rule_kept, rule_by_traits,
speaks, openings_distinct, answered, answered_plainly (a held answer not hedged), and reader (every bench/reader_checks.py check). Prints a table
per metric (overall and per kind of turn), the failures, and the close times; writes
bench/results/fit_<label>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.answer_quality import (  # noqa: E402
    LABELS,
    one_answer,
    request_of,
    run_conversations,
    turn_of,
)
from bench.fit_scoring import (  # noqa: E402
    KINDS,
    SPLITS,
    answered,
    answered_plainly,
    first_fits,
    fitting,
    rule_by_traits,
    rule_kept,
    shown_ids,
    speaks,
    unique_openings,
)
from bench.reader_checks import judge, passed  # noqa: E402

DATA = ROOT / "bench" / "data" / "fit"
METRICS = (
    "first_fits",
    "share_fits",
    "rule_kept",
    "rule_by_traits",
    "speaks",
    "openings_distinct",
    "answered",
    "answered_plainly",
)


def load(split: str) -> list[dict[str, Any]]:
    lines = (DATA / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


async def conversation(
    client: httpx.AsyncClient, convo: dict[str, Any], run_id: str
) -> list[dict[str, Any]]:
    session = f"fit-{run_id}-{convo['id']}"
    location = work_type = None
    told: list[str] = []  # the situation so far: base-info values, earlier messages
    earlier_titles: list[str] = []
    previous_titles: list[str] = []
    earlier_ids: list[str | None] = []
    previous_ids: list[str | None] = []
    answers = []
    for number, step in enumerate(convo["steps"]):
        label = step["label"]
        path, params, message = request_of(step, session)
        if message is None:
            location, work_type = params["location"], params["workType"]
            told += [location, work_type, LABELS[params["category"]]]
            asked = f"[base {location}/{work_type}/{params['category']}]"
        else:
            asked = message
        result = await one_answer(client, path, params)
        turn = turn_of(
            result,
            message,
            categories=label["categories"],
            location=location,
            work_type=work_type,
            relation=label["relation"],
            earlier_titles=list(earlier_titles),
            previous_titles=list(previous_titles),
        )
        problems = judge(turn)
        ids = shown_ids(turn.challenges)
        score = {
            "first_fits": first_fits(ids, label),
            "rule_kept": rule_kept(ids, label, turn.recommend, earlier_ids, previous_ids),
            "rule_by_traits": rule_by_traits(ids, label, turn.recommend, earlier_ids, previous_ids),
            "speaks": speaks(turn, label, told),
            "answered": answered(ids, label, turn.recommend),
            "answered_plainly": answered_plainly(ids, label, turn.recommend),
            "reader": passed(problems),
        }
        answers.append(
            {
                "id": f"{convo['id']}#{number}",
                "kind": label["kind"],
                "asked": asked,
                "first_text_s": result["first_text_s"],
                "close_s": result["close_s"],
                "terminal": result["event"],
                "status": result.get("status"),
                "recommend": turn.recommend,
                "shown": ids,
                "titles": [str(c.get("title")) for c in turn.challenges],
                "fitting": fitting(ids, label),
                "share_fits": round(fitting(ids, label) / len(ids), 3) if ids else None,
                "first_ok": label["first_ok"],
                **score,
                "problems": {k: v for k, v in problems.items() if v},
            }
        )
        titles = answers[-1]["titles"]
        earlier_titles += titles
        previous_titles = titles
        earlier_ids += ids
        previous_ids = ids
        if message:
            told.append(message)
        failed = _failed(answers[-1])
        print(
            f"  {'ok  ' if not failed else 'FAIL'} {answers[-1]['id']:<12} {label['kind']:<8} "
            f"close {result['close_s']:5.1f}s  {asked[:34]:<34} {','.join(failed)}",
            flush=True,
        )
    return answers


async def run(url: str, convos: list[dict[str, Any]], concurrency: int) -> list[dict[str, Any]]:
    answers = await run_conversations(url, convos, concurrency, conversation)
    flags = unique_openings([(a["asked"], a["recommend"]) for a in answers])
    for answer, flag in zip(answers, flags, strict=True):
        answer["openings_distinct"] = flag
    return answers


# ---------------------------------------------------------------------------- summary


def _failed(answer: dict[str, Any]) -> list[str]:
    """The metrics this answer fails (share_fits: any shown challenge outside ``ok``)."""
    failed = [m for m in (*METRICS, "reader") if answer.get(m) is False]
    share = answer.get("share_fits")
    if share is not None and share < 1:
        failed.insert(1, "share_fits")
    return failed


def rate(answers: list[dict[str, Any]], metric: str) -> tuple[float | None, int]:
    """A metric's rate over ``answers`` and how many it judged (share_fits: over every
    challenge shown)."""
    if metric == "share_fits":  # over all shown challenges, not per answer
        shown = sum(len(a["shown"]) for a in answers)
        return (round(sum(a["fitting"] for a in answers) / shown, 3) if shown else None), shown
    values = [a[metric] for a in answers if a[metric] is not None]
    return (round(sum(values) / len(values), 3) if values else None), len(values)


def summarize(answers: list[dict[str, Any]]) -> dict[str, Any]:
    groups = {"all": answers} | {k: [a for a in answers if a["kind"] == k] for k in KINDS}
    table = {
        metric: {name: rate(group, metric) for name, group in groups.items() if group}
        for metric in (*METRICS, "reader")
    }
    closes = [a["close_s"] for a in answers if a["terminal"] == "close"]
    firsts = [a["first_text_s"] for a in answers if a["first_text_s"] is not None]
    return {
        "answers": len(answers),
        "turns_per_kind": {k: len(g) for k, g in groups.items() if k != "all"},
        "table": {
            m: {g: {"rate": r, "n": n} for g, (r, n) in row.items()} for m, row in table.items()
        },
        "close_p50_s": round(statistics.median(closes), 2) if closes else None,
        "first_text_p50_s": round(statistics.median(firsts), 2) if firsts else None,
        "terminals": {
            t: sum(a["terminal"] == t for a in answers) for t in {a["terminal"] for a in answers}
        },
    }


def print_table(summary: dict[str, Any]) -> None:
    kinds = [k for k in ("all", *KINDS) if k == "all" or summary["turns_per_kind"].get(k)]
    print(f"\n  {'metric':<18}" + "".join(f"{k:>13}" for k in kinds))
    for metric, row in summary["table"].items():
        cells = []
        for kind in kinds:
            cell = row.get(kind, {"rate": None, "n": 0})
            rate = "-" if cell["rate"] is None else f"{cell['rate']:.2f}"
            cells.append(f"{rate} ({cell['n']})")
        print(f"  {metric:<18}" + "".join(f"{c:>13}" for c in cells))
    print(
        f"\n  close p50 {summary['close_p50_s']} s, first text p50 {summary['first_text_p50_s']} s, "
        f"terminals {summary['terminals']}"
    )


def print_failures(answers: list[dict[str, Any]]) -> None:
    print("\nfailures:")
    for a in answers:
        failed = _failed(a)
        if not failed:
            continue
        first = f"{a['shown'][0]} {a['titles'][0]}" if a["shown"] else "nothing shown"
        print(f"  {a['id']:<12} {a['kind']:<8} {','.join(failed)}")
        print(f"      asked: {a['asked'][:60]}")
        print(f"      first: {first}   (first_ok {' '.join(a['first_ok'][:6])})")
        print(f"      recommend: {a['recommend'][:90]!r}")
        if a["problems"]:
            print(f"      reader: {'; '.join(p for v in a['problems'].values() for p in v)[:120]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--split", choices=SPLITS, default="dev")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--limit", type=int, default=0, help="first N conversations (smoke runs)")
    parser.add_argument("--label", default="default")
    args = parser.parse_args()

    convos = load(args.split)
    convos = convos[: args.limit] if args.limit else convos
    turns = sum(len(c["steps"]) for c in convos)
    print(
        f"{len(convos)} conversations ({turns} answers, {args.split}) through {args.url}, "
        f"{args.concurrency} at a time"
    )
    started = time.time()
    answers = asyncio.run(run(args.url, convos, args.concurrency))
    summary = summarize(answers)
    print_table(summary)
    print_failures(answers)
    out = ROOT / "bench" / "results" / f"fit_{args.label}.json"
    out.write_text(
        json.dumps(
            {
                "label": args.label,
                "split": args.split,
                "url": args.url,
                "concurrency": args.concurrency,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                "seconds": round(time.time() - started, 1),
                "summary": summary,
                "answers": answers,
            },
            ensure_ascii=False,
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"\nwritten: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
