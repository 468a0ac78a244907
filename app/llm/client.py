"""Streaming client for an OpenAI-compatible ``POST /chat/completions`` (vLLM).

``LLMClient.stream_chat`` yields content deltas as they arrive and raises a
``GatewayError`` subclass for every failure, so callers never see httpx or JSON errors:

    connection refused / reset, 4xx, 5xx, in-band ``{"error": ...}``,
    malformed event, stream cut before ``[DONE]``           -> UpstreamFailed (502)
    no byte for LLM_READ_TIMEOUT, or past LLM_TOTAL_TIMEOUT  -> UpstreamTimedOut (504)
    upstream 429/503, or no pooled connection free in time   -> Overloaded (503)

Closing the generator early (the browser left) closes the response, which closes the
upstream connection: vLLM sees the disconnect and aborts the generation.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

from app.config import Settings
from app.errors import GatewayError, Overloaded, UpstreamFailed, UpstreamTimedOut
from app.llm.schema import ANSWER_JSON_SCHEMA

__all__ = ["ChatMessage", "LLMClient", "iter_sse_data"]

log = logging.getLogger(__name__)

ChatMessage = dict[str, str]


def build_http_client(settings: Settings) -> httpx.AsyncClient:
    """The one pooled client of the process (owned by the lifespan)."""
    headers = {"accept": "text/event-stream"}
    if settings.llm_api_key is not None:
        headers["authorization"] = f"Bearer {settings.llm_api_key.get_secret_value()}"
    return httpx.AsyncClient(
        base_url=settings.llm_base_url + "/",
        headers=headers,
        timeout=httpx.Timeout(
            connect=settings.llm_connect_timeout,
            read=settings.llm_read_timeout,
            write=settings.llm_connect_timeout,
            pool=settings.llm_pool_timeout,
        ),
        limits=httpx.Limits(
            max_connections=settings.llm_max_connections,
            max_keepalive_connections=min(64, settings.llm_max_connections),
        ),
    )


async def iter_sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event, per the SSE rules (multi-line data joined)."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data.clear()
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
        # Other fields (event, id, retry) carry nothing we use.
    if data:
        yield "\n".join(data)


def _content_of(event: str) -> str | None:
    """The text delta of one upstream event; raises UpstreamFailed on anything malformed."""
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
    if not choices:  # the usage chunk
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
    def __init__(self, http: httpx.AsyncClient, settings: Settings) -> None:
        self._http = http
        self._settings = settings
        self._model: str | None = settings.llm_model

    async def model(self) -> str:
        """The configured model, or the first one the upstream lists (asked once)."""
        if self._model is None:
            try:
                response = await self._http.get("models")
                response.raise_for_status()
                self._model = str(response.json()["data"][0]["id"])
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
                raise _map_transport_error(exc, "listing models") from exc
        return self._model

    async def check(self) -> None:
        """Raise a GatewayError unless the upstream answers ``GET /models`` now."""
        try:
            response = await self._http.get("models", timeout=self._settings.llm_connect_timeout)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise _map_transport_error(exc, "checking readiness") from exc

    def _payload(self, model: str, messages: Sequence[ChatMessage]) -> dict[str, Any]:
        s = self._settings
        payload: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": s.llm_temperature,
            "top_p": s.llm_top_p,
            "top_k": s.llm_top_k,
            "repetition_penalty": s.llm_repetition_penalty,
            "max_tokens": s.llm_max_tokens,
        }
        if s.llm_structured_output:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "recommendation", "schema": ANSWER_JSON_SCHEMA},
            }
        return payload

    async def stream_chat(
        self, messages: Sequence[ChatMessage], *, request_id: str | None = None
    ) -> AsyncIterator[str]:
        """Yield the assistant's text as it streams; see the module docstring for failures."""
        payload = self._payload(await self.model(), messages)
        deadline = time.monotonic() + self._settings.llm_total_timeout
        headers = {"x-request-id": request_id} if request_id else None
        try:
            async with self._http.stream(
                "POST", "chat/completions", json=payload, headers=headers
            ) as response:
                if response.status_code != 200:
                    body = (await response.aread())[:500].decode("utf-8", "replace")
                    raise _map_status(response.status_code, body)
                done = False
                async for event in iter_sse_data(response.aiter_lines()):
                    if done:
                        continue  # read to the end so the connection goes back to the pool
                    if event.strip() == "[DONE]":
                        done = True
                        continue
                    content = _content_of(event)
                    if content:
                        yield content
                    if time.monotonic() > deadline:
                        raise UpstreamTimedOut("generation exceeded LLM_TOTAL_TIMEOUT")
                if not done:
                    raise UpstreamFailed("upstream stream ended before [DONE]")
        except GatewayError:
            raise
        except httpx.HTTPError as exc:
            raise _map_transport_error(exc, "streaming") from exc


def _map_status(status: int, body: str) -> GatewayError:
    detail = f"upstream answered {status}: {body}"
    if status in (429, 503):
        return Overloaded(detail, retry_after=2.0)
    return UpstreamFailed(detail)


def _map_transport_error(exc: BaseException, during: str) -> GatewayError:
    detail = f"upstream {type(exc).__name__} while {during}: {exc}"
    if isinstance(exc, httpx.PoolTimeout):
        return Overloaded(detail)
    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        return UpstreamTimedOut(detail)
    if isinstance(exc, httpx.HTTPStatusError):
        return _map_status(exc.response.status_code, "")
    return UpstreamFailed(detail)
