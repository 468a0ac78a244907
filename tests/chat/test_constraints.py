"""The facet step read by the real embedding model: critiques, situations told in words and
questions on the held-out dev split; every suggestion a page offers is understood as meant;
constraints decide what satisfies them, and a follow-up keeps them until the user moves on."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.chat.constraints import (
    Constraint,
    FacetReaders,
    Facets,
    asks_for_challenges,
    asks_if_doable,
    asks_to_see_again,
    clauses,
    compares_with_shown,
    cued,
    in_question_form,
    leaving_aside,
    left_words,
    moves_on,
    ordinal,
    points_among,
    points_back,
    requests_challenges,
    said_in_words,
    satisfies,
    sets_aside_the_one_shown,
    takes_a_pet,
    toward,
    wanting,
    without_field,
)
from app.chat.fit import FitBank
from app.chat.follow_up import USUAL_TOGETHER, in_force, situation_of, told_so_far
from app.chat.intent import Intent, IntentClassifiers, IntentKind
from app.chat.intent_bank import build_facets, build_intents
from app.chat.sentence_bank import build_fit_bank
from app.chat.sessions import SessionState, Turn
from app.chat.suggestions import ANOTHER_FIELD, CRITIQUES
from app.chat.told import (
    already_done,
    personas_told,
    place_lived,
    says_a_shop,
    says_a_site,
    says_an_office,
    tells_who,
    trade_told,
)
from app.config import Settings
from app.domain.categories import DRIVING, PERSONAS, SHOP, Category
from app.rag.corpus import Document, Traits, load_corpus, pairings_of
from app.rag.embedder import Embedder, load_embedder

DEV = Path(__file__).resolve().parents[2] / "bench" / "data" / "facets" / "dev.jsonl"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return load_embedder(None)


@pytest.fixture(scope="module")
def facets(embedder: Embedder) -> FacetReaders:
    return build_facets(embedder)


@pytest.fixture(scope="module")
def intents(embedder: Embedder) -> IntentClassifiers:
    return build_intents(embedder)


@pytest.fixture(scope="module")
def fit_bank(embedder: Embedder) -> FitBank:
    return build_fit_bank(embedder, Settings().corpus_path)


def _read(embedder: Embedder, facets: FacetReaders, message: str) -> Facets:
    """The facets the gateway reads in ``message`` with its embedding (no clauses)."""
    return facets.read(message, embedder.embed_queries([message])[0])


def _labels(facets: Facets) -> set[str]:
    said = {c.value for c in facets.constraints}
    said |= {f"at:{facets.location}"} if facets.location else set()
    said |= {f"job:{facets.work_type}"} if facets.work_type else set()
    said |= {"among"} if facets.among else set()
    said |= {"another"} if facets.another else set()
    return said | ({"question"} if facets.question else set())


def test_most_of_the_dev_split_is_read_exactly(embedder: Embedder, facets: FacetReaders) -> None:
    rows = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines()]
    vectors = embedder.embed_queries([row["text"] for row in rows])
    exact = [
        _labels(facets.read(row["text"], vector)) == set(row["labels"])
        for row, vector in zip(rows, vectors, strict=True)
    ]
    assert sum(exact) / len(rows) >= 0.9  # 0.95 measured (bench/README.md "Facets")


def test_every_suggestion_is_understood_as_meant(
    embedder: Embedder, facets: FacetReaders, intents: IntentClassifiers
) -> None:
    shown = SessionState(
        "s", category=Category.VEGAN, turns=(Turn("비건", "{}", Category.VEGAN, ("vg-001",)),)
    )
    for critique in CRITIQUES:
        text = critique.suggestion
        vector = embedder.embed_queries([text])[0]
        assert facets.read(text, vector).constraints == {critique}, text
        kind = intents.decide(text, vector, shown).kind
        assert kind in (IntentKind.MORE, IntentKind.ASK), (text, kind)
    vector = embedder.embed_queries([ANOTHER_FIELD])[0]
    assert intents.decide(ANOTHER_FIELD, vector, shown).kind is IntentKind.ANOTHER
    read = facets.read(ANOTHER_FIELD, vector)
    assert read.another and not read.constraints and not read.among and not read.question


def test_a_constraint_is_satisfied_by_the_traits_it_names() -> None:
    traits = Traits("easy", "free", frozenset({"home"}), frozenset({"alone", "family"}), True)
    assert satisfies(traits, [Constraint.EASY, Constraint.FREE, Constraint.HOME])
    assert satisfies(traits, [Constraint.FAMILY])
    assert not satisfies(traits, [Constraint.OUTSIDE])
    assert not satisfies(None, [Constraint.EASY]), "no traits: no constraint is met"
    assert satisfies(None, [])


def _state(*constraints: Constraint, told: tuple[str, ...] = ()) -> SessionState:
    turn = Turn(
        "…",
        "{}",
        Category.VEGAN,
        ("vg-001",),
        constraints=tuple(c.value for c in constraints),
        told=told,
    )
    return SessionState("s", category=Category.VEGAN, turns=(turn,))


def test_a_follow_up_keeps_the_constraints_and_a_new_place_replaces_the_old() -> None:
    from app.chat.intent import Intent

    state = _state(Constraint.FREE, Constraint.OUTSIDE)
    more = Intent(IntentKind.MORE)
    assert in_force(more, Facets(), state) == {Constraint.FREE, Constraint.OUTSIDE}
    home = Facets(constraints=frozenset({Constraint.HOME}))
    assert in_force(more, home, state) == {Constraint.FREE, Constraint.HOME}
    switch = Intent(IntentKind.SWITCH, Category.PLOGGING)
    assert in_force(switch, Facets(), state) == set(), "moving on ends them"
    assert in_force(switch, home, state) == {Constraint.HOME}
    back = Intent(IntentKind.BACK_TO_BASE)  # "처음 골랐던 분야로 다시", the same field or not
    assert in_force(back, Facets(), state) == set(), "going back ends them"


def _document(doc_id: str, places: set[str], company: set[str]) -> Document:
    traits = Traits("easy", "free", frozenset(places), frozenset(company), True)
    return Document(doc_id, doc_id, "…", Category.PLOGGING, (), (), (), "test", traits)


def test_how_usual_a_place_is_with_a_company_is_read_from_the_catalogue() -> None:
    documents = [
        _document("a", {"work"}, {"coworkers"}),
        _document("b", {"work"}, {"coworkers"}),
        _document("c", {"work", "moving"}, {"coworkers", "alone"}),
        *(_document(f"m{i}", {"moving"}, {"alone"}) for i in range(8)),
    ]
    pairings = pairings_of(documents)
    assert pairings["coworkers", "work"] == pairings["work", "coworkers"] == 1.0
    # one of the coworkers' three is on the move; one of the nine on the move is theirs
    assert pairings["coworkers", "moving"] == pytest.approx(1 / 3)
    assert pairings["family", "home"] == 0.0, "a pair the catalogue has none of"
    bundled = pairings_of(load_corpus(Settings().corpus_path))
    assert bundled["coworkers", "work"] >= USUAL_TOGETHER > bundled["coworkers", "moving"]
    assert bundled["family", "outside"] >= USUAL_TOGETHER > bundled["family", "work"]


def test_a_place_kept_from_before_goes_where_the_company_said_now_rarely_goes() -> None:
    """ "회사 사람들 끌어들여서 같이 …" after plogging on the way to the subway: coworkers, not
    coworkers on the move; "밖에서" after "아이랑": outside with the family still."""
    from app.chat.intent import Intent

    pairings = {("moving", "coworkers"): 0.06, ("outside", "family"): 0.31}
    pairings |= {(b, a): v for (a, b), v in pairings.items()}
    more = Intent(IntentKind.MORE)
    coworkers = Facets(constraints=frozenset({Constraint.COWORKERS}))
    state = _state(Constraint.MOVING, Constraint.EASY)
    assert in_force(more, coworkers, state, pairings=pairings) == {
        Constraint.COWORKERS,
        Constraint.EASY,
    }, "ease goes with anything"
    assert in_force(more, coworkers, state) == {
        Constraint.COWORKERS,
        Constraint.MOVING,
        Constraint.EASY,
    }, "without the catalogue's pairings, everything kept"
    outside = Facets(constraints=frozenset({Constraint.OUTSIDE}))
    family = _state(Constraint.FAMILY)
    assert in_force(more, outside, family, pairings=pairings) == {
        Constraint.OUTSIDE,
        Constraint.FAMILY,
    }
    home = Facets(constraints=frozenset({Constraint.HOME}))
    assert in_force(more, home, _state(Constraint.COWORKERS), pairings=pairings) == {
        Constraint.HOME
    }, "a pair the pairings do not hold is rare"


@pytest.mark.parametrize(
    ("message", "afresh"),
    [
        ("전기 아끼는 건 대충 알겠어요 ㅎㅎ 근데 밖에 나가서 할 만한 것도 있어요?", True),
        ("여행 얘기는 됐고 평소에 집에서 할 수 있는 것도 알려줘요", True),
        ("회사 얘기는 이쯤 하고 주말에 혼자 할 만한 거", True),
        ("이거 말고 더 쉬운 거", False),
        ("밖에서 할 수 있는 것도 있어요?", False),
    ],
)
def test_a_user_done_with_the_talk_starts_afresh(message: str, afresh: bool) -> None:
    from app.chat.intent import Intent

    state = _state(Constraint.EASY, Constraint.FREE)
    outside = Facets(constraints=frozenset({Constraint.OUTSIDE}))
    assert moves_on(message) is afresh
    kept = in_force(Intent(IntentKind.ASK), outside, state, afresh=moves_on(message))
    assert kept == (
        {Constraint.OUTSIDE} if afresh else {Constraint.EASY, Constraint.FREE, Constraint.OUTSIDE}
    )


@pytest.mark.parametrize(
    ("message", "off"),
    [
        ("가게 쉬는 날 혼자 조용히 할 수 있는 걸로요", True),
        ("마감하고 나서 동네 분들이랑 같이 할 만한 거", True),
        ("퇴근하고 집에서 혼자 밥 먹을 때 할 수 있는 걸로요", True),
        ("오프날 집에서 뒹굴면서 할 수 있는 거", True),
        ("일 끝나고 애들이랑 할 만한 거", True),
        ("퇴근 전에 사무실에서 할 수 있는 거", False),  # still at work
        ("출퇴근길에 할 수 있는 거", False),  # on the move, said as such
        ("주말엔 힘드니까 평일에 회사에서 동료들이랑", False),
        ("오프라인 매장에서도 팔아요?", False),
    ],
)
def test_time_off_work_is_told_apart_from_the_workplace(message: str, off: bool) -> None:
    from app.chat.constraints import off_work

    assert off_work(message) is off


def test_going_back_to_the_start_asks_the_first_ask_again_as_it_was_asked() -> None:
    """ "처음 얘기로 돌아가자" after "바닷가 사는데 아이랑 …", "더 쉬운 거": the critiques end,
    the first ask's own company ("아이랑") comes back with it."""
    from app.chat.intent import Intent

    first = Turn(
        "아이랑", "{}", Category.PLOGGING, ("pl-015",), constraints=("family",), topic="아이랑"
    )
    easier = Turn(
        "더 쉬운 거", "{}", Category.PLOGGING, ("pl-001",), constraints=("easy", "family")
    )
    state = SessionState(
        "s", base_category=Category.PLOGGING, category=Category.PLOGGING, turns=(first, easier)
    )
    back = Intent(IntentKind.BACK_TO_BASE)
    assert in_force(back, Facets(), state) == {Constraint.FAMILY}
    alone = Facets(constraints=frozenset({Constraint.ALONE}))
    assert in_force(back, alone, state) == {Constraint.FAMILY, Constraint.ALONE}


