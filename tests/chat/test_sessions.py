"""In-memory specifics (LRU eviction, expiry by the clock, private ids); the behaviour both
stores share is tested over both in tests/chat/test_redis_sessions.py."""

import pytest

from app.chat.sessions import InMemorySessionStore, Turn, new_session_id
from app.domain.categories import Category

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_unknown_session_is_fresh_and_ids_are_private() -> None:
    store = InMemorySessionStore(max_sessions=10, max_turns=3, ttl_seconds=60)
    state = await store.load("nobody")
    assert state.turns == () and state.category is None
    assert new_session_id() != new_session_id()


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


def test_among_points_into_the_list_a_choice_among_it_came_from() -> None:
    from app.chat.sessions import SessionState

    def turn(*shown: str) -> Turn:
        return Turn("?", "{}", Category.VEGAN, shown)

    listed = turn("a", "b", "c")
    chosen = turn("b")  # "그 중에 돈 안 드는 거"
    state = SessionState("s", turns=(listed, chosen))
    assert state.last_shown == ("b",)  # "이거 어떻게 해?": the answer just shown
    assert state.last_list == ("a", "b", "c")  # "그 중에 …" again: the list
    fresh = SessionState("s", turns=(listed, chosen, turn("d", "e")))
    assert fresh.last_list == ("d", "e")  # new ones shown since: those
    assert SessionState("s").last_list == ()
