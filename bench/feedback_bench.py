"""Feedback batch bench: 500 queued jobs through the scripted upstream, and what they do to
the chat's time to first token.

    .venv/bin/python bench/feedback_bench.py [--jobs 500] [--chats 40]

One scripted upstream process (tests/upstream/scripted_openai.py: chat answers streamed at
``--token-delay`` per chunk, feedback answers non-streamed), one gateway (bench/harness.py,
embedded queue, default feedback limits). Phase 1: ``--chats`` base-info streams, 4 at a
time, alone. Phase 2: the same while ``--jobs`` feedback jobs are submitted at once and
worked. Prints a table and writes bench/results/feedback.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness

from app.llm.sse_decode import iter_frames
from tests.feedback.requests import FEEDBACK_TEXT, feedback_body

_UPSTREAM = """
import asyncio, sys
from tests.upstream.scripted_openai import ScriptedUpstream
async def main():
    up = ScriptedUpstream(scenario="ok", content=sys.argv[2], token_delay=float(sys.argv[3]))
    await up.start("127.0.0.1", int(sys.argv[1]))
    print("READY", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


async def _ttft(http: httpx.AsyncClient, n: int) -> float:
    started = time.perf_counter()
    path = harness.base_info_path(sessionId=f"bench-{n}")
    async with http.stream("GET", path) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge":
                return (time.perf_counter() - started) * 1000
    raise RuntimeError("stream without text")


async def _chats(http: httpx.AsyncClient, count: int, offset: int) -> list[float]:
    slots = asyncio.Semaphore(4)

    async def one(n: int) -> float:
        async with slots:
            return await _ttft(http, n)

    return list(await asyncio.gather(*(one(offset + n) for n in range(count))))


async def _done(http: httpx.AsyncClient) -> float:
    text = (await http.get("/metrics")).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("gateway_feedback_generations_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def _run(url: str, jobs: int, chats: int) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        await _chats(http, 4, 10_000)  # warm-up
        alone = await _chats(http, chats, 0)
        started = time.perf_counter()
        submitted = time.perf_counter()

        async def submit() -> list[httpx.Response]:
            nonlocal submitted
            answers = await asyncio.gather(
                *(
                    feedback.post("/ai/feedback", json=feedback_body(member_id=n))
                    for n in range(jobs)
                )
            )
            submitted = time.perf_counter()
            return list(answers)

        # The chats run while the batch is submitted and worked (their own connections).
        limits = httpx.Limits(max_connections=jobs)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as feedback:
            answers, beside = await asyncio.gather(submit(), _chats(http, chats, 1000))
        accepted = sum(a.status_code == 202 for a in answers)
        submit_s = submitted - started
        chats_done_s = time.perf_counter() - started
        worked_before_chats_ended = await _done(http)
        while await _done(http) < accepted:
            await asyncio.sleep(0.05)
        total_s = time.perf_counter() - started
    return {
        "jobs": jobs,
        "accepted": accepted,
        "submit_seconds": round(submit_s, 3),
        "batch_seconds": round(total_s, 3),
        "chats_with_batch_seconds": round(chats_done_s, 3),
        "jobs_done_when_chats_ended": int(worked_before_chats_ended),
        "jobs_per_second": round(accepted / total_s, 1),
        "ttft_p50_ms_alone": round(statistics.median(alone), 1),
        "ttft_p50_ms_with_batch": round(statistics.median(beside), 1),
        "ttft_p90_ms_alone": round(statistics.quantiles(alone, n=10)[-1], 1),
        "ttft_p90_ms_with_batch": round(statistics.quantiles(beside, n=10)[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--chats", type=int, default=40)
    parser.add_argument("--token-delay", type=float, default=0.02)
    args = parser.parse_args()
    port = harness.free_port()
    upstream = subprocess.Popen(
        [sys.executable, "-c", _UPSTREAM, str(port), FEEDBACK_TEXT, str(args.token_delay)],
        cwd=harness.ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert upstream.stdout is not None and upstream.stdout.readline().startswith(b"READY")
        env = {"FEEDBACK_QUEUE_MAX": str(args.jobs)}
        with harness.gateway(f"http://127.0.0.1:{port}/v1", env=env) as gw:
            result = asyncio.run(_run(gw.url, args.jobs, args.chats))
    finally:
        upstream.terminate()
        upstream.wait(10)
    result["machine"] = harness.machine()
    rows = [
        ("feedback jobs accepted", f"{result['accepted']} / {result['jobs']}"),
        ("submit all (s)", result["submit_seconds"]),
        ("batch done (s)", result["batch_seconds"]),
        ("jobs done when the chats ended", result["jobs_done_when_chats_ended"]),
        ("throughput (jobs/s)", result["jobs_per_second"]),
        ("chat TTFT p50 alone (ms)", result["ttft_p50_ms_alone"]),
        ("chat TTFT p50 with batch (ms)", result["ttft_p50_ms_with_batch"]),
        ("chat TTFT p90 alone (ms)", result["ttft_p90_ms_alone"]),
        ("chat TTFT p90 with batch (ms)", result["ttft_p90_ms_with_batch"]),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(f"wrote {harness.write_result('feedback', result)}")


if __name__ == "__main__":
    main()
