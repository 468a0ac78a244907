"""Every upstream fault ends a stream with exactly one error event of the right status and a
readable Korean message, and the gateway keeps serving. Scripted upstream, real HTTP."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import anyio
import httpx
import pytest

from tests.integration_fixtures import READ_TIMEOUT
from tests.support.gateway import ROOT, GatewayProcess
from tests.support.sse import StreamResult, assert_well_formed, read_stream
from tests.upstream.scripted_openai import ScriptedUpstreamThread, expected_display_text

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
CORPUS = ROOT / "app" / "rag" / "data" / "challenges.jsonl"
PARAMS = {"sessionId": "f1", "location": "도시", "workType": "사무직", "category": "비건"}
_HANGUL = re.compile(r"[가-힣]")
_LEAKS = ("Traceback", "Error", "http://", "127.0.0.1", "httpx", "Exception", "{'", "chatcmpl")


def _assert_error(result: StreamResult, status: int) -> dict[str, Any]:
    assert_well_formed(result)
    error = result.terminal
    assert error.event == "error", result.frames
    payload = error.payload
    assert payload["status"] == status
    message = payload["message"]
    assert _HANGUL.search(message), message
    for leak in _LEAKS:
        assert leak not in message, message
    return payload


async def _still_serving(client: httpx.AsyncClient, scripted: ScriptedUpstreamThread) -> None:
    scripted.set_scenario("ok")
    result = await read_stream(client, BASE, PARAMS)
    assert result.terminal.event == "close"
    assert result.text == expected_display_text()


FAULTS: list[tuple[str, dict[str, Any], int]] = [
    ("http_error", {"status": 500}, 502),
    ("http_error", {"status": 400, "message": "prompt too long"}, 502),
    ("http_error", {"status": 404, "message": "model not found"}, 502),
    ("http_error", {"status": 429}, 503),
    ("http_error", {"status": 503}, 503),
    ("inband_error", {"after_chunks": 5}, 502),
    ("cut", {"after_chars": 40}, 502),
    ("cut", {"after_chars": 40, "mode": "reset"}, 502),
    ("malformed", {}, 502),
    ("malformed", {"lines": ['data: {"choices": 5}']}, 502),
    ("raw", {"content": '{"recommend": 5, "challenges": "none"}'}, 502),
    ("stall", {"after_chunks": 2, "hold": 30}, 504),
    ("stall", {"after_chunks": 0, "hold": 30, "before_headers": True}, 504),
]


@pytest.mark.parametrize(("scenario", "params", "status"), FAULTS, ids=lambda v: str(v)[:30])
async def test_fault_gives_one_error_event_and_the_server_keeps_serving(
    client: httpx.AsyncClient,
    scripted: ScriptedUpstreamThread,
    scenario: str,
    params: dict[str, Any],
    status: int,
) -> None:
    scripted.set_scenario(scenario, **params)
    started = time.monotonic()
    result = await read_stream(client, BASE, PARAMS)
    elapsed = time.monotonic() - started
    payload = _assert_error(result, status)
    if status == 503:
        assert payload["data"]["retryAfterSeconds"] > 0
    if scenario == "stall":
        assert READ_TIMEOUT * 0.9 <= elapsed < READ_TIMEOUT + 2.0
    await _still_serving(client, scripted)


@pytest.mark.parametrize(("scenario", "params", "status"), FAULTS[:8], ids=lambda v: str(v)[:30])
async def test_post_maps_faults_to_http_statuses(
    client: httpx.AsyncClient,
    scripted: ScriptedUpstreamThread,
    scenario: str,
    params: dict[str, Any],
    status: int,
) -> None:
    scripted.set_scenario(scenario, **params)
    response = await client.post(FREE, json={"sessionId": "pf", "message": "비건 챌린지 추천"})
    assert response.status_code == status
    assert response.json()["status"] == status
    if status == 503:
        assert int(response.headers["retry-after"]) >= 1


async def test_post_stall_is_504(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("stall", after_chunks=1, hold=30)
    response = await client.post(BASE, json=PARAMS)
    assert response.status_code == 504


async def test_connection_refused_is_502(refused_gateway: GatewayProcess) -> None:
    async with httpx.AsyncClient(base_url=refused_gateway.url) as http:
        _assert_error(await read_stream(http, BASE, PARAMS), 502)
        response = await http.post(BASE, json=PARAMS)
        assert response.status_code == 502
        ready = await http.get("/ready")
        assert ready.status_code == 503
        assert ready.json()["data"]["llm"] == "unavailable"
        assert refused_gateway.alive()


async def test_model_discovery_failure_is_502_then_recovers(
    upstream: ScriptedUpstreamThread, store_path: str
) -> None:
    # A fresh gateway without LLM_MODEL asks GET /models first.
    upstream.set_scenario("models_error", status=500)
    try:
        with GatewayProcess({"LLM_BASE_URL": upstream.base_url, "QDRANT_PATH": store_path}) as gw:
            async with httpx.AsyncClient(base_url=gw.url) as http:
                _assert_error(await read_stream(http, BASE, PARAMS), 502)
                upstream.set_scenario("ok")
                result = await read_stream(http, BASE, PARAMS)
                assert result.terminal.event == "close"
                assert upstream.chat_requests[-1]["body"]["model"] == "scripted-model"
    finally:
        upstream.set_scenario("ok")


async def test_plain_prose_answer_is_shown_and_closes(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    prose = "오늘은 가까운 거리를 걸어서 다녀 보세요. 작은 실천이 모여요."
    scripted.set_scenario("raw", content=prose)
    result = await read_stream(client, BASE, PARAMS)
    assert_well_formed(result)
    assert result.terminal.event == "close"
    assert result.text == prose
    assert result.terminal.payload["data"] == {"recommend": prose, "challenges": []}


async def test_inband_error_after_text_keeps_shown_text_clean(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("inband_error", after_chunks=12)
    result = await read_stream(client, BASE, PARAMS)
    _assert_error(result, 502)
    assert result.text and expected_display_text().startswith(result.text)


async def test_gateway_log_holds_no_traceback_for_upstream_faults(gateway: GatewayProcess) -> None:
    # Runs after the faults above in this module: they are expected failures, logged as
    # warnings, never as unhandled exceptions.
    log = gateway.log_text()
    assert "Traceback" not in log, log[-3000:]


async def test_truncated_answer_closes_with_catalogue_items(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    # The model ran out of tokens inside the JSON ([DONE] came): what was shown stays, the
    # retrieved catalogue items complete the answer, and the stream ends with close.
    scripted.set_scenario("raw", content='추천해 드릴게요.\n```json\n{"recommend": "텀블러를 쓰')
    result = await read_stream(client, BASE, PARAMS)
    assert_well_formed(result)
    assert result.terminal.event == "close", result.frames
    data = result.terminal.payload["data"]
    assert data["recommend"] == "텀블러를 쓰"
    assert len(data["challenges"]) == 3
    assert {c["category"] for c in data["challenges"]} == {"VEGAN"}
    titles = {json.loads(line)["title"] for line in CORPUS.read_text(encoding="utf-8").splitlines()}
    shown = "".join(f"\n\n{c['title']}\n{c['description']}" for c in data["challenges"])
    assert all(c["title"] in titles for c in data["challenges"])
    assert result.text == "추천해 드릴게요.\n\n텀블러를 쓰" + shown


async def test_looping_answer_is_stopped_and_closes(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    # A small model repeating one sentence: the second copy is never shown (no sentence twice
    # in an answer), the upstream request is closed at once, and the answer ends with close.
    loop = "매일 한 끼는 채소로 먹어 보세요. " * 60
    content = '{"recommend": "비건 챌린지예요. ' + loop + '", "challenges": []}'
    scripted.set_scenario("raw", content=content, token_delay=0.002)
    result = await read_stream(client, BASE, PARAMS)
    assert_well_formed(result)
    assert result.terminal.event == "close", result.frames
    assert result.text.count("매일 한 끼는 채소로 먹어 보세요.") == 1
    data = result.terminal.payload["data"]
    assert data["recommend"].count("매일 한 끼는 채소로 먹어 보세요.") == 1
    assert len(data["challenges"]) == 3
    for _ in range(100):  # the upstream sees the close a moment later
        if scripted.stats["streams_aborted_by_client"] >= 1:
            break
        await anyio.sleep(0.02)
    assert scripted.stats["streams_aborted_by_client"] >= 1


async def test_a_loop_on_text_copied_from_the_catalogue_is_not_shown_twice(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    # The model copies a retrieved item's first sentence and loops on it: the items that fill
    # up the close skip that item, so the sentence is not shown a second time that way either.
    scripted.set_scenario("raw", content='{"recommend": "텀블러를 쓰', token_delay=0.0)
    filled = (await read_stream(client, BASE, PARAMS)).terminal.payload["data"]["challenges"]
    copied = filled[0]["description"].split(". ")[0].rstrip(".") + "."
    content = '{"recommend": "' + (copied + " ") * 20 + '", "challenges": []}'
    scripted.set_scenario("raw", content=content, token_delay=0.001)
    result = await read_stream(client, BASE, PARAMS)
    assert_well_formed(result)
    assert result.terminal.event == "close", result.frames
    assert result.text.count(copied) == 1
    titles = [c["title"] for c in result.terminal.payload["data"]["challenges"]]
    assert filled[0]["title"] not in titles and len(titles) >= 1


async def test_a_salvaged_close_matches_what_was_shown(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    # Cut by max_tokens after two items of one title and inside a third title, with a
    # recommend with a leading space: the repeated item is dropped before it is shown, the cut
    # title never shown (a title is shown whole), and the close holds exactly what the display
    # showed, filled up with candidates.
    content = (
        '{"recommend": " 바다를 지켜요.", "challenges": ['
        '{"title": "해변 줍기", "description": "첫 번째 설명이에요."}, '
        '{"title": "해변 줍기", "description": "두 번째 설명이에요."}, {"title": "해'
    )
    scripted.set_scenario("raw", content=content, token_delay=0.0)
    result = await read_stream(client, BASE, PARAMS)
    assert_well_formed(result)
    data = result.terminal.payload["data"]
    assert data["recommend"] == " 바다를 지켜요."
    assert data["challenges"][0]["description"] == "첫 번째 설명이에요."
    titles = [c["title"] for c in data["challenges"]]
    assert len(titles) == len(set(titles)) == 3
    assert "두 번째 설명이에요." not in result.text
    items = [f"\n\n{c['title']}\n{c['description']}" for c in data["challenges"]]
    assert result.text == data["recommend"] + "".join(items)
