"""Who is calling, decided once per request from what a stranger cannot make up.

    API_KEYS or RELAY_API_KEYS set:
        Authorization: Bearer KEY, or X-API-Key: KEY   -> that key's client ("key:<fingerprint>")
        a wrong key                                    -> 401 (even beside a page token)
        the chat page's visitor token (cookie)         -> a page visitor, client "page:<address>"
        nothing valid                                  -> 401, before any bucket is made
    no keys:
        the address: the peer, or the client a TRUSTED_PROXIES proxy forwards; IPv6 by its /64
        (one host holds a whole /64). A presented key names nobody and is ignored.

A key may be given a name, ``NAME:KEY`` in API_KEYS / RELAY_API_KEYS (NAME: 1-32 of
``A-Za-z0-9_.-``, split at the first colon): the name labels the client's token counts
(``gateway_llm_tokens{client}``); an unnamed key is labelled ``key-<8 hex of its fingerprint>``,
a page visitor ``page``, a caller without keys ``anonymous``. Never the key, never a session.

No header a script can write stands in for a key: ``Sec-Fetch-Site`` and ``Origin`` are plain
headers outside a browser. They are believed in the one direction where a browser cannot lie
about them, the one that refuses (:meth:`Access.cross_site`): a request a browser sends for a
page of another site (``Sec-Fetch-Site: cross-site``/``same-site``, or an ``Origin`` that is not
this host's) is refused (403) on the chat and feedback routes, unless it carries a key or its
origin is in CORS_ALLOW_ORIGINS. Such a page can send a GET (an EventSource, an image) or a
"simple" POST (``text/plain``, a form) without a preflight; without keys nothing else would
stop it making a visitor's browser start generations or feedback jobs. A request without
either header (curl, the relay) is not a browser's and is not concerned.

The page gets in with a token only the gateway signs, handed out with the page itself
(:mod:`app.web.page_token`); a script that loads the page first is a page visitor, bounded by
its address and by the page's own share (docs/security.md).

The address is the peer's, unless TRUSTED_PROXIES names the peer. The gateway does not take
an address that the server already rewrote from ``X-Forwarded-For``: uvicorn does that by
default for loopback peers (``--proxy-headers`` with ``FORWARDED_ALLOW_IPS=127.0.0.1``), which
would let any local process pick its own identity per request. Such a request counts as the
one client ``ip:forwarded`` (logged once); ``scripts/run.sh`` starts uvicorn with
``--no-proxy-headers``, and TRUSTED_PROXIES is the one switch.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.config import AccessSettings
from app.domain.errors import Forbidden, Unauthorized
from app.web.page_policy import page_headers
from app.web.page_token import COOKIE, PageTokens, PageVisit

__all__ = [
    "Access",
    "Caller",
    "PeerMiddleware",
    "client_address",
    "exposure_warning",
    "listen_hosts",
]

log = logging.getLogger(__name__)

PAGE_EXPIRED_MESSAGE = "대화 페이지의 이용 시간이 지났어요. 페이지를 새로 고침해 주세요."
_FORWARDING_HEADERS = (b"x-forwarded-for", b"forwarded", b"x-real-ip")
_FORWARDED = "forwarded"  # the client of a request whose address the server took from a header
_KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")
#: ``Sec-Fetch-Site`` values of a request the page's own origin made, or the user typed.
_SAME_ORIGIN_FETCH = frozenset({"same-origin", "none"})


@dataclass(frozen=True, slots=True)
class Caller:
    """One request's caller: the client its limits count against, and how it got in."""

    client: str  # "key:<fingerprint>", "page:<address>" or "<address>" ("ip:...")
    kind: Literal["key", "relay", "page", "address"]
    visitor: str | None = None  # a page visitor's id
    renew_cookie: str | None = None  # Set-Cookie renewing a page token past half its life
    name: str = "anonymous"  # the metrics' client label (module docstring): bounded

    def user(self, session_id: str) -> str:
        """The per-user bucket: a page visitor is one user; else a sessionId within its client."""
        if self.visitor is not None:
            return f"{self.client}|v:{self.visitor}"
        return f"{self.client}|{session_id}"

    def owner(self, session_id: str) -> str:
        """Who may resume a stream this caller starts with ``session_id`` (as given, or "")."""
        who = f"v:{self.visitor}" if self.visitor is not None else f"c:{self.client}"
        return hashlib.sha256(f"{who}|{session_id}".encode()).hexdigest()[:32]


