"""Check a model folder before vLLM loads it: ``python -m app.llm.preflight MODEL_DIR``.

Reads only JSON files and safetensors headers (8-byte little-endian header length, then a JSON
header), so it takes well under a second even for a 70B checkpoint and needs no torch. Prints
one line per check (``OK``/``WARN``/``FAIL``) and, under each failure, the fix in plain words.
Exit status: 0 when vLLM will load the folder (warnings allowed), 1 when a check failed, 2 on a
usage error (no such folder, bad option).

Checks, in order: ``config`` (config.json), ``weights`` (safetensors headers, shards of
``model.safetensors.index.json``, truncated files), ``lora`` (an unmerged LoRA checkpoint),
``vocab-size``/``hidden-size``/``layers`` (config.json against the weights), ``tokenizer`` (the
files the tokenizer class needs), ``tokenizer-ids`` (token ids against vocab_size),
``chat-template``, ``attention`` (Gemma-2 logit softcapping needs FlashInfer), and the memory
plan: ``max-model-len``, ``memory`` and ``concurrency``.

Memory plan (GPU; GiB = 2**30 bytes; vLLM 0.32's profiler, ``gpu_worker.py``)::

    budget       = gpu_memory × gpu_memory_utilization
    weights      = Σ tensor bytes from the headers, at the serving dtype
    activations  = max_num_batched_tokens × (4·intermediate_size + 6·hidden_size) × dtype bytes
                 + min(max_num_seqs, max_num_batched_tokens) × vocab_size × 4 bytes × 4 copies
    overhead     = --overhead-gib (1.0: CUDA context, cuBLAS/NCCL workspaces, CUDA graphs)
    kv_available = budget − weights − activations − overhead
    kv_per_token = Σ_layers 2 × num_key_value_heads × head_dim × kv dtype bytes
    kv_needed(L) = kv_per_token × L   (L rounded up to vLLM's 16-token blocks; a sliding-window
                   layer holds at most window − 1 + max_num_batched_tokens tokens plus a block,
                   an MLA layer one latent vector per token; layer kinds from layer_types)

vLLM allocates *all* of ``kv_available`` to the KV cache and refuses to start unless one
full-length sequence fits (``kv_needed(max_model_len) <= kv_available``): that is the ``memory``
check (FAIL). ``max_num_seqs`` full-length sequences at once is not required: when fewer fit the
``concurrency`` check warns (vLLM then queues or preempts; fine for short requests). On CPU
(``--cpu-kvcache-gib N``) the KV cache is exactly ``VLLM_CPU_KVCACHE_SPACE`` GiB.

Deliberate choices (they may look like bugs; they are not):

* The activation and overhead allowances are estimates, not measurements; they err on the
  large side so that "fits" means "fits with a margin". ``--overhead-gib`` tunes the fixed part.
* ``--max-num-seqs``/``--max-num-batched-tokens`` default to what vLLM 0.32's API server picks
  on the device (256/2048 below 70 GiB, 1024/8192 from 70 GiB, 1024/16384 from 160 GiB,
  128/2048 on CPU), not to a fixed number.
* Token ids beyond ``vocab_size`` fail even though vLLM starts: the first prompt or answer that
  uses one fails ("Token id ... is out of vocabulary").
* Gemma-2 fails unless FlashInfer is selected (``VLLM_ATTENTION_BACKEND`` in the environment
  or ``--attention-backend``): older vLLM refuses softcapping models on other backends.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "Finding",
    "ModelFacts",
    "PlanOptions",
    "Status",
    "TensorInfo",
    "inspect_folder",
    "main",
    "read_safetensors_header",
    "run_checks",
]

GiB = 1 << 30
BLOCK_SIZE = 16  # vLLM's default KV cache block size (tokens)
DEFAULT_OVERHEAD_GIB = 1.0
LOGITS_COPIES = 4  # logits, probabilities, logprobs and a sort buffer in the sampler
MAX_SUGGESTED_UTILIZATION = 0.95
_MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit
_INDEX = "model.safetensors.index.json"

# Bytes per element by safetensors dtype; sizes are taken from data_offsets, this is only
# for converting floating tensors to the serving dtype.
_FLOAT_DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
_SERVE_DTYPES = {"float16": 2, "half": 2, "bfloat16": 2, "float32": 4, "float": 4}
_KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16")

_LORA_MARKERS = (
    ".lora_A.",
    ".lora_B.",
    "lora_embedding_A",
    "lora_embedding_B",
    "lora_magnitude_vector",
    ".base_layer.",
)
_EMBED_NAMES = (
    "model.embed_tokens.weight",
    "model.language_model.embed_tokens.weight",
    "language_model.model.embed_tokens.weight",
    "transformer.wte.weight",
    "gpt_neox.embed_in.weight",
    "transformer.word_embeddings.weight",
    "transformer.embedding.word_embeddings.weight",
    "model.tok_embeddings.weight",
    "tok_embeddings.weight",
)
_LM_HEAD_NAMES = (
    "lm_head.weight",
    "language_model.lm_head.weight",
    "embed_out.weight",
    "transformer.output_layer.weight",
    "output.weight",
)
_LAYER_RE = re.compile(
    r"^(?:model\.(?:language_model\.|decoder\.)?|language_model\.model\.|"
    r"transformer\.(?:encoder\.)?|gpt_neox\.)?(?:layers|h|blocks)\.(\d+)\."
)
_PICKLED_RE = re.compile(r"^(?:pytorch_model|model|consolidated)[\w.-]*\.(?:bin|pt|pth)$")

# Files a tokenizer class can be built from when tokenizer.json is absent (transformers converts
# the slow files). Classes not listed here, or listed with (), need tokenizer.json.
_SPM = (("tokenizer.model",),)
_BPE = (("vocab.json", "merges.txt"),)
_SLOW_TOKENIZER_FILES: dict[str, tuple[tuple[str, ...], ...]] = {
    "LlamaTokenizer": _SPM,
    "CodeLlamaTokenizer": _SPM,
    "GemmaTokenizer": _SPM,
    "BaichuanTokenizer": _SPM,
    "InternLMTokenizer": _SPM,
    "InternLM2Tokenizer": _SPM,
    "ChatGLMTokenizer": _SPM,
    "ChatGLM4Tokenizer": _SPM,
    "T5Tokenizer": (("spiece.model",),),
    "AlbertTokenizer": (("spiece.model",),),
    "XLMRobertaTokenizer": (("sentencepiece.bpe.model",),),
    "GPT2Tokenizer": _BPE,
    "Qwen2Tokenizer": _BPE,
    "RobertaTokenizer": _BPE,
    "BartTokenizer": _BPE,
    "CodeGenTokenizer": _BPE,
    "BertTokenizer": (("vocab.txt",),),
    "QWenTokenizer": (("qwen.tiktoken",),),
    "PreTrainedTokenizer": (),
    "TokenizersBackend": (),
    "GPTNeoXTokenizer": (),
    "BloomTokenizer": (),
    "CohereTokenizer": (),
}
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "qwen.tiktoken",
    "tekken.json",
)

MERGE_SNIPPET = """\
from peft import AutoPeftModelForCausalLM
model = AutoPeftModelForCausalLM.from_pretrained("ADAPTER_DIR", torch_dtype="auto")
model = model.merge_and_unload()
model.save_pretrained("MERGED_DIR", safe_serialization=True)"""


class Status(StrEnum):
    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Finding:
    """One output line: a check's verdict, what was seen and (for WARN/FAIL) what to do."""

    check: str
    status: Status
    message: str
    fix: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


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
    read_errors: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanOptions:
    """The serving settings to check against (vLLM's flags of the same names)."""

    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float = 0.9
    gpu_memory_gib: float | None = None
    cpu_kvcache_gib: float | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    overhead_gib: float = DEFAULT_OVERHEAD_GIB
    attention_backend: str | None = None
    host_memory_available_gib: float | None = None
    memory_note: str = ""  # why there is no memory size, when there is none


