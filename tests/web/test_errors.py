"""A 500, should one ever happen, still names its request; a malformed body is a 400."""

from __future__ import annotations

import logging

import httpx
import pytest

from app.config import Settings
from app.main import create_app

pytestmark = pytest.mark.anyio


async def test_a_500_carries_its_request_id_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(Settings(_env_file=None))  # type: ignore[call-arg]

    async def boom() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/boom", boom)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        with caplog.at_level(logging.ERROR, logger="app"):
            given = await http.get("/boom", headers={"x-request-id": "trace-me-1"})
            fresh = await http.get("/boom")
    assert given.status_code == 500 and given.headers["x-request-id"] == "trace-me-1"
    assert given.json() == {"status": 500, "message": given.json()["message"], "data": None}
    assert "a bug" not in given.text
    assert len(fresh.headers["x-request-id"]) == 32
    assert any(getattr(r, "exc_info", None) for r in caplog.records)


async def test_a_chat_body_nested_too_deep_is_400_not_500() -> None:
    app = create_app(Settings(_env_file=None))  # type: ignore[call-arg]
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        raw = '{"sessionId": ' + "[" * 5000 + "]" * 5000 + "}"
        answer = await http.post(
            "/ai/chatbot/recommendation/free-text",
            content=raw.encode(),
            headers={"content-type": "application/json"},
        )
    assert answer.status_code == 400 and answer.json()["status"] == 400
