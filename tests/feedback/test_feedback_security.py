"""The feedback API against a stranger and a careless client (issue 25, findings 4, 7, 8, 11):
bad input is always 4xx and never a traceback, an idempotency key is never merged across
requests, and members' feedback stays private."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.feedback.receiver import CallbackReceiver
from tests.feedback.requests import feedback_body
from tests.feedback.test_feedback_api import gateway_env, wait_status
from tests.support.gateway import GatewayProcess
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

pytestmark = pytest.mark.anyio

LONG_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def gateway(
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    store = store_copy(store_template, tmp_path_factory.mktemp("store") / "q")
    env = gateway_env(feedback_upstream, callbacks.url, store, LOG_FORMAT="json")
    with GatewayProcess(env) as gw:
        yield gw


@pytest.fixture
async def http(gateway: GatewayProcess, fresh: None) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        yield client


def _tracebacks(gateway: GatewayProcess) -> list[str]:
    return [line for line in gateway.log_text().splitlines() if "Traceback" in line]


# -- 4. bad input is 4xx, always ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ([10**20, 1, 1], "groupChallenges[0].startDate"),
        ("0001-01-01T00:00:00+14:00", "groupChallenges[0].startDate"),
        ([2026, 1, 1, 10**12, 0], "groupChallenges[0].startDate"),
        ("9999-12-31T23:59:59-14:00", "groupChallenges[0].endDate"),
        ([99999, 12, 31], "groupChallenges[0].endDate"),
    ],
)
async def test_4_every_date_out_of_range_is_422_with_its_path(
    http: httpx.AsyncClient, gateway: GatewayProcess, bad: Any, field: str
) -> None:
    body = feedback_body()
    body["groupChallenges"][0][field.rpartition(".")[2]] = bad
    answer = await http.post("/ai/feedback", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["data"]["invalidFields"] == [field]
    assert _tracebacks(gateway) == []


async def test_4_a_submission_date_out_of_range_is_422_too(http: httpx.AsyncClient) -> None:
    body = feedback_body()
    body["groupChallenges"][0]["submissions"][1]["submittedAt"] = "0001-01-01T00:00:00+14:00"
    answer = await http.post("/ai/feedback", json=body)
    assert answer.status_code == 422
    assert answer.json()["data"]["invalidFields"] == [
        "groupChallenges[0].submissions[1].submittedAt"
    ]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"memberId": 10**4000}, "memberId"),
        ({"memberId": LONG_MAX + 1}, "memberId"),
        ({"memberId": -1}, "memberId"),
        (
            {"personalChallenges": [{"id": 2**63, "title": "t", "isSuccess": True}]},
            "personalChallenges[0].id",
        ),
    ],
)
async def test_4_numbers_are_bounded_to_the_backends_long(
    http: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    answer = await http.post("/ai/feedback", json=feedback_body(**change))
    assert answer.status_code == 422, answer.text
    assert answer.json()["data"]["invalidFields"] == [field]
    largest = await http.post("/ai/feedback", json=feedback_body(member_id=LONG_MAX))
    assert largest.status_code == 202


async def test_4_deep_nesting_is_400(http: httpx.AsyncClient, gateway: GatewayProcess) -> None:
    for depth in (10_000, 100):
        nested = "[" * depth + "]" * depth
        raw = f'{{"memberId": 7, "personalChallenges": {nested}}}'
        answer = await http.post(
            "/ai/feedback", content=raw.encode(), headers={"content-type": "application/json"}
        )
        assert answer.status_code == 400, (depth, answer.text)
        assert answer.json()["status"] == 400
    assert _tracebacks(gateway) == []


def test_4_an_upload_dropped_mid_body_is_one_info_line(gateway: GatewayProcess) -> None:
    head = (
        "POST /ai/feedback HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        "content-length: 5000\r\nx-request-id: dropped-upload-1\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(head.encode() + b'{"memberId": 7, "personalChallenges": [')
        time.sleep(0.3)
    deadline = time.monotonic() + 5
    while True:
        lines = [
            json.loads(line)
            for line in gateway.log_text().splitlines()
            if line.startswith("{") and "dropped-upload-1" in line
        ]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(lines) == 1, lines
    assert lines[0]["level"] == "INFO" and "exc" not in lines[0]
    assert _tracebacks(gateway) == []


# -- 7. idempotency as the IETF draft has it ---------------------------------------------------


async def test_7_an_idempotency_key_reused_with_another_body_is_422(
    http: httpx.AsyncClient,
) -> None:
    headers = {"idempotency-key": "weekly-2026-w20"}
    mine = feedback_body(member_id=1)
    first = await http.post("/ai/feedback", json=mine, headers=headers)
    assert first.status_code == 202
    other = await http.post("/ai/feedback", json={**mine, "memberId": 2}, headers=headers)
    assert other.status_code == 422, other.text
    assert other.json()["data"]["invalidFields"] == ["Idempotency-Key"]
    again = await http.post("/ai/feedback", json=mine, headers=headers)
    assert again.status_code == 202
    assert again.json()["data"]["jobId"] == first.json()["data"]["jobId"]
    job = (await http.get(f"/ai/feedback/{first.json()['data']['jobId']}")).json()["data"]
    assert job["memberId"] == 1, "the first member's job, untouched"


async def test_7_a_request_id_alone_never_merges_two_members(http: httpx.AsyncClient) -> None:
    headers = {"x-request-id": "same-request-id"}
    body = feedback_body(member_id=11)
    one = await http.post("/ai/feedback", json=body, headers=headers)
    two = await http.post("/ai/feedback", json={**body, "memberId": 12}, headers=headers)
    assert one.status_code == two.status_code == 202
    one_id, two_id = one.json()["data"]["jobId"], two.json()["data"]["jobId"]
    assert one_id != two_id
    second = await wait_status(http, two_id, {"done"})
    assert second["memberId"] == 12
    retried = await http.post("/ai/feedback", json=body, headers=headers)
    assert retried.json()["data"]["jobId"] == one_id, "a retry of the same request is the same job"


# -- 8. members' feedback is private ------------------------------------------------------------


async def test_8_without_keys_the_results_stream_is_for_this_machine_only(
    http: httpx.AsyncClient,
) -> None:
    # A request that came through a proxy on this host is not local, whatever its peer.
    for forwarded in ({"x-forwarded-for": "203.0.113.9"}, {"x-real-ip": "203.0.113.9"}):
        headers = {"last-event-id": "0", **forwarded}
        with anyio.fail_after(10):  # a served stream never ends: only its head is read
            async with http.stream("GET", "/ai/feedback/results/stream", headers=headers) as answer:
                assert answer.status_code == 403, forwarded
                body = await answer.aread()
        assert json.loads(body)["status"] == 403 and b"memberId" not in body


def test_8_a_named_setting_opens_the_results_stream_and_keys_close_it(
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    store_template: Path,
    tmp_path: Path,
    fresh: None,
) -> None:
    env = gateway_env(
        feedback_upstream,
        callbacks.url,
        store_copy(store_template, tmp_path / "q"),
        TRUSTED_PROXIES="127.0.0.1",
        FEEDBACK_RESULTS_PUBLIC="true",
    )
    remote = {"x-forwarded-for": "203.0.113.9", "last-event-id": "0"}
    with GatewayProcess(env) as gw, httpx.Client(base_url=gw.url, timeout=10) as client:
        with client.stream("GET", "/ai/feedback/results/stream", headers=remote) as answer:
            assert answer.status_code == 200
    env["API_KEYS"] = "backend-key"
    with GatewayProcess(env) as gw, httpx.Client(base_url=gw.url, timeout=10) as client:
        assert client.get("/ai/feedback/results/stream").status_code == 401
        posted = client.post(
            "/ai/feedback", json=feedback_body(), headers={"x-api-key": "backend-key"}
        )
        job = posted.json()["data"]["jobId"]
        assert client.get(f"/ai/feedback/{job}").status_code == 401
        keyed = client.get(f"/ai/feedback/{job}", headers={"x-api-key": "backend-key"})
        assert keyed.status_code == 200


# -- issue 31: a second stranger -----------------------------------------------------------------


async def _nothing_ran(
    feedback_upstream: ScriptedUpstreamThread, callbacks: CallbackReceiver
) -> None:
    """No job was worked and nothing delivered (a job runs at once: 0.5 s is plenty)."""
    await anyio.sleep(0.5)
    assert feedback_upstream.chat_requests == []
    assert callbacks.received == []


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",  # the probe's: what a page of any site sends without a preflight
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,  # a Blob without a type: no Content-Type at all
    ],
)
async def test_31_2_a_feedback_body_not_declared_json_is_415(
    http: httpx.AsyncClient,
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    content_type: str | None,
) -> None:
    headers = {"origin": "http://evil.example"}
    if content_type is not None:
        headers["content-type"] = content_type
    answer = await http.post("/ai/feedback", content=json.dumps(feedback_body()), headers=headers)
    assert answer.status_code == 415, answer.text
    assert answer.json()["status"] == 415 and answer.headers["connection"] == "close"
    await _nothing_ran(feedback_upstream, callbacks)


@pytest.mark.parametrize(
    "browser",
    [
        {"sec-fetch-site": "cross-site", "origin": "http://evil.example"},
        {"sec-fetch-site": "same-site", "origin": "http://sub.127.0.0.1"},
        {"origin": "http://evil.example"},  # a browser without Sec-Fetch-Site
        {"origin": "null"},  # a sandboxed frame
    ],
)
async def test_31_2_a_page_of_another_site_gets_no_job_without_keys(
    http: httpx.AsyncClient,
    gateway: GatewayProcess,
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    browser: dict[str, str],
) -> None:
    answer = await http.post("/ai/feedback", json=feedback_body(), headers=browser)
    assert answer.status_code == 403, answer.text
    assert answer.json()["status"] == 403
    await _nothing_ran(feedback_upstream, callbacks)
    # No Origin and no Sec-Fetch-Site (the relay, curl), or the page's own origin: served.
    for headers in ({}, {"origin": gateway.url, "sec-fetch-site": "same-origin"}):
        answer = await http.post("/ai/feedback", json=feedback_body(), headers=headers)
        assert answer.status_code == 202, (headers, answer.text)
        await wait_status(http, answer.json()["data"]["jobId"], {"done"})  # delivered now


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"memberId": True}, "memberId"),  # the probe's: accepted as member 1
        ({"memberId": False}, "memberId"),
        ({"memberId": 7.0}, "memberId"),
        ({"memberId": "7"}, "memberId"),
        (
            {"personalChallenges": [{"id": True, "title": "t", "isSuccess": True}]},
            "personalChallenges[0].id",
        ),
        (
            {"personalChallenges": [{"id": 1, "title": "t", "isSuccess": 1}]},
            "personalChallenges[0].isSuccess",
        ),
        (
            {"personalChallenges": [{"id": 1, "title": "t", "isSuccess": "true"}]},
            "personalChallenges[0].isSuccess",
        ),
    ],
)
async def test_31_5_no_boolean_for_a_number_and_no_number_for_a_boolean(
    http: httpx.AsyncClient,
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    change: dict[str, Any],
    field: str,
) -> None:
    answer = await http.post("/ai/feedback", json=feedback_body(**change))
    assert answer.status_code == 422, answer.text
    assert answer.json()["data"]["invalidFields"] == [field]
    await _nothing_ran(feedback_upstream, callbacks)


async def test_31_5_a_submission_and_a_group_are_strict_too(http: httpx.AsyncClient) -> None:
    body = feedback_body()
    body["groupChallenges"][0]["id"] = False
    body["groupChallenges"][0]["submissions"][0]["isSuccess"] = 0
    answer = await http.post("/ai/feedback", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["data"]["invalidFields"] == [
        "groupChallenges[0].id",
        "groupChallenges[0].submissions[0].isSuccess",
    ]


@pytest.mark.parametrize(
    "key",
    [
        "k" * 201,
        "k" * 300,  # the probe's
        "weekly 2026-w20",  # a space
        "주간-2026",  # not ASCII
        "tab\there",
        "",  # sent, but empty
    ],
)
async def test_31_6_an_unusable_idempotency_key_is_422_naming_the_header(
    http: httpx.AsyncClient,
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    key: str,
) -> None:
    headers = [("idempotency-key", key.encode())]
    for _ in range(2):  # the retries its sender believed safe: never two jobs
        answer = await http.post(
            "/ai/feedback",
            content=json.dumps(feedback_body()).encode(),
            headers=[("content-type", b"application/json"), *headers],
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["data"]["invalidFields"] == ["Idempotency-Key"]
    await _nothing_ran(feedback_upstream, callbacks)


async def test_31_6_two_idempotency_keys_are_422_and_200_characters_are_fine(
    http: httpx.AsyncClient,
) -> None:
    two = [("idempotency-key", "a"), ("idempotency-key", "b")]
    answer = await http.post("/ai/feedback", json=feedback_body(), headers=two)
    assert answer.status_code == 422
    assert answer.json()["data"]["invalidFields"] == ["Idempotency-Key"]
    longest, body = {"idempotency-key": "k" * 200}, feedback_body()
    first = await http.post("/ai/feedback", json=body, headers=longest)
    again = await http.post("/ai/feedback", json=body, headers=longest)
    assert first.status_code == again.status_code == 202
    assert first.json()["data"]["jobId"] == again.json()["data"]["jobId"]
    await wait_status(http, first.json()["data"]["jobId"], {"done"})
