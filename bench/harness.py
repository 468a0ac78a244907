"""Shared pieces of the load benchmarks: the processes they start, the load they send, the
figures they write.

Processes (each in its own session, stopped with its whole process group):

* ``upstream(...)``: ``bench/fast_upstream.py``, the fast scripted OpenAI server;
* ``gateway(...)``: ``uvicorn app.main:app`` with bench settings (retrieval off via
  ``RETRIEVAL_K=0``, an in-memory vector store holding a 3-document corpus so start-up
  takes seconds, per-client rate limits off), chosen uvicorn flags;
* ``litellm(...)``: LiteLLM's proxy from ``scripts/install_litellm.sh``'s venv, configured as
  an OpenAI-compatible passthrough;
* ``load(spec)``: ``bench/loadgen.py`` in its own process.

``gateway(loop=, http=)`` picks uvicorn's event loop and HTTP parser: the plain asyncio loop
and h11 by default, for comparisons with earlier rows; uvloop and httptools (gateway
dependencies, what ``make run`` starts) when asked.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
CACHE = Path(os.environ.get("ECO_CACHE_DIR", Path.home() / ".cache" / "eco-gateway")).expanduser()
LITELLM_VENV = Path(os.environ.get("LITELLM_VENV", CACHE / "litellm-venv")).expanduser()
TINY_CORPUS = BENCH / "data" / "corpus_tiny.jsonl"

BASE_INFO = "/ai/chatbot/recommendation/base-info"
FREE_TEXT = "/ai/chatbot/recommendation/free-text"
BASE_INFO_QUERY = {"location": "산", "workType": "현장직", "category": "PLOGGING"}
CHAT_BODY = {
    "model": "scripted-model",
    "messages": [{"role": "user", "content": "산에서 현장직으로 일하는 사람의 플로깅 챌린지"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}

#: Settings every bench gateway gets (besides LLM_BASE_URL). Names that this version of the
#: app does not know are ignored by pydantic-settings (extra="ignore").
GATEWAY_ENV = {
    "LOG_LEVEL": "WARNING",
    "RETRIEVAL_K": "0",  # retrieval off: the request path skips embedding and search
    "QDRANT_PATH": ":memory:",
    "CORPUS_PATH": str(TINY_CORPUS),  # ingested at start-up into the in-memory store
    "LLM_MODEL": "scripted-model",
    "RATE_LIMIT_PER_MINUTE": "0",  # all bench traffic comes from 127.0.0.1
    "CLIENT_RATE_LIMIT_PER_MINUTE": "0",
    "SESSION_MAX_CONCURRENT": "100000",
    # The scripted upstream's answers carry their timing markers in the values the model
    # writes; in the default composition (picks by number) no value of the model is shown.
    "ANSWER_COMPOSITION": "descriptions",
}


def base_info_path(**extra: str) -> str:
    return BASE_INFO + "?" + urlencode({**BASE_INFO_QUERY, **extra})


def free_text_path(message: str, **extra: str) -> str:
    return FREE_TEXT + "?" + urlencode({"message": message, **extra})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- processes


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    port: int
    log_path: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def processes(self) -> list[psutil.Process]:
        """The process and its children (uvicorn workers, LiteLLM's)."""
        try:
            root = psutil.Process(self.popen.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def cpu_seconds(self) -> float:
        total = 0.0
        for proc in self.processes():
            with contextlib.suppress(psutil.NoSuchProcess):
                t = proc.cpu_times()
                total += t.user + t.system
        return total

    def rss_bytes(self) -> int:
        total = 0
        for proc in self.processes():
            with contextlib.suppress(psutil.NoSuchProcess):
                total += proc.memory_info().rss
        return total

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # stray children


def _spawn(
    name: str, cmd: list[str], env: dict[str, str], cwd: Path = ROOT
) -> tuple[subprocess.Popen[bytes], Path]:
    log = Path(tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1])
    with log.open("wb") as out:
        popen = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_raise_nofile,
        )
    return popen, log


