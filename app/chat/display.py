"""What a reader sees of one answer: the parser's fields, composed as the gateway wants them.

:class:`~app.llm.scrubber.FieldParser` reads the model's streamed JSON into field events
(a value opened, its text, closed; a challenge began or ended; prose). :class:`AnswerDisplay`
decides what of them is shown, and the answer that matches it; with no option it shows exactly
the SPEC's plain display, as :class:`~app.llm.scrubber.AnswerScrubber` does.

* ``whole_titles``: a challenge's title is shown once it is complete, and a challenge whose title
  repeats one shown earlier in the answer is dropped whole (never shown, not in the answer),
  unless part of it was shown already (a description written before its title).
* ``catalogue`` (title -> description; implies ``whole_titles``): the model picks titles and the
  catalogue says the rest. A complete title is shown with its catalogue description right after
  it, exactly as the catalogue has it; the model's own description, if it writes one, is neither
  shown nor kept; a title the catalogue does not hold drops its challenge.
* ``picks`` (the candidates' titles and descriptions, in the prompt's numbered order): the model
  writes ``{"picks": [2, 1]}``, numbers in that list (app/llm/schema.py ``Picks``). Each pick
  is shown once the parser has read it whole (its number ends at the next comma or bracket) as
  the catalogue's title and description; a number repeated or outside the list is dropped.
  The answer's challenges are the picks shown.
* ``recommend``: the recommend is the gateway's own text, which the caller shows before the first
  feed: it is the answer's recommend and the first block of the layout, and a recommend the
  model writes anyway is neither shown nor kept.
* ``bounds`` (key -> the value's ``maxLength``): within ``BOUND_MARGIN`` characters of its bound
  a value is shown a sentence at a time, and a value that reaches its bound (the grammar cut it)
  ends at its last sentence end. So a length bound never leaves a word cut in half on screen,
  while a value of usual length streams as it arrives.

The answer is the model's document as parsed, changed only where the reader was shown something
else: a dropped challenge is not in it, a description is the catalogue's, a value cut at a
sentence end ends there, the recommend is the gateway's, the picks are the challenges shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from app.llm.schema import DISPLAY_KEYS, Answer
from app.llm.scrubber import (
    ChallengeEnded,
    ChallengeStarted,
    Closed,
    FieldEvent,
    FieldParser,
    Opened,
    Prose,
    ScrubResult,
    partial_answer,
)

__all__ = ["BOUND_MARGIN", "AnswerDisplay"]

#: Characters before its bound from which a value is shown a sentence at a time.
BOUND_MARGIN: Final = 60
_SENTENCE_ENDS: Final = re.compile(r"[.!?…]+")

_RECOMMEND, _TITLE, _DESCRIPTION = DISPLAY_KEYS
_CHALLENGES: Final = "challenges"
_PICKS: Final = "picks"

# How the open value is shown.
_HIDDEN: Final = 0
_SHOWN: Final = 1  # as it arrives
_BOUNDED: Final = 2  # as it arrives while far from its bound, then a sentence at a time
_HELD: Final = 3  # a title, shown once complete


@dataclass(slots=True)
class _Challenge:
    """What the reader was shown of one challenge, where it differs from the document."""

    dropped: bool = False
    #: Values as shown (a bounded value cut at its last sentence end), by key.
    shown: dict[str, str] = field(default_factory=dict)
    #: The catalogue's description of its title (with a catalogue).
    description: str | None = None


class AnswerDisplay:
    """What one streamed answer shows; see the module docstring.

    Use one instance per stream: call :meth:`feed` with each upstream text delta and send what
    it returns, then call :meth:`finish` once; :meth:`partial` at any time.
    """

    __slots__ = (
        "_blocks",
        "_bound",
        "_bounds",
        "_catalogue",
        "_challenges",
        "_dropped",
        "_fields",
        "_given_recommend",
        "_open",
        "_parser",
        "_parts",
        "_picked",
        "_picks",
        "_picks_read",
        "_prose_shown",
        "_recommend",
        "_released",
        "_show",
        "_titles",
        "_whole_titles",
    )

    def __init__(
        self,
        *,
        catalogue: Mapping[str, str] | None = None,
        whole_titles: bool = False,
        recommend: str | None = None,
        bounds: Mapping[str, int] | None = None,
        picks: Sequence[tuple[str, str]] | None = None,
    ) -> None:
        self._parser = FieldParser()
        self._picks = picks
        self._picked: list[dict[str, str]] = []  # the picks shown, as challenges
        self._picks_read = 0  # numbers of the picks array read so far
        self._catalogue = catalogue
        self._whole_titles = whole_titles or catalogue is not None
        self._bounds = dict(bounds or {})
        self._given_recommend = recommend
        self._titles: set[str] = set()  # titles shown in this answer
        self._challenges: dict[int, _Challenge] = {}  # by position in the challenges array
        self._recommend: str | None = None  # the model's recommend as shown
        # layout
        self._blocks = 0 if recommend is None else 1  # blocks started so far
        self._prose_shown = False
        self._fields = 0  # fields shown so far in the current challenge
        self._dropped = False  # the current challenge is dropped
        # the open value
        self._open: Opened | None = None
        self._show = _HIDDEN
        self._parts: list[str] = []
        self._bound = 0  # its bound (_BOUNDED)
        self._released = 0  # characters of it shown so far (_BOUNDED)

    # ------------------------------------------------------------------ public

    def feed(self, text: str) -> str:
        """Read the next piece of model output; return the display text now certain."""
        out: list[str] = []
        self._read(self._parser.feed(text), out)
        self._read_picks(out)
        return "".join(out)

    def finish(self) -> ScrubResult:
        """End the stream: release held text; the answer as shown, validated."""
        end = self._parser.finish()
        tail: list[str] = []
        self._read(end.events, tail)
        self._read_picks(tail)
        if self._reading_recommend():
            self._recommend = self._shown_value()  # cut here: partial() keeps it
        return end.result("".join(tail), self._composed(end.document))

    def partial(self) -> Answer:
        """What the answer holds so far, for closing a stream stopped early: the recommend
        shown so far (also while it is still being read) and the challenges whose title and
        description have both been read. Read-only; ``feed`` may go on, and after ``finish``
        it gives what the stream ended with."""
        document = self._composed(self._parser.document)
        recommend = document.get(_RECOMMEND)
        if self._reading_recommend():
            recommend = self._shown_value()
        return partial_answer(recommend, document.get(_CHALLENGES))

    # ----------------------------------------------------------------- events

    def _read(self, events: Iterable[FieldEvent], out: list[str]) -> None:
        for event in events:
            if isinstance(event, str):
                self._text(event, out)
            elif isinstance(event, Opened):
                self._opened(event, out)
            elif isinstance(event, Closed):
                self._closed(event, out)
            elif isinstance(event, ChallengeStarted):
                self._challenges[event.index] = _Challenge()
                self._fields = 0
                self._dropped = False
            elif isinstance(event, ChallengeEnded):
                self._dropped = False
            else:
                self._prose(event, out)

    def _prose(self, event: Prose, out: list[str]) -> None:
        if not self._prose_shown:
            self._prose_shown = True
            if self._blocks:  # after the gateway's recommend
                out.append("\n\n")
            self._blocks += 1
        out.append(event.text)

    def _opened(self, event: Opened, out: list[str]) -> None:
        show = _HIDDEN
        key = event.key
        if key == _RECOMMEND:
            if self._given_recommend is None:
                show = self._shown_as(key)
                if self._blocks:
                    out.append("\n\n")
                self._blocks += 1
        elif not self._dropped:
            if key == _TITLE and self._whole_titles:
                show = _HELD
            elif key == _DESCRIPTION and self._catalogue is not None:
                show = _HIDDEN  # the catalogue's description is shown instead
            else:
                show = self._shown_as(key)
                self._field_separator(out)
        self._open = event
        self._show = show
        self._parts = []

    def _shown_as(self, key: str) -> int:
        bound = self._bounds.get(key)
        if bound is None:
            return _SHOWN
        self._bound = bound
        self._released = 0
        return _BOUNDED

    def _field_separator(self, out: list[str]) -> None:
        if self._fields:
            out.append("\n")
        else:
            if self._blocks:
                out.append("\n\n")
            self._blocks += 1
        self._fields += 1

    def _text(self, piece: str, out: list[str]) -> None:
        show = self._show
        if show == _SHOWN:
            self._parts.append(piece)
            out.append(piece)
        elif show == _BOUNDED:
            self._parts.append(piece)
            self._release(out)

    def _closed(self, event: Closed, out: list[str]) -> None:
        show, value = self._show, event.value
        self._open, self._show = None, _HIDDEN
        if show == _HELD:
            self._title_done(event, out)
            return
        if show == _HIDDEN:
            return
        if show == _BOUNDED:
            value = self._bounded_value(value, out)
        if event.key == _RECOMMEND:
            self._recommend = value
        else:
            self._challenges[event.challenge].shown[event.key] = value

    def _title_done(self, event: Closed, out: list[str]) -> None:
        """A held title is complete: show it (with its catalogue description), or drop its
        challenge (a repeat, or a title the catalogue does not hold)."""
        title = event.value
        challenge = self._challenges[event.challenge]
        description = None if self._catalogue is None else self._catalogue.get(title)
        unwanted = title in self._titles or (self._catalogue is not None and description is None)
        if unwanted and not self._fields:
            self._dropped = challenge.dropped = True
            return
        self._titles.add(title)
        self._field_separator(out)
        out.append(title)
        if description is not None:
            out.append("\n" + description)
            self._fields += 1
            challenge.description = description

    def _read_picks(self, out: list[str]) -> None:
        """Show the picks the parser has read whole since the last feed (``picks`` only)."""
        if self._picks is None:
            return
        numbers = self._parser.document.get(_PICKS)
        if not isinstance(numbers, list):
            return
        while self._picks_read < len(numbers):
            number = numbers[self._picks_read]
            self._picks_read += 1
            if type(number) is not int or not 1 <= number <= len(self._picks):
                continue  # not a number in the list: dropped, as a title the catalogue lacks
            title, description = self._picks[number - 1]
            if title in self._titles:
                continue  # a repeat
            self._titles.add(title)
            if self._blocks:
                out.append("\n\n")
            self._blocks += 1
            out.append(f"{title}\n{description}")
            self._picked.append({_TITLE: title, _DESCRIPTION: description})

    # ----------------------------------------------------------------- bounds

    def _shown_value(self) -> str:
        """What the reader has seen of the open value."""
        value = "".join(self._parts)
        return value[: self._released] if self._show == _BOUNDED else value

    def _release(self, out: list[str]) -> None:
        """Show what a bounded value may show now: all of it while it is far from its bound,
        then up to its last sentence end. A value that runs past its bound is held to it by no
        grammar (structured output off, another server): from there it is shown as it comes."""
        value = "".join(self._parts)
        upto = len(value)
        if upto > self._bound:
            self._show = _SHOWN
        elif upto > self._bound - BOUND_MARGIN:
            upto = self._released
            for end in _SENTENCE_ENDS.finditer(value, self._released):
                upto = end.end()
        if upto > self._released:
            out.append(value[self._released : upto])
            self._released = upto

    def _bounded_value(self, value: str, out: list[str]) -> str:
        """A bounded value is complete: show the rest, unless the bound cut it, in which case
        it ends at its last sentence end (or where it was shown up to). Returns the value as
        shown."""
        keep = len(value)
        if keep >= self._bound:
            keep = self._released
            for end in _SENTENCE_ENDS.finditer(value, self._released):
                keep = end.end()
        if keep > self._released:
            out.append(value[self._released : keep])
        return value[:keep]

    # ----------------------------------------------------------------- answer

    def _reading_recommend(self) -> bool:
        return (
            self._open is not None
            and self._open.key == _RECOMMEND
            and self._show in (_SHOWN, _BOUNDED)
        )

    def _composed(self, document: dict[str, Any]) -> dict[str, Any]:
        """The parsed ``document`` as the reader was shown it (module docstring). Every string
        value of a shown field passes through :meth:`_closed`, so where the document holds a
        string, the value noted last is that one, as it was shown; any other value (a number,
        null) is the model's, for validation to refuse."""
        composed = dict(document)
        if self._given_recommend is not None:
            composed[_RECOMMEND] = self._given_recommend
        elif isinstance(composed.get(_RECOMMEND), str) and self._recommend is not None:
            composed[_RECOMMEND] = self._recommend  # the last string value: as shown
        items = composed.get(_CHALLENGES)
        if self._picks is not None and _PICKS in composed:
            del composed[_PICKS]
            composed[_CHALLENGES] = [dict(item) for item in self._picked]
        elif isinstance(items, list):
            composed[_CHALLENGES] = [
                self._item(i, item) for i, item in enumerate(items) if not self._dropped_at(i, item)
            ]
        return composed

    def _dropped_at(self, index: int, item: Any) -> bool:
        challenge = self._challenges.get(index)
        return challenge is not None and challenge.dropped and isinstance(item, dict)

    def _item(self, index: int, item: Any) -> Any:
        challenge = self._challenges.get(index)
        if challenge is None or not isinstance(item, dict):
            return item
        item = dict(item)
        for key, value in challenge.shown.items():
            if isinstance(item.get(key), str):
                item[key] = value  # the last string value: as shown
        if self._catalogue is not None:
            item.pop(_DESCRIPTION, None)
            if challenge.description is not None:
                item[_DESCRIPTION] = challenge.description
        return item
