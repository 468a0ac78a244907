"""The Redis session store against a real redis-server that this module starts.

The behavioural tests run on both stores (in memory and Redis) so that they stay
interchangeable; the rest covers what only Redis has: several client connections (several
gateway processes) on one session, expiry held by Redis itself, and the client's lifecycle.
redis-server comes from Debian (scripts/install_redis.sh); without it these tests fail.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from redis.asyncio import Redis

from app.chat.redis_sessions import RedisSessionStore
from app.chat.sessions import InMemorySessionStore, SessionStore, Turn
from app.domain.categories import Category
from app.redis_client import CHAT, RedisConnector
from tests.support.gateway import GatewayProcess
from tests.support.redis_server import redis_server
from tests.support.sse import read_stream
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

pytestmark = pytest.mark.anyio


def _client(url: str) -> Redis:
    return RedisConnector(url).client(CHAT)


MakeStore = Callable[..., Awaitable[SessionStore]]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


class _Stores:
    """Redis stores on one test's own key prefix, each with its own client; closed together."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.prefix = f"test:{uuid.uuid4().hex}:"
        self.made: list[RedisSessionStore] = []

    def __call__(
        self, *, max_turns: int = 3, ttl_seconds: float = 60, **client: Any
    ) -> RedisSessionStore:
        # redis-py waits 5 s for a reply by default; a loaded CI machine (vLLM loading in the
        # other test worker) has taken longer, and these tests are about order, not deadlines.
        client.setdefault("socket_timeout", 30.0)
        redis = Redis.from_url(self.url, **client)
        store = RedisSessionStore(
            redis, max_turns=max_turns, ttl_seconds=ttl_seconds, prefix=self.prefix
        )
        self.made.append(store)
        return store

    async def close(self) -> None:
        for store in self.made:
            await store.close()


@pytest.fixture
async def make_redis(redis_url: str) -> AsyncIterator[_Stores]:
    stores = _Stores(redis_url)
    try:
        yield stores
    finally:
        await stores.close()


@pytest.fixture(params=["memory", "redis"])
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[MakeStore]:
    """Either store, with the same knobs, for the behaviour both must share."""
    redis_stores = (
        _Stores(request.getfixturevalue("redis_url")) if request.param == "redis" else None
    )

    async def make(*, max_turns: int = 3, ttl_seconds: float = 60) -> SessionStore:
        if redis_stores is None:
            return InMemorySessionStore(
                max_sessions=1000, max_turns=max_turns, ttl_seconds=ttl_seconds
            )
        return redis_stores(max_turns=max_turns, ttl_seconds=ttl_seconds)

    try:
        yield make
    finally:
        if redis_stores is not None:
            await redis_stores.close()


# --- the behaviour both stores share ------------------------------------------------------


async def test_unknown_session_is_fresh(make_store: MakeStore) -> None:
    store = await make_store()
    state = await store.load("nobody")
    assert state.session_id == "nobody"
    assert state.turns == () and state.category is None and state.base_category is None
    assert state.location is None and state.work_type is None


async def test_turns_are_bounded_and_fields_kept(make_store: MakeStore) -> None:
    store = await make_store(max_turns=3)
    await store.record("s", base_category=Category.VEGAN, category=Category.VEGAN, location="산")
    for i in range(5):
        await store.record("s", turn=Turn(f"q{i}", f"a{i}"))
    state = await store.record("s", category=Category.PLOGGING, work_type="재택근무")
    assert [t.user for t in state.turns] == ["q2", "q3", "q4"]
    assert [t.assistant for t in state.turns] == ["a2", "a3", "a4"]
    assert state.base_category is Category.VEGAN and state.category is Category.PLOGGING
    assert state.location == "산" and state.work_type == "재택근무"
    loaded = await store.load("s")
    assert (loaded.turns, loaded.category, loaded.location) == (
        state.turns,
        state.category,
        state.location,
    )
    assert (await store.load("other")).turns == ()  # sessions do not leak into each other


async def test_record_returns_what_load_reads(make_store: MakeStore) -> None:
    store = await make_store(max_turns=5)
    recorded = await store.record("s", turn=Turn('안녕 "따옴표" \\ /', "답\n줄바꿈 😀"))
    loaded = await store.load("s")
    assert loaded.turns == recorded.turns == (Turn('안녕 "따옴표" \\ /', "답\n줄바꿈 😀"),)
    assert abs(loaded.updated_at - recorded.updated_at) < 1


