"""Candidate chat models, measured directly against one vLLM server's OpenAI API.

    .venv/bin/python bench/model_bench.py --url http://127.0.0.1:8811 --label qwen2.5-coder-0.5b \
        [--cases alone,concurrent4,prefix,quality] [--repeat 3]

Talks to ``POST /v1/chat/completions`` with ``stream: true`` and
``stream_options: {"include_usage": true}`` (no gateway in between) and measures per request:
prompt and completion tokens (the usage chunk), time to first token (the first non-empty
``delta.content``; for a cold prompt that is the prefill), and decode tokens/s
(``(completion_tokens - 1) / (last chunk - first token)``). Cases (each can run alone):

* ``alone``: the ~600-token Korean prompt (a system prompt plus four catalogue entries; 686
  tokens with Qwen's tokenizer, 565 with Gemma 3's), exactly 128 tokens (``ignore_eos``,
  ``max_tokens: 128``, greedy), one request at a time, ``--repeat`` times. Every request starts
  with its own nonce line, so no request reuses another's cached prefix: TTFT is a full prefill.
* ``concurrent4``: the same, 4 requests at once (each with its own nonce): per-stream and
  aggregate tokens/s.
* ``prefix``: one new nonce, the same prompt sent twice in a row (16 tokens each): with prefix
  caching the second TTFT drops; also the growth of ``vllm:prefix_cache_hits_total`` /
  ``vllm:prefix_cache_queries_total`` from ``/metrics``.
* ``quality``: 6 fixed Korean prompts of the kind the product sends, answered as
  ``{"recommend": ..., "picks": [...]}`` under a ``response_format`` json_schema (picks from an
  enum of the prompt's 3 candidates, recommend at most 120 characters), temperature 0.3,
  ``seed`` fixed; the raw outputs are recorded verbatim, with the share of Hangul among letters
  and any foreign-script letters.

Waits while ``/tmp/eco-bench-running`` exists (another benchmark on the box) before each case;
records the load average around each. Prints a table and writes ``bench/results/model_bench_<label>.json``; a later run with other
``--cases`` updates the same file (cases it did not run are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

RESULTS = Path(__file__).resolve().parent / "results"
# While this file exists another benchmark is running on the box: wait before each case.
BUSY_FLAG = Path("/tmp/eco-bench-running")


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def busy() -> bool:
    return BUSY_FLAG.exists()


HZ = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


def cpu_jiffies(session: int | None) -> tuple[int, int]:
    """(busy jiffies of the whole machine, jiffies of this process and of the server's session)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    total = sum(fields) - fields[3] - fields[4]  # minus idle and iowait
    mine = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            st = (d / "stat").read_text()
        except OSError:
            continue
        rest = st.rsplit(")", 1)[1].split()  # fields after the command name
        pid, sid = int(d.name), int(rest[3])
        if pid == os.getpid() or (session is not None and sid == session):
            mine += int(rest[11]) + int(rest[12])  # utime + stime
    return total, mine


class Quiet:
    """Measures and (optionally) waits out other load on the box.

    ``--other-vllm URL``: another vLLM on the same machine (e.g. a colleague's :8800); its
    ``vllm:num_requests_running`` + ``waiting``, and the measured server's own, must be 0 and the CPU used by everything outside
    this bench and the measured server's session (``--server-pid``: its session id) must stay
    under ``--quiet-cpu`` of the machine over 2 s, for at most ``--quiet-wait`` seconds. Each
    measurement records ``others_cpu_share`` (that outside CPU over its duration) so a noisy
    number can be told from a quiet one.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        # The measured server itself must be idle too (nobody else may be using it).
        self.others: list[str] = [u.rstrip("/") for u in [*args.other_vllm, args.url]]
        self.session: int | None = args.server_pid
        self.wait_s: float = args.quiet_wait
        self.cpu_limit: float = args.quiet_cpu

    def mark(self) -> tuple[float, int, int]:
        total, mine = cpu_jiffies(self.session)
        return time.monotonic(), total, mine

    def others_share(self, since: tuple[float, int, int]) -> float | None:
        now = self.mark()
        wall = now[0] - since[0]
        if wall <= 0:
            return None
        others = max(0, (now[1] - since[1]) - (now[2] - since[2]))
        return round(others / HZ / (wall * NCPU), 3)

    async def others_running(self, client: httpx.AsyncClient) -> float:
        n = 0.0
        names = ["vllm:num_requests_running", "vllm:num_requests_waiting"]
        for u in self.others:
            try:
                vals = await metric_values(client, u, names)
            except httpx.HTTPError:
                continue  # not running: no load from it
            n += sum(vals.values())
        return n

    async def gate(self, client: httpx.AsyncClient, wait: bool = True) -> dict[str, Any]:
        """Waits while the busy flag exists; then, with ``wait``, for a quiet box."""
        t0 = time.monotonic()
        flagged = False
        while busy():
            if not flagged:
                print(
                    f"[model_bench] {BUSY_FLAG} exists: waiting (polling every 30 s)",
                    file=sys.stderr,
                )
                flagged = True
            await asyncio.sleep(30)
        quiet = True
        while wait and self.wait_s > 0:
            m = self.mark()
            running = await self.others_running(client)
            await asyncio.sleep(2)
            share = self.others_share(m)
            if running == 0 and share is not None and share <= self.cpu_limit:
                break
            if time.monotonic() - t0 >= self.wait_s:
                quiet = False
                print("[model_bench] box still busy: measuring anyway", file=sys.stderr)
                break
        return {"waited_s": round(time.monotonic() - t0, 1), "quiet": quiet}


async def measured(
    quiet: Quiet,
    client: httpx.AsyncClient,
    url: str,
    model: str,
    body: dict[str, Any],
    wait: bool = True,
) -> dict[str, Any]:
    """stream_chat after the quiet gate, with the outside CPU share during the request."""
    g = await quiet.gate(client, wait)
    m = quiet.mark()
    r = await stream_chat(client, url, model, body)
    r["others_cpu_share"] = quiet.others_share(m)
    r["gate"] = g
    return r


SYSTEM = "당신은 일상에서 실천할 수 있는 친환경 챌린지를 추천하는 도우미입니다."

# Four entries of app/rag/data/challenges.jsonl (zw-001 ... zw-004), frozen here so the prompt
# stays the same when the corpus changes.
LONG_USER = """사는 곳: 도시, 일하는 방식: 사무직. 아래 챌린지 자료를 참고해서 제로웨이스트 챌린지를 추천해 주세요.

참고 자료:
1. 텀블러로 음료 마시기: 카페에서 음료를 살 때 일회용 컵 대신 개인 텀블러를 건네 보세요. 코팅된 종이컵과 플라스틱 컵은 재활용이 까다로워 대부분 소각되거나 매립되기 때문에, 텀블러 하나만으로도 한 해 수백 개의 컵을 줄일 수 있습니다. 들고 다니기 번거롭다면 회사 책상과 가방에 하나씩 두고, 텀블러 할인을 해 주는 카페를 단골로 정해 보세요.
2. 장바구니 들고 장보기: 마트나 시장에 갈 때 접이식 장바구니를 챙겨 비닐봉지를 받지 않는 챌린지입니다. 비닐봉지는 한 번 쓰고 버려지는 경우가 많고, 바람에 날려 하천과 바다로 흘러들기 쉽습니다. 현관문 손잡이나 차 트렁크에 장바구니를 걸어 두면 깜빡 잊는 일이 훨씬 줄어듭니다.
{zw3}
{zw4}

위 자료를 바탕으로 오늘 바로 시작할 수 있는 챌린지를 자세히 설명해 주세요."""

FORMAT_RULE = (
    '답은 JSON 객체 하나로만 하세요: {"recommend": "사용자에게 건네는 한두 문장의 추천", '
    '"picks": [후보 중 고른 챌린지 제목]}'
)

# (id, user message, the 3 candidate titles)
QUALITY_PROMPTS: list[tuple[str, str, list[str]]] = [
    (
        "base_energy",
        "사는 곳: 도시, 일하는 방식: 사무직. 에너지 절약 챌린지를 추천해 주세요. "
        "후보: 1) 퇴근 전 멀티탭 끄기 2) 계단 이용하기 3) 모니터 밝기 낮추기",
        ["퇴근 전 멀티탭 끄기", "계단 이용하기", "모니터 밝기 낮추기"],
    ),
    (
        "base_transport",
        "사는 곳: 농촌, 일하는 방식: 재택근무. 교통 챌린지를 추천해 주세요. "
        "후보: 1) 가까운 거리는 걸어가기 2) 자전거로 장보기 3) 이웃과 카풀하기",
        ["가까운 거리는 걸어가기", "자전거로 장보기", "이웃과 카풀하기"],
    ),
    (
        "base_zero_waste",
        "사는 곳: 바닷가, 일하는 방식: 현장직. 제로웨이스트 챌린지를 추천해 주세요. "
        "후보: 1) 텀블러 들고 다니기 2) 장바구니 챙기기 3) 배달 주문 때 일회용 수저 거절하기",
        ["텀블러 들고 다니기", "장바구니 챙기기", "배달 주문 때 일회용 수저 거절하기"],
    ),
    (
        "free_soy_milk",
        "우유 대신 두유 마시는 챌린지 하고 싶어. "
        "후보: 1) 식물성 우유로 바꾸기 2) 주 1회 채식하기 3) 식물성 요거트 맛보기",
        ["식물성 우유로 바꾸기", "주 1회 채식하기", "식물성 요거트 맛보기"],
    ),
    (
        "free_wet_wipes",
        "물티슈 대신 쓸 만한 거 없나? "
        "후보: 1) 손수건 들고 다니기 2) 빨아 쓰는 행주 쓰기 3) 다회용 화장솜 쓰기",
        ["손수건 들고 다니기", "빨아 쓰는 행주 쓰기", "다회용 화장솜 쓰기"],
    ),
    (
        "free_aircon",
        "여름에 에어컨을 덜 틀고 싶은데 어떻게 하면 좋을까? "
        "후보: 1) 에어컨 희망 온도 26도 지키기 2) 선풍기와 함께 쓰기 3) 낮에는 블라인드 내리기",
        ["에어컨 희망 온도 26도 지키기", "선풍기와 함께 쓰기", "낮에는 블라인드 내리기"],
    ),
]

ZW3 = (
    "3. 리필스테이션에서 세제 채우기: 다 쓴 세제 통이나 샴푸 통을 깨끗이 씻어 리필스테이션에 "
    "가져가 필요한 만큼만 채워 오세요. 같은 용기를 계속 쓰면 새 플라스틱 용기를 사지 않아도 되고, "
    "쓸 만큼만 사니 버려지는 내용물도 줄어듭니다. 처음 갈 때는 용기 무게를 미리 재 두거나 매장 "
    "저울로 빈 통 무게를 먼저 달아 두면 계산이 편합니다."
)
ZW4 = (
    "4. 용기내 챌린지: 포장은 내 그릇에: 반찬가게나 분식집에서 포장할 때 집에 있는 밀폐용기나 "
    "냄비를 들고 가 담아 달라고 부탁해 보세요. 포장 음식 하나에도 플라스틱 용기와 뚜껑, 비닐이 "
    '여러 겹 따라오는데, 내 그릇 하나면 이것을 통째로 줄일 수 있습니다. 주문할 때 "용기 '
    '가져왔어요"라고 먼저 말하면 대부분의 가게가 흔쾌히 담아 줍니다.'
)


def long_messages(nonce: str) -> list[dict[str, str]]:
    """The ~600-token prompt; the nonce line makes its prefix new to vLLM's cache."""
    return [
        {"role": "system", "content": f"[요청 {nonce}] {SYSTEM}"},
        {"role": "user", "content": LONG_USER.format(zw3=ZW3, zw4=ZW4)},
    ]


def answer_schema(titles: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "recommend": {"type": "string", "maxLength": 120},
            "picks": {
                "type": "array",
                "items": {"type": "string", "enum": titles},
                "minItems": 1,
                "maxItems": 3,
            },
        },
        "required": ["recommend", "picks"],
        "additionalProperties": False,
    }


