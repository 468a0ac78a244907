"""KV cache sizes: bytes per token, per sequence, and the longest sequence that fits.

As vLLM allocates it::

    kv_per_token = Σ_layers 2 × num_key_value_heads × head_dim × kv dtype bytes
    kv_needed(L) = kv_per_token × L   (L rounded up to vLLM's 16-token blocks; a sliding-window
                   layer holds at most window − 1 + max_num_batched_tokens tokens plus a block,
                   an MLA layer one latent vector per token; layer kinds from layer_types)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from preflight.facts import ModelFacts

__all__ = ["BLOCK_SIZE", "KVLayout", "kv_layout"]

BLOCK_SIZE = 16  # vLLM's default KV cache block size (tokens)


@dataclass(frozen=True)
class KVLayout:
    """Per layer: (KV bytes per token, tokens it keeps at most: None = all)."""

    layers: tuple[tuple[int, int | None], ...]

    def needed(self, tokens: int) -> int:
        """Bytes for one sequence of ``tokens`` tokens."""
        blocks = math.ceil(tokens / BLOCK_SIZE)
        total = 0
        for per_token, window in self.layers:
            kept = blocks if window is None else min(blocks, math.ceil(window / BLOCK_SIZE) + 1)
            total += per_token * kept * BLOCK_SIZE
        return total

    def per_token(self) -> int:
        return sum(b for b, _ in self.layers)

    def max_len(self, available: int, cap: int) -> int:
        """The largest multiple of the block size up to ``cap`` whose KV cache fits."""
        lo, hi = 0, cap // BLOCK_SIZE
        while lo < hi:  # binary search
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.needed(mid * BLOCK_SIZE) <= available else (lo, mid - 1)
        return lo * BLOCK_SIZE


def kv_layout(facts: ModelFacts, kv_bytes: int, batched: int) -> KVLayout | str:
    """The model's layout at ``kv_bytes`` per element, or why config.json cannot tell."""
    layers = facts.num_layers
    hidden = facts.hidden_size
    heads = facts.config_int("num_attention_heads", "n_head")
    if layers is None or hidden is None or heads is None:
        return "config.json lacks num_hidden_layers, hidden_size or num_attention_heads"
    lora_rank = facts.config_int("kv_lora_rank")
    if lora_rank is not None:  # MLA: one latent vector + the rope part per token, no V
        per_layer = (lora_rank + (facts.config_int("qk_rope_head_dim") or 0)) * kv_bytes
    else:
        kv_heads = facts.config_int("num_key_value_heads", "num_kv_heads", "multi_query_group_num")
        if kv_heads is None:
            kv_heads = 1 if facts.config_value("multi_query") else heads
        head_dim = facts.config_int("head_dim") or hidden // heads
        per_layer = 2 * kv_heads * head_dim * kv_bytes
    window = facts.config_int("sliding_window")
    types = facts.config_value("layer_types")
    out: list[tuple[int, int | None]] = []
    for i in range(layers):
        kind = types[i] if isinstance(types, list) and i < len(types) else "full_attention"
        if kind == "sliding_attention" and window:
            out.append((per_layer, window - 1 + batched))
        elif kind in ("full_attention", "attention", "sliding_attention"):
            out.append((per_layer, None))
        # other kinds (linear attention, mamba) keep a fixed-size state, not per-token KV
    return KVLayout(tuple(out))
