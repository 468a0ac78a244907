"""Where a turn's candidates are looked for, in order (``candidates._scopes``): "more" stays in
the current category while it has ones fitting the situation, then looks in the others for ones
fitting it, and only then relaxes it (SPEC: every challenge fits base-info's location and work
type; the planner stops before a relaxed scope once a fitting one held any: test_turn.py)."""

from __future__ import annotations

from app.chat.candidates import _scopes
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


def test_back_to_the_start_searches_with_the_topic_the_conversation_began_with() -> None:
    """ "처음 얘기로 돌아가자" says nothing of the start: the first turn remembered in the
    category the conversation began in does (its words had found 화상회의 for a phone's full
    storage)."""
    from app.chat.candidates import Query
    from app.chat.intent import Intent, IntentKind
    from app.chat.planning import _subject
    from app.chat.sessions import SessionState, Turn

    turns = (
        Turn("폰 용량이 꽉 찼어", "{}", Category.DIGITAL_CARBON, ("dc-1",), topic="폰 용량"),
        Turn("비건 챌린지", "{}", Category.VEGAN, ("vg-1",), topic="비건"),
    )
    state = SessionState(
        "s", base_category=Category.DIGITAL_CARBON, category=Category.VEGAN, turns=turns
    )
    back = Intent(IntentKind.BACK_TO_BASE)
    topic, search = _subject(
        "처음 얘기로 돌아가자", Query("처음 얘기로"), back, state, critique=False
    )
    assert topic == search.text == "폰 용량"
    # Nothing remembered of the start: its own words.
    alone = SessionState("s", base_category=Category.DIGITAL_CARBON, category=Category.VEGAN)
    topic, _ = _subject("처음 얘기로 돌아가자", Query("처음 얘기로"), back, alone, critique=False)
    assert topic == "처음 얘기로 돌아가자"


def test_a_critique_leaves_its_field_only_for_one_nearer_than_anything_left_there() -> None:
    """``candidates._nearer_than_the_field``: in one search of every field, the best of
    another field that satisfies the critique must come before any of its own field left."""
    from app.chat.candidates import _nearer_than_the_field
    from app.rag.corpus import load_corpus
    from app.rag.retriever import Hit
    from tests.support.store import CORPUS

    documents = {document.id: document for document in load_corpus(CORPUS)}
    picture_book, plogging, heating = (
        Hit(documents[i], 0.5) for i in ("md-010", "pl-030", "es-040")
    )
    assert _nearer_than_the_field(
        picture_book, (heating, picture_book, plogging), Category.PLOGGING
    )
    assert not _nearer_than_the_field(heating, (plogging, heating), Category.PLOGGING)
