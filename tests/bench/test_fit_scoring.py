"""The fit bench's scores (bench/fit_scoring.py) on fixed answers: the first challenge, the
share that fits, a follow-up's rule (with the 'none fits, said plainly' path), a recommend
that speaks to the turn, a question answered, and openings shared across requests."""

from __future__ import annotations

from typing import Any

from bench.fit_scoring import (
    answered,
    answered_plainly,
    first_fits,
    fitting,
    openings_distinct,
    rule_kept,
    says_none_fits,
    says_not_held,
    shown_ids,
    speaks,
    stems,
    unique_openings,
    where_missed,
)
from bench.reader_checks import Turn

TUMBLER = "텀블러로 음료 마시기"  # zw-001
RETURN_CUP = "반납형 다회용컵 이용하기"  # zw-024
OFFICE_CUP = "사무실에 내 컵과 수저 두기"  # zw-009
BATTERY = "폐건전지와 폐형광등은 전용 수거함에"  # zw-022
BATTERY_ANSWER = (
    "건전지에는 다시 쓸 수 있는 금속이 들어 있고, 배터리가 일반 쓰레기에 섞이면 수거 차량이나 "
    "선별장에서 불이 나는 원인이 되기도 합니다."
)


def _label(**overrides: Any) -> dict[str, Any]:
    label: dict[str, Any] = {
        "kind": "first",
        "constraints": [],
        "relation": None,
        "first_ok": ["zw-001", "zw-024"],
        "ok": ["zw-001", "zw-024", "zw-009"],
        "categories": ["ZERO_WASTE"],
    }
    return label | overrides


def _turn(recommend: str, titles: list[str], message: str | None = "카페 컵 줄이고 싶어") -> Turn:
    items = [{"title": t, "description": "…", "category": "ZERO_WASTE"} for t in titles]
    return Turn(
        message=message,
        display="",
        terminal="close",
        close={"recommend": recommend, "challenges": items},
    )


def test_where_a_first_that_does_not_fit_went_wrong() -> None:
    label = _label()  # zero waste's tumbler and return cup first

    def missed(ids: list[str], pool: list[str] | None = None, **kw: Any) -> str | None:
        kw.setdefault("before", None)
        kw.setdefault("earlier", [])
        return where_missed(ids, label, pool=pool or ids, **kw)

    assert missed(["zw-001"]) is None  # it fits
    assert where_missed([], label, pool=[], before=None, earlier=[]) is None  # nothing shown
    # The field: kept when only another's fit, left when its own did, or another wrong one.
    assert missed(["es-001"], before="ENERGY_SAVING") == "stayed"
    assert missed(["es-001"], before="ZERO_WASTE") == "left"
    assert missed(["es-001"]) == "field"
    # The right field: a fitting one ranked below, never searched, shown before, or unmet.
    assert missed(["zw-009"], ["zw-009", "zw-005", "zw-024"]) == "ranked"
    assert missed(["zw-009"]) == "searched"
    assert missed(["zw-009"], earlier=["zw-001", "zw-024"]) == "shown"
    unmet = _label(constraints=["work"], first_ok=["zw-024"])  # the return cup is not for work
    assert where_missed(["zw-009"], unmet, pool=["zw-009"], before=None, earlier=[]) == "unmet"


def test_shown_ids_reads_catalogue_titles_and_marks_strangers() -> None:
    items = [{"title": TUMBLER}, {"title": "없는 챌린지"}, {"title": RETURN_CUP}]
    assert shown_ids(items) == ["zw-001", None, "zw-024"]


def test_first_fits_looks_at_the_first_challenge_only() -> None:
    label = _label()
    assert first_fits(["zw-024", "zw-050"], label) is True
    assert first_fits(["zw-009", "zw-001"], label) is False  # fits, but not first
    assert first_fits([], label) is False  # nothing shown where something fits
    assert first_fits([], _label(first_ok=[])) is None


def test_fitting_counts_the_shown_challenges_in_ok() -> None:
    assert fitting(["zw-001", "zw-050", None, "zw-009"], _label()) == 2


def test_a_turn_without_relation_or_constraints_has_no_rule() -> None:
    assert rule_kept(["zw-050"], _label(), "", [], []) is None


