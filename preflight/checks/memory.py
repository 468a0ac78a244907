"""The memory plan's checks: ``max-model-len``, ``memory``, ``concurrency``, ``host-memory``.

vLLM allocates *all* of the budget's ``kv_available`` (budget.py) to the KV cache and refuses
to start unless one full-length sequence fits (``kv_needed(max_model_len) <= kv_available``,
kv_cache.py): that is the ``memory`` check (FAIL). ``max_num_seqs`` full-length sequences at
once is not required: when fewer fit the ``concurrency`` check warns (vLLM then queues or
preempts; fine for short requests). On CPU, ``host-memory`` compares the whole plan with the
RAM available.
"""

from __future__ import annotations

import math
from typing import Any

from preflight.budget import (
    Budget,
    device_defaults,
    kv_dtype_bytes,
    memory_budget,
    serving_dtype,
)
from preflight.facts import ModelFacts
from preflight.findings import Finding, GiB, Status, gib
from preflight.kv_cache import BLOCK_SIZE, KVLayout, kv_layout
from preflight.options import PlanOptions

__all__ = ["check_memory"]

MAX_SUGGESTED_UTILIZATION = 0.95
_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
_UNSCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "default", None)


def check_memory(facts: ModelFacts, opts: PlanOptions) -> list[Finding]:
    if facts.config is None or not (facts.tensors or facts.pickled_weight_files):
        return []
    derived = _derived_max_len(facts)
    max_len = opts.max_model_len or derived
    findings = _check_max_len(opts.max_model_len, derived)
    dtype = serving_dtype(facts, opts)
    seqs, batched = device_defaults(opts)
    layout = kv_layout(facts, kv_dtype_bytes(opts.kv_cache_dtype, dtype), batched)
    if isinstance(layout, str) or not max_len:
        why = layout if isinstance(layout, str) else "no max_model_len (pass --max-model-len)"
        return [*findings, Finding("memory", Status.WARN, f"plan skipped: {why}")]
    if opts.cpu_kvcache_gib is None and opts.gpu_memory_gib is None:
        return [
            *findings,
            Finding(
                "memory",
                Status.WARN,
                f"plan skipped: {opts.memory_note or 'GPU memory unknown'}",
                "pass --gpu-memory GiB (the GPU's size), or --cpu-kvcache-gib N for vLLM on CPU",
            ),
        ]
    budget = memory_budget(facts, opts, dtype, seqs, batched)
    data: dict[str, Any] = {
        "dtype": dtype,
        "kv_cache_dtype": opts.kv_cache_dtype,
        "weights_bytes": budget.weights,
        "activation_bytes": budget.activations,
        "overhead_bytes": budget.overhead,
        "kv_bytes_per_token": layout.per_token(),
        "max_model_len": max_len,
        "kv_needed_bytes": layout.needed(max_len),
        "max_num_seqs": seqs,
        "max_num_batched_tokens": batched,
    }
    if budget.gpu_budget is None:
        data |= {"device": "cpu", "kv_available_bytes": budget.kv_available}
    else:
        data |= {
            "device": "gpu",
            "budget_bytes": budget.gpu_budget,
            "kv_available_bytes": budget.kv_available,
        }
    fit = _check_fit(opts, layout, max_len, budget, data)
    findings.append(fit)
    if fit.status is Status.OK:
        findings.append(_check_concurrency(layout, max_len, budget.kv_available, seqs))
    if opts.cpu_kvcache_gib is not None and opts.host_memory_available_gib is not None:
        findings.append(_check_host_memory(opts, budget.non_kv + budget.kv_available))
    return findings


def _check_max_len(given: int | None, derived: int | None) -> list[Finding]:
    """``max-model-len``: the given length against the model's own limit (none when unknown)."""
    if given and derived and given > derived:
        return [
            Finding(
                "max-model-len",
                Status.FAIL,
                f"--max-model-len {given} is above the model's limit {derived} "
                "(max_position_embeddings, rope scaling, tokenizer model_max_length); vLLM "
                "refuses it",
                f"use --max-model-len {derived} or less",
            )
        ]
    max_len = given or derived
    if not max_len:
        return []
    source = "given" if given else "from config.json"
    return [Finding("max-model-len", Status.OK, f"max_model_len {max_len} ({source})")]


def _derived_max_len(facts: ModelFacts) -> int | None:
    """vLLM's limit: the smallest length key, tokenizer model_max_length, times rope factor."""
    values = [v for k in _LENGTH_KEYS if (v := facts.config_int(k)) is not None]
    tok_max = (facts.tokenizer_config or {}).get("model_max_length")
    if isinstance(tok_max, int) and values:
        values.append(tok_max)
    if not values:
        return None
    rope = facts.config_value("rope_scaling", "rope_parameters")
    factor = 1.0
    if isinstance(rope, dict) and facts.config_value("model_type") not in ("gemma3", "gemma3_text"):
        kind = rope.get("rope_type") or rope.get("type")
        if kind not in _UNSCALED_ROPE and isinstance(rope.get("factor"), int | float):
            factor = float(rope["factor"])
    return int(min(values) * factor)


def _check_fit(
    opts: PlanOptions, layout: KVLayout, max_len: int, budget: Budget, data: dict[str, Any]
) -> Finding:
    """``memory``: one full-length sequence fits the KV cache, else how to make it fit."""
    needed = layout.needed(max_len)
    available = budget.kv_available
    if needed <= available:
        return Finding(
            "memory",
            Status.OK,
            f"KV cache for one {max_len}-token sequence {gib(needed)} fits: {budget.where}",
            data=data,
        )
    cpu = opts.cpu_kvcache_gib is not None
    total = (opts.gpu_memory_gib or 0) * GiB
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
        util = math.ceil((budget.non_kv + needed) / total * 100) / 100
        if util <= MAX_SUGGESTED_UTILIZATION:
            data["suggested_gpu_memory_utilization"] = util
            fixes.append(f"--gpu-memory-utilization {util:g}")
    if opts.kv_cache_dtype == "auto" and needed // 2 <= available:
        fixes.append("--kv-cache-dtype fp8 (halves the KV cache; slightly less accurate)")
    if not fixes or (not cpu and budget.weights > total * MAX_SUGGESTED_UTILIZATION):
        fixes.append(
            "a quantized checkpoint (AWQ/GPTQ/FP8), tensor parallelism over more GPUs or a "
            "larger GPU: the weights alone take most of this one"
        )
    if available <= 0:
        message = (
            f'vLLM stops with "No available memory for the cache blocks": {budget.where}; one '
            f"{max_len}-token sequence needs {gib(needed)}"
        )
    else:
        message = (
            f"KV cache cannot fit: one {max_len}-token sequence needs {gib(needed)}, "
            f"{budget.where}; vLLM stops with \"To serve at least one request with the model's "
            f'max seq len ({max_len}), ... Try ... decreasing `max_model_len`"'
        )
    return Finding("memory", Status.FAIL, message, "use " + ", or ".join(fixes), data)


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


def _check_concurrency(layout: KVLayout, max_len: int, available: int, seqs: int) -> Finding:
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


def _check_host_memory(opts: PlanOptions, needed: int) -> Finding:
    host = (opts.host_memory_available_gib or 0) * GiB
    if needed <= host:
        return Finding("host-memory", Status.OK, f"{gib(needed)} of {gib(host)} available RAM")
    return Finding(
        "host-memory",
        Status.WARN,
        f"weights + activations + KV cache need about {gib(needed)}, the machine has "
        f"{gib(host)} available: vLLM may fail allocating the KV cache",
        "lower VLLM_CPU_KVCACHE_SPACE or stop other processes",
    )
