"""Fixtures for end-to-end tests against a real vLLM server (see tests/e2e/vllm_server.py).

``vllm_server`` (session scope) builds the tiny random model into
``$ECO_CACHE_DIR/tiny-qwen2`` (default ``~/.cache/eco-gateway``) and starts vLLM from the
venv made by ``scripts/install_vllm.sh``. It installs nothing: when that venv is missing
the tests fail and say what to run. ``ECO_E2E_MODEL`` serves another model folder instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.vllm_server import VLLMServer, VLLMVenvMissing, build_tiny_model, vllm_python


def _cache_dir() -> Path:
    env = os.environ.get("ECO_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "eco-gateway"


@pytest.fixture(scope="session")
def vllm_model_dir() -> Path:
    try:
        vllm_python()
    except VLLMVenvMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    env = os.environ.get("ECO_E2E_MODEL")
    if env:
        return Path(env).expanduser()
    return build_tiny_model(_cache_dir())


@pytest.fixture(scope="session")
def vllm_server(vllm_model_dir: Path) -> Iterator[VLLMServer]:
    with VLLMServer(vllm_model_dir) as server:
        yield server