async def stream_chat(
    client: httpx.AsyncClient, url: str, model: str, body: dict[str, Any]
) -> dict[str, Any]:
    """One streamed chat completion; timings are client-side, monotonic seconds."""
    payload = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
        **body,
    }
    t0 = time.monotonic()
    first: float | None = None
    last: float | None = None
    text: list[str] = []
    usage: dict[str, Any] = {}
    finish = None
    chunks = 0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=payload) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {(await r.aread()).decode()[:500]}")
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            obj = json.loads(data)
            if "error" in obj:
                raise RuntimeError(f"in-band error: {obj['error']}")
            if obj.get("usage"):
                usage = obj["usage"]
            for ch in obj.get("choices") or []:
                piece = (ch.get("delta") or {}).get("content") or ""
                now = time.monotonic()
                if piece:
                    chunks += 1
                    text.append(piece)
                    if first is None:
                        first = now
                    last = now
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
                    last = now
    t_end = time.monotonic()
    completion = int(usage.get("completion_tokens", 0))
    ttft = (first - t0) if first is not None else None
    decode_s = (last - first) if (first is not None and last is not None) else None
    decode_tps = (completion - 1) / decode_s if decode_s and completion > 1 else None
    prompt_tokens = int(usage.get("prompt_tokens", 0))
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "ttft_s": round(ttft, 3) if ttft is not None else None,
        "prefill_tps": round(prompt_tokens / ttft, 1) if ttft else None,
        "decode_s": round(decode_s, 3) if decode_s is not None else None,
        "decode_tps": round(decode_tps, 2) if decode_tps else None,
        "total_s": round(t_end - t0, 3),
        "chunks": chunks,
        "finish_reason": finish,
        "text": "".join(text),
    }


