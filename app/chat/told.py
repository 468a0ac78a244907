"""Who the user is, told in words: the work (an office's, a site's, a shop's, a driver's), the
place one lives in, and who one is as a person ("대학생", "간호사인데").

The examples' vote (app/chat/constraints.py ``FacetReaders``) reads the situation by meaning;
these read what it misses, by the words people use for it: a long message's other clauses
outvote "충청도 시골로 내려온 지 2년 됐어요", and the catalogue's four work types do not name a
shop or a driver (app/rag/data/situation_firsts.json keys them apart). The planner takes a
work type or a place from here only where the vote read none (app/chat/planning.py); a first
ask that says only who asks is told by :func:`tells_who` (app/chat/follow_up.py).
"""

from __future__ import annotations

import re

from app.domain.categories import DRIVING, SHOP

__all__ = [
    "already_done",
    "personas_told",
    "place_lived",
    "says_a_driver",
    "says_a_shop",
    "says_a_site",
    "says_an_office",
    "tells_who",
    "trade_told",
]


#: Work told as an office's ("회사에서", "사무실에서", "직장에서"), not a shop's or a site's.
_OFFICE = re.compile(r"회사|사무실|직장|오피스")


def says_an_office(message: str) -> bool:
    """Whether ``message`` places its work in an office ("회사에서 할 만한 거 있어?")."""
    return _OFFICE.search(message) is not None


#: Work told as a site's, a factory floor's or a crew's ("공장 생산직인데", "건설 현장에서
#: 일해요", "현장 반장인데 우리 팀 작업자들이랑"): the catalogue's 현장직, whatever "회사" the
#: message also says (a factory worker's "회사에서 할 수 있는 거" had been read as an office's,
#: and got "텀블러로 음료 마시기" first). Not a visit ("공장 견학", "현장 체험").
_SITE = re.compile(
    r"(?:생산|현장|기능|노무)직|공장(?!\s*(?:견학|체험))|공사\s*현장|건설|작업자|작업복|작업장"
    r"|현장\s*(?:반장|소장|근무|작업|일|에서\s*(?:일|근무|작업))|(?:반장|조장|소장)(?:인데|이에요|입니다)"
)


def says_a_site(message: str) -> bool:
    """Whether ``message`` tells that its work is on a site or a factory floor (:data:`_SITE`)."""
    return _SITE.search(message) is not None


#: Where the user lives, told in words as a life there ("충청도 시골로 내려온 지 2년 됐어요",
#: "바닷가 근처로 이사 왔어요", "강원도 산골에 살고 있는데", "귀농해서"): the place, then, within
#: a few words, living or moving there. The examples' vote reads the shorter ones; a long
#: message's other clauses outvote its place ("… 시골로 내려온 지 2년 됐어요. 근데 동네
#: 어르신들이 …" was read for no place). Not a visit ("바닷가 놀러 갔는데").
_LIVES = r"[^.?!]{0,10}?(?:살|사는|삽니다|이사|내려오|내려온|내려와|내려갔|이주|정착)"
_PLACES_LIVED = (
    ("농촌", re.compile(r"귀농|귀촌|(?:시골|농촌|농가|읍내|시골\s*마을)" + _LIVES)),
    ("바닷가", re.compile(r"(?:바닷가|바다\s*(?:앞|근처|옆)|해변|해안|어촌|섬에)" + _LIVES)),
    ("산", re.compile(r"(?:산골|산속|산\s*(?:밑|아래|근처|옆|자락)|산간)" + _LIVES)),
)


def place_lived(message: str) -> str | None:
    """The place ``message`` tells the user lives in, in words (:data:`_PLACES_LIVED`); None
    for none. The city is left to the vote: most challenges are written for it too."""
    return next((place for place, said in _PLACES_LIVED if said.search(message)), None)


#: Work told as a shop's: one kept or run ("작은 카페를 하고 있는데", "식당 운영 중인데",
#: "횟집 해요"), trade ("장사하면서"), "우리 가게", "사장", "옷가게 사장인데". Not a shop
#: visited ("카페에서 음료 살 때", "제로웨이스트 가게에서 사기").
_SHOP = re.compile(
    r"장사|사장님?(?![가-힣])|사장(?:인데|이에요|이고|입니다)|(?:우리|제|내)\s*(?:가게|매장|식당)"
    r"|(?:가게|매장|식당|카페|[가-힣]집)\s*사장"
    r"|(?:가게|식당|카페|매장|횟집|음식점|점포|편의점|빵집|꽃집|술집|미용실|상점|분식집)"
    r"\s*(?:을|를|도|은|는|에서)?\s*"
    r"(?:하고|하는|해요|합니다|하는데|하며|운영|차리|차렸|열었|알바|일하|일해|일할)"
)


