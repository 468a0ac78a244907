"""Fixtures shared across the suite."""

from pathlib import Path

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
