"""Read the model's streamed JSON answer: its fields as they arrive, or the plain display text.

The model answers ``{"recommend": "...", "challenges": [{"title": "...", "description":
"..."}]}``, often inside a fenced code block tagged ``json``, sometimes with prose around it.
This module parses; what a reader is shown of an answer beyond the SPEC's plain layout is
decided elsewhere (``app/chat/display.py``). One parser per stream, two ways to read it:

* :class:`AnswerScrubber`: the plain display (SPEC, "Display text"). ``feed(text)`` returns the
  display text that is now certain and ``finish()`` returns what was held back plus the parsed,
  validated :class:`~app.llm.schema.Answer`.
* :class:`FieldParser`: the answer's fields as they arrive. ``feed(text)`` returns
  :data:`FieldEvent` values: a shown value :class:`Opened` (which field: the recommend, or a
  challenge's title or description with the challenge's position), its decoded text as ``str``
  pieces, :class:`Closed` when it is complete; :class:`ChallengeStarted` /
  :class:`ChallengeEnded` around each challenge object; :class:`Prose` for text before the
  object. ``finish()`` returns the last events and how the stream ended (:class:`Parsed`), with
  the document as parsed, for a composer to validate what it makes of it (:func:`validate`).

It is a small incremental JSON parser (a state machine over characters; string contents are
scanned a slice at a time with a precompiled regex), so the work is linear in the characters fed
and nothing is ever re-parsed. The values are built as the parser goes, so ``finish()`` only
validates them with pydantic.

What is shown (SPEC, "Display text"):

* Only string values of ``recommend`` in the top-level object and of ``title`` /
  ``description`` in the objects of the top-level ``challenges`` array. Keys, quotes, braces,
  brackets, colons, commas, fences and every other value (unknown keys, numbers, booleans,
  null, nested arrays and objects) are parsed and never shown (nor given as field events).
* Values stream as their characters arrive; a character is held back only while it may still
  be part of an escape (``\\``, ``\\u12``, a high surrogate waiting for its low half) or, outside
  the object, of a fence or its ``json`` tag, or when it is whitespace that may turn out to be
  trailing.

Deliberate choices (they may look like bugs; they are not):

* **Layout and separators** (the plain display). The display is a list of *blocks* joined by
  ``"\\n\\n"``: the prose before the object (if any), each ``recommend`` value, and each
  challenge. Inside a challenge its shown fields are joined by ``"\\n"`` in the order they
  arrive (a description before its title gives ``description + "\\n" + title``). The first
  block has no separator. A separator is emitted when the opening quote of the value arrives
  (that is also when :class:`Opened` comes), so an empty value still gets its separator; for the
  usual key order the concatenation of all output is exactly
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
  high surrogate becomes U+FFFD; a recommend cut off by the end of the stream is kept as read
  (``partial()`` closes a stopped stream with it).
* **Leniency.** Trailing commas (``[1,]``, ``{"a": 1,}``) are accepted. Any other syntax error
  stops the display for the rest of the stream; ``finish()`` says where it was.
* The input is a ``str`` as an SSE/JSON client decodes it; lone surrogates can only arise from
  ``\\u`` escapes, and those are the ones handled.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from pydantic import ValidationError

from app.llm.schema import DISPLAY_KEYS, Answer

__all__ = [
    "AnswerScrubber",
    "ChallengeEnded",
    "ChallengeStarted",
    "Closed",
    "FieldEvent",
    "FieldParser",
    "Opened",
    "Parsed",
    "Prose",
    "ScrubResult",
    "partial_answer",
    "validate",
]


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


@dataclass(frozen=True, slots=True)
class Opened:
    """A shown value began (its opening quote came): the ``recommend`` (``challenge`` is -1), or
    the ``title`` or ``description`` of the challenge at position ``challenge`` of the
    ``challenges`` array. Its text follows as ``str`` pieces, then :class:`Closed`."""

    key: str
    challenge: int


@dataclass(frozen=True, slots=True)
class Closed:
    """The value last opened is complete: all of it, decoded."""

    key: str
    challenge: int
    value: str


@dataclass(frozen=True, slots=True)
class ChallengeStarted:
    """An object at position ``index`` of the top-level ``challenges`` array began."""

    index: int


@dataclass(frozen=True, slots=True)
class ChallengeEnded:
    """The challenge object at position ``index`` closed."""

    index: int


@dataclass(frozen=True, slots=True)
class Prose:
    """Shown text from before the object (fences removed, trimmed as the plain display is)."""

    text: str


#: What :meth:`FieldParser.feed` returns, in order; a ``str`` is decoded text of the value last
#: :class:`Opened`.
FieldEvent: TypeAlias = str | Opened | Closed | ChallengeStarted | ChallengeEnded | Prose


@dataclass(frozen=True, slots=True)
class Parsed:
    """How a stream ended, as parsed (:meth:`FieldParser.finish`)."""

    #: The last events: text held back until the end (a pending surrogate's U+FFFD).
    events: list[FieldEvent]
    #: The top-level object as read (the model's values; {} when none was started).
    document: dict[str, Any]
    #: A whole top-level JSON object was seen (the schema is not checked: see :func:`validate`).
    complete: bool
    #: Why the object is not complete (English, for logs); None when it is.
    error: str | None
    #: As :attr:`ScrubResult.prose`.
    prose: str
    json_started: bool
    truncated: bool

    def result(self, tail: str, document: dict[str, Any]) -> ScrubResult:
        """The stream's :class:`ScrubResult`: ``document`` (the parsed one, or what a reader
        was shown of it) validated when the object was complete."""
        answer, error = validate(document) if self.complete else (None, self.error)
        return ScrubResult(
            tail=tail,
            answer=answer,
            complete=self.complete,
            error=error,
            prose=self.prose,
            json_started=self.json_started,
            truncated=self.truncated,
        )


def validate(document: dict[str, Any]) -> tuple[Answer | None, str | None]:
    """The answer a complete document holds, or None and why not (English, for logs)."""
    try:
        return Answer.model_validate(document), None
    except ValidationError as exc:
        return None, "the JSON answer does not match the schema: " + _describe(exc)


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


class _Parser:
    """The state machine both readers share; subclasses say what a shown value's opening,
    closing, a challenge's edges and prose put into the output (``out``: display text, or
    field events)."""

    __slots__ = (
        "_challenge",
        "_error",
        "_esc",
        "_held_ws",
        "_high",
        "_is_key",
        "_key",
        "_offset",
        "_parts",
        "_prose_parts",
        "_prose_started",
        "_roles",
        "_root",
        "_scalar",
        "_show",
        "_stack",
        "_state",
        "_tagbuf",
        "_ticks",
    )

    def __init__(self) -> None:
        self._state: int = _PRE
        self._offset = 0  # characters fed before the current feed (for error positions)
        # strings
        self._parts: list[str] = []  # decoded pieces of the current string
        self._show = False  # the current string is a shown value
        self._is_key = False
        self._esc = ""  # characters after the backslash of a pending escape
        self._high = 0  # a high surrogate waiting for its low half
        self._scalar: list[str] = []
        # containers
        self._root: dict[str, Any] = {}
        self._stack: list[dict[str, Any] | list[Any]] = []
        self._roles: list[int] = []
        self._key = ""  # the last key read (the slot of the next value in an object)
        self._challenge = -1  # position of the current challenge in its array
        # prose
        self._ticks = 0  # backticks held (a possible fence)
        self._tagbuf: str | None = None  # a possible ``json`` tag after a fence
        self._held_ws = ""  # whitespace held after prose (dropped if it turns out trailing)
        self._prose_started = False
        self._prose_parts: list[str] = []
        self._error: str | None = None

    @property
    def document(self) -> dict[str, Any]:
        """The top-level object as read so far (the model's values); do not change it."""
        return self._root

    # ------------------------------------------------------ what subclasses output

    def _opened(self, key: str, out: list[Any]) -> None:
        """A shown value's opening quote (``key`` names its field)."""
        raise NotImplementedError

    def _closed(self, value: str, out: list[Any]) -> None:
        """The shown value is complete."""

    def _item_started(self, out: list[Any]) -> None:
        """A challenge object began."""

    def _item_ended(self, out: list[Any]) -> None:
        """A challenge object closed."""

    def _prose_out(self, shown: str, out: list[Any]) -> None:
        """A piece of shown prose."""
        raise NotImplementedError

    # -------------------------------------------------------------------- reading

    def _read(self, text: str, out: list[Any]) -> None:
        i = 0
        n = len(text)
        while i < n:
            state = self._state
            if state == _STR:
                i = self._string(text, i, n, out)
            elif state >= _VALUE:
                if state >= _POST:
                    if state == _DONE:
                        raise RuntimeError(f"{type(self).__name__}.feed() called after finish()")
                    break
                i = self._structure(text, i, n, out)
            elif state == _PRE:
                i = self._prose(text, i, n, out)
            elif state == _ESC:
                i = self._escape(text, i, n, out)
            else:
                i = self._scalar_part(text, i, n)
        self._offset += n

    def _end(self, out: list[Any]) -> Parsed:
        """End the stream: release held text; how it ended."""
        state = self._state
        if state == _DONE:
            raise RuntimeError(f"{type(self).__name__}.finish() called twice")
        self._state = _DONE
        if state == _PRE:
            self._flush_prose(out)
        elif state == _STR or state == _ESC:
            self._drop_pending_high(out)
            if self._show and self._roles[-1:] == [_ROOT] and self._key == _RECOMMEND:
                self._root[_RECOMMEND] = "".join(self._parts)  # cut here: partial() keeps it
        error: str | None = None
        if state == _ERR:
            error = self._error
        elif state == _PRE:
            error = "the model output holds no JSON object"
        elif state != _POST:
            error = (
                f"the stream ended {_TRUNCATED_WHERE[state]} before the JSON object was closed "
                f"(truncated; {len(self._stack)} bracket(s) still open)"
            )
        return Parsed(
            events=out,
            document=self._root,
            complete=state == _POST,
            error=error,
            prose="".join(self._prose_parts),
            json_started=state != _PRE,
            truncated=state not in (_PRE, _POST, _ERR),
        )

    # ----------------------------------------------------------------- strings

    def _put(self, piece: str, out: list[Any]) -> None:
        self._parts.append(piece)
        if self._show:
            out.append(piece)

    def _string(self, text: str, i: int, n: int, out: list[Any]) -> int:
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
                    if self._show:
                        out.append(piece)
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
                self._attach(value)
                if self._show:
                    self._closed(value, out)
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

    def _escape(self, text: str, i: int, n: int, out: list[Any]) -> int:
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

    def _drop_pending_high(self, out: list[Any]) -> None:
        """A high surrogate whose low half did not come shows as U+FFFD."""
        if self._high:
            self._high = 0
            self._put(_REPLACEMENT, out)

    def _code_point(self, cp: int, out: list[Any]) -> None:
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

    def _open_string(self, is_key: bool, out: list[Any]) -> None:
        show = False
        if not is_key:
            role = self._roles[-1]
            key = self._key
            if (role == _ROOT and key == _RECOMMEND) or (role == _ITEM and key in _ITEM_KEYS):
                show = True
                self._opened(key, out)
        self._show = show
        self._is_key = is_key
        self._parts = []
        self._state = _STR

    # --------------------------------------------------------------- structure

    def _attach(self, value: Any) -> None:
        top = self._stack[-1]
        if isinstance(top, dict):
            top[self._key] = value
        else:
            top.append(value)

    def _open_container(self, container: dict[str, Any] | list[Any], out: list[Any]) -> None:
        parent_role = self._roles[-1]
        role = _OTHER
        if isinstance(container, list):
            if parent_role == _ROOT and self._key == _CHALLENGES_KEY:
                role = _CHALLENGES
        elif parent_role == _CHALLENGES:
            role = _ITEM
            self._challenge = len(self._stack[-1])
            self._item_started(out)
        self._attach(container)
        self._stack.append(container)
        self._roles.append(role)

    def _close_container(self, out: list[Any]) -> None:
        self._stack.pop()
        if self._roles.pop() == _ITEM:
            self._item_ended(out)
        self._state = _AFTER if self._stack else _POST

    def _fail(self, i: int, c: str, expected: str) -> int:
        self._error = (
            f"invalid JSON at character {self._offset + i} of the model output: "
            f"expected {expected}, found {c!r}"
        )
        self._state = _ERR
        return i + 1

    def _structure(self, text: str, i: int, n: int, out: list[Any]) -> int:
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
                    self._close_container(out)
                    if self._state == _POST:
                        return i + 1
                else:
                    return self._fail(i, c, "',' or '}'" if in_object else "',' or ']'")
            elif state == _VALUE:
                if c == '"':
                    self._open_string(False, out)
                    return i + 1
                if c == "{":
                    self._open_container({}, out)
                    self._state = _KEY
                elif c == "[":
                    self._open_container([], out)
                elif c in _SCALAR_START:
                    self._state = _SCALAR
                    return i
                elif c == "]" and isinstance(self._stack[-1], list):
                    self._close_container(out)  # "[]" or a trailing comma
                else:
                    return self._fail(i, c, "a value")
            elif state == _KEY:
                if c == '"':
                    self._open_string(True, out)
                    return i + 1
                if c != "}":
                    return self._fail(i, c, "a key in double quotes or '}'")
                self._close_container(out)  # "{}" or a trailing comma
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

    def _prose(self, text: str, i: int, n: int, out: list[Any]) -> int:
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

    def _emit_prose(self, piece: str, out: list[Any]) -> None:
        core = piece.rstrip()
        if not core:
            if self._prose_started:
                self._held_ws += piece
            return
        if not self._prose_started:
            shown = core.lstrip()
            self._prose_started = True
        else:
            shown = self._held_ws + core
        self._held_ws = piece[len(core) :]
        self._prose_out(shown, out)
        self._prose_parts.append(shown)

    def _flush_prose(self, out: list[Any]) -> None:
        if self._tagbuf:
            self._emit_prose(self._tagbuf, out)
        elif 0 < self._ticks < 3:
            self._emit_prose("`" * self._ticks, out)
        self._tagbuf = None
        self._ticks = 0
        self._held_ws = ""


class AnswerScrubber(_Parser):
    """The plain display of one streamed answer (SPEC, "Display text"); see the module
    docstring.

    Use one instance per stream: call :meth:`feed` with each upstream text delta and send what
    it returns, then call :meth:`finish` once.
    """

    __slots__ = ("_blocks", "_fields")

    def __init__(self) -> None:
        super().__init__()
        self._blocks = 0  # recommend and challenge blocks started so far
        self._fields = 0  # fields shown so far in the current challenge

    def feed(self, text: str) -> str:
        """Read the next piece of model output; return the display text now certain."""
        if self._state == _STR and not self._high and '"' not in text and "\\" not in text:
            # The common case: more characters of a string, nothing to decode.
            self._offset += len(text)
            self._parts.append(text)
            return text if self._show else ""
        out: list[str] = []
        self._read(text, out)
        return "".join(out)

    def finish(self) -> ScrubResult:
        """End the stream: release held text, then parse and validate the answer."""
        tail: list[str] = []
        end = self._end(tail)
        return end.result("".join(tail), end.document)

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
            recommend = "".join(self._parts)
        return partial_answer(recommend, self._root.get(_CHALLENGES_KEY))

    def _opened(self, key: str, out: list[Any]) -> None:
        if key == _RECOMMEND:
            self._block(out)
        elif self._fields:
            out.append("\n")
            self._fields += 1
        else:
            self._block(out)
            self._fields = 1

    def _block(self, out: list[Any]) -> None:
        if self._blocks or self._prose_started:
            out.append("\n\n")
        self._blocks += 1

    def _item_started(self, out: list[Any]) -> None:
        self._fields = 0

    def _prose_out(self, shown: str, out: list[Any]) -> None:
        out.append(shown)


class FieldParser(_Parser):
    """The fields of one streamed answer as they arrive; see the module docstring.

    Use one instance per stream: call :meth:`feed` with each upstream text delta, then
    :meth:`finish` once.
    """

    __slots__ = ()

    def feed(self, text: str) -> list[FieldEvent]:
        """Read the next piece of model output; return the field events it completes."""
        if self._state == _STR and not self._high and '"' not in text and "\\" not in text:
            # As in AnswerScrubber.feed.
            self._offset += len(text)
            self._parts.append(text)
            return [text] if self._show else []
        out: list[FieldEvent] = []
        self._read(text, out)
        return out

    def finish(self) -> Parsed:
        """End the stream: the last events, and how it ended."""
        return self._end([])

    def _opened(self, key: str, out: list[Any]) -> None:
        out.append(Opened(key, -1 if key == _RECOMMEND else self._challenge))

    def _closed(self, value: str, out: list[Any]) -> None:
        key = self._key
        out.append(Closed(key, -1 if key == _RECOMMEND else self._challenge, value))

    def _item_started(self, out: list[Any]) -> None:
        out.append(ChallengeStarted(self._challenge))

    def _item_ended(self, out: list[Any]) -> None:
        out.append(ChallengeEnded(self._challenge))

    def _prose_out(self, shown: str, out: list[Any]) -> None:
        out.append(Prose(shown))


def partial_answer(recommend: Any, challenges: Any) -> Answer:
    """The answer of a stream stopped early: ``recommend`` if it is text, and the challenges
    whose title and description are both text."""
    complete = [
        {"title": item["title"], "description": item["description"]}
        for item in (challenges if isinstance(challenges, list) else [])
        if isinstance(item, dict)
        and isinstance(item.get("title"), str)
        and isinstance(item.get("description"), str)
    ]
    text = recommend if isinstance(recommend, str) else ""
    return Answer.model_validate({"recommend": text, "challenges": complete})


def _describe(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    shown = [
        f"{'.'.join(str(part) for part in error['loc']) or '(answer)'}: {error['msg']}"
        for error in errors[:5]
    ]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(shown) + more