# --------------------------------------------------------------------------- reading


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """The tensors a safetensors file declares; ValueError when the file is malformed or cut."""
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("shorter than the 8-byte header length")
        size = int.from_bytes(head, "little")
        if size > _MAX_HEADER_BYTES:
            raise ValueError(f"header length {size} is not plausible (not a safetensors file?)")
        raw = f.read(size)
    if len(raw) < size:
        raise ValueError("the header is cut off (incomplete download?)")
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"the header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    data_len = path.stat().st_size - 8 - size
    tensors: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = (int(x) for x in entry["data_offsets"])
            info = TensorInfo(
                name,
                str(entry["dtype"]),
                tuple(int(x) for x in entry["shape"]),
                end - start,
                path.name,
            )
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"tensor {name!r} has a malformed header entry") from None
        if end > data_len:
            raise ValueError(
                f"truncated: tensor {name!r} ends at data byte {end}, the file holds {data_len}"
                " (incomplete download?)"
            )
        tensors[name] = info
    return tensors


def _read_json(path: Path, errors: dict[str, str]) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        errors[path.name] = f"cannot be read as JSON ({exc})"
        return None


def _json_object(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, dict) else None


def _tokenizer_json_ids(
    data: Any,
) -> tuple[int | None, tuple[tuple[int, str], ...]]:
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
    tensors: dict[str, TensorInfo] = {}
    index = _json_object(_read_json(folder / _INDEX, errors)) if _INDEX in files else None
    weight_map = index.get("weight_map") if index is not None else None
    if _INDEX in files and _INDEX not in errors and not isinstance(weight_map, dict):
        errors[_INDEX] = "has no weight_map"
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
    read: list[str] = []
    for name in shard_names:
        shard = folder / name
        if not shard.is_file():
            errors[name] = f"is listed in {_INDEX} but missing (incomplete download?)"
            continue
        try:
            tensors.update(read_safetensors_header(shard))
            read.append(name)
        except (OSError, ValueError) as exc:
            errors[name] = str(exc)
    if isinstance(weight_map, dict):
        lost = [t for t, shard in weight_map.items() if shard in read and t not in tensors]
        if lost:
            errors[_INDEX] = (
                f"lists {len(lost)} tensors that its shards do not hold, e.g. {lost[0]!r}"
            )
    return tensors, tuple(read)


def inspect_folder(path: Path) -> ModelFacts:
    """Read config, tokenizer files and weight headers of a model folder, once."""
    folder = Path(path)
    if not folder.is_dir():
        raise NotADirectoryError(str(folder))
    files = frozenset(p.name for p in folder.iterdir() if p.is_file())
    errors: dict[str, str] = {}
    tensors, weight_files = _read_weights(folder, files, errors)
    pickled = tuple(sorted(n for n in files if _PICKLED_RE.match(n)))
    vocab_max, added = _tokenizer_json_ids(_read_json(folder / "tokenizer.json", errors))
    return ModelFacts(
        path=folder,
        files=files,
        config=_json_object(_read_json(folder / "config.json", errors)),
        generation_config=_json_object(_read_json(folder / "generation_config.json", errors)),
        tokenizer_config=_json_object(_read_json(folder / "tokenizer_config.json", errors)),
        adapter_config=_json_object(_read_json(folder / "adapter_config.json", errors)),
        tokenizer_vocab_max_id=vocab_max,
        tokenizer_added_tokens=added,
        tensors=tensors,
        weight_files=weight_files,
        pickled_weight_files=pickled,
        pickled_weight_bytes=sum((folder / n).stat().st_size for n in pickled),
        gguf_files=tuple(sorted(n for n in files if n.endswith(".gguf"))),
        read_errors=errors,
    )


# --------------------------------------------------------------------------- helpers


def _cfg(facts: ModelFacts, *keys: str) -> Any:
    """The first key set in config.json, then in its text_config (multimodal models)."""
    config = facts.config or {}
    text = config.get("text_config")
    for source in (config, text if isinstance(text, dict) else {}):
        for key in keys:
            if source.get(key) is not None:
                return source[key]
    return None


def _int_cfg(facts: ModelFacts, *keys: str) -> int | None:
    value = _cfg(facts, *keys)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def _find_tensor(facts: ModelFacts, names: Sequence[str], suffix: str) -> TensorInfo | None:
    for name in names:
        if name in facts.tensors:
            return facts.tensors[name]
    for name, info in facts.tensors.items():
        if name.endswith(suffix) and "vision" not in name and "visual" not in name:
            return info
    return None


