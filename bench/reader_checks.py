"""What a reader meets in one answer, checked automatically (bench/answer_quality.py).

Each check takes what the chat page received for one turn and returns the problems it finds
(empty: the answer passes it). They read only the stream as a client sees it (the display
text, the ``close`` payload, the terminal event) plus the bundled catalogue, never the
gateway's internals, so they judge any gateway or model the same way.

    close          the stream ends in ``close`` and its display matches the close
    echo           the recommend is not the user's message said back
    repeats        no sentence twice in the answer, no challenge twice
    catalogue      every challenge is a catalogue one; its description is about it; text
                   that resembles catalogue text is the catalogue's exactly (no garbled copy)
    clean          Korean only (no Chinese characters, kana or other scripts, no mixed-script
                   words such as "타FK비실"), no JSON debris, no value cut mid-word
    category       the answer's category is one the turn asks for
    substance      a real recommend (not a refusal), at least one challenge with a real
                   description
    fits           with base-info's location and work type, each challenge fits them
    relation       "more" turns bring challenges not shown before in the session; "among"
                   turns stay within the previous answer's

Thresholds are stated beside each rule; tests/bench/test_reader_checks.py pins each on
fixed strings.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import cache
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "app" / "rag" / "data" / "challenges.jsonl"

CHECKS = (
    "close",
    "echo",
    "repeats",
    "catalogue",
    "clean",
    "category",
    "substance",
    "fits",
    "relation",
)


@dataclass(frozen=True)
class CatalogueDoc:
    id: str
    title: str
    body: str
    category: str
    locations: tuple[str, ...]
    work_types: tuple[str, ...]
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class Catalogue:
    by_title: Mapping[str, CatalogueDoc]
    sentences: tuple[str, ...]  # every catalogue sentence, normalized for comparison

    @classmethod
    def load(cls, path: Path = CORPUS) -> Catalogue:
        docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        by_title = {
            d["title"]: CatalogueDoc(
                d["id"],
                d["title"],
                d["body"],
                d["category"],
                tuple(d.get("locations", ())),
                tuple(d.get("work_types", ())),
                tuple(d.get("keywords", ())),
            )
            for d in docs
        }
        found = {_norm(s) for d in docs for s in split_sentences(d["body"])}
        return cls(by_title, tuple(sorted(s for s in found if len(s) >= 10)))


@cache
def catalogue() -> Catalogue:
    return Catalogue.load()


@dataclass
class Turn:
    """One answer as the client received it, with what the turn asked for."""

    message: str | None  # None for a base-info turn
    display: str  # the concatenated ``challenge`` texts
    terminal: str | None  # "close", "error" or None (the stream just ended)
    status: int | None = None
    close: Mapping[str, Any] | None = None  # the close's ``data``
    categories: Sequence[str] = ()  # acceptable categories (empty: any)
    not_categories: Sequence[str] = ()
    location: str | None = None  # the session's base-info situation, if any
    work_type: str | None = None
    relation: str | None = None  # "new" or "among"
    earlier_titles: Sequence[str] = ()  # every title shown before in the session
    previous_titles: Sequence[str] = ()  # the titles of the answer just before
    problems: dict[str, list[str]] = field(default_factory=dict)

    @property
    def recommend(self) -> str:
        return str((self.close or {}).get("recommend", ""))

    @property
    def challenges(self) -> list[Mapping[str, Any]]:
        return list((self.close or {}).get("challenges", []))


# ------------------------------------------------------------------------- text helpers

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_NOT_WORD = re.compile(r"[^0-9A-Za-z가-힣]+")


def split_sentences(text: str) -> list[str]:
    """Sentences as a reader separates them: after . ! ? … and at line breaks."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def _norm(text: str) -> str:
    """Letters and digits only, NFC: spacing and punctuation do not make two texts differ."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFC", text))


def _ratio(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


def _bigrams(text: str) -> set[str]:
    flat = _norm(text)
    return {flat[i : i + 2] for i in range(len(flat) - 1)}


# ------------------------------------------------------------------------------ checks


def check_close(turn: Turn) -> list[str]:
    if turn.terminal != "close":
        return [f"the stream ended in {turn.terminal or 'nothing'} ({turn.status})"]
    layout = turn.recommend + "".join(
        f"\n\n{c.get('title', '')}\n{c.get('description', '')}" for c in turn.challenges
    )
    if turn.display != layout:
        return ["the display text differs from the close's recommend and challenges"]
    return []


#: A recommend sentence this close to the message (SequenceMatcher on letters only) says it
#: back; so does a whole recommend at 0.6, or one that holds the message whole.
ECHO_SENTENCE_RATIO = 0.75
ECHO_WHOLE_RATIO = 0.6
ECHO_MIN_CHARS = 6


def check_echo(turn: Turn) -> list[str]:
    if not turn.message or turn.terminal != "close":
        return []
    message = _norm(turn.message)
    if len(message) < ECHO_MIN_CHARS:
        return []
    recommend = _norm(turn.recommend)
    if message in recommend:
        return ["the recommend holds the message word for word"]
    if recommend and _ratio(recommend, message) >= ECHO_WHOLE_RATIO:
        return ["the recommend is the message said back"]
    for sentence in split_sentences(turn.recommend):
        flat = _norm(sentence)
        if len(flat) >= ECHO_MIN_CHARS and _ratio(flat, message) >= ECHO_SENTENCE_RATIO:
            return [f"a recommend sentence says the message back: {sentence!r}"]
    return []


#: Two sentences of at least this many letters this alike are the same sentence twice.
REPEAT_MIN_CHARS = 6
REPEAT_RATIO = 0.9


def repeated_sentences(text: str) -> list[str]:
    seen: list[str] = []
    repeated: list[str] = []
    for sentence in split_sentences(text):
        flat = _norm(sentence)
        if len(flat) < REPEAT_MIN_CHARS:
            continue
        if any(flat == other or _ratio(flat, other) >= REPEAT_RATIO for other in seen):
            repeated.append(sentence)
        seen.append(flat)
    return repeated


def check_repeats(turn: Turn) -> list[str]:
    problems = [f"sentence shown twice: {s!r}" for s in repeated_sentences(turn.display)]
    titles = [_norm(str(c.get("title", ""))) for c in turn.challenges]
    doubled = {t for t in titles if titles.count(t) > 1}
    problems += [f"challenge listed twice: {t!r}" for t in sorted(doubled)]
    return problems


#: A sentence at least this close to a catalogue sentence is a copy of it, and must be exact.
COPY_RATIO = 0.6
#: Share of a description's letter pairs found in its challenge's catalogue text (title, body,
#: keywords) below which it is not about that challenge.
ABOUT_MIN_SHARE = 0.25


def _garbled_copies(text: str) -> list[str]:
    found = []
    sentences = catalogue().sentences
    for sentence in split_sentences(text):
        flat = _norm(sentence)
        if len(flat) < 10 or flat in sentences:
            continue
        best = max(
            (
                _ratio(flat, other)
                for other in sentences
                if abs(len(other) - len(flat)) <= len(flat) // 2
            ),
            default=0.0,
        )
        if best >= COPY_RATIO:
            found.append(sentence)
    return found


def check_catalogue(turn: Turn) -> list[str]:
    problems = []
    for item in turn.challenges:
        title = str(item.get("title", ""))
        description = str(item.get("description", ""))
        doc = catalogue().by_title.get(title)
        if doc is None:
            problems.append(f"not a catalogue challenge: {title!r}")
            continue
        own = _bigrams(" ".join((doc.title, doc.body, *doc.keywords)))
        pairs = _bigrams(description)
        if pairs and len(pairs & own) / len(pairs) < ABOUT_MIN_SHARE:
            problems.append(f"the description of {title!r} is not about it")
    problems += [f"catalogue text garbled: {s!r}" for s in _garbled_copies(turn.display)]
    return problems


_FOREIGN = re.compile(
    "["
    "\u0400-\u04ff"  # Cyrillic
    "\u0590-\u06ff"  # Hebrew, Arabic
    "\u0e00-\u0e7f"  # Thai
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Chinese characters
    "\ufffd"  # a replacement character: broken text
    "]"
)
_MIXED_WORD = re.compile(r"[가-힣][A-Za-z]+[가-힣]")
_DEBRIS = re.compile(r'[{}\[\]"\\`]|\b(?:recommend|challenges|title|description|json)\b', re.I)
#: How Korean sentences end: a final ending syllable, or punctuation, or an emoji.
_FINAL = re.compile(r"(?:[다요죠까네자세군래라야]|[.!?~…)]|[\U0001f300-\U0001faff☀-➿])$")


def ends_whole(value: str) -> bool:
    """Whether ``value`` ends where a sentence can end (not cut mid-word by a length bound)."""
    return bool(_FINAL.search(value.rstrip())) if value.strip() else True


def check_clean(turn: Turn) -> list[str]:
    text = turn.display
    problems = []
    if found := sorted(set(_FOREIGN.findall(text))):
        problems.append(f"other scripts: {''.join(found)!r}")
    if found := _MIXED_WORD.findall(text):
        problems.append(f"mixed-script words: {found[:3]}")
    if found := _DEBRIS.findall(text):
        problems.append(f"JSON debris: {sorted(set(found))}")
    values = [turn.recommend] + [str(c.get("description", "")) for c in turn.challenges]
    problems += [f"cut off: ...{v[-12:]!r}" for v in values if not ends_whole(v)]
    return problems


def check_category(turn: Turn) -> list[str]:
    got = {str(c.get("category")) for c in turn.challenges}
    problems = []
    if turn.categories and not got <= set(turn.categories):
        problems.append(f"category {sorted(got)} where the turn asks for {list(turn.categories)}")
    if got & set(turn.not_categories):
        problems.append(f"category {sorted(got)} where the turn asks for another one")
    return problems


_REFUSAL = re.compile(r"죄송|추천하지 않|추천할 수 없|도와드릴 수 없|모르겠|할 수 없습니다")
SUBSTANCE_RECOMMEND_HANGUL = 8
SUBSTANCE_DESCRIPTION_CHARS = 20


def check_substance(turn: Turn) -> list[str]:
    if turn.terminal != "close":
        return []
    problems = []
    if len(re.findall("[가-힣]", turn.recommend)) < SUBSTANCE_RECOMMEND_HANGUL:
        problems.append(f"the recommend says nothing: {turn.recommend!r}")
    if _REFUSAL.search(turn.recommend):
        problems.append(f"the recommend refuses or apologises: {turn.recommend[:60]!r}")
    if not turn.challenges:
        problems.append("no challenge")
    for item in turn.challenges:
        if len(str(item.get("description", "")).strip()) < SUBSTANCE_DESCRIPTION_CHARS:
            problems.append(f"an empty description for {item.get('title')!r}")
    return problems


def check_fits(turn: Turn) -> list[str]:
    if not (turn.location and turn.work_type):
        return []
    problems = []
    for item in turn.challenges:
        doc = catalogue().by_title.get(str(item.get("title", "")))
        if doc is None:
            continue  # reported by check_catalogue
        if turn.location not in doc.locations or turn.work_type not in doc.work_types:
            problems.append(
                f"{doc.title!r} ({'/'.join(doc.locations)}, {'/'.join(doc.work_types)}) does "
                f"not fit {turn.location} / {turn.work_type}"
            )
    return problems


def check_relation(turn: Turn) -> list[str]:
    titles = [str(c.get("title", "")) for c in turn.challenges]
    if turn.relation == "new":
        again = [t for t in titles if t in set(turn.earlier_titles)]
        return [f"shown before in the session: {again}"] if again else []
    if turn.relation == "among":
        outside = [t for t in titles if t not in set(turn.previous_titles)]
        return [f"not among the previous answer's: {outside}"] if outside else []
    return []


_CHECKERS = {
    "close": check_close,
    "echo": check_echo,
    "repeats": check_repeats,
    "catalogue": check_catalogue,
    "clean": check_clean,
    "category": check_category,
    "substance": check_substance,
    "fits": check_fits,
    "relation": check_relation,
}


def judge(turn: Turn, checks: Iterable[str] = CHECKS) -> dict[str, list[str]]:
    """Every check's problems for ``turn`` (also stored on it); an answer passes when all
    are empty. An answer that did not close fails ``close`` alone: nothing else was shown
    as an answer."""
    turn.problems = {name: _CHECKERS[name](turn) for name in checks}
    return turn.problems


def passed(problems: Mapping[str, list[str]]) -> bool:
    return not any(problems.values())
