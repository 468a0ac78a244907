"""Gateway overhead: the same scripted stream (a) direct, (b) through our gateway, (c) through
LiteLLM's proxy, in one run, at 1, 10 and 100 concurrent streams.

Processes: the fast scripted upstream (``bench/fast_upstream.py``: a fixed token rate, every
content chunk stamped with its send time), the gateway (``uvicorn app.main:app``, retrieval
off with ``RETRIEVAL_K=0``), LiteLLM's proxy (``scripts/install_litellm.sh``, an
``openai/`` passthrough to the same upstream) and the load generator (``bench/loadgen.py``),
each in its own process. The three paths run one after another, never at the same time, and
each proxy process lives only for its own phases.

Per path and concurrency, client side: time to first token (request start, connect included,
to the first content chunk), per-chunk delay (arrival - the upstream's send time) and the
inter-token gap; ADDED latency = the path's percentile - the direct path's percentile. CPU per
streamed chunk: the proxy process's CPU time (psutil, user + system, children included) over
the phase / content chunks the client received (the gateway's stream runs through the answer
scrubber, which still yields one ``challenge`` event per upstream chunk: the upstream streams a
valid JSON answer whose every chunk carries display text). The proxy's CPU with no traffic
(timers, health checks; measured for 3 s before each phase) is also subtracted, in
parentheses: at 1 stream it is most of the figure.

    .venv/bin/python bench/overhead_bench.py [--quick] [--no-litellm] [--loop uvloop --http httptools]
Writes bench/results/overhead.json and overhead.png.

``--tracing`` compares instead the gateway with tracing off and on (issue 26), in one run:
direct, ``gateway`` (no OTEL_* variable) and ``gateway-traced`` (OTEL_TRACES_EXPORTER=otlp,
http/protobuf to a sink in this process that answers 200, OTEL_TRACES_SAMPLER=always_on: every
turn's spans built and exported), in ``--rounds`` rounds (default 6), the arm that goes first
alternating, each arm a fresh gateway process: one process's CPU per chunk differs from the
next one's by up to ~15 % with the same code, so one phase per arm cannot tell 10 % apart. The
ratio on/off is per round (the two arms next to each other); the table gives its median and
range. Writes bench/results/overhead_tracing.json.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h

INTERVAL = 0.05  # 20 tokens/s per stream (as in scaling_bench.py)
CHUNKS = 40  # content chunks per answer: 2 s per stream
STREAMS_PER_WORKER = {1: 20, 10: 6, 100: 3}
GATEWAY_ENV = {"MAX_CONCURRENT_GENERATIONS": "1000", "LLM_MAX_CONNECTIONS": "1000"}
PATHS = ("direct", "gateway", "litellm")
#: --tracing: 1 stream is mostly the idle process's timers, so 10 and 100 streams.
TRACING_LEVELS = "10,100"
IDLE_SECONDS = 3.0  # before each phase: the proxy's CPU with no traffic, subtracted per chunk


def _spec(port: int, path: str, concurrency: int, streams: int) -> dict[str, Any]:
    ramp = INTERVAL * CHUNKS if concurrency > 1 else 0.0  # staggered starts: a steady state
    kw = {"concurrency": concurrency, "streams": streams, "ramp": ramp}
    if path.startswith("gateway"):
        g = h.gateway_group(path, **kw)
    elif path == "litellm":
        g = h.openai_group(path, headers={"authorization": f"Bearer {h.LITELLM_KEY}"}, **kw)
    else:
        g = h.openai_group(path, **kw)
    return {"port": port, "timeout": 60, "groups": [g]}


@contextlib.contextmanager
def _proxy(
    path: str, up: h.Proc, args: argparse.Namespace, otlp_endpoint: str = ""
) -> Iterator[h.Proc | None]:
    """The process that serves ``path`` (none for direct), for that path's phases only."""
    if path == "gateway":
        with h.gateway(up.url + "/v1", env=GATEWAY_ENV, loop=args.loop, http=args.http) as gw:
            yield gw
    elif path == "gateway-traced":
        with h.gateway(
            up.url + "/v1",
            env={**GATEWAY_ENV, **_tracing_env(otlp_endpoint)},
            loop=args.loop,
            http=args.http,
        ) as gw:
            yield gw
    elif path == "litellm":
        with h.litellm(up.url + "/v1") as ll:
            yield ll
    else:
        yield None


