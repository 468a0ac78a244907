"""Rank fusion with a fixed order for ties (app/rag/fusion.py), against a reference."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from app.rag.fusion import RRF_K, Scored, open_tie, rrf, settle


def test_rrf_matches_qdrant_and_orders_ties() -> None:
    # b: dense 1st, sparse 6th; c: sparse 1st, dense 6th -> equal RRF: the better dense rank wins.
    dense = ["b", "x1", "x2", "x3", "x4", "c"]
    sparse = ["c", "y1", "y2", "y3", "y4", "b"]
    fused = rrf(dense, sparse)
    assert fused[:2] == ["b", "c"]
    # Only in one list, same rank: dense first, then the ids of the rest in order.
    assert fused.index("x1") < fused.index("y1") < fused.index("x2")


def test_settle_orders_equal_scores_by_preference_then_id() -> None:
    ranked = [Scored("z", 3.0), Scored("b", 2.0), Scored("a", 2.0000001), Scored("c", 1.0)]
    assert settle(ranked, 4) == ["z", "a", "b", "c"]
    assert settle(ranked, 4, {"b": 0, "a": 1}.get) == ["z", "b", "a", "c"]
    assert settle(ranked, 2) == ["z", "a"]


def test_open_tie_when_the_cut_ties_with_the_last_fetched() -> None:
    ranked = [Scored("a", 3.0), Scored("b", 2.0), Scored("c", 2.0)]
    assert open_tie(ranked, keep=2, fetched=3)
    assert not open_tie(ranked, keep=1, fetched=3)
    assert not open_tie(ranked, keep=2, fetched=4)  # the engine had no more


_ids = st.lists(st.sampled_from([f"p{i:02d}" for i in range(40)]), unique=True, max_size=30)


@given(_ids, _ids)
def test_rrf_against_exact_fractions(dense: list[str], sparse: list[str]) -> None:
    score: dict[str, Fraction] = {}
    for ranked in (dense, sparse):
        for rank, p in enumerate(ranked):
            score[p] = score.get(p, Fraction(0)) + Fraction(1, RRF_K + rank)
    unranked = len(dense) + len(sparse)
    expected = sorted(
        score,
        key=lambda p: (
            -score[p],
            dense.index(p) if p in dense else unranked,
            sparse.index(p) if p in sparse else unranked,
            p,
        ),
    )
    assert rrf(dense, sparse) == expected
