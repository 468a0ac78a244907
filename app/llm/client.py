"""Streaming client for an OpenAI-compatible ``POST /chat/completions`` (vLLM).

``LLMClient.stream_chat`` yields content deltas as they arrive and raises a
``GatewayError`` subclass for every failure, so callers never see httpx or JSON errors:

    connection refused / reset, 4xx, 5xx, in-band ``{"error": ...}``,
    malformed event, stream cut before ``[DONE]``           -> UpstreamFailed (502)
    no byte for LLM_READ_TIMEOUT, or past LLM_TOTAL_TIMEOUT  -> UpstreamTimedOut (504)
    upstream 429/503, or no pooled connection free in time   -> Overloaded (503)

With several replicas (``app/llm/upstreams.py``), a request that cannot connect (refused,
reset, connect timeout) or is answered 429/5xx before its stream starts moves on to the next
replica, each tried at most once; the error is then that of the last one tried. Once the
stream has started (status 200) nothing is retried. A read timeout is not retried either:
the replica may still be working on it, and a second try doubles the load when it is highest.

``LLMClient.complete`` is the non-streaming call (background jobs: the weekly feedback), on
the same replicas with the same failover and errors.

Closing the generator early (the browser left) closes the response, which closes the
upstream connection: vLLM sees the disconnect and aborts the generation. That, and giving
up on a timeout, count in ``gateway_upstream_aborts``.

Each attempt on a replica is a client span (``chat MODEL``, GenAI attributes, the first token as
an event, the usage when it ends) whose ``traceparent`` goes to vLLM with the request; a
``usage`` given to either call is filled with vLLM's token usage (``app/llm/usage.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from app.config import UpstreamSettings
from app.domain.errors import GatewayError, UpstreamFailed, UpstreamTimedOut
from app.llm.failures import (
    error_kind,
    error_of_status,
    error_of_transport,
    event_error_kind,
    is_connect_failure,
    worth_another_replica,
)
from app.llm.schema import ANSWER_JSON_SCHEMA
from app.llm.sse_decode import iter_sse_data
from app.llm.transport import UpstreamTransport
from app.llm.upstreams import Upstream, UpstreamPool
from app.llm.usage import TokenUsage
from app.metrics import Metrics

__all__ = ["ChatMessage", "LLMClient", "chat_payload", "iter_sse_data"]

log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)  # a proxy: app/tracing.py

ChatMessage = dict[str, str]

KEEPALIVE_EXPIRY = 4.0  # seconds an idle upstream connection is kept
_DEFAULT_MAX_TOKENS = 768


def build_http_client(settings: UpstreamSettings) -> httpx.AsyncClient:
    """The one pooled client of the process (owned by the lifespan), shared by all replicas:
    requests use absolute URLs (``Upstream.url``), and the limits are for all of them.

    Its transport is :class:`UpstreamTransport` (httpx-aiohttp, ``LLM_TRANSPORT=aiohttp``, the
    default) or httpx's own (``LLM_TRANSPORT=httpx``); neither reads the HTTP(S)_PROXY variables.
    """
    headers = {"accept": "text/event-stream", "accept-encoding": "identity"}
    if settings.llm_api_key is not None:
        headers["authorization"] = f"Bearer {settings.llm_api_key.get_secret_value()}"
    limits = httpx.Limits(
        max_connections=settings.llm_max_connections,
        # Keep them all: under steady load a closed one is a new TCP connection per request.
        max_keepalive_connections=settings.llm_max_connections,
        # Below uvicorn's (vLLM's server) 5 s, so the server does not close one as it is reused.
        keepalive_expiry=KEEPALIVE_EXPIRY,
    )
    transport: httpx.AsyncBaseTransport = (
        UpstreamTransport(
            max_connections=settings.llm_max_connections, keepalive_expiry=KEEPALIVE_EXPIRY
        )
        if settings.llm_transport == "aiohttp"
        else httpx.AsyncHTTPTransport(limits=limits, trust_env=False)
    )
    return httpx.AsyncClient(
        headers=headers,
        timeout=httpx.Timeout(
            connect=settings.llm_connect_timeout,
            read=settings.llm_read_timeout,
            write=settings.llm_connect_timeout,
            pool=settings.llm_pool_timeout,
        ),
        transport=transport,
        trust_env=False,
    )


def chat_payload(
    settings: UpstreamSettings,
    model: str,
    messages: Sequence[ChatMessage],
    schema: dict[str, Any] | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """The body of one streaming ``POST /chat/completions`` (also what bench/vllm_bench.py
    sends directly, so both paths ask vLLM for exactly the same work). ``schema`` replaces
    the answer's default JSON schema (``app/llm/schema.py``); ``max_tokens`` the setting."""
    s = settings
    payload: dict[str, Any] = {
        "model": model,
        "messages": list(messages),
        "stream": True,
        # The usage in every event, not only after the last: a stream the gateway closes early
        # (the client left, a loop, a timeout) still knows its prompt and output exactly.
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": s.llm_temperature,
        "top_p": s.llm_top_p,
        "top_k": s.llm_top_k,
        "repetition_penalty": s.llm_repetition_penalty,
        "max_tokens": max_tokens or s.llm_max_tokens or _DEFAULT_MAX_TOKENS,
    }
    if s.llm_structured_output:
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "recommendation", "schema": schema or ANSWER_JSON_SCHEMA},
        }
    return payload


