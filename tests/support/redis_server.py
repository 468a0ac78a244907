"""A throwaway redis-server on a free loopback port (Debian's binary: scripts/install_redis.sh).

No persistence, its own working folder, retried when another process takes the free port
before redis binds it. Used by every test that needs Redis.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.gateway import free_port


def _pings(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """``with redis_server(tmp) as url:`` a ``redis://127.0.0.1:PORT/0`` that answers PING."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "redis-server is not on PATH: run scripts/install_redis.sh (Debian's redis-server)",
            pytrace=False,
        )
    log = workdir / "redis.log"
    for _attempt in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", str(workdir), "--logfile", str(log), "--daemonize", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline and not _pings(port):
            time.sleep(0.05)
        if proc.poll() is None and _pings(port):
            break
        _stop(proc)
    else:
        text = log.read_text(errors="replace") if log.exists() else "(no log)"
        pytest.fail(f"redis-server did not answer PING:\n{text}", pytrace=False)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)
