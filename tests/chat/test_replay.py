"""Which earlier turns a ``titles`` prompt replays (app/chat/planning.py ``_replay``): the window
grows by the last turn while it can, so each prompt extends the last one, and restarts from
the newest half when full; a turn with nothing to replay ends it."""

from __future__ import annotations

from app.chat.planning import _replay
from app.chat.sessions import Turn


def _turn(n: int, replayed: int, *, replayable: bool = True) -> Turn:
    asked, reply = (f"q{n}", f"a{n}") if replayable else ("", "")
    return Turn(f"u{n}", "{}", asked=asked, reply=reply, replayed=replayed)


def _conversation(length: int, keep: int) -> list[int]:
    """How many turns each prompt of a conversation replays."""
    turns: list[Turn] = []
    counts = []
    for n in range(length):
        replay = _replay(tuple(turns), keep)
        if replay:  # it extends the last turn: the last turn's window, then the last turn
            assert replay[-1] is turns[-1]
        counts.append(len(replay))
        turns.append(_turn(n, len(replay)))
    return counts


def test_the_window_grows_then_restarts_from_the_newest_half() -> None:
    assert _conversation(9, keep=3) == [0, 1, 2, 3, 1, 2, 3, 1, 2]
    assert _conversation(9, keep=6) == [0, 1, 2, 3, 4, 5, 6, 3, 4]
    assert _conversation(4, keep=1) == [0, 1, 1, 1]
    assert _conversation(3, keep=0) == [0, 0, 0]


def test_a_prompt_extends_the_last_exactly() -> None:
    turns = (_turn(0, 0), _turn(1, 1), _turn(2, 2))
    assert _replay(turns, 4) == turns  # the last one replayed 2: this one replays those and it


def test_a_turn_not_to_replay_ends_the_window() -> None:
    salvaged = _turn(1, 1, replayable=False)
    assert _replay((_turn(0, 0), salvaged), 3) == ()
    assert _replay((_turn(0, 0), salvaged, _turn(2, 0)), 3) == (_turn(2, 0),)
    older = Turn("u", "{}")  # stored by an older release: nothing to replay
    assert _replay((older, _turn(1, 1)), 3) == (_turn(1, 1),)
