"""Open the retriever for the app's lifespan: store, embedding model, the corpus ingested
(on the first start) or brought up to date (after a change)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from app.config import RetrievalSettings
from app.rag.corpus import load_corpus
from app.rag.embedder import Embedder, load_embedder
from app.rag.embedder_remote import RemoteEmbedder, load_remote_embedder
from app.rag.ingest import ingest, point_id
from app.rag.retriever import HybridRetriever, SearchMode
from app.rag.store import VectorStore
from app.rag.store_open import configured_store

__all__ = ["VectorStoreUnavailable", "open_retriever"]

log = logging.getLogger(__name__)


class VectorStoreUnavailable(RuntimeError):
    """The configured Qdrant could not be reached at start-up (the message says where)."""


@asynccontextmanager
async def open_retriever(settings: RetrievalSettings) -> AsyncIterator[HybridRetriever]:
    """The configured retriever, ready to search; closes the store (and a remote embedder's
    connections) on exit.

    Loading the model, the embedded store and a first ingest (with its index build) are
    blocking work, done in a worker thread and before serving.
    """
    store = await anyio.to_thread.run_sync(configured_store, settings)
    embedder: Embedder | None = None
    try:
        embedder = await anyio.to_thread.run_sync(configured_embedder, settings)
        try:
            # StoreUnavailable (an OSError): the embedded store's folder could not be opened.
            await _sync_corpus(settings, store, embedder)
        except store.unavailable as exc:
            where = settings.qdrant_url or settings.qdrant_path
            raise VectorStoreUnavailable(
                f"the vector store at {where} did not answer: {exc}"
            ) from exc
        yield HybridRetriever(
            store,
            settings.qdrant_collection,
            embedder,
            mode=SearchMode(settings.retrieval_mode),
            concurrency=settings.embedding_concurrency or (8 if settings.embedding_url else 1),
            queue_max=settings.embedding_queue_max,
            burst_seconds=settings.embedding_burst_seconds,
            confirm_max=settings.embedding_confirm_max,
        )
    finally:
        if isinstance(embedder, RemoteEmbedder):
            embedder.close()
        await anyio.to_thread.run_sync(store.close)


def configured_embedder(settings: RetrievalSettings) -> Embedder:
    """EMBEDDING_URL's server when set, else the in-process EMBEDDING_MODEL (blocking)."""
    if settings.embedding_url:
        key = settings.embedding_api_key
        return load_remote_embedder(
            settings.embedding_url,
            settings.embedding_model,
            api_key=key.get_secret_value() if key else None,
        )
    return load_embedder(settings.embedding_model, threads=settings.embedding_threads)


async def _sync_corpus(settings: RetrievalSettings, store: VectorStore, embedder: Embedder) -> None:
    """Ingest the corpus into an empty store; into one that holds it already, only what changed
    since (a new release's catalogue: traits edited, a challenge reworded), so that an upgraded
    gateway does not rank by a former catalogue's payload. Points are named by their content
    (:func:`app.rag.ingest.point_id`): nothing changed is one look-up of the ids, no write."""
    collection = settings.qdrant_collection
    documents = load_corpus(settings.corpus_path)
    if await anyio.to_thread.run_sync(store.count, collection):
        ids = [point_id(document, embedder.name) for document in documents]
        present = await anyio.to_thread.run_sync(store.existing, collection, ids)
        if len(present) == len(ids):
            return
        log.info(
            "the corpus changed since it was stored: updating %d of %d documents",
            len(ids) - len(present),
            len(ids),
        )
    else:
        log.info("vector store is empty: ingesting %d documents (first start only)", len(documents))

    def progress(done: int, total: int) -> None:
        log.info("ingest: stored %d/%d documents", done, total)

    report = await anyio.to_thread.run_sync(
        lambda: ingest(store, collection, embedder, documents, progress=progress)
    )
    log.info(
        "ingest done: %d documents added, %d former ones removed", report.added, report.replaced
    )
