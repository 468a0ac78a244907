"""Retrieval quality and latency: dense, sparse and hybrid over the bundled corpus, and search
latency as the collection grows. (The off-topic decision is the intent step's:
bench/intent_eval.py.)

    .venv/bin/python bench/retrieval_bench.py [--scale 2000,20000,100000] [--no-scale]
Writes bench/results/retrieval.json. Queries: bench/data/queries_ko.jsonl (hand-judged).

- recall@3: share of a query's relevant documents found in the top 3 (relevant sets larger
  than 3 count as 3), averaged over on-topic queries; hit@3: at least one in the top 3;
  MRR@10: 1/rank of the first relevant document within 10.
- latency: query embedding plus search, per query, in the process (the embedded store).
- scale: the bundled documents' vectors, perturbed and repeated to N points (real query
  embeddings; synthetic documents, since embedding 100k passages here takes hours), in the
  embedded store, indexed (``optimize``) after loading. bench/store_bench.py compares the
  engines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.rag.corpus import load_corpus  # noqa: E402
from app.rag.embedder import load_embedder  # noqa: E402
from app.rag.retriever import HybridRetriever, SearchMode  # noqa: E402
from app.rag.sparse import SparseEncoder  # noqa: E402
from app.rag.store_open import open_store  # noqa: E402
from tests.support.store import bundled_store_template, store_copy  # noqa: E402

QUERIES = ROOT / "bench" / "data" / "queries_ko.jsonl"
CORPUS = ROOT / "app" / "rag" / "data" / "challenges.jsonl"
COLLECTION = "challenges"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _quality(retriever: HybridRetriever, queries: list[dict[str, Any]]) -> dict[str, Any]:
    recalls, hits, rranks, latencies = [], [], [], []
    by_kind: dict[str, list[float]] = {}
    for query in queries:
        started = time.perf_counter()
        found = retriever.search(query["query"], k=10)
        latencies.append((time.perf_counter() - started) * 1000)
        if not query["relevant_ids"]:
            continue
        ids = [hit.document.id for hit in found]
        relevant = set(query["relevant_ids"])
        top3 = set(ids[:3])
        recall = len(relevant & top3) / min(3, len(relevant))
        recalls.append(recall)
        hits.append(1.0 if relevant & top3 else 0.0)
        rank = next((i + 1 for i, doc in enumerate(ids) if doc in relevant), None)
        rranks.append(1 / rank if rank else 0.0)
        by_kind.setdefault(query["kind"], []).append(recall)
    return {
        "recall@3": statistics.mean(recalls),
        "hit@3": statistics.mean(hits),
        "mrr@10": statistics.mean(rranks),
        "p50_ms": statistics.median(latencies),
        "p95_ms": _pct(latencies, 0.95),
        "recall@3_by_kind": {kind: statistics.mean(v) for kind, v in sorted(by_kind.items())},
        "queries": len(recalls),
    }


def _scale(embedder: Any, sizes: list[int], queries: list[str]) -> dict[str, Any]:
    documents = load_corpus(CORPUS)
    base = embedder.embed_passages([d.text for d in documents])
    encoder = SparseEncoder()
    sparse = [encoder.encode_passage(d.text) for d in documents]
    query_vectors = embedder.embed_queries(queries)
    query_sparse = [encoder.encode_query(q) for q in queries]
    rng = np.random.default_rng(7)
    results = {}
    for size in sizes:
        store = open_store(url=None, path=str(Path(tempfile.mkdtemp()) / "qdrant"))
        store.ensure_collection(COLLECTION, embedder.dim)
        started = time.perf_counter()
        for start in range(0, size, 2000):
            n = min(2000, size - start)
            pick = rng.integers(0, len(documents), n)
            noisy = base[pick] + rng.normal(0, 0.02, (n, embedder.dim)).astype(np.float32)
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            store.upsert(
                COLLECTION,
                [f"00000000-0000-0000-0000-{start + i:012d}" for i in range(n)],
                noisy,
                [sparse[i] for i in pick],
                [{"doc_id": f"s{start + i}", "category": documents[i].category.code} for i in pick],
            )
        store.optimize(COLLECTION)
        load_s = time.perf_counter() - started
        timings = []
        for vector, sv in zip(query_vectors, query_sparse, strict=True):
            t0 = time.perf_counter()
            store.search(COLLECTION, dense=vector, sparse=sv, limit=3)
            timings.append((time.perf_counter() - t0) * 1000)
        store.close()
        results[str(size)] = {
            "search_p50_ms": statistics.median(timings),
            "search_p95_ms": _pct(timings, 0.95),
            "load_seconds": load_s,
        }
        print(f"  scale {size}: p50 {results[str(size)]['search_p50_ms']:.1f} ms", file=sys.stderr)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="2000,20000,100000")
    parser.add_argument("--no-scale", action="store_true")
    args = parser.parse_args()
    queries = [
        json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines() if line
    ]
    print("building/reusing the bundled store ...", file=sys.stderr)
    path = store_copy(bundled_store_template(), Path(tempfile.mkdtemp()) / "qdrant")
    embedder = load_embedder(None)
    store = open_store(url=None, path=str(path))
    result: dict[str, Any] = {"embedder": embedder.name, "modes": {}}
    for mode in SearchMode:
        retriever = HybridRetriever(store, COLLECTION, embedder, mode=mode)
        retriever.search("워밍업", k=3)
        result["modes"][mode.value] = _quality(retriever, queries)
    store.close()
    if not args.no_scale:
        sample = [q["query"] for q in queries[:40]]
        result["scale"] = _scale(embedder, [int(s) for s in args.scale.split(",")], sample)

    print(
        f"\nretrieval over {result['modes']['hybrid']['queries']} on-topic queries ({embedder.name})"
    )
    print(f"{'mode':<8} {'recall@3':>9} {'hit@3':>7} {'MRR@10':>7} {'p50 ms':>7} {'p95 ms':>7}")
    for mode, row in result["modes"].items():
        print(
            f"{mode:<8} {row['recall@3']:>9.3f} {row['hit@3']:>7.3f} {row['mrr@10']:>7.3f} "
            f"{row['p50_ms']:>7.1f} {row['p95_ms']:>7.1f}"
        )
    print(
        "\nrecall@3 by query kind (hybrid):",
        json.dumps(result["modes"]["hybrid"]["recall@3_by_kind"]),
    )
    if "scale" in result:
        print("\nhybrid search in the embedded store as it grows (query embedding excluded)")
        print(f"{'points':>8} {'p50 ms':>8} {'p95 ms':>8} {'load s':>8}")
        for size, row in result["scale"].items():
            print(
                f"{size:>8} {row['search_p50_ms']:>8.1f} {row['search_p95_ms']:>8.1f} "
                f"{row['load_seconds']:>8.1f}"
            )
    out = ROOT / "bench" / "results" / "retrieval.json"
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
