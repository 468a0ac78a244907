"""Check a model folder before vLLM loads it: ``python -m preflight MODEL_DIR``.

Reads only JSON files and safetensors headers, so it takes well under a second even for a 70B
checkpoint and needs no torch (stdlib only: it runs under the vLLM venv's python too). Prints
one line per check (``OK``/``WARN``/``FAIL``) and, under each failure, the fix in plain words.
Exit status: 0 when vLLM will load the folder (warnings allowed), 1 when a check failed, 2 on a
usage error (no such folder, bad option).

The flow: :func:`inspect_folder` reads the folder once into :class:`ModelFacts`; :func:`run_checks`
turns facts and :class:`PlanOptions` into :class:`Finding` lines; :func:`main` is the command.

Checks, in order (``checks/``): ``config`` (config.json), ``weights`` (safetensors headers,
shards of ``model.safetensors.index.json``, truncated files), ``lora`` (an unmerged LoRA
checkpoint), ``vocab-size``/``hidden-size``/``layers`` (config.json against the weights),
``tokenizer`` (the files the tokenizer class needs), ``tokenizer-ids`` (token ids against
vocab_size), ``chat-template``, ``attention`` (Gemma-2 logit softcapping needs FlashInfer), and
the memory plan: ``max-model-len``, ``memory``, ``concurrency`` and, on CPU, ``host-memory``.
"""

from __future__ import annotations

from preflight.checks import run_checks
from preflight.cli import main
from preflight.facts import ModelFacts, inspect_folder
from preflight.findings import Finding, Status
from preflight.options import PlanOptions
from preflight.safetensors_header import TensorInfo, read_safetensors_header

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
