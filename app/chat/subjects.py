"""What a request names besides its field: the subject a plain-looking ask is about.

"비건 챌린지 추천해줘" asks for a field and nothing in it: its classic first steps answer it
(app/chat/ranking.py). "에어컨 전기 아끼는 법 알려줘", "아침 식사 비건 챌린지 추천해줘" and
"환경 관련 책이나 영상 챌린지 있어요?" read the same by meaning (the field's words drown the
rest), yet each names something the catalogue has challenges about: air conditioning, breakfast,
books and films. Such an ask is answered by what fits it, not by "대기전력 차단하기".

    message -> without the field's name (app/chat/constraints.py ``field_blanked``)
            -> its words, less the words of asking ("추천해 줘", "뭐부터 하면 돼?") and the
               fields' own words ("쓰레기", "탄소", "줄이는")
            -> those a challenge's keywords say too: the subject

The same words tell a question of the challenges just shown from one beyond them ("화질
낮추면 탄소가 줄어?" after air-conditioning tips): ``unsaid`` is what none of them, nor their
field, says, and ``fields_of`` the fields whose keywords say it (app/chat/follow_up.py
``beyond_what_was_shown``).

The catalogue's words decide what is a subject, so a word no challenge is about ("요즘",
"소개해 줘") never turns a plain ask into a search for it. Where and with whom ("집에서",
"동료들이랑") are the facets' to read (app/chat/constraints.py), not subjects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.chat.constraints import cue_spans, cued, field_blanked, ordinal_blanked
from app.domain.categories import Category
from app.rag.corpus import Document

__all__ = ["Subjects", "names_a_field", "words_of_its_own"]

_WORD = re.compile(r"[가-힣]+")
#: Words that ask for something or carry no subject, as a whole word with its endings: asking
#: and wanting ("추천해 줘", "알려 줄래", "해 보고 싶어", "뭐부터 하면 돼?"), a count ("하나만"),
#: and what every field is made of ("환경", "챌린지", "습관", "방법").
_ASKING = re.compile(
    r"(?:추천|알려|알리|골라|고르|소개|보여|가르쳐|부탁|하나|한가지|한개|몇|뭐|뭘|무엇|무슨|어떤"
    r"|어떻|어느|아무|해줘|해주|해봐|해보|해볼|해야|하면|하고|하기|하려|할까|할래|할게|볼래|볼게"
    r"|보려|보고|싶|시작|처음|입문|초보|기본|있|없|되|돼|좋|괜찮|궁금|종류|습관|방법|챌린지|활동"
    r"|실천|관련|관심|위한|위해|대한|대해|보호|지구|환경|요즘|혹시|그냥|한번|같은|생겼)\w*"
    r"|줘|줘요|주세요|주라|줄|줄래|줄래요|주실래요|해|해요|해서|해도|하는|할|한|수"
    r"|(?:것|거|게|건|걸)(?:부터|만|도|나|로|는|를|은|이|가)?"  # "쉬운 거부터"
    r"|법|팁|요|나|저|제가|내가|난|좀|때|생활\w*"  # "친환경 생활", "생활 속 실천"
    # a count, a time, a change: "몇 개만 더", "짬 날 때", "다시", "바꿔서", "주말에", "전체가"
    r"|(?:개|가지|번|날|일|다시|새로|바꿔|바꾸|보자|주로|전체|단체|시간|주말|평일|오늘|내일)\w*"
)
#: What a field is about, said in words: its matter ("쓰레기", "전기", "고기"), its own names
#: ("플로깅", "캠페인") and what it does with them ("줍", "만들", "아끼").
_MATTER = (
    r"쓰레기|탄소|배출|전기|에너지|일회용|플라스틱|재활용|업사이클|디지털|비건|채식|고기|제로"
    r"|웨이스트|플로깅|식단|줍|만들|만드|캠페인|미디어|절약|아끼|아껴|아낄"
)
#: What the fields are made of: a field described, not a subject in it ("쓰레기 줍는 챌린지",
#: "탄소 배출 줄이는", "일회용품 안 쓰는", "재활용품으로 뭐 만드는", "고기 줄이는 비건").
_FIELD_STUFF = re.compile(
    rf"(?:{_MATTER}|줄이|줄여|줄일|버리|버린|콘텐츠|문화|공유|친환경|안|쓰는|보는|하는)\w*"
)
#: What one field is about ("전기세", "쓰레기가", "난방비", "만들어"): a message saying it asks
#: within that field (not the words of doing, "하는", "쓰는", that every field shares).
_FIELD_MATTER = re.compile(rf"(?:{_MATTER}|난방|냉방|절전)\w*")


def names_a_field(message: str) -> bool:
    """Whether ``message`` says, in words, what one field is about (or calls it by a name of
    its own: "줍깅", "캠페인"); "환경", "친환경" are every field's."""
    return any(_FIELD_MATTER.search(word) for word in _WORD.findall(message))  # "환경캠페인"


