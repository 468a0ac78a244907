"""The embedded store's engines side by side: qdrant-client's local mode (the embedded store
until now) and qdrant-edge (the embedded store now), on search latency and retrieval quality.

    .venv/bin/python bench/store_bench.py            # 100,000 synthetic points; about 5 minutes
    .venv/bin/python bench/store_bench.py --quick    # 20,000 points; about 1 minute
Writes bench/results/store.json.

- Search latency alone: no embedding (query vectors are computed once, up front); a hybrid
  search with a category filter, the top 3 with payload and dense vector, as the gateway asks.
  p50/p99 over every query of bench/data/queries_ko.jsonl, repeated (``--rounds``); queries
  without a category get one in turn.
- Rows: "before" is the code as it was: local mode, Qdrant's own RRF in one query.
  "this code" is app/rag/store.py: each engine's ranked candidates, fused here with a fixed
  order for ties. "engine RRF" on edge is the one-query form, for reference (its ties fall in
  engine order; not used).
- 408 points: the bundled corpus (the test template's points, loaded as stored into each
  engine). N points: random unit vectors of the embedder's width, sparse vectors drawn from
  the corpus's terms (a term's chance follows its document frequency, lengths and weights as in
  the corpus), the corpus's payloads in turn, categories spread evenly. Edge: upsert, then
  ``optimize()`` (its HNSW and payload indexes), both timed. Local mode is qdrant-client's
  in-memory mode (searching the same as its on-disk mode) and scores every point in Python on
  each query: at N points it runs only ``--local-queries`` queries (the table says so).
- recall@3 (hit@3, MRR@10) of hybrid retrieval on the eval set, computed as
  bench/retrieval_bench.py does, for "before" and for both engines with this code.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import qdrant_edge as qe  # noqa: E402
from qdrant_client import models  # noqa: E402

from app.domain.categories import Category  # noqa: E402
from app.rag.embedder import load_embedder  # noqa: E402
from app.rag.retriever import HybridRetriever  # noqa: E402
from app.rag.sparse import SparseEncoder, SparseVector  # noqa: E402
from app.rag.store import DENSE, SPARSE, VectorStore  # noqa: E402
from app.rag.store_edge import EdgeStore  # noqa: E402
from app.rag.store_server import ServerStore, in_memory  # noqa: E402
from tests.support.store import (  # noqa: E402
    StoredPoints,
    bundled_store_template,
    store_copy,
    stored_points,
)

QUERIES = ROOT / "bench" / "data" / "queries_ko.jsonl"
COLLECTION = "challenges"
CANDIDATES = 30  # per vector, as app/rag/store.py's search
K = 3

Search = Callable[[np.ndarray, SparseVector, str | None], Any]


# ------------------------------------------------------------------ the ways to search
def _this_code(store: VectorStore) -> Search:
    return lambda dense, sparse, category: store.search(
        COLLECTION, dense=dense, sparse=sparse, limit=K, category=category
    )


def _local_before(store: ServerStore, limit: int = K) -> Search:
    """The search as app/rag/store.py did it before: one query, Qdrant's RRF."""

    def search(dense: np.ndarray, sparse: SparseVector, category: str | None) -> Any:
        condition = None
        if category is not None:
            condition = models.Filter(
                must=[
                    models.FieldCondition(key="category", match=models.MatchValue(value=category))
                ]
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return store.client.query_points(
                COLLECTION,
                prefetch=[
                    models.Prefetch(
                        query=dense.tolist(), using=DENSE, limit=CANDIDATES, filter=condition
                    ),
                    models.Prefetch(
                        query=models.SparseVector(indices=sparse.indices, values=sparse.values),
                        using=SPARSE,
                        limit=CANDIDATES,
                        filter=condition,
                    ),
                ],
                query=models.FusionQuery(fusion=models.Fusion.RRF),
                limit=limit,
                query_filter=condition,
                with_payload=True,
                with_vectors=[DENSE],
            ).points

    return search


def _edge_engine_shard(store: EdgeStore) -> qe.EdgeShard:
    shard = store._shard(COLLECTION)  # the store's own open shard: a second would be locked out
    assert shard is not None
    return shard


def _edge_engine_rrf(store: EdgeStore) -> Search:
    shard = _edge_engine_shard(store)

    def search(dense: np.ndarray, sparse: SparseVector, category: str | None) -> Any:
        condition = None
        if category is not None:
            condition = qe.Filter(
                must=[qe.FieldCondition(key="category", match=qe.MatchValue(category))]
            )
        return shard.query(
            qe.QueryRequest(
                limit=K,
                prefetches=[
                    qe.Prefetch(
                        limit=CANDIDATES,
                        query=qe.Query.Nearest(dense.tolist(), using=DENSE),
                        filter=condition,
                    ),
                    qe.Prefetch(
                        limit=CANDIDATES,
                        query=qe.Query.Nearest(
                            qe.SparseVector(sparse.indices, sparse.values), using=SPARSE
                        ),
                        filter=condition,
                    ),
                ],
                query=qe.Fusion.Rrf(k=2),
                filter=condition,
                with_payload=True,
                with_vector=[DENSE],
            )
        )

    return search


# ------------------------------------------------------------------ measuring
def _latency(search: Search, queries: list[tuple[Any, SparseVector, str]], rounds: int) -> dict:
    search(*queries[0])  # warm-up
    timings = []
    for _ in range(rounds):
        for query in queries:
            started = time.perf_counter()
            search(*query)
            timings.append((time.perf_counter() - started) * 1000)
    return {
        "p50_ms": statistics.median(timings),
        "p99_ms": float(np.percentile(timings, 99)),
        "searches": len(timings),
    }


def _quality(top10: Callable[[dict[str, Any]], list[str]], eval_set: list[dict]) -> dict:
    """As bench/retrieval_bench.py: hybrid, top 10, no category; on-topic queries only."""
    recalls, hits, rranks = [], [], []
    for query in eval_set:
        if not query["relevant_ids"]:
            continue
        ids = top10(query)
        relevant = set(query["relevant_ids"])
        top3 = set(ids[:3])
        recalls.append(len(relevant & top3) / min(3, len(relevant)))
        hits.append(1.0 if relevant & top3 else 0.0)
        rank = next((i + 1 for i, doc in enumerate(ids) if doc in relevant), None)
        rranks.append(1 / rank if rank else 0.0)
    return {
        "recall@3": statistics.mean(recalls),
        "hit@3": statistics.mean(hits),
        "mrr@10": statistics.mean(rranks),
        "queries": len(recalls),
    }


def _retriever_top10(store: VectorStore, embedder: Any) -> Callable[[dict[str, Any]], list[str]]:
    retriever = HybridRetriever(store, COLLECTION, embedder)
    return lambda q: [h.document.id for h in retriever.search(q["query"], k=10, vector=q["vector"])]


def _before_top10(store: ServerStore) -> Callable[[dict[str, Any]], list[str]]:
    search = _local_before(store, limit=10)
    return lambda q: [str(p.payload["doc_id"]) for p in search(q["vector"], q["sparse"], None)]


def _load(store: VectorStore, points: StoredPoints, batch: int = 1000) -> float:
    started = time.perf_counter()
    store.ensure_collection(COLLECTION, points.dense.shape[1])
    for start in range(0, len(points.ids), batch):
        end = start + batch
        store.upsert(
            COLLECTION,
            points.ids[start:end],
            points.dense[start:end],
            points.sparse[start:end],
            points.payloads[start:end],
        )
    return time.perf_counter() - started


def _synthetic(corpus: StoredPoints, size: int, seed: int = 7) -> StoredPoints:
    """``size`` points shaped like the corpus's (see the module docstring)."""
    rng = np.random.default_rng(seed)
    dense = rng.standard_normal((size, corpus.dense.shape[1]), dtype=np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    frequency: dict[int, int] = {}
    for sv in corpus.sparse:
        for index in sv.indices:
            frequency[index] = frequency.get(index, 0) + 1
    terms = np.fromiter(frequency, dtype=np.int64)
    chance = np.fromiter(frequency.values(), dtype=np.float64)
    chance /= chance.sum()
    lengths = [len(sv.indices) for sv in corpus.sparse]
    weights = np.concatenate([np.asarray(sv.values, dtype=np.float32) for sv in corpus.sparse])
    categories = [c.code for c in Category]
    sparse, payloads = [], []
    for i in range(size):
        n = lengths[i % len(lengths)]
        picked = np.sort(rng.choice(terms, size=n, replace=False, p=chance))
        sparse.append(SparseVector(picked.tolist(), rng.choice(weights, size=n).tolist()))
        payload = dict(corpus.payloads[i % len(corpus.payloads)])
        payload.update(doc_id=f"s{i}", category=categories[i % len(categories)])
        payloads.append(payload)
    ids = [str(uuid.UUID(int=i + 1)) for i in range(size)]
    return StoredPoints(ids, dense, sparse, payloads)


# ------------------------------------------------------------------ the run
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 synthetic points")
    parser.add_argument("--points", type=int, help="synthetic points (default 100,000)")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the queries")
    parser.add_argument("--local-queries", type=int, default=20, help="local mode at N points")
    args = parser.parse_args()
    size = args.points or (20_000 if args.quick else 100_000)
    # qdrant-client says local mode is not for more than 20,000 points: that is what we show.
    warnings.filterwarnings("ignore", message="Local mode is not recommended", category=UserWarning)

    eval_set = [json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines()]
    embedder = load_embedder(None)
    encoder = SparseEncoder()
    vectors = embedder.embed_queries([q["query"] for q in eval_set])
    codes = [c.code for c in Category]
    timed: list[tuple[Any, SparseVector, str]] = []
    for i, (query, vector) in enumerate(zip(eval_set, vectors, strict=True)):
        query["vector"] = vector
        query["sparse"] = encoder.encode_query(query["query"])
        timed.append((vector, query["sparse"], query.get("category") or codes[i % len(codes)]))

    print("reading the bundled store ...", file=sys.stderr)
    template = store_copy(bundled_store_template(), Path(tempfile.mkdtemp()) / "qdrant")
    corpus = stored_points(template, COLLECTION)
    result: dict[str, Any] = {"embedder": embedder.name, "k": K, "candidates": CANDIDATES}

    # --- the bundled corpus
    edge = EdgeStore(template)  # as `python -m app.rag ingest` built it (optimized)
    local = in_memory()
    _load(local, corpus)
    small: dict[str, Any] = {"points": len(corpus.ids)}
    small["local, before"] = _latency(_local_before(local), timed, args.rounds)
    small["local, this code"] = _latency(_this_code(local), timed, args.rounds)
    small["edge, this code"] = _latency(_this_code(edge), timed, args.rounds)
    small["edge, engine RRF"] = _latency(_edge_engine_rrf(edge), timed, args.rounds)
    result["bundled"] = small
    result["quality"] = {
        "local, before": _quality(_before_top10(local), eval_set),
        "local, this code": _quality(_retriever_top10(local, embedder), eval_set),
        "edge, this code": _quality(_retriever_top10(edge, embedder), eval_set),
    }
    local.close()
    edge.close()
    print("bundled corpus done", file=sys.stderr)

    # --- synthetic, at size
    points = _synthetic(corpus, size)
    large: dict[str, Any] = {"points": size}
    edge = EdgeStore(Path(tempfile.mkdtemp()) / "qdrant")
    large["edge_upsert_s"] = _load(edge, points)
    print(f"edge: {size} points upserted in {large['edge_upsert_s']:.1f} s", file=sys.stderr)
    started = time.perf_counter()
    edge.optimize(COLLECTION)
    large["edge_optimize_s"] = time.perf_counter() - started
    print(f"edge: optimized in {large['edge_optimize_s']:.1f} s", file=sys.stderr)
    info = _edge_engine_shard(edge).info()
    large["edge_segments"] = info.segments_count
    large["edge_indexed_vectors"] = info.indexed_vectors_count
    large["edge, this code"] = _latency(_this_code(edge), timed, args.rounds)
    large["edge, engine RRF"] = _latency(_edge_engine_rrf(edge), timed, args.rounds)
    edge.close()
    local = in_memory()
    large["local_upsert_s"] = _load(local, points)
    print(f"local: {size} points upserted in {large['local_upsert_s']:.1f} s", file=sys.stderr)
    few = timed[: args.local_queries]
    large["local, before"] = _latency(_local_before(local), few, 1)
    local.close()
    result["synthetic"] = large

    _print(result, args.local_queries)
    out = ROOT / "bench" / "results" / "store.json"
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT)}")


