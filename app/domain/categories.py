"""The closed vocabularies of SPEC "Enumerations": categories, locations, work types.

A category is accepted as its Korean label or its code (any case, spaces ignored) and is
always answered with both.
"""

from __future__ import annotations

import enum
import unicodedata

__all__ = [
    "CITY",
    "LOCATIONS",
    "OFFICE",
    "PERSONAS",
    "WORK_TYPES",
    "Category",
    "normalize_choice",
    "parse_category",
]


class Category(enum.Enum):
    ZERO_WASTE = "제로웨이스트"
    PLOGGING = "플로깅"
    CARBON_FOOTPRINT = "탄소발자국"
    ENERGY_SAVING = "에너지 절약"
    UPCYCLING = "업사이클"
    MEDIA = "문화 공유"
    DIGITAL_CARBON = "디지털 탄소"
    VEGAN = "비건"

    @property
    def code(self) -> str:
        return self.name

    @property
    def label(self) -> str:
        return self.value


#: The place most challenges are written for (and, with others, tagged for).
CITY = "도시"
LOCATIONS: frozenset[str] = frozenset({CITY, "바닷가", "산", "농촌"})
#: The work type most work told without one is ("회사에서", "사무실에서").
OFFICE = "사무직"
#: The work type of one who works on a site, a factory floor or a field crew.
SITE = "현장직"
#: The work type the catalogue tags a shop's work with ("가게나 매장에서 …", "영업 끝나면 간판
#: 조명 끄기"): a shop's, a stall's, a restaurant's, and a salesperson's on the road.
SALES = "영업직"
#: The key of what is named first for a shop told alone (app/rag/data/situation_firsts.json):
#: a shop's work, not a salesperson's road ("외근길 틈새 플로깅").
SHOP = "가게"
#: The key of what is named first for one who drives for a living, told alone ("택시 운전
#: 10년째", "택배 기사인데", "하루 종일 차 안에 있는 사람"): the catalogue tags no such work.
DRIVING = "운전"
WORK_TYPES: frozenset[str] = frozenset({OFFICE, SITE, SALES, "재택근무"})
#: Who a challenge written for a narrow persona is for, beyond a place lived or a work type:
#: a trade ("fishing": a boat's crew; "construction": a building site's; "trip": one who
#: travels for work), a pastime ("watersports", "climbing"), a household ("pet", "parent",
#: "garden", "dishwasher"). The catalogue's ``persona`` names them as "as:<name>"; a message
#: tells them in words (app/chat/told.py ``personas_told``).
PERSONAS: frozenset[str] = frozenset(
    {
        "fishing",
        "farming",
        "garden",
        "forestry",
        "construction",
        "driver",
        "trip",
        "shop",
        "marketing",
        "it",
        "pet",
        "watersports",
        "climbing",
        "smoker",
        "parent",
        "dishwasher",
    }
)


def _key(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace(" ", "").replace("_", "").upper()


_BY_KEY: dict[str, Category] = {
    **{_key(c.label): c for c in Category},
    **{_key(c.code): c for c in Category},
}


def parse_category(text: str) -> Category | None:
    """The category named exactly by ``text`` (label or code), or None."""
    return _BY_KEY.get(_key(text))


def normalize_choice(text: str, allowed: frozenset[str]) -> str | None:
    """``text`` as one of ``allowed`` (NFKC, surrounding spaces ignored), or None."""
    value = unicodedata.normalize("NFKC", text).strip()
    return value if value in allowed else None