def words_of_its_own(message: str) -> tuple[str, ...]:
    """The words of ``message`` that are neither asking, nor a field's name or its stuff,
    nor a particle, nor an ordinal pointing at one shown ("두 번째 거"): what it says of its
    own, catalogue's word or not ("음쓰가", "썩혀서", "간호사예요"). "추천 좀 해줘" and "환경
    챌린지는 어떤 종류가 있어?" say none."""
    return tuple(
        word
        for word in _WORD.findall(ordinal_blanked(field_blanked(message)))
        if not (_ASKING.fullmatch(word) or _FIELD_STUFF.fullmatch(word))
        and not _PARTICLE.fullmatch(word)
    )


#: What follows a one-syllable noun ("옷은", "책이나", "물로").
_PARTICLE = re.compile(r"이나|나|은|는|이|가|을|를|도|만|으로|로|에|에서|과|와|이랑|랑|하고")

#: A word of two syllables at least, then a particle ("장갑은", "에어컨을", "카페에서").
_ENDS_IN_PARTICLE = re.compile(r"([가-힣]{2,}?)(?:" + _PARTICLE.pattern + ")")


class _Words:
    """A set of words, met by a message's word as :meth:`meets` says."""

    def __init__(self, words: Iterable[str] = ()) -> None:
        self._words: set[str] = set()
        self._by_start: dict[str, set[str]] = {}  # by their first two syllables
        self.update(words)

    def update(self, words: Iterable[str]) -> None:
        for word in words:
            self._words.add(word)
            if len(word) >= 2:
                self._by_start.setdefault(word[:2], set()).add(word)

    def meets(self, word: str) -> bool:
        """Whether one of the words is ``word``, or begins it or is begun by it (two syllables
        at least; its stem and its form without a particle too: "장볼" and "장보기", "장갑은"
        and "장갑을"), or is a one-syllable word of it with a particle ("책이나": "책")."""
        return bool(self.met_by(word))

    def met_by(self, word: str) -> set[str]:
        """The words ``word`` meets (:meth:`meets`)."""
        met = {word} & self._words
        if word[0] in self._words and _PARTICLE.fullmatch(word[1:]):
            met.add(word[0])
        for form in _forms(word):
            met.update(
                known
                for known in self._by_start.get(form[:2], ())
                if form.startswith(known) or known.startswith(form)
            )
        return met

    def holds_a_part_of(self, word: str) -> bool:
        """Whether a word of two syllables at least lies inside ``word`` ("목장갑이면":
        "장갑")."""
        return any(
            word[start:end] in self._words
            for start in range(len(word) - 1)
            for end in range(start + 2, len(word) + 1)
        )


