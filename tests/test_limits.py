"""Rate limits per user and per client, in memory and shared through a real Redis; the
caller each request is counted as (``app.web.access``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from starlette.requests import Request

from app.config import Settings
from app.domain.errors import RateLimited, Unauthorized
from app.llm.usage import TokenUsage
from app.redis_client import RedisConnector, redis_connector
from app.web.access import Access, Caller
from app.web.admission import Admission
from app.web.limits import Limits, Reservation, open_limits, rate_items
from tests.support.budget import cancel_mid_turn
from tests.support.redis_server import redis_server

pytestmark = pytest.mark.anyio


def _request(client: str = "10.0.0.1", key: str | None = None) -> Request:
    headers = [(b"x-api-key", key.encode())] if key else []
    return Request({"type": "http", "headers": headers, "client": (client, 1234)})


def _settings(**overrides: object) -> Settings:
    base: dict[str, object] = {
        "rate_limit_per_minute": 6,
        "rate_limit_burst": 2,
        "client_rate_limit_per_minute": 12,
        "client_rate_limit_burst": 4,
    }
    return Settings(**(base | overrides))  # type: ignore[arg-type]


def _caller(request: Request, settings: Settings | None = None) -> Caller:
    caller = Access(settings or _settings()).identify(request)
    assert isinstance(caller, Caller), caller
    return caller


async def _admitted(
    limits: Limits, request: Request, session: str, times: int, settings: Settings | None = None
) -> list[bool]:
    caller = _caller(request, settings)
    return [await limits.admit(caller, session) is None for _ in range(times)]


def test_a_bucket_is_kept_as_its_burst_and_its_rate() -> None:
    burst, rate = rate_items(60, 20)
    assert (burst.amount, burst.get_expiry()) == (20, 20)  # 20 at once, refilled in 20 s
    assert (rate.amount, rate.get_expiry()) == (60, 60)
    assert rate_items(0, 20) == []


async def test_users_of_one_client_count_apart_and_the_client_as_a_whole() -> None:
    limits = Limits(_settings())
    relay = _request()
    assert await _admitted(limits, relay, "a", 3) == [True, True, False]
    assert await _admitted(limits, relay, "b", 3) == [True, True, False]
    refusal = await limits.admit(_caller(relay), "c")  # the client's 5th admitted: its burst is 4
    assert isinstance(refusal, RateLimited) and refusal.retry_after is not None
    assert 1 <= refusal.retry_after <= 20  # refilled within 20 s
    assert await limits.admit(_caller(_request("10.0.0.2")), "a") is None  # another client


async def test_an_api_key_is_the_client_whatever_its_address() -> None:
    settings = _settings(client_rate_limit_burst=2, client_rate_limit_per_minute=2, api_keys="k")
    limits = Limits(settings)
    first = await _admitted(limits, _request("10.0.0.1", key="k"), "a", 1, settings)
    second = await _admitted(limits, _request("10.0.0.2", key="k"), "b", 2, settings)
    assert first + second == [True, True, False]


async def test_without_api_keys_a_made_up_key_is_no_new_client() -> None:
    # Finding 2: each new X-API-Key value used to be a client with fresh buckets.
    limits = Limits(_settings(client_rate_limit_burst=3, client_rate_limit_per_minute=3))
    admitted = [
        await limits.admit(_caller(_request("10.0.0.1", key=f"made-up-{n}")), f"s{n}") is None
        for n in range(5)
    ]
    assert admitted == [True, True, True, False, False]


def test_with_api_keys_an_unknown_key_is_refused_before_any_bucket() -> None:
    access = Access(_settings(api_keys="k"))
    assert isinstance(access.identify(_request(key="guess")), Unauthorized)
    assert isinstance(access.identify(_request()), Unauthorized)
    forged = Request(
        {
            "type": "http",
            "client": ("10.0.0.1", 1),
            "headers": [(b"sec-fetch-site", b"same-origin"), (b"origin", b"http://a.example")],
        }
    )
    assert isinstance(access.identify(forged), Unauthorized), "no header stands in for a key"


async def test_the_identities_kept_are_bounded_the_oldest_forgotten_first() -> None:
    limits = Limits(_settings(rate_limit_max_identities=100))
    for n in range(300):
        await limits.admit(_caller(_request(f"10.0.{n // 250}.{n % 250}")), "s")
    assert limits.tracked == 100

    async def admitted(address: str) -> list[bool]:  # each its own user: the client's burst
        caller = _caller(_request(address))
        return [await limits.admit(caller, f"t{n}") is None for n in range(5)]

    # The most recent client is still counted (1 of its burst of 4 used); the oldest was
    # forgotten, its counters cleared: it starts again.
    assert await admitted("10.0.1.49") == [True, True, True, False, False]
    assert await admitted("10.0.0.0") == [True, True, True, True, False]


async def test_zero_turns_a_limit_off() -> None:
    limits = Limits(_settings(rate_limit_per_minute=0, client_rate_limit_per_minute=0))
    assert all(await _admitted(limits, _request(), "a", 50))


def _redis(settings: Settings) -> RedisConnector | None:
    return redis_connector(settings.redis_url)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


async def test_with_redis_all_gateway_processes_share_the_counters(redis_url: str) -> None:
    settings = _settings(redis_url=redis_url)
    async with (
        open_limits(settings, _redis(settings)) as one,
        open_limits(settings, _redis(settings)) as two,
    ):
        request = _request("10.0.0.7")
        assert await _admitted(one, request, "a", 1) == [True]
        assert await _admitted(two, request, "a", 2) == [True, False]  # one bucket for both


async def test_an_unreachable_redis_admits_instead_of_failing(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        port = url.rsplit(":", 1)[1].split("/")[0]
    settings = _settings(redis_url=f"redis://127.0.0.1:{port}/0")
    async with open_limits(settings, _redis(settings)) as limits:
        caller = _caller(_request())
        assert await limits.admit(caller, "a") is None  # the server is stopped now


async def test_with_redis_the_counters_kept_are_bounded_too(redis_url: str) -> None:
    from redis.asyncio import Redis

    settings = _settings(redis_url=redis_url, rate_limit_max_identities=100)
    async with open_limits(settings, _redis(settings)) as limits:
        for n in range(300):
            await limits.admit(_caller(_request(f"10.9.{n // 250}.{n % 250}")), "s")
    client = Redis.from_url(redis_url)
    try:
        keys = [key async for key in client.scan_iter(match="*10.9.*")]
    finally:
        await client.aclose()
    # Two windows (burst and minute) per user and per client tracked, no more.
    assert 0 < len(keys) <= 2 * 100, len(keys)


async def test_with_redis_a_keys_token_budget_is_shared_by_every_process(redis_url: str) -> None:
    settings = _settings(redis_url=redis_url, api_keys=["relay:k-1"], key_token_budget=500)
    key = _caller(_request(key="k-1"), settings)
    spent = TokenUsage()
    spent.read({"prompt_tokens": 400, "completion_tokens": 200})
    async with (
        open_limits(settings, _redis(settings)) as one,
        open_limits(settings, _redis(settings)) as two,
    ):
        assert await two.budget_left(key) is None
        await one.spend(key, spent)  # 600 of 500, spent through the first process
        refusal = await two.budget_left(key)  # refused by the second
        assert isinstance(refusal, RateLimited)
        until_midnight = 86_400 - time.time() % 86_400  # a day's window ends at midnight UTC
        assert abs(refusal.retry_after - until_midnight) <= 2
        address = _caller(_request("10.0.0.9"), settings.model_copy(update={"api_keys": []}))
        assert await two.budget_left(address) is None  # no key, no budget


def _spent(tokens: int) -> TokenUsage:
    usage = TokenUsage()
    usage.read({"prompt_tokens": tokens - tokens // 4, "completion_tokens": tokens // 4})
    return usage


async def test_with_redis_turns_at_once_on_two_processes_pass_the_budget_by_one_reservation(
    redis_url: str,
) -> None:
    """Issue 31: 12 turns of one key at once, on two gateway processes, each reserving 400
    against a budget of 1,000: three are admitted (the last one from 800), the rest refused
    and their reservations taken back; settling replaces the reservations with the spend."""
    settings = _settings(redis_url=redis_url, api_keys=["relay:k-2"], key_token_budget=1_000)
    key = _caller(_request(key="k-2"), settings)
    async with (
        open_limits(settings, _redis(settings)) as one,
        open_limits(settings, _redis(settings)) as two,
    ):
        results: list[Reservation | RateLimited | None] = []

        async def reserve(limits: Limits) -> None:
            results.append(await limits.reserve(key, 400))

        async with anyio.create_task_group() as group:
            for n in range(12):
                group.start_soon(reserve, (one, two)[n % 2])
        held = [r for r in results if isinstance(r, Reservation)]
        assert len(held) == 3, results
        assert sum(isinstance(r, RateLimited) for r in results) == 9
        assert await two.counted(key) == 1_200
        for n, reservation in enumerate(held):
            await (one, two)[n % 2].settle(key, reservation, _spent(350))
        assert await one.counted(key) == 1_050  # past 1,000 by less than one reservation


async def test_with_redis_a_cancelled_turn_settles_what_it_spent(redis_url: str) -> None:
    """The client left mid-answer: the turn is cancelled, and its reservation is still
    replaced by what it spent (a store that answers over the network: the settling is
    shielded from the cancellation)."""
    settings = _settings(redis_url=redis_url, api_keys=["relay:k-3"], key_token_budget=10_000)
    key = _caller(_request(key="k-3"), settings)
    async with open_limits(settings, _redis(settings)) as limits:
        admission = Admission(settings, access=Access(settings), limits=limits)
        await cancel_mid_turn(admission, limits, key)
        assert await limits.counted(key) == 300