def test_a_situation_told_in_words_is_kept_and_base_info_comes_first() -> None:
    told = told_so_far(Facets(location="바닷가"), _state())
    assert told == ("at:바닷가",)
    told = told_so_far(Facets(work_type="현장직"), _state(told=told))
    assert told == ("at:바닷가", "job:현장직")
    situation = situation_of(_state(told=told), told)
    assert (situation.location, situation.work_type, situation.given) == ("바닷가", "현장직", False)
    based = SessionState("s", location="도시", work_type="사무직")
    assert situation_of(based, told).given and situation_of(based, told).location == "도시"


def test_a_choice_among_what_was_shown_is_never_refused_but_money_words_are_no_topic() -> None:
    from app.chat.follow_up import with_facets
    from app.chat.intent import Intent

    shown = _state()
    off = Intent(IntentKind.OFF_TOPIC)
    among = Facets(constraints=frozenset({Constraint.EASY}), among=True)
    assert with_facets(off, among, shown).kind is IntentKind.AMONG
    money = Facets(constraints=frozenset({Constraint.FREE}))  # "오늘 주식 뭐 살까"
    assert with_facets(off, money, shown).kind is IntentKind.OFF_TOPIC
    another = Facets(constraints=frozenset({Constraint.HOME}), another=True)
    assert with_facets(Intent(IntentKind.MORE), another, shown).kind is IntentKind.ANOTHER
    assert with_facets(Intent(IntentKind.MORE), among, SessionState("s")).kind is IntentKind.MORE


def test_a_place_named_before_its_there_is_no_pointer() -> None:
    # "주말엔 댕댕이 데리고 근처 산에 자주 올라가는데 거기서 할 수 있는 건요?": its "거기서" is
    # the mountain; read as a pointer, it had chosen one of the walk's answers again.
    assert not points_among(
        "주말엔 댕댕이 데리고 근처 산에 자주 올라가는데 거기서 할 수 있는 건요?"
    )
    assert points_among("그럼 거기서 하나만 골라 줘")
    # ... and it asks for challenges, said with "요" too.
    assert requests_challenges("근처 산에 올라가는데 거기서 할 수 있는 건요?")


def test_a_pet_taken_along_is_no_family() -> None:
    assert takes_a_pet("댕댕이 데리고 산에 가는데")
    assert not takes_a_pet("강아지랑 애들 데리고 산에 가는데")  # family said in words
    assert not takes_a_pet("애들 데리고 산에 가는데")


def test_a_pointer_into_what_was_shown_outweighs_another_field_read_by_meaning_alone() -> None:
    from app.chat.follow_up import with_facets
    from app.chat.intent import Intent

    shown, away = _state(), Intent(IntentKind.ANOTHER)
    # "거기 있는 것들 중에 팀 전체가 같이 바꿔야 의미 있는 건 뭐야?": "바꿔야" voted another.
    team = Facets(constraints=frozenset({Constraint.COWORKERS}), among=True)
    assert with_facets(away, team, shown).kind is IntentKind.AMONG
    # Another field said in words stays another ("그 중에 없으면 다른 분야로").
    assert with_facets(away, replace(team, another=True), shown).kind is IntentKind.ANOTHER


def test_a_critique_read_as_about_what_was_shown_but_pointing_at_nothing_asks_for_new_ones() -> (
    None
):
    from app.chat.follow_up import with_facets
    from app.chat.intent import Intent

    shown, among = _state(), Intent(IntentKind.AMONG)
    together = Facets(constraints=frozenset({Constraint.COWORKERS}))  # "회사 사람들이랑 같이…"
    assert with_facets(among, together, shown).kind is IntentKind.ASK
    pointing = Facets(constraints=frozenset({Constraint.FAMILY}), about_shown=True)
    assert with_facets(among, pointing, shown).kind is IntentKind.AMONG  # "이거 가족이랑…"
    asking = Facets(constraints=frozenset({Constraint.WORK}), question=True)
    assert with_facets(among, asking, shown).kind is IntentKind.AMONG
    assert with_facets(among, Facets(), shown).kind is IntentKind.AMONG  # "마지막 거 설명해줘"
    more = Facets(more=True)  # "여름에 전기 아끼는 방법 또 뭐 있어?"
    assert with_facets(among, more, shown).kind is IntentKind.MORE
    assert with_facets(among, replace(more, about_shown=True), shown).kind is IntentKind.AMONG


def test_a_question_pointing_at_one_shown_is_about_it() -> None:
    from app.chat.follow_up import with_facets
    from app.chat.intent import Intent

    ask = Intent(IntentKind.ASK)
    pointed = Facets(question=True, at_one=True)  # "2번은 아이폰에서도 되나요"
    assert with_facets(ask, pointed, _state()).kind is IntentKind.AMONG
    assert with_facets(ask, pointed, SessionState("s")).kind is IntentKind.ASK  # nothing shown
    assert with_facets(ask, Facets(question=True), _state()).kind is IntentKind.ASK
    assert with_facets(ask, Facets(at_one=True), _state()).kind is IntentKind.ASK  # "그거 말고"


def test_a_follow_up_leaving_its_field_aside_goes_where_the_rest_of_it_says() -> None:
    from app.chat.follow_up import what_it_wants
    from app.chat.intent import Intent

    shown = _state()  # in VEGAN
    more = Intent(IntentKind.MORE)  # "쓰레기 얘기 말고, 먹을거리를 고기 없는 걸로" read whole
    elsewhere = Intent(IntentKind.SWITCH, Category.PLOGGING)
    assert what_it_wants(more, elsewhere, shown) == elsewhere
    assert what_it_wants(more, None, shown) == more  # it leaves nothing aside
    assert what_it_wants(more, Intent(IntentKind.SWITCH, Category.VEGAN), shown) == more
    assert what_it_wants(more, Intent(IntentKind.OFF_TOPIC), shown) == more
    back = Intent(IntentKind.BACK_TO_BASE)  # an intent that already goes somewhere stays
    assert what_it_wants(back, elsewhere, shown) == back
    assert what_it_wants(more, elsewhere, SessionState("s")) == more  # nothing said yet
    # "새참 얘기로 가자": the examples hear another field, the catalogue's best fit does not.
    assert what_it_wants(more, elsewhere, shown, best_fit=Category.VEGAN) == more
    assert what_it_wants(more, elsewhere, shown, best_fit=Category.PLOGGING) == elsewhere


def test_a_critique_read_as_another_field_stays_when_it_says_only_its_constraints() -> None:
    from app.chat.follow_up import in_its_field
    from app.chat.intent import Intent

    shown = _state()  # in VEGAN
    elsewhere = Intent(IntentKind.SWITCH, Category.CARBON_FOOTPRINT)
    family = Facets(constraints=frozenset({Constraint.FAMILY}))  # "애들도 같이 할 수 있는 걸로"
    stays = in_its_field(elsewhere, family, shown, nearer_a_constraint=True)
    assert stays == Intent(IntentKind.ASK)
    # It says more than its constraints ("이번엔 먹는 쪽으로 가 보자. 출장지에서 …"): it goes.
    assert in_its_field(elsewhere, family, shown, nearer_a_constraint=False) == elsewhere
    # Unless it asks for more in words ("출퇴근하면서 할 수 있는 걸로 다른 거 없을까요?").
    more_of_it = replace(family, more=True)
    assert in_its_field(elsewhere, more_of_it, shown, nearer_a_constraint=False) == stays
    # It leaves its topic aside ("쓰레기 얘기는 이쯤 하고, 완전 딴 걸로 …"): it goes.
    left = in_its_field(elsewhere, more_of_it, shown, nearer_a_constraint=True, leaves_aside=True)
    assert left == elsewhere
    # No constraint read, "다른 분야로", nothing said yet, or no switch: as read.
    assert in_its_field(elsewhere, Facets(), shown, nearer_a_constraint=True) == elsewhere
    another = replace(family, another=True)
    assert in_its_field(elsewhere, another, shown, nearer_a_constraint=True) == elsewhere
    fresh = SessionState("s")
    assert in_its_field(elsewhere, family, fresh, nearer_a_constraint=True) == elsewhere
    more = Intent(IntentKind.MORE)
    assert in_its_field(more, family, shown, nearer_a_constraint=True) == more
    # Its words name nothing but its constraints ("외근 다니는 길에 틈틈이 할 수 있는 걸로"),
    # whatever its meaning lies nearest: it stays.
    said = in_its_field(
        elsewhere, family, shown, nearer_a_constraint=False, says_only_constraints=True
    )
    assert said == stays


def test_a_critique_switched_by_its_matter_alone_is_one_to_see_against_its_field() -> None:
    from app.chat.follow_up import switched_by_matter
    from app.chat.intent import Intent

    shown = _state()  # in VEGAN
    elsewhere = Intent(IntentKind.SWITCH, Category.CARBON_FOOTPRINT)
    moving = Facets(constraints=frozenset({Constraint.MOVING}))
    subway = "지하철 타고 출퇴근하는 동안 할 수 있는 걸로"
    assert switched_by_matter(subway, elsewhere, moving, shown, leaves_aside=False)
    # It names a field, in name or in words, or leaves something aside: it goes where it says.
    named = "탄소발자국 쪽으로, 출퇴근하는 동안 할 수 있는 걸로"
    assert not switched_by_matter(named, elsewhere, moving, shown, leaves_aside=False)
    words = "전기 아끼는 걸로, 출퇴근하는 동안 할 수 있는 걸로"
    assert not switched_by_matter(words, elsewhere, moving, shown, leaves_aside=False)
    assert not switched_by_matter(subway, elsewhere, moving, shown, leaves_aside=True)
    # No constraint, no switch, a switch to its own field, or nothing said yet: nothing to see.
    assert not switched_by_matter(subway, elsewhere, Facets(), shown, leaves_aside=False)
    ask = Intent(IntentKind.ASK)
    assert not switched_by_matter(subway, ask, moving, shown, leaves_aside=False)
    own = Intent(IntentKind.SWITCH, Category.VEGAN)
    assert not switched_by_matter(subway, own, moving, shown, leaves_aside=False)
    fresh = SessionState("s")
    assert not switched_by_matter(subway, elsewhere, moving, fresh, leaves_aside=False)


@pytest.mark.parametrize(
    ("message", "only"),
    [
        ("동네 사람들이랑 같이 할 수 있는 걸로", True),
        ("우리 아이랑 함께 할 만한 거로 부탁해", True),
        ("혼자서 조용히 할 수 있는 걸로 알려 줘", True),
        ("이번엔 전기 아끼는 쪽으로 가 보자", False),
        ("고기 안 먹는 쪽으로 바꿔 볼래", False),
    ],
)
def test_a_message_saying_only_constraints_lies_nearer_a_constraint_than_any_field(
    embedder: Embedder,
    facets: FacetReaders,
    intents: IntentClassifiers,
    message: str,
    only: bool,
) -> None:
    from app.chat.follow_up import ONLY_CONSTRAINTS_MARGIN

    vector = embedder.embed_queries([message])[0]
    nearer = facets.dense.nearest_constraint(vector) - intents.dense.nearest_topic(vector)
    assert (nearer >= ONLY_CONSTRAINTS_MARGIN) is only


