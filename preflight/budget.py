"""Where the memory goes: weights, activations, overhead, and what is left for the KV cache.

GPU (GiB = 2**30 bytes; vLLM 0.32's profiler, ``gpu_worker.py``)::

    budget       = gpu_memory × gpu_memory_utilization
    weights      = Σ tensor bytes from the headers, at the serving dtype
    activations  = max_num_batched_tokens × (4·intermediate_size + 6·hidden_size) × dtype bytes
                 + min(max_num_seqs, max_num_batched_tokens) × vocab_size × 4 bytes × 4 copies
    overhead     = --overhead-gib (1.0: CUDA context, cuBLAS/NCCL workspaces, CUDA graphs)
    kv_available = budget − weights − activations − overhead

On CPU (``--cpu-kvcache-gib N``) the KV cache is exactly ``VLLM_CPU_KVCACHE_SPACE`` GiB.

Deliberate choices (they may look like bugs; they are not):

* The activation and overhead allowances are estimates, not measurements; they err on the
  large side so that "fits" means "fits with a margin". ``--overhead-gib`` tunes the fixed part.
* ``max_num_seqs``/``max_num_batched_tokens`` default to what vLLM 0.32's API server picks
  on the device (256/2048 below 70 GiB, 1024/8192 from 70 GiB, 1024/16384 from 160 GiB,
  128/2048 on CPU), not to a fixed number.
"""

from __future__ import annotations

from dataclasses import dataclass

from preflight.facts import ModelFacts
from preflight.findings import GiB, gib
from preflight.options import DTYPE_BYTES, PlanOptions

__all__ = ["Budget", "device_defaults", "kv_dtype_bytes", "memory_budget", "serving_dtype"]

LOGITS_COPIES = 4  # logits, probabilities, logprobs and a sort buffer in the sampler
_FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})  # safetensors dtypes --dtype converts


@dataclass(frozen=True)
class Budget:
    """Where the memory goes; ``kv_available`` is what vLLM gives the KV cache."""

    weights: int
    activations: int
    overhead: int
    kv_available: int
    gpu_budget: int | None  # None on CPU, where the KV cache has a size of its own
    where: str  # how kv_available came about, for the messages

    @property
    def non_kv(self) -> int:
        return self.weights + self.activations + self.overhead


def serving_dtype(facts: ModelFacts, opts: PlanOptions) -> str:
    """The dtype vLLM computes in: --dtype, else the checkpoint's (16 bits at most)."""
    if opts.dtype != "auto":
        return {"half": "float16", "float": "float32"}.get(opts.dtype, opts.dtype)
    declared = facts.config_value("torch_dtype", "dtype")
    if declared in DTYPE_BYTES:
        # vLLM's auto dtype downcasts float32 checkpoints to 16 bits (bfloat16 where supported).
        return "bfloat16" if declared in ("float32", "float") else str(declared)
    return "float16" if any(t.dtype == "F16" for t in facts.tensors.values()) else "bfloat16"


def kv_dtype_bytes(kv_cache_dtype: str, dtype: str) -> int:
    """Bytes per KV cache element for --kv-cache-dtype ("auto": the serving dtype's)."""
    if kv_cache_dtype.startswith("fp8"):
        return 1
    return 2 if kv_cache_dtype in ("bfloat16", "float16") else DTYPE_BYTES[dtype]


def device_defaults(opts: PlanOptions) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens): given, else vLLM 0.32's for the device."""
    if opts.cpu_kvcache_gib is not None:
        seqs, batched = 128, 2048
    elif (opts.gpu_memory_gib or 0) >= 160:
        seqs, batched = 1024, 16384
    elif (opts.gpu_memory_gib or 0) >= 70:
        seqs, batched = 1024, 8192
    else:
        seqs, batched = 256, 2048
    return opts.max_num_seqs or seqs, opts.max_num_batched_tokens or batched


def memory_budget(
    facts: ModelFacts, opts: PlanOptions, dtype: str, seqs: int, batched: int
) -> Budget:
    """The budget on CPU (``opts.cpu_kvcache_gib`` set) or on a GPU of ``opts.gpu_memory_gib``."""
    dtype_bytes = DTYPE_BYTES[dtype]
    hidden = facts.hidden_size or 0
    inter = facts.config_int("intermediate_size", "ffn_hidden_size", "n_inner") or 4 * hidden
    vocab = facts.vocab_size or 0
    weights = _weights_bytes(facts, dtype_bytes)
    activations = batched * (4 * inter + 6 * hidden) * dtype_bytes
    activations += min(seqs, batched) * vocab * 4 * LOGITS_COPIES
    overhead = int(opts.overhead_gib * GiB)
    if opts.cpu_kvcache_gib is not None:
        available = int(opts.cpu_kvcache_gib * GiB)
        where = f"VLLM_CPU_KVCACHE_SPACE={opts.cpu_kvcache_gib:g} GiB"
        return Budget(weights, activations, overhead, available, None, where)
    budget = int((opts.gpu_memory_gib or 0) * GiB * opts.gpu_memory_utilization)
    available = budget - weights - activations - overhead
    where = (
        f"budget {gib(budget)} ({opts.gpu_memory_gib:g} GiB × "
        f"{opts.gpu_memory_utilization:g}) − weights {gib(weights)} − activations "
        f"{gib(activations)} − overhead {gib(overhead)} = {gib(available)} left for the "
        "KV cache"
    )
    return Budget(weights, activations, overhead, available, budget, where)


def _weights_bytes(facts: ModelFacts, dtype_bytes: int) -> int:
    """Weight bytes once loaded: floating tensors at the serving dtype, the rest as stored."""
    quantized = facts.config_value("quantization_config") is not None
    total = facts.pickled_weight_bytes
    for t in facts.tensors.values():
        convert = t.dtype in _FLOAT_DTYPES and not quantized
        total += t.numel * dtype_bytes if convert else t.nbytes
    return total
