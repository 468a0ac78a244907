"""Is the model's feedback text fit to send? ``clean(text)`` repairs what is cheap to repair
and says why it refuses the rest.

Kept: complete Korean sentences, at most ``MAX_CHARS`` characters (code points, so an emoji
counts at least once), emoji allowed. Refused: JSON or markup of any kind (braces, brackets,
tags, backticks, headings, bold, tables, list lines), too little Korean, too short.
Repaired: surrounding quotes or whitespace, line breaks (joined), and a text that is too long
or cut off by ``max_tokens`` (shortened to its last complete sentence within the limit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_CHARS", "Verdict", "clean"]

MAX_CHARS = 250
MIN_CHARS = 15
_EMOJI = "\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d"
# A sentence: up to and with its end mark(s) (or a Korean final ending), then its emoji.
_SENTENCE = re.compile(
    rf"[^.!?…~]*?(?:[.!?…~]+|[요다죠까네](?=\s|[{_EMOJI}]|$))[\s{_EMOJI}]*", re.DOTALL
)
_MARKUP = re.compile(r"[{}\[\]<>`#*|\\]|^\s*(?:[-+•]|\d+[.)])\s", re.MULTILINE)
_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_LETTER = re.compile(r"[^\W\d_]")
_QUOTES = "\"'“”‘’「」『』"


@dataclass(frozen=True, slots=True)
class Verdict:
    text: str | None  # the cleaned text, or None when refused
    reason: str  # "ok", "repaired" or why it was refused (for logs and metrics)


def clean(raw: str) -> Verdict:
    text = raw.strip().strip(_QUOTES).strip()
    if _MARKUP.search(text):
        return Verdict(None, "markup")
    text = " ".join(text.split())
    letters = len(_LETTER.findall(text))
    if not letters or len(_HANGUL.findall(text)) < 0.6 * letters:
        return Verdict(None, "not_korean")
    whole = _complete(text)
    if whole is None:
        return Verdict(None, "incomplete")
    if len(whole) < MIN_CHARS:
        return Verdict(None, "too_short")
    return Verdict(whole, "ok" if whole == text else "repaired")


def _complete(text: str) -> str | None:
    """The longest run of whole sentences from the start that fits ``MAX_CHARS``."""
    end = 0
    for match in _SENTENCE.finditer(text):
        if match.start() != end or not match.group().strip():
            break
        if len(text[: match.end()].rstrip()) > MAX_CHARS:
            break
        end = match.end()
    result = text[:end].rstrip()
    return result or None
