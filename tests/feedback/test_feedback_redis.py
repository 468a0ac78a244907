"""The durable queue: real Redis (tests/support/redis_server.py), real gateways on loopback.

A gateway killed (SIGKILL) in the middle of a generation: after a restart the job is run
again by the sweep and delivered once. A worker of its own (``python -m app.feedback.worker``)
runs the jobs of a gateway that runs none. The results stream resumes from Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.feedback.receiver import CallbackReceiver
from tests.feedback.requests import FEEDBACK_TEXT, feedback_body
from tests.feedback.test_feedback_api import gateway_env
from tests.support.gateway import ROOT, GatewayProcess
from tests.support.redis_server import redis_server
from tests.support.sse import iter_frames
from tests.support.store import store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture
def env(
    redis_url: str,
    feedback_upstream: ScriptedUpstreamThread,
    callbacks: CallbackReceiver,
    store_template: Path,
    tmp_path: Path,
    fresh: None,
) -> dict[str, str]:
    store = store_copy(store_template, tmp_path / "q")
    return gateway_env(
        feedback_upstream,
        callbacks.url,
        store,
        REDIS_URL=redis_url,
        FEEDBACK_HEARTBEAT_SECONDS="1",
        FEEDBACK_SWEEP_SECONDS="1",
        FEEDBACK_QUEUE_NAME=f"q-{tmp_path.name}",  # one queue and key space per test
        FEEDBACK_REDIS_PREFIX=f"fb-{tmp_path.name}:",
    )


def poll_done(url: str, job_id: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        data = httpx.get(f"{url}/ai/feedback/{job_id}", timeout=5).json()["data"]
        if data["status"] == "done" and data["delivery"] != "pending":
            return data
        assert time.monotonic() < deadline, data
        time.sleep(0.1)


def test_killed_mid_job_completes_after_restart_delivered_once(
    env: dict[str, str], feedback_upstream: ScriptedUpstreamThread, callbacks: CallbackReceiver
) -> None:
    feedback_upstream.set_scenario("stall", hold=60)
    key = {"idempotency-key": "member-7-week-18"}
    body = feedback_body()  # a retry sends the very same request
    with GatewayProcess(env) as first:
        answer = httpx.post(f"{first.url}/ai/feedback", json=body, headers=key)
        assert answer.status_code == 202
        job_id = answer.json()["data"]["jobId"]
        feedback_upstream.wait_until(lambda: len(feedback_upstream.chat_requests) == 1, 10)
        view = httpx.get(f"{first.url}/ai/feedback/{job_id}").json()["data"]
        assert view["status"] == "running"
        assert first.process is not None
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait(10)
    feedback_upstream.set_scenario("ok", content=FEEDBACK_TEXT)
    with GatewayProcess(env) as second:
        # The same key still names the same job.
        again = httpx.post(f"{second.url}/ai/feedback", json=body, headers=key)
        assert again.json()["data"]["jobId"] == job_id
        done = poll_done(second.url, job_id)
        assert done["content"] == FEEDBACK_TEXT and done["delivery"] == "delivered"
        time.sleep(1.5)  # a second delivery would come within this
    assert [b["jobId"] for b in callbacks.bodies()] == [job_id]


def test_separate_worker_process_runs_the_jobs(
    env: dict[str, str], callbacks: CallbackReceiver
) -> None:
    with GatewayProcess({**env, "FEEDBACK_IN_PROCESS_WORKERS": "false"}) as gateway:
        answer = httpx.post(f"{gateway.url}/ai/feedback", json=feedback_body(member_id=5))
        job_id = answer.json()["data"]["jobId"]
        time.sleep(0.5)
        assert httpx.get(f"{gateway.url}/ai/feedback/{job_id}").json()["data"]["status"] == "queued"
        worker_env = {**os.environ, **env, "LOG_FORMAT": "text"}
        worker = subprocess.Popen(
            [sys.executable, "-m", "app.feedback.worker"],
            cwd=ROOT,
            env=worker_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            done = poll_done(gateway.url, job_id)
        finally:
            worker.send_signal(signal.SIGTERM)
            output, _ = worker.communicate(timeout=20)
        assert done["delivery"] == "delivered", output.decode(errors="replace")
        assert worker.returncode == 0, output.decode(errors="replace")
    assert [b["jobId"] for b in callbacks.bodies()] == [job_id]


async def test_results_stream_resumes_from_redis(env: dict[str, str]) -> None:
    with GatewayProcess(env) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as http:
            ids = []
            for member in (1, 2):
                answer = await http.post("/ai/feedback", json=feedback_body(member_id=member))
                ids.append(answer.json()["data"]["jobId"])
                while (await http.get(f"/ai/feedback/{ids[-1]}")).json()["data"][
                    "status"
                ] != "done":
                    await anyio.sleep(0.05)
            events = []
            headers = {"last-event-id": "0"}
            async with http.stream("GET", "/ai/feedback/results/stream", headers=headers) as s:
                async for frame in iter_frames(s.aiter_lines()):
                    if frame.event == "feedback":
                        events.append(frame)
                    if len(events) == 2:
                        break
            jobs = [e.payload["data"]["jobId"] for e in events]
            assert jobs == ids
            resumed = []
            headers = {"last-event-id": events[0].id}
            async with http.stream("GET", "/ai/feedback/results/stream", headers=headers) as s:
                async for frame in iter_frames(s.aiter_lines()):
                    if frame.event == "feedback":
                        resumed.append(frame)
                        break
            assert resumed[0].id == events[1].id
