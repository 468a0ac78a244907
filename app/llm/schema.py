"""The answer the model is asked to write: a pydantic model, and the JSON schema made from it.

The schema sent to vLLM as ``response_format`` (structured output) is
``Answer.model_json_schema()``, so the prompt's format, the scrubber's validation and the
grammar vLLM enforces cannot drift. Two kinds of constraint live only in the schema, as
instructions to the grammar, and are not checked when an answer is read back:

- length bounds on every displayed value (``maxLength``; xgrammar enforces them), so that a
  weak model that starts to loop inside a value is stopped by the grammar;
- 1 to 3 challenges, and, when grounding is on, titles restricted to the retrieved catalogue
  titles (``enum``; see :func:`answer_schema`).

An answer that breaks them without structured output (another server, the setting off) is
still shown: the bounds exist to end a loop, not to refuse a long sentence.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ANSWER_JSON_SCHEMA",
    "DISPLAY_KEYS",
    "MAX_CHALLENGES",
    "Answer",
    "ChallengeItem",
    "answer_schema",
]

MAX_CHALLENGES = 3
RECOMMEND_MAX_CHARS = 200
TITLE_MAX_CHARS = 40
DESCRIPTION_MAX_CHARS = 160


def _bound(chars: int) -> dict[str, Any]:
    return {"maxLength": chars}


class ChallengeItem(BaseModel):
    """One challenge as the model writes it (category is the server's business, not the model's)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    title: str = Field(json_schema_extra=_bound(TITLE_MAX_CHARS))
    description: str = Field(json_schema_extra=_bound(DESCRIPTION_MAX_CHARS))


class Answer(BaseModel):
    """The model's whole answer. Unknown keys are tolerated and dropped."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    recommend: str = Field(json_schema_extra=_bound(RECOMMEND_MAX_CHARS))
    challenges: list[ChallengeItem] = Field(
        default_factory=list,
        json_schema_extra={"minItems": 1, "maxItems": MAX_CHALLENGES},
    )


#: Keys whose string values are shown to the user, in display order.
DISPLAY_KEYS: tuple[str, ...] = ("recommend", "title", "description")


def _schema() -> dict[str, Any]:
    schema = Answer.model_json_schema()
    # The model writes both keys; "challenges" has a default only for reading answers back.
    schema["required"] = ["recommend", "challenges"]
    schema["properties"]["challenges"].pop("default", None)
    return schema


#: Sent as ``response_format={"type": "json_schema", "json_schema": {...}}``.
ANSWER_JSON_SCHEMA: dict[str, Any] = _schema()


def answer_schema(titles: Sequence[str] = ()) -> dict[str, Any]:
    """The answer's schema; with ``titles``, each challenge's title must be one of them
    (grounding: the model picks among the retrieved catalogue items and cannot invent one)."""
    if not titles:
        return ANSWER_JSON_SCHEMA
    schema = copy.deepcopy(ANSWER_JSON_SCHEMA)
    title = schema["$defs"]["ChallengeItem"]["properties"]["title"]
    title.pop("maxLength", None)
    title["enum"] = list(dict.fromkeys(titles))
    return schema
