"""The serving settings a folder is checked against, and the values vLLM accepts for them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_OVERHEAD_GIB", "DTYPE_BYTES", "KV_CACHE_DTYPES", "PlanOptions"]

DEFAULT_OVERHEAD_GIB = 1.0
DTYPE_BYTES = {"float16": 2, "half": 2, "bfloat16": 2, "float32": 4, "float": 4}  # --dtype
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16")


@dataclass(frozen=True)
class PlanOptions:
    """vLLM's flags of the same names (None: vLLM's default for the device)."""

    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float = 0.9
    gpu_memory_gib: float | None = None
    cpu_kvcache_gib: float | None = None  # set: vLLM on CPU, VLLM_CPU_KVCACHE_SPACE
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    overhead_gib: float = DEFAULT_OVERHEAD_GIB
    attention_backend: str | None = None
    host_memory_available_gib: float | None = None
    memory_note: str = ""  # why there is no memory size, when there is none
