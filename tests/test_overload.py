"""Past MAX_CONCURRENT_GENERATIONS a new stream gets `error` 503 with a retry hint at once;
the open streams go on, and a slot freed by a finished or abandoned stream is reusable."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import httpx
import pytest

from tests.support.disconnect import hang_up_once
from tests.support.gateway import GatewayProcess
from tests.support.sse import assert_well_formed, read_stream
from tests.upstream.scripted_openai import ScriptedUpstreamThread, expected_display_text

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
PARAMS = {"location": "도시", "workType": "사무직", "category": "VEGAN"}


@pytest.fixture
def small_gateway(upstream: ScriptedUpstreamThread, store_path: str) -> Iterator[GatewayProcess]:
    env = {
        "LLM_BASE_URL": upstream.base_url,
        "QDRANT_PATH": store_path,
        "MAX_CONCURRENT_GENERATIONS": "2",
        "CLIENT_GENERATIONS_SHARE": "1",  # the global limit, with one client allowed all of it
    }
    with GatewayProcess(env) as gateway:
        yield gateway


async def test_the_third_generation_is_refused_and_the_first_two_finish(
    small_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.01)
    async with httpx.AsyncClient(base_url=small_gateway.url, timeout=30) as http:
        finished: list[str] = []

        async def full() -> None:
            finished.append((await read_stream(http, BASE, PARAMS)).text)

        async with anyio.create_task_group() as group:
            group.start_soon(full)
            group.start_soon(full)
            with anyio.fail_after(5):
                while scripted.stats["active_streams"] < 2:
                    await anyio.sleep(0.01)
            refused = await read_stream(http, BASE, PARAMS)
        assert_well_formed(refused)
        assert len(refused.events) == 1
        payload = refused.terminal.payload
        assert refused.terminal.event == "error" and payload["status"] == 503
        assert payload["data"]["retryAfterSeconds"] > 0
        assert finished == [expected_display_text()] * 2

        # Abandoned streams give their slots back too.
        scripted.set_scenario("slow", token_delay=0.01)
        for _ in range(3):
            await hang_up_once(http, BASE, PARAMS)
        scripted.set_scenario("ok")
        with anyio.fail_after(5):
            while scripted.stats["active_streams"]:
                await anyio.sleep(0.01)
        again = await read_stream(http, BASE, PARAMS)
        assert again.terminal.event == "close"
        post = await http.post(BASE, json=PARAMS)
        assert post.status_code == 200
