"""Bytes straight to a gateway's socket, and what comes back: for heads and bodies that no
HTTP client would send (too big, never ended, trickled in pieces)."""

from __future__ import annotations

import socket
import time

from tests.support.gateway import GatewayProcess


def send_raw(gateway: GatewayProcess, data: bytes, piece: int | None = None) -> socket.socket:
    """A connection to ``gateway`` that has sent ``data``, in one write or in writes of
    ``piece`` bytes (a refusal before the last one ends the sending, not the test)."""
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


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed the connection within ``seconds``, and what it said; the
    socket is closed either way."""
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
