"""What a free-text message asks for, decided without the model.

Order of the checks (first match wins):
1. "처음 카테고리로" and friends       -> back to the base-info category
2. "다른 거", "아무거나"                -> another category than the current one
3. a category named by label, code or a common synonym ("비건 챌린지 알려줘")
4. nonsense (no Hangul syllable or Latin word, e.g. "ㅁㄴㅇㄹ") -> off-topic
5. otherwise on-topic; the pipeline may still call it off-topic when it holds no eco word
   and retrieval finds nothing close (see ``has_eco_vocabulary``).
"""

from __future__ import annotations

import enum
import re
import unicodedata
from dataclasses import dataclass

from app.chat.categories import Category

__all__ = [
    "Intent",
    "IntentKind",
    "classify",
    "has_eco_vocabulary",
    "is_off_topic",
    "normalize_message",
]


class IntentKind(enum.Enum):
    ASK = "ask"  # an ordinary question; the category stays (or is inferred)
    SWITCH = "switch"  # the message names a category
    ANOTHER = "another"  # "something else"
    BACK_TO_BASE = "back_to_base"  # "the category I picked first"
    NONSENSE = "nonsense"


@dataclass(frozen=True, slots=True)
class Intent:
    kind: IntentKind
    category: Category | None = None


_BACK = re.compile(
    r"처음\s*(카테고리|분야|주제|선택|거|것)|원래\s*(카테고리|분야|주제|거|것)|처음으로"
)
_ANOTHER = re.compile(
    r"다른\s*(거|것|걸|챌린지|카테고리|분야|주제|추천)|아무거나|아무\s*거나|랜덤|딴\s*거"
)

# Synonyms people type, longest first so "제로 웨이스트" wins over shorter words.
_SYNONYMS: dict[Category, tuple[str, ...]] = {
    Category.ZERO_WASTE: (
        "제로웨이스트",
        "제로 웨이스트",
        "zero waste",
        "쓰레기 줄이",
        "일회용",
        "다회용",
    ),
    Category.PLOGGING: ("플로깅", "줍깅", "plogging", "쓰레기 줍"),
    Category.CARBON_FOOTPRINT: (
        "탄소발자국",
        "탄소 발자국",
        "carbon footprint",
        "대중교통",
        "탄소 배출",
    ),
    Category.ENERGY_SAVING: ("에너지 절약", "에너지절약", "에너지", "전기 절약", "절전", "energy"),
    Category.UPCYCLING: ("업사이클", "업사이클링", "upcycl", "새활용", "리폼"),
    Category.MEDIA: ("문화 공유", "문화공유", "미디어", "media", "다큐", "환경 책", "문화"),
    Category.DIGITAL_CARBON: (
        "디지털 탄소",
        "디지털탄소",
        "디지털",
        "digital",
        "메일함",
        "클라우드",
    ),
    Category.VEGAN: ("비건", "vegan", "채식", "비거니즘", "식물성"),
}
_CODES = {category.code.lower().replace("_", " "): category for category in Category}

_ECO_WORDS = tuple(
    """
    환경 친환경 지구 기후 탄소 쓰레기 플라스틱 재활용 분리수거 챌린지 추천 절약 에코 eco green
    텀블러 장바구니 자전거 걷기 나무 숲 바다 해변 등산 녹색 실천 습관 오염 미세먼지 온실
    전기 고기 채소 중고 빨대 포장 배달 버스 지하철 계단 에어컨 난방 조명 메일 스트리밍 용기
    """.split()
)

_HANGUL_SYLLABLE = re.compile(r"[가-힣]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def normalize_message(text: str) -> str:
    """NFC, control characters removed, whitespace collapsed."""
    text = unicodedata.normalize("NFC", text)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(text.split())


def _named_category(lowered: str) -> Category | None:
    best: tuple[int, Category] | None = None
    for category, words in _SYNONYMS.items():
        for word in words:
            if word in lowered and (best is None or len(word) > best[0]):
                best = (len(word), category)
    for code, category in _CODES.items():
        if code in lowered.replace("_", " ") and (best is None or len(code) > best[0]):
            best = (len(code), category)
    return best[1] if best else None


def classify(message: str) -> Intent:
    lowered = message.lower()
    if _BACK.search(message):
        return Intent(IntentKind.BACK_TO_BASE)
    if _ANOTHER.search(message):
        return Intent(IntentKind.ANOTHER)
    named = _named_category(lowered)
    if named is not None:
        return Intent(IntentKind.SWITCH, named)
    if not _HANGUL_SYLLABLE.search(message) and not _LATIN_WORD.search(message):
        return Intent(IntentKind.NONSENSE)
    return Intent(IntentKind.ASK)


def is_off_topic(intent: Intent, message: str, best_score: float, threshold: float) -> bool:
    """Answer with the friendly "what I can do" text instead of calling the model?

    Nonsense always; an ordinary question when it holds no eco word and nothing in the
    corpus comes close (``best_score``: the best retrieval hit's cosine similarity).
    """
    if intent.kind is IntentKind.NONSENSE:
        return True
    if intent.kind is not IntentKind.ASK:
        return False
    return not has_eco_vocabulary(message) and best_score < threshold


def has_eco_vocabulary(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in _ECO_WORDS)
