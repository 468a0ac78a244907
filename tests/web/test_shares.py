"""One client's share of the generations (``app.web.shares``): held while a generation runs,
given back however it ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import anyio
import pytest

from app.config import Settings
from app.domain.errors import Overloaded, RateLimited
from app.domain.events import Delta, Done, Failed, StreamEvent
from app.web.access import Caller
from app.web.shares import GenerationShares

pytestmark = pytest.mark.anyio

A = Caller("ip:10.0.0.1", "address")
B = Caller("ip:10.0.0.2", "address")


def _shares(**overrides: object) -> GenerationShares:
    base: dict[str, object] = {"max_concurrent_generations": 8, "client_generations_share": 0.5}
    return GenerationShares(Settings(_env_file=None, **(base | overrides)))  # type: ignore[call-arg, arg-type]


async def _answer(gate: anyio.Event | None = None) -> AsyncIterator[StreamEvent]:
    yield Delta("a")
    if gate is not None:
        await gate.wait()
    yield Done({"recommend": "a", "challenges": []})


async def _first(events: AsyncIterator[StreamEvent]) -> StreamEvent:
    return await anext(events)


async def test_a_client_holds_at_most_its_share_and_others_are_served() -> None:
    shares = _shares()
    gate = anyio.Event()
    held = [shares.hold(A, _answer(gate)) for _ in range(4)]
    for events in held:
        assert isinstance(await _first(events), Delta)
    assert shares.held("client:ip:10.0.0.1") == 4
    refused = await _first(shares.hold(A, _answer()))
    assert isinstance(refused, Failed) and isinstance(refused.error, RateLimited)
    assert refused.error.status == 429 and refused.error.data == {"retryAfterSeconds": 2.0}
    other = shares.hold(B, _answer())
    assert isinstance(await _first(other), Delta), "another client is served"
    await other.aclose()  # type: ignore[attr-defined]
    gate.set()
    for events in held:
        assert [e async for e in events][-1].__class__ is Done
    assert shares.held("client:ip:10.0.0.1") == 0


async def test_the_slot_is_given_back_on_every_end() -> None:
    shares = _shares(max_concurrent_generations=2)  # one per client
    pool = "client:ip:10.0.0.1"

    # The reader stops after the terminal event (the stream hub's ``break``): closed.
    async with aclosing(shares.hold(A, _answer())) as events:  # type: ignore[type-var]
        await anext(events)
        assert shares.held(pool) == 1
    assert shares.held(pool) == 0

    # Cancelled mid-generation (the client left, shutdown).
    async def run() -> None:
        async for _ in shares.hold(A, _answer(anyio.Event())):
            pass

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        assert shares.held(pool) == 1
        group.cancel_scope.cancel()
    assert shares.held(pool) == 0

    # The pipeline raised.
    async def broken() -> AsyncIterator[StreamEvent]:
        yield Delta("a")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        async for _ in shares.hold(A, broken()):
            pass
    assert shares.held(pool) == 0

    # Never started (refused while draining): never taken.
    never = shares.hold(A, _answer())
    await never.aclose()  # type: ignore[attr-defined]
    assert shares.held(pool) == 0


async def test_a_relay_key_gets_the_larger_share() -> None:
    shares = _shares(relay_generations_share=0.75)
    relay = Caller("key:abc", "relay")
    held = [shares.hold(relay, _answer(anyio.Event())) for _ in range(6)]  # a client: 4
    for events in held:
        assert isinstance(await _first(events), Delta)
    refused = await _first(shares.hold(relay, _answer()))
    assert isinstance(refused, Failed)
    for events in held:
        await events.aclose()  # type: ignore[attr-defined]
    # A share of 1 is no per-client limit: MAX_CONCURRENT_GENERATIONS (the pipeline's 503) is.
    whole = _shares(client_generations_share=1.0)
    many = [whole.hold(A, _answer(anyio.Event())) for _ in range(20)]
    for events in many:
        assert isinstance(await _first(events), Delta)
    for events in many:
        await events.aclose()  # type: ignore[attr-defined]


async def test_page_visitors_hold_their_own_slots_and_the_page_its_share() -> None:
    shares = _shares(session_max_concurrent=2, page_generations_share=0.5)
    visitors = [Caller(f"page:ip:10.0.0.{n}", "page", visitor=f"{n:032d}") for n in range(3)]
    one = visitors[0]
    held = [shares.hold(one, _answer(anyio.Event())) for _ in range(2)]
    for events in held:
        await _first(events)
    refused = await _first(shares.hold(one, _answer()))
    assert isinstance(refused, Failed) and refused.error.status == 429, "one visitor: 2 at once"
    more = [shares.hold(visitors[1], _answer(anyio.Event())) for _ in range(2)]
    for events in more:
        await _first(events)
    full = await _first(shares.hold(visitors[2], _answer()))
    assert isinstance(full, Failed) and isinstance(full.error, Overloaded)
    assert full.error.status == 503, "the page as a whole holds half"
    keyed = shares.hold(A, _answer())
    assert isinstance(await _first(keyed), Delta), "key holders are served"
    for events in [*held, *more, keyed]:
        await events.aclose()  # type: ignore[attr-defined]
