"""Open the vector store the settings name: a Qdrant server when ``QDRANT_URL`` is set, else
the embedded qdrant-edge store in ``QDRANT_PATH`` (``:memory:``: a throwaway folder)."""

from __future__ import annotations

from pathlib import Path

from app.config import RetrievalSettings
from app.rag.store import VectorStore
from app.rag.store_edge import EdgeStore

__all__ = ["configured_store", "open_store"]


def configured_store(settings: RetrievalSettings) -> VectorStore:
    """The store the settings name: ``QDRANT_URL`` when set, else the embedded ``QDRANT_PATH``."""
    api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    return open_store(url=settings.qdrant_url, path=settings.qdrant_path, api_key=api_key)


def open_store(
    *, url: str | None, path: Path | str | None, api_key: str | None = None, timeout: float = 10
) -> VectorStore:
    if url:
        # Imported only for a server: qdrant-client's import is a second of every start on
        # this CPU (python -X importtime), and the embedded default never uses it.
        from app.rag.store_server import connect

        return connect(url, api_key=api_key, timeout=timeout)
    return EdgeStore(path if path is not None else ":memory:")
