"""Where the gateway's CPU goes while it streams: py-spy samples of the live process.

Starts the fast scripted upstream and the gateway, attaches ``py-spy record`` (raw collapsed
stacks, GIL-holding samples only, so idle waits in the event loop do not count) and sends
load in three shapes, each profiled on its own gateway:

* ``chunks``: long answers at a steady rate (the per-token path: upstream read, SSE parsing,
  scrubber, envelope, SSE framing, the socket write);
* ``requests``: short answers back to back (the per-request path: routing, session,
  prompt, the upstream request, the response set-up and tear-down);
* ``refusals``: every request refused (MAX_CONCURRENT_GENERATIONS=1, held by one stalled
  stream): what an overload costs.

For each it lists the functions with the most samples, self (on top of the stack) and
inclusive (anywhere in it), grouped by file, and the share of samples per area of the code
(app/, sse_starlette, starlette, uvicorn, httpx/httpcore, h11, anyio, asyncio).

    .venv/bin/python bench/profile_gateway.py [--seconds 20] [--concurrency 100] [--loop uvloop]
Writes bench/results/profile.json and bench/results/profile_<shape>.txt (the top lists); the
raw stacks (py-spy's collapsed format) stay in $TMPDIR/eco-gateway-profile_<shape>.collapsed.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")

AREAS = (
    ("app/", "app (ours)"),
    ("sse_starlette", "sse_starlette"),
    ("starlette", "starlette"),
    ("fastapi", "fastapi"),
    ("uvicorn", "uvicorn"),
    ("httpcore", "httpcore"),
    ("httpx", "httpx"),
    ("h11", "h11"),
    ("httptools", "httptools"),
    ("anyio", "anyio"),
    ("asyncio", "asyncio"),
    ("uvloop", "uvloop"),
    ("json", "json"),
    ("pydantic", "pydantic"),
    ("prometheus_client", "prometheus_client"),
)


def _short(path: str) -> str:
    for marker in ("site-packages/", "/work/main/", "python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def _area(path: str) -> str:
    for needle, name in AREAS:
        if needle in path:
            return name
    return "other"


#: Functions whose inclusive share is reported as µs per streamed chunk (the per-token path).
FOCUS = (
    "app/llm/client.py:iter_sse_data",
    "app/llm/client.py:_content_of",
    "app/llm/scrubber.py:AnswerScrubber.feed",
    "app/domain/events.py:envelope_json",
    "app/web/sse.py:_frame",
    "app/web/sse.py:_frames",
    "app/streams/hub.py:_Stream.append",
    "app/streams/hub.py:_Stream.events_after",
    "app/streams/hub.py:StreamHub._generate",
    "app/chat/generation.py:Generator.run",
    "app/llm/client.py:LLMClient.stream_chat",
    "httpx/_models.py:Response.aiter_raw",
    "app/llm/transport.py:_Counted.__aiter__",
    "aiohttp/streams.py:StreamReader.iter_chunked",
    "httpcore/_async/http11.py:AsyncHTTP11Connection._receive_event",  # LLM_TRANSPORT=httpx
    "uvicorn/protocols/http/httptools_impl.py:RequestResponseCycle.send",
    "uvicorn/protocols/http/h11_impl.py:RequestResponseCycle.send",
    "anyio/_core/_tasks.py:fail_after",
    "anyio/_core/_tasks.py:move_on_after",
    "json/__init__.py:loads",
    "json/__init__.py:dumps",
)


def summarize(collapsed: Path, top: int = 40) -> dict[str, Any]:
    self_counts: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    area_counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = []
        for raw in stack.split(";"):
            m = _FRAME.match(raw.strip())
            if m is None:
                continue
            frames.append((m.group("func"), _short(m.group("file"))))
        if not frames:
            continue
        frames = [f for f in frames if f[0] != "<module>"] or frames
        total += count
        func, file = frames[-1]
        self_counts[f"{file}:{func}"] += count
        area_counts[_area(file)] += count
        for name in {f"{file}:{func}" for func, file in frames}:
            incl_counts[name] += count

    def table(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": name, "samples": n, "percent": round(100 * n / total, 1)}
            for name, n in counter.most_common(top)
        ]

    return {
        "focus_incl_percent": {
            name: round(100 * incl_counts[name] / total, 1) for name in FOCUS if total
        },
        "samples": total,
        "by_area_percent": {k: round(100 * v / total, 1) for k, v in area_counts.most_common()}
        if total
        else {},
        "top_self": table(self_counts),
        "top_inclusive": [
            row
            for row in table(incl_counts)
            if row["percent"] < 60  # skip the loop's frames
        ],
    }


def _record(pid: int, out: Path, seconds: float, rate: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            PY_SPY,
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--output",
            str(out),
            "--rate",
            str(rate),
            "--duration",
            str(int(seconds)),
            "--gil",
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def run_shape(
    gw: h.Proc, up: h.Proc, shape: str, seconds: float, concurrency: int, rate: int
) -> dict[str, Any]:
    if shape == "chunks":
        h.configure(up, interval=0.05, chunks=200)  # 20 tokens/s, 10 s answers
    elif shape == "requests":
        h.configure(up, interval=0.001, chunks=8)  # short answers back to back
    else:  # refusals: the gateway runs with MAX_CONCURRENT_GENERATIONS=1, held by one stall
        h.configure(up, scenario="stall", after=1, hold=seconds + 30)
        threading.Thread(
            target=h.load,
            args=({"port": gw.port, "groups": [h.gateway_group("hold")]},),
            daemon=True,
        ).start()
        time.sleep(1.0)
        h.configure(up, scenario="ok")
    out = Path(tempfile.gettempdir()) / f"eco-gateway-profile_{shape}.collapsed"  # ~0.5 MB
    spec = {
        "port": gw.port,
        "timeout": 60,
        "groups": [h.gateway_group(shape, concurrency=concurrency, duration=seconds + 3, ramp=1.0)],
    }
    result: dict[str, Any] = {}

    def drive() -> None:
        result.update(h.load(spec))

    thread = threading.Thread(target=drive)
    cpu0 = gw.cpu_seconds()
    thread.start()
    time.sleep(2.0)  # past the ramp
    spy = _record(gw.popen.pid, out, seconds, rate)
    _, err = spy.communicate()
    thread.join()
    cpu = gw.cpu_seconds() - cpu0
    if spy.returncode != 0 or not out.exists():
        raise RuntimeError(f"py-spy failed: {err.decode()[-2000:]}")
    summary = summarize(out)
    g = result["groups"][shape]
    per_chunk_us = 1e6 * cpu / max(1, g["marker_chunks"])
    summary["focus_us_per_chunk"] = {
        name: round(pct * per_chunk_us / 100, 1)
        for name, pct in summary["focus_incl_percent"].items()
        if pct > 0
    }
    summary["raw_stacks"] = str(out)
    summary["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
    summary["loadavg"] = h.loadavg()
    summary.update(
        {
            "load": {
                "concurrency": concurrency,
                "streams": g["streams"],
                "outcomes": g["outcomes"],
                "chunks": g["marker_chunks"],
                "gateway_cpu_s": round(cpu, 2),
                "gateway_cpu_us_per_chunk": round(per_chunk_us, 1),
                "gateway_cpu_us_per_request": round(1e6 * cpu / max(1, g["streams"]), 1),
                "wall_s": round(result["wall_s"], 1),
            }
        }
    )
    return summary


def render(shape: str, summary: dict[str, Any]) -> str:
    lines = [
        f"profile '{shape}': {summary['samples']} GIL samples; load {summary['load']}",
        "",
        "share of samples by area: "
        + ", ".join(f"{k} {v}%" for k, v in summary["by_area_percent"].items()),
        "",
        f"{'self %':>7}  function (top of stack)",
    ]
    lines += [f"{row['percent']:>7}  {row['function']}" for row in summary["top_self"]]
    if summary["load"]["chunks"]:
        lines += ["", f"{'incl %':>7} {'µs/chunk':>9}  function (selected: the per-chunk path)"]
        for name, pct in summary["focus_incl_percent"].items():
            if pct > 0:
                lines.append(f"{pct:>7} {summary['focus_us_per_chunk'][name]:>9}  {name}")
    lines += ["", f"{'incl %':>7}  function (anywhere in the stack)"]
    lines += [f"{row['percent']:>7}  {row['function']}" for row in summary["top_inclusive"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--loop", default="uvloop", choices=["asyncio", "uvloop"])
    parser.add_argument("--http", default="httptools", choices=["h11", "httptools"])
    parser.add_argument("--shapes", default="chunks,requests,refusals")
    args = parser.parse_args()
    previous = h.RESULTS / "profile.json"  # a run of some shapes keeps the others' results
    result: dict[str, Any] = json.loads(previous.read_text()) if previous.exists() else {}
    result.update({**h.machine(), "loop": args.loop, "http": args.http})
    env = {"MAX_CONCURRENT_GENERATIONS": "5000", "LLM_MAX_CONNECTIONS": "5000"}
    for shape in args.shapes.split(","):
        shape_env = {**env, "MAX_CONCURRENT_GENERATIONS": "1"} if shape == "refusals" else env
        with (
            h.upstream() as up,
            h.gateway(up.url + "/v1", env=shape_env, loop=args.loop, http=args.http) as gw,
        ):
            summary = run_shape(gw, up, shape, args.seconds, args.concurrency, args.rate)
            result[shape] = summary
            text = render(shape, summary)
            print(text + "\n")
            (h.RESULTS / f"profile_{shape}.txt").write_text(text + "\n", encoding="utf-8")
    result["loadavg_after"] = h.loadavg()
    out = h.write_result("profile", result)
    print(f"wrote {out.relative_to(h.ROOT)}")


if __name__ == "__main__":
    main()