#: Who the user is, said as a person ("대학생", "직장인", "주부", "간호사인데"): a first ask
#: that says only this and asks for something ("대학생 추천좀") asks for anything, not for
#: something off the topic ("맛집 추천좀").
_WHO = re.compile(
    r"(?:대|고등|중|초등|자취|취준|수험|대학원|유학|신입)생|학생|직장인|회사원|주부|워킹맘|간호사"
    r"|교사|선생님|군인|공무원|프리랜서|자영업|알바생|은퇴|퇴직|농부|어부|해녀|집사|초보\s*엄마"
    # a trade by its name ("택배 기사", "미용사", "요리사로 일해요"), or by driving for a living
    r"|기사(?:님)?(?:인데|예요|이에요|입니다|고|로)|(?:택시|버스|트럭|화물차?)\s*(?:운전|기사|몰)"
    r"|배달\s*(?:일|기사|대행|알바)|라이더|승무원|미용사|요리사|셰프|조리사|약사|상담사"
    r"|개발자|디자이너|엔지니어|작가|기자|강사|경비원|미화원|소방관|경찰관|어민|농민|목수"
    r"|(?:사무|현장|생산|영업|판매|서비스)직"
    # how long in it ("운전 10년째", "자취 2년차")
    r"|[0-9]+\s*년\s*(?:째|차)"
)


def tells_who(message: str) -> bool:
    """Whether ``message`` says who the user is, as a person (:data:`_WHO`)."""
    return _WHO.search(message) is not None


#: Driving told as one's work or day: a driver by trade ("택시 운전", "택배 기사", "트럭
#: 타고 다니고"), a day spent in the car ("하루 종일 차 안에", "운전만 120km씩", "차 끌고
#: 거래처 돌아요"). Not a ride taken ("택시 타고 다니는데"), nor a drive now and then ("운전할
#: 때", "차로 출근해요"), nor any "기사" ("뉴스 기사인데").
_DRIVER = re.compile(
    r"(?:택시|트럭|화물차?|버스|택배|배송|납품|대리)\s*(?:운전|기사|몰)|운전\s*기사"
    r"|트럭\s*(?:을|를)?\s*(?:타고|몰고)\s*다니|개인\s*택시|대리\s*운전"
    r"|하루\s*(?:종일|죙일|온종일|내내)\s*(?:차|운전|트럭)|차\s*안에\s*(?:있|사는|살)"
    r"|운전(?:만|을)?\s*(?:하루|매일)?\s*[0-9]+\s*(?:km|킬로|키로)"
    r"|차\s*(?:를\s*)?(?:끌고|몰고)\s*(?:하루|매일|거래처|현장|돌아|다니)"
)


def says_a_driver(message: str) -> bool:
    """Whether ``message`` tells that the user drives for a living or all day
    (:data:`_DRIVER`)."""
    return _DRIVER.search(message) is not None


def trade_told(message: str) -> str | None:
    """The work ``message`` tells in words that the catalogue's work types do not name, as
    the situation firsts are keyed: a shop's (:func:`says_a_shop`), a driver's
    (:func:`says_a_driver`); None for neither."""
    if says_a_shop(message):
        return SHOP
    if says_a_driver(message):
        return DRIVING
    return None


def says_a_shop(message: str) -> bool:
    """Whether ``message`` tells that its work is a shop's ("동네에서 작은 카페를 하고
    있는데", "장사하면서 실천할 수 있는 거")."""
    return _SHOP.search(message) is not None