def _print(result: dict[str, Any], local_queries: int) -> None:
    small, large = result["bundled"], result["synthetic"]
    print("\nhybrid search + category filter, top 3 with payload; no embedding (ms)")
    print(f"{'engine, search':<20} {'points':>7} {'p50':>8} {'p99':>8} {'searches':>9}")
    for block in (small, large):
        for name, row in block.items():
            if isinstance(row, dict):
                print(
                    f"{name:<20} {block['points']:>7} {row['p50_ms']:>8.2f} "
                    f"{row['p99_ms']:>8.2f} {row['searches']:>9}"
                )
    print(
        f"(local mode at {large['points']} points: only {local_queries} queries, once; "
        f"it scores every point in Python)"
    )
    print(
        f"\nload at {large['points']} points: edge upsert {large['edge_upsert_s']:.1f} s + "
        f"optimize {large['edge_optimize_s']:.1f} s ({large['edge_segments']} segments, "
        f"{large['edge_indexed_vectors']} dense+sparse vectors indexed); local mode upsert "
        f"{large['local_upsert_s']:.1f} s (no index)"
    )
    print("\nhybrid retrieval on the eval set (top 10, no filter)")
    print(f"{'engine, search':<20} {'recall@3':>9} {'hit@3':>7} {'MRR@10':>7} {'queries':>8}")
    for name, row in result["quality"].items():
        print(
            f"{name:<20} {row['recall@3']:>9.3f} {row['hit@3']:>7.3f} {row['mrr@10']:>7.3f} "
            f"{row['queries']:>8}"
        )


if __name__ == "__main__":
    main()
