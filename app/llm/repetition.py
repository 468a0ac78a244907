"""Notice a degenerate loop in the display text while it streams, before the user reads it.

A small model sometimes repeats one sentence until ``max_tokens``. :class:`RepetitionGuard`
sits after the scrubber: ``feed(text)`` returns the part of the display text that is safe to
show and sets :attr:`looping` once a sentence is about to be shown more than ``max_repeats``
times, or once the current sentence has become one short phrase repeated over and over.

Text flows through at once, except while the sentence being written is still a prefix of a
sentence already shown ``max_repeats`` times: that much is held back (a few characters when it
is only a common start), released as soon as it turns out different, and dropped when it
completes the repeat. So no sentence is ever shown
more than ``max_repeats`` times, and ordinary text is never delayed.

A "sentence" ends at ``.``, ``!``, ``?``, ``…`` or a line break; compared with surrounding
whitespace trimmed, and only from ``min_chars`` characters on (short pieces such as a list
number repeat legitimately).
"""

from __future__ import annotations

import re

__all__ = ["RepetitionGuard"]

_ENDS = frozenset(".!?…\n")
# A phrase repeated inside one sentence: five copies of up to 20 characters ("좋아요 좋아요
# ..."), or three of a longer phrase ("방법: 사무직에서 ... 방법: 사무직에서 ...").
_PHRASE_LOOP = re.compile(r"(?:(.{1,20}?)\1{4,}|(.{12,80}?)\2{2,})$", re.S)
_PHRASE_LOOP_MIN_CHARS = 24
_PHRASE_LOOP_EVERY = 32  # characters between two phrase-loop searches
_PHRASE_LOOP_WINDOW = 250  # the end of the sentence that is searched, so a check stays cheap


class RepetitionGuard:
    """One per stream: ``feed(text) -> str`` then ``finish() -> str``; see the module docstring."""

    __slots__ = (
        "_counts",
        "_held",
        "_longest",
        "_max",
        "_min",
        "_saturated",
        "_sentence",
        "looping",
    )

    def __init__(self, *, max_repeats: int = 2, min_chars: int = 8) -> None:
        self._max = max_repeats
        self._min = min_chars
        self._counts: dict[str, int] = {}
        self._saturated: list[str] = []  # sentences shown max_repeats times
        self._sentence: list[str] = []  # the sentence being written (shown and held)
        self._held = 0  # characters at the end of _sentence not shown yet
        self._longest = 0  # length of the longest saturated sentence, with its spaces
        self.looping = False

    def feed(self, text: str) -> str:
        """The part of ``text`` that may be shown now ("" once :attr:`looping`)."""
        if self.looping:
            return ""
        out: list[str] = []
        for ch in text:
            self._sentence.append(ch)
            self._held += 1
            if ch in _ENDS:
                self._end_sentence(out)
            else:
                self._check_prefix(out)
            if self.looping:
                return "".join(out)
        return "".join(out)

    def finish(self) -> str:
        """The held text at a normal end of the stream: dropped when it repeats a sentence
        shown ``max_repeats`` times already (it is the start of one more copy), else shown."""
        if self.looping or not self._held:
            return ""
        if self._is_repeat_prefix("".join(self._sentence).strip()):
            return ""
        return self._release()

    def _release(self) -> str:
        held = "".join(self._sentence[len(self._sentence) - self._held :])
        self._held = 0
        return held

    def _end_sentence(self, out: list[str]) -> None:
        key = "".join(self._sentence).strip()
        if len(key) >= self._min:
            seen = self._counts.get(key, 0) + 1
            if seen > self._max:
                self.looping = True
                return
            self._counts[key] = seen
            if seen == self._max:
                self._saturated.append(key)
                self._longest = max(self._longest, len(self._sentence))
        out.append(self._release())
        self._sentence.clear()

    def _check_prefix(self, out: list[str]) -> None:
        size = len(self._sentence)
        if self._saturated and size <= self._longest:
            key = "".join(self._sentence).strip()
            if key and self._is_repeat_prefix(key):
                return  # hold: this may be one more copy of a saturated sentence
        if size % _PHRASE_LOOP_EVERY == 0 and size >= _PHRASE_LOOP_MIN_CHARS:
            # The search is costly: every few characters, over the end of the sentence only.
            if _PHRASE_LOOP.search("".join(self._sentence[-_PHRASE_LOOP_WINDOW:]).strip()):
                self.looping = True
                return
        out.append(self._release())

    def _is_repeat_prefix(self, key: str) -> bool:
        return any(sentence.startswith(key) for sentence in self._saturated)