class Subjects:
    """The words the catalogue's challenges are about: their keywords' (what each is about,
    authored; a title's words also say what to do, "보자", "더", "바꿔")."""

    def __init__(self, documents: Iterable[Document]) -> None:
        self._about = _Words()
        self._fields: dict[str, set[Category]] = {}  # a keyword's word: its fields
        self._said_in: dict[Category, _Words] = {}  # every word a field's challenges say
        for document in documents:
            for text in document.keywords:
                for word in _WORD.findall(text):
                    self._about.update((word,))
                    self._fields.setdefault(word, set()).add(document.category)
            self._said_in.setdefault(document.category, _Words()).update(_said(document))

    def named_in(self, message: str) -> tuple[str, ...]:
        """The words of ``message`` that name a subject some challenge is about, in order."""
        # ("탄소발자국 챌린지는": "는" is left of the field's name, a particle)
        return tuple(word for word in words_of_its_own(message) if self._about.meets(word))

    def beyond_constraints(self, message: str) -> tuple[str, ...]:
        """The subjects ``message`` names (:meth:`named_in`) that are not the words of a
        constraint it says (app/chat/constraints.py ``cued``, alone or where the message
        says one: "거의 집에 있어요"): "외근" and "지하철" say where one is, not what a
        challenge is about."""
        spans = cue_spans(message)

        def in_a_cue(word: str) -> bool:
            at = message.find(word)
            return any(start <= at < end for start, end in spans)

        return tuple(
            word for word in self.named_in(message) if not cued(word) and not in_a_cue(word)
        )

    def titled(self, words: Iterable[str], documents: Iterable[Document]) -> set[str]:
        """The ids of ``documents`` whose titles say one of ``words`` (as :meth:`named_in` reads
        a message's: "콩으로" is said by "두부와 콩으로 단백질 채우기")."""
        wanted = tuple(words)
        return {
            document.id
            for document in documents
            if wanted and any(_Words(_WORD.findall(document.title)).meets(w) for w in wanted)
        }

    def names_only_constraints(self, message: str) -> bool:
        """Whether ``message`` names no field by what it is about (:func:`names_a_field`) and
        no subject but the words of its constraints (:meth:`beyond_constraints`): "외근 다니는
        길에 틈틈이 할 수 있는 걸로" says where, not what."""
        return not names_a_field(message) and not self.beyond_constraints(message)

    def unsaid(
        self, message: str, documents: Iterable[Document], field: Category | None = None
    ) -> tuple[str, ...]:
        """The subjects ``message`` names (:meth:`named_in`) that none of ``documents`` says,
        nor any challenge of ``field``, in its title, keywords, text or asks: "화질" of "화질
        낮추면 탄소가 줄어?" after air-conditioning tips ("장갑" after plogging ones is said by
        other plogging challenges: a question of them). A compound says its parts: "목장갑이면"
        is said where "장갑을" is."""
        said = [_words_of(documents), *((self._said_in[field],) if field in self._said_in else ())]
        return tuple(
            word
            for word in self.named_in(message)
            if not any(words.meets(word) or words.holds_a_part_of(word) for words in said)
        )

    def said_by(self, message: str, documents: Iterable[Document]) -> tuple[str, ...]:
        """The subjects ``message`` names (:meth:`named_in`) that one of ``documents`` says
        (its title, keywords, text or asks): "망주머니는" of "망주머니는 다이소에서 팔아요?"
        after "채소는 속비닐 대신 망주머니에"."""
        shown = _words_of(documents)
        return tuple(word for word in self.named_in(message) if shown.meets(word))

    def fields_of(self, words: Iterable[str]) -> frozenset[Category]:
        """The fields whose challenges' keywords say one of ``words``."""
        return frozenset(
            field
            for word in words
            for known in self._about.met_by(word)
            for field in self._fields[known]
        )


def _words_of(documents: Iterable[Document]) -> _Words:
    """Every word the ``documents`` say (:func:`_said`)."""
    words = _Words()
    for document in documents:
        words.update(_said(document))
    return words


def _said(document: Document) -> set[str]:
    """Every word of the challenge's title, keywords, text and asks, and each without its
    particle ("장갑을": "장갑")."""
    texts = (document.title, *document.keywords, document.body, *document.asks)
    words = set(_WORD.findall(" ".join(texts)))
    return words | {bare.group(1) for word in words if (bare := _ENDS_IN_PARTICLE.fullmatch(word))}


def _forms(word: str) -> tuple[str, ...]:
    """The forms of a word of two syllables at least that another may begin or be begun by:
    itself, without its particle ("장갑은": "장갑"), and its stem as a verb ends before "-ㄹ
    때" ("장볼": "장보")."""
    if len(word) < 2:
        return ()
    forms = [word, word[:-1] + _without_final(word[-1])]
    if bare := _ENDS_IN_PARTICLE.fullmatch(word):
        forms.append(bare.group(1))
    return tuple(dict.fromkeys(forms))


def _without_final(syllable: str) -> str:
    """A Hangul syllable without its final consonant ("볼" → "보")."""
    code = ord(syllable) - 0xAC00
    if not 0 <= code < 11172:
        return syllable
    return chr(ord(syllable) - code % 28)
