"""What a request names besides its field (app/chat/subjects.py), by the bundled catalogue's
words."""

from __future__ import annotations

import pytest

from app.chat.subjects import Subjects, names_a_field
from app.domain.categories import Category
from app.rag.corpus import Document, load_corpus
from tests.support.store import CORPUS


@pytest.fixture(scope="module")
def subjects() -> Subjects:
    return Subjects(load_corpus(CORPUS))


@pytest.mark.parametrize(
    "message",
    [
        "비건 챌린지 추천해줘",
        "제로웨이스트 해보고싶은데 하나 알려주세요",
        "에너지절약 뭐부터 해야돼?",
        "탄소발자국 챌린지는 어떤 게 있을까?",  # "는" is left of the field's name
        "쓰레기 줍는 챌린지 하나 해 보고 싶어",  # the field described, not a subject in it
        "고기 줄이는 비건 챌린지",
        "요즘 환경에 관심이 생겼어",
        "환경 챌린지 소개해 줄래?",
        "친환경 생활 시작하려고 하는데 추천 좀 해줄래?",
        "제로웨이스트 처음인데 쉬운 거부터 알려줘",
        "비건 식단 시작하기 좋은 챌린지",
        # A follow-up's counts, times and changes are no subject, though titles say them.
        "고마워! 비슷한 거 몇 개 더 있을까?",
        "이번엔 아예 다른 분야로 가 보자",
        "그중에 짬 날 때 잠깐 해치울 수 있는 거 하나만",
        # An ordinal points at one shown: its "두" is no subject (it had met "두부", and the
        # one pointed at, which does not say it, was not answered how to do it).
        "두 번째 거 어떻게 해?",
    ],
)
def test_a_plain_ask_names_no_subject(subjects: Subjects, message: str) -> None:
    assert subjects.named_in(message) == ()


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ("에어컨 전기 아끼는 법 알려줘", ("에어컨",)),
        ("아침 식사 비건 챌린지 추천해줘", ("아침", "식사")),
        ("환경 관련 책이나 영상 챌린지 있어요?", ("책이나", "영상")),  # one syllable, a particle
        ("장볼 때 쓰레기 줄이는 챌린지 추천해 줘", ("장볼",)),  # "장보기": a verb's stem
        ("헌 티셔츠 업사이클링 추천해줘", ("티셔츠",)),
    ],
)
def test_a_subject_a_challenge_is_about_is_named(
    subjects: Subjects, message: str, named: tuple[str, ...]
) -> None:
    assert subjects.named_in(message) == named


def test_a_word_no_challenge_is_about_is_no_subject(subjects: Subjects) -> None:
    # No title or keyword says "넷플릭스": the ask stays plain rather than search for it.
    assert subjects.named_in("넷플릭스 볼 때 디지털 탄소 줄이는 법") == ()


def test_what_none_shown_nor_their_field_says_is_unsaid(subjects: Subjects) -> None:
    documents = {document.id: document for document in load_corpus(CORPUS)}
    energy = [documents["es-001"], documents["es-002"]]  # standby power, heating and cooling
    asked = "화질 낮추면 탄소가 줄어?"
    assert subjects.unsaid(asked, energy, Category.ENERGY_SAVING) == ("화질",)
    assert Category.DIGITAL_CARBON in subjects.fields_of(("화질",))
    # A compound says its part: other plogging challenges say "장갑".
    plogging = [documents["pl-003"]]
    assert subjects.unsaid("장갑은 목장갑이면 되나요", plogging, Category.PLOGGING) == ()
    # What the field says is no other subject: energy challenges say the refrigerator.
    assert subjects.unsaid("냉장고 플러그도 뽑아야 하나요?", energy, Category.ENERGY_SAVING) == ()


def test_what_one_shown_says_is_said_by_them(subjects: Subjects) -> None:
    documents = {document.id: document for document in load_corpus(CORPUS)}
    net_bags = [documents["zw-048"]]  # "채소는 속비닐 대신 망주머니에"
    assert subjects.said_by("망주머니는 다이소에서 팔아요?", net_bags) == ("망주머니는",)
    assert subjects.said_by("화질 낮추면 탄소가 줄어?", net_bags) == ()


def test_the_titles_saying_what_is_wanted_are_found(subjects: Subjects) -> None:
    # "두부 말고 콩으로 먹을 만한 것도 있어?": "콩으로" is said by a title's "콩으로", by a
    # one-syllable word and its particle, not by a title without it.
    documents = {document.id: document for document in load_corpus(CORPUS)}
    tofu = documents["vg-010"]  # "두부와 콩으로 단백질 채우기"
    okara = documents["vg-048"]  # "두부 만들고 남은 비지로 찌개 끓이기"
    assert "콩" in tofu.title and "콩" not in okara.title
    assert subjects.titled(("콩으로",), (tofu, okara)) == {"vg-010"}
    assert subjects.titled((), (tofu, okara)) == set()


