"""A stand-in for vLLM's OpenAI server for tests of the start scripts: answers ``/health`` and
``/v1/models`` on ``--port`` and writes its PID to ``$FAKE_VLLM_PIDFILE``. Takes (and ignores)
the rest of vLLM's command line (written to ``$FAKE_VLLM_ARGS`` when set, and its ``VLLM_*``
environment to ``$FAKE_VLLM_ENV``), so that ``scripts/serve_vllm.sh`` can start it as vLLM."""

from __future__ import annotations

import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def fake_vllm_venv(folder: Path) -> Path:
    """A venv that scripts/serve_vllm.sh accepts, whose python plays vLLM (this file)."""
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    python.chmod(0o755)
    (folder / ".eco-gateway-vllm-installed").write_text("fake\n")
    return folder


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/health":
            body = b""
        elif self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": "fake"}]}).encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-m")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args, _ = parser.parse_known_args()
    if argfile := os.environ.get("FAKE_VLLM_ARGS"):  # the command line, one argument a line
        with open(argfile, "w") as out:
            out.write("\n".join(sys.argv[1:]))
    if envfile := os.environ.get("FAKE_VLLM_ENV"):  # vLLM's own settings, NAME=value a line
        with open(envfile, "w") as out:
            out.write("\n".join(f"{k}={v}" for k, v in os.environ.items() if k.startswith("VLLM_")))
    if pidfile := os.environ.get("FAKE_VLLM_PIDFILE"):
        with open(pidfile, "w") as out:
            out.write(str(os.getpid()))
    ThreadingHTTPServer((args.host, args.port), _Handler).serve_forever()


if __name__ == "__main__":
    main()
