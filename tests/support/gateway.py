"""Run the real gateway (``uvicorn app.main:app``) in a subprocess on a loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class GatewayProcess:
    """``with GatewayProcess({"LLM_BASE_URL": ...}) as gw: gw.url`` — a live gateway."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        startup_timeout: float = 30.0,
        default_limits: bool = False,
        log_level: str | None = "warning",
    ) -> None:
        """``log_level=None``: uvicorn's default (info, access lines on), as scripts/run.sh
        starts it."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._env = env
        self._default_limits = default_limits
        self._startup_timeout = startup_timeout
        self._log_level = log_level
        self._log = tempfile.NamedTemporaryFile(prefix="gateway-", suffix=".log", delete=False)
        self.log_path = Path(self._log.name)
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> GatewayProcess:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(
                (
                    "LLM_",
                    "SSE_",
                    "SESSION_",
                    "QDRANT_",
                    "RETRIEVAL_",
                    "RATE_LIMIT_",
                    "CLIENT_RATE_LIMIT_",
                    "TRUSTED_PROXIES",
                    "API_KEYS",
                    "RELAY_",
                    "PAGE_",
                    "REQUEST_",
                    "CLIENT_GENERATIONS_SHARE",
                    "CHAT_BODY_",
                    "FEEDBACK_BODY_",
                    "FEEDBACK_RESULTS_PUBLIC",
                    "METRICS_PUBLIC",
                    "DOCS_PUBLIC",
                    "ALLOWED_HOSTS",
                    "ANSWER_",
                )
            )
        }
        # The scripted upstream writes whole answers (recommend, titles, descriptions) for the
        # tests of the streaming path; the default composition, where the model only picks
        # candidates by number (tests/test_answer_composition.py, tests/e2e), sets
        # ANSWER_COMPOSITION=picks.
        env["ANSWER_COMPOSITION"] = "descriptions"
        if not self._default_limits:
            # Tests send bursts from one address; a test of the rate limits sets its own.
            env["RATE_LIMIT_PER_MINUTE"] = env["CLIENT_RATE_LIMIT_PER_MINUTE"] = "0"
        env.update(self._env)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "app.main:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                *(["--log-level", self._log_level] if self._log_level else []),
                # As scripts/run.sh starts it: TRUSTED_PROXIES is the one switch for forwarded
                # headers, on uvloop and httptools with the head's bounds (app/web/http_guard.py).
                "--no-proxy-headers",
                "--loop",
                "uvloop",
                "--http",
                "app.web.http_guard:GuardedHttpToolsProtocol",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited early:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        tail = self.log_tail()  # before __exit__ closes the log
        self.__exit__(None, None, None)
        raise RuntimeError(f"gateway did not start:\n{tail}")

    def log_tail(self, lines: int = 60) -> str:
        self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._stop()
        finally:
            self._log.close()

    def _stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
