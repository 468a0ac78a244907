"""The feedback job API through a real gateway (embedded queue, no Redis) on loopback, the
scripted upstream and a local callback receiver: accept, validate, generate, deliver, retry,
dead-letter, poll, stream."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.feedback.receiver import CallbackReceiver
from tests.feedback.requests import FEEDBACK_TEXT, feedback_body
from tests.support.gateway import GatewayProcess
from tests.support.sse import iter_frames
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

pytestmark = pytest.mark.anyio

TOKEN = "callback-secret"


def gateway_env(
    upstream: ScriptedUpstreamThread, callback_url: str, store: Path, **extra: str
) -> dict[str, str]:
    return {
        "LLM_BASE_URL": upstream.base_url,
        "QDRANT_PATH": str(store),
        "FEEDBACK_CALLBACK_URL": callback_url,
        "FEEDBACK_CALLBACK_TOKEN": TOKEN,
        "FEEDBACK_DELIVERY_BACKOFF_SECONDS": "0.2",
        "FEEDBACK_DELIVERY_BACKOFF_MAX_SECONDS": "0.5",
        "FEEDBACK_DELIVERY_ATTEMPTS": "30",
        "SSE_PING_INTERVAL": "0.5",
        **extra,
    }


@pytest.fixture(scope="module")
def feedback_gateway(
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    store = store_copy(store_template, tmp_path_factory.mktemp("store") / "q")
    with GatewayProcess(gateway_env(feedback_upstream, callbacks.url, store)) as gw:
        yield gw


@pytest.fixture
async def http(feedback_gateway: GatewayProcess, fresh: None) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=feedback_gateway.url, timeout=30) as client:
        yield client


async def wait_status(
    http: httpx.AsyncClient, job_id: str, want: set[str], within: float = 15
) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        answer = await http.get(f"/ai/feedback/{job_id}")
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = answer.json()["data"]
        if data["status"] in want and data["delivery"] not in {"pending"}:
            return data
        assert time.monotonic() < deadline, data
        await anyio.sleep(0.05)


async def test_accept_generate_deliver_and_poll(
    http: httpx.AsyncClient, callbacks: CallbackReceiver, feedback_upstream: ScriptedUpstreamThread
) -> None:
    answer = await http.post("/ai/feedback", json=feedback_body())
    assert answer.status_code == 202, answer.text
    payload = answer.json()
    assert set(payload) == {"status", "message", "data"} and payload["status"] == 202
    job_id = payload["data"]["jobId"]
    assert answer.headers["location"] == f"/ai/feedback/{job_id}"
    done = await wait_status(http, job_id, {"done"})
    assert done["content"] == FEEDBACK_TEXT and done["source"] == "model"
    assert done["delivery"] == "delivered"
    callbacks.wait_for(1)
    [received] = [r for r in callbacks.received if r["body"]["jobId"] == job_id]
    assert received["body"] == {"memberId": 7, "content": FEEDBACK_TEXT, "jobId": job_id}
    assert received["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert received["headers"]["idempotency-key"] == job_id
    # Chat first: the feedback request is non-streaming and asks for a later place in vLLM.
    [request] = feedback_upstream.chat_requests
    body = request["body"]
    assert body["stream"] is False and body["priority"] == 10
    prompt = body["messages"][1]["content"]
    # Counted by code: the submission 9 days ago is outside the week.
    assert "플로깅 모임: 인증 성공 1번, 실패 1번" in prompt, prompt
    assert "텀블러 사용하기: 성공 1번, 실패 0번" in prompt


async def test_both_lists_empty_is_400(http: httpx.AsyncClient) -> None:
    body = feedback_body(personalChallenges=[], groupChallenges=None)
    answer = await http.post("/ai/feedback", json=body)
    assert answer.status_code == 400
    assert answer.json()["status"] == 400 and answer.json()["data"] is None


async def test_not_json_is_400(http: httpx.AsyncClient) -> None:
    answer = await http.post(
        "/ai/feedback", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"memberId": "seven"}, "memberId"),
        (
            {"personalChallenges": [{"id": 1, "title": "", "isSuccess": True}]},
            "personalChallenges[0].title",
        ),
        ({"personalChallenges": [{"id": 1, "title": "x"}]}, "personalChallenges[0].isSuccess"),
    ],
)
async def test_malformed_fields_are_422(
    http: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    answer = await http.post("/ai/feedback", json=feedback_body(**change))
    assert answer.status_code == 422, answer.text
    assert field in answer.json()["data"]["invalidFields"]


@pytest.mark.parametrize(
    "bad",
    [
        [2026, 13, 1, 0, 0],
        [2026, 5, 1, 10, 0, 0, 1_000_000_000],
        "yesterday",
        [2026, 5],
        1714550400,
    ],
)
async def test_bad_dates_are_422(http: httpx.AsyncClient, bad: Any) -> None:
    body = feedback_body()
    body["groupChallenges"][0]["submissions"][0]["submittedAt"] = bad
    answer = await http.post("/ai/feedback", json=body)
    assert answer.status_code == 422, answer.text
    fields = answer.json()["data"]["invalidFields"]
    assert fields == ["groupChallenges[0].submissions[0].submittedAt"]


async def test_end_before_start_is_422(http: httpx.AsyncClient) -> None:
    body = feedback_body()
    body["groupChallenges"][0]["endDate"] = [2020, 1, 1]
    answer = await http.post("/ai/feedback", json=body)
    assert answer.status_code == 422
    assert answer.json()["data"]["invalidFields"] == ["groupChallenges[0].endDate"]


async def test_same_idempotency_key_gives_same_job(
    http: httpx.AsyncClient, callbacks: CallbackReceiver
) -> None:
    headers = {"idempotency-key": "weekly-7-2026-w18"}
    body = feedback_body()  # a retry sends the very same request
    first = await http.post("/ai/feedback", json=body, headers=headers)
    second = await http.post("/ai/feedback", json=body, headers=headers)
    assert first.status_code == second.status_code == 202
    job_id = first.json()["data"]["jobId"]
    assert second.json()["data"]["jobId"] == job_id
    assert second.headers["idempotent-replayed"] == "true"
    await wait_status(http, job_id, {"done"})
    other = await http.post("/ai/feedback", json=feedback_body(), headers={"idempotency-key": "k2"})
    assert other.json()["data"]["jobId"] != job_id
    await wait_status(http, other.json()["data"]["jobId"], {"done"})
    assert [b["jobId"] for b in callbacks.bodies()].count(job_id) == 1


async def test_duplicate_challenge_ids_count_per_challenge(
    http: httpx.AsyncClient, feedback_upstream: ScriptedUpstreamThread
) -> None:
    body = feedback_body()
    body["personalChallenges"].append({"id": 1, "title": "텀블러 사용하기", "isSuccess": False})
    group = body["groupChallenges"][0]
    body["groupChallenges"].append(json.loads(json.dumps(group)))  # the same challenge twice
    answer = await http.post("/ai/feedback", json=body)
    assert answer.status_code == 202
    await wait_status(http, answer.json()["data"]["jobId"], {"done"})
    prompt = feedback_upstream.chat_requests[-1]["body"]["messages"][1]["content"]
    assert "텀블러 사용하기: 성공 1번, 실패 1번" in prompt
    assert prompt.count("플로깅 모임") == 1 and "인증 성공 1번, 실패 1번" in prompt


async def test_invalid_model_text_retried_once_then_fallback(
    http: httpx.AsyncClient, feedback_upstream: ScriptedUpstreamThread
) -> None:
    feedback_upstream.set_scenario("ok", content='{"feedback": "좋아요"}')
    answer = await http.post("/ai/feedback", json=feedback_body())
    done = await wait_status(http, answer.json()["data"]["jobId"], {"done"})
    assert done["source"] == "fallback"
    assert len(feedback_upstream.chat_requests) == 2  # asked twice, then the code's text
    text = done["content"]
    assert len(text) <= 250 and text.endswith(".") and "2번 성공" in text, text


async def test_receiver_errors_are_retried_until_delivered(
    http: httpx.AsyncClient, callbacks: CallbackReceiver, feedback_gateway: GatewayProcess
) -> None:
    callbacks.script[:] = [503, 500, 502]
    answer = await http.post("/ai/feedback", json=feedback_body())
    job_id = answer.json()["data"]["jobId"]
    done = await wait_status(http, job_id, {"done"})
    assert done["delivery"] == "delivered" and done["deliveryAttempts"] == 4
    assert [r["status"] for r in callbacks.received] == [503, 500, 502, 200]


async def test_receiver_down_for_a_while(
    http: httpx.AsyncClient, callbacks: CallbackReceiver
) -> None:
    callbacks.down()
    try:
        answer = await http.post("/ai/feedback", json=feedback_body())
        job_id = answer.json()["data"]["jobId"]
        await anyio.sleep(1.5)  # several refused attempts
        view = (await http.get(f"/ai/feedback/{job_id}")).json()["data"]
        assert view["delivery"] == "pending" and view["deliveryAttempts"] >= 2, view
    finally:
        callbacks.up()
    done = await wait_status(http, job_id, {"done"})
    assert done["delivery"] == "delivered"
    assert [b["jobId"] for b in callbacks.bodies()] == [job_id]


async def test_4xx_is_a_dead_letter_without_retry(
    http: httpx.AsyncClient, callbacks: CallbackReceiver, feedback_gateway: GatewayProcess
) -> None:
    callbacks.script[:] = [422]
    answer = await http.post("/ai/feedback", json=feedback_body(member_id=99))
    job_id = answer.json()["data"]["jobId"]
    done = await wait_status(http, job_id, {"done"})
    assert done["delivery"] == "dead_letter" and done["deliveryAttempts"] == 1
    await anyio.sleep(0.8)  # longer than the backoff: no second attempt comes
    assert len(callbacks.received) == 1
    metrics = (await http.get("/metrics")).text
    assert 'gateway_feedback_dead_letters_total{reason="client_error"} 1.0' in metrics
    assert f"feedback {job_id} for member 99: dead letter" in feedback_gateway.log_text()


async def test_results_stream_and_resume(http: httpx.AsyncClient) -> None:
    async def read_events(headers: dict[str, str], count: int) -> list[Any]:
        events = []
        async with http.stream("GET", "/ai/feedback/results/stream", headers=headers) as stream:
            assert stream.status_code == 200
            async for frame in iter_frames(stream.aiter_lines()):
                if frame.event is not None:
                    events.append(frame)
                    if len(events) == count:
                        return events
                elif frame.id is not None and not headers:
                    headers["opened"] = frame.id
                    first = await http.post("/ai/feedback", json=feedback_body(member_id=1))
                    second = await http.post("/ai/feedback", json=feedback_body(member_id=2))
                    assert first.status_code == second.status_code == 202
        raise AssertionError("stream ended")

    opened: dict[str, str] = {}
    events = await read_events(opened, 1)
    assert events[0].event == "feedback"
    payload = events[0].payload
    assert payload["status"] == 200 and payload["data"]["content"] == FEEDBACK_TEXT
    # Reconnect after the first: the second comes, the first does not come again.
    [again] = await read_events({"last-event-id": events[0].id}, 1)
    assert again.payload["data"]["jobId"] != payload["data"]["jobId"]
    assert {payload["data"]["memberId"], again.payload["data"]["memberId"]} == {1, 2}
    # From the id of the opening frame: both.
    both = await read_events({"last-event-id": opened["opened"]}, 2)
    assert [e.id for e in both] == [events[0].id, again.id]


async def test_unknown_job_is_404(http: httpx.AsyncClient) -> None:
    answer = await http.get("/ai/feedback/0123456789abcdef0123456789abcdef")
    assert answer.status_code == 404 and answer.json()["status"] == 404
    assert (await http.get("/ai/feedback/nope")).status_code == 404


def test_queue_full_is_503_with_retry_hint(
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    store_template: Path,
    tmp_path: Path,
    fresh: None,
) -> None:
    feedback_upstream.set_scenario("stall", hold=30)
    env = gateway_env(
        feedback_upstream,
        callbacks.url,
        store_copy(store_template, tmp_path / "q"),
        FEEDBACK_QUEUE_MAX="2",
        FEEDBACK_WORKERS="1",
    )
    with GatewayProcess(env) as gateway:
        url = f"{gateway.url}/ai/feedback"
        assert httpx.post(url, json=feedback_body()).status_code == 202  # running
        feedback_upstream.wait_until(lambda: len(feedback_upstream.chat_requests) == 1, 10)
        assert [httpx.post(url, json=feedback_body()).status_code for _ in range(2)] == [202, 202]
        full = httpx.post(url, json=feedback_body())
        assert full.status_code == 503
        payload = full.json()
        assert payload["status"] == 503 and payload["data"]["retryAfterSeconds"] > 0
        assert int(full.headers["retry-after"]) >= 1
    feedback_upstream.set_scenario("ok", content=FEEDBACK_TEXT)
