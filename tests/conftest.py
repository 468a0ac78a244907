"""Fixtures shared across the suite, and its split over workers."""

import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.vllm_server import VLLMVenvMissing, served_model_dir
from tests.integration_fixtures import (  # noqa: F401  (fixtures)
    client,
    gateway,
    refused_gateway,
    scripted,
    store_path,
    store_template,
    upstream,
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def vllm_model_dir() -> Path:
    """The model folder vLLM serves in the end-to-end tests (and the preflight checks):
    ``ECO_E2E_MODEL``, or the tiny random Qwen2 built (once, then reused) with the vLLM venv's
    libraries. Fails, saying what to run, when that venv is missing."""
    try:
        return served_model_dir()
    except VLLMVenvMissing as exc:
        pytest.fail(str(exc), pytrace=False)


#: The tests that run against a real vLLM server (tests/e2e/conftest.py starts them).
_VLLM_TESTS = "tests/e2e/"


def _group(nodeid: str) -> str:
    """The worker group of a test: all of vLLM's tests one (its servers load once, in one
    worker), every other module one of its own (its module fixtures are built once)."""
    path = nodeid.split("::")[0]
    return "vllm" if path.startswith(_VLLM_TESTS) else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """In a run split over workers (pytest-xdist, scripts/test.sh) each group of
    :func:`_group` goes whole to one worker. (xdist's own ``--dist loadgroup`` marks no group
    under pytest 9.2: it rewrites a node id that pytest no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return Grouped(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker, vLLM's tests come first: they are the longest group, and the other
    worker's tests overlap the servers' loading."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        items.sort(key=lambda item: _group(item.nodeid) != "vllm")  # stable: order kept


_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A skipped test fails the run: every test here runs on a fresh machine (what it needs is
    installed by scripts/test.sh or built by its fixture), so a skip hides a missing check."""
    if _skipped and exitstatus == 0:
        print(f"\n{len(_skipped)} test(s) skipped, which this suite does not allow: {_skipped}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