@pytest.mark.parametrize(
    ("message", "about"),
    [
        ("이거 가족들이랑 같이 해도 되죠?", True),
        ("두 번째 거 사무실에서도 돼요?", True),
        ("마지막꺼 만드는법좀", True),
        ("맨 처음 방법부터 차근차근 알려줘", True),
        ("위에 말한 거 애들이랑 같이 해도 안전해?", True),
        ("하나 만드는데 시간 얼마나 걸려요?", True),
        ("회사 사람들 끌어들여서 같이 해 볼 만한 건 없을까?", False),
        ("혼자 주워서는 끝이 없더라. 마을 분들이랑 다 같이 치울 방법 없을까", False),
        ("더 쉬운 거 없어?", False),
        ("돈 안 드는 걸로만 보여 줘", False),
        ("첫 번째로 추천한 거 좀 더 쉽게 설명해 줘", True),
        ("비슷한 걸로 몇 개만 더 알려 주세요", False),
        # Indefinite: any time, anywhere, somewhere, somehow.
        ("언제든 할 수 있는 걸로 알려 줘", False),
        ("어디서나 할 수 있는 거 있어?", False),
        ("주말에 식구들 데리고 어디 놀러 갈 때 해 볼 만한 건 없어?", False),
        ("어떻게든 돈 안 들이고 해 보고 싶어", False),
        ("그거 어디서 사요?", True),
        ("언제 하는 게 제일 좋아?", True),
    ],
)
def test_what_points_at_a_challenge_shown_is_read_by_its_words(
    embedder: Embedder, facets: FacetReaders, message: str, about: bool
) -> None:
    read = _read(embedder, facets, message)
    assert read.about_shown is about


@pytest.mark.parametrize(
    "message",
    [
        "그중에 공짜로 할 수 있는 건?",
        "그 중엔 뭐가 쉬워",
        "이중에 뭐가 좋아",
        "이 가운데 집에서 할 만한 거",
        "셋 중에 돈 제일 덜 드는 거",
        "그것들 중에 제일 싼 거",
        "아까 추천한 거 중에서 돈 안 드는 거",
        "거기 있는 것들 중에 팀이 같이 할 만한 건?",
        "저기서 나 혼자 해도 되는 건 뭐야?",
        "앞에서 말한 챌린지 가운데 쉬운 거",
        "거기서 제일 빨리 할 수 있는 거",
    ],
)
def test_a_pointer_at_the_answer_just_shown_is_read_however_it_is_spaced(message: str) -> None:
    assert points_among(message)


@pytest.mark.parametrize(
    "message",
    [
        "그 중요한 게 뭐야",
        "이중 포장된 과자가 너무 많아",
        "돈 안 드는 것 중에 쉬운 거",
        "출장 중에 할 수 있는 거",
        "하루 중에 언제 하면 좋아?",
        "이 중고 물건 팔고 싶어",
        "다른 분야 중에 돈 안 드는 거",
    ],
)
def test_other_words_with_jung_are_not_a_pointer(message: str) -> None:
    assert not points_among(message)


def test_a_statement_of_a_problem_is_not_read_as_a_question(
    embedder: Embedder, facets: FacetReaders
) -> None:
    statement = "회사에서 종이컵을 너무 많이 써"
    question = "회사에서 종이컵 대신 뭘 쓰면 좋아?"
    statement_vector, question_vector = embedder.embed_queries([statement, question])
    assert not facets.read(statement, statement_vector).question
    assert facets.read(question, question_vector).question


@pytest.mark.parametrize(
    ("message", "question"),
    [
        ("걷는 거 좋아하는데 환경에 도움 되는 거 있을까", False),  # asks for challenges
        ("주말에 할 만한 거 없어?", False),
        ("식기세척기 관련된 것도 있어?", False),  # "…것도 있어?": one more like it
        ("비행기 대신 기차 타는 게 정말 도움이 돼?", True),
    ],
)
def test_asking_whether_there_is_one_asks_for_challenges_not_to_know(
    embedder: Embedder, facets: FacetReaders, message: str, question: bool
) -> None:
    assert _read(embedder, facets, message).question is question


@pytest.mark.parametrize(
    ("message", "parts"),
    [
        ("바닷가 마을에 사는데 아이랑 할 만한 거", ["바닷가 마을에 사는데", "아이랑 할 만한 거"]),
        ("자취하는데, 돈 안 드는 거", ["자취하는데", "돈 안 드는 거"]),
        ("용기가 많아서 줄이고 싶어", ["용기가 많아서", "줄이고 싶어"]),
        # Not cut: one clause, "-고" ("살고 있어"), "-면" ("낮추면 줄어?").
        ("아이랑 할 만한 거", []),
        ("산자락 마을에 살고 있어", []),
        ("화면 밝기 낮추면 진짜 전기가 줄어?", []),
        # Whom the user is busy looking after is a reason, left out of its clause.
        ("주말엔 애들 보느라 바쁘고, 버스에서 할 거", ["주말엔 바쁘고", "버스에서 할 거"]),
    ],
)
def test_a_message_is_cut_into_clauses_after_a_connective(message: str, parts: list[str]) -> None:
    assert clauses(message) == parts


def test_a_situation_told_in_one_clause_and_a_wish_in_another_are_both_read(
    embedder: Embedder, facets: FacetReaders
) -> None:
    message = "바닷가 마을에 사는데 아이랑 주말에 할 만한 거 있을까"
    vector = embedder.embed_queries([message])[0]
    parts = embedder.embed_queries(clauses(message))
    # The whole alone may split its vote: the company is read by its words ("아이랑"); read
    # clause by clause, the place told is read too.
    assert "family" in _labels(facets.read(message, vector))
    assert _labels(facets.read(message, vector, parts)) == {"at:바닷가", "family"}
    # A clause adds no ease or cost the request did not ask ("줄이고 싶은데" alone reads "easy").
    asked = "사무실에 종이컵이 너무 많아서 줄이고 싶은데 동료들도 같이 할 수 있는 거"
    read = facets.read(
        asked, embedder.embed_queries([asked])[0], embedder.embed_queries(clauses(asked))
    )
    assert read.constraints == {Constraint.WORK, Constraint.COWORKERS}


@pytest.mark.parametrize(
    ("message", "moving"),
    [
        ("아침에 강아지 산책시키는데 길에 쓰레기가 많아", False),  # the street, not a way
        ("길에 버려진 쓰레기가 너무 많아요", False),
        ("회사 가는 길에 할 수 있는 거", True),
        ("외근 다니는 길에 틈틈이", True),
        ("퇴근길에 할 만한 거", True),
    ],
)
def test_a_way_somewhere_is_on_the_move_and_the_street_is_not(message: str, moving: bool) -> None:
    assert (Constraint.MOVING in cued(message)) is moving


@pytest.mark.parametrize(
    ("message", "home"),
    [
        ("주방에서 나오는 음식물 쓰레기 줄이고 싶어", True),
        ("부엌에서 쓰는 일회용품 줄이고 싶어", True),
        ("식당 주방에서 일하는데 할 만한 거", False),  # a shop's kitchen
        ("가게 주방에서 나오는 쓰레기", False),
    ],
)
def test_a_homes_kitchen_is_a_home_cue_and_a_shops_is_not(message: str, home: bool) -> None:
    assert (Constraint.HOME in cued(message)) is home


@pytest.mark.parametrize(
    ("message", "read"),
    [
        # with whom, and no place said: coworkers meet at work, and outside too
        ("회사 사람들 끌어들여서 같이 해 볼 만한 건 없을까?", {Constraint.COWORKERS}),
        ("팀원들이랑 부담없이 가볍게 할 수 있는 걸로요", {Constraint.COWORKERS, Constraint.EASY}),
        ("사무실에서 팀원들이랑 같이 해볼 만한 거 없나요", {Constraint.COWORKERS, Constraint.WORK}),
        (
            "저희 선생님들끼리 교무실에서 같이 해볼 만한 건요?",
            {Constraint.COWORKERS, Constraint.WORK},
        ),
    ],
)
def test_coworkers_asked_for_say_no_place_unless_one_is_said(
    embedder: Embedder, facets: FacetReaders, message: str, read: set[Constraint]
) -> None:
    assert _read(embedder, facets, message).constraints == read


def test_raising_a_pet_is_no_family_and_walking_is_done_outside(
    embedder: Embedder, facets: FacetReaders
) -> None:
    # "키우는데" had read family whatever was raised: the family filter then left one
    # upcycling challenge for a cat owner, and not the cat scratcher.
    for message in (
        "고양이 키우는데 할 만한 업사이클 있어?",
        "화분 키우는데 할 만한 거",
        "주말엔 댕댕이 데리고 근처 산에 자주 올라가는데 거기서 할 수 있는 건요?",
    ):
        parts = embedder.embed_queries(clauses(message))
        read = facets.read(message, embedder.embed_queries([message])[0], parts)
        assert Constraint.FAMILY not in read.constraints, message
    # Walking is done outside; walking to work is on the move.
    for message, place in (
        ("걸으면서 할 수 있는 거", Constraint.OUTSIDE),
        ("출퇴근길에 걸으면서 할 수 있는 거", Constraint.MOVING),
    ):
        read = facets.read(message, embedder.embed_queries([message])[0])
        assert read.constraints == {place}, message
    # A child the user raises is who the user is; doing it with the child is family
    # (test_a_child_the_user_raises_is_who_the_user_is_not_company_asked_for).
    child = "아이 키우는데 아이랑 같이 할 만한 거"
    parts = embedder.embed_queries(clauses(child))
    read = facets.read(child, embedder.embed_queries([child])[0], parts)
    assert Constraint.FAMILY in read.constraints


@pytest.mark.parametrize(
    ("message", "wanted"),
    [
        (
            "종이 얘기는 됐고 아예 다른 분야로, 사무실에서 할 수 있는 거",
            "아예 다른 분야로, 사무실에서 할 수 있는 거",
        ),
        ("비건 말고 다른 거", "다른 거"),
        ("플라스틱 빼고 딴 분야에서 골라줘", "딴 분야에서 골라줘"),
        ("집은 그렇고, 출퇴근길에 할 만한 건?", "출퇴근길에 할 만한 건?"),
        ("에너지 얘기는 이쯤 하고 다른 데서 골라 줘", "다른 데서 골라 줘"),
        ("플로깅은 그만 하고, 먹는 쪽으로", "먹는 쪽으로"),
        # Nothing left aside, or nothing else said: the whole message.
        ("아예 다른 분야로 가 보자", "아예 다른 분야로 가 보자"),
        ("비건 말고", "비건 말고"),
        ("말고기 요리는 어때", "말고기 요리는 어때"),
    ],
)
def test_another_field_is_searched_without_what_the_user_leaves(message: str, wanted: str) -> None:
    assert leaving_aside(message) == wanted


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("텀블러 말고 또 뭐 있어?", ("텀블러",)),
        ("텀블러 말고", ("텀블러",)),  # said alone
        ("아니 그건 말고", ()),
        ("러닝 플로깅은 빼고 다른 거 있어?", ("러닝",)),
        ("고기 반찬 말고 새참 얘기로 가자", ("고기", "반찬")),
        # A field, a pointer or nothing left aside: no word a title would say.
        ("에너지 절약 쪽은 말고 다른 분야로", ()),
        ("이거 말고 다른 거", ()),
        ("상자 말고도 집에서 만들 만한 거", ()),
        ("나 혼자 바꾸는 거 말고 팀 전체가 같이 할 방법은?", ()),  # a way of doing
    ],
)
def test_what_a_message_leaves_aside_is_read_as_a_title_would_say_it(
    message: str, words: tuple[str, ...]
) -> None:
    assert left_words(message) == words