def _fingerprint(key: bytes) -> str:
    """A key as it may appear in bucket names and logs: never the key itself."""
    return hashlib.sha256(b"eco-gateway-key\0" + key).hexdigest()[:16]


def _named(entry: str) -> tuple[str | None, bytes]:
    """``NAME:KEY`` -> (NAME, KEY); a plain key -> (None, KEY)."""
    name, colon, key = entry.partition(":")
    if colon and key and _KEY_NAME.fullmatch(name):
        return name, key.encode()
    return None, entry.encode()


def _presented_key(conn: HTTPConnection) -> bytes | None:
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip().encode()
    key = conn.headers.get("x-api-key", "").strip()
    return key.encode() if key else None


class Access:
    """The decisions of the module docstring, from the settings."""

    def __init__(self, settings: AccessSettings) -> None:
        self._settings = settings
        named = [(*_named(key.get_secret_value()), False) for key in settings.api_keys]
        named += [(*_named(key.get_secret_value()), True) for key in settings.relay_api_keys]
        keys = [key for _, key, relay in named if not relay]
        relays = [key for _, key, relay in named if relay]
        # Compared as digests: one length for every key, whatever the presented one's.
        self._keys = [
            (
                hashlib.sha256(k).digest(),
                _fingerprint(k),
                relay,
                name or f"key-{_fingerprint(k)[:8]}",
            )
            for name, k, relay in named
        ]
        self.keys_required = bool(self._keys)
        # The chat page's headers: its policy and who may frame it (app/web/page_policy.py).
        self.page_headers = page_headers(settings.page_frame_ancestors)
        origins = settings.cors_allow_origins
        self._any_origin = "*" in origins
        self._origins = frozenset(origin.strip().rstrip("/").lower() for origin in origins)
        self.page_tokens: PageTokens | None = None
        if self.keys_required and settings.page_tokens:
            ttl = settings.page_token_ttl_seconds
            secret = settings.page_token_secret
            self.page_tokens = (
                PageTokens(hashlib.sha256(secret.get_secret_value().encode()).digest(), ttl)
                if secret is not None
                else PageTokens.derived(keys + relays, ttl)
            )

    def identify(self, conn: HTTPConnection) -> Caller | Unauthorized:
        """The caller of ``conn``, or the 401 when keys are required and none is valid."""
        address = client_address(conn)
        if not self.keys_required:
            return Caller(address, "address")
        presented = _presented_key(conn)
        if presented is not None:
            digest = hashlib.sha256(presented).digest()
            for known, fingerprint, relay, name in self._keys:
                if hmac.compare_digest(digest, known):
                    return Caller(f"key:{fingerprint}", "relay" if relay else "key", name=name)
            return Unauthorized("wrong API key")
        token = conn.cookies.get(COOKIE) if self.page_tokens is not None else None
        if token is None or self.page_tokens is None:
            return Unauthorized("no API key")
        visit = self.page_tokens.check(token)
        if visit is None:
            return Unauthorized("page token expired or forged", message=PAGE_EXPIRED_MESSAGE)
        renew = None
        if visit.expires - time.time() < self.page_tokens.ttl / 2:
            renew = self.page_cookie(conn, visit.visitor)
        return Caller(
            f"page:{address}", "page", visitor=visit.visitor, renew_cookie=renew, name="page"
        )

    def cross_site(self, conn: HTTPConnection) -> bool:
        """Whether a browser sent ``conn`` for a page of another origin that is not trusted
        (CORS_ALLOW_ORIGINS). ``Sec-Fetch-Site`` when the browser sends it (every current one
        does), else the ``Origin`` against the ``Host``; neither header: not a browser's
        request (curl, the relay), False. The rule of Go's ``net/http.CrossOriginProtection``
        (which guards the unsafe methods; here every route that acts, the chat GETs too)."""
        headers = conn.headers
        fetch_site = headers.get("sec-fetch-site", "").strip().lower()
        if fetch_site in _SAME_ORIGIN_FETCH:
            return False
        origin = headers.get("origin")
        if origin is not None and self._trusted(origin):
            return False
        if fetch_site:  # cross-site, same-site (another origin all the same), or garbled
            return True
        if origin is None:
            return False
        return not _same_host(origin, headers.get("host", ""))

    def foreign_page(self, conn: HTTPConnection, caller: Caller | None) -> Forbidden | None:
        """The 403 for a cross-site browser request (:meth:`cross_site`) of anyone but a key
        holder (``caller`` None: no keys are set); None when it may go on."""
        if caller is not None and caller.kind in ("key", "relay"):
            return None
        if not self.cross_site(conn):
            return None
        log.info(
            "request of a page of another site refused (403): Sec-Fetch-Site %r, Origin %r",
            conn.headers.get("sec-fetch-site", "")[:40],
            conn.headers.get("origin", "")[:80],
        )
        return Forbidden("cross-site browser request")

    def _trusted(self, origin: str) -> bool:
        return self._any_origin or origin.strip().rstrip("/").lower() in self._origins

    def key_refusal(self, conn: HTTPConnection) -> Unauthorized | None:
        """For the key-only endpoints (feedback, metrics, docs): a page token is no key."""
        if not self.keys_required:
            return None
        caller = self.identify(conn)
        if isinstance(caller, Unauthorized):
            return caller
        return None if caller.kind in ("key", "relay") else Unauthorized("page token, no key")

    def page_cookie(self, conn: HTTPConnection, visitor: str | None = None) -> str | None:
        """``Set-Cookie`` for a page load: a new visitor, or ``visitor`` renewed; None when
        the page needs no token (no keys, or PAGE_TOKENS=false)."""
        if self.page_tokens is None:
            return None
        token = self.page_tokens.issue(visitor)
        return self.page_tokens.cookie(token, secure=conn.scope.get("scheme") == "https")

    def page_visit(self, conn: HTTPConnection) -> tuple[PageVisit | None, bool]:
        """The valid page token ``conn`` carries, if any, and whether it is past half its life
        (to be renewed)."""
        token = conn.cookies.get(COOKIE)
        if self.page_tokens is None or token is None:
            return None, False
        visit = self.page_tokens.check(token)
        if visit is None:
            return None, False
        return visit, visit.expires - time.time() < self.page_tokens.ttl / 2

    @staticmethod
    def local(conn: HTTPConnection) -> bool:
        """A caller on this machine: a loopback peer, not relaying anyone (no forwarding
        header: a proxy on this host would otherwise make every stranger local)."""
        if any(name in _FORWARDING_HEADERS for name, _ in conn.scope["headers"]):
            return False
        host = conn.client.host if conn.client else ""
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