def _has_adapter(facts: ModelFacts) -> bool:
    return "adapter_config.json" in facts.files or any(
        n.startswith("adapter_model") for n in facts.files
    )


def _serving_dtype(facts: ModelFacts, opts: PlanOptions) -> str:
    if opts.dtype != "auto":
        return {"half": "float16", "float": "float32"}.get(opts.dtype, opts.dtype)
    declared = _cfg(facts, "torch_dtype", "dtype")
    if declared in _SERVE_DTYPES:
        # vLLM's auto dtype downcasts float32 checkpoints to 16 bits (bfloat16 where supported).
        return "bfloat16" if declared in ("float32", "float") else str(declared)
    return "float16" if any(t.dtype == "F16" for t in facts.tensors.values()) else "bfloat16"


# --------------------------------------------------------------------------- checks


def check_config(facts: ModelFacts) -> list[Finding]:
    if "config.json" in facts.read_errors:
        return [
            Finding(
                "config",
                Status.FAIL,
                f"config.json {facts.read_errors['config.json']}",
                "fix the JSON (a stray comma or a cut-off file), or copy config.json again from "
                "where the model was saved",
            )
        ]
    if facts.config is None:
        fix = (
            "copy config.json from the training output (model.config.save_pretrained(MODEL_DIR)) "
            "or from the base model of the same size"
        )
        if "params.json" in facts.files:
            fix += (
                "; this looks like a Mistral-format folder (params.json): start vLLM with "
                "--tokenizer-mode mistral --config-format mistral --load-format mistral"
            )
        return [Finding("config", Status.FAIL, "no config.json in the folder", fix)]
    archs = facts.config.get("architectures")
    summary = (
        f"{','.join(archs) if isinstance(archs, list) else '?'} "
        f"(model_type {_cfg(facts, 'model_type')}), layers {_cfg(facts, 'num_hidden_layers')}, "
        f"hidden {_cfg(facts, 'hidden_size')}, vocab {_cfg(facts, 'vocab_size')}"
    )
    if not isinstance(archs, list) or not archs:
        return [
            Finding(
                "config",
                Status.WARN,
                f"config.json has no architectures list: {summary}",
                'add "architectures": ["<ModelClass>ForCausalLM"] (vLLM picks the model class from it)',
            )
        ]
    return [Finding("config", Status.OK, f"config.json: {summary}")]


def check_weights(facts: ModelFacts) -> list[Finding]:
    bad = {
        name: why
        for name, why in facts.read_errors.items()
        if name.endswith(".safetensors") or name == _INDEX
    }
    if bad:
        return [
            Finding(
                "weights",
                Status.FAIL,
                f"{name} {why}",
                "download or copy the weights again (compare file sizes with the source); "
                "the folder must hold every shard named in the index",
            )
            for name, why in sorted(bad.items())
        ]
    if facts.tensors:
        dtypes = sorted({t.dtype for t in facts.tensors.values()})
        total = sum(t.nbytes for t in facts.tensors.values())
        return [
            Finding(
                "weights",
                Status.OK,
                f"{len(facts.weight_files)} safetensors file(s), {len(facts.tensors)} tensors, "
                f"{_gib(total)} ({', '.join(dtypes)})",
                data={"files": list(facts.weight_files), "bytes": total},
            )
        ]
    if facts.pickled_weight_files:
        return [
            Finding(
                "weights",
                Status.WARN,
                f"only pickled weights ({', '.join(facts.pickled_weight_files)}): shapes not "
                "checked, the memory plan uses the file sizes",
                "vLLM loads them, but slower and by unpickling; convert them to safetensors "
                "(save_pretrained(DIR, safe_serialization=True)) to get the full preflight",
            )
        ]
    if facts.gguf_files:
        return [
            Finding(
                "weights",
                Status.WARN,
                f"GGUF weights ({', '.join(facts.gguf_files)}) are not checked by this preflight",
                "run vLLM with --tokenizer pointing at the original model's tokenizer",
            )
        ]
    if _has_adapter(facts):
        return []  # an adapter without base weights: the lora check says what to do
    return [
        Finding(
            "weights",
            Status.FAIL,
            "no weights in the folder (no *.safetensors, no pytorch_model*.bin)",
            "copy the model's weight files into the folder (save_pretrained(DIR, "
            "safe_serialization=True) writes model*.safetensors)",
        )
    ]


def _merge_fix(base: str | None) -> str:
    base_note = f" (base model: {base})" if base else ""
    return (
        "merge the LoRA into its base model with PEFT's merge_and_unload() and save again"
        f"{base_note}:\n{MERGE_SNIPPET}\n"
        "then copy the tokenizer files into MERGED_DIR and serve MERGED_DIR. (In a training "
        "script that holds the PeftModel: model.merge_and_unload().save_pretrained(DIR).) "
        "Or serve the adapter on the base model: --model BASE --enable-lora "
        "--lora-modules NAME=ADAPTER_DIR"
    )


def check_lora(facts: ModelFacts) -> list[Finding]:
    base = (facts.adapter_config or {}).get("base_model_name_or_path")
    lora_keys = [n for n in facts.tensors if any(m in n for m in _LORA_MARKERS)]
    if lora_keys:
        return [
            Finding(
                "lora",
                Status.FAIL,
                f"unmerged LoRA checkpoint: {len(lora_keys)} LoRA tensors in the weights "
                f"(e.g. {lora_keys[0]}); vLLM cannot load lora_A/lora_B/base_layer weights",
                _merge_fix(base if isinstance(base, str) else None),
                data={"lora_tensors": len(lora_keys)},
            )
        ]
    has_base = bool(facts.tensors or facts.pickled_weight_files or facts.gguf_files)
    if _has_adapter(facts) and not has_base:
        return [
            Finding(
                "lora",
                Status.FAIL,
                "a LoRA adapter (adapter_config.json / adapter_model.*) without base weights: "
                "this folder is not a model vLLM can load",
                _merge_fix(base if isinstance(base, str) else None),
            )
        ]
    if _has_adapter(facts):
        return [
            Finding(
                "lora",
                Status.WARN,
                "adapter files next to full weights: vLLM ignores the adapter",
                "make sure the weights are the merged ones (merge_and_unload) and remove "
                "adapter_config.json/adapter_model.* to avoid confusion",
            )
        ]
    return [Finding("lora", Status.OK, "no LoRA layers in the weights")]