@pytest.mark.parametrize(
    ("message", "plain"),
    [
        ("비건 쪽 챌린지 추천 부탁해", True),
        ("에너지 절약 챌린지 하나만 알려 줘", True),
        ("디지털 탄소 챌린지 알려 줄 수 있어?", True),
        ("플로깅 시작해 보고 싶은데 추천해 줄래", True),
        ("채식하면 단백질은 어디서 얻어?", False),
        ("휴대폰 사진이 너무 많아서 정리하고 싶어", False),
        ("텀블러 씻는 법 알려 줘", False),
        ("아이랑 같이 할 수 있는 플로깅 있어?", False),
        ("사무실에서 할 수 있는 비건 챌린지 추천해 줘", False),  # where: not plain
    ],
)
def test_a_plain_ask_for_a_field_is_read_as_one(
    embedder: Embedder, facets: FacetReaders, message: str, plain: bool
) -> None:
    """It names the field and nothing in it (answered with the field's classic first steps);
    a question, a problem told or a critique asks something of its own."""
    assert _read(embedder, facets, message).plain is plain


@pytest.mark.parametrize(
    ("message", "plain"),
    [
        ("쓰레기 줄이기 뭐부터 하면 돼?", True),
        ("전기 아끼려면 어디서부터 시작해?", True),
        ("채식 처음에 뭘 해야 돼?", True),
        ("플로깅 처음 해보는데 뭐부터 해?", True),  # that it begins is no subject
        ("업사이클링 이제 막 시작하려는데 뭐부터 하면 좋을까", True),
        ("옷을 너무 자주 사는 것 같아서 좀 줄여 보고 싶은데 뭐부터 하면 돼?", False),
        ("혼자 사는데 쓰레기 줄이기 뭐부터 해?", False),  # its own situation: not plain
        ("업사이클 뭐 있어?", True),  # what there is: a request, plain for a field
        ("제로웨이스트 챌린지 뭐가 있나요?", True),
        ("회사에서 할 수 있는 거 뭐 있어?", False),  # a place: not plain
    ],
)
def test_asking_where_to_begin_is_no_question_and_plain_when_its_subject_is_short(
    embedder: Embedder, facets: FacetReaders, message: str, plain: bool
) -> None:
    """Asking where to begin asks for challenges to begin with, not for a fact (it had been
    answered "그 질문에 꼭 맞는 답은 … 없지만"); a field's first steps when what it begins is
    said in a word or two; a question of how to do something still is one."""
    read = _read(embedder, facets, message)
    assert not read.question and read.plain is plain
    assert _read(embedder, facets, "분리배출 할 때 뭐부터 헹궈야 해?").question


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("이번엔 먹는 거 쪽으로 봐 줘", "이번엔 먹는 거"),
        ("식단 쪽으로도 동료들이랑 같이 해 볼 만한 게 있을까?", "식단"),
        ("스마트폰 쪽도 알려줘", "스마트폰"),
        ("교통쪽으로는 뭐 있어", "교통"),
        ("책이나 영상 쪽으로 추천해 줘", "책이나 영상"),
        ("역시 포장 쓰레기 안 생기게 하는 쪽이 나을 듯", "포장 쓰레기 안 생기게 하는"),
        ("그 쪽으로 가자", None),  # a pointer
        ("이쪽이 좋아", None),
        ("먹는 쪽 말고 다른 거", None),  # a side left
        ("바닷가 쪽에 사는데", None),  # where one lives
        ("텀블러 추천해 줘", None),
    ],
)
def test_where_a_message_turns_is_read_in_its_words(message: str, words: str | None) -> None:
    assert toward(message) == words


@pytest.mark.parametrize(
    ("words", "turns"),
    [
        ("먹는 거", Intent(IntentKind.SWITCH, Category.VEGAN)),
        ("식단", Intent(IntentKind.SWITCH, Category.VEGAN)),
        ("스마트폰", Intent(IntentKind.SWITCH, Category.DIGITAL_CARBON)),
        ("전기", Intent(IntentKind.SWITCH, Category.ENERGY_SAVING)),
        ("교통", Intent(IntentKind.SWITCH, Category.CARBON_FOOTPRINT)),
        ("회사", Intent(IntentKind.ASK)),  # a place: a critique, in its field
        ("집", Intent(IntentKind.ASK)),
        ("바닷가", Intent(IntentKind.ASK)),
        ("아이들", Intent(IntentKind.ASK)),
    ],
)
def test_the_words_a_message_turns_to_name_a_field_or_a_place(
    embedder: Embedder,
    facets: FacetReaders,
    intents: IntentClassifiers,
    fit_bank: FitBank,
    words: str,
    turns: Intent,
) -> None:
    from app.chat.follow_up import turned_to

    vector = embedder.embed_queries([words])[0]
    assert turned_to(words, vector, facets, intents.dense, fit_bank) == turns


@pytest.mark.parametrize(
    ("message", "compares"),
    [
        ("요리는 영 자신이 없어서… 그보다 훨씬 간단한 방법은 없을까?", True),
        ("저것보다 덜 번거로운 건 없어?", True),
        ("좀 더 쉬운 걸로", True),
        ("더 저렴한 거 있어?", True),
        ("더 알려줘", False),
        ("이번엔 먹는 쪽으로 가 보자", False),
    ],
)
def test_comparing_with_what_was_shown_is_told_by_its_words(message: str, compares: bool) -> None:
    assert compares_with_shown(message) is compares


def test_a_critique_comparing_with_what_was_shown_stays_in_its_field() -> None:
    """ "그보다 훨씬 간단한 방법은 없을까?" after delivery containers, read as vegan by its
    "요리": easier than what was shown, so in their field; leaving the topic, or another field
    said in words, still goes."""
    from app.chat.follow_up import in_its_field

    shown = _state()
    easy = Facets(constraints=frozenset({Constraint.EASY}))
    voted = Intent(IntentKind.SWITCH, Category.MEDIA)
    kept = in_its_field(voted, easy, shown, nearer_a_constraint=False, compares=True)
    assert kept == Intent(IntentKind.ASK)
    assert in_its_field(voted, easy, shown, nearer_a_constraint=False) == voted
    left = in_its_field(
        voted, easy, shown, nearer_a_constraint=False, compares=True, leaves_aside=True
    )
    assert left == voted
    said = replace(easy, another=True)
    assert in_its_field(voted, said, shown, nearer_a_constraint=False, compares=True) == voted


def test_a_critique_turning_to_a_place_stays_in_its_field() -> None:
    """ "회사 쪽으로는 뭐 있어?" after zero waste: "another" or a switch read by the whole's
    meaning stays in the field; "다른 분야로" said in words, or leaving the topic, goes."""
    from app.chat.follow_up import in_its_field

    shown = _state()
    work = Facets(constraints=frozenset({Constraint.WORK}))
    for voted in (Intent(IntentKind.ANOTHER), Intent(IntentKind.SWITCH, Category.MEDIA)):
        kept = in_its_field(voted, work, shown, nearer_a_constraint=False, turns_to_a_place=True)
        assert kept == Intent(IntentKind.ASK)
        assert in_its_field(voted, work, shown, nearer_a_constraint=False) == voted
    another = Intent(IntentKind.ANOTHER)
    said = replace(work, another=True)
    assert in_its_field(another, said, shown, nearer_a_constraint=False, turns_to_a_place=True) == (
        another
    )
    left = in_its_field(
        another, work, shown, nearer_a_constraint=False, turns_to_a_place=True, leaves_aside=True
    )
    assert left == another


def test_a_question_read_as_another_field_is_about_what_was_shown_when_it_fits_them() -> None:
    """ "재봉틀 없어도 돼?" after a sewing challenge: it asks for no challenge and fits the ones
    shown about as well as anything else; a request ("… 챌린지도 있어?"), a statement, a
    poor fit or nothing shown goes where it was read."""
    from app.chat.follow_up import SHOWN_MARGIN, about_what_was_shown

    shown = _state()
    elsewhere = Intent(IntentKind.SWITCH, Category.ENERGY_SAVING)
    near = SHOWN_MARGIN + 0.01
    asked = {"question": True, "asks_for_challenges": False}
    assert about_what_was_shown(elsewhere, shown, nearer_shown=near, **asked) == Intent(
        IntentKind.AMONG
    )
    assert about_what_was_shown(elsewhere, shown, nearer_shown=SHOWN_MARGIN - 0.01, **asked) == (
        elsewhere
    )
    assert about_what_was_shown(elsewhere, shown, nearer_shown=None, **asked) == elsewhere
    assert about_what_was_shown(elsewhere, SessionState("s"), nearer_shown=near, **asked) == (
        elsewhere
    )
    request = {"question": True, "asks_for_challenges": True}
    assert about_what_was_shown(elsewhere, shown, nearer_shown=near, **request) == elsewhere
    said = {"question": False, "asks_for_challenges": False}
    assert about_what_was_shown(elsewhere, shown, nearer_shown=near, **said) == elsewhere
    more = Intent(IntentKind.MORE)
    assert about_what_was_shown(more, shown, nearer_shown=near, **asked) == more


@pytest.mark.parametrize(
    ("message", "doable"),
    [
        ("바느질 못해도 할 수 있어?", True),
        ("우리 집 다섯 살 꼬마도 할 수 있을까?", True),
        ("왕복 20분이면 할 만할까?", True),
        ("겨울에 해도 괜찮아?", True),
        ("매일 하기 번거롭지 않을까?", True),
        ("이거 회사 컴퓨터에서 바꿔도 되나요?", True),
        ("혼자서도 할 수 있는 거 있어?", False),  # asks for challenges
        ("집에서 할 만한 걸로 알려 줘", False),
        ("그 중에 돈 안 들여도 되는 건 어떤 거야?", False),  # chooses one by what it is
        ("이런 거 또 할 수 있는 거 없어?", False),  # more
        ("나도 할 수 있어", False),  # no question
    ],
)
def test_asking_whether_it_can_be_done_is_told_by_its_words(message: str, doable: bool) -> None:
    assert asks_if_doable(message) is doable


