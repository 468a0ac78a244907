"""The chat page's visitor token: what lets the built-in page in when ``API_KEYS`` is set.

``GET /`` sets it as a cookie (``eco_page``: HttpOnly, SameSite=Strict, Path=/), so the
page's EventSource sends it back by itself and no script on another site can: a script gets one
only by loading the page first, and then it is a page visitor with the page's limits
(``app.web.access``, docs/security.md). The token is ``<visitor>.<expires>.<signature>``: a
random visitor id, a Unix expiry and an HMAC-SHA256 over both (the standard library's ``hmac``;
the one-line format needs no more). The key is PAGE_TOKEN_SECRET, else derived from the API keys,
so every gateway process with the same keys accepts every other's tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

__all__ = ["COOKIE", "PageTokens", "PageVisit"]

COOKIE = "eco_page"
_VERSION = b"eco-page-v1"


@dataclass(frozen=True, slots=True)
class PageVisit:
    visitor: str
    expires: int


class PageTokens:
    """Issues and checks visitor tokens valid for ``ttl`` seconds."""

    def __init__(self, secret: bytes, ttl: float) -> None:
        self._secret = secret
        self.ttl = ttl

    @classmethod
    def derived(cls, keys: list[bytes], ttl: float) -> PageTokens:
        """A key derived from the API keys: the same on every process that has them."""
        material = b"\0".join([_VERSION, *sorted(keys)])
        return cls(hashlib.sha256(material).digest(), ttl)

    def issue(self, visitor: str | None = None, now: float | None = None) -> str:
        """A fresh token, for a new visitor or renewing ``visitor``'s."""
        visitor = visitor or secrets.token_hex(16)
        expires = int((time.time() if now is None else now) + self.ttl)
        return f"{visitor}.{expires}.{self._sign(visitor, expires)}"

    def check(self, token: str, now: float | None = None) -> PageVisit | None:
        """The visit a token names, or None when it is malformed, forged or expired."""
        visitor, _, rest = token.partition(".")
        expires_text, _, signature = rest.partition(".")
        if len(visitor) != 32 or not expires_text.isdecimal() or len(expires_text) > 12:
            return None
        expires = int(expires_text)
        if not hmac.compare_digest(signature, self._sign(visitor, expires)):
            return None
        if expires <= (time.time() if now is None else now):
            return None
        return PageVisit(visitor, expires)

    def cookie(self, token: str, *, secure: bool) -> str:
        """The ``Set-Cookie`` value carrying ``token``."""
        flags = "; Secure" if secure else ""
        return (
            f"{COOKIE}={token}; Max-Age={int(self.ttl)}; Path=/; HttpOnly; SameSite=Strict{flags}"
        )

    def _sign(self, visitor: str, expires: int) -> str:
        message = b".".join([_VERSION, visitor.encode(), str(expires).encode()])
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()
