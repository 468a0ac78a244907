"""Admission's generation slots (``app.web.admission``): everyone's, a client's share, the
page's share, a session's; taken once a turn is planned, given back however the turn ends."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, aclosing
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from limits.aio.storage import MemoryStorage

from app.chat.generation import Generator
from app.chat.plan import BaseInfoTurn, Reply
from app.chat.turn import RecommendationService
from app.config import Settings
from app.domain.categories import Category
from app.domain.errors import Overloaded, RateLimited, Refused
from app.domain.events import Delta, Done, Failed, StreamEvent
from app.llm.usage import TokenUsage
from app.web.access import Access, Caller
from app.web.admission import Admission
from app.web.limits import Limits
from tests.support.budget import cancel_mid_turn

pytestmark = pytest.mark.anyio

A = Caller("ip:10.0.0.1", "address")
B = Caller("ip:10.0.0.2", "address")


def _admission(clock: Callable[[], float] = time.time, **overrides: object) -> Admission:
    base: dict[str, object] = {
        "max_concurrent_generations": 8,
        "client_generations_share": 0.5,
        "session_max_concurrent": 2,
    }
    settings = Settings(_env_file=None, **(base | overrides))  # type: ignore[call-arg, arg-type]
    return Admission(settings, access=Access(settings), limits=Limits(settings, clock=clock))


async def _refusal(admission: Admission, caller: Caller, session: str) -> Refused:
    with pytest.raises(Refused) as refused:
        async with admission.gate(caller, session).hold(TokenUsage()):
            pass
    return refused.value


async def test_a_client_holds_at_most_its_share_and_others_are_served() -> None:
    admission = _admission()
    async with AsyncExitStack() as held:
        for n in range(4):
            await held.enter_async_context(admission.gate(A, f"s{n}").hold(TokenUsage()))
        assert admission.held("client:ip:10.0.0.1") == 4
        refused = (await _refusal(admission, A, "s9")).error
        assert isinstance(refused, RateLimited)
        assert refused.status == 429 and refused.data == {"retryAfterSeconds": 2.0}
        with pytest.raises(Refused):
            admission.gate(A, "s9").check()  # a look, taking nothing
        async with admission.gate(B, "s0").hold(TokenUsage()):
            assert admission.held("all") == 5, "another client is served"
    assert admission.held("client:ip:10.0.0.1") == 0 and admission.held("all") == 0


async def test_everyone_together_holds_max_concurrent_generations() -> None:
    admission = _admission(client_generations_share=1.0)  # no share of its own: the 503 speaks
    async with AsyncExitStack() as held:
        for n in range(8):
            await held.enter_async_context(admission.gate(A, f"s{n}").hold(TokenUsage()))
        refused = (await _refusal(admission, B, "s0")).error
        assert type(refused) is Overloaded and refused.status == 503


async def test_a_session_holds_session_max_concurrent() -> None:
    admission = _admission()
    async with AsyncExitStack() as held:
        for _ in range(2):
            await held.enter_async_context(admission.gate(A, "s").hold(TokenUsage()))
        refused = (await _refusal(admission, A, "s")).error
        assert isinstance(refused, RateLimited) and "이전 답변" in refused.message
        async with admission.gate(B, "s").hold(TokenUsage()):
            pass  # the same session id from another client is another session


async def test_a_relay_key_gets_the_larger_share() -> None:
    admission = _admission(relay_generations_share=0.75)
    relay = Caller("key:abc", "relay")
    async with AsyncExitStack() as held:
        for n in range(6):  # a client: 4
            await held.enter_async_context(admission.gate(relay, f"s{n}").hold(TokenUsage()))
        await _refusal(admission, relay, "s9")


async def test_page_visitors_hold_their_own_slots_and_the_page_its_share() -> None:
    admission = _admission(page_generations_share=0.5)
    visitors = [Caller(f"page:ip:10.0.0.{n}", "page", visitor=f"{n:032d}") for n in range(3)]
    async with AsyncExitStack() as held:
        for n in range(2):
            await held.enter_async_context(admission.gate(visitors[0], f"s{n}").hold(TokenUsage()))
        one = (await _refusal(admission, visitors[0], "s9")).error
        assert one.status == 429, "one visitor: SESSION_MAX_CONCURRENT at once, any session"
        for n in range(2):
            await held.enter_async_context(admission.gate(visitors[1], f"s{n}").hold(TokenUsage()))
        full = (await _refusal(admission, visitors[2], "s0")).error
        assert isinstance(full, Overloaded) and full.status == 503, "the page holds half"
        async with admission.gate(A, "s0").hold(TokenUsage()):
            pass  # key holders and addresses are served


# ---------------------------------------------------------------------------- through a turn
class _Planner:
    def __init__(self, reply: Reply | None = None) -> None:
        self.planned = 0
        self.reply = reply

    async def base_info(self, turn: Any) -> Any:
        self.planned += 1
        return self.reply or SimpleNamespace(
            endpoint="base-info", client="anonymous", needs_model=True
        )


class _Generator:
    def __init__(
        self, gate: anyio.Event | None = None, *, fail: bool = False, reserves: int = 0
    ) -> None:
        self.gate = gate
        self.fail = fail
        self.reserves = reserves

    def reservation(self, plan: Any) -> int:
        return self.reserves

    async def run(self, plan: Any, usage: TokenUsage) -> AsyncIterator[StreamEvent]:
        yield Delta("a")
        if self.fail:
            raise RuntimeError("boom")
        if self.gate is not None:
            await self.gate.wait()
        yield Done({"recommend": "a", "challenges": []})


def _turn(admission: Admission, generator: _Generator, planner: _Planner | None = None) -> Any:
    service = RecommendationService(planner or _Planner(), generator)  # type: ignore[arg-type]
    turn = BaseInfoTurn("s", None, 0.0, "산", "사무직", Category.VEGAN)
    return service.base_info(turn, admission.gate(A, "s"))


async def test_the_slot_is_held_while_the_answer_generates_and_given_back_on_every_end() -> None:
    admission = _admission(max_concurrent_generations=2)  # one per client
    pool = "client:ip:10.0.0.1"

    # The reader stops after the first event (the stream hub's ``break`` on a terminal one).
    async with aclosing(_turn(admission, _Generator())) as events:
        assert isinstance(await anext(events), Delta)
        assert admission.held(pool) == 1
    assert admission.held(pool) == 0

    # Cancelled mid-generation (the client left, shutdown).
    async def run() -> None:
        async for _ in _turn(admission, _Generator(anyio.Event())):
            pass

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        assert admission.held(pool) == 1
        group.cancel_scope.cancel()
    assert admission.held(pool) == 0

    # The generation raised.
    with pytest.raises(RuntimeError):
        async for _ in _turn(admission, _Generator(fail=True)):
            pass
    assert admission.held(pool) == 0

    # Never started (refused while draining): never planned, never taken.
    planner = _Planner()
    never = _turn(admission, _Generator(), planner)
    await never.aclose()
    assert admission.held(pool) == 0 and planner.planned == 0


async def test_a_full_pool_refuses_before_planning_and_a_reply_takes_no_slot() -> None:
    admission = _admission(max_concurrent_generations=2)
    planner = _Planner()
    async with admission.gate(A, "other").hold(TokenUsage()):
        events = [e async for e in _turn(admission, _Generator(), planner)]
    assert len(events) == 1 and isinstance(events[0], Failed) and events[0].error.status == 429
    assert planner.planned == 0, "a refusal costs no embedding"

    # An off-topic reply needs no model: it takes no slot.
    reply = Reply((Delta("hi"), Done({"recommend": "hi", "challenges": []})))
    held_during: list[int] = []
    async for event in _turn(admission, _Generator(), _Planner(reply)):
        held_during.append(admission.held("all"))
        assert not isinstance(event, Failed)
    assert held_during == [0, 0]


def _spent(tokens: int) -> TokenUsage:
    usage = TokenUsage()
    usage.read({"prompt_tokens": tokens - tokens // 4, "completion_tokens": tokens // 4})
    return usage


async def test_a_key_that_spent_its_token_budget_is_refused_until_its_window_ends() -> None:
    now = 7 * 3_600 + 100.0  # 100 s into a window of the clock's hours
    admission = _admission(lambda: now, key_token_budget=1_000, key_token_budget_seconds=3_600)
    key, other = Caller("key:aaaa", "key"), Caller("key:bbbb", "relay")
    await admission.budget(key)  # nothing spent yet
    async with admission.gate(key, "s").hold(_spent(600)):
        pass
    await admission.budget(key)  # 600 of 1,000: still admitted
    async with admission.gate(key, "s").hold(_spent(600)):
        pass  # the last turn may pass the budget by its own size
    with pytest.raises(Refused) as refused:
        await admission.budget(key)
    error = refused.value.error
    assert isinstance(error, RateLimited) and error.status == 429
    assert error.retry_after == 3_500  # the window's end
    now += 3_500
    await admission.budget(key)  # the next window: a new budget
    await admission.budget(other)  # every key its own budget
    await admission.budget(A)  # a caller without a key has none (its rates bound it)


async def test_no_budget_by_default_and_a_cancelled_turn_counts_what_it_spent() -> None:
    unbudgeted = _admission()
    key = Caller("key:aaaa", "key")
    async with unbudgeted.gate(key, "s").hold(_spent(10**9)):
        pass
    await unbudgeted.budget(key)
    admission = _admission(key_token_budget=100)
    with pytest.raises(RuntimeError):  # the turn ended by an error after spending
        async with admission.gate(key, "s").hold(_spent(150)):
            raise RuntimeError("client left")
    with pytest.raises(Refused):
        await admission.budget(key)


async def _turns_at_once(
    admission: Admission, caller: Caller, turns: int, *, reserves: int, spends: int
) -> int:
    """``turns`` turns of ``caller`` sent at once, each reserving ``reserves`` tokens and
    spending ``spends``; they all end together. How many were admitted."""
    admitted = 0
    end = anyio.Event()

    async def turn(n: int) -> None:
        nonlocal admitted
        try:
            async with admission.gate(caller, f"s{n}").hold(_spent(spends), reserves):
                admitted += 1
                await end.wait()
        except Refused as refused:
            assert refused.error.status == 429

    async with anyio.create_task_group() as group:
        for n in range(turns):
            group.start_soon(turn, n)
        await anyio.wait_all_tasks_blocked()
        end.set()
    return admitted


def _many(**overrides: object) -> Admission:
    """Room for every turn of one key at once: only the budget refuses."""
    return _admission(max_concurrent_generations=64, client_generations_share=1.0, **overrides)


async def test_turns_sent_at_once_pass_a_keys_budget_by_at_most_one_reservation() -> None:
    """Issue 31: a budget of 300 and 12 turns at once admitted all 12 (about 5,000 tokens).
    Each reserves its most at admission: one is admitted, and the key's count passes the
    budget by less than one reservation."""
    key = Caller("key:aaaa", "key")
    admission = _many(key_token_budget=300)
    assert await _turns_at_once(admission, key, 12, reserves=1_500, spends=1_200) == 1
    assert await admission.limits.counted(key) == 1_200  # the reservation replaced by the spend
    assert await _turns_at_once(admission, key, 12, reserves=1_500, spends=1_200) == 0

    admission = _many(key_token_budget=1_000)
    assert await _turns_at_once(admission, key, 12, reserves=400, spends=350) == 3
    spent = await admission.limits.counted(key)
    assert spent == 3 * 350 and spent < 1_000 + 400


async def test_a_reservation_is_held_while_the_turn_runs_and_given_back_when_it_ends() -> None:
    key = Caller("key:aaaa", "key")
    admission = _many(key_token_budget=1_000)
    limits = admission.limits
    async with admission.gate(key, "a").hold(_spent(100), 900):
        assert await limits.counted(key) == 900
        with pytest.raises(Refused):  # 900 reserved, 600 more asked: still under, admitted...
            async with admission.gate(key, "b").hold(_spent(0), 600):
                async with admission.gate(key, "c").hold(_spent(0), 1):
                    pass  # ...and now the count stands past the budget: refused
        assert await limits.counted(key) == 900, "the refused reservation was taken back"
    assert await limits.counted(key) == 100, "what it spent replaced what it reserved"
    async with admission.gate(key, "d").hold(_spent(50), 800):
        pass
    assert await limits.counted(key) == 150


async def test_a_turn_reserves_what_its_generator_may_spend() -> None:
    key = Caller("key:aaaa", "key")
    admission = _many(key_token_budget=1_000)
    service = RecommendationService(_Planner(), _Generator(reserves=700))  # type: ignore[arg-type]
    turn = BaseInfoTurn("s", None, 0.0, "산", "사무직", Category.VEGAN)
    async with aclosing(service.base_info(turn, admission.gate(key, "s"))) as events:
        assert isinstance(await anext(events), Delta)
        assert await admission.limits.counted(key) == 700
    assert await admission.limits.counted(key) == 0  # the fake spent nothing


class _SlowStorage(MemoryStorage):
    """A store that answers late, as one over the network does under load."""

    async def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        await anyio.sleep(0.01)
        return await super().incr(key, expiry, amount)


async def test_a_cancelled_turn_settles_what_it_spent_even_when_its_store_answers_late() -> None:
    """The client left mid-answer (the stream hub cancels the generation): the reservation
    is still replaced by what the turn spent, not lost with the cancellation."""
    settings = Settings(_env_file=None, key_token_budget=10_000)  # type: ignore[call-arg]
    limits = Limits(settings, _SlowStorage())
    admission = Admission(settings, access=Access(settings), limits=limits)
    key = Caller("key:aaaa", "key")
    await cancel_mid_turn(admission, limits, key)
    assert await limits.counted(key) == 300


def test_a_turns_reservation_is_its_prompts_bytes_and_max_tokens() -> None:
    """An upper bound of what vLLM can count for the request: a token covers at least one
    byte of the prompt, the chat template adds a few per message, the output is max_tokens."""
    plan: Any = SimpleNamespace(
        messages=({"role": "system", "content": "가" * 100}, {"role": "user", "content": "hi"}),
        composition="descriptions",
    )
    generator = Generator(llm=None, sessions=None, metrics=None)  # type: ignore[arg-type]
    assert generator.reservation(plan) == 64 + (300 + 8) + (2 + 8) + 768
    capped = Generator(llm=None, sessions=None, metrics=None, max_tokens=100)  # type: ignore[arg-type]
    assert capped.reservation(plan) == 64 + (300 + 8) + (2 + 8) + 100
