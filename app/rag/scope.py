"""Which documents a search may return: a category, the user's situation, ids to keep or skip.

Every condition given must hold. ``location`` and ``work_type`` match one of a document's
``locations`` / ``work_types`` (the corpus tags each document with where and for whom it
fits); ``only`` and ``exclude`` name documents by their stable ``doc_id``. Frozen and
hashable: a search's results are cached by its query and scope (app/rag/cached.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.domain.categories import Category

__all__ = ["ANYWHERE", "Scope"]


@dataclass(frozen=True, slots=True)
class Scope:
    category: Category | None = None
    location: str | None = None
    work_type: str | None = None
    only: frozenset[str] = field(default_factory=frozenset)  # doc ids; empty: any
    exclude: frozenset[str] = field(default_factory=frozenset)  # doc ids


#: No condition: the whole collection.
ANYWHERE = Scope()