def _raise_nofile() -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _wait_http(
    proc: Proc, path: str, timeout: float, headers: dict[str, str] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited early:\n{proc.log_text()[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(proc.url + path, timeout=2, headers=headers).status_code == 200:
                return
        time.sleep(0.2)
    proc.stop()
    raise RuntimeError(f"{proc.name} did not start in {timeout:g} s:\n{proc.log_text()[-4000:]}")


@contextlib.contextmanager
def upstream(interval: float = 0.05, chunks: int = 40, **cfg: Any) -> Iterator[Proc]:
    port = free_port()
    cmd = [
        sys.executable,
        str(BENCH / "fast_upstream.py"),
        "--port",
        str(port),
        "--interval",
        str(interval),
        "--chunks",
        str(chunks),
    ]
    popen, log = _spawn("upstream", cmd, dict(os.environ))
    proc = Proc("upstream", popen, port, log)
    try:
        _wait_http(proc, "/health", 20)
        if cfg:
            configure(proc, **cfg)
        yield proc
    finally:
        proc.stop()


def configure(up: Proc, **cfg: Any) -> dict[str, Any]:
    response = httpx.post(up.url + "/_config", json=cfg, timeout=5)
    response.raise_for_status()
    return dict(response.json())


def upstream_stats(up: Proc) -> dict[str, Any]:
    return dict(httpx.get(up.url + "/_stats", timeout=5).json())


def _extra_available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@contextlib.contextmanager
def gateway(
    llm_base_url: str,
    *,
    env: dict[str, str] | None = None,
    loop: str = "asyncio",
    http: str = "h11",
    workers: int = 1,
    startup_timeout: float = 90.0,
    gc_probe: bool = False,
    bench_settings: bool = True,
) -> Iterator[Proc]:
    """``bench_settings=False``: the app's own defaults (retrieval, answer composition) instead
    of ``GATEWAY_ENV``; ``env`` still applies."""
    port = free_port()
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLM_", "SSE_", "SESSION_", "QDRANT_", "RETRIEVAL_", "REDIS_"))
    }
    if bench_settings:
        full_env.update(GATEWAY_ENV)
    full_env["LLM_BASE_URL"] = llm_base_url
    full_env.update(env or {})
    for module, flag, fallback in (("uvloop", "loop", "asyncio"), ("httptools", "http", "h11")):
        wanted = loop if flag == "loop" else http
        if wanted == module and not _extra_available(module):
            print(f"  {module} not installed (pip install -e .): --{flag} {fallback}")
            if flag == "loop":
                loop = fallback
            else:
                http = fallback
    paths = [str(BENCH / "gc_probe")] if gc_probe else []  # see gc_probe/sitecustomize.py
    if paths:
        full_env["PYTHONPATH"] = os.pathsep.join([*paths, full_env.get("PYTHONPATH", "")]).strip(
            os.pathsep
        )
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "app.main:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--loop",
        loop,
        "--http",
        http,
        "--workers",
        str(workers),
        "--backlog",
        "4096",
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    popen, log = _spawn("gateway", cmd, full_env)
    proc = Proc(
        "gateway", popen, port, log, {"loop": loop, "http": http, "workers": workers, "env": env}
    )
    try:
        _wait_http(proc, "/health", startup_timeout)
        yield proc
    finally:
        proc.stop()


def run_sh_command(tree: Path, port: int) -> list[str]:
    """The uvicorn command line ``scripts/run.sh`` of ``tree`` starts the gateway with (its
    flags, read from the script itself so that a bench follows it), on ``port``, with this
    interpreter's uvicorn (``.venv/bin/uvicorn`` is this venv in a checkout)."""
    text = (tree / "scripts" / "run.sh").read_text(encoding="utf-8")
    start = text.index(".venv/bin/uvicorn app.main:app")
    lines: list[str] = []
    for line in text[start:].splitlines():
        lines.append(line.rstrip().removesuffix("\\").rstrip())
        if not line.rstrip().endswith("\\"):
            break
    words = shlex.split(" ".join(lines).removesuffix("&"))
    values = {
        "$GATEWAY_HOST": "127.0.0.1",
        "$GATEWAY_PORT": str(port),
        "$shutdown_timeout": "30",  # run.sh: SHUTDOWN_GRACE_SECONDS (20) + 10
    }
    return [sys.executable, "-m", "uvicorn", *[values.get(word, word) for word in words[1:]]]


@contextlib.contextmanager
def run_sh_gateway(
    llm_base_url: str,
    *,
    env: dict[str, str] | None = None,
    tree: Path = ROOT,
    startup_timeout: float = 90.0,
) -> Iterator[Proc]:
    """The gateway of ``tree`` (its ``app``: the process starts in that folder) as its
    ``scripts/run.sh`` starts it: the same uvicorn flags (uvloop, its HTTP protocol,
    ``--no-proxy-headers``; uvicorn's default log level, access lines on), with the bench
    settings of :data:`GATEWAY_ENV` but the app's own log level, and ``env``."""
    port = free_port()
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLM_", "SSE_", "SESSION_", "QDRANT_", "RETRIEVAL_", "REDIS_"))
    }
    full_env.update(GATEWAY_ENV)
    full_env.pop("LOG_LEVEL")  # run.sh sets none: INFO
    full_env["LLM_BASE_URL"] = llm_base_url
    full_env.update(env or {})
    cmd = run_sh_command(tree, port)
    popen, log = _spawn("gateway", cmd, full_env, cwd=tree)
    proc = Proc("gateway", popen, port, log, {"tree": str(tree), "cmd": cmd, "env": env})
    try:
        _wait_http(proc, "/health", startup_timeout)
        yield proc
    finally:
        proc.stop()


def litellm_available() -> bool:
    return (LITELLM_VENV / "bin" / "litellm").exists() and (
        LITELLM_VENV / ".eco-gateway-litellm-installed"
    ).is_file()


LITELLM_KEY = "sk-bench-local"


@contextlib.contextmanager
def litellm(llm_base_url: str, *, workers: int = 1) -> Iterator[Proc]:
    """LiteLLM's proxy as a plain passthrough to ``llm_base_url`` (no database, no callbacks)."""
    if not litellm_available():
        raise RuntimeError("no LiteLLM venv: run scripts/install_litellm.sh first")
    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="bench-litellm-"))
    config = tmp / "config.yaml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "model_list": [
                    {
                        "model_name": "scripted-model",
                        "litellm_params": {
                            "model": "openai/scripted-model",
                            "api_base": llm_base_url,
                            "api_key": "sk-upstream-unused",
                        },
                    }
                ],
                "litellm_settings": {"drop_params": True, "telemetry": False},
                "general_settings": {"master_key": LITELLM_KEY},
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": LITELLM_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no internet: do not fetch the price list
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "NO_DOCS": "True",
        "DISABLE_ADMIN_UI": "True",
        "HOME": str(tmp),
    }
    cmd = [
        str(LITELLM_VENV / "bin" / "litellm"),
        "--config",
        str(config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--num_workers",
        str(workers),
    ]
    popen, log = _spawn("litellm", cmd, env, cwd=tmp)
    proc = Proc("litellm", popen, port, log, {"workers": workers})
    try:
        _wait_http(proc, "/health/liveliness", 180)
        yield proc
    finally:
        proc.stop()


# --------------------------------------------------------------------------- load


def load(spec: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """Run ``bench/loadgen.py`` with ``spec``; returns its result."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / "loadgen.py")],
        input=json.dumps(spec).encode(),
        capture_output=True,
        timeout=timeout,
        preexec_fn=_raise_nofile,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"loadgen failed ({proc.returncode}):\n{proc.stderr.decode()[-4000:]}")
    return dict(json.loads(proc.stdout))


def group(
    name: str,
    kind: str,
    paths: list[tuple[float, str, Any, int | None]],
    **kw: Any,
) -> dict[str, Any]:
    return {"name": name, "kind": kind, "paths": [list(p) for p in paths], **kw}


def gateway_group(name: str, **kw: Any) -> dict[str, Any]:
    return group(name, "sse_get", [(1, base_info_path(), None, None)], **kw)


def openai_group(name: str, headers: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    return group(
        name, "openai", [(1, "/v1/chat/completions", CHAT_BODY, None)], headers=headers or {}, **kw
    )


# --------------------------------------------------------------------------- figures


def machine() -> dict[str, Any]:
    return {
        "machine": f"{platform.machine()} {platform.python_version()}",
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def ms(us: float) -> float:
    return us / 1000.0


def write_result(name: str, result: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def strip_cdf(obj: Any) -> Any:
    """The result without the 101-point CDFs (kept for plots, too long for the JSON)."""
    if isinstance(obj, dict):
        return {k: strip_cdf(v) for k, v in obj.items() if k != "cdf"}
    if isinstance(obj, list):
        return [strip_cdf(v) for v in obj]
    return obj


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
