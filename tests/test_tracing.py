"""Tracing (app/tracing.py) and token accounting, with the SDK's in-memory exporter: one trace
per turn, parented to the caller's span, its spans closed when the client leaves, the GenAI
attributes present, ``traceparent`` sent on to vLLM, feedback jobs joined to their request.

The gateway runs in this process (uvicorn in a task) so that its spans reach the exporter.
OTel's global provider is set once per process (OTel refuses a second; the modules' proxy
tracers keep the first): one for this module, emptied before each test.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.config import Settings
from app.main import create_app
from app.tracing import tracing_wanted
from tests.support.gateway import free_port
from tests.support.sse import read_stream
from tests.upstream.scripted_openai import ScriptedUpstreamThread

pytestmark = pytest.mark.anyio

FREE_TEXT = "/ai/chatbot/recommendation/free-text"
BASE_INFO = "/ai/chatbot/recommendation/base-info"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    yield _EXPORTER


@pytest.fixture
async def gateway(
    exporter: InMemorySpanExporter,
    upstream: ScriptedUpstreamThread,
    store_path: str,
) -> AsyncIterator[httpx.AsyncClient]:
    upstream.set_scenario("ok")
    upstream.reset()
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        llm_base_url=upstream.base_url,
        qdrant_path=store_path,
        sse_ping_interval=0.3,
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), port=port, log_level="warning", lifespan="on")
    )
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(30):
            while not server.started:
                await anyio.sleep(0.02)
        exporter.clear()
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                yield http
        finally:
            server.should_exit = True
    upstream.set_scenario("ok")


async def _ended(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    with anyio.fail_after(5):
        while True:
            for span in exporter.get_finished_spans():
                if span.name == name:
                    return span
            await anyio.sleep(0.01)


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def _by_name(spans: Any) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


async def test_one_trace_per_turn_parented_to_the_callers_span(
    gateway: httpx.AsyncClient, exporter: InMemorySpanExporter, upstream: ScriptedUpstreamThread
) -> None:
    gateway.headers["traceparent"] = TRACEPARENT
    result = await read_stream(
        gateway, FREE_TEXT, {"sessionId": "trace-s1", "message": "플로깅 하고 싶어요"}
    )
    assert result.terminal.event == "close"
    turn = await _ended(exporter, "turn free-text")
    spans = [s for s in exporter.get_finished_spans() if s.name != "GET /metrics"]
    assert {_hex(s.context.trace_id, 32) for s in spans} == {TRACE_ID}  # one trace
    named = _by_name(spans)
    (server,) = named[f"GET {FREE_TEXT}"]
    assert server.parent is not None and _hex(server.parent.span_id, 16) == CALLER_SPAN
    assert turn.parent is not None and turn.parent.span_id == server.context.span_id
    for child in ("intent", "retrieval.embed", "retrieval.search"):
        assert child in named, sorted(named)
    (attempt,) = [s for s in spans if s.name.startswith("chat ")]
    assert attempt.parent is not None and attempt.parent.span_id == turn.context.span_id
    assert [e.name for e in attempt.events] == ["gen_ai.first_token"]
    attributes = dict(turn.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.conversation.id"] == "trace-s1"
    assert attributes["gen_ai.request.model"] == (attempt.attributes or {})["gen_ai.request.model"]
    assert int(attributes["gen_ai.usage.input_tokens"]) > 0  # type: ignore[arg-type]
    assert int(attributes["gen_ai.usage.output_tokens"]) > 0  # type: ignore[arg-type]
    assert attributes["gateway.outcome"] == "close"
    # vLLM got the attempt's traceparent: same trace, the attempt span as its parent.
    sent = upstream.chat_requests[-1]["headers"]["traceparent"]
    assert sent == f"00-{TRACE_ID}-{_hex(attempt.context.span_id, 16)}-01"
    # Counted in Prometheus by endpoint and client, input and output.
    metrics = (await gateway.get("/metrics")).text
    counted = dict(
        re.findall(
            r'gateway_llm_tokens_total\{client="anonymous",endpoint="free-text",type="(\w+)"\} (\S+)',
            metrics,
        )
    )
    assert float(counted["input"]) == attributes["gen_ai.usage.input_tokens"]
    assert float(counted["output"]) == attributes["gen_ai.usage.output_tokens"]
    # What the user wrote never reaches the trace backend: the query keeps the session only.
    query = str((server.attributes or {})["url.query"])
    assert "message=REDACTED" in query and "sessionId=trace-s1" in query, query
    assert all("플로깅" not in str(v) for s in spans for v in (s.attributes or {}).values())


def _counter(metrics: str, name: str) -> float:
    """An unlabelled counter's value in the Prometheus text (0 while it has none)."""
    found = re.search(rf"^{name} (\S+)$", metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def _leave_after_the_opening(
    gateway: httpx.AsyncClient, until: Callable[[], Awaitable[object]]
) -> ReadableSpan:
    """A base-info turn whose client reads the first text (the gateway's opening, sent before
    the model is asked), waits ``until()`` and hangs up; the turn's span."""
    gateway.headers["traceparent"] = TRACEPARENT
    params = {"location": "산", "workType": "현장직", "category": "PLOGGING"}
    async with gateway.stream("GET", BASE_INFO, params=params) as response:  # then hang up
        lines = response.aiter_lines()  # held: a dropped iterator closes the stream
        async for line in lines:
            if line.startswith("event: challenge"):
                break
        await until()
    return await _ended(exporter=_EXPORTER, name="turn base-info")


async def _leave_while_the_model_writes(gateway: httpx.AsyncClient) -> ReadableSpan:
    """The turn's client hangs up once the gateway has read the model's first tokens."""
    before = _counter((await gateway.get("/metrics")).text, "gateway_tokens_out_total")

    async def tokens_read() -> None:
        with anyio.fail_after(10):
            while (
                _counter((await gateway.get("/metrics")).text, "gateway_tokens_out_total") <= before
            ):
                await anyio.sleep(0.01)

    return await _leave_after_the_opening(gateway, tokens_read)


async def test_a_client_that_leaves_closes_the_turns_spans_and_its_tokens_count(
    gateway: httpx.AsyncClient, exporter: InMemorySpanExporter, upstream: ScriptedUpstreamThread
) -> None:
    upstream.set_scenario("slow", token_delay=0.02)
    turn = await _leave_while_the_model_writes(gateway)
    attempt = next(s for s in exporter.get_finished_spans() if s.name.startswith("chat "))
    assert (turn.attributes or {})["gateway.outcome"] == "disconnected"
    assert (attempt.attributes or {})["gateway.aborted"] is True
    assert attempt.end_time is not None and turn.end_time is not None
    assert attempt.end_time <= turn.end_time
    # vLLM's usage in every event (continuous_usage_stats): the prompt and the tokens made so
    # far are exact, though the stream never reached its last event.
    attributes = turn.attributes or {}
    prompt, output = (
        attributes["gen_ai.usage.input_tokens"],
        attributes["gen_ai.usage.output_tokens"],
    )
    assert isinstance(prompt, int) and prompt > 0
    assert isinstance(output, int) and output > 0
    metrics = (await gateway.get("/metrics")).text
    assert 'gateway_llm_usage_unreported_total{endpoint="base-info"}' not in metrics
    assert f'endpoint="base-info",type="input"}} {float(prompt)}' in metrics
    assert f'endpoint="base-info",type="output"}} {float(output)}' in metrics


async def test_a_client_that_leaves_before_the_model_answers_aborts_its_request(
    gateway: httpx.AsyncClient, exporter: InMemorySpanExporter, upstream: ScriptedUpstreamThread
) -> None:
    # The model has not begun: the client read the gateway's opening and went.
    upstream.set_scenario("stall", after_chunks=0, hold=30, before_headers=True)

    async def asked() -> None:
        await upstream.upstream.wait_until(lambda: upstream.stats["active_streams"] == 1, 5)

    turn = await _leave_after_the_opening(gateway, asked)
    attempt = next(s for s in exporter.get_finished_spans() if s.name.startswith("chat "))
    assert (turn.attributes or {})["gateway.outcome"] == "disconnected"
    assert (attempt.attributes or {})["gateway.aborted"] is True
    # The request was dropped, not left to run: the upstream saw its client go.
    await upstream.upstream.wait_until(lambda: upstream.stats["streams_aborted_by_client"], 5)
    metrics = (await gateway.get("/metrics")).text
    assert _counter(metrics, "gateway_upstream_aborts_total") == 1.0, metrics


async def test_an_upstream_without_usage_is_counted_from_the_stream(
    gateway: httpx.AsyncClient, exporter: InMemorySpanExporter, upstream: ScriptedUpstreamThread
) -> None:
    upstream.set_scenario("slow", token_delay=0.02, include_usage=False)
    turn = await _leave_while_the_model_writes(gateway)
    output = (turn.attributes or {})["gen_ai.usage.output_tokens"]
    assert isinstance(output, int) and output > 0  # the content events seen
    assert (turn.attributes or {})["gen_ai.usage.input_tokens"] == 0  # unknown
    metrics = (await gateway.get("/metrics")).text
    assert 'gateway_llm_usage_unreported_total{endpoint="base-info"} 1.0' in metrics
    assert f'endpoint="base-info",type="output"}} {float(output)}' in metrics


async def test_a_post_turn_is_one_trace_too(
    gateway: httpx.AsyncClient, exporter: InMemorySpanExporter
) -> None:
    gateway.headers["traceparent"] = TRACEPARENT
    answer = await gateway.post(
        BASE_INFO,
        json={"sessionId": "p1", "location": "산", "workType": "현장직", "category": "VEGAN"},
    )
    assert answer.status_code == 200
    turn = await _ended(exporter, "turn base-info-json")
    server = await _ended(exporter, f"POST {BASE_INFO}")
    assert turn.parent is not None and turn.parent.span_id == server.context.span_id
    assert server.parent is not None and _hex(server.parent.span_id, 16) == CALLER_SPAN


async def test_a_feedback_job_is_traced_from_its_request_to_the_model(
    gateway: httpx.AsyncClient, exporter: InMemorySpanExporter
) -> None:
    gateway.headers["traceparent"] = TRACEPARENT
    body = {"memberId": 7, "personalChallenges": [{"id": 1, "title": "텀블러", "isSuccess": True}]}
    accepted = await gateway.post("/ai/feedback", json=body)
    assert accepted.status_code == 202, accepted.text
    job = await _ended(exporter, "feedback generate")
    assert _hex(job.context.trace_id, 32) == TRACE_ID
    attempt = next(s for s in exporter.get_finished_spans() if s.name.startswith("chat "))
    assert attempt.parent is not None and attempt.parent.span_id == job.context.span_id
    metrics = (await gateway.get("/metrics")).text
    assert 'endpoint="feedback",type="output"}' in metrics


def test_tracing_is_off_unless_the_otel_variables_ask() -> None:
    assert tracing_wanted({}) == []
    assert tracing_wanted({"OTEL_SERVICE_NAME": "x"}) == []
    assert tracing_wanted({"OTEL_TRACES_EXPORTER": "none"}) == []
    assert tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == ["otlp"]
    assert tracing_wanted({"OTEL_TRACES_EXPORTER": "otlp,console"}) == ["otlp", "console"]
    off = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}
    assert tracing_wanted(off) == []
