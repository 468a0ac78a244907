"""Fixtures of the feedback tests: a scripted upstream of their own (their scenarios never
touch the chat tests'), a callback receiver, and requests dated relative to now (Seoul)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.feedback.receiver import CallbackReceiver
from tests.feedback.requests import FEEDBACK_TEXT
from tests.upstream.scripted_openai import ScriptedUpstreamThread


@pytest.fixture(scope="module")
def feedback_upstream() -> Iterator[ScriptedUpstreamThread]:
    with ScriptedUpstreamThread() as server:
        server.set_scenario("ok", content=FEEDBACK_TEXT)
        yield server


@pytest.fixture(scope="module")
def callbacks() -> Iterator[CallbackReceiver]:
    with CallbackReceiver() as rx:
        yield rx


@pytest.fixture
def fresh(feedback_upstream: ScriptedUpstreamThread, callbacks: CallbackReceiver) -> None:
    feedback_upstream.set_scenario("ok", content=FEEDBACK_TEXT)
    feedback_upstream.reset()
    callbacks.received.clear()
    callbacks.script.clear()