def test_asking_whether_what_was_shown_can_be_done_is_a_question_of_it() -> None:
    """ "바느질 못해도 할 수 있어?" after challenges were shown: a question of them, whatever
    critique its words read as ("할만해": easy); not before anything was shown, nor when it
    chooses among them by a critique, asks for more or for another field."""
    from app.chat.follow_up import asked_if_doable

    shown = _state()
    easy = Facets(constraints=frozenset({Constraint.EASY}))
    for read in (Intent(IntentKind.ASK), Intent(IntentKind.MORE), Intent(IntentKind.AMONG)):
        intent, facets = asked_if_doable(read, easy, shown, doable=True)
        assert intent == Intent(IntentKind.AMONG)
        assert facets.question and not facets.constraints
    ask = Intent(IntentKind.ASK)
    assert asked_if_doable(ask, easy, shown, doable=False) == (ask, easy)
    assert asked_if_doable(ask, easy, SessionState("s"), doable=True) == (ask, easy)
    switch = Intent(IntentKind.SWITCH, Category.PLOGGING)
    assert asked_if_doable(switch, easy, shown, doable=True) == (switch, easy)
    for said in (replace(easy, among=True), replace(easy, more=True), replace(easy, another=True)):
        assert asked_if_doable(ask, said, shown, doable=True) == (ask, said)


@pytest.mark.parametrize(
    ("message", "back"),
    [
        ("방금 말한 거 노트북에서도 적용돼?", True),
        ("아까 추천해 준 것들 중에 제일 쉬운 건?", True),
        ("위에 있는 거 하려면 뭐가 필요해?", True),
        ("냉장고는 어떻게 쓰는 게 좋아?", False),
        ("단백질은 어떻게 챙겨?", False),
    ],
)
def test_pointing_back_at_what_was_said_is_told_by_its_words(message: str, back: bool) -> None:
    assert points_back(message) is back


def test_a_question_another_of_their_field_fits_better_is_asked_in_their_field() -> None:
    """ "냉장고는 어떻게 쓰는 게 좋아?" after standby power, read as about what was shown: it
    names what none of them says, and a challenge of their field fits it better than any of
    them by more than the margin, so it is asked in their field (answered from what fits it);
    a question naming nothing, a near fit, the best fit in another field, a choice among them
    in words, or no measure stays."""
    from app.chat.follow_up import SHOWN_MARGIN, asked_in_their_field

    shown = _state()  # in VEGAN
    among = Intent(IntentKind.AMONG)
    asked = Facets(question=True)
    vegan = [Category.VEGAN, Category.ZERO_WASTE]
    far = SHOWN_MARGIN - 0.01

    def read(
        intent: Intent = among,
        facets: Facets = asked,
        *,
        unsaid: bool = True,
        nearer_shown: float | None = far,
        fitting: list[Category] | None = vegan,
    ) -> Intent:
        return asked_in_their_field(
            intent, facets, shown, unsaid=unsaid, nearer_shown=nearer_shown, fitting=fitting
        )

    assert read() == Intent(IntentKind.ASK)
    assert read(unsaid=False) == among
    assert read(nearer_shown=SHOWN_MARGIN + 0.01) == among
    assert read(nearer_shown=None) == among
    assert read(fitting=[Category.ZERO_WASTE, Category.VEGAN]) == among
    assert read(fitting=None) == among
    assert read(facets=replace(asked, among=True)) == among
    more = Intent(IntentKind.MORE)
    assert read(more) == more


def test_a_question_read_as_another_field_that_its_own_fits_best_stays_in_it() -> None:
    """ "깨진 유리병은 어떻게 주워?" after plogging, read as upcycling by its "유리병": a
    plogging challenge fits it best, so it is asked in plogging; a field named in words, a
    request for challenges, a statement, nothing shown or another field fitting best goes
    where it was read."""
    from app.chat.follow_up import asked_of_their_field

    shown = _state()  # in VEGAN
    switch = Intent(IntentKind.SWITCH, Category.UPCYCLING)
    vegan = [Category.VEGAN, Category.UPCYCLING]

    def read(
        state: SessionState = shown,
        *,
        question: bool = True,
        asks: bool = False,
        names: bool = False,
        fitting: list[Category] | None = vegan,
    ) -> Intent:
        return asked_of_their_field(
            switch,
            state,
            question=question,
            asks_for_challenges=asks,
            names_a_field=names,
            fitting=fitting,
        )

    assert read() == Intent(IntentKind.ASK)
    assert read(question=False) == switch
    assert read(asks=True) == switch
    assert read(names=True) == switch
    assert read(fitting=[Category.UPCYCLING, Category.VEGAN]) == switch
    assert read(fitting=None) == switch
    assert read(SessionState("s")) == switch


def test_a_choice_among_naming_what_none_shown_says_is_its_own_ask() -> None:
    """ "화질 낮추면 탄소가 줄어?" after air-conditioning tips, read as a choice among them: it
    names what none of them, nor their field, says, so it asks in the field whose challenges
    say it (a switch), or in this one (an ask); otherwise it stays a choice among them."""
    from app.chat.follow_up import beyond_what_was_shown

    shown = _state()  # in VEGAN
    among = Intent(IntentKind.AMONG)
    digital = Category.DIGITAL_CARBON
    assert beyond_what_was_shown(among, shown, unsaid=True, best_fit=digital) == Intent(
        IntentKind.SWITCH, digital
    )
    assert beyond_what_was_shown(among, shown, unsaid=True, best_fit=Category.VEGAN) == Intent(
        IntentKind.ASK
    )
    assert beyond_what_was_shown(among, shown, unsaid=False, best_fit=digital) == among
    assert beyond_what_was_shown(among, shown, unsaid=True, best_fit=None) == among
    more = Intent(IntentKind.MORE)
    assert beyond_what_was_shown(more, shown, unsaid=True, best_fit=digital) == more


@pytest.mark.parametrize(
    ("message", "requests"),
    [
        ("에어컨 관련된 것도 있어?", True),
        ("아침 식사로 할 만한 건 없어?", True),
        ("비슷한 거 추천해 줘", True),
        ("두부 요리도 있어?", True),
        ("겨울에 할 수 있는 건?", True),  # what there is to do, said short
        ("퇴근길에 할 수 있는 거", True),
        ("장갑도 있어야 돼?", False),
        ("그거 집에서도 할 수 있어?", False),  # whether that one can be done
        ("멀티탭 스위치 있는 걸로 새로 사야 돼?", False),  # a question of one shown
        ("장갑은 목장갑이면 되나요", False),
    ],
)
def test_a_request_for_challenges_is_told_by_its_words(message: str, requests: bool) -> None:
    from app.chat.constraints import requests_challenges

    assert requests_challenges(message) is requests


@pytest.mark.parametrize(
    ("message", "points"),
    [
        ("그 다큐 제목 몇 개만 알려줄 수 있어?", True),
        ("저 챌린지는 혼자 해도 돼?", True),
        ("두 번째 거 어떻게 해?", True),
        ("화질 낮추면 탄소가 줄어?", False),
        ("그리고 비용은 얼마야?", False),
    ],
)
def test_a_demonstrative_before_a_noun_points_at_what_was_shown(message: str, points: bool) -> None:
    from app.chat.constraints import says_that_one

    assert says_that_one(message) is points


@pytest.mark.parametrize(
    ("message", "question"),
    [
        ("바닷가에서 주운 나무로 뭐 만들 때 소금기는 어떻게 빼?", True),
        ("종이 빨대는 몇 분 지나면 눅눅해져?", True),
        ("손수건 쓰는 게 휴지 쓰는 것보다 정말 환경에 나아?", True),
        ("공동 편집 문서로 바꾸면 예전 버전은 어떻게 되살려?", True),
        ("유튜브 자동 재생 끄는 게 데이터 아끼는 데 도움이 돼?", True),
        ("종이 영수증 대신 모바일로 받는 게 더 나을까?", True),  # whether one way is better
        ("화면 밝기 낮추면 배터리가 덜 닳아?", True),
        ("갯벌에서 쓰레기 주울 때 조심할 게 뭐야?", True),
        ("온수매트 밤새 틀어도 괜찮아? 조심할 거 있어?", True),  # what to mind, not challenges
        ("실외기 씻을 때 주의할 점 있을까요?", True),
        ("동네 마트에 리필 코너가 있는지 미리 알 수 있어?", True),
        ("식기세척기 쓰면 물이 덜 드는 거 맞아요?", True),  # whether what is said is so
        ("전기차가 더 친환경이라는 게 사실이야?", True),
        ("사이즈 맞는 옷 중고로 사는 것도 챌린지 있어?", False),  # asks for challenges
        ("주말에 뭘 하는 게 좋을까?", False),  # which to do: asks for challenges
        ("환경에 도움 되는 거 있을까?", False),  # asks for challenges
        ("몇 개 더 보여 줘", False),  # more, not how many
        ("진짜 돈 안 드는 걸로 없어?", False),  # a critique
        ("전기 아끼려면 어디서부터 시작해?", False),  # where to begin: a plain ask
    ],
)
def test_a_question_of_fact_is_one_whatever_the_vote(
    embedder: Embedder, facets: FacetReaders, message: str, question: bool
) -> None:
    """How, why, how many of a measure, whether it is really so, whether one way is better,
    what to mind: the vote had read none of the first four as a question, and their answers
    never came."""
    assert _read(embedder, facets, message).question is question


@pytest.mark.parametrize(
    ("message", "question", "asks_for_them"),
    [
        ("재봉틀 없어도 돼?", True, False),
        ("곰팡이 안 펴요?", True, False),
        ("카페에서 텀블러 내밀면 할인도 해줘?", True, False),
        ("헌 옷으로 뭐 만드는 챌린지도 있어?", True, True),
        ("집에서 전기 아끼는 방법도 알려줘", False, True),
        ("저녁은 채소 위주로 먹어볼까 하는데 그런 것도 있어?", True, True),
        ("좋네요 고마워요", False, False),
    ],
)
def test_a_question_and_a_request_for_challenges_are_told_by_their_words(
    message: str, question: bool, asks_for_them: bool
) -> None:
    assert in_question_form(message) is question
    assert asks_for_challenges(message) is asks_for_them


@pytest.mark.parametrize(
    "message", ["러닝 플로깅 말고 다른 거 있어?", "또 뭐 있어?", "이런 거 몇 개 더 없어?"]
)
def test_asking_for_more_in_words_is_not_a_question(
    embedder: Embedder, facets: FacetReaders, message: str
) -> None:
    """It has a question's form and asks nothing the catalogue answers (its answer had begun
    "그 질문에 꼭 맞는 답은 … 없지만"); asking how or whether of it still is one."""
    read = _read(embedder, facets, message)
    assert read.more and not read.question
    asked = _read(embedder, facets, "또 하나 궁금한데 텀블러는 어떻게 세척해?")
    assert asked.more and asked.question


@pytest.mark.parametrize(
    ("message", "wanted", "left"),
    [
        ("현장 말고 집에서 해 볼 만한 건 있어?", Constraint.HOME, Constraint.WORK),
        (
            "사무실 안에서 말고 바깥에 나가서 할 만한 것도 있을까?",
            Constraint.OUTSIDE,
            Constraint.WORK,
        ),
        ("집은 그렇고, 차로 출퇴근하는 길에 할 수 있는 건?", Constraint.MOVING, Constraint.HOME),
    ],
)
def test_a_place_left_aside_is_not_the_place_asked_for(
    embedder: Embedder, facets: FacetReaders, message: str, wanted: Constraint, left: Constraint
) -> None:
    """Read for where, the words a message leaves aside named the place it did not want; the
    planner reads the place from what it wants (``wanting``), as here."""
    rest = leaving_aside(message)
    assert rest != message
    read = wanting(
        _read(embedder, facets, message),
        _read(embedder, facets, rest),
    )
    assert wanted in read.constraints and left not in read.constraints


