"""What a recommendation stream yields, independent of the transport (SSE or one JSON body)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.encoder import encode_basestring as _encode_str
from typing import Any

from pydantic import BaseModel

from app.domain.errors import GatewayError

__all__ = [
    "CHALLENGE",
    "CLOSE",
    "ERROR",
    "FEEDBACK",
    "Delta",
    "Done",
    "Envelope",
    "Failed",
    "StreamEvent",
    "envelope",
    "envelope_json",
]

# The SSE event names (SPEC): a chat stream is ``challenge`` events ended by one ``close`` or
# ``error``; the feedback results stream is ``feedback`` events. Frames: app/web/sse.py.
CHALLENGE = "challenge"
CLOSE = "close"
ERROR = "error"
FEEDBACK = "feedback"

MESSAGE_CHUNK = "추천 내용을 보내고 있어요."
MESSAGE_DONE = "추천이 완료되었어요."


@dataclass(frozen=True, slots=True)
class Delta:
    """The next piece of display text."""

    text: str


@dataclass(frozen=True, slots=True)
class Done:
    """The validated answer: ``{"recommend": str, "challenges": [...]}``; always last.
    ``suggestions`` (follow-ups to tap) go to the SSE ``close`` only: the POST body keeps
    exactly the payload, which the backend relay parses strictly (SPEC "SSE events")."""

    payload: dict[str, Any]
    suggestions: tuple[str, ...] = ()

    @property
    def streamed(self) -> dict[str, Any]:
        """The SSE ``close`` data: the payload, with the suggestions when there are any."""
        if not self.suggestions:
            return self.payload
        return {**self.payload, "suggestions": list(self.suggestions)}


@dataclass(frozen=True, slots=True)
class Failed:
    """The stream failed; always last."""

    error: GatewayError


StreamEvent = Delta | Done | Failed


class Envelope(BaseModel):
    """Every answer body (and every SSE ``data``): a status, a short Korean message, the data."""

    status: int
    message: str
    data: Any


def envelope(status: int, message: str, data: Any) -> dict[str, Any]:
    return {"status": status, "message": message, "data": data}


def envelope_json(status: int, message: str, data: Any) -> str:
    """The envelope as compact JSON, non-ASCII kept (what every SSE ``data`` carries)."""
    if type(status) is int and type(message) is str and type(data) is str:
        # Every ``challenge`` event takes this path, so it skips json.dumps' dict machinery
        # (bench/README.md "Profile"); the text is escaped by the very
        # function json.dumps uses with ensure_ascii=False, so the output is the same.
        return f'{{"status":{status},"message":{_encode_str(message)},"data":{_encode_str(data)}}}'
    return json.dumps(envelope(status, message, data), ensure_ascii=False, separators=(",", ":"))
