"""The gateway under uvicorn, over real HTTP, against the scripted upstream: the happy
paths of both SSE endpoints and the POST variants, conversation rules and input errors."""

from __future__ import annotations

import json

import httpx
import pytest

from app.llm.schema import ANSWER_JSON_SCHEMA, answer_schema
from tests.support.sse import assert_well_formed, read_stream
from tests.upstream.scripted_openai import (
    DEFAULT_ANSWER,
    ScriptedUpstreamThread,
    expected_display_text,
)

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
KEYS = ("recommend", "challenges", "title", "description", "category", "json", "```", "{", '"')


def _no_structure(text: str) -> None:
    for key in KEYS:
        assert key not in text, (key, text)


async def test_base_info_streams_display_text_then_close(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    params = {"sessionId": "b1", "location": "바닷가", "workType": "현장직", "category": "플로깅"}
    result = await read_stream(client, BASE, params)
    assert_well_formed(result)
    assert len(result.events) > 10, "streamed in many pieces"
    assert result.text == expected_display_text()
    _no_structure(result.text)
    close = result.terminal
    assert close.event == "close"
    assert close.payload["status"] == 200
    data = close.payload["data"]
    assert data["recommend"] == DEFAULT_ANSWER["recommend"]
    assert [c["title"] for c in data["challenges"]] == [
        c["title"] for c in DEFAULT_ANSWER["challenges"]
    ]
    assert {(c["category"], c["label"]) for c in data["challenges"]} == {("PLOGGING", "플로깅")}
    assert result.headers["x-session-id"] == "b1"
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))

    (request,) = scripted.chat_requests
    body = request["body"]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    for field in ("temperature", "top_p", "top_k", "repetition_penalty", "max_tokens"):
        assert field in body, field
    assert body["response_format"]["type"] == "json_schema"
    prompt = json.dumps(body["messages"], ensure_ascii=False)
    assert "바닷가" in prompt and "현장직" in prompt and "플로깅" in prompt
    # Grounded titles (the default): the schema, with each title one of the candidates (the
    # model writes the descriptions in this gateway: ANSWER_COMPOSITION=descriptions).
    schema = body["response_format"]["json_schema"]["schema"]
    titles = schema["$defs"]["ChallengeItem"]["properties"]["title"]["enum"]
    expected = answer_schema(titles, composition="descriptions", min_items=3)
    assert schema == expected != ANSWER_JSON_SCHEMA
    assert len(titles) == 3 and all(title in prompt for title in titles)
    assert request["headers"]["x-request-id"] == result.headers["x-request-id"]


