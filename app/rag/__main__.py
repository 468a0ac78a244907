"""Operator commands for the retrieval store.

    python -m app.rag ingest [PATH] [--recreate]       (idempotent; PATH: a corpus .jsonl)
    python -m app.rag search "QUERY" [--k N] [--json] [--mode hybrid|dense|sparse] [--category CODE]
    python -m app.rag search - [...]                   (one query per line from stdin)

Settings come from the environment as for the gateway (QDRANT_URL, QDRANT_PATH,
QDRANT_COLLECTION, EMBEDDING_MODEL). An embedded store folder is locked while the gateway
runs. Ingest ends by building the search index (it can take minutes on a large corpus).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from app.config import get_settings
from app.domain.categories import parse_category
from app.rag.corpus import load_corpus
from app.rag.embedder import load_embedder
from app.rag.ingest import ingest
from app.rag.retriever import HybridRetriever, SearchMode
from app.rag.scope import Scope
from app.rag.store_open import configured_store


def _progress(done: int, total: int) -> None:
    print(f"\r  stored {done}/{total} documents", end="" if done < total else "\n", file=sys.stderr)


def _ingest(args: argparse.Namespace) -> int:
    settings = get_settings()
    path = Path(args.path) if args.path else settings.corpus_path
    documents = load_corpus(path)
    print(f"loading the embedding model ({settings.embedding_model or 'default'})", file=sys.stderr)
    embedder = load_embedder(settings.embedding_model)
    store = configured_store(settings)
    try:
        if args.recreate:
            store.drop(settings.qdrant_collection)
        started = time.monotonic()
        report = ingest(store, settings.qdrant_collection, embedder, documents, progress=_progress)
        print(
            f"{path}: {report.total} documents, {report.added} added, {report.unchanged} "
            f"unchanged, {report.replaced} replaced; collection {settings.qdrant_collection!r} "
            f"holds {store.count(settings.qdrant_collection)} ({time.monotonic() - started:.1f} s)"
        )
    finally:
        store.close()
    return 0


def _queries(query: str) -> Iterator[str]:
    if query != "-":
        yield query
        return
    for line in sys.stdin:
        if line.strip():
            yield line.strip()


def _search(args: argparse.Namespace) -> int:
    settings = get_settings()
    category = parse_category(args.category) if args.category else None
    if args.category and category is None:
        print(f"unknown category {args.category!r}", file=sys.stderr)
        return 2
    embedder = load_embedder(settings.embedding_model)
    store = configured_store(settings)
    try:
        if store.count(settings.qdrant_collection) == 0:
            print("the store is empty: run `python -m app.rag ingest` first", file=sys.stderr)
            return 1
        retriever = HybridRetriever(
            store, settings.qdrant_collection, embedder, mode=SearchMode(args.mode)
        )
        for query in _queries(args.query):
            for rank, hit in enumerate(
                retriever.search(query, k=args.k, scope=Scope(category=category)), 1
            ):
                doc = hit.document
                if args.json:
                    line = {
                        "query": query,
                        "rank": rank,
                        "score": round(hit.score, 4),
                        "text": f"{doc.title}\n{doc.body}",
                        "category": doc.category.code,
                        "id": doc.id,
                    }
                    print(json.dumps(line, ensure_ascii=False), flush=True)
                else:
                    print(f"{rank:>2}. {hit.score:.3f} [{doc.category.code}] {doc.id} {doc.title}")
    finally:
        store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.rag", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ingest_cmd = commands.add_parser("ingest", help="embed and store a corpus (idempotent)")
    ingest_cmd.add_argument("path", nargs="?", help="corpus .jsonl (default: the bundled one)")
    ingest_cmd.add_argument("--recreate", action="store_true", help="drop the collection first")
    ingest_cmd.set_defaults(run=_ingest)
    search_cmd = commands.add_parser("search", help="search the store")
    search_cmd.add_argument("query", help='the query, or "-" to read one per line from stdin')
    search_cmd.add_argument("--k", type=int, default=3)
    search_cmd.add_argument("--json", action="store_true", help="one JSON object per hit")
    search_cmd.add_argument("--mode", choices=[m.value for m in SearchMode], default="hybrid")
    search_cmd.add_argument("--category", help="only this category (label or code)")
    search_cmd.set_defaults(run=_search)
    args = parser.parse_args(argv)
    # Ingest reports its index build through logging: app.rag's own lines go to stderr, like
    # the progress line (not every library's INFO lines).
    logger = logging.getLogger("app.rag")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("  %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