def test_new_keeps_its_rule_only_with_unseen_fitting_challenges() -> None:
    label = _label(kind="critique", relation="new", constraints=["easy"])
    assert rule_kept(["zw-024", "zw-009"], label, "", ["zw-001"], ["zw-001"]) is True
    assert rule_kept(["zw-024", "zw-001"], label, "", ["zw-001"], ["zw-001"]) is False  # again
    assert rule_kept(["zw-024", "zw-050"], label, "", [], []) is False  # one breaks the constraint


def test_among_stays_within_the_previous_answer() -> None:
    label = _label(kind="among", relation="among", constraints=["free"])
    previous = ["zw-001", "zw-024", "zw-050"]
    assert rule_kept(["zw-024"], label, "", previous, previous) is True
    assert rule_kept(["zw-009"], label, "", [*previous, "zw-009"], previous) is False


def test_none_fitting_is_kept_only_when_the_recommend_says_so_plainly() -> None:
    label = _label(kind="critique", relation="new", constraints=["free"])
    plain = "돈이 전혀 안 드는 챌린지는 더는 없어요. 대신 가장 가까운 걸 골라 봤어요."
    assert rule_kept(["zw-050"], label, plain, [], []) is True
    assert rule_kept([], label, "조건에 맞는 챌린지를 찾지 못했어요.", [], []) is True
    assert rule_kept(["zw-050"], label, "이것도 좋아요. 부담이 없어요.", [], []) is False
    assert rule_kept([], label, "다른 것도 살펴보세요.", [], []) is False
    # A mixed answer (one fits, one does not) is not rescued by saying so.
    assert rule_kept(["zw-001", "zw-050"], label, plain, [], []) is False


def test_says_none_fits_needs_a_fit_word_with_the_negation() -> None:
    assert says_none_fits("집에서 할 수 있는 건 딱 맞는 게 없지만, 가까운 걸 골라 봤어요.")
    assert says_none_fits("혼자서 할 만한 챌린지는 못 찾았어요.")
    assert not says_none_fits("돈 들 걱정은 없어요.")
    assert not says_none_fits("부담이 없어요. 바로 시작해 보세요.")


def test_speaks_by_naming_the_first_challenge() -> None:
    turn = _turn("텀블러 하나만 챙겨도 컵 쓰레기가 확 줄어요.", [TUMBLER])
    assert speaks(turn, _label(), [])


def test_speaks_by_naming_the_concern_a_constraint_or_the_situation() -> None:
    label = _label(constraints=["free"])
    concern = _turn("카페에 자주 가신다면 이렇게 시작해 보세요.", [OFFICE_CUP])
    assert speaks(concern, _label(), [])  # "카페" from the message
    constraint = _turn("돈 한 푼 안 들이고 할 수 있는 걸 모았어요.", [OFFICE_CUP], "더 없어?")
    assert speaks(constraint, label, [])
    situation = _turn("바닷가에 사시니 이런 것도 좋아요.", [OFFICE_CUP], "다른 거")
    assert speaks(situation, _label(), ["바닷가", "사무직"])


def test_a_template_that_names_nothing_does_not_speak() -> None:
    turn = _turn("말씀하신 고민에 어울리는 제로웨이스트 챌린지를 골라 봤어요.", [OFFICE_CUP])
    assert not speaks(turn, _label(), [])


def test_the_message_said_back_does_not_speak() -> None:
    message = "카페 갈 때마다 일회용 컵 쓰는 게 찔려"
    turn = _turn("카페 갈 때마다 일회용 컵 쓰는 게 찔리시는군요.", [TUMBLER], message)
    assert not speaks(turn, _label(), [])


def test_stems_drop_fillers_and_keep_content_words() -> None:
    assert stems("텀블러는 어떻게 씻어야 해?") == {"텀블", "씻어"}
    assert "환경" not in stems("환경 챌린지 추천해 줘")


def test_a_question_is_answered_with_the_catalogue_sentence_and_its_challenge_first() -> None:
    label = _label(kind="question", first_ok=["zw-022"], ok=["zw-022"], answer_ids=["zw-022"])
    recommend = f"일반 쓰레기로 버리면 안 돼요. {BATTERY_ANSWER} 전용 수거함을 써 보세요."
    assert answered(["zw-022"], label, recommend) is True
    assert answered(["zw-012", "zw-022"], label, recommend) is False  # not first
    paraphrase = "건전지엔 금속이 있어서 불이 날 수도 있어요."
    assert answered(["zw-022"], label, paraphrase) is False  # not the catalogue's sentence


