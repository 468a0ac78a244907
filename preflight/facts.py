"""Read a model folder once: config and tokenizer JSON, weight headers -> :class:`ModelFacts`.

Everything after this module is pure: the checks look only at the facts read here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from preflight.safetensors_header import TensorInfo, read_safetensors_header

__all__ = ["INDEX_FILE", "ModelFacts", "inspect_folder"]

INDEX_FILE = "model.safetensors.index.json"
_PICKLED_RE = re.compile(r"^(?:pytorch_model|model|consolidated)[\w.-]*\.(?:bin|pt|pth)$")


@dataclass(frozen=True)
class ModelFacts:
    """Everything the checks need, read once from the folder by :func:`inspect_folder`."""

    path: Path
    files: frozenset[str] = frozenset()
    config: Mapping[str, Any] | None = None
    generation_config: Mapping[str, Any] | None = None
    tokenizer_config: Mapping[str, Any] | None = None
    adapter_config: Mapping[str, Any] | None = None
    tokenizer_vocab_max_id: int | None = None
    tokenizer_added_tokens: tuple[tuple[int, str], ...] = ()
    tensors: Mapping[str, TensorInfo] = field(default_factory=dict)
    weight_files: tuple[str, ...] = ()
    pickled_weight_files: tuple[str, ...] = ()
    pickled_weight_bytes: int = 0
    gguf_files: tuple[str, ...] = ()
    read_errors: Mapping[str, str] = field(default_factory=dict)  # file name -> what is wrong

    def config_value(self, *keys: str) -> Any:
        """The first of ``keys`` set in config.json, then in its text_config (multimodal)."""
        config = self.config or {}
        text = config.get("text_config")
        for source in (config, text if isinstance(text, dict) else {}):
            for key in keys:
                if source.get(key) is not None:
                    return source[key]
        return None

    def config_int(self, *keys: str) -> int | None:
        value = self.config_value(*keys)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    # config.json values several checks need, under the names model families give them

    @property
    def vocab_size(self) -> int | None:
        return self.config_int("vocab_size", "padded_vocab_size")

    @property
    def hidden_size(self) -> int | None:
        return self.config_int("hidden_size", "n_embd", "d_model")

    @property
    def num_layers(self) -> int | None:
        return self.config_int("num_hidden_layers", "n_layer", "num_layers")

    @property
    def has_adapter(self) -> bool:
        return "adapter_config.json" in self.files or any(
            n.startswith("adapter_model") for n in self.files
        )


def inspect_folder(path: Path) -> ModelFacts:
    """Read config, tokenizer files and weight headers of a model folder, once."""
    folder = Path(path)
    if not folder.is_dir():
        raise NotADirectoryError(str(folder))
    files = frozenset(p.name for p in folder.iterdir() if p.is_file())
    errors: dict[str, str] = {}

    def read_object(name: str) -> Mapping[str, Any] | None:
        value = _read_json(folder / name, errors)
        return value if isinstance(value, dict) else None

    tensors, weight_files = _read_weights(folder, files, errors)
    pickled = tuple(sorted(n for n in files if _PICKLED_RE.match(n)))
    vocab_max, added = _tokenizer_json_ids(_read_json(folder / "tokenizer.json", errors))
    return ModelFacts(
        path=folder,
        files=files,
        config=read_object("config.json"),
        generation_config=read_object("generation_config.json"),
        tokenizer_config=read_object("tokenizer_config.json"),
        adapter_config=read_object("adapter_config.json"),
        tokenizer_vocab_max_id=vocab_max,
        tokenizer_added_tokens=added,
        tensors=tensors,
        weight_files=weight_files,
        pickled_weight_files=pickled,
        pickled_weight_bytes=sum((folder / n).stat().st_size for n in pickled),
        gguf_files=tuple(sorted(n for n in files if n.endswith(".gguf"))),
        read_errors=errors,
    )


def _read_json(path: Path, errors: dict[str, str]) -> Any:
    """The parsed file; None when absent, or unreadable (then noted in ``errors``)."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        errors[path.name] = f"cannot be read as JSON ({exc})"
        return None


def _tokenizer_json_ids(data: Any) -> tuple[int | None, tuple[tuple[int, str], ...]]:
    """(highest id of model.vocab, added tokens as (id, content)) of a parsed tokenizer.json."""
    if not isinstance(data, dict):
        return None, ()
    model = data.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    max_id: int | None = None
    if isinstance(vocab, dict) and vocab:
        max_id = max((v for v in vocab.values() if isinstance(v, int)), default=None)
    elif isinstance(vocab, list) and vocab:  # Unigram: [[piece, score], ...], ids by position
        max_id = len(vocab) - 1
    tokens = data.get("added_tokens")
    added = tuple(
        (t["id"], str(t.get("content", "")))
        for t in (tokens if isinstance(tokens, list) else ())
        if isinstance(t, dict) and isinstance(t.get("id"), int)
    )
    return max_id, added


def _read_weights(
    folder: Path, files: frozenset[str], errors: dict[str, str]
) -> tuple[dict[str, TensorInfo], tuple[str, ...]]:
    """The tensors of all shards (the index's, else every *.safetensors), and the shards read."""
    index = _read_json(folder / INDEX_FILE, errors) if INDEX_FILE in files else None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if INDEX_FILE in files and INDEX_FILE not in errors and not isinstance(weight_map, dict):
        errors[INDEX_FILE] = "has no weight_map"
    if isinstance(weight_map, dict):
        shard_names = sorted({str(v) for v in weight_map.values()})
    else:
        shard_names = sorted(
            n for n in files if n.endswith(".safetensors") and not n.startswith("adapter_model")
        )
        # Mistral repositories ship consolidated*.safetensors (their own format) next to the
        # HF shards: vLLM loads one set, so count one.
        hf_names = [n for n in shard_names if not n.startswith("consolidated")]
        shard_names = hf_names or shard_names
    tensors: dict[str, TensorInfo] = {}
    read: list[str] = []
    for name in shard_names:
        shard = folder / name
        if not shard.is_file():
            errors[name] = f"is listed in {INDEX_FILE} but missing (incomplete download?)"
            continue
        try:
            tensors.update(read_safetensors_header(shard))
            read.append(name)
        except (OSError, ValueError) as exc:
            errors[name] = str(exc)
    if isinstance(weight_map, dict):
        lost = [t for t, shard in weight_map.items() if shard in read and t not in tensors]
        if lost:
            errors[INDEX_FILE] = (
                f"lists {len(lost)} tensors that its shards do not hold, e.g. {lost[0]!r}"
            )
    return tensors, tuple(read)