def fixed_length_body(nonce: str, max_tokens: int) -> dict[str, Any]:
    return {
        "messages": long_messages(nonce),
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
    }


async def metric_values(client: httpx.AsyncClient, url: str, names: list[str]) -> dict[str, float]:
    """Sums of the named counters in vLLM's /metrics (0 when absent)."""
    text = (await client.get(f"{url}/metrics")).text
    out = {n: 0.0 for n in names}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        for n in names:
            if re.match(rf"{re.escape(n)}(\{{|\s)", line):
                out[n] += float(line.rsplit(" ", 1)[1])
    return out


def med(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(statistics.median(vals), 3) if vals else None


async def case_alone(
    quiet: Quiet, client: httpx.AsyncClient, url: str, model: str, repeat: int
) -> dict[str, Any]:
    runs = []
    for _ in range(repeat):
        body = fixed_length_body(uuid.uuid4().hex[:8], 128)
        runs.append(await measured(quiet, client, url, model, body))
    for r in runs:
        r.pop("text")
    return {
        "runs": runs,
        "median_ttft_s": med([r["ttft_s"] for r in runs]),
        "median_prefill_tps": med([r["prefill_tps"] for r in runs]),
        "median_decode_tps": med([r["decode_tps"] for r in runs]),
    }


async def case_concurrent(
    quiet: Quiet, client: httpx.AsyncClient, url: str, model: str, n: int
) -> dict[str, Any]:
    gate = await quiet.gate(client)
    m = quiet.mark()
    t0 = time.monotonic()
    runs = await asyncio.gather(
        *(
            stream_chat(client, url, model, fixed_length_body(uuid.uuid4().hex[:8], 128))
            for _ in range(n)
        )
    )
    wall = time.monotonic() - t0
    share = quiet.others_share(m)
    for r in runs:
        r.pop("text")
    total = sum(r["completion_tokens"] for r in runs)
    # Decode throughput: tokens after each stream's first, over the time from the first stream's
    # first token to the last stream's last (all requests start together).
    window = max(r["ttft_s"] + r["decode_s"] for r in runs) - min(r["ttft_s"] for r in runs)
    return {
        "streams": n,
        "gate": gate,
        "others_cpu_share": share,
        "runs": list(runs),
        "wall_s": round(wall, 3),
        "aggregate_tps": round(total / wall, 2),
        "aggregate_decode_tps": round(sum(r["completion_tokens"] - 1 for r in runs) / window, 2),
        "median_ttft_s": med([r["ttft_s"] for r in runs]),
        "max_ttft_s": max(r["ttft_s"] or 0 for r in runs),
        "median_decode_tps_per_stream": med([r["decode_tps"] for r in runs]),
    }


async def case_prefix(
    quiet: Quiet, client: httpx.AsyncClient, url: str, model: str, pairs: int
) -> dict[str, Any]:
    """``pairs`` times: a new nonce, then the same prompt twice in a row."""
    names = ["vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"]
    out: list[dict[str, Any]] = []
    for _ in range(pairs):
        nonce = uuid.uuid4().hex[:8]
        before = await metric_values(client, url, names)
        first = await measured(quiet, client, url, model, fixed_length_body(nonce, 16))
        mid = await metric_values(client, url, names)
        second = await measured(quiet, client, url, model, fixed_length_body(nonce, 16))
        after = await metric_values(client, url, names)
        for r in (first, second):
            r.pop("text")
        out.append(
            {
                "first": first,
                "second": second,
                "ttft_ratio_second_over_first": (
                    round(second["ttft_s"] / first["ttft_s"], 3)
                    if first["ttft_s"] and second["ttft_s"]
                    else None
                ),
                "cache_hit_tokens_first": mid[names[0]] - before[names[0]],
                "cache_hit_tokens_second": after[names[0]] - mid[names[0]],
                "cache_query_tokens_second": after[names[1]] - mid[names[1]],
            }
        )
    return {
        "pairs": out,
        "median_ttft_first_s": med([p["first"]["ttft_s"] for p in out]),
        "median_ttft_second_s": med([p["second"]["ttft_s"] for p in out]),
        "median_ratio": med([p["ttft_ratio_second_over_first"] for p in out]),
    }


HANGUL = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]")
LATIN = re.compile(r"[A-Za-z]")
HAN = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")
KANA = re.compile(r"[\u3040-\u30ff]")
OTHER_LETTER = re.compile(
    r"[^\W\d_\uac00-\ud7a3\u3131-\u318eA-Za-z\u4e00-\u9fff\u3400-\u4dbf\u3040-\u30ff]"
)