def test_a_question_the_catalogue_answers_is_not_hedged_as_one_it_cannot() -> None:
    label = _label(kind="question", first_ok=["zw-022"], ok=["zw-022"], answer_ids=["zw-022"])
    plain = f"{BATTERY_ANSWER} 이 챌린지부터 시작해 보세요."
    hedged = f"그 질문에 꼭 맞는 답은 제가 가진 자료에 담겨 있지 않지만, {BATTERY_ANSWER}"
    assert answered(["zw-022"], label, hedged) is True
    assert answered_plainly(["zw-022"], label, hedged) is False
    assert answered_plainly(["zw-022"], label, plain) is True
    not_held = _label(kind="question", answer_ids=[])
    honest = "텀블러 세척법은 제가 가진 챌린지 안내에 담겨 있지 않아요."
    assert answered_plainly(["zw-001"], not_held, honest) is True
    assert answered_plainly(["zw-001"], _label(), "아무 말") is None


def test_a_question_the_catalogue_cannot_answer_must_say_so() -> None:
    label = _label(kind="question", answer_ids=[])
    honest = "텀블러 세척법은 제가 가진 챌린지 안내에 담겨 있지 않아요. 대신 이런 걸 권해요."
    assert answered(["zw-001"], label, honest) is True
    assert answered(["zw-001"], label, "텀블러로 컵 쓰레기를 줄여 보세요.") is False
    assert says_not_held("그 방법에 대한 정보는 따로 없어요.")
    assert not says_not_held("걱정 없어요. 바로 해 보세요.")


def test_answered_is_none_for_a_turn_that_is_not_a_question() -> None:
    assert answered(["zw-001"], _label(), "아무 말") is None


def test_openings_shared_by_different_requests_are_not_distinct() -> None:
    answers = [
        ("컵 줄이기", "말씀하신 고민에 어울리는 챌린지예요. 텀블러부터."),
        ("전기 아끼기", "말씀하신 고민에 어울리는 챌린지예요. 멀티탭부터."),
        ("옷 줄이기", "옷장을 먼저 열어 볼까요? 적어 두면 좋아요."),
        ("옷 줄이기", "옷장을 먼저 열어 볼까요? 같은 요청이라 같은 시작."),
        ("빈 답", ""),
    ]
    assert unique_openings(answers) == [False, False, True, True, None]
    assert openings_distinct(answers) == 0.5


def test_stems_cut_endings_and_skip_words_every_answer_uses() -> None:
    assert "원룸" in stems("혼자 사는 원룸인데")
    assert stems("해변을 걷거든") == {"해변"}  # a one-syllable verb stem is no word
    assert "쓰레" not in stems("쓰레기가 한가득이야")  # most catalogue texts say it


def test_a_generic_sentence_that_shares_only_a_common_word_does_not_speak() -> None:
    message = "배달 시킬 때마다 쓰레기가 한가득이야"
    recommend = "작은 습관 하나가 버려지는 쓰레기를 눈에 띄게 줄여 줘요."
    assert not speaks(_turn(recommend, [OFFICE_CUP], message), _label(), [])
    assert speaks(_turn("배달 앱 설정부터 바꿔 보세요.", [OFFICE_CUP], message), _label(), [])


def test_the_rule_by_traits_reads_the_catalogues_traits_not_the_topic() -> None:
    from bench.fit_scoring import catalogue_traits, rule_by_traits, satisfies_by_traits

    traits = catalogue_traits()
    free = [i for i, row in traits.items() if row["cost"] == "free"][:2]
    paid = next(i for i, row in traits.items() if row["cost"] != "free")
    label = _label(kind="critique", relation="new", constraints=["free"], ok=[])
    assert all(satisfies_by_traits(i, ["free"]) for i in free)
    assert not satisfies_by_traits(paid, ["free"]) and not satisfies_by_traits(None, ["free"])
    # Outside ``ok`` (the topic) but free: the rule is kept; rule_kept says otherwise.
    assert rule_by_traits(free, label, "", [], []) is True
    assert rule_kept(free, label, "", [], []) is False
    assert rule_by_traits([*free, paid], label, "", [], []) is False
    assert rule_by_traits(free, label, "", [free[0]], []) is False  # shown again
    home = next(i for i, row in traits.items() if "home" in row["places"])
    assert satisfies_by_traits(home, ["home"])