#: Who the user is beyond a place or a work, told in words, as the catalogue marks a narrow
#: persona's challenge (app/domain/categories.py ``PERSONAS``): a trade ("배 타는 일을 해요",
#: "사과 농사 짓고 있습니다", "인테리어 현장 다녀요"), a pastime ("주말마다 서핑해요"), a
#: household ("강아지 키워서", "애들 등하교 시키고"). The words are the trade's or the thing's
#: own, not a visit's ("아이랑 농장 체험 갔는데", "목장 견학").
_PERSONAS = {
    "fishing": re.compile(
        r"어선|조업|어부|어민|선장|선원|뱃일|해녀|어업|어촌계|양식장|그물(?!망)|고기\s*(?:를\s*)?잡"
        r"|배\s*(?:를\s*)?(?:타는|타고\s*(?:일|나가|조업)|타면서|타요|탑니다)"
    ),
    "farming": re.compile(
        r"농사|농부|농민|(?:농장|농가|목장|과수원)(?!\s*(?:체험|견학|나들이|구경))|농업|영농|귀농"
        r"|과수|비닐\s*하우스|하우스\s*(?:농사|재배)|밭일|논일|[논밭]\s*(?:농사|일)|작물|축산"
        r"|새참|트랙터|경운기"
    ),
    # a garden of one's own ("마당 있는 집", "텃밭 가꿔요"), not a yard seen ("마당에서 태우시더라")
    "garden": re.compile(
        r"텃밭|화단|주말\s*농장|정원\s*(?:을|에|이|가꾸|있|딸린)|마당\s*(?:이\s*)?(?:있|딸린|넓)"
        r"|(?:우리|제|내)\s*(?:집\s*)?(?:마당|정원)"
    ),
    "forestry": re.compile(r"숲\s*가꾸기|산림|벌목|임업|간벌|표고|버섯\s*(?:농사|재배)"),
    "construction": re.compile(
        r"건설(?!적)|공사\s*현장|시공|인테리어\s*(?:일|현장|업|공사)|목수|철근|미장|배관공|용접"
        r"|전기\s*(?:기사|공사)|노가다|자재"
    ),
    "driver": re.compile(_DRIVER.pattern + r"|트럭|화물차|용달|적재함"),
    "trip": re.compile(r"출장|외근|파견|승무원"),
    "shop": _SHOP,
    "marketing": re.compile(
        r"마케팅|마케터|홍보\s*(?:팀|담당|일)|판촉|전시회|박람회|부스|세미나|컨퍼런스|뉴스레터"
        r"|행사\s*(?:를\s*)?(?:준비|기획|담당|열)"
    ),
    # one who builds or runs the systems, not one who stores files in the cloud
    "it": re.compile(
        r"개발자|개발팀|프로그래머|(?<![A-Za-z])IT\s*(?:회사|업계|기업|팀|쪽|직군)|전산(?:팀|실|직)"
        r"|인프라\s*(?:팀|엔지니어|담당)|서버\s*(?:관리|운영|담당)|데브옵스|개발\s*일"
    ),
    "pet": re.compile(
        r"강아지|반려견|반려\s*동물|댕댕이|멍멍이|견주|개\s*(?:를\s*)?(?:키우|산책)"
        # a dog told by its breed ("말티즈 한 마리 키워요")
        r"|말티즈|푸들|포메|비숑|시츄|진돗개|리트리버|웰시\s*코기|치와와|닥스훈트|시바견"
    ),
    "watersports": re.compile(
        r"카약|SUP|서핑|서퍼|다이빙|스쿠버|스노클링|패들\s*보드|웻\s*슈트|요트|수상\s*스포츠"
    ),
    "climbing": re.compile(r"등산|클라이밍|암벽|산악회"),
    "smoker": re.compile(r"흡연|담배\s*(?:를\s*)?(?:피|펴|태우|끊)|재떨이"),
    "parent": re.compile(
        r"(?<![가-힣])(?:아이|애|애들|아이들|자녀|아들|딸|애기|아기)"
        r"(?:가|를|랑|이랑|와|하고|들|는|도|한테|이|이가|이는|을|이를|둘|셋|\s)"
        r"|육아|등하교|등굣길|유치원|어린이집|학부모"
    ),
    "dishwasher": re.compile(r"식기\s*세척기|식세기"),
}


def personas_told(message: str) -> frozenset[str]:
    """The personas ``message`` tells in words (:data:`_PERSONAS`), labelled as the catalogue
    names them ("as:fishing")."""
    return frozenset(f"as:{name}" for name, said in _PERSONAS.items() if said.search(message))


#: What the user says it already does, as a clause ends ("수저 안 받기는 이미 하고 있어요",
#: "저 이미 버스 타고 다녀요", "자전거로 출퇴근한 지 1년 된 회사원인데", "텀블러는 벌써 쓰고
#: 있어요"): "이미" or "벌써" then a verb of doing ("이미 있는 모임" is no habit), or a verb
#: then how long it has been done ("-ㄴ 지 2년", "-ㄴ 지 오래"). The verb begins a word
#: ("이미 해변에 쓰레기가 많아요" tells no habit). A clause is cut at a punctuation mark or a
#: laugh ("ㅋㅋ", "ㅎㅎ"); not at a connective, as :func:`app.chat.constraints.clauses` is,
#: which reads no message of one clause.
_CLAUSE = re.compile(r"[^,.!?~ㅋㅎ]+")
_ALREADY = re.compile(
    r"(?<![가-힣])(?:이미|벌써)\s(?:.*\s)?"
    r"(?:하고|했|해(?:요|서|\s|$)|쓰고|썼|써(?:요|서|\s|$)|타고|다니|다녀|들고|챙기|챙겨|붙였|먹고"
    r"|안\s*받)"
    r"|[가-힣]\s*지\s*(?:[0-9]+|한|두|세|네|몇|꽤|오래|일)\s*(?:년|달|개월|주|일|됐|되)"
)


def already_done(message: str) -> str:
    """The clauses of ``message`` that tell what the user already does (:data:`_ALREADY`),
    joined; empty when none does. A challenge saying the same is no news to the user
    (app/chat/ranking.py ``rank(done=)``)."""
    return " ".join(
        clause.strip() for clause in _CLAUSE.findall(message) if _ALREADY.search(clause)
    )