def _content_of(event: bytes, usage: TokenUsage | None = None) -> str | None:
    """The text delta of one upstream event (the usage event's goes to ``usage``); raises
    UpstreamFailed on anything malformed."""
    try:
        chunk = json.loads(event)
    except ValueError as exc:
        raise UpstreamFailed(f"malformed upstream event: {event[:200]!r}") from exc
    if not isinstance(chunk, dict):
        raise UpstreamFailed(f"upstream event is not an object: {event[:200]!r}")
    if "error" in chunk:
        raise UpstreamFailed(f"upstream in-band error: {str(chunk['error'])[:500]}")
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        raise UpstreamFailed(f"upstream event without choices: {event[:200]!r}")
    if usage is not None and "usage" in chunk:  # every event's (continuous_usage_stats)
        usage.read(chunk["usage"])
    if not choices:  # the last usage event
        return None
    choice = choices[0]
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        raise UpstreamFailed(f"upstream choice without delta: {event[:200]!r}")
    content = delta.get("content")
    if content is None:
        return None
    if not isinstance(content, str):
        raise UpstreamFailed(f"upstream content is not text: {event[:200]!r}")
    return content


class LLMClient:
    def __init__(
        self,
        http: httpx.AsyncClient,
        settings: UpstreamSettings,
        *,
        metrics: Metrics,
        upstreams: UpstreamPool,
    ) -> None:
        """``upstreams``: the replicas, opened by the caller (``async with``: their health
        checks run while it is open) on this same ``http`` client."""
        self._http = http
        self._settings = settings
        self._metrics = metrics
        self._pool = upstreams
        self._model: str | None = settings.llm_model

    @property
    def upstreams(self) -> UpstreamPool:
        return self._pool

    async def model(self) -> str:
        """The configured model, or the first one an upstream lists (asked until one answers)."""
        if self._model is None:
            error: GatewayError | None = None
            for upstream in self._pool.candidates():
                try:
                    response = await self._http.get(upstream.url("models"))
                    response.raise_for_status()
                    self._model = str(response.json()["data"][0]["id"])
                    break
                except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
                    error = error_of_transport(exc, f"listing models of {upstream.label}")
                    if is_connect_failure(exc):
                        self._pool.mark_down(upstream, f"{type(exc).__name__} listing models")
                    self._count(error_kind(exc))
            else:
                assert error is not None
                raise error
        return self._model

    async def check(self) -> None:
        """Raise a GatewayError unless at least one replica answers ``GET /models`` now."""
        if not any(await self._pool.check_all()):
            raise UpstreamFailed("no upstream replica answers GET /models")

    async def stream_chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        request_id: str | None = None,
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        routing_key: str | None = None,
        usage: TokenUsage | None = None,
    ) -> AsyncGenerator[str, None]:
        """Yield the assistant's text as it streams; see the module docstring for failures.
        ``routing_key`` (the session id) keeps a conversation on one replica (upstreams.py);
        ``usage`` is filled as the stream goes (vLLM's figures, else the content events seen)."""
        payload = chat_payload(self._settings, await self.model(), messages, schema, max_tokens)
        deadline = time.monotonic() + self._settings.llm_total_timeout
        headers = {"x-request-id": request_id} if request_id else None
        usage = TokenUsage() if usage is None else usage
        usage.model = payload["model"]
        upstream, response, span = await self._open(payload, headers, routing_key=routing_key)
        done = False
        first = True
        try:
            # Identity is asked for; a proxy that compresses anyway gets decoded.
            identity = "content-encoding" not in response.headers
            body = response.aiter_raw() if identity else response.aiter_bytes()
            async for event in iter_sse_data(body):
                if done:
                    continue  # read to the end so the connection goes back to the pool
                if event.strip() == b"[DONE]":
                    done = True
                    continue
                try:
                    content = _content_of(event, usage)
                except UpstreamFailed:
                    self._count(event_error_kind(event))
                    raise
                if content:
                    usage.saw_chunk()
                    if first:
                        first = False
                        span.add_event("gen_ai.first_token")
                    yield content
                if time.monotonic() > deadline:
                    self._count("timeout", abort=True)
                    raise UpstreamTimedOut("generation exceeded LLM_TOTAL_TIMEOUT")
            if not done:
                self._count("cut")
                raise UpstreamFailed(f"{upstream.label}: stream ended before [DONE]")
        except httpx.HTTPError as exc:
            error = error_of_transport(exc, f"streaming from {upstream.label}")
            timed_out = isinstance(error, UpstreamTimedOut)
            self._count("timeout" if timed_out else "cut", abort=timed_out)
            _failed(span, error)
            raise error from exc
        except GatewayError as error:
            _failed(span, error)
            raise
        except (GeneratorExit, asyncio.CancelledError):
            if not done:  # the consumer left: closing the response aborts the generation
                self._metrics.upstream_aborts.inc()
                span.set_attribute("gateway.aborted", True)
            raise
        finally:
            try:
                await response.aclose()
            finally:
                self._pool.release(upstream)
                self._spent(usage)
                _end(span, usage)

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        options: dict[str, Any],
        read_timeout: float,
        request_id: str | None = None,
        usage: TokenUsage | None = None,
    ) -> str:
        """One non-streaming ``POST /chat/completions`` (background jobs such as the weekly
        feedback): the assistant's whole text. ``options`` are the request's sampling fields
        (and e.g. vLLM's ``priority``); ``read_timeout`` bounds every read, since a non-streamed
        answer sends no byte until it is done. Same replicas, failover and errors as
        :meth:`stream_chat`; ``usage`` gets the answer's token usage."""
        payload = {"model": await self.model(), "messages": list(messages), **options}
        payload["stream"] = False
        headers = {"accept": "application/json"}
        if request_id:
            headers["x-request-id"] = request_id
        usage = TokenUsage() if usage is None else usage
        usage.model = payload["model"]
        upstream, response, span = await self._open(payload, headers, read_timeout=read_timeout)
        try:
            try:
                body = await response.aread()
            except httpx.HTTPError as exc:
                error = error_of_transport(exc, f"reading from {upstream.label}")
                self._count("timeout" if isinstance(error, UpstreamTimedOut) else "cut")
                raise error from exc
            finally:
                try:
                    await response.aclose()
                finally:
                    self._pool.release(upstream)
            try:
                answer = json.loads(body)
                content = answer["choices"][0]["message"]["content"]
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                self._count("malformed")
                raise UpstreamFailed(
                    f"{upstream.label}: unreadable completion {body[:200]!r}"
                ) from exc
            if not isinstance(content, str):
                self._count("malformed")
                raise UpstreamFailed(f"{upstream.label}: completion without text")
            usage.read(answer.get("usage"))
            return content
        except GatewayError as error:
            _failed(span, error)
            raise
        finally:
            self._spent(usage)
            _end(span, usage)

    async def _open(
        self,
        payload: dict[str, Any],
        headers: dict[str, str] | None,
        *,
        read_timeout: float | None = None,
        routing_key: str | None = None,
    ) -> tuple[Upstream, httpx.Response, Span]:
        """Send the request to the best replica whose answer starts a stream (status 200),
        failing over per the module docstring. The caller releases the replica and ends the
        attempt's span. ``read_timeout`` replaces the client's read timeout for this request."""
        request_timeout = (
            httpx.USE_CLIENT_DEFAULT
            if read_timeout is None
            else httpx.Timeout(
                connect=self._settings.llm_connect_timeout,
                read=read_timeout,
                write=self._settings.llm_connect_timeout,
                pool=self._settings.llm_pool_timeout,
            )
        )
        candidates = self._pool.candidates(routing_key)
        for attempt, upstream in enumerate(candidates, start=1):
            last = attempt == len(candidates)
            self._pool.acquire(upstream)
            span = _attempt_span(payload, upstream, attempt)
            streaming = False
            try:
                request = self._http.build_request(
                    "POST",
                    upstream.chat_url,
                    json=payload,
                    headers=_traced(headers, span),
                    timeout=request_timeout,
                )
                try:
                    response = await self._http.send(request, stream=True)
                except httpx.HTTPError as exc:
                    error = error_of_transport(exc, f"connecting to {upstream.label}")
                    if is_connect_failure(exc):
                        self._pool.mark_down(upstream, f"{type(exc).__name__} on a request")
                        self._count("connect")
                        if not last:
                            log.warning("upstream %s: %s; trying another", upstream.label, exc)
                            _failed(span, error)
                            continue
                    elif not isinstance(exc, httpx.PoolTimeout):  # ours, not the upstream's
                        self._count(error_kind(exc), abort=isinstance(error, UpstreamTimedOut))
                    raise error from exc
                if response.status_code == 200:
                    streaming = True
                    return upstream, response, span
                try:
                    body = (await response.aread())[:500].decode("utf-8", "replace")
                except httpx.HTTPError:
                    body = ""
                finally:
                    await response.aclose()
                self._count("status")
                error = error_of_status(response.status_code, body)
                if not last and worth_another_replica(response.status_code):
                    _failed(span, error)
                    log.warning(
                        "upstream %s answered %s; trying another",
                        upstream.label,
                        response.status_code,
                    )
                    continue
                raise error
            except GatewayError as error:
                _failed(span, error)
                raise
            except asyncio.CancelledError:
                # The consumer left before the answer began (a client that read the gateway's
                # opening and went): the request is dropped, and its generation with it.
                self._metrics.upstream_aborts.inc()
                span.set_attribute("gateway.aborted", True)
                raise
            finally:
                if not streaming:
                    self._pool.release(upstream)
                    span.end()
        raise AssertionError("unreachable: the last candidate returns or raises")

    def _spent(self, usage: TokenUsage) -> None:
        """Count one request's tokens, once, however it ended."""
        tokens = self._metrics.llm_tokens
        tokens.labels(usage.endpoint, usage.client, "input").inc(usage.input_tokens)
        tokens.labels(usage.endpoint, usage.client, "output").inc(usage.output_tokens)
        if not usage.reported:
            self._metrics.llm_usage_unreported.labels(usage.endpoint).inc()

    def _count(self, kind: str, *, abort: bool = False) -> None:
        self._metrics.upstream_errors.labels(kind).inc()
        if abort:
            self._metrics.upstream_aborts.inc()


def _attempt_span(payload: dict[str, Any], upstream: Upstream, attempt: int) -> Span:
    """One attempt's client span, a child of the current one (the turn, or a feedback job)."""
    return _tracer.start_span(
        f"chat {payload['model']}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": payload["model"],
            "gen_ai.request.max_tokens": payload.get("max_tokens") or 0,
            "server.address": upstream.chat_url.host,
            "server.port": upstream.chat_url.port or 80,
            "gateway.upstream.attempt": attempt,
        },
    )


def _traced(headers: dict[str, str] | None, span: Span) -> dict[str, str] | None:
    """``headers`` plus the attempt's ``traceparent`` (nothing added when nothing is traced)."""
    if not span.get_span_context().is_valid:
        return headers
    traced = dict(headers or {})
    propagate.inject(traced, context=trace.set_span_in_context(span))
    return traced


def _failed(span: Span, error: GatewayError) -> None:
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    span.set_attribute("error.type", str(error.status))


def _end(span: Span, usage: TokenUsage) -> None:
    if span.is_recording():
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        span.set_attribute("gateway.usage.reported", usage.reported)
    span.end()
