"""SIGTERM drains the gateway: open streams finish within SHUTDOWN_GRACE_SECONDS, the rest end
with one ``error`` 503, new connections are refused, and the process exits.

A real uvicorn subprocess (it is the one that installs the signal handlers) against the
scripted upstream: one short answer that finishes during the grace, one that never would.
"""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import anyio
import httpx
import pytest

from app.streams.log import SHUTDOWN_MESSAGE
from tests.support.gateway import GatewayProcess
from tests.support.sse import Frame, StreamResult, assert_well_formed, iter_frames
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread, expected_display_text

pytestmark = pytest.mark.anyio

BASE = "/ai/chatbot/recommendation/base-info"
GRACE = 3.0


def _params() -> dict[str, str]:
    return {"sessionId": f"shut-{uuid.uuid4().hex[:8]}", "location": "도시",
            "workType": "사무직", "category": "VEGAN"}  # fmt: skip


class _Reader:
    """Reads one stream to its end, noting when the first event and the last frame came."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.started = anyio.Event()
        self.ended_at = 0.0

    async def run(self, http: httpx.AsyncClient) -> None:
        async with http.stream("GET", BASE, params=_params()) as response:
            async for frame in iter_frames(response.aiter_lines()):
                self.frames.append(frame)
                if frame.event == "challenge":
                    self.started.set()
        self.ended_at = time.monotonic()


async def test_sigterm_lets_open_streams_finish_then_ends_the_rest_with_503(
    upstream: ScriptedUpstreamThread,
    scripted: ScriptedUpstreamThread,
    store_template: Path,
    tmp_path: Path,
) -> None:
    env = {
        "QDRANT_PATH": str(store_copy(store_template, tmp_path / "qdrant")),
        "LLM_BASE_URL": upstream.base_url,
        "SSE_PING_INTERVAL": "0.3",
        "SHUTDOWN_GRACE_SECONDS": str(GRACE),
        "LLM_TOTAL_TIMEOUT": "30",  # a failing drain shows up in seconds, not minutes
    }
    with GatewayProcess(env) as gw:
        process = gw.process
        assert process is not None
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
            short, long = _Reader(), _Reader()
            async with anyio.create_task_group() as group:
                scripted.set_scenario("ok", token_delay=0.015)  # about 2 s
                group.start_soon(short.run, http)
                with anyio.fail_after(10):
                    await short.started.wait()
                scripted.set_scenario("slow", token_delay=0.05)  # never ends by itself
                group.start_soon(long.run, http)
                with anyio.fail_after(10):
                    await long.started.wait()

                process.send_signal(signal.SIGTERM)
                term_at = time.monotonic()
                await anyio.sleep(0.5)
                with pytest.raises(httpx.ConnectError):  # the listening socket is closed
                    await http.get("/health", headers={"connection": "close"})

        with anyio.fail_after(GRACE + 10):
            while process.poll() is None:
                await anyio.sleep(0.05)
        exited_at = time.monotonic()
        log = gw.log_text()

    # The short one ran on after the signal and ended normally.
    assert short.ended_at > term_at
    assert short.frames and short.frames[-1].event == "close", short.frames[-3:]
    _check(short.frames)
    assert "".join(f.payload["data"] for f in short.frames if f.event == "challenge") == (
        expected_display_text()
    )
    # The long one got the grace, then exactly one error 503 with a retry hint, then nothing.
    _check(long.frames)
    error = long.frames[-1]
    assert error.event == "error"
    assert error.payload == {
        "status": 503,
        "message": SHUTDOWN_MESSAGE,
        "data": {"retryAfterSeconds": 5.0},
    }
    assert GRACE - 0.5 < long.ended_at - term_at < GRACE + 2, long.ended_at - term_at
    # Its upstream request was closed; the short one's completed.
    assert scripted.stats["streams_aborted_by_client"] == 1
    assert scripted.stats["streams_completed"] == 1
    assert scripted.stats["active_streams"] == 0
    # uvicorn re-raises the SIGTERM it handled once it is done: that is its clean exit.
    assert process.returncode == -signal.SIGTERM, process.returncode
    assert exited_at - term_at < GRACE + 5
    assert "Traceback" not in log, log[-4000:]
    assert "ending 1 stream(s) with error 503" in log


def _check(frames: list[Frame]) -> None:
    assert_well_formed(
        StreamResult(200, httpx.Headers({"content-type": "text/event-stream"}), frames)
    )
