"""Start a real vLLM OpenAI server (from its own venv) for end-to-end tests.

In the spirit of vLLM's ``tests/utils.py::RemoteOpenAIServer``::

    model_dir = build_tiny_model(cache_dir)
    with VLLMServer(model_dir) as srv:
        httpx.get(f"{srv.base_url}/models")

vLLM runs as a subprocess of the venv made by ``scripts/install_vllm.sh`` (path from
``VLLM_VENV``, default ``~/.cache/eco-gateway/vllm-venv``); the tests themselves run in the
gateway's venv and only talk HTTP to it. Nothing here installs anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = REPO_ROOT / "scripts"
INSTALL_MARKER = ".eco-gateway-vllm-installed"
SERVED_MODEL_NAME = "eco-llm"
RUNNING_METRIC = "vllm:num_requests_running"
WAITING_METRIC = "vllm:num_requests_waiting"
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

__all__ = [
    "SERVED_MODEL_NAME",
    "VLLMServer",
    "VLLMVenvMissing",
    "build_tiny_model",
    "metric_value",
    "running_requests",
    "served_model_dir",
    "vllm_python",
    "vllm_venv",
]


class VLLMVenvMissing(RuntimeError):
    """The vLLM venv is absent or half-installed."""


def vllm_venv() -> Path:
    """Where ``scripts/install_vllm.sh`` puts the vLLM venv."""
    env = os.environ.get("VLLM_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "eco-gateway" / "vllm-venv"


def vllm_python() -> Path:
    """The vLLM venv's interpreter; raises :class:`VLLMVenvMissing` with the fix. An install
    still running (``scripts/test.sh`` starts it beside the suite) is waited for: it holds the
    venv's lock file until its marker is written."""
    venv = vllm_venv()
    python = venv / "bin" / "python"
    if not (venv / INSTALL_MARKER).is_file() and venv.parent.is_dir():
        with open(f"{venv}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # returns at once when no install runs
    if not python.exists() or not (venv / INSTALL_MARKER).is_file():
        raise VLLMVenvMissing(
            f"no complete vLLM venv at {venv} (python or {INSTALL_MARKER} missing). "
            "Run scripts/install_vllm.sh first (takes a few minutes; "
            "set VLLM_VENV to use another location)."
        )
    return python


def build_tiny_model(cache_dir: str | os.PathLike[str]) -> Path:
    """Build (or reuse) the tiny random Qwen2 under ``cache_dir/tiny-qwen2``; return its path.
    One build at a time across threads and processes (the suite runs in several workers): a
    lock file beside the folder is held while it is built or checked."""
    out = Path(cache_dir).expanduser().resolve() / "tiny-qwen2"
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / "tiny-qwen2.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(
            [str(vllm_python()), str(SCRIPTS / "make_tiny_model.py"), str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"make_tiny_model.py failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return out


def served_model_dir() -> Path:
    """The model folder the end-to-end tests serve: ``ECO_E2E_MODEL``, or the tiny random
    Qwen2 built once (then reused) under ``ECO_CACHE_DIR`` (default ``~/.cache/eco-gateway``).
    Raises :class:`VLLMVenvMissing` when the vLLM venv is missing."""
    vllm_python()
    env = os.environ.get("ECO_E2E_MODEL")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("ECO_CACHE_DIR")
    return build_tiny_model(Path(cache) if cache else Path.home() / ".cache" / "eco-gateway")


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def metric_value(metrics_text: str, name: str, **labels: str) -> float:
    """Sum a Prometheus sample over the label sets that match ``labels`` (0.0 when absent).

    ``metric_value(text, "vllm:request_success_total", finished_reason="abort")``
    """
    total = 0.0
    for line in metrics_text.splitlines():
        if not line.startswith(name):
            continue
        rest = line[len(name) :]
        if rest[:1] == "{":
            label_text, _, rest = rest[1:].partition("}")
            found = dict(_LABEL_RE.findall(label_text))
            if any(found.get(k) != v for k, v in labels.items()):
                continue
        elif rest[:1] != " " or labels:
            continue  # another metric sharing the prefix, or no labels to match
        with contextlib.suppress(ValueError):
            total += float(rest.split()[0])
    return total


def running_requests(url_root: str, *, include_waiting: bool = False) -> float:
    """Requests vLLM is running now (``vllm:num_requests_running``, summed over labels).

    With ``include_waiting``, queued ones (``vllm:num_requests_waiting``) are added.
    """
    text = httpx.get(f"{url_root}/metrics", timeout=10).text
    n = metric_value(text, RUNNING_METRIC)
    if include_waiting:
        n += metric_value(text, WAITING_METRIC)
    return n


class VLLMServer:
    """A vLLM OpenAI-compatible server in a subprocess (own process group).

    Attributes once started: ``port``, ``url_root`` (``http://127.0.0.1:PORT``),
    ``base_url`` (``url_root + "/v1"``), ``model_name``, ``log_path``, ``proc``.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        port: int | None = None,
        *,
        served_model_name: str = SERVED_MODEL_NAME,
        max_model_len: int = 4096,
        max_num_seqs: int = 32,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        startup_timeout: float = 240.0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.model = str(model)
        self.host = "127.0.0.1"
        self.port = port or _free_port(self.host)
        self.model_name = served_model_name
        self.url_root = f"http://{self.host}:{self.port}"
        self.base_url = f"{self.url_root}/v1"
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._tmp = Path(tempfile.mkdtemp(prefix="eco-vllm-"))
        self.log_path = Path(log_path) if log_path else self._tmp / "vllm.log"
        self._log: IO[bytes] | None = None
        self.args = [
            "--model", self.model,
            "--served-model-name", served_model_name,
            "--host", self.host,
            "--port", str(self.port),
            "--max-model-len", str(max_model_len),
            "--max-num-seqs", str(max_num_seqs),
            "--enforce-eager",
            *(extra_args or []),
        ]  # fmt: skip
        self.env = dict(os.environ)
        self.env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        self.env["VLLM_CACHE_ROOT"] = str(self._tmp / "cache")
        self.env.setdefault("HF_HUB_OFFLINE", "1")
        self.env.setdefault("VLLM_NO_USAGE_STATS", "1")
        self.env.setdefault("VLLM_DO_NOT_TRACK", "1")
        if env:
            self.env.update(env)

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> VLLMServer:
        python = vllm_python()
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [str(python), "-m", "vllm.entrypoints.openai.api_server", *self.args],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self._tmp,
            start_new_session=True,  # own process group: engine core + workers die with it
        )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                rc = self.proc.poll()
                if rc is not None:
                    raise RuntimeError(
                        f"vLLM exited with status {rc} before it was healthy.\n"
                        f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url_root}/health").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"vLLM not healthy after {self.startup_timeout:.0f} s.\n"
                        f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
                    )
                time.sleep(0.5)

    def stop(self, grace: float = 15.0) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                proc.wait(timeout=10)
        if proc is not None:
            # Children (engine core, workers) may outlive the API server a moment.
            self._signal_group(signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None
        self.proc = None

    def cleanup(self) -> None:
        """Remove the temp folder (with the log, unless ``log_path`` was given)."""
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc_type is None:
            self.cleanup()
        else:
            print(f"vLLM log kept at {self.log_path}", file=sys.stderr)

    # -- helpers ---------------------------------------------------------------------
    def log_tail(self, lines: int = 60) -> str:
        try:
            with self.log_path.open("r", encoding="utf-8", errors="replace") as f:
                return "".join(deque(f, maxlen=lines))
        except OSError:
            return "(no log)"

    def running_requests(self, *, include_waiting: bool = False) -> float:
        return running_requests(self.url_root, include_waiting=include_waiting)

    def wait_idle(self, timeout: float = 5.0, *, include_waiting: bool = True) -> float:
        """Wait until no request runs (and, by default, none waits); return seconds taken."""
        start = time.monotonic()
        while True:
            n = self.running_requests(include_waiting=include_waiting)
            elapsed = time.monotonic() - start
            if n == 0:
                return elapsed
            if elapsed > timeout:
                raise TimeoutError(f"{n:g} request(s) still running after {timeout:g} s")
            time.sleep(0.05)
