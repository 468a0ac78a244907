"""The command line: options, defaults from this machine, text or JSON output, exit status."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path

from preflight import machine
from preflight.checks import run_checks
from preflight.facts import inspect_folder
from preflight.findings import Finding, Status
from preflight.options import (
    DEFAULT_OVERHEAD_GIB,
    DTYPE_BYTES,
    KV_CACHE_DTYPES,
    PlanOptions,
)

__all__ = ["format_text", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status: 0 when vLLM will load the folder, 1 when a check failed, 2 on usage errors."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    folder: Path = args.model_dir.expanduser()
    if not folder.is_dir():
        print(f"preflight: {folder} is not a folder", file=sys.stderr)
        return 2
    try:
        facts = inspect_folder(folder)
    except OSError as exc:
        print(f"preflight: cannot read {folder}: {exc}", file=sys.stderr)
        return 2
    findings = run_checks(facts, _options(args))
    fails = sum(f.status is Status.FAIL for f in findings)
    warns = sum(f.status is Status.WARN for f in findings)
    code = 1 if fails else 0
    if args.json:
        report = {
            "model_dir": str(folder),
            "ok": code == 0,
            "exit_code": code,
            "findings": [asdict(f) for f in findings],
        }
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(format_text(findings))
        verdict = "vLLM will not load it as is" if fails else "ready for vLLM"
        print(f"preflight {folder}: {fails} failed, {warns} warnings: {verdict}")
    return code


def format_text(findings: Iterable[Finding]) -> str:
    """One line per finding, its fix indented below."""
    lines: list[str] = []
    for f in findings:
        lines.append(f"{f.status.value:<4}  {f.check}: {f.message}")
        if f.fix:
            first, *rest = f.fix.splitlines()
            lines.append(f"      fix: {first}")
            lines.extend(f"        {line}" for line in rest)
    return "\n".join(lines)


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in "invalid int value"
    return parse


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m preflight",
        description="Check a model folder before vLLM loads it (reads JSON and safetensors "
        "headers only). Exit 0: it will load; 1: a check failed (the fix is printed); 2: usage.",
    )
    p.add_argument("model_dir", type=Path, help="the model folder (config.json, weights, ...)")
    p.add_argument(
        "--max-model-len", type=_positive(int), metavar="N", help="default: from config.json"
    )
    p.add_argument(
        "--max-num-seqs",
        type=_positive(int),
        metavar="N",
        help="default: vLLM 0.32's for the device (256 GPU < 70 GiB, 1024 larger, 128 CPU)",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=_positive(int),
        metavar="N",
        help="sizes the activation allowance; default: vLLM's (2048, 8192 from 70 GiB)",
    )
    p.add_argument(
        "--gpu-memory-utilization", type=_fraction, default=0.9, metavar="F", help="default 0.9"
    )
    p.add_argument(
        "--gpu-memory",
        type=_positive(float),
        metavar="GiB",
        help="GPU memory size; default: nvidia-smi's, else the memory plan is skipped",
    )
    p.add_argument(
        "--cpu-kvcache-gib",
        type=_positive(float),
        metavar="N",
        help="vLLM on CPU: check against VLLM_CPU_KVCACHE_SPACE=N instead of a GPU "
        "(default with no GPU: $VLLM_CPU_KVCACHE_SPACE when set)",
    )
    p.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto")
    p.add_argument("--dtype", choices=("auto", *DTYPE_BYTES), default="auto")
    p.add_argument(
        "--overhead-gib",
        type=float,
        metavar="GiB",
        default=DEFAULT_OVERHEAD_GIB,
        help="fixed GPU allowance for CUDA context, workspaces and CUDA graphs (default 1.0)",
    )
    p.add_argument(
        "--attention-backend",
        metavar="NAME",
        help="the backend vLLM will use (default: $VLLM_ATTENTION_BACKEND)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    return p


def _options(args: argparse.Namespace) -> PlanOptions:
    """The plan's settings: the options, else this machine's GPU, else VLLM_CPU_KVCACHE_SPACE."""
    gpu, note, cpu = args.gpu_memory, "", args.cpu_kvcache_gib
    if gpu is None and cpu is None:
        gpu, note = machine.gpu_memory_gib()
        env_space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
        if gpu is None and env_space.strip().isdigit() and int(env_space) > 0:
            cpu = float(env_space)
    return PlanOptions(
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
        gpu_memory_gib=gpu if cpu is None else None,
        cpu_kvcache_gib=cpu,
        kv_cache_dtype=args.kv_cache_dtype,
        dtype=args.dtype,
        overhead_gib=args.overhead_gib,
        attention_backend=args.attention_backend or os.environ.get("VLLM_ATTENTION_BACKEND"),
        host_memory_available_gib=machine.host_available_gib() if cpu is not None else None,
        memory_note=note,
    )
