"""The chat page's visitor token: what lets the built-in page in when ``API_KEYS`` is set.

``GET /`` sets it as a cookie (``eco_page``: HttpOnly, SameSite=Strict, Path=/), so the
page's EventSource sends it back by itself and no script on another site can: a script gets one
only by loading the page first, and then it is a page visitor with the page's limits
(``app.web.access``, docs/security.md).

The token is itsdangerous's ``TimestampSigner`` over a random visitor id (32 hex digits):
``<visitor>.<signed at>.<signature>``, the time and the HMAC-SHA256 in URL-safe base64, as
Starlette's sessions sign their cookie. Signing and checking are the library's: a cookie is
whatever bytes a stranger sends, and :meth:`PageTokens.check` answers None for every one of
them that is not a token we signed and still valid, never an exception (a hand-written check
once let one non-ASCII byte through to ``hmac.compare_digest``, which raises: a 500 on every
route). The key is PAGE_TOKEN_SECRET, else derived from the API keys, so every gateway process
with the same keys accepts every other's tokens.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass

from itsdangerous import BadData, TimestampSigner

__all__ = ["COOKIE", "PageTokens", "PageVisit"]

COOKIE = "eco_page"
_SALT = b"eco-page-v2"  # v1: the hand-written format; its tokens no longer check
_VISITOR = re.compile(r"[0-9a-f]{32}")
#: Longer than any token we sign (32 + 1 + 6 + 1 + 43 characters): refused before any hashing.
_MAX_TOKEN_CHARS = 128


@dataclass(frozen=True, slots=True)
class PageVisit:
    visitor: str
    expires: int


class _Signer(TimestampSigner):
    """itsdangerous's signer with the clock as a value: the tests move time, and a token is
    checked against the moment of its request."""

    def __init__(self, secret: bytes, at: float | None) -> None:
        super().__init__(secret, salt=_SALT, digest_method=hashlib.sha256)
        self._at = at

    def get_timestamp(self) -> int:
        return int(time.time() if self._at is None else self._at)


class PageTokens:
    """Issues and checks visitor tokens valid for ``ttl`` seconds."""

    def __init__(self, secret: bytes, ttl: float) -> None:
        self._secret = secret
        self.ttl = ttl

    @classmethod
    def derived(cls, keys: list[bytes], ttl: float) -> PageTokens:
        """A key derived from the API keys: the same on every process that has them."""
        material = b"\0".join([b"eco-page-v1", *sorted(keys)])
        return cls(hashlib.sha256(material).digest(), ttl)

    def issue(self, visitor: str | None = None, now: float | None = None) -> str:
        """A fresh token, for a new visitor or renewing ``visitor``'s."""
        visitor = visitor or secrets.token_hex(16)
        return _Signer(self._secret, now).sign(visitor).decode("ascii")

    def check(self, token: str, now: float | None = None) -> PageVisit | None:
        """The visit a token names, or None when it is malformed, forged or expired: None for
        any text at all, never an exception."""
        if len(token) > _MAX_TOKEN_CHARS:
            return None
        # A cookie is latin-1 text (Starlette's reading); "replace" keeps even a lone surrogate
        # from raising: such a token cannot be one we signed.
        raw = token.encode("utf-8", "replace")
        try:
            value, signed_at = _Signer(self._secret, now).unsign(raw, return_timestamp=True)
        except BadData:  # every refusal of the library: bad signature, time, encoding
            return None
        visitor = value.decode("ascii", "replace")
        if not _VISITOR.fullmatch(visitor):
            return None
        expires = int(signed_at.timestamp() + self.ttl)
        if expires <= (time.time() if now is None else now):
            return None
        return PageVisit(visitor, expires)

    def cookie(self, token: str, *, secure: bool) -> str:
        """The ``Set-Cookie`` value carrying ``token``."""
        flags = "; Secure" if secure else ""
        return (
            f"{COOKIE}={token}; Max-Age={int(self.ttl)}; Path=/; HttpOnly; SameSite=Strict{flags}"
        )
