"""Notice a degenerate loop in the display text while it streams, before the user reads it.

A small model sometimes repeats one sentence until ``max_tokens``. :class:`RepetitionGuard`
sits after the scrubber: ``feed(text)`` returns the part of the display text that is safe to
show and sets :attr:`looping` once a sentence is about to be shown more than ``max_repeats``
times, or once the current sentence has become one short phrase repeated over and over.

Text flows through at once, except while the sentence being written is still a prefix of a
sentence already shown ``max_repeats`` times: that much is held back (a few characters when it
is only a common start), released as soon as it turns out different, and dropped when it
completes the repeat. So no sentence is ever shown more than ``max_repeats`` times, and
ordinary text is never delayed. Whitespace is shown with the text that follows it: the blank
line before a block that turns out to be a repeat is dropped with it, so a stream stopped by a
loop never ends in a separator that its ``close`` does not have.

A "sentence" ends at ``.``, ``!``, ``?``, ``…`` or a line break; compared with surrounding
whitespace trimmed, and only from ``min_chars`` characters on (short pieces such as a list
number repeat legitimately). A sentence longer than ``max_tracked`` characters is not compared
with others (an answer's fields are far shorter); its end is still searched for phrase loops.

The guard works on whole pieces, not characters, so a long value costs what its pieces cost.
"""

from __future__ import annotations

import re

__all__ = ["RepetitionGuard", "sentences"]

_END = re.compile(r"[.!?…\n]")
# A phrase repeated at the end of a sentence: five copies of up to 11 characters ("좋아요
# 좋아요 ..."), or three of 12 to 80 ("방법: 사무직에서 ... 방법: 사무직에서 ...").
_SHORT_PHRASE, _SHORT_COPIES = 11, 5
_LONG_PHRASE, _LONG_COPIES = 80, 3
_LOOP_MIN_CHARS = 24
_LOOP_EVERY = 32  # new characters between two phrase-loop checks
_LOOP_WINDOW = _LONG_PHRASE * _LONG_COPIES  # the end of the sentence that is checked


def sentences(text: str, min_chars: int = 8) -> list[str]:
    """The sentences of ``text`` that the guard compares: split after each end, trimmed,
    ``min_chars`` long at least."""
    parts = (part.strip() for part in re.split(r"(?<=[.!?…\n])", text))
    return [part for part in parts if len(part) >= min_chars]


def _ends_in_phrase_loop(text: str) -> bool:
    """Whether ``text`` ends with one phrase repeated (see the copies and lengths above)."""
    size = len(text)
    for period in range(1, _LONG_PHRASE + 1):
        copies = _SHORT_COPIES if period <= _SHORT_PHRASE else _LONG_COPIES
        span = period * copies
        if span > size:
            break
        if text[size - span :] == text[size - period :] * copies:
            return True
    return False


class RepetitionGuard:
    """One per stream: ``feed(text) -> str`` then ``finish() -> str``; see the module docstring."""

    __slots__ = (
        "_checked",
        "_counts",
        "_gap",
        "_held",
        "_longest",
        "_max",
        "_max_tracked",
        "_min",
        "_saturated",
        "_sentence",
        "_size",
        "looping",
    )

    def __init__(
        self, *, max_repeats: int = 2, min_chars: int = 8, max_tracked: int = 1000
    ) -> None:
        self._max = max_repeats
        self._min = min_chars
        self._max_tracked = max_tracked
        self._counts: dict[str, int] = {}
        self._saturated: list[str] = []  # sentences shown max_repeats times
        self._longest = 0  # length of the longest saturated sentence, with its spaces
        self._sentence = ""  # the sentence being written, shown and held (its end only, once long)
        self._size = 0  # its full length
        self._held = 0  # characters at the end of _sentence not shown yet
        self._gap = ""  # whitespace released, waiting for the text that follows it
        self._checked = 0  # _size at the last phrase-loop check
        self.looping = False

    def feed(self, text: str) -> str:
        """The part of ``text`` that may be shown now ("" once :attr:`looping`)."""
        out: list[str] = []
        start = 0
        for end in _END.finditer(text):
            if self.looping:
                break
            self._add(text[start : end.end()])
            self._end_sentence(out)
            start = end.end()
        if start < len(text) and not self.looping:
            self._add(text[start:])
            self._middle_of_sentence(out)
        return "".join(out)

    def has_shown(self, sentence: str) -> bool:
        """Whether ``sentence`` (compared as the guard compares) was shown whole already."""
        return sentence.strip() in self._counts

    def finish(self) -> str:
        """The held text at a normal end of the stream: dropped when it repeats a sentence
        shown ``max_repeats`` times already (it is the start of one more copy), else shown."""
        if self.looping:
            return ""
        if self._held and self._is_repeat_prefix(self._sentence.strip()):
            return ""
        return self._release(at_end=True)

    def _add(self, piece: str) -> None:
        self._sentence += piece
        self._size += len(piece)
        self._held += len(piece)
        if self._size > self._max_tracked:
            # Too long to be compared: keep what the phrase-loop check reads and what is held.
            self._sentence = self._sentence[-max(_LOOP_WINDOW, self._held) :]

    def _release(self, *, at_end: bool = False) -> str:
        """The held text, to be shown now. Whitespace alone waits for what follows it, except
        at the stream's end: the stream ends as the model ended it."""
        held = self._sentence[len(self._sentence) - self._held :]
        self._held = 0
        if not at_end and not held.strip():
            self._gap += held
            return ""
        shown, self._gap = self._gap + held, ""
        return shown

    def _end_sentence(self, out: list[str]) -> None:
        key = self._sentence.strip()
        if self._size <= self._max_tracked and len(key) >= self._min:
            seen = self._counts.get(key, 0) + 1
            if seen > self._max:
                self.looping = True
                return
            self._counts[key] = seen
            if seen == self._max:
                self._saturated.append(key)
                self._longest = max(self._longest, self._size)
        if self._loops(self._sentence[:-1]):
            return
        out.append(self._release())
        self._sentence, self._size, self._checked = "", 0, 0

    def _middle_of_sentence(self, out: list[str]) -> None:
        if self._saturated and self._size <= self._longest:
            key = self._sentence.strip()
            if key and self._is_repeat_prefix(key):
                return  # hold: this may be one more copy of a saturated sentence
        if self._size - self._checked >= _LOOP_EVERY and self._loops(self._sentence):
            return
        out.append(self._release())

    def _loops(self, sentence: str) -> bool:
        """Check the end of ``sentence`` for a phrase loop; sets :attr:`looping`."""
        self._checked = self._size
        if self._size >= _LOOP_MIN_CHARS and _ends_in_phrase_loop(
            sentence[-_LOOP_WINDOW:].rstrip()
        ):
            self.looping = True
        return self.looping

    def _is_repeat_prefix(self, key: str) -> bool:
        return any(sentence.startswith(key) for sentence in self._saturated)
