"""Self-tests of the scripted OpenAI-compatible upstream."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from tests.upstream.scripted_openai import (
    DEFAULT_ANSWER,
    DEFAULT_CONTENT,
    MODEL_ID,
    ScriptedUpstream,
    ScriptedUpstreamThread,
    content_chunk_line,
    expected_display_text,
    resolve_scenario,
)

CHAT = {
    "model": MODEL_ID,
    "messages": [{"role": "user", "content": "플로깅 챌린지 추천해줘"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    up = ScriptedUpstream()
    await up.start()
    try:
        yield up
    finally:
        await up.stop()


async def read_events(response: httpx.Response) -> list[str]:
    """The `data:` payloads of an SSE response, in order (other lines kept verbatim)."""
    events: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            continue
        events.append(line[len("data: ") :] if line.startswith("data: ") else line)
    return events


def contents(events: list[str]) -> str:
    text = ""
    for ev in events:
        if ev == "[DONE]":
            continue
        obj = json.loads(ev)
        for choice in obj.get("choices", []):
            text += choice["delta"].get("content") or ""
    return text


async def stream_chat(client: httpx.AsyncClient, body: dict[str, Any] | None = None) -> list[str]:
    async with client.stream("POST", "/chat/completions", json=body or CHAT) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["transfer-encoding"] == "chunked"
        return await read_events(r)


@pytest.mark.anyio
async def test_models_and_health(upstream: ScriptedUpstream) -> None:
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        r = await client.get("/models")
        assert r.status_code == 200
        assert r.json()["object"] == "list"
        assert r.json()["data"][0]["id"] == MODEL_ID
        assert (await client.get(f"{upstream.root_url}/health")).status_code == 200
        upstream.set_scenario("models_error")
        assert (await client.get("/models")).status_code == 500
        # chat still works under models_error
        assert contents(await stream_chat(client)) == DEFAULT_CONTENT


@pytest.mark.anyio
async def test_ok_stream_exact(upstream: ScriptedUpstream) -> None:
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        events = await stream_chat(client)
    role = json.loads(events[0])
    assert role["object"] == "chat.completion.chunk"
    assert role["model"] == MODEL_ID
    assert role["id"].startswith("chatcmpl-")
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert contents(events) == DEFAULT_CONTENT
    # every content chunk carries chunk_chars=3 characters (the last may be shorter)
    pieces = [json.loads(e)["choices"][0]["delta"]["content"] for e in events[1:-3]]
    assert all(len(p) == 3 for p in pieces[:-1])
    finish = json.loads(events[-3])
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert finish["choices"][0]["delta"] == {}
    usage = json.loads(events[-2])
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == len(pieces)
    assert usage["usage"]["total_tokens"] == (
        usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"]
    )
    assert events[-1] == "[DONE]"
    # content is the default Korean answer in a ```json fence
    inner = DEFAULT_CONTENT.removeprefix("```json\n").removesuffix("\n```")
    assert json.loads(inner) == DEFAULT_ANSWER
    assert expected_display_text().startswith(DEFAULT_ANSWER["recommend"] + "\n\n")

    [req] = upstream.chat_requests
    assert req["method"] == "POST"
    assert req["body"] == CHAT
    assert req["headers"]["content-type"] == "application/json"
    assert abs(req["received_at"] - time.time()) < 5
    stats = upstream.stats
    assert stats["streams_started"] == stats["streams_completed"] == 1
    assert stats["active_streams"] == 0
    assert stats["streams"][0]["outcome"] == "completed"


@pytest.mark.anyio
async def test_ok_variants(upstream: ScriptedUpstream) -> None:
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        # no usage unless the request asks; tokens_per_chunk joins tokens
        upstream.set_scenario("raw", content="abcdefghij", chunk_chars=2, tokens_per_chunk=2)
        body = {**CHAT}
        del body["stream_options"]
        events = await stream_chat(client, body)
        deltas = [json.loads(e)["choices"][0]["delta"].get("content") for e in events[1:-2]]
        assert deltas == ["abcd", "efgh", "ij"]
        assert "usage" not in events[-2]
        # explicit pieces, byte-sliced on the wire, \r\n framing, escaped non-ASCII
        pieces = ['{"recommend": "', "한", "글\\", 'ud83c"}']
        upstream.set_scenario(
            "ok", pieces=pieces, wire_chunk_bytes=5, eol="\r\n", ensure_ascii=True
        )
        async with client.stream("POST", "/chat/completions", json=CHAT) as r:
            raw = (await r.aread()).decode()
        assert "\\ud55c" in raw
        assert "\r\n\r\n" in raw
        data = [ln[6:] for ln in raw.split("\r\n") if ln.startswith("data: ")]
        assert contents(data) == "".join(pieces)
        # non-streaming request
        upstream.set_scenario("ok")
        r = await client.post("/chat/completions", json={**CHAT, "stream": False})
        assert r.json()["choices"][0]["message"]["content"] == DEFAULT_CONTENT


@pytest.mark.anyio
async def test_keep_alive_reuses_one_connection(upstream: ScriptedUpstream) -> None:
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        await stream_chat(client)
        await stream_chat(client)
        assert (await client.get("/models")).status_code == 200
        stats = upstream.stats
        assert stats["connections_total"] == 1
        assert stats["open_connections"] == 1
        assert stats["streams_completed"] == 2
    await upstream.wait_until(lambda: upstream.stats["open_connections"] == 0)


@pytest.mark.anyio
async def test_http_error(upstream: ScriptedUpstream) -> None:
    upstream.set_scenario("http_error", status=503, headers={"retry-after": "2"})
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        r = await client.post("/chat/completions", json=CHAT)
        assert r.status_code == 503
        assert r.headers["retry-after"] == "2"
        err = r.json()
        assert err["object"] == "error"
        assert err["code"] == 503
        assert set(err) == {"object", "message", "type", "param", "code"}
        # keep-alive survives an error answer
        assert (await client.get("/models")).status_code == 200
        assert upstream.stats["connections_total"] == 1


@pytest.mark.anyio
async def test_inband_error(upstream: ScriptedUpstream) -> None:
    upstream.set_scenario("inband_error", after_chunks=2, message="boom")
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        events = await stream_chat(client)
    assert len(events) == 1 + 2 + 2  # role, 2 content chunks, error, [DONE]
    assert contents(events[:3]) == DEFAULT_CONTENT[:6]
    err = json.loads(events[3])["error"]
    assert err == {
        "object": "error",
        "message": "boom",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }
    assert events[4] == "[DONE]"


@pytest.mark.anyio
async def test_cut_raises_incomplete_read(upstream: ScriptedUpstream) -> None:
    upstream.set_scenario("cut", after_chars=20, partial_event='data: {"id":')
    received = ""
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("POST", "/chat/completions", json=CHAT) as r:
                async for chunk in r.aiter_text():
                    received += chunk
    assert received.endswith('data: {"id":')
    assert DEFAULT_CONTENT[:20] in "".join(
        json.loads(ln[6:])["choices"][0]["delta"]["content"]
        for ln in received.split("\n")
        if ln.startswith('data: {"id":"')
    )
    stats = upstream.stats
    assert stats["streams_cut_by_server"] == 1
    assert stats["streams_aborted_by_client"] == 0

    upstream.set_scenario("cut", after_chars=3, mode="reset")
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            async with client.stream("POST", "/chat/completions", json=CHAT) as r:
                await r.aread()


@pytest.mark.anyio
async def test_client_disconnect_mid_slow_stream(upstream: ScriptedUpstream) -> None:
    upstream.set_scenario("slow", token_delay=0.3)
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        async with client.stream("POST", "/chat/completions", json=CHAT) as r:
            # Keep a reference to the iterator: a finalized (broken-out-of) httpx
            # iterator closes the connection by itself.
            lines = r.aiter_lines()
            seen = 0
            while seen < 2:  # role + first content chunk; the server is now idle
                seen += (await lines.__anext__()).startswith("data: ")
            await anyio.sleep(0.1)
            stats = upstream.stats
            assert stats["active_streams"] == 1
            assert stats["streams_aborted_by_client"] == 0
            closed_at = time.time()
            await r.aclose()
            await upstream.wait_until(lambda: upstream.stats["streams_aborted_by_client"] == 1)
            await lines.aclose()
    stats = upstream.stats
    [gone] = stats["disconnects"]
    assert gone["request_id"] == upstream.chat_requests[0]["request_id"]
    assert gone["chunks_sent"] == 2
    assert gone["reason"] == "eof"
    assert 0 <= gone["disconnect_at"] - closed_at < 0.1
    assert stats["active_streams"] == 0
    assert stats["streams_completed"] == 0


@pytest.mark.anyio
async def test_stall_then_read_timeout(upstream: ScriptedUpstream) -> None:
    upstream.set_scenario("stall", after_chunks=1, hold=5)
    async with httpx.AsyncClient(base_url=upstream.base_url, timeout=0.3) as client:
        events: list[str] = []
        with pytest.raises(httpx.ReadTimeout):
            async with client.stream("POST", "/chat/completions", json=CHAT) as r:
                async for line in r.aiter_lines():
                    if line:
                        events.append(line)
    assert len(events) == 2
    await upstream.wait_until(lambda: upstream.stats["streams_aborted_by_client"] == 1)
    assert upstream.stats["disconnects"][0]["chunks_sent"] == 2


@pytest.mark.anyio
async def test_malformed_lines(upstream: ScriptedUpstream) -> None:
    lines = ["data: {not json", "garbage", content_chunk_line("안녕")]
    upstream.set_scenario("malformed", lines=lines, then_content="끝")
    async with httpx.AsyncClient(base_url=upstream.base_url) as client:
        async with client.stream("POST", "/chat/completions", json=CHAT) as r:
            raw = (await r.aread()).decode()
    blocks = raw.split("\n\n")
    assert blocks[:3] == lines
    assert blocks[-2:] == ["data: [DONE]", ""]
    assert contents([b[6:] for b in blocks[2:-2] if b.startswith('data: {"id"')]) == "안녕끝"


@pytest.mark.anyio
async def test_control_endpoints(upstream: ScriptedUpstream) -> None:
    async with httpx.AsyncClient(base_url=upstream.root_url) as client:
        r = await client.post("/_control/scenario", json={"name": "raw", "content": "hello"})
        assert r.status_code == 200
        assert r.json()["params"]["content"] == "hello"
        assert upstream.scenario["name"] == "raw"
        assert (await client.post("/_control/scenario", json={"name": "nope"})).status_code == 400
        bad = await client.post("/_control/scenario", json={"name": "ok", "typo": 1})
        assert bad.status_code == 400
        # one-shot scenario, then back to the global one
        once = {"name": "http_error", "status": 502, "once": True}
        assert (await client.post("/_control/scenario", json=once)).status_code == 200
        r1 = await client.post("/v1/chat/completions", json=CHAT)
        assert r1.status_code == 502
        r2 = await client.post("/v1/chat/completions", json=CHAT)
        assert r2.status_code == 200
        assert contents([ln[6:] for ln in r2.text.split("\n") if ln.startswith("data: ")]) == (
            "hello"
        )
        stats = (await client.get("/_control/stats")).json()
        assert stats["streams_completed"] == 1
        assert stats["requests_total"] == 2
        assert len((await client.get("/_control/requests")).json()) == 2
        assert (await client.post("/_control/reset")).status_code == 200
        stats = (await client.get("/_control/stats")).json()
        assert stats["streams_completed"] == stats["requests_total"] == 0
        assert stats["open_connections"] == 1
    assert upstream.requests == []
    with pytest.raises(ValueError):
        resolve_scenario("cut", {"mode": "explode"})


def test_thread_wrapper() -> None:
    with ScriptedUpstreamThread(model_id="m1") as up:
        up.set_scenario("raw", content="thread ok")
        with httpx.Client(base_url=up.base_url) as client:
            assert client.get("/models").json()["data"][0]["id"] == "m1"
            with client.stream("POST", "/chat/completions", json=CHAT) as r:
                lines = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
            assert contents(lines) == "thread ok"
            up.set_scenario("slow", token_delay=0.2)
            with client.stream("POST", "/chat/completions", json=CHAT) as r:
                lines = r.iter_lines()
                next(lines)
                time.sleep(0.05)
                assert up.stats["streams_aborted_by_client"] == 0
                closed_at = time.time()
            up.wait_until(lambda: up.stats["streams_aborted_by_client"] == 1)
            lines.close()
        assert 0 <= up.stats["disconnects"][0]["disconnect_at"] - closed_at < 0.1
        assert len(up.chat_requests) == 2
        assert up.requests[0]["path"] == "/v1/models"
