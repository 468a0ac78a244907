"""``python -m app.feedback.worker``: feedback workers in a process of their own (scale-out).

Needs ``REDIS_URL`` (the jobs are in saq's Redis queue) and reads the same settings as the
gateway: the same upstream pool (``LLM_BASE_URL`` replicas, ``LLM_API_KEY``), the same limits
per process (``FEEDBACK_WORKERS``, ``FEEDBACK_MAX_CONCURRENT_GENERATIONS``). Run as many as
the LLM can take; gateways may then set ``FEEDBACK_IN_PROCESS_WORKERS=false``. SIGTERM or
SIGINT stops it gracefully: running jobs go back on the queue.

    python -m app.feedback.worker [--metrics-port 9108]

``--metrics-port`` serves this process's ``gateway_feedback_*`` metrics for Prometheus.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from prometheus_client import CollectorRegistry, start_http_server

from app.config import Settings, get_settings
from app.feedback.metrics import FeedbackMetrics
from app.feedback.queue_saq import build_worker
from app.feedback.service import open_saq_runtime
from app.llm.client import LLMClient, build_http_client
from app.llm.upstreams import UpstreamPool
from app.logs import setup_logging
from app.metrics import Metrics
from app.redis_client import RedisConnector, redis_connector

__all__ = ["main", "run"]

log = logging.getLogger("app.feedback.worker")


async def run(
    settings: Settings, redis: RedisConnector, registry: CollectorRegistry | None = None
) -> None:
    """Work feedback jobs from ``redis``'s queue until SIGTERM/SIGINT."""
    metrics = Metrics()  # the upstream pool's and client's own counters
    async with (
        build_http_client(settings) as http,
        UpstreamPool.from_settings(settings, http, metrics) as upstreams,
    ):
        llm = LLMClient(http, settings, metrics=metrics, upstreams=upstreams)
        feedback_metrics = FeedbackMetrics(registry or metrics.registry)
        async with open_saq_runtime(settings, llm, feedback_metrics, redis) as (
            queue,
            runner,
            _,
            _,
        ):
            worker = build_worker(queue, runner, settings, own_signals=True)
            log.info(
                "feedback worker ready: queue %s, %d job(s) at once, upstream %s",
                settings.feedback_queue_name,
                settings.feedback_workers,
                ", ".join(upstreams.labels),
            )
            await worker.start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.feedback.worker", description=__doc__)
    parser.add_argument("--metrics-port", type=int, default=None)
    args = parser.parse_args(argv)
    settings = get_settings()
    setup_logging(settings.log_level, settings.log_format)
    redis = redis_connector(settings.redis_url)
    if redis is None:
        print("REDIS_URL is not set: the worker needs the Redis queue", file=sys.stderr)
        return 2
    registry = CollectorRegistry()
    if args.metrics_port is not None:
        start_http_server(args.metrics_port, registry=registry)
    asyncio.run(run(settings, redis, registry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