def script_stats(text: str) -> dict[str, Any]:
    counts = {
        "hangul": len(HANGUL.findall(text)),
        "latin": len(LATIN.findall(text)),
        "han": len(HAN.findall(text)),
        "kana": len(KANA.findall(text)),
        "other": len(OTHER_LETTER.findall(text)),
    }
    letters = sum(counts.values())
    share = round(counts["hangul"] / letters, 3) if letters else None
    return {**counts, "hangul_share": share}


async def case_quality(
    quiet: Quiet, client: httpx.AsyncClient, url: str, model: str, seed: int
) -> dict[str, Any]:
    samples = []
    for pid, user, titles in QUALITY_PROMPTS:
        messages = [
            {"role": "system", "content": f"{SYSTEM}\n{FORMAT_RULE}"},
            {"role": "user", "content": user},
        ]
        body = {
            "messages": messages,
            "max_tokens": 256,
            "temperature": 0.3,
            "seed": seed,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": answer_schema(titles), "strict": True},
            },
        }
        # Quality, not speed: only the busy flag is waited for.
        r = await measured(quiet, client, url, model, body, wait=False)
        raw = r["text"]
        try:
            parsed = json.loads(raw)
            valid = (
                isinstance(parsed, dict)
                and isinstance(parsed.get("recommend"), str)
                and all(p in titles for p in parsed.get("picks", []))
            )
        except json.JSONDecodeError:
            parsed, valid = None, False
        rec = parsed.get("recommend", "") if isinstance(parsed, dict) else raw
        samples.append(
            {
                "id": pid,
                "user": user,
                "candidates": titles,
                "raw": raw,
                "valid_json": valid,
                "recommend_scripts": script_stats(rec if isinstance(rec, str) else raw),
                "echoes_question": isinstance(rec, str) and len(rec) > 8 and rec.strip() in user,
                **{
                    k: r[k]
                    for k in (
                        "prompt_tokens",
                        "completion_tokens",
                        "ttft_s",
                        "decode_tps",
                        "total_s",
                        "finish_reason",
                        "others_cpu_share",
                    )
                },
            }
        )
    return {
        "system": f"{SYSTEM}\n{FORMAT_RULE}",
        "temperature": 0.3,
        "seed": seed,
        "max_tokens": 256,
        "samples": samples,
    }


