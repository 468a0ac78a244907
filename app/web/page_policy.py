"""The chat page's protective headers (SPEC "Access and limits"; docs/security.md).

The page (app/web/static) is one HTML file, one script and one stylesheet from its own origin,
talking to its own origin only (EventSource), with no inline script, inline style or event
attribute: its Content-Security-Policy allows exactly that, so an injected ``<script>``, style
or foreign connection is refused by the browser even if some text ever reached the DOM as
markup. Nobody may frame it (clickjacking the send button, reading a visitor's answers under
an overlay) unless ``PAGE_FRAME_ANCESTORS`` names the origins that may. ``nosniff`` keeps a
browser from running a response as another type than the one it is served as.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ASSET_HEADERS", "page_headers"]

NOSNIFF = {"x-content-type-options": "nosniff"}

# The favicon is ``data:,`` (no request for one); forms are handled by the script, and their
# no-script fallback submits to the page itself.
_POLICY = (
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "font-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
)

ASSET_HEADERS = dict(NOSNIFF)


def page_headers(frame_ancestors: Sequence[str] = ()) -> dict[str, str]:
    """The page's headers; ``frame_ancestors``: origins that may frame it (none by default).

    X-Frame-Options stays DENY either way: a browser that knows ``frame-ancestors`` ignores it,
    and one that knows only the older header (which cannot name several origins) refuses the
    frame, which fails safe."""
    ancestors = " ".join(frame_ancestors) or "'none'"
    return {
        "content-security-policy": "; ".join((*_POLICY, f"frame-ancestors {ancestors}")),
        "x-frame-options": "DENY",
        **NOSNIFF,
    }
