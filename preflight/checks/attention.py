"""The ``attention`` check: Gemma-2 style logit softcapping needs the FlashInfer backend.

Deliberate choice: Gemma-2 fails unless FlashInfer is selected (``VLLM_ATTENTION_BACKEND`` in
the environment or ``--attention-backend``): older vLLM refuses softcapping models on other
backends.
"""

from __future__ import annotations

from preflight.facts import ModelFacts
from preflight.findings import Finding, Status
from preflight.options import PlanOptions

__all__ = ["check_attention"]


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


def _uses_softcapping(facts: ModelFacts) -> bool:
    archs = (facts.config or {}).get("architectures") or []
    return (
        facts.config_value("model_type") == "gemma2"
        or "Gemma2ForCausalLM" in archs
        or facts.config_value("attn_logit_softcapping", "final_logit_softcapping") is not None
    )