def check_shapes(facts: ModelFacts) -> list[Finding]:
    """config.json against the weights: vocab_size, hidden_size and num_hidden_layers."""
    if facts.config is None or not facts.tensors:
        return []
    return [*_check_vocab(facts), *_check_hidden(facts), *_check_layers(facts)]


def _check_vocab(facts: ModelFacts) -> list[Finding]:
    vocab = _int_cfg(facts, "vocab_size", "padded_vocab_size")
    embed = _find_tensor(facts, _EMBED_NAMES, "embed_tokens.weight")
    head = _find_tensor(facts, _LM_HEAD_NAMES, "lm_head.weight")
    matrices = [t for t in (embed, head) if t is not None and len(t.shape) == 2]
    if vocab is None or not matrices:
        what = "vocab_size is not in config.json" if vocab is None else "no embedding tensor"
        return [Finding("vocab-size", Status.WARN, f"not checked: {what}")]
    wrong = [t for t in matrices if t.shape[0] != vocab]
    if wrong:
        rows = wrong[0].shape[0]
        return [
            Finding(
                "vocab-size",
                Status.FAIL,
                f"config.json vocab_size {vocab} but {wrong[0].name} has {rows} rows "
                f"(shape {list(wrong[0].shape)}); vLLM fails loading it (size mismatch)",
                f'set "vocab_size": {rows} in config.json (the embeddings were resized, e.g. by '
                "resize_token_embeddings, after the config was written), or use the config.json "
                "saved together with these weights",
                data={"vocab_size": vocab, "rows": rows, "tensor": wrong[0].name},
            )
        ]
    names = " and ".join(t.name for t in matrices)
    return [Finding("vocab-size", Status.OK, f"vocab_size {vocab} = rows of {names}")]


def _check_hidden(facts: ModelFacts) -> list[Finding]:
    hidden = _int_cfg(facts, "hidden_size", "n_embd", "d_model")
    embed = _find_tensor(facts, _EMBED_NAMES, "embed_tokens.weight")
    if hidden is None or embed is None or len(embed.shape) != 2:
        return [Finding("hidden-size", Status.WARN, "not checked: no hidden_size or embedding")]
    cols = embed.shape[1]
    allowed = {hidden, _int_cfg(facts, "word_embed_proj_dim")}  # OPT projects its embeddings
    if cols not in allowed:
        return [
            Finding(
                "hidden-size",
                Status.FAIL,
                f"config.json hidden_size {hidden} but {embed.name} has {cols} columns: the "
                "config belongs to a different model size",
                "use the config.json saved together with these weights (or the base model's "
                f"config of that size: hidden_size {cols})",
                data={"hidden_size": hidden, "columns": cols},
            )
        ]
    return [Finding("hidden-size", Status.OK, f"hidden_size {hidden} = columns of {embed.name}")]


def _check_layers(facts: ModelFacts) -> list[Finding]:
    layers = _int_cfg(facts, "num_hidden_layers", "n_layer", "num_layers")
    found = {int(m.group(1)) for n in facts.tensors if (m := _LAYER_RE.match(n))}
    if layers is None or not found:
        return [Finding("layers", Status.WARN, "not checked: no num_hidden_layers or layer keys")]
    extra = _int_cfg(facts, "num_nextn_predict_layers") or 0  # MTP layers come after the rest
    top = max(found)
    missing = sorted(set(range(layers)) - found)
    if top + 1 > layers + extra or missing:
        detail = (
            f"layers {missing[:5]}{'...' if len(missing) > 5 else ''} are missing"
            if missing
            else f"the weights go up to layer index {top}"
        )
        return [
            Finding(
                "layers",
                Status.FAIL,
                f"config.json num_hidden_layers {layers} but {detail}",
                f'set "num_hidden_layers": {top + 1} if the weights are complete (the config '
                "belongs to another size), otherwise copy the missing shards",
                data={"num_hidden_layers": layers, "highest_layer_index": top},
            )
        ]
    return [Finding("layers", Status.OK, f"num_hidden_layers {layers} = layers in the weights")]


def _named_tokenizer_files(facts: ModelFacts) -> list[tuple[str, str]]:
    config = facts.tokenizer_config or {}
    return [
        (key, str(config[key]))
        for key in ("tokenizer_file", "vocab_file", "merges_file")
        if isinstance(config.get(key), str) and config[key]
    ]


def check_tokenizer(facts: ModelFacts) -> list[Finding]:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if name in facts.read_errors:
            return [
                Finding(
                    "tokenizer",
                    Status.FAIL,
                    f"{name} {facts.read_errors[name]}",
                    "copy the tokenizer files again: AutoTokenizer.from_pretrained(BASE)"
                    ".save_pretrained(MODEL_DIR)",
                )
            ]
    present = [n for n in _TOKENIZER_FILES if n in facts.files]
    cls = (facts.tokenizer_config or {}).get("tokenizer_class")
    cls = cls if isinstance(cls, str) else None
    missing_named = [
        (key, value)
        for key, value in _named_tokenizer_files(facts)
        if Path(value).name not in facts.files
    ]
    alternatives = _SLOW_TOKENIZER_FILES.get(cls.removesuffix("Fast")) if cls else None
    has_json = "tokenizer.json" in facts.files
    if has_json:
        usable = True
    elif alternatives is not None:
        usable = any(all(f in facts.files for f in alt) for alt in alternatives)
    else:
        usable = bool(present)
    copy_fix = (
        "copy the tokenizer files of the model it was trained from into the folder "
        "(AutoTokenizer.from_pretrained(BASE).save_pretrained(MODEL_DIR)), or start vLLM with "
        "--tokenizer BASE (serve_vllm.sh: VLLM_EXTRA_ARGS='--tokenizer BASE')"
    )
    if not present and facts.tokenizer_config is None:
        return [Finding("tokenizer", Status.FAIL, "no tokenizer files in the folder", copy_fix)]
    if not usable:
        if missing_named:
            key, value = missing_named[0]
            what = f"tokenizer_config.json names {key} {value!r}, which is not in the folder"
        else:
            needs = " or ".join(
                " + ".join(alt) for alt in (("tokenizer.json",), *(alternatives or ()))
            )
            what = f"tokenizer_class {cls or '(none)'} needs {needs}, not in the folder"
        return [Finding("tokenizer", Status.FAIL, what, copy_fix)]
    if missing_named:
        key, value = missing_named[0]
        return [
            Finding(
                "tokenizer",
                Status.WARN,
                f"tokenizer_config.json names {key} {value!r}, which is not in the folder; "
                f"transformers falls back to {', '.join(present)}",
                f"remove the {key} entry from tokenizer_config.json, or save the tokenizer "
                "again (save_pretrained) so that the file is there",
            )
        ]
    if not has_json and alternatives is None:
        return [
            Finding(
                "tokenizer",
                Status.WARN,
                f"tokenizer_class {cls or '(none)'} is unknown to this preflight; files: "
                f"{', '.join(present)}",
                "check that AutoTokenizer.from_pretrained(MODEL_DIR) works in the vLLM venv",
            )
        ]
    return [Finding("tokenizer", Status.OK, f"{cls or 'tokenizer'} from {', '.join(present)}")]


