"""Reciprocal rank fusion with a fixed order for ties, so that every engine ranks alike.

Qdrant fuses a hybrid query itself (``Prefetch`` + ``Fusion.RRF``), but leaves ties in engine
order, and ties are common here: RRF scores are sums of ``1/(k + rank)``, so a document
ranked 1st by one list and 6th by the other ties with its mirror image, and short queries
that share one bigram with many documents give those documents equal BM25 scores. The
server and qdrant-edge (one engine) order fused ties by a hash map seeded per process, so
the same store answers the same query in another order after a restart; qdrant-client's
local mode orders them by insertion. This module takes each engine's ranked candidate lists
and fuses them here, the same way for every engine and every process:

- within one list, scores equal to within ``TIE_TOLERANCE`` (engines compute in float32)
  are ordered by the caller's preference, then by point id;
- RRF is computed exactly (integers), as Qdrant defines it: ``1/(RRF_K + rank)`` per list,
  rank from 0, ``RRF_K`` = 2 (Qdrant's default);
- equal fused scores go to the better dense rank (the closer meaning), then the better
  sparse rank, then the point id.

Pure functions over ids and scores: the stores (app/rag/store.py) do the fetching.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["RRF_K", "TIE_TOLERANCE", "Scored", "open_tie", "rrf", "settle"]

RRF_K = 2
#: Relative difference below which two scores of one list (cosine, BM25) count as tied: the
#: engines' float32 scores and qdrant-client local mode's float64 ones differ by about 1e-7.
TIE_TOLERANCE = 1e-6


@dataclass(frozen=True, slots=True)
class Scored:
    point_id: str
    score: float


def _tied(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TIE_TOLERANCE, abs_tol=1e-12)


def open_tie(ranked: Sequence[Scored], keep: int, fetched: int) -> bool:
    """True when points beyond the ``fetched`` ones may tie with the ``keep``-th: then the
    cut at ``keep`` is not yet decided by score alone."""
    return len(ranked) >= fetched > keep > 0 and _tied(ranked[keep - 1].score, ranked[-1].score)


def settle(
    ranked: Sequence[Scored], keep: int, prefer: Callable[[str], int] | None = None
) -> list[str]:
    """The ids of the ``keep`` best of ``ranked`` (best first, as an engine returns them),
    tied scores ordered by ``prefer`` (lower first), then by id."""
    out: list[str] = []
    start, end = 0, len(ranked)
    while start < end and len(out) < keep:
        stop = start + 1
        while stop < end and _tied(ranked[stop].score, ranked[start].score):
            stop += 1
        if stop - start == 1:
            out.append(ranked[start].point_id)
        else:
            group = sorted(
                ranked[start:stop],
                key=lambda s: (prefer(s.point_id) if prefer else 0, s.point_id),
            )
            out.extend(s.point_id for s in group)
        start = stop
    return out[:keep]


def rrf(dense: Sequence[str], sparse: Sequence[str]) -> list[str]:
    """Ids of both ranked lists, fused by reciprocal rank, best first (ties as above)."""
    longest = max(len(dense), len(sparse), 1)
    # A common multiple of every denominator, so that 1/(k+rank) is an exact integer.
    scale = math.lcm(*range(RRF_K, RRF_K + longest))
    score: dict[str, int] = {}
    for ranked in (dense, sparse):
        for rank, point_id in enumerate(ranked):
            score[point_id] = score.get(point_id, 0) + scale // (RRF_K + rank)
    dense_rank = {point_id: rank for rank, point_id in enumerate(dense)}
    sparse_rank = {point_id: rank for rank, point_id in enumerate(sparse)}
    unranked = longest
    return sorted(
        score,
        key=lambda p: (
            -score[p],
            dense_rank.get(p, unranked),
            sparse_rank.get(p, unranked),
            p,
        ),
    )