def _same_host(origin: str, host: str) -> bool:
    """``Origin: scheme://host[:port]`` names the host the request was sent to (``Host``).
    ``null`` (a sandboxed frame, a file) or anything unreadable names none."""
    scheme, sep, rest = origin.strip().rstrip("/").partition("://")
    if not sep or scheme.lower() not in ("http", "https") or "/" in rest or not rest:
        return False
    return rest.lower() == host.strip().lower()


def client_address(conn: HTTPConnection) -> str:
    """``ip:<address>`` of the peer (or of the trusted proxy's client); IPv6 as its /64."""
    host = conn.client.host if conn.client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"ip:{host or 'unknown'}"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return f"ip:{address.ipv4_mapped}"
        return f"ip:{ipaddress.IPv6Network((address, 64), strict=False)}"
    return f"ip:{address}"


class PeerMiddleware:
    """Pure ASGI: the client address as the module docstring says, before anything reads it.

    Also notes once, loudly, a request that reached a non-loopback address of this host while
    no keys are set: the start-up check (:func:`exposure_warning`) cannot see every launcher.
    """

    def __init__(self, app: ASGIApp, *, trusted_proxies: Sequence[str], keys: bool) -> None:
        self._app = app
        if trusted_proxies:
            # uvicorn's types for ASGI differ from starlette's; the same callables.
            proxied = ProxyHeadersMiddleware(app, trusted_hosts=list(trusted_proxies))  # type: ignore[arg-type]
            self._app = proxied  # type: ignore[assignment]
        self._keys = keys
        self._warned_forwarded = False
        self._warned_exposed = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if _rewritten_by_server(scope):
                scope["client"] = (_FORWARDED, 0)
                if not self._warned_forwarded:
                    self._warned_forwarded = True
                    log.warning(
                        "the server took a client address from X-Forwarded-For: such requests "
                        "count as one client; start uvicorn with --no-proxy-headers and list "
                        "proxies in TRUSTED_PROXIES"
                    )
            if not self._keys and not self._warned_exposed and _reached_from_outside(scope):
                self._warned_exposed = True
                log.warning(
                    "a request reached %s without API_KEYS: anyone who can reach this address "
                    "uses the gateway and polls feedback jobs; set API_KEYS (docs/security.md)",
                    scope["server"][0],
                )
        await self._app(scope, receive, send)


