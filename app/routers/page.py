"""The chat page: ``/`` serves app/web/static/index.html, ``/static/{name}`` its CSS and JS.

Plain routes over a fixed list of files rather than a StaticFiles mount: older FastAPI (pyproject
allows 0.115) silently drops a mount inside an included APIRouter, and a closed list cannot
serve anything else from the package folder. ``no-cache`` makes browsers revalidate (cheap: ETag/Last-Modified),
so a deploy never pairs a new page with an old script.

Under API_KEYS the page comes with its visitor token, a cookie (``app.web.page_token``): a new
visitor costs one request of its address's client limit, so reloading the page cannot mint
visitors faster than the address may ask; a visitor whose token is past half its life gets it
renewed, still the same visitor.

The page comes with its Content-Security-Policy and frame protection, it and its assets with
``nosniff`` (:mod:`app.web.page_policy`).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from app.domain.errors import Refused
from app.domain.events import envelope
from app.web.access import Caller, client_address
from app.web.deps import ChatDep
from app.web.errors import error_response
from app.web.page_policy import ASSET_HEADERS

__all__ = ["router"]

router = APIRouter(tags=["page"], include_in_schema=False)

_STATIC = Path(__file__).resolve().parent.parent / "web" / "static"
_ASSETS = {
    "chat.css": "text/css; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
}
_HEADERS = {"cache-control": "no-cache", **ASSET_HEADERS}


@router.get("/")
async def index(request: Request, chat: ChatDep) -> Response:
    access = chat.admission.access
    headers = {**_HEADERS, **access.page_headers}
    if access.page_tokens is not None:
        visit, stale = access.page_visit(request)
        if visit is None:
            try:
                await chat.admission.page_load(Caller(f"page:{client_address(request)}", "page"))
            except Refused as refused:
                return error_response(refused.error, ASSET_HEADERS)
        if visit is None or stale:
            cookie = access.page_cookie(request, visit.visitor if visit else None)
            if cookie is not None:
                headers |= {"cache-control": "no-store", "set-cookie": cookie}
    return FileResponse(
        _STATIC / "index.html", media_type="text/html; charset=utf-8", headers=headers
    )


@router.get("/static/{name}")
async def asset(name: str) -> Response:
    media_type = _ASSETS.get(name)
    if media_type is None:
        return JSONResponse(
            envelope(404, "찾을 수 없는 파일이에요.", None), status_code=404, headers=ASSET_HEADERS
        )
    return FileResponse(_STATIC / name, media_type=media_type, headers=_HEADERS)
