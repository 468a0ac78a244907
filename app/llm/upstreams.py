"""The vLLM replicas behind ``LLM_BASE_URL``, and which one gets the next request.

    LLM_BASE_URL=http://10.0.0.1:8000/v1,http://10.0.0.2:8000/v1

Choosing: the healthy replica with the fewest requests in flight (ties in turn), then the
others in the same order, for failover (``LLMClient`` tries each at most once per request).

A request with a routing key (a chat turn: its session id) first goes to the key's replica,
so that the conversation's earlier turns are in that replica's prefix cache: the healthy
replica with the highest rendezvous (highest-random-weight) hash of (key, replica URL). No
state is kept, every gateway process agrees, and a replica going down moves only its own
sessions. Affinity gives way to the least-loaded rule when the key's replica carries
``LLM_AFFINITY_SLACK`` or more requests in flight above the least loaded one (0: off).
The other replicas follow it in the usual order, for failover. ``gateway_upstream_affinity``
counts each keyed choice: ``home``, ``busy`` (gave way) or ``moved`` (its replica was down).

Health: a background task GETs ``{replica}/models`` every ``LLM_HEALTH_INTERVAL`` seconds.
A failed check, or a real request that cannot connect, marks the replica down at once;
down replicas are skipped until a check passes again.

Deliberate choices (do not "fix"):
- When every replica is down, all are tried anyway (best effort): a health mark can be a
  few seconds stale, and a connection refused costs a millisecond, while refusing without
  trying fails for sure. The client then gets the usual 502.
- A 429/5xx answer moves the request on but does not mark the replica down: the replica
  is alive, only busy or failing that request; its health check decides.
- The ``upstream`` metric label is ``host:port`` (never the URL: it may hold credentials).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

import httpx

from app.config import UpstreamSettings
from app.metrics import Metrics

__all__ = ["Upstream", "UpstreamPool"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Upstream:
    """One replica: its base URL (no trailing slash), metric label and live state."""

    base_url: str
    label: str
    healthy: bool = True  # optimistic until the first check says otherwise
    outstanding: int = 0
    chat_url: httpx.URL = field(init=False)  # parsed once: httpx parses a str URL per request

    def __post_init__(self) -> None:
        self.chat_url = httpx.URL(self.url("chat/completions"))

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path}"


def _labels(urls: Sequence[str]) -> list[str]:
    """``host:port`` per URL (userinfo dropped); with the path where two would collide."""
    parsed = [httpx.URL(url) for url in urls]
    labels = [f"{u.host}:{u.port or (443 if u.scheme == 'https' else 80)}" for u in parsed]
    return [
        f"{label}{u.path}".rstrip("/") if labels.count(label) > 1 else label
        for label, u in zip(labels, parsed, strict=True)
    ]


def _weight(key: str, replica: str) -> int:
    """The rendezvous weight of ``replica`` for ``key``: the same in every process (Python's
    ``hash`` of a str is salted per process), spread evenly over replicas."""
    digest = hashlib.blake2b(f"{key}\x00{replica}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _home(key: str, replicas: Sequence[Upstream]) -> Upstream:
    """The replica of ``replicas`` that ``key`` ranks first."""
    return max(replicas, key=lambda u: _weight(key, u.base_url))


class UpstreamPool:
    """The replicas and their health; ``async with`` runs the health check task.

    Not entered (e.g. a test building ``LLMClient`` by hand), every replica counts as
    healthy until a request fails to connect to it.
    """

    def __init__(
        self,
        base_urls: Sequence[str],
        http: httpx.AsyncClient,
        metrics: Metrics,
        *,
        check_interval: float = 5.0,
        check_timeout: float = 5.0,
        affinity_slack: int = 0,
    ) -> None:
        if not base_urls:
            raise ValueError("at least one upstream URL is needed")
        self.replicas = tuple(
            Upstream(url, label) for url, label in zip(base_urls, _labels(base_urls), strict=True)
        )
        self._http = http
        self._metrics = metrics
        self._interval = check_interval
        self._timeout = check_timeout
        self._slack = affinity_slack
        self._turn = itertools.count()
        self._affinity = metrics.upstream_affinity
        self._task: asyncio.Task[None] | None = None
        for upstream in self.replicas:
            metrics.upstream_outstanding.labels(upstream.label).set(0)
            metrics.upstream_healthy.labels(upstream.label).set(1)

    @classmethod
    def from_settings(
        cls, settings: UpstreamSettings, http: httpx.AsyncClient, metrics: Metrics
    ) -> UpstreamPool:
        return cls(
            settings.llm_base_urls,
            http,
            metrics,
            check_interval=settings.llm_health_interval,
            check_timeout=settings.llm_connect_timeout,
            affinity_slack=settings.llm_affinity_slack,
        )

    @property
    def labels(self) -> list[str]:
        return [upstream.label for upstream in self.replicas]

    # --- choosing ------------------------------------------------------------------------

    def candidates(self, key: str | None = None) -> list[Upstream]:
        """The replicas to try for one request, best first: healthy ones by fewest in flight
        (ties in turn), or every replica when none is healthy. With a ``key``, the key's
        replica comes first unless it is loaded past the slack (module docstring)."""
        live = [u for u in self.replicas if u.healthy] or list(self.replicas)
        start = next(self._turn) % len(live)
        rotated = live[start:] + live[:start]
        ordered = sorted(rotated, key=lambda u: u.outstanding)  # stable: ties keep the turn
        if key is None or self._slack <= 0 or len(self.replicas) == 1:
            return ordered
        home = _home(key, live)
        if home.outstanding - ordered[0].outstanding >= self._slack:
            self._affinity.labels("busy").inc()
            return ordered  # its cache is worth less than the queue it would join
        if len(live) < len(self.replicas) and home is not _home(key, self.replicas):
            self._affinity.labels("moved").inc()  # its own replica is down: the next one
        else:
            self._affinity.labels("home").inc()
        return [home, *(u for u in ordered if u is not home)]

    def acquire(self, upstream: Upstream) -> None:
        upstream.outstanding += 1
        self._metrics.upstream_outstanding.labels(upstream.label).set(upstream.outstanding)

    def release(self, upstream: Upstream) -> None:
        upstream.outstanding -= 1
        self._metrics.upstream_outstanding.labels(upstream.label).set(upstream.outstanding)

    # --- health --------------------------------------------------------------------------

    def mark_down(self, upstream: Upstream, reason: str) -> None:
        if upstream.healthy:
            log.warning("upstream %s marked down: %s", upstream.label, reason)
        upstream.healthy = False
        self._metrics.upstream_healthy.labels(upstream.label).set(0)

    def mark_up(self, upstream: Upstream) -> None:
        if not upstream.healthy:
            log.info("upstream %s is back", upstream.label)
        upstream.healthy = True
        self._metrics.upstream_healthy.labels(upstream.label).set(1)

    async def probe(self, upstream: Upstream) -> bool:
        """``GET {replica}/models`` answers 200 now; marks the replica up or down."""
        try:
            response = await self._http.get(upstream.url("models"), timeout=self._timeout)
            ok = response.status_code == 200
            reason = f"GET /models answered {response.status_code}"
        except httpx.HTTPError as exc:
            ok, reason = False, f"GET /models failed: {type(exc).__name__}"
        if ok:
            self.mark_up(upstream)
        else:
            self.mark_down(upstream, reason)
        return ok

    async def check_all(self) -> list[bool]:
        """Probe every replica at once; one result per replica."""
        if len(self.replicas) == 1:  # no task for the common case
            return [await self.probe(self.replicas[0])]
        return list(await asyncio.gather(*(self.probe(u) for u in self.replicas)))

    async def _check_forever(self) -> None:
        while True:
            try:
                await self.check_all()
            except Exception:  # a bug here must not stop the checks for good
                log.exception("upstream health check failed")
            await asyncio.sleep(self._interval)

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._check_forever(), name="upstream-health")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> UpstreamPool:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