def _tracing_env(endpoint: str) -> dict[str, str]:
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_SERVICE_NAME": "eco-gateway-bench",
    }


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that reads each export and answers 200 (an empty
    ExportTraceServiceResponse), counting the requests."""

    exports = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0") or 0))
        type(self).exports += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _otlp_sink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _phase(
    path: str, port: int, proxy: h.Proc | None, up: h.Proc, concurrency: int, streams: int
) -> dict[str, Any]:
    h.load(_spec(port, path, min(concurrency, 10), 1))  # warm-up: pools, imports, caches
    idle_rate = 0.0
    if proxy:  # CPU the proxy burns with no traffic (timers, health checks), per second
        idle0, t_idle = proxy.cpu_seconds(), time.monotonic()
        time.sleep(IDLE_SECONDS)
        idle_rate = (proxy.cpu_seconds() - idle0) / (time.monotonic() - t_idle)
    cpu_proxy = proxy.cpu_seconds() if proxy else 0.0
    cpu_up = up.cpu_seconds()
    t0 = time.monotonic()
    result = h.load(_spec(port, path, concurrency, streams))
    wall = time.monotonic() - t0
    cpu_proxy = (proxy.cpu_seconds() - cpu_proxy) if proxy else 0.0
    cpu_up = up.cpu_seconds() - cpu_up
    g = result["groups"][path]
    chunks = max(1, g["marker_chunks"])
    return {
        "path": path,
        "concurrency": concurrency,
        "streams": g["streams"],
        "outcomes": g["outcomes"],
        "content_chunks": g["marker_chunks"],
        "events_out": g["events"],
        "ttft_us": g["ttft_us"],
        "delay_us": g["delay_us"],
        "gap_us": g["gap_us"],
        "upstream_late_us": g["upstream_late_us"],
        "wall_s": round(result["wall_s"], 2),
        "proxy_cpu_s": round(cpu_proxy, 3),
        "proxy_cpu_us_per_chunk": round(1e6 * cpu_proxy / chunks, 1) if proxy else None,
        "proxy_idle_cpu_percent": round(100 * idle_rate, 2) if proxy else None,
        "proxy_cpu_us_per_chunk_minus_idle": round(
            1e6 * max(0.0, cpu_proxy - idle_rate * wall) / chunks, 1
        )
        if proxy
        else None,
        "upstream_cpu_us_per_chunk": round(1e6 * cpu_up / chunks, 1),
        "client_cpu_us_per_chunk": round(1e6 * result["client_cpu_s"] / chunks, 1),
        "loadavg": h.loadavg(),
    }


def _added(row: dict[str, Any], direct: dict[str, Any], key: str, q: str) -> float:
    return h.ms(row[key][q] - direct[key][q])


def _print(rows: list[dict[str, Any]]) -> None:
    print(
        f"\n{'path':<9}{'conc':>5}{'streams':>8}{'chunks':>8}  "
        f"{'TTFT p50/p99 ms':>17}  {'added TTFT p50/p99':>19}  {'delay p50/p99 ms':>17}  "
        f"{'added delay p50/p99':>20}  {'ITL p99 ms':>10}  {'CPU µs/chunk (-idle)':>12}  outcomes"
    )
    direct = {r["concurrency"]: r for r in rows if r["path"] == "direct"}
    for r in rows:
        d = direct[r["concurrency"]]
        t, dl = r["ttft_us"], r["delay_us"]
        if r["path"] == "direct":
            added_t = added_d = "-"
        else:
            added_t = f"{_added(r, d, 'ttft_us', 'p50'):.2f} / {_added(r, d, 'ttft_us', 'p99'):.2f}"
            added_d = (
                f"{_added(r, d, 'delay_us', 'p50'):.2f} / {_added(r, d, 'delay_us', 'p99'):.2f}"
            )
        cpu = r["proxy_cpu_us_per_chunk"]
        cpu_net = r["proxy_cpu_us_per_chunk_minus_idle"]
        print(
            f"{r['path']:<9}{r['concurrency']:>5}{r['streams']:>8}{r['content_chunks']:>8}  "
            f"{h.ms(t['p50']):>7.2f} / {h.ms(t['p99']):>7.2f}  {added_t:>19}  "
            f"{h.ms(dl['p50']):>7.2f} / {h.ms(dl['p99']):>7.2f}  {added_d:>20}  "
            f"{h.ms(r['gap_us']['p99']):>10.2f}  "
            f"{'-' if cpu is None else f'{cpu:.0f} ({cpu_net:.0f})':>12}  "
            f"{r['outcomes']}"
        )


def _plot(rows: list[dict[str, Any]], out: Path) -> None:
    plt = h.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    conc = sorted({r["concurrency"] for r in rows})
    direct = {r["concurrency"]: r for r in rows if r["path"] == "direct"}
    for path, color in (("gateway", "tab:green"), ("litellm", "tab:red")):
        sel = {r["concurrency"]: r for r in rows if r["path"] == path}
        if not sel:
            continue
        xs = [c for c in conc if c in sel]
        for q, style in (("p50", "-o"), ("p99", "--s")):
            axes[0].plot(
                xs,
                [_added(sel[c], direct[c], "ttft_us", q) for c in xs],
                style,
                color=color,
                label=f"{path} {q}",
            )
            axes[1].plot(
                xs,
                [_added(sel[c], direct[c], "delay_us", q) for c in xs],
                style,
                color=color,
                label=f"{path} {q}",
            )
    for ax, title in (
        (axes[0], "added time to first token (ms)"),
        (axes[1], "added per-chunk delay (ms)"),
    ):
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("concurrent streams")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    top = max(conc)
    bars = [r for r in rows if r["concurrency"] == top and r["proxy_cpu_us_per_chunk"]]
    axes[2].bar(
        [r["path"] for r in bars],
        [r["proxy_cpu_us_per_chunk"] for r in bars],
        color=["tab:green" if r["path"] == "gateway" else "tab:red" for r in bars],
    )
    axes[2].set_title(f"proxy CPU µs per streamed chunk ({top} streams)")
    axes[2].grid(True, axis="y", alpha=0.3)
    fig.suptitle("Gateway overhead vs direct and LiteLLM (scripted upstream, 20 tokens/s/stream)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _tracing_rounds(args: argparse.Namespace, levels: list[int], result: dict[str, Any]) -> None:
    """Direct once per concurrency, then both gateways alive side by side for ``args.rounds``
    rounds of a phase each, alternating which goes first: the two phases of a round are
    seconds apart, so the machine's drift cancels in their ratio; per concurrency, the median
    of each arm and of the per-round ratio on/off."""
    rows: list[dict[str, Any]] = []
    with (
        _otlp_sink() as endpoint,
        h.upstream(interval=INTERVAL, chunks=CHUNKS) as up,
        contextlib.ExitStack() as stack,
    ):
        for c in levels:
            print(f"  direct, {c} concurrent...", file=sys.stderr)
            rows.append(_phase("direct", up.port, None, up, c, _streams(c, args)))
        proxies = {
            path: stack.enter_context(_proxy(path, up, args, endpoint))
            for path in ("gateway", "gateway-traced")
        }
        for n in range(args.rounds):
            arms = ("gateway", "gateway-traced") if n % 2 == 0 else ("gateway-traced", "gateway")
            for c in levels:
                for path in arms:
                    proxy = proxies[path]
                    assert proxy is not None
                    print(f"  round {n + 1}: {path}, {c} concurrent...", file=sys.stderr)
                    phase = _phase(path, proxy.port, proxy, up, c, _streams(c, args))
                    rows.append({**phase, "round": n})
        for path, proxy in proxies.items():
            assert proxy is not None
            result[f"{path}_log_errors"] = [
                line
                for line in proxy.log_text().splitlines()
                if "Traceback" in line or "ERROR" in line
            ][:20]
    result["otlp_exports"] = _Sink.exports
    direct = {r["concurrency"]: r for r in rows if r["path"] == "direct"}
    summary: dict[str, Any] = {}
    print(
        f"\n{'streams':>7}  {'CPU µs/chunk off: median (range)':>34}  {'on: median (range)':>22}  "
        f"{'on/off per round: median (range)':>34}  {'added TTFT p50 ms off / on':>26}"
    )
    for c in levels:
        arm = {
            path: [r for r in rows if r["path"] == path and r["concurrency"] == c]
            for path in ("gateway", "gateway-traced")
        }
        cpu = {p: [r["proxy_cpu_us_per_chunk_minus_idle"] for r in arm[p]] for p in arm}
        ratios = [
            on["proxy_cpu_us_per_chunk_minus_idle"]
            / max(off["proxy_cpu_us_per_chunk_minus_idle"], 1e-9)
            for off, on in zip(arm["gateway"], arm["gateway-traced"], strict=True)
        ]
        ttft = {
            p: statistics.median(_added(r, direct[c], "ttft_us", "p50") for r in arm[p])
            for p in arm
        }
        summary[str(c)] = {
            "cpu_us_per_chunk_minus_idle": {"off": cpu["gateway"], "on": cpu["gateway-traced"]},
            "cpu_ratio_on_to_off_per_round": [round(x, 3) for x in ratios],
            "cpu_ratio_on_to_off_median": round(statistics.median(ratios), 3),
            "added_ttft_p50_ms_median": {
                "off": round(ttft["gateway"], 2),
                "on": round(ttft["gateway-traced"], 2),
            },
        }

        def spread(xs: list[float], fmt: str = ".0f") -> str:
            return f"{statistics.median(xs):{fmt}} ({min(xs):{fmt}}–{max(xs):{fmt}})"

        print(
            f"{c:>7}  {spread(cpu['gateway']):>34}  {spread(cpu['gateway-traced']):>22}  "
            f"{spread(ratios, '.3f'):>34}  {ttft['gateway']:>12.2f} / {ttft['gateway-traced']:.2f}"
        )
    print(f"OTLP exports received: {_Sink.exports}", file=sys.stderr)
    result["summary"] = summary
    result["rows"] = h.strip_cdf(rows)
    out = h.write_result("overhead_tracing", result)
    print(f"wrote {out.relative_to(h.ROOT)}")


def _streams(concurrency: int, args: argparse.Namespace) -> int:
    streams = STREAMS_PER_WORKER.get(concurrency, 4)
    return max(1, streams // 4) if args.quick else streams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer streams per phase")
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument("--concurrency", help="default 1,10,100 (--tracing: 10,100)")
    parser.add_argument("--loop", default="uvloop", choices=["asyncio", "uvloop"])
    parser.add_argument("--http", default="httptools", choices=["h11", "httptools"])
    parser.add_argument("--tracing", action="store_true", help="gateway with tracing off and on")
    parser.add_argument("--rounds", type=int, default=6, help="--tracing: rounds of both arms")
    args = parser.parse_args()
    default_levels = TRACING_LEVELS if args.tracing else "1,10,100"
    levels = [int(x) for x in (args.concurrency or default_levels).split(",")]
    use_litellm = not args.tracing and not args.no_litellm and h.litellm_available()
    if not args.tracing and not args.no_litellm and not use_litellm:
        print("LiteLLM venv missing (scripts/install_litellm.sh): path (c) skipped")
    result: dict[str, Any] = {
        **h.machine(),
        "upstream": {"interval_s": INTERVAL, "content_chunks": CHUNKS},
        "gateway_flags": {"loop": args.loop, "http": args.http, "workers": 1},
        "gateway_env": {**h.GATEWAY_ENV, **GATEWAY_ENV},
        "note": "upstream, gateway, LiteLLM and the load generator share the same 2 cores; "
        "paths run one after another, each proxy alive only for its own phases",
    }
    if args.tracing:
        result["rounds"] = args.rounds
        _tracing_rounds(args, levels, result)
        return
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    with h.upstream(interval=INTERVAL, chunks=CHUNKS) as up:
        # One path at a time, each proxy alive only for its own phases: an idle LiteLLM
        # beside the gateway took CPU from the gateway's phases (its timers and flushes).
        for path in PATHS:
            if path == "litellm" and not use_litellm:
                continue
            with _proxy(path, up, args) as proxy:
                port = proxy.port if proxy else up.port
                for c in levels:
                    print(f"  {path}, {c} concurrent...", file=sys.stderr)
                    rows.append(_phase(path, port, proxy, up, c, _streams(c, args)))
                if path.startswith("gateway") and proxy is not None:
                    result[f"{path}_log_errors"] = [
                        line
                        for line in proxy.log_text().splitlines()
                        if "Traceback" in line or "ERROR" in line
                    ][:20]
    rows.sort(key=lambda r: (r["concurrency"], PATHS.index(r["path"])))
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["loadavg_after"] = h.loadavg()
    _print(rows)
    direct = {r["concurrency"]: r for r in rows if r["path"] == "direct"}
    summary: dict[str, Any] = {}
    top = max(levels)
    for path in ("gateway", "litellm"):
        sel = [r for r in rows if r["path"] == path and r["concurrency"] == top]
        if sel:
            r = sel[0]
            summary[path] = {
                "concurrency": top,
                "added_ttft_ms": {
                    q: round(_added(r, direct[top], "ttft_us", q), 2) for q in ("p50", "p99")
                },
                "added_delay_ms": {
                    q: round(_added(r, direct[top], "delay_us", q), 2) for q in ("p50", "p99")
                },
                "cpu_us_per_chunk": r["proxy_cpu_us_per_chunk"],
                "cpu_us_per_chunk_minus_idle": r["proxy_cpu_us_per_chunk_minus_idle"],
            }
    if "gateway" in summary and "litellm" in summary:
        summary["cpu_ratio_gateway_to_litellm"] = round(
            summary["gateway"]["cpu_us_per_chunk"] / summary["litellm"]["cpu_us_per_chunk"], 3
        )
        summary["cpu_ratio_minus_idle"] = round(
            summary["gateway"]["cpu_us_per_chunk_minus_idle"]
            / summary["litellm"]["cpu_us_per_chunk_minus_idle"],
            3,
        )
    if "gateway" in summary:
        g = summary["gateway"]
        summary["targets"] = {
            "added_ttft_p50_le_2ms": g["added_ttft_ms"]["p50"] <= 2,
            "added_ttft_p99_le_10ms": g["added_ttft_ms"]["p99"] <= 10,
            "cpu_le_one_third_of_litellm": summary.get("cpu_ratio_gateway_to_litellm", 1) <= 1 / 3,
        }
    print(f"\nsummary at {top} concurrent: {summary}")
    result["summary"] = summary
    result["rows"] = h.strip_cdf(rows)
    png = h.RESULTS / "overhead.png"
    _plot(rows, png)
    out = h.write_result("overhead", result)
    print(f"wrote {out.relative_to(h.ROOT)} and {png.relative_to(h.ROOT)}")


if __name__ == "__main__":
    main()
