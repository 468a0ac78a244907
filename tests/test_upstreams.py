"""Several vLLM replicas behind one gateway (LLM_BASE_URL=a,b): balancing by fewest requests
in flight, failover before the first token only, health checks that skip a dead replica and
take it back, a cached /ready, and a session's turns kept on one replica. Scripted upstreams
and a real gateway, over loopback. The balancing tests turn session affinity off
(LLM_AFFINITY_SLACK=0): their sessions are fresh, so the least-loaded rule is what they see;
tests/llm/test_affinity.py has the choice with affinity in detail."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.e2e.vllm_server import metric_value
from tests.support.gateway import GatewayProcess, free_port
from tests.support.sse import StreamResult, assert_well_formed, read_stream
from tests.support.store import store_copy
from tests.upstream.scripted_openai import MODEL_ID, ScriptedUpstreamThread, expected_display_text

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
_counter = iter(range(1_000_000))


def _params() -> dict[str, str]:
    # A fresh session each time: one session may only run a couple of generations at once.
    sid = f"u{next(_counter)}"
    return {"sessionId": sid, "location": "도시", "workType": "사무직", "category": "VEGAN"}


def _env(store: Path, urls: list[str], **extra: str) -> dict[str, str]:
    return {
        "QDRANT_PATH": str(store),
        "LLM_BASE_URL": ",".join(urls),
        "LLM_MODEL": MODEL_ID,
        "LLM_READ_TIMEOUT": "2",
        "LLM_CONNECT_TIMEOUT": "1",
        "RATE_LIMIT_PER_MINUTE": "0",
        "LLM_AFFINITY_SLACK": "0",
        **extra,
    }


def _label(port: int) -> str:
    return f"127.0.0.1:{port}"


def _chats(up: ScriptedUpstreamThread) -> int:
    return len(up.chat_requests)


def _model_probes(up: ScriptedUpstreamThread) -> int:
    return sum(1 for r in up.requests if r["path"] == "/v1/models")


async def _metrics(http: httpx.AsyncClient) -> str:
    return (await http.get("/metrics")).text


async def _wait_metric(http: httpx.AsyncClient, name: str, value: float, **labels: str) -> None:
    with anyio.fail_after(5):
        while metric_value(await _metrics(http), name, **labels) != value:
            await anyio.sleep(0.05)


def _closed(result: StreamResult) -> None:
    assert_well_formed(result)
    assert result.terminal.event == "close", result.terminal.payload
    assert result.text == expected_display_text()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[ScriptedUpstreamThread, ScriptedUpstreamThread]]:
    with ScriptedUpstreamThread() as a, ScriptedUpstreamThread() as b:
        yield a, b


@pytest.fixture
def replicas(
    pair: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread],
) -> Iterator[tuple[ScriptedUpstreamThread, ScriptedUpstreamThread]]:
    for up in pair:
        up.set_scenario("ok")
        up.reset()
    yield pair
    for up in pair:
        up.set_scenario("ok")


@pytest.fixture(scope="module")
def pair_gateway(
    pair: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread],
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    store = store_copy(store_template, tmp_path_factory.mktemp("store") / "qdrant")
    # Health checks rarely (the probe count of /ready is asserted), /ready cached 1 s.
    env = _env(
        store,
        [up.base_url for up in pair],
        LLM_HEALTH_INTERVAL="600",
        READY_CACHE_SECONDS="1",
    )
    with GatewayProcess(env) as gw:
        yield gw


@pytest.fixture
async def http(pair_gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=pair_gateway.url, timeout=30) as client:
        yield client


# --------------------------------------------------------------------------- balancing


async def test_idle_replicas_take_turns_and_get_the_request_id(
    http: httpx.AsyncClient, replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread]
) -> None:
    a, b = replicas
    for _ in range(6):
        _closed(await read_stream(http, BASE, _params()))
    assert (_chats(a), _chats(b)) == (3, 3)
    for request in a.chat_requests + b.chat_requests:
        assert request["headers"]["x-request-id"]


async def test_new_requests_go_to_the_replica_with_fewer_in_flight(
    http: httpx.AsyncClient, replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread]
) -> None:
    a, b = replicas
    for up in replicas:
        up.set_scenario("slow", token_delay=0.02)  # streams until the client leaves
    async with http.stream("GET", BASE, params=_params()) as slow:
        lines = slow.aiter_lines()
        async for line in lines:
            if line.startswith("event: challenge"):
                break
        busy, idle = (a, b) if a.stats["active_streams"] else (b, a)
        assert (busy.stats["active_streams"], idle.stats["active_streams"]) == (1, 0)
        text = await _metrics(http)
        assert metric_value(text, "gateway_upstream_outstanding", upstream=_label(busy.port)) == 1
        assert metric_value(text, "gateway_upstream_outstanding", upstream=_label(idle.port)) == 0

        for up in replicas:
            up.set_scenario("ok")
        for _ in range(4):
            _closed(await read_stream(http, BASE, _params()))
        assert (_chats(busy), _chats(idle)) == (1, 4)
    with anyio.fail_after(5):
        while a.stats["active_streams"] or b.stats["active_streams"]:
            await anyio.sleep(0.01)
    await _wait_metric(http, "gateway_upstream_outstanding", 0, upstream=_label(busy.port))


async def test_concurrent_streams_spread_evenly(
    http: httpx.AsyncClient, replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread]
) -> None:
    a, b = replicas
    for up in replicas:
        up.set_scenario("ok", token_delay=0.01)
    results: list[StreamResult] = []

    async def one() -> None:
        results.append(await read_stream(http, BASE, _params()))

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(one)
    for result in results:
        _closed(result)
    # Each stream lasts over a second, so they overlap: fewest in flight evens them out.
    assert sorted((_chats(a), _chats(b))) in ([4, 4], [3, 5])


async def test_a_sessions_turns_stay_on_one_replica(
    replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread],
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    a, b = replicas
    store = store_copy(store_template, tmp_path_factory.mktemp("store") / "qdrant")
    env = _env(store, [a.base_url, b.base_url], LLM_AFFINITY_SLACK="4")
    with GatewayProcess(env) as gw:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
            for session in range(6):
                params = {**_params(), "sessionId": f"affinity-{session}"}
                before = (_chats(a), _chats(b))
                for _ in range(3):  # idle replicas: without affinity these would alternate
                    _closed(await read_stream(client, BASE, params))
                grew = (_chats(a) - before[0], _chats(b) - before[1])
                assert grew in ((3, 0), (0, 3)), grew
        assert "Traceback" not in gw.log_text()


# --------------------------------------------------------------------------- failover


@pytest.mark.parametrize("status", [503, 500, 429])
async def test_an_error_status_before_the_stream_fails_over(
    http: httpx.AsyncClient,
    replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread],
    status: int,
) -> None:
    a, b = replicas
    a.set_scenario("http_error", status=status)
    before = metric_value(await _metrics(http), "gateway_upstream_errors_total", kind="status")
    for _ in range(4):
        _closed(await read_stream(http, BASE, _params()))
    assert _chats(b) == 4
    assert _chats(a) >= 1  # it still gets tried: a busy replica is not a dead one
    after = metric_value(await _metrics(http), "gateway_upstream_errors_total", kind="status")
    assert after - before == _chats(a)
    text = await _metrics(http)
    assert metric_value(text, "gateway_upstream_healthy", upstream=_label(a.port)) == 1


async def test_no_failover_after_the_first_token(
    http: httpx.AsyncClient, replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread]
) -> None:
    a, b = replicas
    a.set_scenario("cut", after_chars=60)
    before = metric_value(await _metrics(http), "gateway_upstream_errors_total", kind="cut")
    results = [await read_stream(http, BASE, _params()) for _ in range(2)]  # one lands on a
    errors = [r for r in results if r.terminal.event == "error"]
    assert len(errors) == 1
    assert_well_formed(errors[0])
    assert errors[0].terminal.payload["status"] == 502
    assert errors[0].text  # text had been shown: retrying elsewhere would repeat it
    _closed(next(r for r in results if r.terminal.event == "close"))
    assert (_chats(a), _chats(b)) == (1, 1)  # the cut request was not sent again
    after = metric_value(await _metrics(http), "gateway_upstream_errors_total", kind="cut")
    assert after - before == 1


async def test_a_client_that_leaves_counts_as_an_upstream_abort(
    http: httpx.AsyncClient, replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread]
) -> None:
    for up in replicas:
        up.set_scenario("slow", token_delay=0.01)
    before = metric_value(await _metrics(http), "gateway_upstream_aborts_total")
    async with http.stream("GET", BASE, params=_params()) as response:
        async for line in response.aiter_lines():
            if line.startswith("event: challenge"):
                break
    await _wait_metric(http, "gateway_upstream_aborts_total", before + 1)


# --------------------------------------------------------------------------- /ready


async def test_ready_is_cached_so_probes_stay_bounded(
    http: httpx.AsyncClient, replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread]
) -> None:
    a, b = replicas
    started = time.monotonic()
    answers: list[httpx.Response] = []

    async def probe() -> None:
        answers.append(await http.get("/ready"))

    for _ in range(5):  # 5 bursts of 20 concurrent probes over about 1.2 s (cache: 1 s)
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(probe)
        await anyio.sleep(0.25)
    elapsed = time.monotonic() - started
    assert all(r.status_code == 200 for r in answers), answers[-1].text
    assert answers[-1].json()["data"] == {"llm": "ok", "retriever": "ok"}
    bound = int(elapsed / 1.0) + 1
    assert 1 <= _model_probes(a) <= bound, (_model_probes(a), elapsed)
    assert 1 <= _model_probes(b) <= bound, (_model_probes(b), elapsed)


# --------------------------------------------------------------------------- health


async def test_a_refused_replica_is_skipped_then_taken_back(
    replicas: tuple[ScriptedUpstreamThread, ScriptedUpstreamThread],
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    a, _ = replicas
    dead_port = free_port()  # nobody listens here (yet)
    dead = f"http://127.0.0.1:{dead_port}/v1"
    store = store_copy(store_template, tmp_path_factory.mktemp("store") / "qdrant")
    env = _env(store, [dead, a.base_url], LLM_HEALTH_INTERVAL="0.2")
    with GatewayProcess(env) as gw:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
            for _ in range(4):  # whoever marks it down first (a request or the check)
                _closed(await read_stream(client, BASE, _params()))
            await _wait_metric(client, "gateway_upstream_healthy", 0, upstream=_label(dead_port))
            text = await _metrics(client)
            assert metric_value(text, "gateway_upstream_healthy", upstream=_label(a.port)) == 1
            connects = metric_value(text, "gateway_upstream_errors_total", kind="connect")
            assert connects <= 1
            for _ in range(6):
                _closed(await read_stream(client, BASE, _params()))
            text = await _metrics(client)
            # Skipped: no request tried to connect to it any more.
            assert metric_value(text, "gateway_upstream_errors_total", kind="connect") == connects
            assert _chats(a) == 10

            with ScriptedUpstreamThread(port=dead_port) as back:
                await _wait_metric(
                    client, "gateway_upstream_healthy", 1, upstream=_label(dead_port)
                )
                for _ in range(4):
                    _closed(await read_stream(client, BASE, _params()))
                assert _chats(back) == 2  # in turn with a again
            # Gone again: requests still succeed (failover, then skipped).
            for _ in range(3):
                _closed(await read_stream(client, BASE, _params()))
            await _wait_metric(client, "gateway_upstream_healthy", 0, upstream=_label(dead_port))
        assert "Traceback" not in gw.log_text()


async def test_all_replicas_down_gives_one_clear_error_and_ready_503(
    store_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ports = [free_port(), free_port()]
    store = store_copy(store_template, tmp_path_factory.mktemp("store") / "qdrant")
    env = _env(store, [f"http://127.0.0.1:{p}/v1" for p in ports], LLM_HEALTH_INTERVAL="0.2")
    with GatewayProcess(env) as gw:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
            for port in ports:
                await _wait_metric(client, "gateway_upstream_healthy", 0, upstream=_label(port))
            started = time.monotonic()
            result = await read_stream(client, BASE, _params())
            assert time.monotonic() - started < 2
            assert_well_formed(result)
            assert result.terminal.event == "error"
            payload = result.terminal.payload
            assert payload["status"] == 502
            assert "127.0.0.1" not in payload["message"] and "http" not in payload["message"]
            # Best effort: both were tried once, even though both were marked down.
            text = await _metrics(client)
            assert metric_value(text, "gateway_upstream_errors_total", kind="connect") == 2

            ready = await client.get("/ready")
            assert ready.status_code == 503
            body = ready.json()
            assert body["status"] == 503
            assert body["data"] == {"llm": "unavailable", "retriever": "ok"}
            assert "언어 모델 서버" in body["message"]
            assert "127.0.0.1" not in ready.text and "http://" not in ready.text
