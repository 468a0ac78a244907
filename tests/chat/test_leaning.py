"""A critique's search leans toward its own words (app/chat/planning.py ``_leaning``)."""

from __future__ import annotations

import numpy as np

from app.chat.planning import CRITIQUE_LEAN, _leaning


def _unit(values: list[float]) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_the_blend_is_a_unit_vector_nearer_the_critique_than_the_topic() -> None:
    critique, topic = _unit([1.0, 0.2, 0.0]), _unit([0.0, 0.3, 1.0])
    blend = _leaning(critique, topic, CRITIQUE_LEAN)
    assert np.isclose(np.linalg.norm(blend), 1.0)
    assert float(blend @ critique) > float(blend @ topic)
    # Weighed alike, it lies halfway: as near the one as the other.
    even = _leaning(critique, topic, 1.0)
    assert np.isclose(float(even @ critique), float(even @ topic), atol=1e-6)


def test_opposite_vectors_weighed_alike_give_no_direction_rather_than_fail() -> None:
    critique = _unit([1.0, 0.0])
    assert not np.any(_leaning(critique, -critique, 1.0))
