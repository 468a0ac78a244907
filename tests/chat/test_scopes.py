"""Where a turn's candidates are looked for, in order (``planning._scopes``): "more" stays in
the current category while it has ones fitting the situation, then looks in the others for ones
fitting it, and only then relaxes it (SPEC: every challenge fits base-info's location and work
type; the planner stops before a relaxed scope once a fitting one held any: test_turn.py)."""

from __future__ import annotations

from app.chat.planning import _scopes
from app.domain.categories import Category
from app.rag.scope import Scope

SHOWN = frozenset({"up-019"})


def test_more_leaves_the_category_before_it_relaxes_the_situation() -> None:
    order = list(_scopes(Category.UPCYCLING, "산", "현장직", SHOWN, more=True))
    assert order[:4] == [
        Scope(Category.UPCYCLING, "산", "현장직", exclude=SHOWN),
        Scope(None, "산", "현장직", exclude=SHOWN),
        Scope(Category.UPCYCLING, work_type="현장직", exclude=SHOWN),
        Scope(Category.UPCYCLING, location="산", exclude=SHOWN),
    ]
    assert len(order) == len(set(order))  # each scope searched once


def test_more_without_a_situation_leaves_the_category_next() -> None:
    order = list(_scopes(Category.VEGAN, None, None, SHOWN, more=True))
    assert order[:2] == [
        Scope(Category.VEGAN, exclude=SHOWN),
        Scope(None, exclude=SHOWN),
    ]


def test_an_ordinary_turn_never_leaves_the_category() -> None:
    order = list(_scopes(Category.VEGAN, "도시", "사무직", SHOWN, more=False))
    assert order[1] == Scope(Category.VEGAN, "도시", "사무직")  # shown before, too
    assert all(scope.category is Category.VEGAN for scope in order)
