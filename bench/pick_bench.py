"""What the model's choice adds on the fit bench's turns: its picks against retrieval's order.

    .venv/bin/python bench/pick_bench.py --split test [--vllm-url http://127.0.0.1:8800]

In the default composition (``ANSWER_COMPOSITION=picks``) the gateway puts the first challenge
and the model chooses the next ones among the ranked candidates. This bench plays a fit split
through the gateway's own planner (as bench/fit_offline.py does: the sessions remember
retrieval's answer), and for every turn where the model chooses, asks vLLM three ways, side by
side in one run, four requests at once:

    retrieval   the next candidates in the ranking's order (no model)
    picks       the gateway's own request: the candidates' numbers (what ships)
    titles      the same choice written as titles (the former ``titles`` composition,
                rebuilt here from the picks prompt: candidates listed by title, the titles'
                grammar enum)

Scored by the split's labels (bench/fit_scoring.py ``fitting``: challenges shown that are
acceptable), with how often the model's choice is retrieval's order, the tokens it wrote and
its seconds. Needs a store as fit_offline.py does (``--store`` or QDRANT_PATH). Writes
bench/results/pick_<split>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fit_bench import load  # noqa: E402
from bench.fit_offline import play  # noqa: E402
from bench.fit_scoring import SPLITS, fitting  # noqa: E402

WAYS = ("retrieval", "picks", "titles")
_NUMBERED = re.compile(r"^\d+\. (.+)$", re.MULTILINE)
#: The former titles composition's system prompt, word for word.
_TITLES_SYSTEM = """당신은 일상에서 실천할 수 있는 친환경 챌린지를 골라 주는 도우미입니다.
사용자의 말과 상황을 읽고, 후보 챌린지 가운데 사용자에게 가장 알맞은 것을 골라 JSON으로만 답하세요.
- "challenges": 고른 챌린지마다 "title" 하나. 가장 알맞은 것부터, 후보 목록의 제목을 그대로 적고, 같은 챌린지를 두 번 고르지 않습니다."""


def by_title(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The picks prompt as the former titles composition wrote it: candidates by title on one
    line ("후보: a / b"), the example answering with titles."""

    def listed(text: str) -> tuple[str, list[str]]:
        titles = _NUMBERED.findall(text)
        head = _NUMBERED.sub("", text).replace("후보:\n", "").rstrip("\n")
        return f"{head}\n후보: " + " / ".join(titles), titles

    out = [{"role": "system", "content": _TITLES_SYSTEM}]
    titles: list[str] = []
    for message in messages[1:]:
        if message["role"] == "user":
            content, titles = listed(message["content"])
            out.append({"role": "user", "content": content})
        else:
            picks = json.loads(message["content"])["picks"]
            chosen = [{"title": titles[n - 1]} for n in picks]
            out.append(
                {
                    "role": "assistant",
                    "content": json.dumps({"challenges": chosen}, ensure_ascii=False),
                }
            )
    return out


def titles_schema(titles: list[str], picks: int) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {"title": {"type": "string", "enum": titles}},
        "required": ["title"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "challenges": {"type": "array", "items": item, "minItems": picks, "maxItems": picks}
        },
        "required": ["challenges"],
        "additionalProperties": False,
    }


async def ask(
    client: httpx.AsyncClient, url: str, model: str, messages: list[Any], schema: dict[str, Any]
) -> tuple[dict[str, Any], int, float]:
    body = {
        "model": model,
        "messages": messages,
        "temperature": 0,
        "max_tokens": 128,
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
    }
    started = time.perf_counter()
    response = await client.post(f"{url}/v1/chat/completions", json=body)
    response.raise_for_status()
    data = response.json()
    answer = json.loads(data["choices"][0]["message"]["content"])
    return answer, data["usage"]["completion_tokens"], time.perf_counter() - started


async def run(split: str, url: str, concurrency: int) -> list[dict[str, Any]]:
    convos = load(split)
    labels = {f"{c['id']}#{n}": step["label"] for c in convos for n, step in enumerate(c["steps"])}
    plans: list[tuple[str, Any]] = []

    def chooses(turn: str, plan: Any) -> None:
        if getattr(plan, "composition", None) == "picks" and plan.candidates and plan.max_picks:
            plans.append((turn, plan))

    await play(convos, on_plan=chooses)
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=600) as client:
        model = (await client.get(f"{url}/v1/models")).json()["data"][0]["id"]

        async def one(turn: str, plan: Any) -> dict[str, Any]:
            ids = [hit.document.id for hit in plan.candidates]
            titles = [hit.document.title for hit in plan.candidates]
            k = plan.max_picks
            async with limit:
                picks, picks_tokens, picks_s = await ask(
                    client, url, model, list(plan.messages), plan.schema()
                )
            async with limit:
                named, titles_tokens, titles_s = await ask(
                    client, url, model, by_title(list(plan.messages)), titles_schema(titles, k)
                )
            chosen = {
                "retrieval": ids[:k],
                "picks": [ids[n - 1] for n in picks["picks"] if 1 <= n <= len(ids)][:k],
                "titles": [ids[titles.index(c["title"])] for c in named["challenges"]][:k],
            }
            return {
                "turn": turn,
                "k": k,
                "chosen": chosen,
                "fits": {way: fitting(chosen[way], labels[turn]) for way in WAYS},
                "tokens": {"picks": picks_tokens, "titles": titles_tokens},
                "seconds": {"picks": round(picks_s, 2), "titles": round(titles_s, 2)},
            }

        return list(await asyncio.gather(*(one(turn, plan) for turn, plan in plans)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=SPLITS, default="dev")
    parser.add_argument("--vllm-url", default="http://127.0.0.1:8800")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--store", help="an embedded Qdrant directory (default: QDRANT_PATH)")
    args = parser.parse_args()
    if args.store:
        os.environ["QDRANT_PATH"] = args.store
    logging.disable(logging.WARNING)
    rows = asyncio.run(run(args.split, args.vllm_url, args.concurrency))
    slots = sum(row["k"] for row in rows)

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2] if values else 0.0

    summary: dict[str, Any] = {"split": args.split, "turns": len(rows), "shown": slots}
    print(f"{len(rows)} turns where the model chooses ({slots} challenges after the first)")
    print(f"{'way':<10}{'fit':>8}{'share':>8}{'= retrieval':>13}{'tokens p50':>12}{'s p50':>8}")
    for way in WAYS:
        fit = sum(row["fits"][way] for row in rows)
        same = sum(row["chosen"][way] == row["chosen"]["retrieval"] for row in rows)
        tokens = median([row["tokens"][way] for row in rows]) if way != "retrieval" else 0
        seconds = median([row["seconds"][way] for row in rows]) if way != "retrieval" else 0.0
        summary[way] = {
            "fit": fit,
            "share": round(fit / slots, 3) if slots else None,
            "retrieval_order": same,
            "tokens_p50": tokens,
            "seconds_p50": seconds,
        }
        print(f"{way:<10}{fit:>8}{fit / max(slots, 1):>8.3f}{same:>13}{tokens:>12}{seconds:>8}")
    out = ROOT / "bench" / "results" / f"pick_{args.split}.json"
    machine = {"cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    out.write_text(
        json.dumps(
            {"summary": summary, "machine": machine, "turns": rows}, ensure_ascii=False, indent=1
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"written: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
