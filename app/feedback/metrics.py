"""The feedback job's Prometheus metrics, registered in the app's registry (``/metrics``).

A separate worker process (``python -m app.feedback.worker``) registers them in its own
registry and serves it on ``--metrics-port``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["FeedbackMetrics"]

_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)


class FeedbackMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.jobs = Counter(
            "gateway_feedback_jobs",
            "feedback requests by outcome: accepted, duplicate (same Idempotency-Key), "
            "key_reused (the key with another request: 422), queue_full (503), invalid (400/422)",
            ["outcome"],
            registry=r,
        )
        self.generations = Counter(
            "gateway_feedback_generations",
            "feedback texts by how they were made: ok, repaired (shortened to whole sentences), "
            "retried (the second ask), fallback_invalid, fallback_upstream",
            ["outcome"],
            registry=r,
        )
        self.rejected_texts = Counter(
            "gateway_feedback_rejected_texts",
            "model texts refused by the validator, by reason",
            ["reason"],
            registry=r,
        )
        self.generation_seconds = Histogram(
            "gateway_feedback_generation_seconds",
            "one feedback LLM request (waiting for a feedback slot excluded)",
            buckets=_SECONDS,
            registry=r,
        )
        self.deliveries = Counter(
            "gateway_feedback_deliveries",
            "callback attempts by outcome: delivered, retry (5xx, timeout, connection), "
            "dead_letter",
            ["outcome"],
            registry=r,
        )
        self.dead_letters = Counter(
            "gateway_feedback_dead_letters",
            "feedback results never delivered, by reason: client_error (4xx, not retried), "
            "exhausted (FEEDBACK_DELIVERY_ATTEMPTS used up)",
            ["reason"],
            registry=r,
        )
