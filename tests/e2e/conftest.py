"""Fixtures for end-to-end tests against a real vLLM server (see tests/e2e/vllm_server.py).

``vllm_server`` (session scope) starts vLLM on ``vllm_model_dir`` (tests/conftest.py: the tiny
random model, built into ``$ECO_CACHE_DIR/tiny-qwen2``) from the venv made by
``scripts/install_vllm.sh``. It installs nothing: when that venv is missing
the tests fail and say what to run. ``ECO_E2E_MODEL`` serves another model folder instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.vllm_server import VLLMServer


@pytest.fixture(scope="session")
def vllm_server(vllm_model_dir: Path) -> Iterator[VLLMServer]:
    with VLLMServer(vllm_model_dir) as server:
        yield server
