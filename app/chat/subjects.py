"""What a request names besides its field: the subject a plain-looking ask is about.

"비건 챌린지 추천해줘" asks for a field and nothing in it: its classic first steps answer it
(app/chat/ranking.py). "에어컨 전기 아끼는 법 알려줘", "아침 식사 비건 챌린지 추천해줘" and
"환경 관련 책이나 영상 챌린지 있어요?" read the same by meaning (the field's words drown the
rest), yet each names something the catalogue has challenges about: air conditioning, breakfast,
books and films. Such an ask is answered by what fits it, not by "대기전력 차단하기".

    message -> without the field's name (app/chat/constraints.py ``field_blanked``)
            -> its words, less the words of asking ("추천해 줘", "뭐부터 하면 돼?") and the
               fields' own words ("쓰레기", "탄소", "줄이는")
            -> those a challenge's title or keywords say too: the subject

The catalogue's words decide what is a subject, so a word no challenge is about ("요즘",
"소개해 줘") never turns a plain ask into a search for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.chat.constraints import field_blanked
from app.rag.corpus import Document

__all__ = ["Subjects"]

_WORD = re.compile(r"[가-힣]+")
#: Words that ask for something or carry no subject, as a whole word with its endings: asking
#: and wanting ("추천해 줘", "알려 줄래", "해 보고 싶어", "뭐부터 하면 돼?"), a count ("하나만"),
#: and what every field is made of ("환경", "챌린지", "습관", "방법").
_ASKING = re.compile(
    r"(?:추천|알려|알리|골라|고르|소개|보여|가르쳐|부탁|하나|한가지|한개|몇|뭐|뭘|무엇|무슨|어떤"
    r"|어떻|어느|아무|해줘|해주|해봐|해보|해볼|해야|하면|하고|하기|하려|할까|할래|할게|볼래|볼게"
    r"|보려|보고|싶|시작|처음|입문|초보|기본|있|없|되|돼|좋|괜찮|궁금|종류|습관|방법|챌린지|활동"
    r"|실천|관련|관심|위한|위해|대한|대해|보호|지구|환경|요즘|혹시|그냥|한번|같은|생겼)\w*"
    r"|줘|줘요|주세요|주라|줄|줄래|줄래요|주실래요|해|해요|해서|해도|하는|할|한|수|것|거|게|건|걸"
    r"|법|팁|요|나|저|제가|내가|난|좀|때"
)
#: What the fields are made of: a field described, not a subject in it ("쓰레기 줍는 챌린지",
#: "탄소 배출 줄이는", "일회용품 안 쓰는", "재활용품으로 뭐 만드는", "고기 줄이는 비건").
_FIELD_STUFF = re.compile(
    r"(?:쓰레기|탄소|배출|줄이|줄여|줄일|아끼|아껴|아낄|절약|전기|에너지|일회용|플라스틱|줍|만들"
    r"|만드|버리|버린|재활용|업사이클|캠페인|콘텐츠|미디어|문화|공유|디지털|비건|채식|고기|친환경"
    r"|제로|웨이스트|플로깅|안|쓰는|보는|하는)\w*"
)

#: What follows a one-syllable noun ("옷은", "책이나", "물로").
_PARTICLE = re.compile(r"이나|나|은|는|이|가|을|를|도|만|으로|로|에|에서|과|와|이랑|랑|하고")


class Subjects:
    """The words the catalogue's challenges are about: their titles' and keywords'."""

    def __init__(self, documents: Iterable[Document]) -> None:
        words: set[str] = set()
        for document in documents:
            for text in (document.title, *document.keywords):
                words.update(_WORD.findall(text))
        self._words = frozenset(words)
        # By their first two syllables: a message's word meets a title's when one begins the
        # other ("에어컨" and "에어컨은", "세탁할" and "세탁").
        self._by_start: dict[str, set[str]] = {}
        for word in words:
            if len(word) >= 2:
                self._by_start.setdefault(word[:2], set()).add(word)

    def named_in(self, message: str) -> tuple[str, ...]:
        """The words of ``message`` that name a subject some challenge is about, in order."""
        named: list[str] = []
        for word in _WORD.findall(field_blanked(message)):
            if _ASKING.fullmatch(word) or _FIELD_STUFF.fullmatch(word) or _PARTICLE.fullmatch(word):
                continue  # ("탄소발자국 챌린지는": "는" is left of the field's name)
            if self._known(word):
                named.append(word)
        return tuple(named)

    def _known(self, word: str) -> bool:
        if word[0] in self._words and (len(word) == 1 or _PARTICLE.fullmatch(word[1:])):
            return True  # "옷", "책이나": a one-syllable word of a title, with its particle
        if len(word) < 2:
            return False
        # A verb's stem as it ends before "-ㄹ 때", "-ㄴ": "장볼" is "장보(기)".
        stem = word[:-1] + _without_final(word[-1])
        return any(
            form.startswith(known) or known.startswith(form)
            for form in dict.fromkeys((word, stem))
            for known in self._by_start.get(form[:2], ())
        )


def _without_final(syllable: str) -> str:
    """A Hangul syllable without its final consonant ("볼" → "보")."""
    code = ord(syllable) - 0xAC00
    if not 0 <= code < 11172:
        return syllable
    return chr(ord(syllable) - code % 28)
