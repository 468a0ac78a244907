"""A burst of users behind one relay: are they all served, and how long do they wait?

The production path is browser -> backend -> gateway, so every user arrives from the
backend's one address. This bench sends bursts of 50, 100 and 200 free-text users at once
from one address (each its own ``sessionId`` and its own message, no API key, no forwarded
header) while one answer is already streaming, on the gateway's default limits, against the
fast scripted upstream (``bench/fast_upstream.py``: 100 chunks, 50 ms apart). Side by side in
one run, one gateway per row:

    floor       retrieval off (RETRIEVAL_K=0): the proxy path alone
    retrieval   the defaults: bundled corpus in the embedded store, query cache on; four
                queries waiting for the embedding model (EMBEDDING_QUEUE_MAX) are a burst:
                they and every turn for a second after (EMBEDDING_BURST_SECONDS) are read
                by their words (lexical intent, sparse-only search)
    no-cache    the defaults with RETRIEVAL_CACHE_SIZE=0 (every turn embeds or reads words)
    wait-all    the defaults with EMBEDDING_QUEUE_MAX=0: every turn waits for its embedding

Every message of a row is distinct (the cache helps none of them: its worst case); a burst
waits until the client limit's window has room for it. Each burst size runs ``--repeats``
times (3) on the same gateway, and so does the direct burst below: one burst on this shared
machine varies by a third, so each figure is the median of the runs (served: the fewest,
refused: the most). The floor's turns are still read by the intent step, embedded by the
same rule. Per burst: users served (a ``close``), refused (an ``error``: 429 or 503), TTFT (request sent
-> first text from the upstream) p50/p90/p99; ADDED: the same percentile minus that of the
same burst sent straight to the upstream by the same client (what this machine, load
generator and upstream take without the gateway); turns read by their words (LEXICAL, from
/metrics), of which those the words alone would refuse and their embedding then answered
(overturned), refused too (confirmed) or could not be waited for (unconfirmed); and the worst
extra gap of the stream that was already running: its largest gap between two text events
beyond the same gap of the same answer streamed alone on the same gateway (the answer's
display holds some chunks until a title is whole, so its own gaps are not all the upstream's
50 ms). The messages are the on-topic turns of
bench/data/intent/dev.jsonl and the queries of bench/data/queries_ko.jsonl, distinct, so the
cache helps only where users really repeat each other; the intent step may still answer a
few of them as off-topic without the upstream: those are counted apart ("friendly") and left
out of the TTFT.

    .venv/bin/python bench/burst_bench.py [--bursts 50,100,200] [--rows floor,retrieval] [--repeats 3]

The gateway runs as ``make run`` starts it (uvloop, httptools). The load generator runs in
this process on the same 2 cores as the gateway and the upstream:
the figures are the whole machine's, as a relay on the same host would see them.
Writes bench/results/burst.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

from app.llm.sse_decode import iter_frames

INTERVAL = 0.05
CLIENT_WINDOW_SECONDS = 10.5  # the client limit's default: 200 requests per 10 s, plus slack
CLIENT_WINDOW_REQUESTS = 199  # the stream already running is one of them
CHUNKS = 100  # 5 s per answer: the running stream outlasts the burst's first texts
DEFAULT_LIMITS = {  # GATEWAY_ENV turns limits off for the other benches; this one keeps them
    "RATE_LIMIT_PER_MINUTE": "60",
    "RATE_LIMIT_BURST": "20",
    "CLIENT_RATE_LIMIT_PER_MINUTE": "1200",
    "CLIENT_RATE_LIMIT_BURST": "200",
    "SESSION_MAX_CONCURRENT": "2",
}


def messages() -> list[str]:
    dev = harness.BENCH / "data" / "intent" / "dev.jsonl"
    queries = harness.BENCH / "data" / "queries_ko.jsonl"
    turns = [json.loads(line) for line in dev.read_text(encoding="utf-8").splitlines()]
    picked = [t["message"] for t in turns if t["intent"] in ("switch", "ask", "more", "among")]
    for line in queries.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("relevant_ids"):
            picked.append(row["query"])
    return list(dict.fromkeys(picked))


def unique_messages(texts: list[str], count: int) -> list[str]:
    """``count`` messages, none asked twice in a row's run: each user's embedding is a miss,
    as for users who phrase things their own way (past the distinct texts, a number is
    appended)."""
    return [
        texts[i % len(texts)] + (f" {i // len(texts)}" if i >= len(texts) else "")
        for i in range(count)
    ]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def one_user(client: httpx.AsyncClient, session: str, message: str) -> dict[str, Any]:
    started = time.perf_counter()
    first: float | None = None
    terminal = None
    upstream_text = False
    params = {"sessionId": session, "message": message}
    async with client.stream("GET", harness.FREE_TEXT, params=params) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge":
                if first is None and "~" in (frame.data or ""):  # the upstream's marker
                    first = time.perf_counter() - started
                    upstream_text = True
            elif frame.event in ("close", "error"):
                terminal = (frame.event, frame.payload["status"])
    return {"ttft": first, "terminal": terminal, "upstream": upstream_text}


async def running_stream(client: httpx.AsyncClient, started: asyncio.Event) -> list[float]:
    """A base-info answer already streaming: its chunk arrival times."""
    arrivals: list[float] = []
    query = {**harness.BASE_INFO_QUERY, "sessionId": "already-running"}
    async with client.stream("GET", harness.BASE_INFO, params=query) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge" and "~" in (frame.data or ""):
                arrivals.append(time.perf_counter())
                started.set()
    return arrivals


async def stream_alone(url: str) -> list[float]:
    """The running stream's gaps between text events with nothing else on the gateway."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        arrivals = await running_stream(client, asyncio.Event())
    return [b - a for a, b in itertools.pairwise(arrivals)]


