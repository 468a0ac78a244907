"""REQUEST_HEADER_MAX_BYTES (32 KiB by default) holds however a request's head arrives: in one
write, in many small ones, or after a first request on the same connection (issue 31, item 4).

Raw sockets against the real gateway as scripts/run.sh starts it (uvloop, httptools and
``app.web.http_guard``): past the bound ``431`` and the connection closed; under it, served.
"""

from __future__ import annotations

import socket

from tests.support.gateway import GatewayProcess
from tests.support.raw_socket import closed_within, send_raw

MAX = 32 * 1024  # the default REQUEST_HEADER_MAX_BYTES (the shared gateway keeps it)


def _head(gateway: GatewayProcess, header_bytes: int) -> bytes:
    return (
        f"GET /health HTTP/1.1\r\nhost: 127.0.0.1:{gateway.port}\r\n"
        f"x-big: {'a' * header_bytes}\r\n\r\n"
    ).encode()


def test_a_head_over_the_bound_in_one_write_is_431(gateway: GatewayProcess) -> None:
    for size in (40_000, 100_000):
        closed, said = closed_within(send_raw(gateway, _head(gateway, size)), 5)
        assert closed, f"{size} bytes: the connection was kept"
        assert said.startswith(b"HTTP/1.1 431"), (size, said[:120])
        assert b'"status": 431' in said


def test_a_head_over_the_bound_in_many_small_writes_is_431(gateway: GatewayProcess) -> None:
    closed, said = closed_within(send_raw(gateway, _head(gateway, 40_000), piece=1000), 5)
    assert closed and said.startswith(b"HTTP/1.1 431"), said[:120]


def test_a_second_request_over_the_bound_on_a_kept_connection_is_431(
    gateway: GatewayProcess,
) -> None:
    """Pipelined behind a small request, in the same write: the first is answered, the
    second refused."""
    small = f"GET /health HTTP/1.1\r\nhost: 127.0.0.1:{gateway.port}\r\n\r\n".encode()
    closed, said = closed_within(send_raw(gateway, small + _head(gateway, 40_000)), 5)
    assert closed and said.startswith(b"HTTP/1.1 200"), said[:120]
    assert b"HTTP/1.1 431" in said, said[-200:]


def test_a_head_under_the_bound_is_served(gateway: GatewayProcess) -> None:
    for piece in (None, 1000):
        head = _head(gateway, 30_000)
        assert len(head) < MAX
        sock = send_raw(gateway, head, piece)
        sock.shutdown(socket.SHUT_WR)  # one request: the server closes after answering
        closed, said = closed_within(sock, 5)
        assert closed and said.startswith(b"HTTP/1.1 200"), (piece, said[:120])
