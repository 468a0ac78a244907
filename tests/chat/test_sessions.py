import anyio
import anyio.lowlevel
import pytest

from app.chat.categories import Category
from app.chat.sessions import InMemorySessionStore, Turn, new_session_id

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_unknown_session_is_fresh_and_ids_are_private() -> None:
    store = InMemorySessionStore(max_sessions=10, max_turns=3, ttl_seconds=60)
    state = await store.load("nobody")
    assert state.turns == () and state.category is None
    assert new_session_id() != new_session_id()


async def test_turns_are_bounded_and_fields_kept() -> None:
    store = InMemorySessionStore(max_sessions=10, max_turns=3, ttl_seconds=60)
    await store.record("s", base_category=Category.VEGAN, category=Category.VEGAN, location="산")
    for i in range(5):
        await store.record("s", turn=Turn(f"q{i}", f"a{i}"))
    state = await store.record("s", category=Category.PLOGGING)
    assert [t.user for t in state.turns] == ["q2", "q3", "q4"]
    assert state.base_category is Category.VEGAN and state.category is Category.PLOGGING
    assert state.location == "산"


async def test_least_recently_used_session_is_evicted() -> None:
    store = InMemorySessionStore(max_sessions=2, max_turns=3, ttl_seconds=60)
    await store.record("a", category=Category.VEGAN)
    await store.record("b", category=Category.VEGAN)
    await store.record("a", turn=Turn("q", "a"))
    await store.record("c", category=Category.VEGAN)
    assert len(store) == 2
    assert (await store.load("b")).category is None
    assert (await store.load("a")).category is Category.VEGAN


async def test_expired_session_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    store = InMemorySessionStore(max_sessions=10, max_turns=3, ttl_seconds=5)
    await store.record("s", category=Category.VEGAN)
    import app.chat.sessions as sessions

    real = sessions.time.monotonic
    monkeypatch.setattr(sessions.time, "monotonic", lambda: real() + 10)
    assert (await store.load("s")).category is None
    await store.record("other")
    assert len(store) == 1


async def test_two_tabs_on_one_session_lose_no_turn() -> None:
    store = InMemorySessionStore(max_sessions=10, max_turns=1000, ttl_seconds=60)

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
