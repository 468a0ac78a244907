"""The page's visitor token (``app.web.page_token``) against whatever a stranger sends as the
cookie (issue 31, item 1): a refusal (401) for every text and every byte, never an exception.
A cookie of the token's shape with one non-ASCII byte used to reach ``hmac.compare_digest``,
which raises on non-ASCII text: a 500, and two tracebacks in the log, on every route."""

from __future__ import annotations

import hashlib

from hypothesis import example, given, settings
from hypothesis import strategies as st
from itsdangerous import TimestampSigner
from starlette.requests import Request

from app.config import Settings
from app.domain.errors import Unauthorized
from app.web.access import Access
from app.web.page_token import COOKIE, PageTokens

SECRET = b"page-secret"
VISITOR = "0123456789abcdef" * 2
#: What the probe sent: the old format's shape, one byte past ASCII in the signature.
PROBE_COOKIES = [
    f"{VISITOR}.9999999999.\xff",
    f"{VISITOR}.9999999999.{'0' * 63}\xe9",
    f"{VISITOR}.9999999999.é",
    "\xff",
    "\x80.\x80.\x80",
]


def _request(cookie: bytes) -> Request:
    return Request(
        {
            "type": "http",
            "client": ("10.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
            "headers": [(b"cookie", cookie)],
            "scheme": "http",
        }
    )


def _keyed() -> Access:
    return Access(Settings(_env_file=None, api_keys="k1"))  # type: ignore[call-arg]


def test_the_probes_cookies_are_a_401_not_an_exception() -> None:
    access = _keyed()
    for token in PROBE_COOKIES:
        cookie = f"{COOKIE}={token}".encode("latin-1")
        assert isinstance(access.identify(_request(cookie)), Unauthorized), token
        assert access.page_visit(_request(cookie)) == (None, False), token
        assert access.key_refusal(_request(cookie)) is not None, token


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=160))
@example(PROBE_COOKIES[0])
@example(PROBE_COOKIES[1])
def test_check_answers_none_for_any_text(text: str) -> None:
    assert PageTokens(SECRET, 3600).check(text) is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
@example(PROBE_COOKIES[0].encode("latin-1"))
@example(VISITOR.encode() + b".1.\xc3\xa9")
def test_any_cookie_bytes_are_a_caller_or_a_401(raw: bytes) -> None:
    access = _keyed()
    for cookie in (raw, f"{COOKIE}=".encode() + raw):
        caller = access.identify(_request(cookie))
        assert isinstance(caller, Unauthorized), cookie
        access.page_visit(_request(cookie))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=200), st.characters())
def test_a_valid_token_with_any_character_changed_is_refused_or_the_same(
    at: int, char: str
) -> None:
    tokens = PageTokens(SECRET, 3600)
    token = tokens.issue(VISITOR)
    at = at % len(token)
    changed = token[:at] + char + token[at + 1 :]
    visit = tokens.check(changed)
    # base64's last character holds two unused bits: a few spellings of the signature's last
    # character decode to the same bytes (the same signature: nothing forged).
    assert visit is None or changed == token or at == len(token) - 1, changed


def test_a_token_is_itsdangerous_timestamp_signer_output() -> None:
    """The library signs and checks: a token is what its ``TimestampSigner`` makes with the
    same key and salt, and one signed under another salt or key is refused."""
    tokens = PageTokens(SECRET, 3600)
    token = tokens.issue(VISITOR)
    signer = TimestampSigner(SECRET, salt=b"eco-page-v2", digest_method=hashlib.sha256)
    assert signer.unsign(token, max_age=3600) == VISITOR.encode()
    visit = tokens.check(signer.sign(VISITOR).decode())
    assert visit is not None and visit.visitor == VISITOR
    other = TimestampSigner(SECRET, salt=b"another", digest_method=hashlib.sha256)
    assert tokens.check(other.sign(VISITOR).decode()) is None
    assert tokens.check(signer.sign("not-a-visitor-id").decode()) is None
