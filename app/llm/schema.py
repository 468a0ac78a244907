"""The answer the model is asked to write, as a pydantic model and as a JSON schema.

The same schema is sent to vLLM as ``response_format`` (structured output), used by the
scrubber's final validation, and documented in the prompt, so the three cannot drift.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ANSWER_JSON_SCHEMA", "DISPLAY_KEYS", "Answer", "ChallengeItem"]


class ChallengeItem(BaseModel):
    """One challenge as the model writes it (category is the server's business, not the model's)."""

    model_config = ConfigDict(extra="ignore")

    title: str
    description: str


class Answer(BaseModel):
    """The model's whole answer. Unknown keys are tolerated and dropped."""

    model_config = ConfigDict(extra="ignore")

    recommend: str
    challenges: list[ChallengeItem] = Field(default_factory=list)


#: Keys whose string values are shown to the user, in display order.
DISPLAY_KEYS: tuple[str, ...] = ("recommend", "title", "description")


def _answer_json_schema() -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "description": {"type": "string"},
        },
        "required": ["title", "description"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "recommend": {"type": "string"},
            "challenges": {"type": "array", "items": item, "minItems": 1, "maxItems": 3},
        },
        "required": ["recommend", "challenges"],
        "additionalProperties": False,
    }


#: Sent as ``response_format={"type": "json_schema", "json_schema": {...}}``.
ANSWER_JSON_SCHEMA: dict[str, Any] = _answer_json_schema()