async def test_a_turn_keeps_the_exchange_to_replay(make_store: MakeStore) -> None:
    store = await make_store(max_turns=5)
    turn = Turn(
        "q", "a", Category.VEGAN, ("d1",), asked="상황: …\n후보: …", reply='{"c": 1}', replayed=2
    )
    await store.record("s", turn=turn)
    assert (await store.load("s")).turns == (turn,)


async def test_a_turn_keeps_its_constraints_and_the_situation_told(make_store: MakeStore) -> None:
    store = await make_store(max_turns=5)
    turn = Turn(
        "돈 안 드는 거",
        "a",
        Category.VEGAN,
        ("d1",),
        constraints=("free", "home"),
        told=("at:바닷가",),
    )
    await store.record("s", turn=turn)
    state = await store.load("s")
    assert state.turns == (turn,)
    assert state.constraints == ("free", "home") and state.told == ("at:바닷가",)


async def test_a_turn_keeps_its_category_and_older_turns_read_without_one(
    redis_url: str, make_redis: _Stores
) -> None:
    store = make_redis(max_turns=5)
    await store.record("s", turn=Turn("q1", "a1", Category.VEGAN))
    _meta, turns = store._keys("s")
    raw = Redis.from_url(redis_url)
    try:  # as an older release wrote it, and with a code this release does not know
        await raw.rpush(turns, '["q0", "a0"]', '["q2", "a2", "RETIRED_CATEGORY"]')
    finally:
        await raw.aclose()
    state = await store.load("s")
    assert state.turns == (
        Turn("q1", "a1", Category.VEGAN),
        Turn("q0", "a0", None),
        Turn("q2", "a2", None),
    )


async def test_no_turns_kept_when_max_turns_is_zero(make_store: MakeStore) -> None:
    store = await make_store(max_turns=0)
    state = await store.record("s", turn=Turn("q", "a"), category=Category.MEDIA)
    assert state.turns == () and state.category is Category.MEDIA


async def test_expired_session_starts_over_and_use_extends_it(make_store: MakeStore) -> None:
    store = await make_store(ttl_seconds=0.4)
    await store.record("s", category=Category.VEGAN, turn=Turn("q", "a"))
    await anyio.sleep(0.2)
    await store.record("s", turn=Turn("q2", "a2"))  # last use: the TTL starts again
    await anyio.sleep(0.25)
    assert (await store.load("s")).category is Category.VEGAN  # 0.45 s since the first use
    await anyio.sleep(0.6)
    state = await store.load("s")
    assert state.category is None and state.turns == ()
    state = await store.record("s", turn=Turn("q3", "a3"))
    assert [t.user for t in state.turns] == ["q3"]  # nothing from before the expiry


async def test_two_tabs_on_one_session_lose_no_turn(make_store: MakeStore) -> None:
    store = await make_store(max_turns=1000)

    async def tab(name: str) -> None:
        for i in range(200):
            await store.record("shared", turn=Turn(f"{name}{i}", "a"))
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(tab, "left")
        tg.start_soon(tab, "right")
    users = [t.user for t in (await store.load("shared")).turns]
    assert len(users) == 400
    assert [u for u in users if u.startswith("left")] == [f"left{i}" for i in range(200)]
    assert [u for u in users if u.startswith("right")] == [f"right{i}" for i in range(200)]


# --- Redis only -----------------------------------------------------------------------------


