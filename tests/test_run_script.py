"""scripts/run.sh (README command 1): Ctrl-C stops the gateway and the vLLM it started, however
its output is piped. ``make run 2>&1 | tee run.log`` then Ctrl-C used to leave vLLM running:
the terminal's SIGINT stops ``tee`` too, and the cleanup died writing to the closed pipe.

vLLM is played by tests/support/fake_vllm.py (a fake venv whose python runs it), so the test
exercises the script itself in seconds; the terminal is played by a new session whose whole
process group gets the SIGINT, as a terminal's Ctrl-C does."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.fake_vllm import fake_vllm_venv
from tests.support.gateway import ROOT, free_port


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("piped", [True, False], ids=["piped-to-a-reader", "plain"])
def test_ctrl_c_stops_the_gateway_and_vllm(piped: bool, store_path: str, tmp_path: Path) -> None:
    gateway_port, vllm_port = free_port(), free_port()
    vllm_pidfile = tmp_path / "fake-vllm.pid"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LLM_", "QDRANT_", "API_KEYS", "MODEL"))
    }
    env.update(
        {
            "VLLM_VENV": str(fake_vllm_venv(tmp_path / "venv")),
            "MODEL": "org/fake-model",  # a hub name: no preflight, no fetch
            "PORT": str(vllm_port),
            "GATEWAY_PORT": str(gateway_port),
            "QDRANT_PATH": store_path,
            "LOG_DIR": str(tmp_path),
            "FAKE_VLLM_PIDFILE": str(vllm_pidfile),
            "LOG_FORMAT": "text",
        }
    )
    log = tmp_path / "run.log"
    # `| cat > log` plays `| tee run.log`: the reader also gets the Ctrl-C and goes away.
    command = f"scripts/run.sh 2>&1 | cat > {log}" if piped else f"scripts/run.sh > {log} 2>&1"
    run = subprocess.Popen(["bash", "-c", command], cwd=ROOT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{gateway_port}/ready"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert run.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.3)
        vllm_pid = int(vllm_pidfile.read_text())
        assert _alive(vllm_pid)

        pressed = time.monotonic()
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        run.wait(timeout=60)
        while _alive(vllm_pid) and time.monotonic() - pressed < 30:
            time.sleep(0.1)
        assert not _alive(vllm_pid), f"vLLM (pid {vllm_pid}) left running"
        with pytest.raises(httpx.ConnectError):
            httpx.get(url, timeout=2)
        # Both are down within the drain's own time, not after a timeout.
        assert time.monotonic() - pressed < 15
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        if vllm_pidfile.exists() and _alive(pid := int(vllm_pidfile.read_text())):
            os.kill(pid, signal.SIGKILL)
