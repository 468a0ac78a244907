"""Which replica a chat turn goes to (app/llm/upstreams.py): a session's turns stay on the
replica its rendezvous hash picks, unless it is down or loaded past LLM_AFFINITY_SLACK;
requests without a key keep the least-loaded rule. No network: the choice only."""

from __future__ import annotations

from collections import Counter

import httpx

from app.llm.upstreams import Upstream, UpstreamPool
from app.metrics import Metrics

URLS = [f"http://10.0.0.{i}:8000/v1" for i in range(1, 4)]
SESSIONS = [f"session-{i}" for i in range(300)]


def _pool(slack: int = 4, urls: list[str] = URLS) -> UpstreamPool:
    return UpstreamPool(urls, httpx.AsyncClient(), Metrics(), affinity_slack=slack)


def _first(pool: UpstreamPool, key: str | None) -> Upstream:
    return pool.candidates(key)[0]


def _home(pool: UpstreamPool, key: str) -> Upstream:
    """The key's replica when all are idle and healthy."""
    return _first(pool, key)


def test_a_session_stays_on_one_replica_across_turns() -> None:
    pool = _pool()
    for key in SESSIONS[:20]:
        assert len({_first(pool, key).base_url for _ in range(10)}) == 1


def test_every_gateway_process_picks_the_same_replica() -> None:
    # Two pools stand for two gateway processes (or a restart): no shared state, same answer,
    # whatever the order the replicas are listed in.
    one, two = _pool(), _pool(urls=list(reversed(URLS)))
    for key in SESSIONS:
        assert _first(one, key).base_url == _first(two, key).base_url


def test_sessions_spread_over_the_replicas() -> None:
    pool = _pool()
    counts = Counter(_first(pool, key).base_url for key in SESSIONS)
    assert set(counts) == set(URLS)
    assert all(80 <= n <= 120 for n in counts.values()), counts  # 100 each, give or take


def test_a_down_replica_is_skipped_and_only_its_sessions_move() -> None:
    pool = _pool()
    before = {key: _home(pool, key) for key in SESSIONS}
    down = pool.replicas[0]
    pool.mark_down(down, "test")
    for key, home in before.items():
        now = _first(pool, key)
        assert now is not down
        if home is not down:
            assert now is home  # rendezvous: the others' sessions stay put
    pool.mark_up(down)
    assert all(_first(pool, key) is home for key, home in before.items())


def test_affinity_gives_way_past_the_slack() -> None:
    pool = _pool(slack=4)
    key = SESSIONS[0]
    home = _home(pool, key)
    for _ in range(3):  # 3 more in flight than the least loaded: still its own replica
        pool.acquire(home)
    assert _first(pool, key) is home
    pool.acquire(home)  # 4 more: the least loaded gets the turn
    assert _first(pool, key) is not home
    assert _first(pool, key).outstanding == 0
    pool.release(home)
    assert _first(pool, key) is home


def test_the_slack_counts_from_the_least_loaded_replica() -> None:
    pool = _pool(slack=4)
    key = SESSIONS[0]
    home = _home(pool, key)
    for upstream in pool.replicas:  # everyone busy alike: the home replica is no worse off
        for _ in range(10):
            pool.acquire(upstream)
    assert _first(pool, key) is home


def test_the_other_replicas_follow_for_failover_least_loaded_first() -> None:
    pool = _pool()
    key = SESSIONS[0]
    home = _home(pool, key)
    others = [u for u in pool.replicas if u is not home]
    pool.acquire(others[0])
    candidates = pool.candidates(key)
    assert candidates == [home, others[1], others[0]]  # each once, as without a key


def test_no_key_keeps_the_least_loaded_rule() -> None:
    pool = _pool()
    busy = pool.replicas[0]
    pool.acquire(busy)
    picks = Counter(_first(pool, None).base_url for _ in range(20))
    assert busy.base_url not in picks
    assert len(picks) == 2  # the idle two share them


def test_slack_zero_turns_affinity_off() -> None:
    pool = _pool(slack=0)
    picks = Counter(_first(pool, SESSIONS[0]).base_url for _ in range(30))
    assert set(picks.values()) == {10}  # in turn, as without a key


def test_when_every_replica_is_down_the_key_still_orders_them() -> None:
    pool = _pool()
    for upstream in pool.replicas:
        pool.mark_down(upstream, "test")
    key = SESSIONS[0]
    candidates = pool.candidates(key)
    assert sorted(u.base_url for u in candidates) == sorted(URLS)  # best effort: all tried
    assert len({_first(pool, key).base_url for _ in range(5)}) == 1


def test_each_keyed_choice_is_counted_by_where_it_went() -> None:
    metrics = Metrics()
    pool = UpstreamPool(URLS, httpx.AsyncClient(), metrics, affinity_slack=2)

    def counted(outcome: str) -> float:
        return (
            metrics.registry.get_sample_value(
                "gateway_upstream_affinity_total", {"outcome": outcome}
            )
            or 0.0
        )

    key = SESSIONS[0]
    home = _home(pool, key)
    pool.candidates(None)  # no key (feedback): not an affinity choice
    assert (counted("home"), counted("busy"), counted("moved")) == (1, 0, 0)  # _home's own
    pool.acquire(home)
    pool.acquire(home)
    pool.candidates(key)  # 2 above the least loaded: gives way
    pool.release(home)
    pool.release(home)
    pool.mark_down(home, "test")
    assert _first(pool, key) is not home  # its replica is down: the next of its ranking
    pool.mark_up(home)
    assert _first(pool, key) is home
    assert (counted("home"), counted("busy"), counted("moved")) == (2, 1, 1)
