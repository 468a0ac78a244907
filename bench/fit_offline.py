"""The fit bench's conversations played through the planner in process, without the model.

    .venv/bin/python bench/fit_offline.py --split dev [--store /tmp/fit-store] [--failures]

What the gateway decides before the model writes (bench/fit_bench.py runs the whole stack):
each conversation's turns in order in one session, each planned by the gateway's own
``Planner`` (understanding, constraints, candidates, ranking, the question's answer, the
recommend); the answer shows the gateway's first challenge and the next two ranked (where
the model would choose two of the next three), and the session remembers them. Scored as
bench/fit_scoring.py scores the gateway's answers: first_fits, share_fits, rule_by_traits,
answered; situation_fits, the reader check "fits" (in a base-info session every challenge
shown fits its location and work type); and constraints_read, the constraints in force exactly
those labelled (what a critique's rule is judged by). Deterministic, about five seconds a split once the store is built: the loop to tune
the planner on (dev and dev2); the stack's bench reports.

The store: ``--store`` (or ``QDRANT_PATH``) is an embedded Qdrant directory; an empty one is
built from the bundled catalogue on the first run (about a minute), and a running gateway's
own store cannot be opened beside it (one process per store). Writes
bench/results/fit_offline_<split>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fit_bench import load, rate  # noqa: E402
from bench.fit_scoring import (  # noqa: E402
    MISSES,
    SPLITS,
    answered,
    answered_plainly,
    first_fits,
    fitting,
    rule_by_traits,
    where_missed,
)

RESULTS = ROOT / "bench" / "results"
METRICS = (
    "first_fits",
    "share_fits",
    "rule_by_traits",
    "answered",
    "answered_plainly",
    "situation_fits",
    "constraints_read",
)


async def remember(sessions: Any, plan: Any, shown: tuple[str, ...]) -> None:
    """The planned turn in its session as the gateway keeps it after the answer (``shown``:
    the challenges the answer showed; no model text: app/chat/generation.py keeps that)."""
    from app.chat.sessions import Turn

    turn = Turn(
        user=plan.user_text,
        assistant="",
        category=plan.category,
        shown=shown,
        constraints=plan.constraints,
        told=plan.told,
        topic=plan.topic,
    )
    await sessions.record(plan.session_id, turn=turn)


@asynccontextmanager
async def planner_in_process() -> AsyncIterator[Any]:
    """The gateway's own ``Planner``, its app's lifespan open (the store, the embedder, the
    example and fit banks), as the gateway plans a turn; no model is asked."""
    from app.main import create_app

    app = create_app()
    async with app.router.lifespan_context(app) as state:
        yield state["chat"].service._planner


async def play(
    convos: list[dict[str, Any]], on_plan: Callable[[str, Any], None] | None = None
) -> list[dict[str, Any]]:
    """Every turn's scores, in order; ``on_plan(turn id, plan)`` sees each turn's plan
    (bench/pick_bench.py asks the model with it)."""
    from app.chat.plan import BaseInfoTurn, FreeTextTurn, TurnPlan
    from app.config import Settings
    from app.domain.categories import Category
    from app.rag.corpus import load_corpus

    rows: list[dict[str, Any]] = []
    async with planner_in_process() as planner:
        sessions = planner._sessions
        documents = {d.id: d for d in load_corpus(Settings().corpus_path)}
        for convo in convos:
            session = f"fit-offline-{convo['id']}-{time.time_ns()}"
            earlier: list[str | None] = []
            previous: list[str | None] = []
            given: tuple[str, str] | None = None  # base-info's location and work type
            before: str | None = None  # the field the conversation was in before the turn
            for number, step in enumerate(convo["steps"]):
                label = step["label"]
                if "base" in step:
                    base = step["base"]
                    given = (base["location"], base["workType"])
                    plan: Any = await planner.base_info(
                        BaseInfoTurn(
                            session,
                            None,
                            time.monotonic(),
                            base["location"],
                            base["workType"],
                            Category[base["category"]],
                        )
                    )
                else:
                    turn = FreeTextTurn(session, None, time.monotonic(), step["message"])
                    plan = await planner.free_text(turn)
                if on_plan is not None:
                    on_plan(f"{convo['id']}#{number}", plan)
                ids: list[str | None] = []
                pool: list[str] = []  # every candidate, in the planner's order
                recommend = ""
                read: list[str] | None = None  # the constraints in force, as the planner read them
                if isinstance(plan, TurnPlan) and plan.lead is not None:
                    pool = [plan.lead.document.id, *(h.document.id for h in plan.candidates)]
                    ids = list(pool[:3])
                    recommend = plan.recommend or ""
                    read = sorted(plan.constraints)
                    await remember(sessions, plan, tuple(i for i in ids if i))
                rows.append(
                    {
                        "id": f"{convo['id']}#{number}",
                        "kind": label["kind"],
                        "asked": step.get("message") or step.get("base"),
                        "shown": ids,
                        "recommend": recommend,
                        "first_fits": first_fits(ids, label),
                        "missed": where_missed(
                            ids, label, pool=pool, before=before, earlier=earlier
                        ),
                        "fitting": fitting(ids, label),
                        "rule_by_traits": rule_by_traits(ids, label, recommend, earlier, previous),
                        "answered": answered(ids, label, recommend),
                        "answered_plainly": answered_plainly(ids, label, recommend),
                        "read": read,
                        # The constraints in force are exactly those labelled (carried ones too).
                        "constraints_read": None
                        if read is None
                        else read == sorted(label.get("constraints") or ()),
                        # SPEC: in a base-info session every challenge fits its location and
                        # work type (bench/reader_checks.py "fits"); None without one.
                        "situation_fits": None
                        if given is None or not ids
                        else all(
                            given[0] in documents[i].locations
                            and given[1] in documents[i].work_types
                            for i in ids
                            if i in documents
                        ),
                    }
                )
                earlier += ids
                previous = ids or previous
                if isinstance(plan, TurnPlan) and plan.lead is not None:
                    before = plan.category.name
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Each metric's rate, overall and per kind of turn (as fit_bench.py rates them)."""
    kinds = ["all", *sorted({row["kind"] for row in rows})]
    return {
        metric: {
            kind: rate([r for r in rows if kind == "all" or r["kind"] == kind], metric)[0]
            for kind in kinds
        }
        for metric in METRICS
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default="dev",
    )
    parser.add_argument("--store", help="an embedded Qdrant directory (default: QDRANT_PATH)")
    parser.add_argument("--failures", action="store_true", help="print each first challenge missed")
    args = parser.parse_args()
    if args.store:
        os.environ["QDRANT_PATH"] = args.store
    logging.disable(logging.WARNING)  # the upstream is not needed: its probe's warnings
    rows = asyncio.run(play(load(args.split)))
    table = summarize(rows)
    kinds = list(table["first_fits"])
    print(f"{'metric':<16}" + "".join(f"{k:>10}" for k in kinds))
    for metric, rates in table.items():
        cells = (f"{rates[k]:>10.3f}" if rates[k] is not None else f"{'-':>10}" for k in kinds)
        print(f"{metric:<16}" + "".join(cells))
    misses = {
        kind: Counter(r["missed"] for r in rows if kind in ("all", r["kind"])) for kind in kinds
    }
    print("where a first that does not fit went wrong (bench/fit_scoring.py where_missed):")
    for miss in MISSES:
        print(f"  {miss:<14}" + "".join(f"{misses[k][miss]:>10}" for k in kinds))
    if args.failures:
        for row in rows:
            if row["first_fits"] is False:
                print(f"  {row['id']:<10} {row['kind']:<8} {row['asked']} -> {row['shown']}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"fit_offline_{args.split}.json"
    out.write_text(
        json.dumps(
            {
                "split": args.split,
                "summary": table,
                "misses": {k: {m: misses[k][m] for m in MISSES} for k in kinds},
                "turns": rows,
            },
            ensure_ascii=False,
            indent=1,
        ),
        encoding="utf-8",
    )
    print(f"written: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