def _row(name: str, r: dict[str, Any]) -> str:
    return (
        f"{name:<12} {r['prompt_tokens']:>6} {r['completion_tokens']:>5} {r['ttft_s']!s:>7} "
        f"{r['prefill_tps']!s:>9} {r['decode_tps']!s:>8} {r['total_s']:>7} "
        f"{r.get('others_cpu_share')!s:>6}"
    )


def print_table(label: str, res: dict[str, Any]) -> None:
    print(f"\n== {label}  ({res.get('model_root')})")
    print(
        f"{'case':<12} {'prompt':>6} {'compl':>5} {'ttft_s':>7} {'prefill/s':>9} {'decode/s':>8} "
        f"{'total_s':>7} {'others':>6}"
    )
    if "alone" in res:
        a = res["alone"]
        for r in a["runs"]:
            print(_row("alone", r))
        print(
            f"{'  median':<12} {'':>6} {'':>5} {a['median_ttft_s']!s:>7} "
            f"{a['median_prefill_tps']!s:>9} {a['median_decode_tps']!s:>8}"
        )
    if "concurrent4" in res:
        c = res["concurrent4"]
        for r in c["runs"]:
            print(_row("4 at once", r))
        print(
            f"{'  aggregate':<12} {c['aggregate_tps']} tok/s over {c['wall_s']} s, decode "
            f"{c.get('aggregate_decode_tps')} tok/s "
            f"(others' CPU share {c.get('others_cpu_share')})"
        )
    for key in sorted(k for k in res if k.startswith("prefix")):
        for p in res[key].get("pairs", []):
            print(
                f"{key:<12} ttft first {p['first']['ttft_s']} s, second {p['second']['ttft_s']} s "
                f"(ratio {p['ttft_ratio_second_over_first']}); cached tokens on the 2nd: "
                f"{p['cache_hit_tokens_second']:.0f}/{p['cache_query_tokens_second']:.0f}"
            )
    if "quality" in res:
        for s in res["quality"]["samples"]:
            print(
                f"{s['id']:<16} valid={s['valid_json']!s:<5} "
                f"hangul={s['recommend_scripts']['hangul_share']} "
                f"{s['completion_tokens']} tok {s['total_s']} s  {s['raw']}"
            )


