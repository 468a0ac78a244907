"""The checks, one module per area; :func:`run_checks` runs them all in output order."""

from __future__ import annotations

from preflight.checks.attention import check_attention
from preflight.checks.config import check_config, check_shapes
from preflight.checks.memory import check_memory
from preflight.checks.tokenizer import (
    check_chat_template,
    check_tokenizer,
    check_tokenizer_ids,
)
from preflight.checks.weights import check_lora, check_weights
from preflight.facts import ModelFacts
from preflight.findings import Finding
from preflight.options import PlanOptions

__all__ = ["run_checks"]


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
