"""Property tests for AnswerScrubber: any answer, any chunking, against a reference parser.

Profiles: ``ci`` (10,000 examples per test; chosen when the environment variable CI is set) and
``dev`` (300 examples, the local default); ``HYPOTHESIS_PROFILE`` names one explicitly. They
are applied to the tests of this module only, so other modules keep their own settings: they are
registered as ``scrubber-ci`` and ``scrubber-dev``, since a profile named ``ci`` would replace
the one Hypothesis loads for every test when CI is set (it did: every property test of the suite
ran 10,000 examples in CI).

Hypothesis spends most of its time per draw, so the strategies draw few, rich values: the
displayed strings come from hypothesis (they are what shrinking should simplify), while the
incidental parts (unknown values, key order, chunk boundaries) come from a drawn seed.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
from typing import Any

import jiter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.llm.schema import Answer
from tests.llm.test_scrubber import KEYS, assert_clean, prose_of, scrub
from tests.support.display import display_of

settings.register_profile(
    "scrubber-ci",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "scrubber-dev",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
profile = settings.get_profile(f"scrubber-{PROFILE}")

REPLACEMENT = "\ufffd"

# ----------------------------------------------------------------- strategies


def token_text(table: list[str], max_size: int) -> st.SearchStrategy[str]:
    """Strings made of table entries, one byte per entry: a single draw for hypothesis (which
    spends its time per draw), and still shrinkable (fewer, earlier entries)."""
    return st.binary(max_size=max_size).map(lambda b: "".join(table[x % len(table)] for x in b))


# Quotes, backslashes, control characters, JSON punctuation, backticks, Korean, emoji.
TRICKY = [
    *'"\\/\n\r\t\b\f\x00\x1f\x7f `{}[]:,\u2028\ufeff',
    *"가나다한글챌린지텀블러 줍기",
    *"🌱🌍☕🏃😀",
    *("recommend", '"title"', "json", "\\u00e9", "\\ud83c", "é", "\u0301", "\U0010ffff"),
]
text_values = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=12),  # any code point but lone surrogates
    token_text(TRICKY, 12),
)
seeds = st.integers(0, 2**32 - 1)


def random_json(rng: random.Random, depth: int = 0) -> Any:
    """An arbitrary JSON value for places that are not shown."""
    kind = rng.randrange(8 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randrange(-(10**20), 10**20)
    if kind == 3:
        return rng.uniform(-1e6, 1e6) * 10 ** rng.randrange(-30, 30)
    if kind in (4, 5):
        return "".join(rng.choices(TRICKY, k=rng.randrange(8)))
    if kind == 6:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(3))]
    keys = [*KEYS, "label", "```json", '"title"']
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randrange(3))}


def shuffled_dict(members: list[tuple[str, Any]], seed: int) -> dict[str, Any]:
    """The members in a random order, sometimes with an unknown key (or a repeated known one,
    where json keeps the last value) that holds a random value."""
    rng = random.Random(seed)
    if rng.random() < 0.5:
        key = rng.choice([*KEYS, "label", "json", "recommend ", "Title", "```json"])
        members = [*members, (key, random_json(rng))]
    rng.shuffle(members)
    return dict(members)


# Mostly strings where the display wants strings; sometimes something else, to be skipped.
shown_values = st.one_of(text_values, text_values, text_values, seeds.map(random.Random)).map(
    lambda v: random_json(v) if isinstance(v, random.Random) else v
)


@st.composite
def challenge_item(draw: st.DrawFn) -> Any:
    shape = draw(seeds)
    if shape % 20 == 0:
        return random_json(random.Random(shape))  # not an object at all
    members = []
    if shape % 10 != 1:
        members.append(("title", draw(shown_values)))
    if shape % 10 != 2:
        members.append(("description", draw(shown_values)))
    return shuffled_dict(members, shape)


challenge_lists = st.lists(challenge_item(), max_size=3)


@st.composite
def answer(draw: st.DrawFn) -> dict[str, Any]:
    shape = draw(seeds)
    members: list[tuple[str, Any]] = []
    if shape % 20 != 1:
        members.append(("recommend", draw(shown_values)))
    if shape % 20 != 2:
        members.append(("challenges", draw(challenge_lists)))
    return shuffled_dict(members, shape)


answers = answer()
INDENTS = [None, None, 0, 2, "\t", " \r\n"]
SEPARATORS = [None, (",", ":"), (" ,", " : ")]


def serialize(obj: Any, fmt: int) -> str:
    """json.dumps in one of 36 styles: ensure_ascii or not, indents, separators."""
    return json.dumps(
        obj,
        ensure_ascii=bool(fmt & 1),
        indent=INDENTS[(fmt >> 1) % 6],
        separators=SEPARATORS[(fmt >> 1) // 6 % 3],
    )


PROSE = [*"`json JSON\n\t ,.:'[]}\u3000", "```", "``", "json", "Json", *TRICKY]
prose_text = token_text(PROSE, 16)
FENCES = ["", "", "```json\n", "```\n", "```JSON", "```json", "````json\n"]
ENDINGS = ["", "\n```", "```\n{}", '\n```\n감사합니다 {"recommend": "x"}']


def chunk(text: str, seed: int) -> list[str]:
    """Split text at random points: one character at a time, a few pieces, or many."""
    rng = random.Random(seed)
    mode = rng.randrange(10)
    if mode == 0 or not text:
        return list(text) or [text]
    count = rng.randrange(1, 4) if mode < 4 else rng.randrange(1, len(text) + 1)
    points = [0, *sorted(rng.randrange(len(text) + 1) for _ in range(count)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(points)]


# Tokens of a raw JSON string body, for the escape policy.
ESCAPE_TOKENS = [
    *("\\" + c for c in '"\\/bfnrt'),  # every simple escape
    *("\\'", "\\q", "\\x", "\\ ", "\\\t"),  # unknown escapes
    *("\\u", "\\u1", "\\u12", "\\u123"),  # "\u" cut short (unless hex digits follow)
    *("\\ud83c\\udf31", "\\uD83C\\uDF0D", "\\u00e9", "\\u0041", "\\u002F"),
    *"가한🌱😀aZ09 \n\t{}[]:,`\x00\u2028",  # raw characters, hex digits included
]


# A quarter of the bytes map to surrogate escapes (boundaries, the halves of 🌱, spread highs
# and lows), a quarter to \\uXXXX of notable code units (an escaped quote and backslash too).
SURROGATE_UNITS = [0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xD83C, 0xDF31, 0xD83D, 0xDE00]
SURROGATE_UNITS += [0xD800 + 37 * k for k in range(28)] + [0xDC00 + 41 * k for k in range(28)]
OTHER_UNITS = [0x0000, 0x001F, 0x0022, 0x005C, 0x002F, 0x0041, 0x007F, 0x00E9, 0x2028, 0xAC00]
OTHER_UNITS += [0xD7A3, 0xD7FF, 0xE000, 0xFEFF, 0xFFFD, 0xFFFF] + [997 * k for k in range(48)]
ESCAPES = [
    *(ESCAPE_TOKENS * 4)[:128],  # half of the bytes
    *(f"\\u{u:04x}" if i % 2 else f"\\u{u:04X}" for i, u in enumerate(SURROGATE_UNITS)),
    *(f"\\u{u:04x}" if i % 2 else f"\\u{u:04X}" for i, u in enumerate(OTHER_UNITS)),
]
assert len(ESCAPES) == 256
raw_bodies = token_text(ESCAPES, 24)


# -------------------------------------------------------------------- oracles

_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_HEX = set("0123456789abcdefABCDEF")


def reference_decode(raw: str) -> str:
    """The escape policy of the module docstring, written plainly over a whole string body."""
    out: list[str] = []
    high = 0

    def code_point(cp: int) -> None:
        nonlocal high
        if high:
            if 0xDC00 <= cp <= 0xDFFF:
                out.append(chr(0x10000 + ((high - 0xD800) << 10) + (cp - 0xDC00)))
                high = 0
                return
            out.append(REPLACEMENT)
            high = 0
        if 0xD800 <= cp <= 0xDBFF:
            high = cp
        elif 0xDC00 <= cp <= 0xDFFF:
            out.append(REPLACEMENT)
        else:
            out.append(chr(cp))

    i = 0
    while i < len(raw):
        if raw[i] != "\\":
            code_point(ord(raw[i]))
            i += 1
        elif raw[i + 1] == "u" and _HEX4.fullmatch(raw, i + 2, i + 6):
            code_point(int(raw[i + 2 : i + 6], 16))
            i += 6
        elif raw[i + 1] == "u":  # cut short: U+FFFD, and whatever stopped it is text again
            code_point(0xFFFD)
            i += 2
            while i < len(raw) and raw[i] in _HEX:
                i += 1
        else:  # a simple escape, or an unknown one that shows its character
            code_point(ord(_SIMPLE.get(raw[i + 1], raw[i + 1])))
            i += 2
    if high:
        out.append(REPLACEMENT)
    return "".join(out)


# ---------------------------------------------------------------------- tests


@profile
@given(
    obj=answers,
    fmt=st.integers(0, 35),
    prose=prose_text,
    fence=st.sampled_from(FENCES),
    ending=st.sampled_from(ENDINGS),
    seed=seeds,
)
def test_display_equals_the_parsed_document(
    obj: dict[str, Any], fmt: int, prose: str, fence: str, ending: str, seed: int
) -> None:
    body = serialize(obj, fmt)
    before = prose.replace("{", "") + fence
    document = before + body + ending

    outputs, result = scrub(chunk(document, seed))

    parsed = jiter.from_json(body.encode())
    expected = display_of(parsed, prose_of(before))
    shown = "".join(outputs)
    assert shown == expected
    assert_clean(outputs, expected)  # no key in quotes, no half of a surrogate pair
    for key in KEYS:
        assert shown.count(f'"{key}"') == expected.count(f'"{key}"')
    assert result.complete
    assert result.prose == prose_of(before)
    try:
        want: Answer | None = Answer.model_validate(parsed)
    except ValueError:
        want = None
    assert result.answer == want
    assert (result.error is None) == (want is not None)

    # The same document cut short: what was shown is a prefix, and there is no answer.
    cut = len(before) + 1 + random.Random(seed).randrange(len(body) - 1)
    outputs, result = scrub(chunk(document[:cut], seed))
    assert expected.startswith("".join(outputs[:-1]))
    assert_clean(outputs, expected)
    assert result.tail in ("", REPLACEMENT)
    assert not result.complete and result.answer is None
    assert result.error is not None and "truncated" in result.error


@profile
@given(raw=raw_bodies, raw_title=raw_bodies, seed=seeds)
def test_escapes_follow_the_documented_policy(raw: str, raw_title: str, seed: int) -> None:
    document = (
        '{"recommend": "' + raw + '", "challenges": [{"title": "' + raw_title + '", '
        '"description": "d"}]}'
    )
    outputs, result = scrub(chunk(document, seed))

    recommend, title = reference_decode(raw), reference_decode(raw_title)
    assert "".join(outputs) == recommend + "\n\n" + title + "\nd"
    assert_clean(outputs, recommend + title)
    assert result.answer == Answer(
        recommend=recommend, challenges=[{"title": title, "description": "d"}]
    )
    try:  # where the body is valid JSON without lone surrogates, json agrees
        strict = json.loads('"' + raw + '"')
        strict.encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return
    assert strict == recommend


@profile
@given(prose=st.one_of(token_text(PROSE, 40), text_values), seed=seeds)
def test_plain_prose_is_shown_without_fences(prose: str, seed: int) -> None:
    prose = prose.replace("{", "")
    outputs, result = scrub(chunk(prose, seed))
    assert "".join(outputs) == prose_of(prose) == result.prose
    assert result.answer is None and not result.complete
    assert result.error == "the model output holds no JSON object"


FRAGMENTS = [
    *'{}[]:," \\\n\t`',
    *('{"', '"}', '": "', '", "', "[{", "}]", "\\u", "\\ud83c", "\\udf31", "\\u00", "d83c"),
    *('"recommend"', '"challenges"', '"title"', '"description"', "```json", "json", "\\n"),
    *("true", "fals", "null", "-1.5e3", "0", "01", "가", "🌱", "é", "\\", '\\"', "\\q"),
]


@profile
@given(text=token_text(FRAGMENTS, 48), seed=seeds)
def test_any_input_is_handled_without_crash_or_lone_surrogate(text: str, seed: int) -> None:
    outputs, result = scrub(chunk(text, seed))
    # Keys may well sit inside string values here: only the surrogate check applies.
    assert_clean(outputs, expected=" ".join(f'"{key}"' for key in KEYS))
    assert (result.answer is None) == (result.error is not None)
    if result.answer is not None:
        assert result.complete
