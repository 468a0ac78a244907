"""REQUEST_HEADER_MAX_BYTES (32 KiB by default) holds however a request's head arrives: in one
write, in many small ones, or after a first request on the same connection (issue 31, item 4).

Raw sockets against the real gateway as scripts/run.sh starts it (uvloop, httptools and
``app.web.http_guard``): past the bound ``431`` and the connection closed; under it, served.
"""

from __future__ import annotations

import socket
import time

from tests.support.gateway import GatewayProcess

MAX = 32 * 1024  # the default REQUEST_HEADER_MAX_BYTES (the shared gateway keeps it)


def _head(gateway: GatewayProcess, header_bytes: int) -> bytes:
    return (
        f"GET /health HTTP/1.1\r\nhost: 127.0.0.1:{gateway.port}\r\n"
        f"x-big: {'a' * header_bytes}\r\n\r\n"
    ).encode()


def _answer(sock: socket.socket, seconds: float = 5) -> tuple[bool, bytes]:
    """What the server said within ``seconds``, and whether it closed the connection."""
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return False, received
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return True, received


def _send(gateway: GatewayProcess, data: bytes, piece: int | None = None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", gateway.port))
    if piece is None:
        sock.sendall(data)
        return sock
    try:
        for start in range(0, len(data), piece):
            sock.sendall(data[start : start + piece])
            time.sleep(0.0005)  # separate reads on the server
    except BrokenPipeError:  # refused before the whole head was sent
        pass
    return sock


def test_a_head_over_the_bound_in_one_write_is_431(gateway: GatewayProcess) -> None:
    for size in (40_000, 100_000):
        closed, said = _answer(_send(gateway, _head(gateway, size)))
        assert closed, f"{size} bytes: the connection was kept"
        assert said.startswith(b"HTTP/1.1 431"), (size, said[:120])
        assert b'"status": 431' in said


def test_a_head_over_the_bound_in_many_small_writes_is_431(gateway: GatewayProcess) -> None:
    closed, said = _answer(_send(gateway, _head(gateway, 40_000), piece=1000))
    assert closed and said.startswith(b"HTTP/1.1 431"), said[:120]


def test_a_second_request_over_the_bound_on_a_kept_connection_is_431(
    gateway: GatewayProcess,
) -> None:
    """Pipelined behind a small request, in the same write: the first is answered, the
    second refused."""
    small = f"GET /health HTTP/1.1\r\nhost: 127.0.0.1:{gateway.port}\r\n\r\n".encode()
    closed, said = _answer(_send(gateway, small + _head(gateway, 40_000)))
    assert closed and said.startswith(b"HTTP/1.1 200"), said[:120]
    assert b"HTTP/1.1 431" in said, said[-200:]


def test_a_head_under_the_bound_is_served(gateway: GatewayProcess) -> None:
    for piece in (None, 1000):
        head = _head(gateway, 30_000)
        assert len(head) < MAX
        sock = _send(gateway, head, piece)
        sock.shutdown(socket.SHUT_WR)  # one request: the server closes after answering
        closed, said = _answer(sock)
        assert closed and said.startswith(b"HTTP/1.1 200"), (piece, said[:120])
