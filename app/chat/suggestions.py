"""Follow-ups to tap after an answer: 2–3 short messages the gateway understands exactly.

Critiques that make sense for this answer: one not in force yet, that some challenge still to
show in the answer's field satisfies together with those in force ("더 쉬운 거", "돈 안 드는
거", "집에서 할 수 있는 거", "혼자서 할 수 있는 거"), and always a change of field ("다른
분야로"). Each text is one the intent and facet steps read as meant
(tests/chat/test_suggestions.py holds them to it with the real embedding model).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from app.chat.constraints import Constraint, satisfies
from app.rag.retriever import Hit

__all__ = ["ANOTHER_FIELD", "CRITIQUES", "suggest"]

#: The critiques offered, in the order tried.
CRITIQUES = (Constraint.EASY, Constraint.FREE, Constraint.HOME, Constraint.ALONE)
ANOTHER_FIELD = "아예 다른 분야로"
#: Critiques offered at most, before the change of field.
_MAX_CRITIQUES = 2


def suggest(in_force: Collection[Constraint], left: Sequence[Hit]) -> tuple[str, ...]:
    """The follow-ups for an answer whose constraints are ``in_force`` and whose field still
    holds ``left`` (challenges not shown yet)."""
    offered: list[str] = []
    for critique in CRITIQUES:
        if len(offered) == _MAX_CRITIQUES:
            break
        if critique in in_force:
            continue
        wanted = (*in_force, critique)
        if any(satisfies(hit.document.traits, wanted) for hit in left):
            offered.append(critique.suggestion)
    return (*offered, ANOTHER_FIELD)