async def main_async(args: argparse.Namespace) -> int:
    url = args.url.rstrip("/")
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    known = {"alone", "concurrent4", "prefix", "quality"}
    if not set(cases) <= known:
        print(f"unknown cases: {set(cases) - known}; known: {sorted(known)}", file=sys.stderr)
        return 2
    out = RESULTS / f"model_bench_{args.label}.json"
    res: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    quiet = Quiet(args)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0)) as client:
        models = (await client.get(f"{url}/v1/models")).json()["data"]
        model = args.model or models[0]["id"]
        info = next(m for m in models if m["id"] == model)
        res.update(
            label=args.label,
            url=url,
            model=model,
            model_root=info.get("root"),
            max_model_len=info.get("max_model_len"),
        )
        # One short warm-up (not recorded): the first request after a start is slower.
        await quiet.gate(client)
        await stream_chat(client, url, model, fixed_length_body("warmup", 4))
        for case in cases:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            load_before = loadavg()
            t0 = time.monotonic()
            if case == "alone":
                r = await case_alone(quiet, client, url, model, args.repeat)
            elif case == "concurrent4":
                r = await case_concurrent(quiet, client, url, model, 4)
            elif case == "prefix":
                r = await case_prefix(quiet, client, url, model, args.repeat)
            else:
                r = await case_quality(quiet, client, url, model, args.seed)
            r["measured_at"] = stamp
            r["case_seconds"] = round(time.monotonic() - t0, 1)
            r["loadavg_before"] = load_before
            r["loadavg_after"] = loadavg()
            if args.note:
                r["note"] = args.note
            key = f"prefix_{args.prefix_tag}" if case == "prefix" and args.prefix_tag else case
            res[key] = r
            print(f"[model_bench] {case}: {r['case_seconds']} s", file=sys.stderr)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    print_table(args.label, res)
    print(f"\nwrote {out}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8811", help="vLLM base URL (without /v1)")
    ap.add_argument("--label", required=True, help="names the result file model_bench_<label>.json")
    ap.add_argument("--cases", default="alone,concurrent4,prefix,quality")
    ap.add_argument(
        "--model", default=None, help="served model name (default: the first of /v1/models)"
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="requests in 'alone', request pairs in 'prefix'"
    )
    ap.add_argument("--seed", type=int, default=1234, help="sampling seed for the quality case")
    ap.add_argument(
        "--prefix-tag", default="", help="store the prefix case as prefix_<tag> (e.g. on/off)"
    )
    ap.add_argument(
        "--note", default="", help="free text stored with each case (e.g. the server's flags)"
    )
    ap.add_argument(
        "--other-vllm",
        action="append",
        default=[],
        metavar="URL",
        help="another vLLM on this machine: wait until it runs nothing (with --quiet-wait)",
    )
    ap.add_argument(
        "--server-pid",
        type=int,
        default=None,
        help="session id of the measured server (serve_vllm.sh --background's PID): its CPU "
        "is not counted as outside load",
    )
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=0.0,
        help="seconds to wait, before each measurement, for the box to be quiet (0: do not wait)",
    )
    ap.add_argument(
        "--quiet-cpu",
        type=float,
        default=0.15,
        help="quiet: outside CPU at most this share of the machine over 2 s",
    )
    return asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
