"""Who a request is (``app.web.access``): keys, the page's visitor token, addresses."""

from __future__ import annotations

import time

import pytest
from starlette.requests import Request

from app.config import Settings
from app.domain.errors import Unauthorized
from app.web.access import (
    PAGE_EXPIRED_MESSAGE,
    Access,
    Caller,
    PeerMiddleware,
    client_address,
    exposure_warning,
)
from app.web.page_token import COOKIE, PageTokens

pytestmark = pytest.mark.anyio


def _request(
    client: tuple[str, int] | None = ("10.0.0.1", 40000),
    headers: dict[str, str] | None = None,
    server: tuple[str, int] = ("127.0.0.1", 8000),
) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request(
        {"type": "http", "client": client, "server": server, "headers": raw, "scheme": "http"}
    )


def _keyed(**overrides: object) -> Access:
    return Access(Settings(_env_file=None, api_keys="k1", relay_api_keys="relay", **overrides))  # type: ignore[call-arg, arg-type]


def test_with_keys_no_forgeable_header_admits() -> None:
    access = _keyed(cors_allow_origins="http://page.example")
    for headers in (
        {"sec-fetch-site": "same-origin"},
        {"origin": "http://page.example"},
        {"sec-fetch-site": "same-origin", "origin": "http://page.example", "referer": "/"},
        {"x-api-key": ""},
        {"authorization": "Bearer "},
        {"authorization": "Basic azE="},
    ):
        assert isinstance(access.identify(_request(headers=headers)), Unauthorized), headers


def test_keys_name_their_client_never_the_key_itself() -> None:
    access = _keyed()
    key = access.identify(_request(headers={"x-api-key": "k1"}))
    bearer = access.identify(_request(("10.9.9.9", 1), {"authorization": "Bearer k1"}))
    relay = access.identify(_request(headers={"authorization": "bearer relay"}))
    assert isinstance(key, Caller) and isinstance(bearer, Caller) and isinstance(relay, Caller)
    assert key.client == bearer.client and key.kind == "key", "the key, whatever the address"
    assert relay.kind == "relay" and relay.client != key.client
    assert "k1" not in key.client and "relay" not in relay.client
    assert isinstance(access.identify(_request(headers={"x-api-key": "k2"})), Unauthorized)


def test_without_keys_a_presented_key_is_ignored() -> None:
    access = Access(Settings(_env_file=None))  # type: ignore[call-arg]
    one = access.identify(_request(headers={"x-api-key": "anything"}))
    two = access.identify(_request(headers={"authorization": "Bearer other"}))
    assert isinstance(one, Caller) and isinstance(two, Caller)
    assert one.client == two.client == "ip:10.0.0.1" and one.kind == "address"


def test_an_ipv6_host_is_one_client_across_its_64() -> None:
    a = client_address(_request(("2001:db8:1:2::1", 1)))
    b = client_address(_request(("2001:db8:1:2:ffff::9", 1)))
    c = client_address(_request(("2001:db8:1:3::1", 1)))
    assert a == b == "ip:2001:db8:1:2::/64" and c != a
    assert client_address(_request(("::ffff:10.1.2.3", 1))) == "ip:10.1.2.3"


def test_the_page_token_lets_the_page_in_and_a_forged_one_does_not() -> None:
    access = _keyed()
    cookie = access.page_cookie(_request())
    assert cookie is not None
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    token = cookie.split(";")[0].partition("=")[2]
    visitor = access.identify(_request(headers={"cookie": f"{COOKIE}={token}"}))
    assert isinstance(visitor, Caller) and visitor.kind == "page"
    assert visitor.client == "page:ip:10.0.0.1" and visitor.visitor
    assert visitor.renew_cookie is None, "a fresh token is not renewed"

    middle = len(token) - 20  # in the signature; its last character has two unused bits
    forged = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    refused = access.identify(_request(headers={"cookie": f"{COOKIE}={forged}"}))
    assert isinstance(refused, Unauthorized) and refused.message == PAGE_EXPIRED_MESSAGE
    other = PageTokens(b"another secret", 3600).issue()
    assert isinstance(
        access.identify(_request(headers={"cookie": f"{COOKIE}={other}"})), Unauthorized
    )
    # A page token opens the chat, never the key-only endpoints.
    assert access.key_refusal(_request(headers={"cookie": f"{COOKIE}={token}"})) is not None


def test_a_page_token_expires_and_is_renewed_past_half_its_life() -> None:
    tokens = PageTokens(b"s", ttl=100)
    now = time.time()
    token = tokens.issue(now=now)
    assert tokens.check(token, now=now + 99) is not None
    assert tokens.check(token, now=now + 100) is None
    access = _keyed(page_token_ttl_seconds=100)
    assert access.page_tokens is not None
    old = access.page_tokens.issue(now=now - 60)
    caller = access.identify(_request(headers={"cookie": f"{COOKIE}={old}"}))
    assert isinstance(caller, Caller) and caller.renew_cookie is not None
    renewed = caller.renew_cookie.split(";")[0].partition("=")[2]
    again = access.identify(_request(headers={"cookie": f"{COOKIE}={renewed}"}))
    assert isinstance(again, Caller) and again.visitor == caller.visitor, "the same visitor"


