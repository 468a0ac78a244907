"""Rate limits per user and per client, in memory and shared through a real Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.requests import Request

from app.config import Settings
from app.domain.errors import RateLimited
from app.web.limits import Limits, open_limits, rate_items
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


async def _admitted(limits: Limits, request: Request, session: str, times: int) -> list[bool]:
    return [await limits.admit(request, session) is None for _ in range(times)]


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
    refusal = await limits.admit(relay, "c")  # the client's 5th admitted: its burst is 4
    assert isinstance(refusal, RateLimited) and refusal.retry_after is not None
    assert 1 <= refusal.retry_after <= 20  # refilled within 20 s
    assert await limits.admit(_request("10.0.0.2"), "a") is None  # another client


async def test_an_api_key_is_the_client_whatever_its_address() -> None:
    limits = Limits(_settings(client_rate_limit_burst=2, client_rate_limit_per_minute=2))
    first = await _admitted(limits, _request("10.0.0.1", key="k"), "a", 1)
    second = await _admitted(limits, _request("10.0.0.2", key="k"), "b", 2)
    assert first + second == [True, True, False]


async def test_zero_turns_a_limit_off() -> None:
    limits = Limits(_settings(rate_limit_per_minute=0, client_rate_limit_per_minute=0))
    assert all(await _admitted(limits, _request(), "a", 50))


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


async def test_with_redis_all_gateway_processes_share_the_counters(redis_url: str) -> None:
    settings = _settings(redis_url=redis_url)
    async with open_limits(settings) as one, open_limits(settings) as two:
        request = _request("10.0.0.7")
        assert await _admitted(one, request, "a", 1) == [True]
        assert await _admitted(two, request, "a", 2) == [True, False]  # one bucket for both


async def test_an_unreachable_redis_admits_instead_of_failing(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        port = url.rsplit(":", 1)[1].split("/")[0]
    async with open_limits(_settings(redis_url=f"redis://127.0.0.1:{port}/0")) as limits:
        assert await limits.admit(_request(), "a") is None  # the server is stopped now
