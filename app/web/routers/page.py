"""The chat page: ``/`` serves app/web/static/index.html, ``/static/{name}`` its CSS and JS.

Plain routes over a fixed list of files rather than a StaticFiles mount: older FastAPI (pyproject
allows 0.115) silently drops a mount inside an included APIRouter, and a closed list cannot
serve anything else from the package folder. ``no-cache`` makes browsers revalidate (cheap: ETag/Last-Modified),
so a deploy never pairs a new page with an old script.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse, Response

from app.domain.events import envelope

__all__ = ["router"]

router = APIRouter(tags=["page"], include_in_schema=False)

_STATIC = Path(__file__).resolve().parent.parent / "static"
_ASSETS = {
    "chat.css": "text/css; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
}
_HEADERS = {"cache-control": "no-cache"}


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(
        _STATIC / "index.html", media_type="text/html; charset=utf-8", headers=_HEADERS
    )


@router.get("/static/{name}")
async def asset(name: str) -> Response:
    media_type = _ASSETS.get(name)
    if media_type is None:
        return JSONResponse(envelope(404, "찾을 수 없는 파일이에요.", None), status_code=404)
    return FileResponse(_STATIC / name, media_type=media_type, headers=_HEADERS)