def test_ease_and_cost_are_kept_from_the_whole_message() -> None:
    whole = Facets(constraints=frozenset({Constraint.FREE, Constraint.WORK}), question=True)
    wanted = Facets(constraints=frozenset({Constraint.HOME, Constraint.EASY}))
    read = wanting(whole, wanted)
    assert read.constraints == {Constraint.FREE, Constraint.HOME}
    assert read.question
    assert read.left_aside == {Constraint.WORK}
    # "먹는 얘기는 이제 됐고 전혀 다른 주제로 가보자": another field, said in what it wants.
    assert not read.another and wanting(whole, Facets(another=True)).another


def test_another_field_asked_after_what_is_left_is_another_whatever_the_vote() -> None:
    from app.chat.follow_up import with_facets
    from app.chat.intent import Intent

    asked = Facets(another=True)
    for kind in (IntentKind.AMONG, IntentKind.MORE, IntentKind.ASK):
        assert with_facets(Intent(kind), asked, _state()).kind is IntentKind.ANOTHER
    pointed = Facets(another=True, among=True)  # "그 중에 …": a choice among them first
    assert with_facets(Intent(IntentKind.AMONG), pointed, _state()).kind is IntentKind.AMONG


def test_a_place_left_aside_is_not_kept_from_before() -> None:
    """ "가게 일 말고, 동네 분들이랑 …" after a turn at work: work ends, neighbours come."""
    at_work = _state(Constraint.WORK, Constraint.FREE)
    said = Facets(
        constraints=frozenset({Constraint.NEIGHBOURS}), left_aside=frozenset({Constraint.WORK})
    )
    assert in_force(Intent(IntentKind.MORE), said, at_work) == {
        Constraint.NEIGHBOURS,
        Constraint.FREE,
    }


def test_whom_the_user_is_busy_looking_after_is_no_company_asked_for(
    embedder: Embedder, facets: FacetReaders
) -> None:
    message = "주말엔 애들 보느라 바쁘고, 출퇴근 버스 안에서 할 수 있는 게 좋겠어"
    read = facets.read(
        message, embedder.embed_queries([message])[0], embedder.embed_queries(clauses(message))
    )
    assert read.constraints == {Constraint.MOVING}


@pytest.mark.parametrize(
    ("message", "family"),
    [
        ("아기 키우는데 물티슈 대신 쓸 만한 거 없나", False),  # a parent's own: a wet towel
        ("딸 키우는 엄마인데 장난감 쓰레기가 너무 많아요", False),
        ("초등학생 아들 키우는데 같이 할 만한 거", True),  # asked to do it together
        ("아이 키우는 집이라 애들이랑 할 수 있는 거", True),
    ],
)
def test_a_child_the_user_raises_is_who_the_user_is_not_company_asked_for(
    message: str, family: bool, embedder: Embedder, facets: FacetReaders
) -> None:
    parts = clauses(message)
    read = facets.read(message, embedder.embed_queries([message])[0], embedder.embed_queries(parts))
    assert (Constraint.FAMILY in read.constraints) is family


@pytest.mark.parametrize(
    ("message", "company"),
    [
        # the people told doing what the message is about: no company asked for
        ("우리 팀이 보고서를 매번 컬러로 뽑아요", None),
        ("직원들이 종이컵을 하루에 수십 개씩 써요", None),
        ("애들이 편식이 심해서 걱정이야", None),
        ("동네 사람들이 분리수거를 잘 안 해요", None),
        ("우리 남편이 샤워를 너무 오래 해", None),
        # asked to do it together, or said as a topic rather than as who does it
        ("동료들이 같이 해 보자고 하는데 뭐가 좋을까", Constraint.COWORKERS),
        ("이웃들이랑 할 만한 거 있어?", Constraint.NEIGHBOURS),
        ("우리 애들은 채소를 안 먹어", Constraint.FAMILY),
        ("팀원들과 함께 할 수 있는 거", Constraint.COWORKERS),
        ("엄마가 같이 해 보자고 하셔서", Constraint.FAMILY),
        ("아이가 둘 있어서 주말에 할 만한 거", Constraint.FAMILY),  # having them: who one is
    ],
)
def test_the_people_told_doing_something_are_no_company_asked_for(
    message: str, company: Constraint | None
) -> None:
    companies = {Constraint.COWORKERS, Constraint.FAMILY, Constraint.NEIGHBOURS}
    assert set(cued(message)) & companies == ({company} if company else set())


def test_a_clause_giving_a_reason_does_not_add_a_second_place(
    embedder: Embedder, facets: FacetReaders
) -> None:
    message = "집에만 있으니까 답답해서 그런데, 밖에 나가서 하는 걸로는?"
    parts = clauses(message)
    assert len(parts) >= 2
    read = facets.read(message, embedder.embed_queries([message])[0], embedder.embed_queries(parts))
    assert Constraint.OUTSIDE in read.constraints and Constraint.HOME not in read.constraints


@pytest.mark.parametrize(
    ("message", "another"),
    [
        ("딴 분야 없어?", True),
        ("분야 바꿔서 추천해줘", True),
        ("새로운 분야로 넘어가죠", True),
        ("another category 보여줘", True),
        ("완전 다른 걸로", True),
        ("교통 얘기는 질렸고 전혀 상관없는 쪽으로", True),
        ("이 주제 좀 더 알려줘", False),
        ("다른 것도 있어?", False),  # more of the same field
    ],
)
def test_asking_for_another_field_is_read_by_its_words(
    embedder: Embedder, facets: FacetReaders, message: str, another: bool
) -> None:
    assert _read(embedder, facets, message).another is another


@pytest.mark.parametrize(
    ("message", "more"),
    [
        ("여름에 전기 아끼는 방법 또 뭐 있어?", True),
        ("비슷한 걸로 몇 개만 더 알려 주세요", True),
        ("다른 것도 있어?", True),
        ("이런 거 더 없나", True),
        ("상자 말고도 만들 만한 거", True),
        ("두유랑 귀리우유 중에 뭐가 더 나음?", False),  # "더" alone compares
        ("첫 번째로 추천한 거 좀 더 쉽게 설명해 줘", False),
        ("집에서 할 수 있는 걸로", False),
    ],
)
def test_asking_for_more_is_read_by_its_words(
    embedder: Embedder, facets: FacetReaders, message: str, more: bool
) -> None:
    assert _read(embedder, facets, message).more is more


@pytest.mark.parametrize(
    ("message", "free"),
    [
        ("장 볼 때 비닐 안 쓰는 방법", False),  # not spending plastic: no money said
        ("휴대폰 용량이 맨날 꽉 차서 짜증 나", False),
        ("돈 안 드는 걸로 알려 줘", True),
        ("지갑 안 열고 해 볼 만한 건 없어?", True),
        ("공짜로 할 수 있는 거 있어?", True),
        ("비싼 건 빼고", True),
    ],
)
def test_free_is_read_only_where_money_is_said(
    embedder: Embedder, facets: FacetReaders, message: str, free: bool
) -> None:
    read = _read(embedder, facets, message)
    assert (Constraint.FREE in read.constraints) is free


@pytest.mark.parametrize(
    ("message", "place"),
    [
        ("두 번째 거 어떻게 시작해?", 1),
        ("첫번째 거 매일 해야 효과 있나요", 0),
        ("세 번째 챌린지 준비물 뭐야", 2),
        ("마지막꺼 만드는법좀", -1),
        ("맨 처음 방법부터 차근차근 알려줘", 0),
        ("세 개 중에 쉬운 거", None),  # a count, not a place
        ("두부 요리 알려줘", None),
        ("2번은 아이폰에서도 되나요", 1),
        ("1번 거 어떻게 해?", 0),
        ("그 중에 3번", 2),
        ("주 2번 하면 돼?", None),  # how often, not which
        ("한 달에 2번은 해야 해?", None),
        ("2번 해봤어", None),
    ],
)
def test_an_ordinal_names_a_place_in_the_list_shown(message: str, place: int | None) -> None:
    assert ordinal(message) == place


def test_plain_ask_examples_do_not_vote_on_whether_a_message_asks_something() -> None:
    """A plain ask's example ("채식은 뭐부터 시작하면 좋아?") sits nearer a question about its
    field than the question examples do: voted with them, it outvoted the question."""
    from app.chat.constraints import PLAIN, FacetExample, FacetReader
    from app.rag.lexical import LexicalEmbedder

    examples = [
        FacetExample("채식은 뭐부터 시작하면 좋아?", frozenset({PLAIN})),
        FacetExample("채식하면 탄소가 얼마나 줄어?", frozenset({"question"})),
        FacetExample("고기 줄이고 채소 위주로 먹고 싶어", frozenset()),
    ]
    # Cosines to the message: 0.99 (the plain ask), 0.985 (the question), 0.975.
    near = np.array([0.99, 0.985, 0.975], np.float32)
    vectors = np.stack([near, np.sqrt(1 - near**2)], axis=1)
    lexical = LexicalEmbedder()
    words = FacetReader(examples, lexical.embed_queries([e.text for e in examples]))
    message, vector = "채식만 하면 영양이 부족해지지 않아?", np.array([1.0, 0.0], np.float32)

    def read(questions: FacetReader | None) -> Facets:
        readers = FacetReaders(
            FacetReader(examples, vectors),
            words,
            lambda text: lexical.embed_queries([text])[0],
            questions=questions,
        )
        return readers.read(message, vector)

    assert not read(None).question
    assert read(FacetReader(examples[1:], vectors[1:])).question


@pytest.mark.parametrize(
    ("message", "unnamed"),
    [
        ("돈 안 드는 비건 챌린지 알려 줘", "돈 안 드는 거 알려 줘"),
        ("집에서 할 수 있는 에너지절약 챌린지", "집에서 할 수 있는 거"),
        ("혼자 하는 업사이클링 추천", "혼자 하는 거 추천"),
        ("집에서 할 수 있는 환경 챌린지 알려줘", "집에서 할 수 있는 거 알려줘"),  # called
        ("회사에서 할 수 있는 쓰레기 줄이기 챌린지", "회사에서 할 수 있는 거"),
        ("비건 챌린지 추천해줘", None),  # nothing else said: no other embedding
        ("돈 안 드는 걸로", None),  # no field named
    ],
)
def test_a_message_naming_its_field_is_read_without_it_too(
    message: str, unnamed: str | None
) -> None:
    assert without_field(message) == unnamed


@pytest.mark.parametrize(
    ("message", "constraint"),
    [
        ("돈 안 드는 비건 챌린지 알려 줘", Constraint.FREE),
        ("가족이랑 할 만한 플로깅 챌린지", Constraint.FAMILY),
        ("쉬운 업사이클 챌린지 하나 알려줘", Constraint.EASY),
        ("가족이랑 하는 환경 챌린지 있어?", Constraint.FAMILY),
        ("혼자 할 수 있는 채식 챌린지", Constraint.ALONE),
    ],
)
def test_a_constraint_beside_a_fields_name_is_read(
    embedder: Embedder, facets: FacetReaders, message: str, constraint: Constraint
) -> None:
    """The field's name drowns the constraint in the whole's embedding (where the words do
    not say it: :func:`cued`); read without the name too (as the planner does), the
    constraint is there, and the message is not a plain ask."""
    whole = embedder.embed_queries([message])[0]
    text = without_field(message)
    assert text is not None
    read = facets.read(message, whole, unnamed=embedder.embed_queries([text])[0])
    assert constraint in read.constraints and not read.plain