async def burst(
    url: str, users: int, asked: list[str], tag: str, alone: list[float] | None = None
) -> dict[str, Any]:
    """``alone``: :func:`stream_alone`'s gaps (None: the upstream's interval for each)."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        started = asyncio.Event()
        runner = asyncio.create_task(running_stream(client, started))
        await asyncio.wait_for(started.wait(), 30)
        await asyncio.sleep(0.3)  # a few chunks in: the gaps before the burst are the baseline
        results = await asyncio.gather(
            *(one_user(client, f"{tag}-{users}-{i}", text) for i, text in enumerate(asked))
        )
        arrivals = await runner
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    own = alone if alone is not None and len(alone) == len(gaps) else [INTERVAL] * len(gaps)
    extra = [gap - base for gap, base in zip(gaps, own, strict=True)]
    served = sum(1 for r in results if r["terminal"] and r["terminal"][0] == "close")
    refused = [r["terminal"][1] for r in results if r["terminal"] and r["terminal"][0] == "error"]
    ttfts = [r["ttft"] * 1000 for r in results if r["ttft"] is not None]
    return {
        "users": users,
        "served": served,
        "refused": len(refused),
        "refused_statuses": sorted(set(refused)),
        "friendly": sum(
            1
            for r in results
            if r["terminal"] and r["terminal"][0] == "close" and not r["upstream"]
        ),
        "ttft_ms": {q: round(pct(ttfts, q), 1) for q in (50, 90, 99)},
        "running_worst_extra_gap_ms": round(max(extra) * 1000, 1) if extra else None,
    }


async def direct_ttft(url: str, n: int = 20) -> float:
    """The upstream's own TTFT, sequential requests straight to it (ms, p50)."""
    times = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for _ in range(n):
            started = time.perf_counter()
            async with client.stream("POST", "/v1/chat/completions", json=harness.CHAT_BODY) as r:
                async for line in r.aiter_lines():
                    if "~" in line:
                        times.append((time.perf_counter() - started) * 1000)
                        break
    return statistics.median(times)