def _config_token_ids(source: Mapping[str, Any] | None, name: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
        value = (source or {}).get(key)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and not isinstance(v, bool):
                out.append((v, f"{name} {key}"))
    return out


def check_tokenizer_ids(facts: ModelFacts) -> list[Finding]:
    vocab = _int_cfg(facts, "vocab_size", "padded_vocab_size")
    if vocab is None:
        return []
    ids: list[tuple[int, str]] = []
    if facts.tokenizer_vocab_max_id is not None:
        ids.append((facts.tokenizer_vocab_max_id, "tokenizer.json model.vocab"))
    ids += [(i, f"tokenizer.json added token {c!r}") for i, c in facts.tokenizer_added_tokens]
    decoder = (facts.tokenizer_config or {}).get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for key, token in decoder.items():
            content = token.get("content", "") if isinstance(token, dict) else ""
            if str(key).lstrip("-").isdigit():
                ids.append((int(key), f"tokenizer_config.json added token {content!r}"))
    ids += _config_token_ids(facts.config, "config.json")
    ids += _config_token_ids(facts.generation_config, "generation_config.json")
    if not ids:
        return []
    beyond = sorted((i for i in ids if i[0] >= vocab), reverse=True)
    if beyond:
        shown = "; ".join(f"{i} ({where})" for i, where in beyond[:4])
        more = f" and {len(beyond) - 4} more" if len(beyond) > 4 else ""
        return [
            Finding(
                "tokenizer-ids",
                Status.FAIL,
                f"token ids beyond vocab_size {vocab}: {shown}{more}; the model has no "
                "embedding row for them, and any prompt or answer using them fails in vLLM "
                "(out-of-vocabulary token id)",
                "the tokenizer got tokens that the model was never resized for: call "
                "model.resize_token_embeddings(len(tokenizer)) and train/merge again, or use "
                "the tokenizer saved with these weights (if the embeddings were resized, set "
                "vocab_size in config.json to their rows)",
                data={"vocab_size": vocab, "max_id": beyond[0][0], "count": len(beyond)},
            )
        ]
    top = max(i for i, _ in ids)
    return [Finding("tokenizer-ids", Status.OK, f"all token ids < vocab_size {vocab} (max {top})")]


def check_chat_template(facts: ModelFacts) -> list[Finding]:
    if facts.tokenizer_config is None and "tokenizer.json" not in facts.files:
        return []
    if (facts.tokenizer_config or {}).get("chat_template") or facts.files & {
        "chat_template.jinja",
        "chat_template.json",
    }:
        return [Finding("chat-template", Status.OK, "chat template present")]
    return [
        Finding(
            "chat-template",
            Status.WARN,
            "no chat template: vLLM starts, but /v1/chat/completions (what the gateway calls) "
            "answers 400",
            "save the base model's tokenizer again (it carries the template), add "
            "chat_template.jinja, or start vLLM with --chat-template FILE",
        )
    ]


def _uses_softcapping(facts: ModelFacts) -> bool:
    archs = (facts.config or {}).get("architectures") or []
    return (
        _cfg(facts, "model_type") == "gemma2"
        or "Gemma2ForCausalLM" in archs
        or _cfg(facts, "attn_logit_softcapping", "final_logit_softcapping") is not None
    )


def check_attention(facts: ModelFacts, opts: PlanOptions) -> list[Finding]:
    if facts.config is None:
        return []
    if not _uses_softcapping(facts):
        return [Finding("attention", Status.OK, "no logit softcapping: any attention backend")]
    if opts.cpu_kvcache_gib is not None:
        return [
            Finding(
                "attention",
                Status.OK,
                "Gemma-2 style logit softcapping: the CPU attention backend applies it "
                "(FlashInfer is GPU-only)",
            )
        ]
    backend = (opts.attention_backend or "").upper()
    if backend == "FLASHINFER":
        return [
            Finding(
                "attention",
                Status.OK,
                "Gemma-2 style logit softcapping with FLASHINFER selected (flashinfer must be "
                "installed in the vLLM venv)",
            )
        ]
    return [
        Finding(
            "attention",
            Status.FAIL,
            "the Gemma-2 family (logit softcapping) needs the FlashInfer attention backend, "
            f"selected backend: {backend or 'default'}",
            "install flashinfer in the vLLM venv (pip install flashinfer-python) and set "
            "VLLM_ATTENTION_BACKEND=FLASHINFER; vLLM releases without that variable (0.32) take "
            "--attention-backend FLASHINFER (serve_vllm.sh: VLLM_EXTRA_ARGS); pass the same "
            "to this preflight",
        )
    ]


# --------------------------------------------------------------------------- memory plan


@dataclass(frozen=True)
class _KVLayout:
    """Per layer: (KV bytes per token, tokens it keeps at most: None = all)."""

    layers: tuple[tuple[int, int | None], ...]

    def needed(self, tokens: int) -> int:
        total = 0
        for per_token, window in self.layers:
            blocks = math.ceil(tokens / BLOCK_SIZE)
            if window is not None:  # vLLM's SlidingWindowSpec: the window plus a chunk
                blocks = min(blocks, math.ceil(window / BLOCK_SIZE) + 1)
            total += per_token * blocks * BLOCK_SIZE
        return total

    def per_token(self) -> int:
        return sum(b for b, _ in self.layers)

    def max_len(self, available: int, cap: int) -> int:
        """The largest multiple of the block size whose KV cache fits (binary search)."""
        lo, hi = 0, cap // BLOCK_SIZE
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.needed(mid * BLOCK_SIZE) <= available else (lo, mid - 1)
        return lo * BLOCK_SIZE


def _kv_layout(facts: ModelFacts, kv_bytes: int, batched: int) -> _KVLayout | str:
    layers = _int_cfg(facts, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int_cfg(facts, "hidden_size", "n_embd", "d_model")
    heads = _int_cfg(facts, "num_attention_heads", "n_head")
    if layers is None or hidden is None or heads is None:
        return "config.json lacks num_hidden_layers, hidden_size or num_attention_heads"
    lora_rank = _int_cfg(facts, "kv_lora_rank")
    if lora_rank is not None:  # MLA: one latent vector + the rope part per token, no V
        per_layer = (lora_rank + (_int_cfg(facts, "qk_rope_head_dim") or 0)) * kv_bytes
    else:
        kv_heads = _int_cfg(facts, "num_key_value_heads", "num_kv_heads", "multi_query_group_num")
        if kv_heads is None:
            kv_heads = 1 if _cfg(facts, "multi_query") else heads
        head_dim = _int_cfg(facts, "head_dim") or hidden // heads
        per_layer = 2 * kv_heads * head_dim * kv_bytes
    window = _int_cfg(facts, "sliding_window")
    types = _cfg(facts, "layer_types")
    out: list[tuple[int, int | None]] = []
    for i in range(layers):
        kind = types[i] if isinstance(types, list) and i < len(types) else "full_attention"
        if kind == "sliding_attention" and window:
            out.append((per_layer, window - 1 + batched))
        elif kind in ("full_attention", "attention", "sliding_attention"):
            out.append((per_layer, None))
        # other kinds (linear attention, mamba) keep a fixed-size state, not per-token KV
    return _KVLayout(tuple(out))


def _derived_max_len(facts: ModelFacts) -> int | None:
    """vLLM's limit: the smallest length key, tokenizer model_max_length, times rope factor."""
    keys = (
        "max_position_embeddings",
        "n_positions",
        "max_seq_len",
        "seq_length",
        "model_max_length",
        "max_sequence_length",
        "max_seq_length",
        "seq_len",
    )
    values = [v for k in keys if (v := _int_cfg(facts, k)) is not None]
    tok_max = (facts.tokenizer_config or {}).get("model_max_length")
    if isinstance(tok_max, int) and values:
        values.append(tok_max)
    if not values:
        return None
    rope = _cfg(facts, "rope_scaling", "rope_parameters")
    factor = 1.0
    if isinstance(rope, dict) and _cfg(facts, "model_type") not in ("gemma3", "gemma3_text"):
        kind = rope.get("rope_type") or rope.get("type")
        unscaled = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "default", None)
        if kind not in unscaled and isinstance(rope.get("factor"), int | float):
            factor = float(rope["factor"])
    return int(min(values) * factor)


def _round_len(exact: int) -> int:
    """The largest 2**k or 3 * 2**(k-1) not above ``exact`` (0 when below one block)."""
    best = 0
    k = BLOCK_SIZE
    while k <= exact:
        best = k
        if k * 3 // 2 <= exact:
            best = k * 3 // 2
        k *= 2
    return best


def _weights_bytes(facts: ModelFacts, dtype: str) -> int:
    target = _SERVE_DTYPES[dtype]
    quantized = _cfg(facts, "quantization_config") is not None
    total = facts.pickled_weight_bytes
    for t in facts.tensors.values():
        convert = t.dtype in _FLOAT_DTYPES and not quantized
        total += t.numel * target if convert else t.nbytes
    return total


def _device_defaults(opts: PlanOptions) -> tuple[int, int]:
    """vLLM 0.32's API-server defaults (max_num_seqs, max_num_batched_tokens) for the device."""
    if opts.cpu_kvcache_gib is not None:
        seqs, batched = 128, 2048
    elif (opts.gpu_memory_gib or 0) >= 160:
        seqs, batched = 1024, 16384
    elif (opts.gpu_memory_gib or 0) >= 70:
        seqs, batched = 1024, 8192
    else:
        seqs, batched = 256, 2048
    return opts.max_num_seqs or seqs, opts.max_num_batched_tokens or batched


def check_memory(facts: ModelFacts, opts: PlanOptions) -> list[Finding]:
    if facts.config is None or not (facts.tensors or facts.pickled_weight_files):
        return []
    findings: list[Finding] = []
    derived = _derived_max_len(facts)
    max_len = opts.max_model_len or derived
    if opts.max_model_len and derived and opts.max_model_len > derived:
        findings.append(
            Finding(
                "max-model-len",
                Status.FAIL,
                f"--max-model-len {opts.max_model_len} is above the model's limit {derived} "
                "(max_position_embeddings, rope scaling, tokenizer model_max_length); vLLM "
                "refuses it",
                f"use --max-model-len {derived} or less",
            )
        )
    elif max_len:
        source = "given" if opts.max_model_len else "from config.json"
        findings.append(Finding("max-model-len", Status.OK, f"max_model_len {max_len} ({source})"))
    dtype = _serving_dtype(facts, opts)
    kv_bytes = 1 if opts.kv_cache_dtype.startswith("fp8") else _SERVE_DTYPES[dtype]
    if opts.kv_cache_dtype in ("bfloat16", "float16"):
        kv_bytes = 2
    layout = _kv_layout(facts, kv_bytes, _device_defaults(opts)[1])
    if isinstance(layout, str) or not max_len:
        why = layout if isinstance(layout, str) else "no max_model_len (pass --max-model-len)"
        return [*findings, Finding("memory", Status.WARN, f"plan skipped: {why}")]
    if opts.cpu_kvcache_gib is None and opts.gpu_memory_gib is None:
        note = opts.memory_note or "GPU memory unknown"
        return [
            *findings,
            Finding(
                "memory",
                Status.WARN,
                f"plan skipped: {note}",
                "pass --gpu-memory GiB (the GPU's size), or --cpu-kvcache-gib N for vLLM on CPU",
            ),
        ]
    return [*findings, *_plan(facts, opts, dtype, layout, max_len)]


def _plan(
    facts: ModelFacts, opts: PlanOptions, dtype: str, layout: _KVLayout, max_len: int
) -> list[Finding]:
    seqs, batched = _device_defaults(opts)
    act_bytes = _SERVE_DTYPES[dtype]
    hidden = _int_cfg(facts, "hidden_size", "n_embd", "d_model") or 0
    inter = _int_cfg(facts, "intermediate_size", "ffn_hidden_size", "n_inner") or 4 * hidden
    vocab = _int_cfg(facts, "vocab_size", "padded_vocab_size") or 0
    weights = _weights_bytes(facts, dtype)
    activations = batched * (4 * inter + 6 * hidden) * act_bytes
    activations += min(seqs, batched) * vocab * 4 * LOGITS_COPIES
    overhead = int(opts.overhead_gib * GiB)
    needed = layout.needed(max_len)
    data: dict[str, Any] = {
        "dtype": dtype,
        "kv_cache_dtype": opts.kv_cache_dtype,
        "weights_bytes": weights,
        "activation_bytes": activations,
        "overhead_bytes": overhead,
        "kv_bytes_per_token": layout.per_token(),
        "max_model_len": max_len,
        "kv_needed_bytes": needed,
        "max_num_seqs": seqs,
        "max_num_batched_tokens": batched,
    }
    if opts.cpu_kvcache_gib is not None:
        available = int(opts.cpu_kvcache_gib * GiB)
        where = f"VLLM_CPU_KVCACHE_SPACE={opts.cpu_kvcache_gib:g} GiB"
        data |= {"device": "cpu", "kv_available_bytes": available}
    else:
        total = (opts.gpu_memory_gib or 0) * GiB
        budget = int(total * opts.gpu_memory_utilization)
        available = budget - weights - activations - overhead
        where = (
            f"budget {_gib(budget)} ({opts.gpu_memory_gib:g} GiB × "
            f"{opts.gpu_memory_utilization:g}) − weights {_gib(weights)} − activations "
            f"{_gib(activations)} − overhead {_gib(overhead)} = {_gib(available)} left for the "
            "KV cache"
        )
        data |= {"device": "gpu", "budget_bytes": budget, "kv_available_bytes": available}
    findings = [_fit_finding(facts, opts, layout, max_len, available, where, weights, data)]
    if findings[0].status is Status.OK:
        findings.append(_concurrency(layout, max_len, available, seqs))
    if opts.cpu_kvcache_gib is not None and opts.host_memory_available_gib is not None:
        findings.extend(_host_memory(opts, weights + activations + overhead + available))
    return findings


def _fit_finding(
    facts: ModelFacts,
    opts: PlanOptions,
    layout: _KVLayout,
    max_len: int,
    available: int,
    where: str,
    weights: int,
    data: dict[str, Any],
) -> Finding:
    needed = layout.needed(max_len)
    cpu = opts.cpu_kvcache_gib is not None
    if needed <= available:
        return Finding(
            "memory",
            Status.OK,
            f"KV cache for one {max_len}-token sequence {_gib(needed)} fits: {where}",
            data=data,
        )
    total = (opts.gpu_memory_gib or 0) * GiB
    non_kv = data["weights_bytes"] + data["activation_bytes"] + data["overhead_bytes"]
    fixes: list[str] = []
    exact = layout.max_len(max(available, 0), max_len)
    suggested = _round_len(exact)
    if suggested:
        data |= {"suggested_max_model_len": suggested, "max_fitting_max_model_len": exact}
        fixes.append(f"--max-model-len {suggested} (the largest that fits: {exact})")
    if cpu:
        space = math.ceil(needed / GiB)
        data["suggested_cpu_kvcache_gib"] = space
        fixes.append(f"VLLM_CPU_KVCACHE_SPACE={space}")
    elif total:
        util = math.ceil((non_kv + needed) / total * 100) / 100
        if util <= MAX_SUGGESTED_UTILIZATION:
            data["suggested_gpu_memory_utilization"] = util
            fixes.append(f"--gpu-memory-utilization {util:g}")
    if opts.kv_cache_dtype == "auto" and layout.needed(max_len) // 2 <= available:
        fixes.append("--kv-cache-dtype fp8 (halves the KV cache; slightly less accurate)")
    if not fixes or (not cpu and weights > total * MAX_SUGGESTED_UTILIZATION):
        fixes.append(
            "a quantized checkpoint (AWQ/GPTQ/FP8), tensor parallelism over more GPUs or a "
            "larger GPU: the weights alone take most of this one"
        )
    if available <= 0:
        message = (
            f'vLLM stops with "No available memory for the cache blocks": {where}; one '
            f"{max_len}-token sequence needs {_gib(needed)}"
        )
    else:
        message = (
            f"KV cache cannot fit: one {max_len}-token sequence needs {_gib(needed)}, "
            f"{where}; vLLM stops with \"To serve at least one request with the model's max "
            f'seq len ({max_len}), ... Try ... decreasing `max_model_len`"'
        )
    return Finding("memory", Status.FAIL, message, "use " + ", or ".join(fixes), data)


def _concurrency(layout: _KVLayout, max_len: int, available: int, seqs: int) -> Finding:
    concurrency = available / max(layout.needed(max_len), 1)
    data = {"max_concurrency": round(concurrency, 2), "max_num_seqs": seqs}
    message = (
        f"the KV cache holds {concurrency:.2f} full-length ({max_len}-token) sequences at once "
        f"(vLLM logs it as 'Maximum concurrency for {max_len} tokens per request')"
    )
    if concurrency >= seqs:
        return Finding("concurrency", Status.OK, f"{message}, ≥ max_num_seqs {seqs}", data=data)
    tokens = available // max(layout.per_token(), 1)
    return Finding(
        "concurrency",
        Status.WARN,
        f"{message}, fewer than max_num_seqs {seqs}: vLLM starts, and queues or preempts "
        f"requests once the {seqs} sequences hold more than ~{tokens} tokens in all",
        "fine when requests are short (chat answers); otherwise lower --max-model-len or "
        "--max-num-seqs, or give the KV cache more memory",
        data,
    )


def _host_memory(opts: PlanOptions, needed: int) -> list[Finding]:
    host = (opts.host_memory_available_gib or 0) * GiB
    if needed <= host:
        return [Finding("host-memory", Status.OK, f"{_gib(needed)} of {_gib(host)} available RAM")]
    return [
        Finding(
            "host-memory",
            Status.WARN,
            f"weights + activations + KV cache need about {_gib(needed)}, the machine has "
            f"{_gib(host)} available: vLLM may fail allocating the KV cache",
            "lower VLLM_CPU_KVCACHE_SPACE or stop other processes",
        )
    ]


def run_checks(facts: ModelFacts, plan: PlanOptions) -> list[Finding]:
    """All checks, in output order. Pure: reads nothing beyond ``facts`` and ``plan``."""
    return [
        *check_config(facts),
        *check_weights(facts),
        *check_lora(facts),
        *check_shapes(facts),
        *check_tokenizer(facts),
        *check_tokenizer_ids(facts),
        *check_chat_template(facts),
        *check_attention(facts, plan),
        *check_memory(facts, plan),
    ]


# --------------------------------------------------------------------------- CLI


def _gpu_memory_gib() -> tuple[float | None, str]:
    """The first GPU's memory from nvidia-smi, or None and why not."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "no GPU found (no nvidia-smi) and no --gpu-memory given"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
        ).stdout
        return min(float(line) for line in out.split()) / 1024, ""  # MiB; the smallest GPU
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, "nvidia-smi did not report GPU memory and no --gpu-memory given"


def _host_available_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1024 * 1024)  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m app.llm.preflight",
        description="Check a model folder before vLLM loads it (reads JSON and safetensors "
        "headers only). Exit 0: it will load; 1: a check failed (the fix is printed); 2: usage.",
    )
    p.add_argument("model_dir", type=Path, help="the model folder (config.json, weights, ...)")
    p.add_argument(
        "--max-model-len", type=_positive(int), metavar="N", help="default: from config.json"
    )
    p.add_argument(
        "--max-num-seqs",
        type=_positive(int),
        metavar="N",
        help="default: vLLM 0.32's for the device (256 GPU < 70 GiB, 1024 larger, 128 CPU)",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=_positive(int),
        metavar="N",
        help="sizes the activation allowance; default: vLLM's (2048, 8192 from 70 GiB)",
    )
    p.add_argument(
        "--gpu-memory-utilization", type=_fraction, default=0.9, metavar="F", help="default 0.9"
    )
    p.add_argument(
        "--gpu-memory",
        type=_positive(float),
        metavar="GiB",
        help="GPU memory size; default: nvidia-smi's, else the memory plan is skipped",
    )
    p.add_argument(
        "--cpu-kvcache-gib",
        type=_positive(float),
        metavar="N",
        help="vLLM on CPU: check against VLLM_CPU_KVCACHE_SPACE=N instead of a GPU "
        "(default with no GPU: $VLLM_CPU_KVCACHE_SPACE when set)",
    )
    p.add_argument("--kv-cache-dtype", choices=_KV_CACHE_DTYPES, default="auto")
    p.add_argument("--dtype", choices=("auto", *_SERVE_DTYPES), default="auto")
    p.add_argument(
        "--overhead-gib",
        type=float,
        metavar="GiB",
        default=DEFAULT_OVERHEAD_GIB,
        help="fixed GPU allowance for CUDA context, workspaces and CUDA graphs (default 1.0)",
    )
    p.add_argument(
        "--attention-backend",
        metavar="NAME",
        help="the backend vLLM will use (default: $VLLM_ATTENTION_BACKEND)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    return p


def _options(args: argparse.Namespace) -> PlanOptions:
    gpu, note, cpu = args.gpu_memory, "", args.cpu_kvcache_gib
    if gpu is None and cpu is None:
        gpu, note = _gpu_memory_gib()
        env_space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
        if gpu is None and env_space.strip().isdigit() and int(env_space) > 0:
            cpu = float(env_space)
    return PlanOptions(
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
        gpu_memory_gib=gpu if cpu is None else None,
        cpu_kvcache_gib=cpu,
        kv_cache_dtype=args.kv_cache_dtype,
        dtype=args.dtype,
        overhead_gib=args.overhead_gib,
        attention_backend=args.attention_backend or os.environ.get("VLLM_ATTENTION_BACKEND"),
        host_memory_available_gib=_host_available_gib() if cpu is not None else None,
        memory_note=note,
    )


def format_text(findings: Iterable[Finding]) -> str:
    lines: list[str] = []
    for f in findings:
        lines.append(f"{f.status.value:<4}  {f.check}: {f.message}")
        if f.fix:
            fix_lines = f.fix.splitlines()
            lines.append(f"      fix: {fix_lines[0]}")
            lines.extend(f"        {line}" for line in fix_lines[1:])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    folder: Path = args.model_dir.expanduser()
    if not folder.is_dir():
        print(f"preflight: {folder} is not a folder", file=sys.stderr)
        return 2
    try:
        facts = inspect_folder(folder)
    except OSError as exc:
        print(f"preflight: cannot read {folder}: {exc}", file=sys.stderr)
        return 2
    findings = run_checks(facts, _options(args))
    fails = sum(f.status is Status.FAIL for f in findings)
    warns = sum(f.status is Status.WARN for f in findings)
    code = 1 if fails else 0
    if args.json:
        report = {
            "model_dir": str(folder),
            "ok": code == 0,
            "exit_code": code,
            "findings": [asdict(f) for f in findings],
        }
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(format_text(findings))
        verdict = "vLLM will not load it as is" if fails else "ready for vLLM"
        print(f"preflight {folder}: {fails} failed, {warns} warnings: {verdict}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
