"""The feedback request as the backend sends it, and what the API answers about a job.

Request field names are the backend's (camelCase). Unknown fields are ignored, ``null``
lists count as empty, and every list and text is bounded, so one request cannot make a
prompt of any size. Ids are the backend's ``Long``s: a number outside a signed 64-bit integer
is refused, as the backend could never have sent it (``memberId`` is also not negative).
Numbers, booleans and texts are pydantic's strict types: JSON's own type or a 422, never a
conversion (``"memberId": true`` is no member 1, ``"isSuccess": 1`` no success, ``"7"`` no id:
what a buggy relay sends is refused, not reinterpreted). Validation errors name the offending
fields as paths (``groupChallenges[0].submissions[1].submittedAt``), for ``data.invalidFields``.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from app.feedback.dates import EndDateTime, StartDateTime

__all__ = [
    "FeedbackRequest",
    "FeedbackResult",
    "GroupChallenge",
    "JobRecord",
    "JobStatus",
    "PersonalChallenge",
    "Submission",
    "invalid_fields",
]

MAX_CHALLENGES = 100
MAX_SUBMISSIONS = 200
MAX_TITLE_CHARS = 100
JAVA_LONG_MAX = 2**63 - 1

#: Strict: an ``int``, never a ``bool`` (Python's ``True`` is an ``int``), float or string.
Long = Annotated[int, Field(strict=True, ge=-(2**63), le=JAVA_LONG_MAX)]
Title = Annotated[StrictStr, Field(min_length=1, max_length=MAX_TITLE_CHARS)]

JobStatus = Literal["queued", "running", "done", "failed"]
DeliveryStatus = Literal["none", "pending", "delivered", "dead_letter"]


class _Input(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class PersonalChallenge(_Input):
    id: Long
    title: Title
    isSuccess: StrictBool


class Submission(_Input):
    isSuccess: StrictBool
    submittedAt: StartDateTime


class GroupChallenge(_Input):
    id: Long
    title: Title
    startDate: StartDateTime
    endDate: EndDateTime
    submissions: list[Submission] = Field(default_factory=list, max_length=MAX_SUBMISSIONS)

    @field_validator("submissions", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return [] if value is None else value

    @model_validator(mode="after")
    def _ordered(self) -> GroupChallenge:
        if self.endDate < self.startDate:
            raise ValueError("endDate is before startDate")
        return self


class FeedbackRequest(_Input):
    memberId: int = Field(strict=True, ge=0, le=JAVA_LONG_MAX)
    personalChallenges: list[PersonalChallenge] = Field(
        default_factory=list, max_length=MAX_CHALLENGES
    )
    groupChallenges: list[GroupChallenge] = Field(default_factory=list, max_length=MAX_CHALLENGES)

    @field_validator("personalChallenges", "groupChallenges", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return [] if value is None else value

    @property
    def empty(self) -> bool:
        return not self.personalChallenges and not self.groupChallenges

    def fingerprint(self) -> str:
        """The request as validated, hashed: two requests that mean the same have the same one
        (spacing, key order, ISO or array dates, offsets aside)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


def invalid_fields(error: ValidationError) -> list[str]:
    """The paths of the fields that failed, in order, each once."""
    fields: list[str] = []
    for item in error.errors():
        path = ""
        for part in item["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        if item["type"] == "value_error" and item["loc"] and "endDate" in item["msg"]:
            path += ".endDate"  # the model-level check names the field it is about
        path = path or "body"
        if path not in fields:
            fields.append(path)
    return fields


class FeedbackResult(BaseModel):
    """What is delivered: to the callback, and as the ``feedback`` event's ``data``."""

    memberId: int
    content: str
    jobId: str


class JobRecord(BaseModel):
    """One job as kept by the queue backend and shown by ``GET /ai/feedback/{jobId}``."""

    jobId: str
    memberId: int
    status: JobStatus = "queued"
    content: str | None = None
    source: Literal["model", "fallback"] | None = None  # who wrote ``content``
    delivery: DeliveryStatus = "none"
    deliveryAttempts: int = 0
    acceptedAt: datetime
    finishedAt: datetime | None = None
    request: FeedbackRequest
    # The accepting request's trace context (``traceparent``...): the job's spans join it.
    trace: dict[str, str] = Field(default_factory=dict)
    client: str = "anonymous"  # the token counters' label: the API key's name

    def public(self) -> dict[str, object]:
        """The polling view: no request echo, nothing internal."""
        return self.model_dump(mode="json", exclude={"request", "trace", "client"})