async def direct_burst(url: str, users: int) -> dict[int, float]:
    """The same burst sent straight to the upstream (whole answers, one running beside them):
    what this load generator and upstream take on this machine without the gateway. TTFT
    p50/p90/p99 in ms."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)

    async def one(client: httpx.AsyncClient) -> float | None:
        started = time.perf_counter()
        first = None
        async with client.stream("POST", "/v1/chat/completions", json=harness.CHAT_BODY) as r:
            async for line in r.aiter_lines():
                if first is None and "~" in line:
                    first = (time.perf_counter() - started) * 1000
        return first

    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        runner = asyncio.create_task(one(client))
        await asyncio.sleep(0.3)
        ttfts = [t for t in await asyncio.gather(*(one(client) for _ in range(users))) if t]
        await runner
    return {q: round(pct(ttfts, q), 1) for q in (50, 90, 99)}


ROWS = {
    "floor": {"RETRIEVAL_K": "0"},
    "retrieval": {},
    "no-cache": {"RETRIEVAL_CACHE_SIZE": "0"},
    "wait-all": {"EMBEDDING_QUEUE_MAX": "0"},
}


def counters(url: str) -> dict[str, int]:
    """Turns read by their words, and their refusals by outcome, from /metrics."""
    found = {"lexical": 0, "overturned": 0, "confirmed": 0, "unconfirmed": 0}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("gateway_lexical_turns_total "):
            found["lexical"] = int(float(line.split()[1]))
        elif line.startswith("gateway_lexical_refusals_total{"):
            outcome = line.split('outcome="')[1].split('"')[0]
            found[outcome] = int(float(line.split()[1]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bursts", default="50,100,200")
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument(
        "--repeats", type=int, default=3, help="bursts per size and row; medians are reported"
    )
    args = parser.parse_args()
    bursts = [int(b) for b in args.bursts.split(",")]
    texts = messages()
    print(f"{len(texts)} distinct messages; bursts {bursts}; rows {args.rows}")
    results: list[dict[str, Any]] = []
    with harness.upstream(interval=INTERVAL, chunks=CHUNKS) as up:
        direct = asyncio.run(direct_ttft(up.url))
        print(f"direct upstream TTFT p50 {direct:.1f} ms")
        direct_bursts = {}
        for users in bursts:
            runs = [asyncio.run(direct_burst(up.url, users)) for _ in range(args.repeats)]
            direct_bursts[users] = {q: _median(r[q] for r in runs) for q in (50, 90, 99)}
            print(f"direct upstream, burst of {users}: TTFT p50/p90/p99 {direct_bursts[users]}")
        for row in args.rows.split(","):
            with tempfile.TemporaryDirectory(prefix="burst-store-") as store:
                env = {
                    **DEFAULT_LIMITS,
                    "RETRIEVAL_K": "3",
                    "QDRANT_PATH": str(Path(store) / "qdrant"),
                    "CORPUS_PATH": str(harness.ROOT / "app" / "rag" / "data" / "challenges.jsonl"),
                    **ROWS[row],
                }
                with harness.gateway(
                    up.url + "/v1", env=env, loop="uvloop", http="httptools", startup_timeout=300
                ) as gw:
                    window = _ClientWindow()
                    window.wait_for(5)
                    asyncio.run(burst(gw.url, 5, ["워밍업 질문"] * 5, f"{row}-warm"))
                    window.wait_for(1)
                    alone = asyncio.run(stream_alone(gw.url))
                    asked = unique_messages(texts, sum(bursts) * args.repeats)
                    for users in bursts:
                        runs = []
                        for _ in range(args.repeats):
                            window.wait_for(users + 1)  # the burst and the stream running
                            mine, asked = asked[:users], asked[users:]
                            before = counters(gw.url)
                            run = asyncio.run(
                                burst(gw.url, users, mine, f"{row}-{len(runs)}", alone)
                            )
                            after = counters(gw.url)
                            run.update({k: after[k] - before[k] for k in after})
                            runs.append(run)
                        result = _summary(row, users, runs, direct_bursts[users])
                        results.append(result)
                        print_row(result)
    harness.RESULTS.mkdir(exist_ok=True)
    out = harness.RESULTS / "burst.json"
    out.write_text(
        json.dumps(
            {
                "bench": "burst",
                "machine": platform.platform(),
                "direct_ttft_ms_p50": round(direct, 1),
                "repeats": args.repeats,
                "direct_burst_ttft_ms": direct_bursts,
                "results": results,
            },
            ensure_ascii=False,
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"written: {out.relative_to(harness.ROOT)}")
    return 0


def _median(values: Any) -> float:
    return round(statistics.median(values), 1)


class _ClientWindow:
    """The default client limit (200 requests per 10 s from one address): wait until a burst
    fits in the window, so that no burst is refused by the bursts before it."""

    def __init__(self) -> None:
        self._sent: list[tuple[float, int]] = []

    def wait_for(self, requests: int) -> None:
        """Wait until ``requests`` more fit in the window (a whole window when they cannot:
        the 201st request of a 200-user burst is refused, as it would be in production)."""
        requests = min(requests, CLIENT_WINDOW_REQUESTS)
        while True:
            now = time.monotonic()
            self._sent = [(t, n) for t, n in self._sent if now - t < CLIENT_WINDOW_SECONDS]
            if sum(n for _, n in self._sent) + requests <= CLIENT_WINDOW_REQUESTS:
                break
            time.sleep(CLIENT_WINDOW_SECONDS - (now - self._sent[0][0]))
        self._sent.append((time.monotonic(), requests))


def _summary(
    row: str, users: int, runs: list[dict[str, Any]], direct: dict[int, float]
) -> dict[str, Any]:
    """The median burst of ``runs``: each figure the median over the runs."""
    ttft = {q: _median(r["ttft_ms"][q] for r in runs) for q in (50, 90, 99)}
    gaps = [r["running_worst_extra_gap_ms"] for r in runs if r["running_worst_extra_gap_ms"]]
    return {
        "row": row,
        "users": users,
        "served": min(r["served"] for r in runs),
        "refused": max(r["refused"] for r in runs),
        "refused_statuses": sorted({s for r in runs for s in r["refused_statuses"]}),
        "friendly": max(r["friendly"] for r in runs),
        "lexical": _median(r["lexical"] for r in runs),
        # refusals read by words, then by the embedding: overturned (answered), confirmed,
        # unconfirmed (too many waiting): the most over the runs
        "overturned": max(r["overturned"] for r in runs),
        "confirmed": max(r["confirmed"] for r in runs),
        "unconfirmed": max(r["unconfirmed"] for r in runs),
        "ttft_ms": ttft,
        "added_ttft_ms": {q: round(ttft[q] - direct[q], 1) for q in ttft},
        "running_worst_extra_gap_ms": _median(gaps) if gaps else None,
        "runs": runs,
    }


def print_row(r: dict[str, Any]) -> None:
    t, a = r["ttft_ms"], r["added_ttft_ms"]
    print(
        f"{r['row']:<10} {r['users']:>4} users  served {r['served']:>4}  refused {r['refused']:>3}"
        f"  friendly {r['friendly']:>3}  lexical {r['lexical']:>3}"
        f"  overturned/confirmed/unconfirmed {r['overturned']}/{r['confirmed']}/{r['unconfirmed']}"
        f"  TTFT p50/p90/p99 {t[50]:>7.1f} {t[90]:>7.1f} {t[99]:>7.1f}"
        f"  ADDED {a[50]:>7.1f} {a[90]:>7.1f} {a[99]:>7.1f}"
        f"  running stream worst extra gap {r['running_worst_extra_gap_ms']} ms"
    )


if __name__ == "__main__":
    raise SystemExit(main())
