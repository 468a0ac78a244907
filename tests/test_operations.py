"""Operating the gateway: limits (API key, rate, per-session concurrency), request ids in
JSON logs and upstream, and the Prometheus metrics, all over real HTTP against a gateway
subprocess and the scripted upstream."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import anyio
import httpx
import pytest

from tests.support.gateway import GatewayProcess
from tests.support.sse import assert_well_formed, read_stream
from tests.upstream.scripted_openai import ScriptedUpstreamThread, expected_display_text

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
FREE = "/ai/chatbot/recommendation/free-text"
PARAMS = {"location": "도시", "workType": "사무직", "category": "VEGAN"}
KEY = "s3cret-key"


@pytest.fixture
def limited_gateway(upstream: ScriptedUpstreamThread, store_path: str) -> Iterator[GatewayProcess]:
    env = {
        "LLM_BASE_URL": upstream.base_url,
        "QDRANT_PATH": store_path,
        "RATE_LIMIT_PER_MINUTE": "6",  # per user: 3 at once, then one per 10 s
        "RATE_LIMIT_BURST": "3",
        "CLIENT_RATE_LIMIT_PER_MINUTE": "10",  # per client (key or address): 5 at once
        "CLIENT_RATE_LIMIT_BURST": "5",
        "API_KEYS": f"other-key,{KEY}",
        "SESSION_MAX_CONCURRENT": "1",
        "LOG_FORMAT": "json",
    }
    with GatewayProcess(env) as gateway:
        yield gateway


def _metric(text: str, name: str, labels: str = "") -> float:
    """The value of one sample of the Prometheus text ``text`` (0 when absent)."""
    pattern = re.escape(name + (f"{{{labels}}}" if labels else "")) + r" ([0-9.e+-]+)\n"
    match = re.search(pattern, text)
    return float(match.group(1)) if match else 0.0


async def test_api_key_is_required_of_callers_and_the_page_gets_in_by_its_token(
    limited_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    async with httpx.AsyncClient(base_url=limited_gateway.url, timeout=30) as http:
        refused = await read_stream(http, BASE, PARAMS)
        assert_well_formed(refused)
        assert len(refused.events) == 1 and refused.terminal.payload["status"] == 401
        wrong = await http.post(BASE, json=PARAMS, headers={"x-api-key": "nope"})
        assert wrong.status_code == 401 and "API 키" in wrong.json()["message"]
        assert scripted.chat_requests == []  # refused before any upstream call

        bearer = await http.post(BASE, json=PARAMS, headers={"authorization": f"Bearer {KEY}"})
        assert bearer.status_code == 200
        # A header any script can send is no key (docs/security.md)...
        forged = await http.get(BASE, params=PARAMS, headers={"sec-fetch-site": "same-origin"})
        assert forged.status_code == 200 and '"status":401' in forged.text.replace(" ", "")
        # ...the chat page gets in by the visitor token it is served with (a cookie).
        assert (await http.get("/")).headers["set-cookie"].startswith("eco_page=")
        page = await http.get(BASE, params=PARAMS)
        assert page.status_code == 200 and "event: close" in page.text


async def test_one_user_is_limited_by_its_session_with_a_retry_hint(
    limited_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    auth = {"x-api-key": KEY}
    user = {**PARAMS, "sessionId": "user-1"}
    async with httpx.AsyncClient(base_url=limited_gateway.url, timeout=30, headers=auth) as http:
        statuses = [(await http.post(BASE, json=user)).status_code for _ in range(3)]
        assert statuses == [200, 200, 200]  # the burst
        post = await http.post(BASE, json=user)
        assert post.status_code == 429
        assert 1 <= int(post.headers["retry-after"]) <= 30  # the burst refills in 30 s
        assert post.json()["data"]["retryAfterSeconds"] >= 1
        stream = await read_stream(http, BASE, user)
        assert_well_formed(stream)
        assert stream.terminal.event == "error" and stream.terminal.payload["status"] == 429
        assert "잠시 후" in stream.terminal.payload["message"]
        assert len(scripted.chat_requests) == 3

        # Another user of the same client is served; health is never limited.
        other = await http.post(BASE, json={**PARAMS, "sessionId": "user-2"})
        assert other.status_code == 200
        assert (await http.get("/health")).status_code == 200


async def test_one_client_is_limited_across_its_users_and_keys_count_apart(
    limited_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    async with httpx.AsyncClient(
        base_url=limited_gateway.url, timeout=30, headers={"x-api-key": KEY}
    ) as http:
        statuses = [
            (await http.post(BASE, json={**PARAMS, "sessionId": f"u{i}"})).status_code
            for i in range(6)
        ]
        assert statuses == [200] * 5 + [429]
        # X-Forwarded-For from a proxy that is not trusted changes nothing.
        forged = await http.post(
            BASE, json={**PARAMS, "sessionId": "u9"}, headers={"x-forwarded-for": "203.0.113.9"}
        )
        assert forged.status_code == 429
        other = await http.post(BASE, json=PARAMS, headers={"x-api-key": "other-key"})
        assert other.status_code == 200
        assert len(scripted.chat_requests) == 6


async def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_limit(
    upstream: ScriptedUpstreamThread, store_path: str, scripted: ScriptedUpstreamThread
) -> None:
    env = {
        "LLM_BASE_URL": upstream.base_url,
        "QDRANT_PATH": store_path,
        "CLIENT_RATE_LIMIT_PER_MINUTE": "4",
        "CLIENT_RATE_LIMIT_BURST": "2",
        "TRUSTED_PROXIES": "127.0.0.0/8",
    }
    with GatewayProcess(env) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:

            async def status(client: str) -> int:
                headers = {"x-forwarded-for": f"{client}, 127.0.0.1"}  # the last hop appended
                return (await http.post(BASE, json=PARAMS, headers=headers)).status_code

            assert [await status("198.51.100.1") for _ in range(3)] == [200, 200, 429]
            assert await status("198.51.100.2") == 200  # another user behind the same proxy


async def test_a_burst_of_relayed_users_from_one_address_is_served_on_the_defaults(
    upstream: ScriptedUpstreamThread, store_path: str, scripted: ScriptedUpstreamThread
) -> None:
    """A backend relays 60 users at once from its one address, no key, no forwarded header:
    each user has its own session, so none is refused as if they were one client."""
    env = {"LLM_BASE_URL": upstream.base_url, "QDRANT_PATH": store_path}
    with GatewayProcess(env, default_limits=True) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as http:
            statuses: list[int] = []

            async def user(number: int) -> None:
                body = {"sessionId": f"relayed-{number}", "message": "비건 챌린지 알려줘"}
                statuses.append((await http.post(FREE, json=body)).status_code)

            async with anyio.create_task_group() as group:
                for number in range(60):
                    group.start_soon(user, number)
        assert statuses == [200] * 60


async def test_one_session_runs_one_generation_at_a_time(
    limited_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.02)
    params = {**PARAMS, "sessionId": "tab-pair"}
    async with httpx.AsyncClient(
        base_url=limited_gateway.url, timeout=30, headers={"x-api-key": "other-key"}
    ) as http:
        first: list[str] = []
        async with anyio.create_task_group() as group:

            async def full() -> None:
                first.append((await read_stream(http, BASE, params)).text)

            group.start_soon(full)
            with anyio.fail_after(20):  # the first retrieval warms the embedder up
                while scripted.stats["active_streams"] < 1:
                    await anyio.sleep(0.01)
            second = await read_stream(http, BASE, params)
            other_session = await read_stream(http, BASE, {**params, "sessionId": "tab-other"})
        assert second.terminal.payload["status"] == 429
        assert second.terminal.payload["data"]["retryAfterSeconds"] > 0
        assert other_session.terminal.event == "close"
        assert first == [expected_display_text()]


async def test_request_id_goes_upstream_back_to_the_client_and_into_json_logs(
    limited_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("http_error", status=500)
    async with httpx.AsyncClient(base_url=limited_gateway.url, timeout=30) as http:
        given = await http.post(
            BASE, json=PARAMS, headers={"x-api-key": KEY, "x-request-id": "relay-42"}
        )
        minted = await http.get(
            BASE,
            params=PARAMS,
            headers={"x-api-key": KEY, "x-request-id": "bad id \u00e9".encode("latin-1")},
        )
    assert given.status_code == 502 and given.headers["x-request-id"] == "relay-42"
    minted_id = minted.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", minted_id)  # an unsafe id is replaced, not echoed
    upstream_ids = [r["headers"].get("x-request-id") for r in scripted.chat_requests]
    assert upstream_ids == ["relay-42", minted_id]

    lines = [
        json.loads(line) for line in limited_gateway.log_text().splitlines() if line[:1] == "{"
    ]
    failures = [line for line in lines if "upstream failed" in line["message"]]
    assert {line["request_id"] for line in failures} == {"relay-42", minted_id}
    assert all(line["level"] == "WARNING" and line["ts"].endswith("Z") for line in failures)


async def test_metrics_cover_latency_tokens_retrieval_errors_and_outcomes(
    gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        before = (await http.get("/metrics")).text
        ok = await read_stream(
            http, FREE, {"message": "사무실에서 할 수 있는 비건 챌린지 추천해 줘"}
        )
        assert ok.terminal.event == "close"
        scripted.set_scenario("cut")
        cut = await read_stream(http, BASE, PARAMS)
        assert cut.terminal.payload["status"] == 502
        scripted.set_scenario("ok")
        assert (await http.post(BASE, json=PARAMS)).status_code == 200
        after = (await http.get("/metrics")).text

    def grew(name: str, labels: str = "") -> float:
        return _metric(after, name, labels) - _metric(before, name, labels)

    assert grew("gateway_time_to_first_token_seconds_count") == 2  # the GET close and the POST
    assert grew("gateway_inter_token_latency_seconds_count") > 20
    assert grew("gateway_tokens_out_total") > 20
    # The free-text turn searches twice (its nearest documents, evidence of its category; then
    # its candidates), the base-info requests (in the city) twice each (their candidates; then
    # the field's classic first steps that fit the situation).
    assert grew("gateway_retrieval_seconds_count") == 6
    assert grew("gateway_requests_total", 'endpoint="free-text",outcome="close"') == 1
    assert grew("gateway_requests_total", 'endpoint="base-info",outcome="502"') == 1
    assert grew("gateway_requests_total", 'endpoint="base-info-json",outcome="close"') == 1
    assert grew("gateway_upstream_errors_total", 'kind="cut"') == 1
