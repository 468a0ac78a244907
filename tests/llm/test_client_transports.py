"""``LLMClient.stream_chat`` over both ``LLM_TRANSPORT`` choices, against the scripted upstream
on loopback: the same text, and the same gateway error for each upstream failure."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.chat.prompts import PromptInput, answer_messages
from app.config import Settings
from app.domain.categories import Category
from app.domain.errors import GatewayError, Overloaded, UpstreamFailed, UpstreamTimedOut
from app.llm.client import build_http_client
from tests.support.llm import llm_client
from tests.upstream.scripted_openai import DEFAULT_CONTENT, ScriptedUpstreamThread

pytestmark = pytest.mark.anyio

TRANSPORTS = ["aiohttp", "httpx"]
MESSAGES = answer_messages(
    PromptInput(category=Category.PLOGGING, candidates=(), message="플로깅 챌린지 추천해 줘"),
    "descriptions",
)


async def _stream(scripted: ScriptedUpstreamThread, transport: str, **extra: object) -> str:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        llm_base_url=scripted.base_url,
        llm_transport=transport,
        llm_model="scripted-model",
        **extra,
    )
    async with build_http_client(settings) as http:
        client = llm_client(http, settings)
        pieces: AsyncIterator[str] = client.stream_chat(MESSAGES)
        return "".join([piece async for piece in pieces])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_whole_answer_streams(scripted: ScriptedUpstreamThread, transport: str) -> None:
    text = await _stream(scripted, transport)
    assert text == DEFAULT_CONTENT  # every character the upstream sent, in order
    assert scripted.chat_requests[-1]["body"]["messages"][-1]["content"] == MESSAGES[-1]["content"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_keep_alive_serves_requests_in_a_row(
    scripted: ScriptedUpstreamThread, transport: str
) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, llm_base_url=scripted.base_url, llm_transport=transport
    )
    async with build_http_client(settings) as http:
        client = llm_client(http, settings)
        texts = ["".join([p async for p in client.stream_chat(MESSAGES)]) for _ in range(3)]
    assert texts == [DEFAULT_CONTENT] * 3


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("scenario", "params", "error"),
    [
        ("http_error", {"status": 500}, UpstreamFailed),
        ("http_error", {"status": 503}, Overloaded),
        ("inband_error", {}, UpstreamFailed),
        ("cut", {"after_chars": 20}, UpstreamFailed),
        ("cut", {"after_chars": 20, "partial_event": 'data: {"choi'}, UpstreamFailed),
        ("stall", {"after_chunks": 1, "hold": 5.0}, UpstreamTimedOut),
    ],
    ids=["500", "503", "inband", "cut", "cut-mid-event", "stall"],
)
async def test_each_failure_is_one_gateway_error(
    scripted: ScriptedUpstreamThread,
    transport: str,
    scenario: str,
    params: dict[str, object],
    error: type[GatewayError],
) -> None:
    scripted.set_scenario(scenario, **params)
    with pytest.raises(error):
        await _stream(scripted, transport, llm_read_timeout=0.5)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_refused_upstream_is_upstream_failed(transport: str) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        llm_base_url="http://127.0.0.1:9/v1",  # discard port: nothing listens
        llm_transport=transport,
        llm_model="m",
    )
    async with build_http_client(settings) as http:
        with pytest.raises(UpstreamFailed):
            async for _ in llm_client(http, settings).stream_chat(MESSAGES):
                pass