async def test_two_processes_on_one_session_lose_no_turn(
    make_redis: _Stores,
) -> None:
    # Two clients with their own connection pools: two gateway processes, as Redis sees them.
    stores = [make_redis(max_turns=1000), make_redis(max_turns=1000)]
    first_fields = [Category.VEGAN, Category.PLOGGING]

    async def gateway(n: int) -> None:
        store = stores[n]
        for i in range(200):
            await store.record(
                "shared", turn=Turn(f"p{n}-{i}", "a"), category=first_fields[n] if i == 0 else None
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(gateway, 0)
        tg.start_soon(gateway, 1)
    for store in stores:
        users = [t.user for t in (await store.load("shared")).turns]
        assert len(users) == 400
        for n in range(2):
            assert [u for u in users if u.startswith(f"p{n}-")] == [f"p{n}-{i}" for i in range(200)]


async def test_a_session_written_by_one_process_is_read_by_another(
    make_redis: _Stores,
) -> None:
    writer, reader = make_redis(), make_redis(decode_responses=True)
    await writer.record("s", base_category=Category.UPCYCLING, location="바닷가")
    state = await reader.record("s", turn=Turn("질문", "답변"), category=Category.ENERGY_SAVING)
    assert state.base_category is Category.UPCYCLING and state.location == "바닷가"
    state = await writer.load("s")
    assert state.category is Category.ENERGY_SAVING and state.turns == (Turn("질문", "답변"),)


async def test_redis_expires_the_keys(redis_url: str) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    store = RedisSessionStore(_client(redis_url), max_turns=3, ttl_seconds=0.3, prefix=prefix)
    raw = Redis.from_url(redis_url)
    try:
        await store.record("s", turn=Turn("q", "a"), category=Category.VEGAN)
        keys = sorted(await raw.keys(f"{prefix}*"))
        assert keys == [f"{prefix}{{s}}:meta".encode(), f"{prefix}{{s}}:turns".encode()]
        for key in keys:
            assert 0 < await raw.pttl(key) <= 300
        assert await raw.hget(keys[0], "category") == b"VEGAN"  # the code, not the label
        await anyio.sleep(0.5)
        assert await raw.keys(f"{prefix}*") == []  # gone from Redis, not just hidden
        assert (await store.load("s")).category is None
    finally:
        await store.close()
        await raw.aclose()


async def test_load_does_not_extend_expiry(make_redis: _Stores) -> None:
    store = make_redis(ttl_seconds=0.4)
    await store.record("s", category=Category.VEGAN)
    for _ in range(3):
        await anyio.sleep(0.15)
        await store.load("s")
    assert (await store.load("s")).category is None


async def test_unknown_stored_values_are_ignored(redis_url: str, make_redis: _Stores) -> None:
    store = make_redis(max_turns=5)
    await store.record("s", turn=Turn("q", "a"), category=Category.VEGAN)
    meta, turns = store._keys("s")
    raw = Redis.from_url(redis_url)
    try:
        await raw.hset(meta, "category", "RETIRED_CATEGORY")
        await raw.rpush(turns, "not json", '["only one"]', "[1, 2]")
    finally:
        await raw.aclose()
    state = await store.load("s")
    assert state.category is None and state.turns == (Turn("q", "a"),)


async def test_ping_and_close(redis_url: str) -> None:
    store = RedisSessionStore(_client(redis_url), max_turns=3, ttl_seconds=60)
    assert await store.ping()
    await store.close()


async def test_bad_settings_are_refused(redis_url: str) -> None:
    with pytest.raises(ValueError, match="ttl_seconds"):
        RedisSessionStore(_client(redis_url), max_turns=3, ttl_seconds=0)


async def test_the_redis_store_is_a_session_store(redis_url: str) -> None:
    store: SessionStore = RedisSessionStore(_client(redis_url), max_turns=1, ttl_seconds=1)
    assert isinstance(store, RedisSessionStore)
    await store.close()


async def test_two_gateways_share_one_conversation_through_redis(
    redis_url: str,
    upstream: ScriptedUpstreamThread,
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """base-info on gateway A, then "처음 카테고리로" on gateway B: B knows A's choice."""
    upstream.set_scenario("ok")

    def env() -> dict[str, str]:
        store = store_copy(store_template, tmp_path_factory.mktemp("store") / "q")
        return {
            "LLM_BASE_URL": upstream.base_url,
            "REDIS_URL": redis_url,
            "QDRANT_PATH": str(store),
        }

    with GatewayProcess(env()) as first, GatewayProcess(env()) as second:
        async with httpx.AsyncClient(timeout=30) as http:
            params = {"sessionId": "shared-1", "location": "산", "workType": "현장직"}
            base = await read_stream(
                http,
                f"{first.url}/ai/chatbot/recommendation/base-info",
                {**params, "category": "UPCYCLING"},
            )
            assert base.terminal.event == "close"
            back = await read_stream(
                http,
                f"{second.url}/ai/chatbot/recommendation/free-text",
                {"sessionId": "shared-1", "message": "처음 카테고리로"},
            )
    assert {c["category"] for c in back.terminal.payload["data"]["challenges"]} == {"UPCYCLING"}
    messages = upstream.chat_requests[-1]["body"]["messages"]
    assert any(m["role"] == "assistant" for m in messages), "A's turn is in B's prompt"
