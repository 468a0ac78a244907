"""The chat page's protective headers (SPEC "Access and limits"), over HTTP without a browser.

The app is built as app/main.py builds it, with every middleware; only the lifespan's state
is handed in directly (the page route reads nothing but its access decisions), so no model,
store or upstream is started. tests/browser/test_chat_page.py checks in Chromium that the
page satisfies the policy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from app.config import AccessSettings, Settings
from app.main import create_app
from app.web.access import Access

pytestmark = pytest.mark.anyio


def _directives(csp: str) -> dict[str, list[str]]:
    parts = (part.split() for part in csp.split(";") if part.strip())
    return {name: values for name, *values in parts}


@asynccontextmanager
async def _client(**settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(_env_file=None, **settings))  # type: ignore[call-arg]
    # What the lifespan would hand the page route: only its access decisions are read.
    chat = SimpleNamespace(admission=SimpleNamespace(access=Access(AccessSettings(**settings))))

    async def with_state(scope: Scope, receive: Receive, send: Send) -> None:
        scope["state"] = {"chat": chat}
        await app(scope, receive, send)

    transport = httpx.ASGITransport(app=with_state)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with _client() as client:
        yield client


async def test_the_page_is_served_with_a_strict_policy_and_no_framing(
    http: httpx.AsyncClient,
) -> None:
    page = await http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    csp = _directives(page.headers["content-security-policy"])
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["default-src"] == ["'self'"]
    assert csp["connect-src"] == ["'self'"]
    assert csp["script-src"] == ["'self'"] and csp["style-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'none'"]
    assert not any("unsafe" in value for values in csp.values() for value in values)
    # What the policy allows is what the page needs: no inline script or style to allow.
    html = page.text
    assert "<script src=" in html and "<script>" not in html and "<style" not in html
    assert " style=" not in html and " onclick=" not in html


@pytest.mark.parametrize("name", ["chat.js", "chat.css"])
async def test_the_page_assets_are_not_sniffed(http: httpx.AsyncClient, name: str) -> None:
    asset = await http.get(f"/static/{name}")
    assert asset.status_code == 200
    assert asset.headers["x-content-type-options"] == "nosniff"
    missing = await http.get("/static/index.html")
    assert missing.status_code == 404
    assert missing.headers["x-content-type-options"] == "nosniff"


async def test_named_origins_may_frame_the_page() -> None:
    origins = "https://eco.example.com, https://*.partner.example:8443"
    async with _client(page_frame_ancestors=origins) as http:
        page = await http.get("/")
    csp = _directives(page.headers["content-security-policy"])
    assert csp["frame-ancestors"] == ["https://eco.example.com", "https://*.partner.example:8443"]
    # Browsers that know frame-ancestors ignore X-Frame-Options; the ones that only know the
    # older header keep refusing, which fails safe.
    assert page.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize(
    "origin",
    ["*", "'self'; script-src *", "eco.example.com", "https://eco.example.com/path", "data:"],
)
def test_a_frame_ancestor_must_be_an_origin(origin: str) -> None:
    with pytest.raises(ValidationError, match="page_frame_ancestors"):
        AccessSettings(page_frame_ancestors=origin)  # type: ignore[arg-type]
