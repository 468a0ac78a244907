"""What the model's choice adds: its picks among the candidates against retrieval's own order.

In the default composition (``ANSWER_COMPOSITION=picks``) the model only chooses which of the
``RETRIEVAL_K`` candidates to show, by their numbers. (bench/pick_bench.py asks it on the fit
bench's turns, the way a turn does: after the gateway's first challenge.) This bench asks it
the way the gateway does (the same prompt, schema and sampling, straight to vLLM's OpenAI
API) for each query of bench/data/queries_ko.jsonl (130 queries, each with the catalogue
documents that answer it), within the query's category, and counts how often a relevant
document is shown:

    retrieval top-3     the first three candidates, no model
    model picks         the model's three of the ``--k`` candidates (default 5)
    shown               the picks without repeats, filled up with candidates (the gateway)
    model first pick    its first pick is a relevant document (retrieval top-1 beside it)

    .venv/bin/python bench/choice_bench.py --vllm-url http://127.0.0.1:8800 --label qwen05

Prints a table; writes bench/results/choice_<label>.json. Embeds the corpus into an in-memory
store first (about a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx

from app.chat.prompts import PromptInput, answer_messages
from app.config import Settings
from app.domain.categories import Category
from app.llm.client import chat_payload
from app.llm.schema import answer_schema
from app.rag.corpus import load_corpus
from app.rag.embedder import load_embedder
from app.rag.ingest import ingest
from app.rag.retriever import Hit, HybridRetriever
from app.rag.scope import Scope
from app.rag.store_edge import EdgeStore

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "bench" / "data" / "queries_ko.jsonl"
CORPUS = ROOT / "app" / "rag" / "data" / "challenges.jsonl"


async def pick(
    client: httpx.AsyncClient, url: str, model: str, query: str, hits: list[Hit]
) -> tuple[list[str], float]:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    titles = [hit.document.title for hit in hits]
    prompt = PromptInput(category=hits[0].document.category, candidates=hits, message=query)
    messages = answer_messages(prompt, "picks", examples=settings.prompt_examples)
    schema = answer_schema(titles, composition="picks", min_items=3)
    body = chat_payload(settings, model, messages, schema, max_tokens=128)
    body["stream"] = False
    body.pop("stream_options")
    started = time.perf_counter()
    response = await client.post(f"{url}/v1/chat/completions", json=body)
    response.raise_for_status()
    answer = json.loads(response.json()["choices"][0]["message"]["content"])
    picked = [titles[n - 1] for n in answer["picks"] if 1 <= n <= len(titles)]
    return picked, time.perf_counter() - started


async def run(
    url: str, concurrency: int, rows: list[dict[str, Any]], retriever: HybridRetriever, k: int
) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=300) as client:
        model = (await client.get(f"{url}/v1/models")).json()["data"][0]["id"]
        limit = asyncio.Semaphore(concurrency)

        async def one(row: dict[str, Any]) -> dict[str, Any]:
            scope = Scope(category=Category[row["category"]])
            hits = retriever.search(row["query"], k=k, scope=scope)
            by_title = {hit.document.title: hit.document.id for hit in hits}
            async with limit:
                picked, seconds = await pick(client, url, model, row["query"], hits)
            relevant = set(row["relevant_ids"])
            ids = list(dict.fromkeys(by_title[t] for t in picked if t in by_title))
            # What the reader sees: the picks without repeats, filled up with the candidates.
            shown = (ids + [h.document.id for h in hits if h.document.id not in ids])[:3]
            order = [hit.document.id for hit in hits]
            return {
                "id": row["id"],
                "query": row["query"],
                "candidates": order,
                "picks": ids,
                "seconds": round(seconds, 2),
                "top3_hit": bool(relevant & set(order[:3])),
                "picks_hit": bool(relevant & set(ids[:3])),
                "shown_hit": bool(relevant & set(shown)),
                "top1_hit": order[0] in relevant,
                "first_pick_hit": bool(ids) and ids[0] in relevant,
                "candidates_hit": bool(relevant & set(order)),
                "pick_ranks": [order.index(i) for i in ids],
            }

        return await asyncio.gather(*(one(row) for row in rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-url", default="http://127.0.0.1:8800")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--label", default="default")
    parser.add_argument("--k", type=int, default=5, help="candidates (RETRIEVAL_K)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines()]
    rows = [row for row in rows if row.get("relevant_ids") and row.get("category")]
    embedder = load_embedder(None)
    store = EdgeStore(":memory:")
    ingest(store, "bench", embedder, load_corpus(CORPUS))
    store.optimize("bench")
    retriever = HybridRetriever(store, "bench", embedder)
    results = asyncio.run(run(args.vllm_url, args.concurrency, rows, retriever, args.k))
    n = len(results)

    def share(key: str) -> float:
        return round(sum(r[key] for r in results) / n, 3)

    ranks = [rank for r in results for rank in r["pick_ranks"]]
    summary = {
        "queries": n,
        "relevant_among_candidates": share("candidates_hit"),
        "retrieval_top3_hit": share("top3_hit"),
        "model_picks_hit": share("picks_hit"),
        "shown_hit": share("shown_hit"),
        "retrieval_top1_hit": share("top1_hit"),
        "model_first_pick_hit": share("first_pick_hit"),
        "picks_in_retrieval_order": round(
            sum(r["pick_ranks"] == sorted(r["pick_ranks"]) for r in results) / n, 3
        ),
        "candidates": args.k,
        "pick_rank_counts": {str(rank): ranks.count(rank) for rank in range(args.k)},
        "seconds_p50": sorted(r["seconds"] for r in results)[n // 2],
    }
    for key, value in summary.items():
        print(f"  {key:<28} {value}")
    out = ROOT / "bench" / "results" / f"choice_{args.label}.json"
    out.write_text(
        json.dumps(
            {
                "label": args.label,
                "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
                "summary": summary,
                "results": results,
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
