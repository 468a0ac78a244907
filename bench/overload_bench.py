"""Overload: do open streams keep their pace while new ones are refused?

The gateway runs with MAX_CONCURRENT_GENERATIONS=200. 200 long streams (10 tokens/s each,
30 s answers) are opened over the first 3 s; from t=10 s to t=20 s new streams arrive at
``--rates`` per second (open loop; one run per rate: 100, 250, 500/s), and each is refused at once with an
``error`` 503 event (the limit is reached). The open streams' chunk lateness (arrival - the
upstream's schedule) and inter-token gaps are compared before, during and after the
refusals; the refused arrivals report their outcome and how fast the refusal came.

The token rate is 10/s rather than the scaling bench's 20/s so that the 200 open streams
alone stay within what the gateway sustains on this 2-core machine (see scaling.json):
the bench isolates the cost of the refusals.

    .venv/bin/python bench/overload_bench.py [--rates 100,250,500] [--limit 200]
Writes bench/results/overload.json and overload.png.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h

INTERVAL = 0.1
CHUNKS = 300  # 30 s answers
WINDOWS = {"before": [5.0, 10.0], "during": [11.0, 20.0], "after": [22.0, 29.0]}


def run_rate(rate: float, limit: int, flags: dict[str, str]) -> dict[str, Any]:
    env = {"MAX_CONCURRENT_GENERATIONS": str(limit), "LLM_MAX_CONNECTIONS": "512"}
    groups = [
        h.gateway_group("open", concurrency=limit, streams=1, ramp=3.0, windows=WINDOWS),
        {**h.gateway_group("arrivals", rate=rate, duration=10.0, delay=10.0), "seed": 3},
    ]
    with (
        h.upstream(interval=INTERVAL, chunks=CHUNKS) as up,
        h.gateway(up.url + "/v1", env=env, **flags) as gw,
    ):
        h.configure(up, chunks=8, interval=0.01)
        h.load({"port": gw.port, "groups": [h.gateway_group("warm", concurrency=10, streams=2)]})
        h.configure(up, chunks=CHUNKS, interval=INTERVAL)
        cpu0 = gw.cpu_seconds()
        t0 = time.monotonic()
        out = h.load({"port": gw.port, "timeout": 90, "groups": groups}, timeout=300)
        cpu = gw.cpu_seconds() - cpu0
        wall = time.monotonic() - t0
        log_errors = [
            line for line in gw.log_text().splitlines() if "Traceback" in line or "ERROR" in line
        ][:20]
    opened, arrivals = out["groups"]["open"], out["groups"]["arrivals"]
    windows = {}
    for name, w in opened["windows"].items():
        windows[name] = {
            "chunks": w["marker_chunks"],
            "late_ms": {q: h.ms(w["late_us"][q]) for q in ("p50", "p99")},
            "added_itl_ms": {q: h.ms(w["gap_us"][q] - INTERVAL * 1e6) for q in ("p50", "p99")},
        }
    refusal = arrivals["terminal_us"]
    return {
        "arrival_rate": rate,
        "open_streams": {"outcomes": opened["outcomes"], "windows": windows},
        "refused_arrivals": {
            "sent": arrivals["streams"],
            "outcomes": arrivals["outcomes"],
            "time_to_refusal_ms": {q: h.ms(refusal[q]) for q in ("p50", "p99", "max")}
            if refusal.get("n")
            else None,
        },
        "per_second_p99_delay_ms": {
            k: h.ms(v) for k, v in opened["per_second_p99_delay_us"].items()
        },
        "gateway_cpu_s": round(cpu, 2),
        "wall_s": round(wall, 1),
        "log_errors": log_errors,
        "loadavg": h.loadavg(),
        "verdict": {
            "p99_late_before_ms": windows["before"]["late_ms"]["p99"],
            "p99_late_during_ms": windows["during"]["late_ms"]["p99"],
            "open_streams_all_closed": opened["outcomes"] == {"close": limit},
            "refusals_all_503": set(arrivals["outcomes"]) == {"error_503"},
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--rates", default="100,250,500", help="refused arrivals per second, one run each"
    )
    parser.add_argument("--limit", type=int, default=200, help="MAX_CONCURRENT_GENERATIONS")
    parser.add_argument("--loop", default="uvloop", choices=["asyncio", "uvloop"])
    parser.add_argument("--http", default="httptools", choices=["h11", "httptools"])
    args = parser.parse_args()
    flags = {"loop": args.loop, "http": args.http}
    result: dict[str, Any] = {
        **h.machine(),
        "limit": args.limit,
        "upstream": {"interval_s": INTERVAL, "content_chunks": CHUNKS},
        "gateway_flags": {**flags, "workers": 1},
        "windows_s": WINDOWS,
        "runs": [],
    }
    for rate in [float(x) for x in args.rates.split(",")]:
        print(f"  {args.limit} open streams + {rate:g} arrivals/s...", file=sys.stderr)
        result["runs"].append(run_rate(rate, args.limit, flags))
    result["loadavg_after"] = h.loadavg()

    print(f"\n{args.limit} open streams (10 tokens/s each); from 10 s to 20 s new streams arrive")
    print(
        f"{'arrivals/s':>10} {'window':<7} {'chunks':>7} {'late p50/p99 ms':>17} "
        f"{'added ITL p50/p99':>18}   refused arrivals"
    )
    for run in result["runs"]:
        ra = run["refused_arrivals"]
        t = ra["time_to_refusal_ms"] or {}
        for name, r in run["open_streams"]["windows"].items():
            lo, hi = WINDOWS[name]
            extra = ""
            if name == "during":
                extra = (
                    f"{ra['sent']} sent: {ra['outcomes']}, refusal after p50 "
                    f"{t.get('p50', float('nan')):.1f} / p99 {t.get('p99', float('nan')):.1f} ms"
                )
            print(
                f"{run['arrival_rate']:>10g} {name + f' {lo:g}-{hi:g}':<13} {r['chunks']:>7} "
                f"{r['late_ms']['p50']:>7.1f} / {r['late_ms']['p99']:>7.1f} "
                f"{r['added_itl_ms']['p50']:>7.1f} / {r['added_itl_ms']['p99']:>7.1f}   {extra}"
            )
        print(
            f"{'':>10} open streams: {run['open_streams']['outcomes']}, gateway CPU "
            f"{run['gateway_cpu_s']} s in {run['wall_s']} s"
        )
    _plot(result, h.RESULTS / "overload.png")
    path = h.write_result("overload", result)
    print(f"wrote {path.relative_to(h.ROOT)} and bench/results/overload.png")


def _plot(result: dict[str, Any], out: Path) -> None:
    plt = h.pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    for run in result["runs"]:
        series = run["per_second_p99_delay_ms"]
        ax.plot(
            [int(k) for k in series],
            list(series.values()),
            "-o",
            markersize=3,
            label=f"{run['arrival_rate']:g} refused arrivals/s",
        )
    ax.axvspan(10, 20, color="tab:red", alpha=0.1, label="arrivals")
    ax.set_xlabel("seconds")
    ax.set_ylabel("p99 chunk delay per second (ms)")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Overload: {result['limit']} open streams while new ones are refused")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
