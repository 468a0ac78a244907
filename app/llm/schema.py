"""The answer the model is asked to write: pydantic models, and the JSON schemas made from them.

Three compositions (``ANSWER_COMPOSITION``), named by what the model writes:

- ``picks`` (the default): the model chooses the challenges among the candidates, by their
  numbers in the prompt's candidate list (:class:`Picks`, ``{"picks": [2, 1]}``: about 10
  tokens, where titles took 40-50); the gateway writes the recommend from what the turn knows,
  and each challenge is the catalogue's title and description, shown exactly as the catalogue
  has them. A weak model garbles text it re-types and writes a poor recommend, and decoding is
  most of an answer's time on a CPU. ``titles`` is read as ``picks`` (its former name).
- ``recommend``: the model writes the recommend and the titles it chooses
  (:class:`RecommendAndTitles`).
- ``descriptions``: the model writes each challenge's description as well (:class:`Answer`),
  for a model strong enough to write them well.

Either way the answer read back is an :class:`Answer` (recommend, challenges with title and
description), and the schema sent to vLLM as ``response_format`` (structured output) is made
from the pydantic model (``model_json_schema()``), so the prompt's format, the scrubber's
validation and the grammar vLLM enforces cannot drift. Constraints that live only in the
schema, as instructions to the grammar, not checked when an answer is read back:

- length bounds on every value the model writes (``maxLength``; xgrammar enforces them), so
  that a weak model that starts to loop inside a value is stopped by the grammar (the answer's
  display, ``app/chat/display.py``, shows a bounded value so that the cut is never seen
  mid-word);
- the number of challenges, and, when grounded, titles restricted to the candidate catalogue
  titles (``enum``; see :func:`answer_schema`); picks always restricted to the candidates'
  numbers.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ANSWER_JSON_SCHEMA",
    "DESCRIPTION_MAX_CHARS",
    "DISPLAY_KEYS",
    "MAX_CHALLENGES",
    "RECOMMEND_MAX_CHARS",
    "Answer",
    "ChallengeItem",
    "Composition",
    "Picks",
    "RecommendAndTitles",
    "answer_schema",
]

Composition = Literal["picks", "recommend", "descriptions"]

MAX_CHALLENGES = 3
RECOMMEND_MAX_CHARS = 160
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
    """The whole answer as read back. Unknown keys are tolerated and dropped."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    recommend: str = Field(json_schema_extra=_bound(RECOMMEND_MAX_CHARS))
    challenges: list[ChallengeItem] = Field(
        default_factory=list,
        json_schema_extra={"minItems": 1, "maxItems": MAX_CHALLENGES},
    )


class PickedChallenge(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    title: str = Field(json_schema_extra=_bound(TITLE_MAX_CHARS))


class RecommendAndTitles(BaseModel):
    """What the model writes in the ``recommend`` composition."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    recommend: str = Field(json_schema_extra=_bound(RECOMMEND_MAX_CHARS))
    challenges: list[PickedChallenge] = Field(
        json_schema_extra={"minItems": 1, "maxItems": MAX_CHALLENGES}
    )


class Picks(BaseModel):
    """What the model writes in the ``picks`` composition: the numbers (1-based) of the
    candidates it chooses, best first."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    picks: list[Annotated[int, Field(ge=1)]] = Field(
        json_schema_extra={"minItems": 1, "maxItems": MAX_CHALLENGES}
    )


#: Keys whose string values are shown to the user, in display order.
DISPLAY_KEYS: tuple[str, ...] = ("recommend", "title", "description")


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    # The model writes every key; "challenges" has a default only for reading answers back.
    schema["required"] = list(schema["properties"])
    schema["properties"].get("challenges", {}).pop("default", None)
    schema.pop("description", None)  # the class docstring: no use to the grammar
    return schema


#: The ``descriptions`` composition's schema without grounding (``response_format``).
ANSWER_JSON_SCHEMA: dict[str, Any] = _schema(Answer)
_SCHEMAS: dict[str, dict[str, Any]] = {
    "picks": _schema(Picks),
    "recommend": _schema(RecommendAndTitles),
    "descriptions": ANSWER_JSON_SCHEMA,
}


def answer_schema(
    titles: Sequence[str] = (),
    *,
    composition: Composition = "descriptions",
    min_items: int = 1,
    max_items: int = MAX_CHALLENGES,
) -> dict[str, Any]:
    """The answer's schema for ``composition``. With ``titles``, each challenge's title must be
    one of them (grounding: the model picks among the candidate catalogue items and cannot
    invent one), and a pick one of their numbers; ``min_items``..``max_items`` challenges (at
    most as many as there are titles)."""
    base = _SCHEMAS[composition]
    unique = list(dict.fromkeys(titles))
    if not unique and min_items == 1 and max_items == MAX_CHALLENGES:
        return base
    schema = copy.deepcopy(base)
    if unique:
        max_items = min(max_items, len(unique))
    if composition == "picks":
        items = schema["properties"]["picks"]
        if unique:
            items["items"]["enum"] = list(range(1, len(unique) + 1))
    else:
        items = schema["properties"]["challenges"]
        if unique:
            item = schema["$defs"][
                "ChallengeItem" if composition == "descriptions" else "PickedChallenge"
            ]
            title = item["properties"]["title"]
            title.pop("maxLength", None)
            title["enum"] = unique
    items["maxItems"] = max_items
    items["minItems"] = max(1, min(min_items, max_items))
    return schema
