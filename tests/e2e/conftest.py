"""Fixtures for end-to-end tests against a real vLLM server (see tests/e2e/vllm_server.py).

``vllm_server`` (session scope) serves ``vllm_model_dir`` (tests/conftest.py: the tiny random
model, built into ``$ECO_CACHE_DIR/tiny-qwen2``) from the venv made by
``scripts/install_vllm.sh``; ``second_vllm_server`` (module scope) is another, for the tests of
two replicas. It installs nothing: an install still running is waited for (scripts/test.sh
runs it beside the suite), and when that venv is missing the tests fail and say what to run.
``ECO_E2E_MODEL`` serves another model folder instead.

The servers a run needs begin loading in the background as soon as collection shows it needs
them (:func:`pytest_collection_finish`): each takes half a minute of CPU to load and none
while idle, so their loading overlaps the tests that run before the first end-to-end one
instead of adding to the run. In a run split over workers (pytest-xdist, scripts/test.sh)
every test that needs vLLM runs in one worker, which starts them when its first such test
asks; the other worker's tests overlap the loading then.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

from tests.e2e.vllm_server import VLLMServer, VLLMVenvMissing, served_model_dir


class _Loading:
    """vLLM servers started one after the other in a background thread; each handed out
    once it is healthy (or its failure raised where it is asked for)."""

    def __init__(self, count: int) -> None:
        self._servers: list[VLLMServer] = []
        self._failed: BaseException | None = None
        self._thread = threading.Thread(
            target=self._start, args=(count,), name="vllm-loading", daemon=True
        )
        self._thread.start()

    def _start(self, count: int) -> None:
        try:
            model = served_model_dir()
            for _ in range(count):
                server = VLLMServer(model)
                self._servers.append(server)
                server.start()
        except BaseException as exc:  # raised again in the test that asks for a server
            self._failed = exc

    def server(self, index: int) -> VLLMServer:
        self._thread.join()
        while True:
            if self._failed is not None:
                if isinstance(self._failed, VLLMVenvMissing):
                    pytest.fail(str(self._failed), pytrace=False)
                raise self._failed
            if index < len(self._servers):
                return self._servers[index]
            self._start(1)  # asked for beyond what collection showed: loaded now

    def stop(self) -> None:
        self._thread.join()
        for server in self._servers:
            server.stop()
            server.cleanup()


_loading: _Loading | None = None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start loading the servers the collected tests ask for (none for a run without them)."""
    global _loading
    asked: set[str] = set()
    for item in session.items:
        asked.update(getattr(item, "fixturenames", ()))
    count = 2 if "second_vllm_server" in asked else 1 if "vllm_server" in asked else 0
    if count and _loading is None and "PYTEST_XDIST_WORKER" not in os.environ:
        _loading = _Loading(count)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _loading is not None:
        _loading.stop()


def _loaded(index: int) -> VLLMServer:
    global _loading
    if _loading is None:  # asked for by name beyond what collection showed
        _loading = _Loading(index + 1)
    return _loading.server(index)


@pytest.fixture(scope="session")
def vllm_server() -> VLLMServer:
    return _loaded(0)


@pytest.fixture(scope="module")
def second_vllm_server(vllm_server: VLLMServer) -> Iterator[VLLMServer]:
    """A second server beside the session's: stopped at the module's end (a test may kill it)."""
    server = _loaded(1)
    try:
        yield server
    finally:
        server.stop()