@pytest.mark.parametrize(
    ("message", "read", "not_read"),
    [
        # The vote on the clause read "moving" ("~할 수 있는 걸로" sits near "출장 가서도 …").
        (
            "디지털 얘긴 이 정도면 됐고, 이번엔 먹는 거 쪽으로 봐 줘. 현장에서 챙길 수 있는 걸로",
            {Constraint.WORK},
            {Constraint.MOVING},
        ),
        # The company said last is the one asked for; the one before it was the reason.
        (
            "혼자 주워서는 끝이 없더라. 마을 분들이랑 다 같이 치울 방법 없을까",
            {Constraint.NEIGHBOURS},
            {Constraint.ALONE},
        ),
        (
            "쓰레기 얘기는 이쯤 하고, 완전 딴 걸로 주말에 애들 데리고 바깥에서 할 만한 거 있을까?",
            {Constraint.FAMILY, Constraint.OUTSIDE},
            set(),
        ),
        # A question's words name its subject, not where to do it; a phone is not a child.
        ("버스 타면 탄소가 얼마나 줄어?", set(), {Constraint.MOVING}),
        ("2번은 아이폰에서도 되나요", set(), {Constraint.FAMILY}),
        ("그중에 제일 부담 없이 바로 시작할 수 있는 건 뭐야?", {Constraint.EASY}, set()),
        # A second constraint of another kind, said in words the vote drowns (ease 0.0 there).
        ("혼자서 간단히 해 볼 만한 다른 거", {Constraint.ALONE, Constraint.EASY}, set()),
        (
            "동료들이랑 점심시간에 금방 할 수 있는 거 또 있어?",
            {Constraint.COWORKERS, Constraint.EASY},
            set(),
        ),
        # A place said in words the vote drowns beside a company and a cost (outside 0.0).
        (
            "주말에 할머니 모시고 바깥에서 돈 안 들이고 할 만한 거",
            {Constraint.FAMILY, Constraint.FREE, Constraint.OUTSIDE},
            set(),
        ),
        # The company said last is the one asked for, whatever the vote reads.
        (
            "동료들이랑은 이미 해 봤으니까 이번엔 개인적으로 할 만한 거",
            {Constraint.ALONE},
            {Constraint.COWORKERS},
        ),
        # The vote reads a place no word says (home); the words say going out.
        (
            "주말에 식구들 데리고 어디 놀러 갈 때 해 볼 만한 건 없어?",
            {Constraint.FAMILY, Constraint.MOVING},
            {Constraint.HOME},
        ),
    ],
)
def test_a_place_or_company_said_in_words_is_read_where_the_vote_blurs_it(
    embedder: Embedder,
    facets: FacetReaders,
    message: str,
    read: set[Constraint],
    not_read: set[Constraint],
) -> None:
    parts = clauses(message)
    vectors = embedder.embed_queries([message, *parts])
    said = facets.read(message, vectors[0], list(vectors[1:])).constraints
    assert read <= said and not (not_read & said), said


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("집에서는 답답한데, 밖에서 할 거", {Constraint.HOME: 3, Constraint.OUTSIDE: 14}),
        ("아이랑 버스 타고", {Constraint.FAMILY: 2, Constraint.MOVING: 9}),
        ("딸기 농사 짓는데 녹차로 바꾸면", {}),  # a strawberry, a tea: no daughter, no car
        ("나만의 텀블러 꾸미기", {}),
        ("출장 가게 되면 할 만한 거", {Constraint.MOVING: 2}),  # going, not a shop
        ("주말 나들이 갈 때", {Constraint.MOVING: 6}),
        ("그냥 방 안에서", {Constraint.HOME: 6}),
        ("당분간 집에 있으면서", {Constraint.HOME: 8}),
        ("가게까지 가는 건 귀찮아", {Constraint.EASY: 12}),  # a shop gone to, not worked in
        ("금방 지치더라", {}),  # tiring soon, not quick to do
        ("지갑 열 일 없는 걸로", {Constraint.FREE: 8}),
        ("애들 데리고 나가서", {Constraint.FAMILY: 2, Constraint.OUTSIDE: 9}),
        ("밖에 나가서 하는 걸로", {Constraint.OUTSIDE: 5}),
        ("품 적게 들이고", {Constraint.EASY: 6}),
        ("손주들 오면 같이", {Constraint.FAMILY: 2}),
        ("개인적으로 해 볼", {Constraint.ALONE: 5}),
        ("같이 일하는 사람들이랑", {Constraint.COWORKERS: 9}),
        ("힘 안 드는 걸로", {Constraint.EASY: 5}),
        ("돈 드는 건 좀 그래", {Constraint.FREE: 8}),
        ("옆집이랑", {Constraint.NEIGHBOURS: 2}),
        ("금방 심심해지더라", {}),  # bored soon, not quick to do
        ("보기만 하니까 금방 까먹어요", {}),  # forgotten soon, not quick to do
        ("집에 있으면 심심해", {}),  # a reason, not where
        ("집에 있으면서", {Constraint.HOME: 4}),
        ("애들이랑 놀러 갈 때", {Constraint.FAMILY: 2, Constraint.MOVING: 9}),
        ("아이폰 사진 정리", {}),
        ("애가 둘이라 그런지", {Constraint.FAMILY: 2}),  # a child, not "애매하다"
        ("좀 애매한데", {}),
        ("혼자 잠깐 할 때", {Constraint.ALONE: 2, Constraint.EASY: 5}),
        ("비용 부담 없는 걸로", {Constraint.FREE: 7}),  # the cost's burden, not the effort's
        ("돈 좀 들어도 괜찮아, 비싸도 되니까", {}),
        ("장비 없이 혼자", {Constraint.FREE: 4, Constraint.ALONE: 8}),
        ("회식이 잦은데", {Constraint.COWORKERS: 2}),
        ("잠깐만, 그거 좀 쉽게 설명해 줘", {}),
        ("그중에 하나만 골라 줘", {}),  # one of them, not "only me"
        ("시간 얼마 안 걸리는 걸로", {Constraint.EASY: 10}),
        ("너무 빡세지 않은 거", {Constraint.EASY: 8}),
        ("돈은 안 들었으면 해", {Constraint.FREE: 4}),
        ("나만 하는 거 말고", {Constraint.ALONE: 2}),
        ("평일 출근길이나 주말에", {Constraint.MOVING: 6}),  # a way to work, whatever follows
        ("장사 말고 이웃들이랑", {Constraint.WORK: 2, Constraint.NEIGHBOURS: 8}),  # a shop's work
        (
            "주말엔 애들 보느라 바쁘고, 버스 안에서",
            {Constraint.MOVING: 18},
        ),  # a reason, not company
        ("애들이랑 할 건데 일하느라 바빠서", {Constraint.FAMILY: 2}),
        ("지하철 안에서 틈틈이", {Constraint.MOVING: 3}),  # in spare moments: when, not how hard
        ("저희 선생님들끼리 교무실에서", {Constraint.WORK: 13}),
        ("회사 근처에서 점심 먹고", {Constraint.OUTSIDE: 7}),  # out around the office
        ("집 주변에서 할 만한 거", {Constraint.OUTSIDE: 6}),
    ],
)
def test_constraints_are_found_in_their_words_and_not_in_look_alikes(
    message: str, said: dict[Constraint, int]
) -> None:
    assert cued(message) == said


@pytest.mark.parametrize(
    ("message", "constraint"),
    [
        ("현장에서 챙길 수 있는 걸로", Constraint.WORK),
        ("지갑 안 열고 할 수 있는 거", Constraint.FREE),
    ],
)
def test_in_a_burst_a_constraint_said_in_words_is_read_by_the_words_vote_too(
    facets: FacetReaders, message: str, constraint: Constraint
) -> None:
    assert constraint in facets.read(message, None).constraints


@pytest.mark.parametrize(
    ("message", "office"),
    [
        ("회사에서 할 만한 거 있어?", True),
        ("사무실에서 할 수 있는 챌린지 추천해 줘", True),
        ("직장에서 해 볼 만한 거", True),
        ("가게에서 할 만한 거 있을까요", False),  # a shop's work is not an office's
        ("현장에서 일하는데 할 수 있는 거 있어?", False),
    ],
)
def test_work_told_as_an_offices_is_read_so(message: str, office: bool) -> None:
    assert says_an_office(message) is office


@pytest.mark.parametrize(
    ("message", "shop"),
    [
        ("동네에서 작은 카페를 하고 있는데 가게에서 해볼 수 있는 게 있을까요?", True),
        ("조그만 식당 운영 중인데", True),
        ("바닷가 작은 동네에서 횟집을 하고 있어요. 장사하면서 할 만한 거", True),
        ("편의점 알바하는데 할만한거", True),
        ("우리 가게 손님들이랑 할 수 있는 거", True),
        ("작은 옷가게 사장인데 뭐부터 하면 좋을까요", True),
        ("치킨집 사장이에요", True),
        ("카페에서 음료 살 때 쓰레기가 많아", False),  # a shop visited, not kept
        ("회사 사장님이 환경에 관심이 많아", False),  # the boss, not a shop
        ("제로웨이스트 가게에서 필요한 만큼 사기", False),
        ("회사에서 할 만한 거 있어?", False),
    ],
)
def test_work_told_as_a_shops_is_read_so(message: str, shop: bool) -> None:
    assert says_a_shop(message) is shop


@pytest.mark.parametrize(
    ("message", "site"),
    [
        ("자동차 부품공장에서 2교대로 생산직 하고 있어요 회사에서 할 수 있는 거", True),
        ("식품 공장 다니는데 할 만한 거 있어?", True),
        ("건설 현장에서 일해요", True),
        ("현장 반장인데 우리 팀 작업자들이랑 같이 해볼 만한 거", True),
        ("현장에서 일하는데 뭐 할 수 있을까", True),
        ("아이랑 공장 견학 가는데 할 만한 거", False),  # a visit
        ("현장 체험학습 가는 날 할 수 있는 거", False),
        ("회사에서 할 만한 거 있어?", False),
        ("사무실에서 일하는데", False),
    ],
)
def test_work_told_as_a_sites_is_read_so(message: str, site: bool) -> None:
    assert says_a_site(message) is site