def test_every_process_with_the_same_keys_accepts_each_others_tokens() -> None:
    one, two = _keyed(), _keyed()
    cookie = one.page_cookie(_request())
    assert cookie is not None
    token = cookie.split(";")[0].partition("=")[2]
    assert isinstance(two.identify(_request(headers={"cookie": f"{COOKIE}={token}"})), Caller)
    assert Access(Settings(_env_file=None, api_keys="k1", page_tokens=False)).page_tokens is None  # type: ignore[call-arg]


def test_resume_owners_differ_by_client_visitor_and_session() -> None:
    a = Caller("ip:10.0.0.1", "address")
    b = Caller("ip:10.0.0.2", "address")
    v = Caller("page:ip:10.0.0.1", "page", visitor="v" * 32)
    owners = {a.owner("s1"), a.owner("s2"), b.owner("s1"), v.owner("s1")}
    assert len(owners) == 4 and a.owner("s1") == a.owner("s1")


def test_local_means_a_loopback_peer_that_relays_nobody() -> None:
    assert Access.local(_request(("127.0.0.1", 5)))
    assert Access.local(_request(("::1", 5)))
    assert not Access.local(_request(("10.0.0.1", 5)))
    assert not Access.local(_request(("127.0.0.1", 5), {"x-forwarded-for": "203.0.113.1"}))
    assert not Access.local(_request(("127.0.0.1", 5), {"x-real-ip": "203.0.113.1"}))
    assert not Access.local(_request(None))


async def _client_seen(
    middleware_kwargs: dict[str, object], scope_client: tuple[str, int], xff: str
) -> object:
    seen: dict[str, object] = {}

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        seen["client"] = scope["client"]

    middleware = PeerMiddleware(app, **middleware_kwargs)  # type: ignore[arg-type]
    scope = {
        "type": "http",
        "client": scope_client,
        "server": ("127.0.0.1", 8000),
        "headers": [(b"x-forwarded-for", xff.encode())],
    }
    await middleware(scope, None, None)  # type: ignore[arg-type]
    return seen["client"]


async def test_an_address_the_server_took_from_x_forwarded_for_is_not_believed() -> None:
    # uvicorn's default --proxy-headers trusts loopback peers: a local script could pick a new
    # address per request. The gateway counts such requests as one client.
    plain = {"trusted_proxies": [], "keys": False}
    assert await _client_seen(plain, ("203.0.113.7", 0), "203.0.113.7") == ("forwarded", 0)
    assert await _client_seen(plain, ("203.0.113.7", 5555), "203.0.113.7:5555") == ("forwarded", 0)
    # A real peer that sends the header is still itself; a trusted proxy's client is believed.
    assert await _client_seen(plain, ("10.0.0.1", 41000), "203.0.113.7") == ("10.0.0.1", 41000)
    trusted = {"trusted_proxies": ["10.0.0.1"], "keys": False}
    client = await _client_seen(trusted, ("10.0.0.1", 41000), "203.0.113.7")
    assert client == ("203.0.113.7", 0)


def test_the_start_warns_when_listening_beyond_loopback_without_keys() -> None:
    bare = Settings(_env_file=None)  # type: ignore[call-arg]
    warning = exposure_warning(bare, ["uvicorn", "app.main:app", "--host", "0.0.0.0"], {})
    assert warning is not None and "0.0.0.0" in warning and "API_KEYS" in warning
    assert exposure_warning(bare, ["uvicorn", "app.main:app", "--host=10.1.2.3"], {}) is not None
    assert exposure_warning(bare, ["uvicorn", "app.main:app"], {"UVICORN_HOST": "::"}) is not None
    assert exposure_warning(bare, ["uvicorn", "app.main:app"], {}) is None
    assert exposure_warning(bare, ["uvicorn", "app.main:app", "--host", "localhost"], {}) is None
    keyed = Settings(_env_file=None, api_keys="k")  # type: ignore[call-arg]
    assert exposure_warning(keyed, ["uvicorn", "app.main:app", "--host", "0.0.0.0"], {}) is None


def test_a_named_key_labels_its_tokens_by_name_and_only_the_key_part_admits() -> None:
    access = Access(Settings(_env_file=None, api_keys="web:k1,k2", relay_api_keys="backend:relay"))  # type: ignore[call-arg]
    named = access.identify(_request(headers={"x-api-key": "k1"}))
    plain = access.identify(_request(headers={"x-api-key": "k2"}))
    relay = access.identify(_request(headers={"x-api-key": "relay"}))
    whole = access.identify(_request(headers={"x-api-key": "web:k1"}))
    assert isinstance(named, Caller) and named.name == "web" and named.kind == "key"
    assert isinstance(relay, Caller) and relay.name == "backend" and relay.kind == "relay"
    assert isinstance(plain, Caller) and plain.name.startswith("key-") and "k2" not in plain.name
    assert isinstance(whole, Unauthorized)
    anonymous = Access(Settings(_env_file=None)).identify(_request())  # type: ignore[call-arg]
    assert isinstance(anonymous, Caller) and anonymous.name == "anonymous"
