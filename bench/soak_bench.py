"""Soak: minutes of mixed traffic against the gateway and the fast scripted upstream.

Two client groups run side by side for ``--minutes`` (default 10), each request drawn at
random by weight:

* GET streams (``--sse-workers`` closed-loop workers): normal base-info streams, free-text
  streams whose message selects an upstream fault (``[[bench:NAME]]``: http_error, cut,
  stall past LLM_READ_TIMEOUT, in-band error, 429, prose instead of JSON), streams the client
  hangs up after two chunks, and invalid input;
* POSTs (``--post-workers``): base-info and free-text JSON, one with an upstream failure.

Each kind of request has an expected outcome (``close``, ``error_502``, ``error_504``,
``hangup``, ``post_200`` ...); the report counts requests by kind and outcome and flags any
that ended otherwise. Every ``--every`` seconds it samples the gateway's RSS, open streams and
event-loop tasks (``/metrics``) and the upstream's active streams. At the end it waits for the
gauges to settle, then greps the gateway log for tracebacks, ``unhandled``, ``ERROR`` lines.

    .venv/bin/python bench/soak_bench.py [--minutes 10] [--sse-workers 30] [--post-workers 4]
Writes bench/results/soak.json and soak.png.
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

import harness as h

GATEWAY_ENV = {
    "MAX_CONCURRENT_GENERATIONS": "1000",
    "LLM_MAX_CONNECTIONS": "1000",
    "LLM_READ_TIMEOUT": "2",  # the stall scenario holds 5 s: a 504 after 2 s
    "LOG_LEVEL": "WARNING",
}
FREE = "플로깅 챌린지 알려줘 "
BAD = h.BASE_INFO + "?location=%EB%B0%94%EB%8B%A4&workType=x&category=NOPE"
#: (weight, path, body, hang up after N chunks, label) and the outcome each label expects.
SSE_MIX: list[tuple[float, str, Any, int | None, str]] = [
    (50, h.base_info_path(), None, None, "get ok"),
    (10, h.free_text_path(FREE + "[[bench:ok]]"), None, None, "get free-text ok"),
    (10, h.base_info_path(), None, 2, "get hang-up"),
    (4, h.free_text_path(FREE + "[[bench:http_error]]"), None, None, "get upstream 500"),
    (4, h.free_text_path(FREE + "[[bench:cut]]"), None, None, "get upstream cut"),
    (3, h.free_text_path(FREE + "[[bench:stall]]"), None, None, "get upstream stall"),
    (4, h.free_text_path(FREE + "[[bench:inband_error]]"), None, None, "get in-band error"),
    (4, h.free_text_path(FREE + "[[bench:overloaded]]"), None, None, "get upstream 429"),
    (4, h.free_text_path(FREE + "[[bench:prose]]"), None, None, "get prose answer"),
    (3, BAD, None, None, "get invalid input"),
]
POST_MIX: list[tuple[float, str, Any, int | None, str]] = [
    (3, h.BASE_INFO, {**h.BASE_INFO_QUERY}, None, "post ok"),
    (2, h.FREE_TEXT, {"message": FREE + "[[bench:ok]]"}, None, "post free-text ok"),
    (1, h.FREE_TEXT, {"message": FREE + "[[bench:http_error]]"}, None, "post upstream 500"),
]
EXPECTED = {
    "get ok": {"close"},
    "get free-text ok": {"close"},
    "get hang-up": {"hangup"},
    "get upstream 500": {"error_502"},
    "get upstream cut": {"error_502"},
    "get upstream stall": {"error_504"},
    "get in-band error": {"error_502"},
    "get upstream 429": {"error_503"},
    "get prose answer": {"close"},
    "get invalid input": {"error_422"},
    "post ok": {"post_200"},
    "post free-text ok": {"post_200"},
    "post upstream 500": {"post_502"},
}
_GAUGE = re.compile(r"^(gateway_open_streams|gateway_event_loop_tasks) (\S+)$", re.M)
_UNEXPECTED = re.compile(r"Traceback|unhandled|Unhandled|\bERROR\b|CRITICAL")


def _sample(gw: h.Proc, up: h.Proc, t0: float) -> dict[str, Any]:
    row: dict[str, Any] = {"t": round(time.monotonic() - t0, 1), "rss_mb": gw.rss_bytes() / 2**20}
    try:
        text = httpx.get(gw.url + "/metrics", timeout=10).text
        row.update({k: float(v) for k, v in _GAUGE.findall(text)})
        row["upstream_active"] = h.upstream_stats(up)["active"]
    except httpx.HTTPError as exc:
        row["error"] = repr(exc)
    return row


def _slope_mb_per_min(samples: list[dict[str, Any]], skip_s: float) -> float | None:
    pts = [(s["t"], s["rss_mb"]) for s in samples if s["t"] >= skip_s]
    if len(pts) < 3:
        return None
    mx = sum(t for t, _ in pts) / len(pts)
    my = sum(m for _, m in pts) / len(pts)
    den = sum((t - mx) ** 2 for t, _ in pts)
    return 60 * sum((t - mx) * (m - my) for t, m in pts) / den if den else None


def _plot(samples: list[dict[str, Any]], out: Path) -> None:
    plt = h.pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    ts = [s["t"] for s in samples]
    ax.plot(ts, [s["rss_mb"] for s in samples], color="tab:blue", label="RSS MB")
    ax.set_xlabel("seconds")
    ax.set_ylabel("gateway RSS (MB)")
    ax2 = ax.twinx()
    ax2.plot(
        ts,
        [s.get("gateway_open_streams", 0) for s in samples],
        color="tab:green",
        label="open streams",
    )
    ax2.plot(
        ts,
        [s.get("gateway_event_loop_tasks", 0) for s in samples],
        color="tab:orange",
        label="loop tasks",
    )
    ax2.set_ylabel("count")
    fig.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.set_title("Soak: mixed traffic (streams, hang-ups, upstream faults, POSTs)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sse-workers", type=int, default=30)
    parser.add_argument("--post-workers", type=int, default=4)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--loop", default="uvloop", choices=["asyncio", "uvloop"])
    parser.add_argument("--http", default="httptools", choices=["h11", "httptools"])
    args = parser.parse_args()
    duration = args.minutes * 60
    result: dict[str, Any] = {
        **h.machine(),
        "minutes": args.minutes,
        "workers": {"sse": args.sse_workers, "post": args.post_workers},
        "gateway_flags": {"loop": args.loop, "http": args.http, "workers": 1},
        "gateway_env": {**h.GATEWAY_ENV, **GATEWAY_ENV},
        "upstream": {"interval_s": 0.02, "content_chunks": 30, "fault_after_chunks": 3},
    }
    samples: list[dict[str, Any]] = []
    with (
        h.upstream(interval=0.02, chunks=30, after=3, hold=5.0) as up,
        h.gateway(up.url + "/v1", env=GATEWAY_ENV, loop=args.loop, http=args.http) as gw,
    ):
        h.load({"port": gw.port, "groups": [h.gateway_group("warm", concurrency=5, streams=2)]})
        spec = {
            "port": gw.port,
            "timeout": 60,
            "groups": [
                h.group(
                    "sse",
                    "sse_get",
                    SSE_MIX,
                    concurrency=args.sse_workers,
                    duration=duration,
                    ramp=2.0,
                ),
                h.group(
                    "post",
                    "post_json",
                    POST_MIX,
                    concurrency=args.post_workers,
                    duration=duration,
                    seed=2,
                ),
            ],
        }
        out: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: out.update(h.load(spec, timeout=duration + 300)))
        t0 = time.monotonic()
        thread.start()
        while thread.is_alive():
            samples.append(_sample(gw, up, t0))
            thread.join(args.every)
        time.sleep(3.0)  # let the last streams wind down
        samples.append(_sample(gw, up, t0))
        settled = samples[-1]
        log = gw.log_text()
    groups = out["groups"]
    by_label: dict[str, dict[str, int]] = {}
    for g in groups.values():
        for key, count in g["by_label"].items():
            label, _, outcome = key.partition(" -> ")
            by_label.setdefault(label, {})[outcome] = count
    unexpected_outcomes = {
        label: {o: n for o, n in outcomes.items() if o not in EXPECTED.get(label, set())}
        for label, outcomes in by_label.items()
    }
    unexpected_outcomes = {k: v for k, v in unexpected_outcomes.items() if v}
    bad_lines = [line for line in log.splitlines() if _UNEXPECTED.search(line)]
    rss = [s["rss_mb"] for s in samples]
    result.update(
        {
            "requests": sum(g["streams"] for g in groups.values()),
            "by_kind_and_outcome": by_label,
            "unexpected_outcomes": unexpected_outcomes,
            "events_after_terminal": sum(g["events_after_terminal"] for g in groups.values()),
            "rss_mb": {
                "start": round(rss[0], 1),
                "end": round(rss[-1], 1),
                "max": round(max(rss), 1),
                "slope_mb_per_min_after_first_minute": (
                    None if (sl := _slope_mb_per_min(samples, 60)) is None else round(sl, 3)
                ),
                # The bounded caches (SESSION_MAX_COUNT sessions: one per request here, as
                # none sends a sessionId; STREAM_RESUME_TTL_SECONDS of ended streams) fill
                # in the first minutes; after that, growth would be a leak.
                "slope_mb_per_min_last_half": (
                    None
                    if (sl2 := _slope_mb_per_min(samples, duration / 2)) is None
                    else round(sl2, 3)
                ),
            },
            "settled": {
                k: settled.get(k)
                for k in ("gateway_open_streams", "gateway_event_loop_tasks", "upstream_active")
            },
            "max_open_streams": max(s.get("gateway_open_streams", 0) for s in samples),
            "log_lines": len(log.splitlines()),
            "log_unexpected_count": len(bad_lines),
            "log_unexpected_first": bad_lines[:20],
            "loadavg_after": h.loadavg(),
            "wall_s": round(out.get("wall_s", 0), 1),
            "samples": [
                {k: (round(v, 2) if isinstance(v, float) else v) for k, v in s.items()}
                for s in samples
            ],
        }
    )
    print(f"\nsoak: {args.minutes:g} min, {result['requests']} requests")
    print(f"{'kind':<22} {'outcomes':<40} {'expected':<12}")
    for label, outcomes in sorted(by_label.items()):
        text = ", ".join(f"{o} {n}" for o, n in sorted(outcomes.items()))
        flag = "ok" if label not in unexpected_outcomes else "UNEXPECTED"
        print(f"{label:<22} {text:<40} {flag}")
    r = result["rss_mb"]
    print(
        f"\nRSS MB start {r['start']}, end {r['end']}, max {r['max']}, "
        f"slope after the first minute {r['slope_mb_per_min_after_first_minute']} MB/min, "
        f"over the last half {r['slope_mb_per_min_last_half']} MB/min"
    )
    print(f"open streams max {result['max_open_streams']:g}; after settling {result['settled']}")
    print(f"events after a terminal event: {result['events_after_terminal']}")
    print(f"gateway log: {result['log_lines']} lines, {len(bad_lines)} unexpected")
    for line in bad_lines[:10]:
        print("   ", line[:200])
    png = h.RESULTS / "soak.png"
    _plot(samples, png)
    path = h.write_result("soak", result)
    print(f"wrote {path.relative_to(h.ROOT)} and {png.relative_to(h.ROOT)}")


if __name__ == "__main__":
    main()