#: A message telling who the user is beyond a place or a work, and the personas read from it.
PERSONAS_TOLD = [
    ("섬에서 아버지랑 같이 배 타는 30대입니다", {"as:fishing"}),
    ("고기 잡으면서 할 수 있는 환경 보호", {"as:fishing"}),
    ("경북에서 사과 농사 짓고 있습니다", {"as:farming"}),
    ("비닐하우스에서 딸기 키워요", {"as:farming"}),
    ("주말마다 텃밭 가꾸는 재미로 살아요", {"as:garden"}),
    ("마당 있는 주택으로 이사했어요", {"as:garden"}),
    ("인테리어 현장 다니면서 자재 남는 게 아까워요", {"as:construction"}),
    ("영업이라 출장이 잦아요", {"as:trip"}),
    ("작은 카페를 하고 있는데", {"as:shop"}),
    ("스타트업 개발자인데요 서버비가 늘어요", {"as:it"}),
    ("말티즈 한 마리 키워요", {"as:pet"}),
    ("강아지 산책시키는데 쓰레기가 많아요", {"as:pet"}),
    ("주말마다 서핑하러 가요", {"as:watersports"}),
    ("애들 등하교 시키고 출근해요", {"as:parent"}),
    ("아이가 둘이라 빨래가 많아요", {"as:parent"}),
    ("집에 식세기 있어요", {"as:dishwasher"}),
    ("산림 일 하는데 벌목 현장 정리가 늘 고민", {"as:forestry"}),
    ("1톤 트럭 몰고 배송 다녀요", {"as:driver"}),
    ("회사에서 행사 기획을 맡았어요", {"as:marketing"}),
    ("주말엔 클라이밍 다녀요", {"as:climbing"}),
    ("담배 피우는데 꽁초 버릴 데가 없어요", {"as:smoker"}),
    # none: no trade, no pet, no child told
    ("아이디어 좀 주세요", set()),
    ("딸기 라떼 마실 때 빨대 안 쓰고 싶어", set()),
    ("배가 고파서 배달 시켰는데 용기가 너무 많아", set()),
    ("바닷가 놀러 갔는데 쓰레기가 많더라", set()),
    ("고양이 키우는데 할 만한 거", set()),
    ("아이랑 농장 체험 갔는데 쓰레기가 많더라", {"as:parent"}),  # a visit: no farmer
    ("동네 어르신들이 마당에서 쓰레기를 태우시더라고요", set()),  # another's yard
    ("정원 초과라 못 탔어요", set()),
    ("양파 그물망은 어떻게 다시 써?", set()),
    ("좀 더 건설적인 방법 없을까", set()),
    ("현장 반장인데 우리 팀 작업자들이랑 할 만한 거", set()),  # a site's, not a building's
]


@pytest.mark.parametrize(("message", "personas"), PERSONAS_TOLD)
def test_who_the_user_is_beyond_a_place_or_a_work_is_read_in_words(
    message: str, personas: set[str]
) -> None:
    assert personas_told(message) == personas


def test_every_persona_the_catalogue_names_is_read() -> None:
    read = {
        label.removeprefix("as:")
        for message, _ in PERSONAS_TOLD
        for label in personas_told(message)
    }
    assert read == PERSONAS


def test_personas_told_join_those_told_before() -> None:
    told = told_so_far(Facets(location="바닷가"), _state(), {"as:pet"})
    told = told_so_far(Facets(location="농촌"), _state(told=told), {"as:farming"})
    assert told == ("as:farming", "as:pet", "at:농촌")
    situation = situation_of(_state(told=told), told)
    assert situation.personas == {"as:farming", "as:pet"} and situation.location == "농촌"
    assert "job:현장직" not in situation.labels and "at:농촌" in situation.labels


@pytest.mark.parametrize(
    ("message", "place"),
    [
        ("은퇴하고 충청도 시골로 내려온 지 2년 됐어요. 근데 동네 어르신들이 …", "농촌"),
        ("귀농해서 밭농사 짓고 있어요", "농촌"),
        ("바닷가 근처로 이사 왔어요", "바닷가"),
        ("섬에 살아서 택배가 오래 걸려요", "바닷가"),
        ("강원도 산골에 살고 있는데", "산"),
        ("바닷가 놀러 갔는데 쓰레기가 많더라", None),  # a visit
        ("시골 할머니 댁에 갔는데", None),
        ("서울 아파트에 살아요", None),  # the city: left to the vote
    ],
)
def test_the_place_the_user_lives_in_is_read_in_words(message: str, place: str | None) -> None:
    assert place_lived(message) == place


@pytest.mark.parametrize(
    ("message", "done"),
    [
        (
            "수저 안 받기는 이미 하고 있어요! 배달 횟수를 줄이는 쪽으로는",
            "수저 안 받기는 이미 하고 있어요",
        ),
        ("저 이미 버스 타고 다녀요 ㅋㅋ 다른 거요", "저 이미 버스 타고 다녀요"),
        ("장바구니 들고 다닌 지 오래됐어요. 다른 거", "장바구니 들고 다닌 지 오래됐어요"),
        ("텀블러는 벌써 쓰고 있어요", "텀블러는 벌써 쓰고 있어요"),
        ("이미 있는 모임에 그냥 가서 끼면 되는 거요", ""),  # something that exists, no habit
        ("책은 집에 이미 많아요", ""),
        ("이미 해변에 쓰레기가 너무 많아요", ""),  # "해" begins no verb there
        ("이미 해 봤어요. 다른 거", "이미 해 봤어요"),
        ("텀블러 쓰는 거 어때?", ""),
        ("이미지 파일 정리하는 법", ""),
    ],
)
def test_what_the_user_already_does_is_read_in_words(message: str, done: str) -> None:
    assert already_done(message) == done


@pytest.mark.parametrize(
    ("message", "who"),
    [
        ("대학생 추천좀", True),
        ("간호사인데 할 만한 거 있어?", True),
        ("정년퇴직했는데 뭐 할까요", True),
        ("택시 운전 10년째인데 나도 할 수 있는 거 있나", True),  # a trade, by driving for it
        ("미용사로 일하는데 할 만한 거", True),
        ("택시 타고 다니는데 맛집 추천좀", False),  # a passenger
        ("맛집 추천좀", False),
        ("기후 쪽 대학원 추천좀", False),  # a school, not who asks
    ],
)
def test_who_the_user_is_said_as_a_person_is_read(message: str, who: bool) -> None:
    assert tells_who(message) is who


def test_a_first_ask_refused_that_says_who_asks_is_served_as_asking_for_anything() -> None:
    """ "대학생 추천좀" had been refused as off the topic: who asks, asking for something. Not
    "맛집 추천좀", and not past the first turn (a conversation's refusal stands as read)."""
    from app.chat.follow_up import asked_as_who_one_is

    refused, first = Intent(IntentKind.OFF_TOPIC), SessionState("s")
    assert asked_as_who_one_is("대학생 추천좀", refused, first) == Intent(IntentKind.ASK)
    assert asked_as_who_one_is("맛집 추천좀", refused, first) == refused
    assert asked_as_who_one_is("대학생 추천좀", refused, _state()) == refused
    asked = Intent(IntentKind.SWITCH, Category.VEGAN)
    assert asked_as_who_one_is("대학생인데 비건 추천좀", asked, first) == asked


@pytest.mark.parametrize(
    ("message", "again"),
    [
        ("처음 거로 다시 보여줘", True),
        ("처음에 추천해 준 거 다시 볼 수 있어?", True),
        ("맨 처음 것들 다시 알려 줘", True),
        ("처음에 얘기한 거 다시 보여줘", True),
        ("처음에 말씀하신 것들 다시 알려 줄래요", True),
        ("처음에 나온 거 다시", True),
        ("처음 해 보는 거라 다시 물어볼게", False),  # a first time, not the first answer
        ("처음 카테고리로 돌아가자", False),  # the field, not the ones shown
        ("처음 얘기로 다시 가자", False),
        ("첫 번째 거 다시 설명해 줘", False),  # a place in the list shown
        ("처음 시작하는 거 추천해 줘", False),
    ],
)
def test_the_first_ones_asked_for_again(message: str, again: bool) -> None:
    assert asks_to_see_again(message) is again


@pytest.mark.parametrize(
    ("message", "aside"),
    [
        ("이거 말고", True),
        ("그건 빼고 딴 거", True),
        ("그거 말구", True),
        ("첫 번째 거 말고", True),  # an ordinal points at one shown too
        ("두번째꺼 빼고 보여 줘", True),
        ("두 번째 거 어떻게 해?", False),
        ("이 주제 말고", False),  # the field, not the one shown
        ("플로깅 말고 다른 거", False),
    ],
)
def test_setting_aside_the_one_shown(message: str, aside: bool) -> None:
    assert sets_aside_the_one_shown(message) is aside


@pytest.mark.parametrize(
    ("message", "trade"),
    [
        ("개인택시 12년째 하고 있는 50대입니다", DRIVING),
        ("택배 기사입니다. 하루 종일 트럭 타고 다녀요", DRIVING),
        ("화물차 운전하는데 할 만한 거", DRIVING),
        ("하루 종일 차 안에 있는 사람도 할 수 있는 거", DRIVING),
        ("운전만 하루 120km씩 해요", DRIVING),
        ("영업직이라 차 끌고 거래처 돌아요", DRIVING),
        ("동네에서 작은 카페를 하고 있는데", SHOP),  # a shop before all
        ("택시 타고 다니는데 맛집 추천좀", None),  # a ride taken
        ("운전할 때 할 수 있는 거", None),  # a drive now and then
        ("차로 출근해요", None),
        ("버스 타고 출근하는데", None),
        ("환경 뉴스 기사인데 이거 진짜예요?", None),  # an article
    ],
)
def test_work_told_in_words_is_a_trade_the_situation_firsts_name(
    message: str, trade: str | None
) -> None:
    assert trade_told(message) == trade


@pytest.mark.parametrize(
    ("message", "said"),
    [
        # Said in words: kept.
        ("회사 안에서 할 수 있는 건 없나", {Constraint.WORK}),
        ("공장 안에서 일하면서 할 수 있는 거 있을까요", {Constraint.WORK}),
        ("제 자리에서 저 혼자 할 수 있는 거요", {Constraint.WORK, Constraint.ALONE}),
        ("재택근무 하는데 집에서 할 만한 거", {Constraint.HOME}),
        ("캠핑장 가서 애들이랑 같이 해볼 만한 건", {Constraint.OUTSIDE, Constraint.FAMILY}),
        ("마을 어르신들이랑 같이 할 수 있는 환경 활동", {Constraint.NEIGHBOURS}),
        ("쉽고 돈 안 드는 거 없나요", {Constraint.EASY, Constraint.FREE}),
        ("손 하나 까딱 안 해도 되는 설정 같은 건 없나", {Constraint.EASY}),
        ("손님 없을 때 저 혼자 후딱 할 수 있는 정도로요", {Constraint.ALONE, Constraint.EASY}),
        ("현지에서 돈 더 쓰는 건 싫구요", {Constraint.FREE}),
        ("주말에 같이 나가서 하는 거", {Constraint.OUTSIDE}),
        # Who the user is: living alone, an office worker by name.
        ("혼자 사는 직장인인데 배달을 자주 시켜요", set()),
        ("자취 3년차인데 욕실에 빈 통이 쌓여요", set()),
        # A pet called "애": no family asked for.
        ("강아지 산책시키는데 애가 자꾸 쓰레기를 주워먹으려고 해요", {Constraint.OUTSIDE}),
        ("애가 자꾸 쓰레기를 주워먹으려고 해요", {Constraint.FAMILY}),
    ],
)
def test_what_a_first_ask_demands_is_what_its_words_say(
    message: str, said: set[Constraint]
) -> None:
    assert said_in_words(message, Constraint) == said
