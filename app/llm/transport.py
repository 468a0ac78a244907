"""The transport under the upstream client: httpx-aiohttp, aiohttp's C-accelerated HTTP/1.1
stack behind httpx's API, with the three things it leaves to its caller.

- **A full pool.** aiohttp reports the wait for a free connection as a connect timeout, as it
  reports a refused connection; here a connect timeout while every connection is in use is
  ``httpx.PoolTimeout`` (the gateway's 503, "busy"), not a replica that is down.
- **A refused connection** is ``httpx.ConnectError``, as httpx's own transport says it.
- **A stale keep-alive connection.** A request sent on a pooled connection that the server had
  already closed fails before any response; aiohttp never resends a POST. It is sent once more,
  on a new connection: the server never read it (our bodies are bytes, so it can be resent).
  A server that closes without answering twice is ``httpx.RemoteProtocolError``.
- **A malformed response** (status line, headers, chunk framing) is
  ``httpx.RemoteProtocolError``, wherever aiohttp notices it; some of its errors would
  otherwise escape as aiohttp's own.

Chosen by measurement against our former hand-written transport and httpx's own:
bench/README.md "Upstream transports".
"""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

__all__ = ["UpstreamTransport"]

_STALE_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED})


def _stale(exc: BaseException) -> bool:
    """The connection was closed by the server before it answered (not refused, not slow)."""
    cause = exc.__cause__
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        return True
    return (
        isinstance(cause, aiohttp.ClientOSError)
        and not isinstance(cause, aiohttp.ClientConnectorError)
        and cause.errno in _STALE_ERRNOS
    )


class _Counted(httpx.AsyncByteStream):
    """A response body that gives its connection back to the count when closed."""

    def __init__(self, inner: httpx.AsyncByteStream, owner: UpstreamTransport) -> None:
        self._inner = inner
        self._owner = owner
        self._open = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx.ReadError as exc:
            if isinstance(exc.__cause__, aiohttp.ClientPayloadError):
                raise httpx.RemoteProtocolError(f"malformed body: {exc}") from exc
            raise
        except aiohttp.ClientError as exc:
            raise httpx.RemoteProtocolError(f"malformed response: {exc}") from exc

    async def aclose(self) -> None:
        if self._open:
            self._open = False
            self._owner.in_use -= 1
        await self._inner.aclose()


class UpstreamTransport(httpx.AsyncBaseTransport):
    def __init__(self, *, max_connections: int, keepalive_expiry: float = 4.0) -> None:
        limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
        )
        self._inner = AiohttpTransport(limits=limits, trust_env=False)
        self._max = max_connections
        self.in_use = 0  # responses whose body is still open: each holds a connection

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for attempt in (1, 2):
            try:
                response = await self._inner.handle_async_request(request)
            except aiohttp.ClientResponseError as exc:  # a status line or header it cannot read
                raise httpx.RemoteProtocolError(
                    f"malformed response: {exc}", request=request
                ) from exc
            except (httpx.ConnectTimeout, httpx.ConnectError) as exc:
                if isinstance(exc.__cause__, aiohttp.ClientConnectorError):
                    raise httpx.ConnectError(str(exc), request=request) from exc.__cause__
                if _stale(exc):
                    if attempt == 1:
                        continue
                    raise httpx.RemoteProtocolError(
                        "the server closed the connection without answering", request=request
                    ) from exc
                if isinstance(exc, httpx.ConnectTimeout) and self.in_use >= self._max:
                    raise httpx.PoolTimeout("no free upstream connection", request=request) from exc
                raise
            self.in_use += 1
            assert isinstance(response.stream, httpx.AsyncByteStream)
            response.stream = _Counted(response.stream, self)
            return response
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def aclose(self) -> None:
        await self._inner.aclose()
