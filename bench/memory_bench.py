"""Gateway memory: RSS per open idle stream, and RSS over many finished and abandoned streams.

1. Idle streams: N streams (100, 500, 1,000) opened against an upstream that sends one chunk
   and then stalls; once all are open, the gateway's RSS minus its RSS before, divided by N.
2. Churn: 10,000 completed streams (short answers, in batches of 2,000), then 1,000 streams
   the client abandons after two chunks, then a short settle. RSS is sampled every 0.5 s;
   reported: RSS after each batch, the slope over the later batches (KB per 1,000 streams)
   against the batch-to-batch noise, and the gateway's open streams and event-loop tasks.
   The bounded caches are made small so they fill during the first batch and any later growth
   is a leak, not a cache filling: SESSION_MAX_COUNT=1000, STREAM_RESUME_TTL_SECONDS=2.
   Each part runs on a fresh gateway process.

    .venv/bin/python bench/memory_bench.py [--idle 100,500,1000] [--completed 10000] [--abandoned 1000]
Writes bench/results/memory.json and memory.png.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import itertools

import harness as h

MB = 1024 * 1024
GATEWAY_ENV = {
    "MAX_CONCURRENT_GENERATIONS": "5000",
    "LLM_MAX_CONNECTIONS": "5000",
    "LLM_READ_TIMEOUT": "120",
    "SESSION_MAX_COUNT": "1000",
    "STREAM_RESUME_TTL_SECONDS": "2",
}
_GAUGE = re.compile(r"^(gateway_open_streams|gateway_event_loop_tasks) (\S+)$", re.M)


class Sampler:
    """RSS of a process every ``interval`` seconds, in a thread."""

    def __init__(self, proc: h.Proc, interval: float = 0.5) -> None:
        self.proc = proc
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (seconds since start, MB)
        self.marks: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - self._t0, self.proc.rss_bytes() / MB))
            self._stop.wait(self.interval)

    def mark(self, label: str) -> float:
        rss = self.proc.rss_bytes() / MB
        now = time.monotonic() - self._t0
        self.samples.append((now, rss))
        self.marks.append((now, label))
        return rss


def gauges(gw: h.Proc) -> dict[str, float]:
    text = httpx.get(gw.url + "/metrics", timeout=10).text
    return {name: float(value) for name, value in _GAUGE.findall(text)}


def idle_streams(gw: h.Proc, up: h.Proc, counts: list[int]) -> list[dict[str, Any]]:
    """Steps in increasing N. Freed memory stays in the allocator's arenas and is reused by the
    next step, so the cost of N open streams is (RSS with N open - RSS at rest) / N, the rest
    being measured once before the first step; the delta over the previous step is kept too."""
    rows = []
    rest = gw.rss_bytes() / MB
    for n in counts:
        hold = 6.0 + n / 250  # long enough for every stream to be open at the measurement
        h.configure(up, scenario="stall", after=1, hold=hold, interval=0.01, chunks=40)
        time.sleep(1.0)
        before = gw.rss_bytes() / MB
        spec = {
            "port": gw.port,
            "timeout": 120,
            "groups": [h.gateway_group("idle", concurrency=n, streams=1, ramp=n / 500)],
        }
        out: dict[str, Any] = {}
        thread = threading.Thread(target=lambda spec=spec, out=out: out.update(h.load(spec)))
        thread.start()
        deadline = time.monotonic() + hold + 20
        open_now = 0.0
        while time.monotonic() < deadline:  # until every stream is open upstream
            open_now = gauges(gw).get("gateway_open_streams", 0)
            if h.upstream_stats(up)["active"] >= n and open_now >= n:
                break
            time.sleep(0.25)
        time.sleep(0.5)
        during = gw.rss_bytes() / MB
        thread.join()
        g = out["groups"]["idle"]
        rows.append(
            {
                "streams": n,
                "open_at_measure": open_now,
                "rss_before_mb": round(before, 1),
                "rss_open_mb": round(during, 1),
                "rss_rest_mb": round(rest, 1),
                "kb_per_stream": round((during - rest) * 1024 / n, 1),
                "kb_per_stream_over_previous_step": round((during - before) * 1024 / n, 1),
                "outcomes": g["outcomes"],
            }
        )
        print(
            f"  {n} idle streams: RSS at rest {rest:.1f}, with them open {during:.1f} MB, "
            f"{rows[-1]['kb_per_stream']} KB/stream",
            file=sys.stderr,
        )
    h.configure(up, scenario="ok")
    return rows


def churn(gw: h.Proc, up: h.Proc, completed: int, abandoned: int, batch: int) -> dict[str, Any]:
    result: dict[str, Any] = {"batches": []}
    h.configure(up, scenario="ok", interval=0.002, chunks=12)
    with Sampler(gw) as sampler:
        start = sampler.mark("start")
        result["rss_start_mb"] = round(start, 1)
        done = 0
        while done < completed:
            size = min(batch, completed - done)
            spec = {
                "port": gw.port,
                "timeout": 60,
                "groups": [h.gateway_group("done", concurrency=50, streams=max(1, size // 50))],
            }
            r = h.load(spec)["groups"]["done"]
            done += r["streams"]
            rss = sampler.mark(f"{done} completed")
            result["batches"].append(
                {"completed": done, "rss_mb": round(rss, 1), "outcomes": r["outcomes"]}
            )
            print(f"  {done} completed: RSS {rss:.1f} MB {r['outcomes']}", file=sys.stderr)
        h.configure(up, scenario="ok", interval=0.05, chunks=40)
        spec = {
            "port": gw.port,
            "timeout": 60,
            "groups": [
                h.group(
                    "abandoned",
                    "sse_get",
                    [(1, h.base_info_path(), None, 2)],
                    concurrency=50,
                    streams=max(1, abandoned // 50),
                )
            ],
        }
        r = h.load(spec)["groups"]["abandoned"]
        rss = sampler.mark(f"+{r['streams']} abandoned")
        result["abandoned"] = {"streams": r["streams"], "outcomes": r["outcomes"]}
        result["rss_after_abandoned_mb"] = round(rss, 1)
        time.sleep(5.0)
        result["rss_settled_mb"] = round(sampler.mark("settled 5 s"), 1)
        result["gauges_after"] = gauges(gw)
        result["upstream_active_after"] = h.upstream_stats(up)["active"]
    rss = [b["rss_mb"] for b in result["batches"]]
    later = rss[1:] if len(rss) > 2 else rss
    xs = [b["completed"] for b in result["batches"]][-len(later) :]
    if len(later) >= 2:
        mean_x, mean_y = sum(xs) / len(xs), sum(later) / len(later)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, later, strict=True)) / sum(
            (x - mean_x) ** 2 for x in xs
        )
        steps = [b - a for a, b in itertools.pairwise(later)]
        result["slope_kb_per_1000_streams"] = round(slope * 1024 * 1000, 1)
        result["batch_step_mb"] = [round(s, 2) for s in steps]
        result["growth_after_first_batch_mb"] = round(later[-1] - later[0], 2)
    result["samples"] = [(round(t, 1), round(m, 2)) for t, m in sampler.samples]
    result["marks"] = sampler.marks
    return result


def _plot(result: dict[str, Any], out: Path) -> None:
    plt = h.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    idle = result["idle"]
    axes[0].plot([r["streams"] for r in idle], [r["rss_open_mb"] for r in idle], "-o")
    axes[0].set_xlabel("open idle streams")
    axes[0].set_ylabel("gateway RSS (MB)")
    axes[0].set_title("RSS with N idle streams open")
    ch = result["churn"]
    axes[1].plot([t for t, _ in ch["samples"]], [m for _, m in ch["samples"]], "-")
    for t, label in ch["marks"]:
        axes[1].axvline(t, color="gray", alpha=0.3)
        axes[1].annotate(label, (t, axes[1].get_ylim()[0]), rotation=90, fontsize=7, va="bottom")
    axes[1].set_xlabel("seconds")
    axes[1].set_title("RSS over 10,000 completed + 1,000 abandoned streams")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--idle", default="100,500,1000")
    parser.add_argument("--completed", type=int, default=10_000)
    parser.add_argument("--abandoned", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--loop", default="uvloop", choices=["asyncio", "uvloop"])
    parser.add_argument("--http", default="httptools", choices=["h11", "httptools"])
    args = parser.parse_args()
    result: dict[str, Any] = {
        **h.machine(),
        "gateway_flags": {"loop": args.loop, "http": args.http, "workers": 1},
        "gateway_env": {**h.GATEWAY_ENV, **GATEWAY_ENV},
    }
    started = time.monotonic()
    result["log_errors"] = []
    with h.upstream() as up:
        # Each part on a fresh gateway: memory the idle streams freed stays in the allocator's
        # arenas and would hide growth during the churn.
        for part in ("idle", "churn"):
            with h.gateway(up.url + "/v1", env=GATEWAY_ENV, loop=args.loop, http=args.http) as gw:
                h.configure(up, scenario="ok", interval=0.002, chunks=12)
                warm = {
                    "port": gw.port,
                    "groups": [h.gateway_group("warm", concurrency=10, streams=5)],
                }
                h.load(warm)
                result[f"rss_at_rest_before_{part}_mb"] = round(gw.rss_bytes() / MB, 1)
                if part == "idle":
                    result["idle"] = idle_streams(gw, up, [int(x) for x in args.idle.split(",")])
                else:
                    result["churn"] = churn(gw, up, args.completed, args.abandoned, args.batch)
                result["log_errors"] += [
                    line
                    for line in gw.log_text().splitlines()
                    if "Traceback" in line or "ERROR" in line
                ][:20]
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["loadavg_after"] = h.loadavg()

    print(f"\ngateway RSS at rest after warm-up: {result['rss_at_rest_before_idle_mb']} MB")
    print(f"\n{'idle streams':>12} {'RSS at rest':>12} {'RSS open':>9} {'KB/stream':>10}")
    for r in result["idle"]:
        print(
            f"{r['streams']:>12} {r['rss_rest_mb']:>10.1f}MB {r['rss_open_mb']:>7.1f}MB "
            f"{r['kb_per_stream']:>10.1f}"
        )
    ch = result["churn"]
    print(f"\n{'after':>22} {'RSS MB':>8}")
    print(f"{'start':>22} {ch['rss_start_mb']:>8.1f}")
    for b in ch["batches"]:
        print(f"{str(b['completed']) + ' completed':>22} {b['rss_mb']:>8.1f}")
    print(f"{'+ abandoned':>22} {ch['rss_after_abandoned_mb']:>8.1f}")
    print(f"{'settled':>22} {ch['rss_settled_mb']:>8.1f}")
    if "slope_kb_per_1000_streams" in ch:
        print(
            f"\nafter the first batch: growth {ch['growth_after_first_batch_mb']} MB, "
            f"slope {ch['slope_kb_per_1000_streams']} KB per 1,000 streams, "
            f"batch-to-batch steps {ch['batch_step_mb']} MB"
        )
    print(f"gauges after: {ch['gauges_after']}, upstream active: {ch['upstream_active_after']}")
    png = h.RESULTS / "memory.png"
    _plot(result, png)
    out = h.write_result("memory", result)
    print(f"wrote {out.relative_to(h.ROOT)} and {png.relative_to(h.ROOT)}")


if __name__ == "__main__":
    main()
