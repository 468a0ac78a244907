"""A stranger's two-turn critiques played through the planner in process, without the model.

    .venv/bin/python bench/critique_probe.py [--store /tmp/fit-store] [--failures]

Each chat (bench/data/critiques/stranger.jsonl: 64, written by a helper who read nothing of
this repository) is a first message in one field, then a critique that asks for new ones of
that field meeting one or two constraints, said as people say them ("비 와서 못 나가는데 집에서
할 수 있는 다른 거", "월급날 전이라서요"). Scored without labels of challenges, by what the SPEC
says a critique does:

- ``first_field``: the first answer is in the chat's field;
- ``kept``: the critique's answer stays in the first answer's field;
- ``read``: the constraints in force include those the chat names;
- ``no_repeat``: nothing the first answer showed is shown again;
- ``rule``: no repeat, and every challenge shown meets the constraints in force, or the answer
  says none does.

The answer shows the gateway's first challenge and the next two ranked, as fit_offline.py
does. Not held out: the seventh pass of issue 30 mended what it showed (a critique read as
another field, a second constraint the vote drowned). Writes bench/results/critique_probe.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "bench" / "data" / "critiques" / "stranger.jsonl"
RESULTS = ROOT / "bench" / "results"
METRICS = ("first_field", "kept", "read", "no_repeat", "rule")


async def play(chats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every chat's scores, in order."""
    from app.chat.constraints import Constraint, satisfies
    from app.chat.plan import FreeTextTurn, TurnPlan
    from bench.fit_offline import planner_in_process, remember

    rows: list[dict[str, Any]] = []
    async with planner_in_process() as planner:
        sessions = planner._sessions
        for number, chat in enumerate(chats):
            session = f"critique-probe-{number}-{time.time_ns()}"
            first = await planner.free_text(
                FreeTextTurn(session, None, time.monotonic(), chat["first"])
            )
            row: dict[str, Any] = {"first": chat["first"], "critique": chat["critique"]}
            if not isinstance(first, TurnPlan) or first.lead is None:
                rows.append({**row, **dict.fromkeys(METRICS, False), "refused": "first"})
                continue
            shown = (first.lead.document.id, *(h.document.id for h in first.candidates[:2]))
            await remember(sessions, first, shown)
            plan = await planner.free_text(
                FreeTextTurn(session, None, time.monotonic(), chat["critique"])
            )
            if not isinstance(plan, TurnPlan) or plan.lead is None:
                rows.append({**row, **dict.fromkeys(METRICS, False), "refused": "critique"})
                continue
            hits = (plan.lead, *plan.candidates[:2])
            in_force = [Constraint(c) for c in plan.constraints]
            no_repeat = not {h.document.id for h in hits} & set(shown)
            meets = all(satisfies(h.document.traits, in_force) for h in hits)
            says_none = "찾지 못했" in (plan.recommend or "")
            rows.append(
                {
                    **row,
                    "fields": [first.category.name, plan.category.name],
                    "constraints": sorted(plan.constraints),
                    "shown": [h.document.title for h in hits],
                    "first_field": first.category.name == chat["field"],
                    "kept": plan.category is first.category,
                    "read": set(chat["constraints"]) <= set(plan.constraints),
                    "no_repeat": no_repeat,
                    "rule": no_repeat and (meets or says_none),
                }
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="an embedded Qdrant directory (default: QDRANT_PATH)")
    parser.add_argument("--failures", action="store_true", help="print each chat that failed")
    args = parser.parse_args()
    if args.store:
        os.environ["QDRANT_PATH"] = args.store
    logging.disable(logging.WARNING)
    chats = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    rows = asyncio.run(play(chats))
    summary = {m: round(sum(bool(r[m]) for r in rows) / len(rows), 3) for m in METRICS}
    print(f"{len(rows)} chats")
    for metric in METRICS:
        print(f"  {metric:<12} {summary[metric]:.3f}")
    if args.failures:
        for r in rows:
            missed = [m for m in METRICS if not r[m]]
            if missed:
                print(f"  {','.join(missed):<20} {r['first']} || {r['critique']}")
                print(f"      {r.get('fields')} {r.get('constraints')} {r.get('shown')}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "critique_probe.json"
    out.write_text(
        json.dumps(
            {"chats": len(rows), "summary": summary, "rows": rows}, ensure_ascii=False, indent=1
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"written: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