def test_the_words_of_a_constraint_are_no_subject_beyond_it(subjects: Subjects) -> None:
    # "외근", "출퇴근", "지하철" say where one is (app/chat/constraints.py ``cued``).
    assert subjects.beyond_constraints("외근 다니는 길에 틈틈이 할 수 있는 걸로") == ()
    assert subjects.beyond_constraints("출퇴근 지하철 안에서 틈틈이 할 수 있는 건 없어?") == ()
    assert subjects.beyond_constraints("상자 말고도 집에서 혼자 만들 만한 거 있을까?") == ("상자",)
    # A word inside a constraint the message says ("거의 집에 있어요": at home) is no subject.
    assert subjects.beyond_constraints("취준생이라 거의 집에 있어요. 혼자 할 수 있는 걸로요") == ()


@pytest.mark.anyio
async def test_a_choice_among_is_about_something_else_when_none_shown_says_it(
    subjects: Subjects,
) -> None:
    """app/chat/follow_up.py ``about_something_else``: a question of what none shown nor
    their field says goes to the field whose keywords say it (the best-fitting of them); a
    request about a subject, to the current field when its keywords say it; a pointer or no
    subject, nowhere."""
    from app.chat.follow_up import about_something_else
    from app.chat.sessions import SessionState, Turn

    documents = {document.id: document for document in load_corpus(CORPUS)}
    energy = (documents["es-001"], documents["es-002"])
    turn = Turn("…", "{}", Category.ENERGY_SAVING, ("es-001", "es-002"))
    state = SessionState("s", category=Category.ENERGY_SAVING, turns=(turn,))

    async def shown() -> tuple[Document, ...]:
        return energy

    def fitting() -> list[Category]:
        return [Category.CARBON_FOOTPRINT, Category.DIGITAL_CARBON]

    async def about(message: str) -> tuple[bool, Category | None]:
        return await about_something_else(message, state, subjects, shown, fitting)

    assert await about("화질 낮추면 탄소가 줄어?") == (True, Category.DIGITAL_CARBON)
    assert await about("에어컨 관련된 것도 있어?") == (True, Category.ENERGY_SAVING)
    assert await about("그 에어컨은 몇 도로 맞춰?") == (False, None)  # points at one shown
    assert await about("이건 얼마나 걸려?") == (False, None)  # names no subject


def test_a_request_whose_best_fitting_challenges_lie_in_another_field_goes_there() -> None:
    """app/chat/follow_up.py ``asked_elsewhere``: "헌 옷으로 뭐 만드는 챌린지도 있어?" read as an
    ask in zero waste, its best-fitting challenges all upcycling's, asks for upcycling; one
    whose best-fitting challenges are split, or in the current field, stays."""
    from app.chat.follow_up import ELSEWHERE_AGREE, asked_elsewhere
    from app.chat.intent import Intent, IntentKind
    from app.chat.sessions import SessionState

    state = SessionState("s", category=Category.ZERO_WASTE)
    ask = Intent(IntentKind.ASK)
    upcycling = [Category.UPCYCLING] * ELSEWHERE_AGREE + [Category.ZERO_WASTE]
    assert asked_elsewhere(ask, state, upcycling) == Intent(IntentKind.SWITCH, Category.UPCYCLING)
    split = [Category.UPCYCLING, Category.ZERO_WASTE, *upcycling]
    assert asked_elsewhere(ask, state, split) == ask
    assert asked_elsewhere(ask, state, [Category.ZERO_WASTE] * 4) == ask
    assert asked_elsewhere(ask, state, None) == ask  # without its embedding
    more = Intent(IntentKind.MORE)
    assert asked_elsewhere(more, state, upcycling) == more  # only an ask read in the field


@pytest.mark.parametrize(
    ("message", "names"),
    [
        ("환경캠페인 챌린지 뭐 있어?", True),  # a field's own name, inside one word
        ("전기세가 너무 많이 나와", True),
        ("바닷가 사는데 해변에서 주운 걸로 뭐 만들어 볼까", True),
        ("환경 챌린지 추천해줘", False),  # every field's word
        ("바닷가 사는데 뭐 할 만한 거 있어?", False),
        ("추천 좀 해줘", False),
    ],
)
def test_a_field_said_by_what_it_is_about_is_heard(message: str, names: bool) -> None:
    assert names_a_field(message) is names
