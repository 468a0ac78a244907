"""Fixtures for tests that run the real gateway against the scripted upstream.

Imported by tests/conftest.py. One scripted upstream and one gateway per session (starting
uvicorn takes about a second); every test starts from the ``ok`` scenario and clean stats.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gateway import GatewayProcess, free_port
from tests.support.store import bundled_store_template, store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

READ_TIMEOUT = 2.0


@pytest.fixture(scope="session")
def upstream() -> Iterator[ScriptedUpstreamThread]:
    with ScriptedUpstreamThread() as server:
        yield server


@pytest.fixture(scope="session")
def store_template() -> Path:
    return bundled_store_template()


@pytest.fixture
def store_path(store_template: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """QDRANT_PATH of a private copy of the bundled store (for one gateway)."""
    return str(store_copy(store_template, tmp_path_factory.mktemp("store") / "qdrant"))


def _store_env(template: Path, factory: pytest.TempPathFactory) -> dict[str, str]:
    return {"QDRANT_PATH": str(store_copy(template, factory.mktemp("store") / "qdrant"))}


@pytest.fixture(scope="session")
def gateway(
    upstream: ScriptedUpstreamThread,
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    env = {
        **_store_env(store_template, tmp_path_factory),
        "LLM_BASE_URL": upstream.base_url,
        "LLM_READ_TIMEOUT": str(READ_TIMEOUT),
        "SSE_PING_INTERVAL": "0.3",
        "MAX_MESSAGE_CHARS": "100",
    }
    with GatewayProcess(env) as gw:
        yield gw


@pytest.fixture(scope="session")
def refused_gateway(
    store_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A gateway whose upstream port has nobody listening."""
    env = {
        **_store_env(store_template, tmp_path_factory),
        "LLM_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",
        "LLM_MODEL": "m",
    }
    with GatewayProcess(env) as gw:
        yield gw


@pytest.fixture
def scripted(upstream: ScriptedUpstreamThread) -> Iterator[ScriptedUpstreamThread]:
    upstream.set_scenario("ok")
    upstream.reset()
    yield upstream
    upstream.set_scenario("ok")


@pytest.fixture
async def client(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        yield http