def _rewritten_by_server(scope: Scope) -> bool:
    """uvicorn's own ProxyHeadersMiddleware replaced the peer with a forwarded address: its
    port is 0 (a bare address) or the address:port is one the header lists. A TCP peer never
    has port 0, nor, by chance, the very port a header names."""
    client = scope.get("client")
    if not client:
        return False
    forwarded = [v for name, v in scope["headers"] if name == b"x-forwarded-for"]
    if not forwarded:
        return False
    host, port = client
    if port == 0:
        return True
    listed = {item.strip() for value in forwarded for item in value.decode("latin-1").split(",")}
    return f"{host}:{port}" in listed or f"[{host}]:{port}" in listed


def _reached_from_outside(scope: Scope) -> bool:
    server = scope.get("server")
    if not server or not server[0]:
        return False
    try:
        return not ipaddress.ip_address(server[0]).is_loopback
    except ValueError:
        return False  # a Unix socket: whoever reaches it is on this host


def listen_hosts(argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """The hosts uvicorn was told to bind (``--host`` / ``UVICORN_HOST``; its default is
    loopback). Read from the command line because the lifespan runs before uvicorn binds."""
    hosts: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "--host" and index + 1 < len(argv):
            hosts.append(argv[index + 1])
        elif arg.startswith("--host="):
            hosts.append(arg.partition("=")[2])
    if not hosts and environ.get("UVICORN_HOST"):
        hosts.append(environ["UVICORN_HOST"])
    return hosts or ["127.0.0.1"]


def exposure_warning(
    settings: AccessSettings,
    argv: Sequence[str] = sys.argv,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The start-up warning for a gateway that listens beyond loopback without keys, or None."""
    if settings.api_keys or settings.relay_api_keys:
        return None
    hosts = listen_hosts(argv, os.environ if environ is None else environ)
    exposed = [host for host in hosts if not _loopback_name(host)]
    if not exposed:
        return None
    return (
        f"LISTENING ON {', '.join(exposed)} WITHOUT API_KEYS: anyone who reaches this address "
        "gets answers and can poll feedback jobs by id; set API_KEYS (and RELAY_API_KEYS for the "
        "backend), or listen on 127.0.0.1 behind the relay (docs/security.md)"
    )


def _loopback_name(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