async def test_tokens_split_anywhere_never_leak_structure(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    # One character per token, several tokens per SSE chunk, JSON escapes on the wire and
    # HTTP chunks of one byte (UTF-8 split mid-character).
    scripted.set_scenario("ok", chunk_chars=1, tokens_per_chunk=3, ensure_ascii=True)
    params = {"location": "도시", "workType": "사무직", "category": "ZERO_WASTE"}
    result = await read_stream(client, BASE, params)
    assert_well_formed(result)
    assert result.text == expected_display_text()
    for event in result.events[:-1]:
        _no_structure(event.payload["data"])
    scripted.set_scenario("ok", chunk_chars=7, wire_chunk_bytes=1)
    result = await read_stream(client, BASE, params)
    assert result.text == expected_display_text()


async def test_category_code_or_label_answered_with_both(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    for given in ("DIGITAL_CARBON", "디지털 탄소", "digital_carbon"):
        params = {"location": "농촌", "workType": "재택근무", "category": given}
        result = await read_stream(client, BASE, params)
        challenges = result.terminal.payload["data"]["challenges"]
        assert {(c["category"], c["label"]) for c in challenges} == {
            ("DIGITAL_CARBON", "디지털 탄소")
        }


@pytest.mark.parametrize(
    ("params", "status", "fields"),
    [
        ({"location": "우주", "workType": "사무직", "category": "VEGAN"}, 422, ["location"]),
        (
            {"location": "산", "workType": "백수", "category": "고양이"},
            422,
            ["workType", "category"],
        ),
        ({"location": "산", "workType": "사무직"}, 400, None),
        (
            {"location": "산", "workType": "사무직", "category": "VEGAN", "sessionId": "a b"},
            422,
            ["sessionId"],
        ),
        (
            {"location": "산", "workType": "사무직", "category": "VEGAN", "sessionId": "한글"},
            422,
            ["sessionId"],
        ),
    ],
)
async def test_base_info_input_errors_are_one_error_event(
    client: httpx.AsyncClient,
    scripted: ScriptedUpstreamThread,
    params: dict[str, str],
    status: int,
    fields: list[str] | None,
) -> None:
    result = await read_stream(client, BASE, params)
    assert_well_formed(result)
    assert len(result.events) == 1
    error = result.terminal
    assert error.event == "error"
    assert error.payload["status"] == status
    if fields is not None:
        assert error.payload["data"] == {"invalidFields": fields}
    assert scripted.chat_requests == [], "no LLM call for bad input"


async def test_free_text_conversation_switches_categories(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    sid = "conv-1"
    base = {"sessionId": sid, "location": "도시", "workType": "사무직", "category": "PLOGGING"}
    assert (await read_stream(client, BASE, base)).terminal.event == "close"

    def category_of(result: object) -> str:
        challenges = result.terminal.payload["data"]["challenges"]  # type: ignore[attr-defined]
        (code,) = {c["category"] for c in challenges}
        return str(code)

    vegan = await read_stream(client, FREE, {"sessionId": sid, "message": "비건 챌린지 알려줘"})
    assert_well_formed(vegan)
    assert vegan.text == expected_display_text()
    assert category_of(vegan) == "VEGAN"

    other = await read_stream(client, FREE, {"sessionId": sid, "message": "아예 다른 분야로"})
    assert category_of(other) != "VEGAN"

    back = await read_stream(client, FREE, {"sessionId": sid, "message": "처음 카테고리로"})
    assert category_of(back) == "PLOGGING"

    # The return replays that category's turns only: the base-info turn, not the vegan one ...
    returned = " ".join(m["content"] for m in scripted.chat_requests[-1]["body"]["messages"])
    assert "카테고리: 플로깅" in returned and "비건 챌린지 알려줘" not in returned
    # ... and a follow-up keeps the category with this category's turns in its prompt: the
    # base-info turn and "처음 카테고리로", not the turns about other categories between them.
    follow = await read_stream(client, FREE, {"sessionId": sid, "message": "그거 어떻게 시작해?"})
    assert category_of(follow) == "PLOGGING"
    last_messages = scripted.chat_requests[-1]["body"]["messages"]
    texts = " ".join(m["content"] for m in last_messages)
    assert "처음 카테고리로" in texts and "카테고리: 플로깅" in texts
    assert "다른 분야" not in texts and "비건 챌린지 알려줘" not in texts
    assert any(m["role"] == "assistant" for m in last_messages)


async def test_a_conversation_begun_in_free_text_returns_to_its_first_category(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    """No base-info: "the first one" is the category of the first answer, and its turns come
    back into the prompt while the turns about the category in between stay out."""
    sid = "conv-free"

    async def ask(message: str) -> str:
        result = await read_stream(client, FREE, {"sessionId": sid, "message": message})
        assert_well_formed(result)
        (code,) = {c["category"] for c in result.terminal.payload["data"]["challenges"]}
        return str(code)

    assert await ask("비건 챌린지 알려줘") == "VEGAN"
    assert await ask("플로깅 챌린지 추천해줘") == "PLOGGING"
    switched = scripted.chat_requests[-1]["body"]["messages"]
    assert not any(m["role"] == "assistant" for m in switched), "a new category starts afresh"
    assert await ask("아까 맨 처음에 말해준 거 다시 보여줘") == "VEGAN"
    messages = scripted.chat_requests[-1]["body"]["messages"]
    texts = " ".join(m["content"] for m in messages)
    assert "비건 챌린지 알려줘" in texts and "플로깅 챌린지 추천해줘" not in texts
    assert any(m["role"] == "assistant" for m in messages)


async def test_missing_session_id_is_a_fresh_private_session(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    first = await read_stream(client, FREE, {"message": "비건 챌린지 알려줘"})
    second = await read_stream(client, FREE, {"message": "텀블러 챌린지 추천해줘"})
    assert first.headers["x-session-id"] != second.headers["x-session-id"]
    messages = scripted.chat_requests[-1]["body"]["messages"]
    assert not any(m["role"] == "assistant" for m in messages), "no shared history"


async def test_percent_sign_survives_single_decoding(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    message = "재활용 100% 가능한 용기 챌린지 %41 추천"
    result = await read_stream(client, FREE, {"sessionId": "pct", "message": message})
    assert result.terminal.event == "close"
    user = scripted.chat_requests[-1]["body"]["messages"][-1]["content"]
    assert message in user


@pytest.mark.parametrize(
    ("message", "status"),
    [("", 400), ("   \t ", 400), ("가" * 101, 422)],
)
async def test_free_text_bad_messages(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread, message: str, status: int
) -> None:
    result = await read_stream(client, FREE, {"sessionId": "bad", "message": message})
    assert_well_formed(result)
    assert result.terminal.event == "error"
    assert result.terminal.payload["status"] == status
    assert scripted.chat_requests == []


@pytest.mark.parametrize("message", ["ㅁㄴㅇㄹ", "오늘 주식 어때?", "!!!???", "ㅋㅋㅋㅋ"])
async def test_off_topic_gets_a_friendly_answer_without_the_model(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread, message: str
) -> None:
    result = await read_stream(client, FREE, {"sessionId": "ot", "message": message})
    assert_well_formed(result)
    close = result.terminal
    assert close.event == "close"
    assert close.payload["data"]["challenges"] == []
    assert close.payload["data"]["recommend"] == result.text
    assert "챌린지" in result.text
    assert scripted.chat_requests == []


async def test_post_variants_return_the_same_answer_as_json(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    body = {"sessionId": "p1", "location": "산", "workType": "영업직", "category": "UPCYCLING"}
    response = await client.post(BASE, json=body)
    assert response.status_code == 200
    envelope = response.json()
    assert envelope["status"] == 200 and envelope["message"]
    assert envelope["data"]["recommend"] == DEFAULT_ANSWER["recommend"]
    assert {c["category"] for c in envelope["data"]["challenges"]} == {"UPCYCLING"}

    response = await client.post(FREE, json={"sessionId": "p1", "message": "업사이클 더 알려줘"})
    assert response.status_code == 200
    assert len(response.json()["data"]["challenges"]) == 3

    response = await client.post(BASE, json={**body, "category": "없는것"})
    assert response.status_code == 422
    assert response.json()["data"] == {"invalidFields": ["category"]}
    response = await client.post(FREE, json={"message": " "})
    assert response.status_code == 400
    response = await client.post(
        FREE, content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["status"] == 400


async def test_health_ready_and_metrics(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    assert (await client.get("/health")).json()["status"] == 200
    ready = await client.get("/ready")
    assert ready.status_code == 200, ready.text
    metrics = (await client.get("/metrics")).text
    assert "gateway_open_streams 0.0" in metrics


async def test_keep_alive_comments_while_waiting_for_the_first_token(
    client: httpx.AsyncClient, scripted: ScriptedUpstreamThread
) -> None:
    # The gateway under test pings after 0.3 s of silence (and gives up after READ_TIMEOUT,
    # 2 s); the first token takes 1 s.
    scripted.set_scenario("ok", first_delay=1.0)
    params = {"location": "도시", "workType": "사무직", "category": "VEGAN"}
    result = await read_stream(client, BASE, params)
    assert_well_formed(result)
    first_event = result.frames.index(result.events[0])
    pings = [f for f in result.frames[:first_event] if f.comments]
    assert len(pings) >= 1, result.frames[:first_event]
    assert all(f.event is None and f.data is None for f in pings)
    assert result.text == expected_display_text()


async def test_unknown_paths_and_methods_answer_with_the_envelope(
    client: httpx.AsyncClient,
) -> None:
    missing = await client.get("/ai/chatbot/nothing")
    assert missing.status_code == 404 and missing.json()["status"] == 404
    wrong = await client.delete(FREE)
    assert wrong.status_code == 405 and set(wrong.json()) == {"status", "message", "data"}
    garbled = await client.post(FREE, content=b"\xff", headers={"content-type": "application/json"})
    assert garbled.status_code == 400 and garbled.json()["status"] == 400
