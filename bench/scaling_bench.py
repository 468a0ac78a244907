"""How many concurrent streams one gateway keeps on time: 10 -> 2,000 streams at 20 tokens/s.

Per step, N streams of the fast scripted upstream (20 tokens/s, one chunk per token, 10 s
answers) through the gateway; their starts are spread over the first ``RAMP`` seconds and
only chunks that arrive in the window where all N are open count. Per chunk, client side:

    late   arrival - the time the upstream's schedule says the chunk is due
           (the added latency a user sees; includes the upstream's own lateness)
    delay  arrival - the time the upstream actually wrote it
    gap    arrival - previous arrival; "added ITL" = gap - 50 ms (the scheduled gap)

plus failed streams (anything but ``close``). The result is the largest N with p99 late
< 50 ms and no failed stream. The load generator (raw asyncio + uvloop, its own process) and
the upstream share the same 2 cores with the gateway: the run ends with the same load sent
directly to the upstream (no gateway) at the largest step, to show what they cost alone.

``--compare-flags`` first runs a few steps under each uvicorn configuration (asyncio + h11,
uvloop + httptools, uvloop + httptools with 2 workers) and reports them side by side.

    .venv/bin/python bench/scaling_bench.py [--steps 10,100,250,400,500,750,1000,1500,2000] [--compare-flags]
Writes bench/results/scaling.json and scaling.png.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h

INTERVAL = 0.05  # 20 tokens/s per stream
CHUNKS = 200  # 10 s answers
RAMP = 4.0  # seconds over which a step's streams start
WINDOW = (RAMP + 1.0, RAMP + 5.5)  # all streams open: the measured window
LIMIT_MS = 50.0
STEPS = (10, 100, 250, 400, 500, 750, 1000, 1500, 2000)
CONFIGS = {
    "asyncio+h11": {"loop": "asyncio", "http": "h11", "workers": 1},
    "uvloop+httptools": {"loop": "uvloop", "http": "httptools", "workers": 1},
    "uvloop+httptools x2": {"loop": "uvloop", "http": "httptools", "workers": 2},
}
GATEWAY_ENV = {
    "MAX_CONCURRENT_GENERATIONS": "5000",  # the bench measures capacity, not the admission limit
    "LLM_MAX_CONNECTIONS": "5000",
    "LLM_POOL_TIMEOUT": "30",
}


def _step(port: int, kind: str, n: int, with_auth: bool = False) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "concurrency": n,
        "streams": 1,
        "ramp": RAMP,
        "windows": {"all_open": list(WINDOW)},
    }
    g = h.gateway_group("step", **kw) if kind == "gateway" else h.openai_group("step", **kw)
    return {"port": port, "timeout": 60, "groups": [g]}


def run_step(port: int, n: int, proc: h.Proc | None, up: h.Proc, kind: str) -> dict[str, Any]:
    cpu0 = proc.cpu_seconds() if proc else 0.0
    up0 = up.cpu_seconds()
    result = h.load(_step(port, kind, n), timeout=180)
    cpu = (proc.cpu_seconds() - cpu0) if proc else 0.0
    g = result["groups"]["step"]
    w = g["windows"]["all_open"]
    failed = {k: v for k, v in g["outcomes"].items() if k not in ("close", "done")}
    gap = w["gap_us"]
    added_itl = {
        q: (gap[q] - INTERVAL * 1e6) / 1000 if gap.get("n") else None for q in ("p50", "p99")
    }
    late = w["late_us"]
    row = {
        "streams": n,
        "kind": kind,
        "outcomes": g["outcomes"],
        "failed": sum(failed.values()),
        "chunks_in_window": w["marker_chunks"],
        "chunks_per_s": round(w["marker_chunks"] / (WINDOW[1] - WINDOW[0])),
        "late_ms": {q: h.ms(late[q]) for q in ("p50", "p99")} if late.get("n") else None,
        "delay_ms": {q: h.ms(w["delay_us"][q]) for q in ("p50", "p99")} if late.get("n") else None,
        "upstream_late_ms": {q: h.ms(w["upstream_late_us"][q]) for q in ("p50", "p99")}
        if late.get("n")
        else None,
        "added_itl_ms": added_itl,
        "ttft_ms": {q: h.ms(g["ttft_us"][q]) for q in ("p50", "p99")}
        if g["ttft_us"].get("n")
        else None,
        "gateway_cpu_s": round(cpu, 2),
        "gateway_cpu_us_per_chunk": round(1e6 * cpu / max(1, g["marker_chunks"]), 1)
        if proc
        else None,
        "upstream_cpu_s": round(up.cpu_seconds() - up0, 2),
        "client_cpu_s": round(result["client_cpu_s"], 2),
        "wall_s": round(result["wall_s"], 1),
        "loadavg": h.loadavg(),
        "per_second_p99_delay_ms": {k: h.ms(v) for k, v in g["per_second_p99_delay_us"].items()},
    }
    row["ok"] = bool(
        row["failed"] == 0 and row["late_ms"] is not None and row["late_ms"]["p99"] < LIMIT_MS
    )
    return row


def _print(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    print(
        f"{'streams':>8} {'chunks/s':>9} {'late p50/p99 ms':>17} {'added ITL p50/p99':>18} "
        f"{'upstream late p99':>18} {'TTFT p50/p99 ms':>17} {'CPU µs/chunk':>13} {'failed':>7}  ok"
    )
    for r in rows:
        if r.get("skipped"):
            print(f"{r['streams']:>8}  not run: {r['skipped']}")
            continue
        late, itl, ul, ttft = r["late_ms"], r["added_itl_ms"], r["upstream_late_ms"], r["ttft_ms"]
        cpu = r["gateway_cpu_us_per_chunk"]
        print(
            f"{r['streams']:>8} {r['chunks_per_s']:>9} "
            f"{late['p50']:>7.1f} / {late['p99']:>7.1f} "
            f"{itl['p50']:>8.1f} / {itl['p99']:>7.1f} "
            f"{ul['p99']:>18.1f} "
            f"{ttft['p50']:>7.1f} / {ttft['p99']:>7.1f} "
            f"{'-' if cpu is None else f'{cpu:.0f}':>13} {r['failed']:>7}  "
            f"{'yes' if r['ok'] else 'NO'}"
        )


def sweep(
    up: h.Proc, steps: list[int], flags: dict[str, Any], stop_early: bool = True
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with h.gateway(up.url + "/v1", env=GATEWAY_ENV, **flags) as gw:
        h.load(_step(gw.port, "gateway", 10))  # warm-up
        saturated = False
        for n in steps:
            if saturated:
                rows.append({"streams": n, "skipped": "a smaller step was already saturated"})
                continue
            print(f"  {flags}: {n} streams...", file=sys.stderr)
            row = run_step(gw.port, n, gw, up, "gateway")
            rows.append(row)
            late = row["late_ms"]
            if stop_early and (
                late is None or late["p99"] > 10 * LIMIT_MS or row["failed"] > n // 10
            ):
                saturated = True
    return rows


def _plot(rows: list[dict[str, Any]], compare: dict[str, list[dict[str, Any]]], out: Path) -> None:
    plt = h.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    series = dict(compare)
    series["main run"] = rows
    for name, rs in series.items():
        rs = [r for r in rs if not r.get("skipped") and r["late_ms"]]
        if not rs:
            continue
        xs = [r["streams"] for r in rs]
        (line,) = axes[0].plot(xs, [r["late_ms"]["p99"] for r in rs], "-o", label=f"{name} p99")
        color = line.get_color()
        axes[0].plot(xs, [r["late_ms"]["p50"] for r in rs], ":", color=color, label=f"{name} p50")
        axes[1].plot(xs, [r["gateway_cpu_us_per_chunk"] for r in rs], "-o", color=color, label=name)
    axes[0].axhline(LIMIT_MS, color="gray", linestyle="--", label="50 ms")
    axes[0].set_yscale("log")
    axes[0].set_title("chunk lateness vs the upstream schedule (ms)")
    axes[1].set_title("gateway CPU µs per chunk")
    for ax in axes:
        ax.set_xlabel("concurrent streams (20 tokens/s each)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Gateway scaling on the 2-core VM (upstream + load generator on the same cores)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", default=",".join(map(str, STEPS)))
    parser.add_argument("--loop", default="uvloop", choices=["asyncio", "uvloop"])
    parser.add_argument("--http", default="httptools", choices=["h11", "httptools"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--compare-flags", action="store_true")
    parser.add_argument("--compare-steps", default="100,150,200,300")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    steps = [int(x) for x in args.steps.split(",")]
    flags = {"loop": args.loop, "http": args.http, "workers": args.workers}
    result: dict[str, Any] = {
        **h.machine(),
        "upstream": {"interval_s": INTERVAL, "content_chunks": CHUNKS},
        "ramp_s": RAMP,
        "window_s": list(WINDOW),
        "gateway_env": {**h.GATEWAY_ENV, **GATEWAY_ENV},
        "criterion": f"p99 late < {LIMIT_MS:g} ms and no failed stream",
        "note": "gateway, upstream and load generator share the same 2 cores",
    }
    started = time.monotonic()
    compare: dict[str, list[dict[str, Any]]] = {}
    with h.upstream(interval=INTERVAL, chunks=CHUNKS) as up:
        if args.compare_flags:
            csteps = [int(x) for x in args.compare_steps.split(",")]
            for name, cflags in CONFIGS.items():
                compare[name] = sweep(up, csteps, cflags, stop_early=False)
                _print(f"uvicorn {name}", compare[name])
            result["compare_flags"] = compare
        rows = sweep(up, steps, flags)
        result["gateway_flags"] = flags
        result["steps"] = rows
        if not args.no_baseline:
            top = max(steps)
            print(f"  direct baseline: {top} streams...", file=sys.stderr)
            result["direct_baseline"] = run_step(up.port, top, None, up, "direct")
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["loadavg_after"] = h.loadavg()
    ok = [r["streams"] for r in rows if not r.get("skipped") and r["ok"]]
    result["max_streams_ok"] = max(ok) if ok else 0
    _print(f"gateway ({flags})", rows)
    if "direct_baseline" in result:
        _print(
            "direct to the upstream, no gateway (client + upstream alone)",
            [result["direct_baseline"]],
        )
    print(
        f"\nlargest step with p99 late < {LIMIT_MS:g} ms and no failure: {result['max_streams_ok']}"
    )
    png = h.RESULTS / "scaling.png"
    _plot(rows, compare, png)
    out = h.write_result("scaling", result)
    print(f"wrote {out.relative_to(h.ROOT)} and {png.relative_to(h.ROOT)}")


if __name__ == "__main__":
    main()
