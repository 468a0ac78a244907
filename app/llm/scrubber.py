"""Turn the model's streamed JSON answer into display text, piece by piece.

The model answers ``{"recommend": "...", "challenges": [{"title": "...", "description":
"..."}]}``, often inside a fenced code block tagged ``json``, sometimes with prose around it.
One :class:`AnswerScrubber` per stream reads the upstream text as it arrives; ``feed(text)``
returns the display text that is now certain and ``finish()`` returns what was held back plus
the parsed, validated :class:`~app.llm.schema.Answer`.

It is a small incremental JSON parser (a state machine over characters; string contents are
scanned a slice at a time with a precompiled regex), so the work is linear in the characters fed
and nothing is ever re-parsed. The values are built as the parser goes, so ``finish()`` only
validates them with pydantic.

What is shown (SPEC, "Display text"):

* Only string values of ``recommend`` in the top-level object and of ``title`` /
  ``description`` in the objects of the top-level ``challenges`` array. Keys, quotes, braces,
  brackets, colons, commas, fences and every other value (unknown keys, numbers, booleans,
  null, nested arrays and objects) are parsed and never shown.
* Values stream as their characters arrive; a character is held back only while it may still
  be part of an escape (``\\``, ``\\u12``, a high surrogate waiting for its low half) or, outside
  the object, of a fence or its ``json`` tag, or when it is whitespace that may turn out to be
  trailing.

Deliberate choices (they may look like bugs; they are not):

* **Layout and separators.** The display is a list of *blocks* joined by ``"\\n\\n"``: the
  prose before the object (if any), each ``recommend`` value, and each challenge. Inside a
  challenge its shown fields are joined by ``"\\n"`` in the order they arrive (a description
  before its title gives ``description + "\\n" + title``). The first block has no separator.
  A separator is emitted when the opening quote of the value arrives, so an empty value still
  gets its separator; for the usual key order the concatenation of all output is exactly
  ``recommend + "".join("\\n\\n" + title + "\\n" + description ...)``. Values are never
  reordered: streaming does not wait for a later key. A challenge with no shown field adds
  nothing. A repeated key is shown each time it arrives (the answer keeps the last, as ``json``
  does).
* **Prose.** The first ``{`` outside a string starts the JSON object; a ``[`` does not. Text
  before it is prose and is shown, with fences removed (a run of three or more backticks plus an
  immediately following ``json`` tag in any case) and leading/trailing whitespace trimmed; it is
  also returned as :attr:`ScrubResult.prose`. This keeps an answer visible when the model
  ignores the format. Text after the top-level object closes (a closing fence, chatter, a second
  object) is ignored and not shown. A ``{`` in prose always starts JSON: a prose answer that
  holds a brace loses what follows it rather than risk showing keys.
* **Escapes.** All JSON escapes are decoded, also when split across feeds, and a surrogate pair
  is joined even when its halves arrive in different feeds; half a pair is never emitted. A lone
  surrogate (high without low, or low alone) becomes U+FFFD. An unknown escape ``\\c`` shows
  ``c`` (models write ``\\'``); a ``\\u`` not followed by four hex digits becomes U+FFFD and the
  character that broke it is read again as string content (it may be the closing quote). A raw
  control character inside a string is kept. The parsed answer holds the same text as the
  display. At ``finish()``, an escape cut off by the end of the stream is dropped and a pending
  high surrogate becomes U+FFFD.
* **Leniency.** Trailing commas (``[1,]``, ``{"a": 1,}``) are accepted. Any other syntax error
  stops the display for the rest of the stream; ``finish()`` says where it was.
* The input is a ``str`` as an SSE/JSON client decodes it; lone surrogates can only arise from
  ``\\u`` escapes, and those are the ones handled.

What a reader should meet, when the gateway asks for it (all off by default, so that the plain
scrubber is exactly the SPEC's display):

* ``whole_titles``: a challenge's title is shown once it is complete, and a challenge whose title
  repeats one shown earlier in the answer is dropped whole (never shown, not in the answer),
  unless part of it was shown already (a description written before its title).
* ``catalogue`` (title -> description; implies ``whole_titles``): the model picks titles and the
  catalogue says the rest. A complete title is shown with its catalogue description right after
  it, exactly as the catalogue has it; the model's own description, if it writes one, is neither
  shown nor kept; a title the catalogue does not hold drops its challenge.
* ``recommend``: the recommend is the gateway's own text, which the caller shows before the first
  feed: it is the answer's recommend and the first block of the layout, and a recommend the
  model writes anyway is neither shown nor kept.
* ``bounds`` (key -> the value's ``maxLength``): within ``BOUND_MARGIN`` characters of its bound
  a value is shown a sentence at a time, and a value that reaches its bound (the grammar cut it)
  ends at its last sentence end. So a length bound never leaves a word cut in half on screen,
  while a value of usual length streams as it arrives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from app.llm.schema import DISPLAY_KEYS, Answer

__all__ = ["BOUND_MARGIN", "AnswerScrubber", "ScrubResult"]


@dataclass(frozen=True, slots=True)
class ScrubResult:
    """What is left at the end of a stream."""

    #: Display text still held back; emit it before the terminal event.
    tail: str
    #: The validated answer; None when absent, invalid or incomplete.
    answer: Answer | None
    #: A whole top-level JSON object was seen.
    complete: bool
    #: Human-readable reason (English, for logs) when ``answer`` is None.
    error: str | None
    #: Display text that came from outside any JSON object: the prose shown before the object
    #: (all of the answer when the model wrote plain prose), without fences; "" if none.
    prose: str
    #: A JSON object was started; False when the model wrote plain prose only.
    json_started: bool
    #: The stream ended inside a well-formed JSON object (the model ran out of tokens).
    truncated: bool = False


# Parser states. Plain ints (not an Enum) because they are compared on every feed.
_STR: Final = 0  # inside a string (key or value)
_ESC: Final = 1  # inside an escape that the previous feed cut, or an invalid one
_PRE: Final = 2  # prose before the object
_SCALAR: Final = 3  # inside a number or true/false/null
_VALUE: Final = 4  # expecting a value
_AFTER: Final = 5  # after a value: ',' or a closing bracket
_KEY: Final = 6  # expecting a key or '}'
_COLON: Final = 7  # expecting ':'
_POST: Final = 8  # the top-level object closed; the rest is ignored
_ERR: Final = 9  # a syntax error; the rest is ignored
_DONE: Final = 10  # finish() was called

# Container roles: which values inside are shown.
_ROOT: Final = 0
_CHALLENGES: Final = 1
_ITEM: Final = 2
_OTHER: Final = 3

_RECOMMEND: Final = DISPLAY_KEYS[0]
_ITEM_KEYS: Final = frozenset(DISPLAY_KEYS[1:])
_TITLE: Final = DISPLAY_KEYS[1]
_DESCRIPTION: Final = DISPLAY_KEYS[2]

# How a value is shown (``_show``).
_HIDDEN: Final = 0
_SHOWN: Final = 1  # as it arrives
_BOUNDED: Final = 2  # as it arrives while far from its bound, then a sentence at a time
_HELD: Final = 3  # a title, shown once complete

#: Characters before its bound from which a value is shown a sentence at a time.
BOUND_MARGIN: Final = 60
_SENTENCE_ENDS: Final = re.compile(r"[.!?…]+")
_CHALLENGES_KEY: Final = "challenges"

_REPLACEMENT: Final = "\ufffd"
_WS: Final = " \t\n\r"
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES: Final[dict[str, str]] = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
#: The longest run of string content that json.loads can decode on its own: plain characters
#: and complete, valid escapes. It stops at the closing quote, at an escape the feed cut off, or
#: at an invalid escape (those go through the slow path, one character at a time). Written as
#: an "unrolled loop" with possessive quantifiers: several times faster in ``re`` than the plain
#: alternation, and it never backtracks.
_STRING_RUN: Final = re.compile(r'[^"\\]*+(?:\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])[^"\\]*+)*+')
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
#: strict=False: a raw control character inside a string is kept, not an error.
_DECODER: Final = json.JSONDecoder(strict=False)
_NOT_WS: Final = re.compile(r"[^ \t\n\r]")
_WS_QUOTE: Final = re.compile(r'[ \t\n\r]*"')
_COLON_QUOTE: Final = re.compile(r'[ \t\n\r]*:[ \t\n\r]*"')
_COMMA_QUOTE: Final = re.compile(r'[ \t\n\r]*,[ \t\n\r]*"')
_PROSE_STOP: Final = re.compile(r"[`{]")
_SCALAR_STOP: Final = re.compile(r"[ \t\n\r,\]}]")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS: Final[dict[str, Any]] = {"true": True, "false": False, "null": None}
_SCALAR_START: Final = frozenset("-0123456789tfn")
#: The ``json`` tag of a fence, one character class per position (ASCII only, any case).
_JSON_TAG: Final = ("jJ", "sS", "oO", "nN")

_TRUNCATED_WHERE: Final[dict[int, str]] = {
    _STR: "inside a string",
    _ESC: "inside a string escape",
    _SCALAR: "inside a number or literal",
    _VALUE: "where a value was expected",
    _AFTER: "after a value",
    _KEY: "where a key was expected",
    _COLON: "after a key",
}


class AnswerScrubber:
    """Incremental parser of one streamed answer; see the module docstring.

    Use one instance per stream: call :meth:`feed` with each upstream text delta and send what
    it returns, then call :meth:`finish` once.
    """

    __slots__ = (
        "_blocks",
        "_bound",
        "_bounds",
        "_catalogue",
        "_dropped",
        "_error",
        "_esc",
        "_fields",
        "_given_recommend",
        "_held_ws",
        "_high",
        "_is_key",
        "_key",
        "_offset",
        "_parts",
        "_prose_parts",
        "_prose_started",
        "_released",
        "_roles",
        "_root",
        "_scalar",
        "_show",
        "_stack",
        "_state",
        "_tagbuf",
        "_ticks",
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
    ) -> None:
        # what a reader should meet (module docstring)
        self._catalogue = catalogue
        self._whole_titles = whole_titles or catalogue is not None
        self._bounds = dict(bounds or {})
        self._titles: set[str] = set()  # titles shown in this answer
        self._dropped = False  # the current challenge is dropped
        self._bound = 0  # the current value's bound (_BOUNDED)
        self._released = 0  # characters of the current value shown so far (_BOUNDED)
        self._given_recommend = recommend is not None
        self._state: int = _PRE
        self._offset = 0  # characters fed before the current feed (for error positions)
        # strings
        self._parts: list[str] = []  # decoded pieces of the current string
        self._show = _HIDDEN  # how the current string is shown
        self._is_key = False
        self._esc = ""  # characters after the backslash of a pending escape
        self._high = 0  # a high surrogate waiting for its low half
        self._scalar: list[str] = []
        # containers
        self._root: dict[str, Any] = {}
        self._stack: list[dict[str, Any] | list[Any]] = []
        self._roles: list[int] = []
        self._key = ""  # the last key read (the slot of the next value in an object)
        if recommend is not None:
            self._root[_RECOMMEND] = recommend
        # layout
        self._blocks = 0 if recommend is None else 1  # blocks started so far
        self._fields = 0  # fields shown so far in the current challenge
        # prose
        self._ticks = 0  # backticks held (a possible fence)
        self._tagbuf: str | None = None  # a possible ``json`` tag after a fence
        self._held_ws = ""  # whitespace held after prose (dropped if it turns out trailing)
        self._prose_started = False
        self._prose_parts: list[str] = []
        self._error: str | None = None

    # ------------------------------------------------------------------ public

    def feed(self, text: str) -> str:
        """Read the next piece of model output; return the display text now certain."""
        if (
            self._state == _STR
            and self._show <= _SHOWN
            and not self._high
            and '"' not in text
            and "\\" not in text
        ):
            # The common case: more characters of a string, nothing to decode.
            self._offset += len(text)
            self._parts.append(text)
            return text if self._show else ""
        out: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            state = self._state
            if state == _STR:
                i = self._string(text, i, n, out)
            elif state >= _VALUE:
                if state >= _POST:
                    if state == _DONE:
                        raise RuntimeError("AnswerScrubber.feed() called after finish()")
                    break
                i = self._structure(text, i, n, out)
            elif state == _PRE:
                i = self._prose(text, i, n, out)
            elif state == _ESC:
                i = self._escape(text, i, n, out)
            else:
                i = self._scalar_part(text, i, n)
        self._offset += n
        return "".join(out)

    def finish(self) -> ScrubResult:
        """End the stream: release held text, then parse and validate the answer."""
        state = self._state
        if state == _DONE:
            raise RuntimeError("AnswerScrubber.finish() called twice")
        self._state = _DONE
        tail: list[str] = []
        if state == _PRE:
            self._flush_prose(tail)
        elif state == _STR or state == _ESC:
            self._drop_pending_high(tail)
            if self._show and self._roles[-1:] == [_ROOT] and self._key == _RECOMMEND:
                self._root[_RECOMMEND] = self._shown_value()  # cut here: partial() keeps it
        prose = "".join(self._prose_parts)
        answer: Answer | None = None
        error: str | None = None
        complete = state == _POST
        if complete:
            try:
                answer = Answer.model_validate(self._root)
            except ValidationError as exc:
                error = "the JSON answer does not match the schema: " + _describe(exc)
        elif state == _ERR:
            error = self._error
        elif state == _PRE:
            error = "the model output holds no JSON object"
        else:
            error = (
                f"the stream ended {_TRUNCATED_WHERE[state]} before the JSON object was closed "
                f"(truncated; {len(self._stack)} bracket(s) still open)"
            )
        return ScrubResult(
            tail="".join(tail),
            answer=answer,
            complete=complete,
            error=error,
            prose=prose,
            json_started=state != _PRE,
            truncated=state not in (_PRE, _POST, _ERR),
        )

    def partial(self) -> Answer:
        """What the answer holds so far, for closing a stream stopped early: the recommend
        text read so far (also while it is still being read) and the challenges whose title
        and description have both been read. Read-only; ``feed`` may go on, and after
        ``finish`` it gives what the stream ended with."""
        recommend = self._root.get(_RECOMMEND)
        reading_recommend = (
            self._state in (_STR, _ESC)
            and self._show
            and self._roles[-1:] == [_ROOT]
            and self._key == _RECOMMEND
        )
        if reading_recommend:
            recommend = self._shown_value()
        items = self._root.get(_CHALLENGES_KEY)
        complete = [
            {"title": item["title"], "description": item["description"]}
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict)
            and isinstance(item.get("title"), str)
            and isinstance(item.get("description"), str)
        ]
        text = recommend if isinstance(recommend, str) else ""
        return Answer.model_validate({"recommend": text, "challenges": complete})

    # ----------------------------------------------------------------- strings

    def _put(self, piece: str, out: list[str]) -> None:
        self._parts.append(piece)
        if self._show == _SHOWN:
            out.append(piece)
        elif self._show == _BOUNDED:
            self._release(out)

    def _shown_value(self) -> str:
        """What the reader has seen of the current value."""
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

    def _title_done(self, title: str, out: list[str]) -> None:
        """A held title is complete: show it (with its catalogue description), or drop its
        challenge (a repeat, or a title the catalogue does not hold)."""
        if self._dropped:
            return
        description = None if self._catalogue is None else self._catalogue.get(title)
        unwanted = title in self._titles or (self._catalogue is not None and description is None)
        if unwanted and not self._fields:
            self._dropped = True
            return
        self._titles.add(title)
        self._field_separator(out)
        out.append(title)
        item = self._stack[-1]
        assert isinstance(item, dict)
        item[_TITLE] = title
        if description is not None:
            out.append("\n" + description)
            self._fields += 1
            item[_DESCRIPTION] = description

    def _field_separator(self, out: list[str]) -> None:
        if self._fields:
            out.append("\n")
        else:
            if self._blocks:
                out.append("\n\n")
            self._blocks += 1
        self._fields += 1

    def _string(self, text: str, i: int, n: int, out: list[str]) -> int:
        """String contents, a slice at a time. In the usual layout the next string follows
        after ``: `` or ``, ``; those are taken here too, without a trip through feed()."""
        while True:
            if self._high:
                # A high surrogate was decoded last: only an escape may bring its low half.
                if text[i] == "\\":
                    self._state = _ESC
                    self._esc = ""
                    return i + 1
                self._drop_pending_high(out)
            match = _STRING_RUN.match(text, i)
            j = match.end() if match else i
            if j > i:
                piece = text[i:j]
                if "\\" in piece:
                    piece = self._decode(piece, j == n or text[j] == "\\")
                if piece:
                    self._parts.append(piece)
                    if self._show == _SHOWN:
                        out.append(piece)
                    elif self._show == _BOUNDED:
                        self._release(out)
            if j == n:
                return n
            if text[j] != '"':
                # A backslash that starts an escape this feed cut off, or an invalid escape.
                self._state = _ESC
                self._esc = ""
                return j + 1
            parts = self._parts
            value = parts[0] if len(parts) == 1 else "".join(parts)
            if self._is_key:
                self._key = value
                match = _COLON_QUOTE.match(text, j + 1)
                if match is None:
                    self._state = _COLON
                    return j + 1
                self._open_string(False, out)
            else:
                show = self._show
                if show == _HELD:
                    self._title_done(value, out)
                else:
                    if show == _BOUNDED:
                        value = self._bounded_value(value, out)
                    self._attach(value)
                match = _COMMA_QUOTE.match(text, j + 1)
                if match is None or not isinstance(self._stack[-1], dict):
                    self._state = _AFTER
                    return j + 1
                self._open_string(True, out)
            i = match.end()
            if i == n:
                return n

    def _decode(self, piece: str, may_continue: bool) -> str:
        """Decode content that holds only plain characters and complete, valid escapes."""
        if len(piece) == 2:
            return _SIMPLE_ESCAPES[piece[1]]
        decoded: str = _DECODER.raw_decode('"' + piece + '"')[0]
        if "\\u" in piece and _SURROGATE.search(decoded):
            # json.loads has joined every pair it saw; what is left is lone, except a high
            # surrogate at the end whose low half may be in the next escape or the next feed.
            if may_continue and "\ud800" <= decoded[-1] <= "\udbff":
                self._high = ord(decoded[-1])
                decoded = decoded[:-1]
            decoded = _SURROGATE.sub(_REPLACEMENT, decoded)
        return decoded

    def _escape(self, text: str, i: int, n: int, out: list[str]) -> int:
        """The slow path: one escape, one character at a time."""
        esc = self._esc
        while i < n:
            c = text[i]
            if not esc:
                if c == "u":
                    esc = "u"
                    i += 1
                    continue
                self._esc = ""
                self._state = _STR
                self._drop_pending_high(out)
                self._put(_SIMPLE_ESCAPES.get(c, c), out)
                return i + 1
            if c in _HEX:
                esc += c
                i += 1
                if len(esc) == 5:
                    self._esc = ""
                    self._state = _STR
                    self._code_point(int(esc[1:], 16), out)
                    return i
                continue
            # "\u" cut short: invalid. ``c`` is read again as string content.
            self._esc = ""
            self._state = _STR
            self._drop_pending_high(out)
            self._put(_REPLACEMENT, out)
            return i
        self._esc = esc
        return i

    def _drop_pending_high(self, out: list[str]) -> None:
        """A high surrogate whose low half did not come shows as U+FFFD."""
        if self._high:
            self._high = 0
            self._put(_REPLACEMENT, out)

    def _code_point(self, cp: int, out: list[str]) -> None:
        if self._high:
            high = self._high
            self._high = 0
            if 0xDC00 <= cp <= 0xDFFF:
                self._put(chr(0x10000 + ((high - 0xD800) << 10) + (cp - 0xDC00)), out)
                return
            self._put(_REPLACEMENT, out)
        if 0xD800 <= cp <= 0xDBFF:
            self._high = cp
        elif 0xDC00 <= cp <= 0xDFFF:
            self._put(_REPLACEMENT, out)
        else:
            self._put(chr(cp), out)

    def _open_string(self, is_key: bool, out: list[str]) -> None:
        show = _HIDDEN
        if not is_key:
            role = self._roles[-1]
            key = self._key
            if role == _ROOT:
                if key == _RECOMMEND and not self._given_recommend:
                    show = self._shown_as(key)
                    if self._blocks:
                        out.append("\n\n")
                    self._blocks += 1
            elif role == _ITEM and key in _ITEM_KEYS and not self._dropped:
                if key == _TITLE and self._whole_titles:
                    show = _HELD
                elif key == _DESCRIPTION and self._catalogue is not None:
                    show = _HIDDEN  # the catalogue's description is shown instead
                else:
                    show = self._shown_as(key)
                    self._field_separator(out)
        self._show = show
        self._is_key = is_key
        self._parts = []
        self._state = _STR

    def _shown_as(self, key: str) -> int:
        bound = self._bounds.get(key)
        if bound is None:
            return _SHOWN
        self._bound = bound
        self._released = 0
        return _BOUNDED

    # --------------------------------------------------------------- structure

    def _attach(self, value: Any) -> None:
        top = self._stack[-1]
        if isinstance(top, dict):
            key, role = self._key, self._roles[-1]
            if (key == _DESCRIPTION and role == _ITEM and self._catalogue is not None) or (
                key == _RECOMMEND and role == _ROOT and self._given_recommend
            ):
                return  # the catalogue's description, or the gateway's recommend, stands
            top[self._key] = value
        else:
            top.append(value)

    def _open_container(self, container: dict[str, Any] | list[Any]) -> None:
        parent_role = self._roles[-1]
        role = _OTHER
        if isinstance(container, list):
            if parent_role == _ROOT and self._key == _CHALLENGES_KEY:
                role = _CHALLENGES
        elif parent_role == _CHALLENGES:
            role = _ITEM
            self._fields = 0
            self._dropped = False
        self._attach(container)
        self._stack.append(container)
        self._roles.append(role)

    def _close_container(self) -> None:
        self._stack.pop()
        if self._roles.pop() == _ITEM and self._dropped:
            parent = self._stack[-1]
            assert isinstance(parent, list)
            parent.pop()  # the dropped challenge is not part of the answer
            self._dropped = False
        self._state = _AFTER if self._stack else _POST

    def _fail(self, i: int, c: str, expected: str) -> int:
        self._error = (
            f"invalid JSON at character {self._offset + i} of the model output: "
            f"expected {expected}, found {c!r}"
        )
        self._state = _ERR
        return i + 1

    def _structure(self, text: str, i: int, n: int, out: list[str]) -> int:
        """Whitespace and punctuation between values."""
        while i < n:
            c = text[i]
            if c in _WS:
                match = _NOT_WS.search(text, i)
                i = match.start() if match else n
                continue
            state = self._state
            if state == _AFTER:
                in_object = isinstance(self._stack[-1], dict)
                if c == ",":
                    if in_object:
                        # The usual case, ', "key"': open the key at once.
                        match = _WS_QUOTE.match(text, i + 1)
                        if match:
                            self._open_string(True, out)
                            return match.end()
                        self._state = _KEY
                    else:
                        self._state = _VALUE
                elif c == ("}" if in_object else "]"):
                    self._close_container()
                    if self._state == _POST:
                        return i + 1
                else:
                    return self._fail(i, c, "',' or '}'" if in_object else "',' or ']'")
            elif state == _VALUE:
                if c == '"':
                    self._open_string(False, out)
                    return i + 1
                if c == "{":
                    self._open_container({})
                    self._state = _KEY
                elif c == "[":
                    self._open_container([])
                elif c in _SCALAR_START:
                    self._state = _SCALAR
                    return i
                elif c == "]" and isinstance(self._stack[-1], list):
                    self._close_container()  # "[]" or a trailing comma
                else:
                    return self._fail(i, c, "a value")
            elif state == _KEY:
                if c == '"':
                    self._open_string(True, out)
                    return i + 1
                if c != "}":
                    return self._fail(i, c, "a key in double quotes or '}'")
                self._close_container()  # "{}" or a trailing comma
                if self._state == _POST:
                    return i + 1
            elif state == _COLON:
                if c != ":":
                    return self._fail(i, c, "':' after a key")
                # The usual case, ': "value"': open the string at once.
                match = _WS_QUOTE.match(text, i + 1)
                if match:
                    self._open_string(False, out)
                    return match.end()
                self._state = _VALUE
            else:
                return i
            i += 1
        return i

    def _scalar_part(self, text: str, i: int, n: int) -> int:
        match = _SCALAR_STOP.search(text, i)
        if match is None:
            self._scalar.append(text[i:])
            return n
        j = match.start()
        self._scalar.append(text[i:j])
        token = "".join(self._scalar)
        self._scalar = []
        value: Any
        if token in _LITERALS:
            value = _LITERALS[token]
        elif _NUMBER.fullmatch(token):
            try:
                value = int(token) if token.isdigit() or token[1:].isdigit() else float(token)
            except ValueError:  # more digits than int() accepts
                value = float(token)
        else:
            self._fail(j - len(token), token, "a value")
            return j
        self._attach(value)
        self._state = _AFTER
        return j

    # ------------------------------------------------------------------- prose

    def _prose(self, text: str, i: int, n: int, out: list[str]) -> int:
        while i < n:
            if self._tagbuf is not None:
                tag = self._tagbuf
                while i < n and len(tag) < 4 and text[i] in _JSON_TAG[len(tag)]:
                    tag += text[i]
                    i += 1
                if len(tag) == 4:
                    self._tagbuf = None  # "```json": dropped
                    continue
                if i == n:
                    self._tagbuf = tag
                    return n
                self._tagbuf = None
                self._emit_prose(tag, out)  # not a tag after all
                continue
            if self._ticks:
                while i < n and text[i] == "`":
                    self._ticks += 1
                    i += 1
                if i == n:
                    return n
                ticks = self._ticks
                self._ticks = 0
                if ticks >= 3:
                    self._tagbuf = ""  # a fence; a "json" tag may follow
                else:
                    self._emit_prose("`" * ticks, out)
                continue
            match = _PROSE_STOP.search(text, i)
            if match is None:
                self._emit_prose(text[i:], out)
                return n
            j = match.start()
            if j > i:
                self._emit_prose(text[i:j], out)
            if text[j] == "`":
                self._ticks = 1
                i = j + 1
                continue
            # "{": the object begins. Whitespace held before it was layout, not prose.
            self._held_ws = ""
            self._stack.append(self._root)
            self._roles.append(_ROOT)
            self._state = _KEY
            return j + 1
        return i

    def _emit_prose(self, piece: str, out: list[str]) -> None:
        core = piece.rstrip()
        if not core:
            if self._prose_started:
                self._held_ws += piece
            return
        if self._prose_started:
            shown = self._held_ws + core
        else:
            shown = core.lstrip()
            self._prose_started = True
            if self._blocks:  # after the gateway's recommend
                out.append("\n\n")
            self._blocks += 1
        self._held_ws = piece[len(core) :]
        out.append(shown)
        self._prose_parts.append(shown)

    def _flush_prose(self, out: list[str]) -> None:
        if self._tagbuf:
            self._emit_prose(self._tagbuf, out)
        elif 0 < self._ticks < 3:
            self._emit_prose("`" * self._ticks, out)
        self._tagbuf = None
        self._ticks = 0
        self._held_ws = ""


def _describe(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    shown = [
        f"{'.'.join(str(part) for part in error['loc']) or '(answer)'}: {error['msg']}"
        for error in errors[:5]
    ]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(shown) + more
