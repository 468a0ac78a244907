"""Ranking and a question's answer, on made-up catalogue documents: constraints first (the
nearest when none satisfies them, said so), a narrow persona after what anyone can do when the
situation is unknown, a situation told in words lifting what is tagged for it; the answer is a
catalogue sentence, exactly, or nothing."""

from __future__ import annotations

import numpy as np
import pytest

from app.chat.answers import SentenceBank, find_answer, sentences_of
from app.chat.constraints import Constraint
from app.chat.fit import ASK_WEIGHT, WORDS_WEIGHT, FitBank, Words
from app.chat.ranking import Ranked, Situation, across_fields, rank
from app.chat.told import already_done
from app.domain.categories import Category
from app.rag.corpus import Document, Traits
from app.rag.retriever import Hit


def _hit(
    doc_id: str,
    *,
    effort: str = "medium",
    cost: str = "low",
    places: tuple[str, ...] = ("home",),
    anyone: bool = True,
    locations: tuple[str, ...] = ("도시",),
    work_types: tuple[str, ...] = ("사무직",),
    body: str = "설명 한 문장입니다. 두 번째 문장입니다.",
    title: str = "",
    starter: int | None = None,
    category: Category = Category.ZERO_WASTE,
    persona: tuple[str, ...] = (),
) -> Hit:
    traits = Traits(
        effort, cost, frozenset(places), frozenset({"alone"}), anyone, starter, frozenset(persona)
    )
    document = Document(
        doc_id,
        title or f"챌린지 {doc_id}",
        body,
        category,
        locations,
        work_types,
        (),
        "",
        traits,
    )
    return Hit(document, 0.5)


def _ids(ranked: Ranked) -> list[str]:
    return [hit.document.id for hit in ranked.hits]


def test_a_subject_spanning_fields_is_answered_from_every_field_its_search_puts_above() -> None:
    """The field's first stays first; another field's challenge that the message's own search
    of every field puts above the field's next ones comes before them; one shown before, one
    not meeting the constraints, one for a narrow persona the user is not known to be, and
    one below the few nearest, do not."""
    up = Category.UPCYCLING
    field = Ranked((_hit("zw-1"), _hit("zw-2"), _hit("zw-3")))
    nearest = [
        _hit("zw-1"),
        _hit("up-1", category=up),
        _hit("up-shown", category=up),
        _hit("up-paid", category=up, cost="some"),
        _hit("up-boat", category=up, anyone=False, locations=("바닷가",), persona=("at:바닷가",)),
        _hit("zw-2"),
        _hit("up-far", category=up),
    ]
    kept = across_fields(field, nearest, shown={"up-shown"}, constraints=(), top=7)
    assert _ids(kept) == ["zw-1", "up-1", "up-paid", "zw-2", "up-far", "zw-3"]
    free = across_fields(field, nearest, constraints={Constraint.FREE}, top=7)
    assert _ids(free) == ["zw-1", "zw-2", "zw-3"]  # none of the others costs nothing
    seaside = Situation(location="바닷가")
    told = across_fields(field, nearest, shown={"up-shown"}, situation=seaside, top=7)
    assert _ids(told)[:4] == ["zw-1", "up-1", "up-paid", "up-boat"]
    assert _ids(across_fields(field, nearest, top=1)) == ["zw-1", "zw-2", "zw-3"]
    unmet = Ranked(field.hits, unmet=True)  # the nearest to constraints none meets: as it is
    assert across_fields(unmet, nearest) == unmet


def test_constraints_keep_only_what_satisfies_them() -> None:
    hits = [_hit("a"), _hit("b", cost="free"), _hit("c", cost="free", effort="easy")]
    assert _ids(rank(hits, constraints={Constraint.FREE})) == ["b", "c"]
    assert _ids(rank(hits, constraints={Constraint.FREE, Constraint.EASY})) == ["c"]
    assert not rank(hits, constraints={Constraint.FREE}).unmet


def test_when_none_satisfies_them_the_nearest_come_first_and_it_is_said() -> None:
    hits = [_hit("a"), _hit("b", cost="free"), _hit("c", places=("outside",))]
    ranked = rank(hits, constraints={Constraint.FREE, Constraint.OUTSIDE})
    assert ranked.unmet and set(_ids(ranked)[:2]) == {"b", "c"} and _ids(ranked)[2] == "a"


def test_a_narrow_persona_waits_unless_the_situation_is_known() -> None:
    hits = [_hit("boat", anyone=False, persona=("as:fishing",)), _hit("b"), _hit("c")]
    assert _ids(rank(hits))[0] == "b"
    known = Situation("바닷가", "현장직", given=True)
    assert _ids(rank(hits, situation=known))[0] == "boat"
    boat = _hit("boat", anyone=False, locations=("바닷가",), persona=("as:fishing", "at:바닷가"))
    hits = [boat, _hit("b"), _hit("c")]
    assert _ids(rank(hits, situation=Situation(work_type="현장직")))[0] == "b", "a job alone"
    assert _ids(rank(hits, situation=Situation("바닷가")))[0] == "boat", "its place told"
    told = Situation(personas=frozenset({"as:fishing"}))
    assert _ids(rank(hits, situation=told))[0] == "boat", "its trade told"
    assert _ids(rank(hits, situation=Situation(personas=frozenset({"as:pet"}))))[0] == "b"
    # The job it shares lifts it no nearer: a building-site worker is not on a boat.
    boat = _hit(
        "boat", effort="easy", anyone=False, work_types=("현장직",), persona=("as:fishing",)
    )
    hits = [boat, _hit("b"), _hit("c")]
    assert _ids(rank(hits, situation=Situation(work_type="현장직")))[0] == "b"
    assert _ids(rank(hits, situation=Situation("바닷가", "현장직")))[0] == "b", "nor the sea"


def test_a_narrow_persona_never_opens_while_one_the_user_can_do_lies_near() -> None:
    """However well it fits ("고기 줄이고 채소 위주로" and "조업 도시락에 채식 반찬 한 칸"), a
    challenge for someone the user is not known to be is not first while one the user can do
    lies within three places after it; it is when none does, or when its persona is told."""
    boat = _hit("boat", effort="easy", anyone=False, persona=("as:fishing",))
    fit = {"boat": 0.95, "b": 0.80, "c": 0.79}
    hits = [boat, _hit("b"), _hit("c")]
    assert _ids(rank(hits, fit=fit)) == ["b", "boat", "c"]
    told = Situation(personas=frozenset({"as:fishing"}))
    assert _ids(rank(hits, fit=fit, situation=told))[0] == "boat"
    farms = [_hit(f"farm{n}", anyone=False, persona=("as:farming",)) for n in range(3)]
    near = {"boat": 0.95, "farm0": 0.94, "farm1": 0.93, "farm2": 0.92, "far": 0.5}
    ranked = rank([boat, *farms, _hit("far")], fit=near)
    assert _ids(ranked)[0] == "boat", "none within three places"


def test_a_trade_told_tells_the_place_it_is_carried_on_in() -> None:
    # "농사짓는 마을 어르신들이랑": a village's challenge is the farmer's.
    village = _hit("village", anyone=False, persona=("at:농촌",))
    hits = [village, _hit("b"), _hit("c")]
    assert _ids(rank(hits))[0] == "b"
    farmer = Situation(personas=frozenset({"as:farming"}))
    assert _ids(rank(hits, situation=farmer))[0] == "village"
    assert "at:농촌" not in Situation("도시", personas=frozenset({"as:farming"})).labels


def test_a_jobs_persona_is_known_by_its_job_told() -> None:
    # "외근길 틈새 플로깅": written for someone who goes out to clients; for "영업하느라 출장이
    # 많아" it keeps its place, for a user who told nothing it waits.
    rounds = _hit("rounds", anyone=False, work_types=("영업직",), persona=("job:영업직", "as:trip"))
    hits = [rounds, _hit("b"), _hit("c")]
    assert _ids(rank(hits))[0] == "b"
    assert _ids(rank(hits, situation=Situation(work_type="영업직")))[0] == "rounds"
    assert _ids(rank(hits, situation=Situation(personas=frozenset({"as:trip"}))))[0] == "rounds"
    assert _ids(rank(hits, situation=Situation(work_type="사무직")))[-1] == "rounds"


def test_a_title_saying_what_is_left_aside_comes_last_unless_it_says_what_is_wanted() -> None:
    # "두부 말고 콩으로 …": "두부 만들고 남은 비지로" last, "두부와 콩으로 단백질" kept.
    both = _hit("both", title="두부와 콩으로 단백질 채우기")
    tofu = _hit("tofu", title="두부 만들고 남은 비지로 찌개 끓이기")
    hits = [both, tofu, _hit("c")]
    assert _ids(rank(hits, aside=("두부",))) == ["c", "both", "tofu"]
    assert _ids(rank(hits, aside=("두부",), wanted={"both"})) == ["both", "c", "tofu"]


def test_a_narrow_persona_of_another_work_than_the_one_told_falls_behind_what_fits() -> None:
    # An office worker told in words: a shop's door ("문 열고 냉방하지 않기") after the rest,
    # however well it fits what was said.
    shop = _hit("shop", effort="easy", anyone=False, work_types=("영업직",))
    hits = [shop, _hit("b"), _hit("c")]
    fit = {"shop": 0.90, "b": 0.85, "c": 0.84}
    assert _ids(rank(hits, fit=fit)) == ["b", "shop", "c"], "no work told: second"
    assert _ids(rank(hits, fit=fit, situation=Situation(work_type="사무직")))[-1] == "shop"
    # Its place told is its place: another work does not set it back.
    sea = _hit(
        "sea", anyone=False, locations=("바닷가",), work_types=("현장직",), persona=("at:바닷가",)
    )
    told = Situation("바닷가", "영업직")
    assert _ids(rank([sea, _hit("b"), _hit("c")], situation=told))[0] == "sea"


def test_base_infos_first_answer_lifts_what_is_written_for_a_place_other_than_the_city() -> None:
    everywhere = _hit("all", locations=("도시", "바닷가", "산", "농촌"))
    sea = _hit("sea", locations=("바닷가",))
    hits = [everywhere, sea, _hit("b", locations=("도시", "바닷가"))]
    seaside = Situation("바닷가", "현장직", given=True)
    assert _ids(rank(hits, situation=seaside, starter=True))[0] == "sea"
    assert _ids(rank(hits, situation=seaside))[0] == "all", "a turn with an ask of its own"
    city = Situation("도시", "사무직", given=True)
    city_hits = [everywhere, _hit("b"), _hit("c"), _hit("city", locations=("도시",))]
    assert _ids(rank(city_hits, situation=city, starter=True))[0] == "all"


def test_a_situation_told_in_words_lifts_what_is_tagged_for_it() -> None:
    hits = [_hit("a"), _hit("b"), _hit("sea", locations=("바닷가",))]
    assert _ids(rank(hits, situation=Situation("바닷가")))[0] == "sea"
    assert _ids(rank(hits))[0] == "a", "retrieval's order otherwise"


def test_what_was_said_lifts_the_candidate_whose_asks_are_nearest() -> None:
    hits = [_hit("a"), _hit("b"), _hit("c"), _hit("d")]
    fit = {"a": 0.80, "b": 0.82, "c": 0.81, "d": 0.95}
    assert _ids(rank(hits, fit=fit))[0] == "d", "its asks say what was said"
    assert _ids(rank(hits, fit={}))[:2] == ["a", "b"], "retrieval's order without asks"
    # A candidate without asks keeps its retrieval place in the asks' order.
    assert _ids(rank(hits, fit={"b": 0.95, "c": 0.8, "d": 0.7}))[0] == "a"


def test_what_the_message_leaves_aside_comes_last() -> None:
    """ "텀블러 말고 또 뭐 있어?": the tumbler, first by retrieval, comes after every other."""
    hits = [_hit("a", title="텀블러로 음료 마시기"), _hit("b", title="반납형 다회용컵 이용하기")]
    assert _ids(rank(hits)) == ["a", "b"]
    assert _ids(rank(hits, aside=("텀블러",))) == ["b", "a"]
    assert _ids(rank(hits, aside=("러닝",))) == ["a", "b"]


def test_what_the_user_already_does_is_not_offered_first() -> None:
    """ "자전거로 출퇴근한 지 1년 된 회사원인데 …": not "자전거로 출퇴근하기" first, though its
    other bicycle challenges stay where they were."""
    hits = [
        _hit("commute", title="자전거로 출퇴근하기"),
        _hit("plog", title="자전거 타며 줍는 바이크 플로깅"),
        _hit("hill", title="언덕길 출퇴근은 전기자전거로"),
    ]
    done = already_done("자전거로 출퇴근한 지 1년 된 회사원입니다 ㅎ 자전거 관련해서 더 있을까요")
    assert _ids(rank(hits, done=done)) == ["plog", "hill", "commute"]
    assert _ids(rank(hits, done=already_done("자전거 관련해서 더 있을까요"))) == [
        "commute",
        "plog",
        "hill",
    ], "nothing told as done"
    classics = ("commute", "hill")  # what is done comes last even among the first steps
    assert _ids(rank(hits, classics=classics, done=done)) == ["hill", "plog", "commute"]


def test_a_plain_ask_puts_the_fields_classic_first_steps_first_in_their_order() -> None:
    hits = [_hit("a"), _hit("b", starter=2), _hit("c", effort="hard", starter=1)]
    assert _ids(rank(hits, starter=True)) == ["a", "b", "c"]  # the easy ones first
    assert _ids(rank(hits, starter=True, classics=("c", "b"))) == ["c", "b", "a"]


def test_the_fit_bank_fuses_a_documents_text_with_its_nearest_ask() -> None:
    documents = [("zw-1", Category.ZERO_WASTE), ("vg-1", Category.VEGAN), ("md-1", Category.MEDIA)]
    passages = np.array([[0, 0, 1], [0, 0, 1], [1, 0, 0]], dtype=np.float32)
    asks = ["zw-1", "zw-1", "vg-1"]  # md-1 has none: its text alone
    ask_vectors = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    bank = FitBank(documents, passages, asks, ask_vectors)
    query = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    fused = ASK_WEIGHT * 0.8 / (1 + ASK_WEIGHT)  # its text 0, its nearest ask 0.8
    assert bank.fit(query, ["zw-1", "vg-1", "md-1", "none"]) == pytest.approx(
        {"zw-1": fused, "vg-1": 0.0, "md-1": 0.6}
    )
    assert bank.categories(query, 2) == [Category.MEDIA, Category.ZERO_WASTE]
    # One message's vector is scored once (its categories, then its candidates' fit); another
    # vector, equal or not, afresh.
    scored: list[object] = []
    score = bank._score
    bank._score = lambda v, text: scored.append(v) or score(v, text)  # type: ignore[method-assign]
    bank.categories(query, 2)
    bank.fit(query, ["zw-1"])
    assert scored == []  # scored above, by the categories asked before
    other = query.copy()
    assert bank.fit(other, ["md-1"]) == pytest.approx({"md-1": 0.6}) and len(scored) == 1
    empty = FitBank([], np.zeros((0, 3)), [], np.zeros((0, 3)))
    assert empty.fit(query, ["zw-1"]) == {} and empty.categories(query, 3) == []
    assert empty.best(query, 3) == []


def test_the_best_fitting_challenges_are_found_in_a_category_or_anywhere() -> None:
    documents = [("zw-1", Category.ZERO_WASTE), ("zw-2", Category.ZERO_WASTE)]
    documents += [("vg-1", Category.VEGAN)]
    passages = np.array([[0.6, 0.8], [1, 0], [0.8, 0.6]], dtype=np.float32)
    bank = FitBank(documents, passages, [], np.zeros((0, 2)))
    query = np.array([1, 0], dtype=np.float32)
    assert bank.best(query, 2) == ["zw-2", "vg-1"]
    assert bank.best(query, 3, category=Category.ZERO_WASTE) == ["zw-2", "zw-1"]
    assert bank.best(query, 5, category=Category.MEDIA) == [] and bank.best(query, 0) == []
    # How much better the best of those shown fits than the best of the rest.
    assert bank.nearer_shown(query, ["zw-1"]) == pytest.approx(0.6 - 1.0)
    assert bank.nearer_shown(query, ["zw-2", "zw-1"]) == pytest.approx(1.0 - 0.8)
    assert bank.nearer_shown(query, ["none"]) is None
    assert bank.nearer_shown(query, ["zw-1", "zw-2", "vg-1"]) is None  # nothing else


def test_a_message_one_challenge_fits_far_better_than_any_other_is_about_its_field() -> None:
    documents = [("zw-1", Category.ZERO_WASTE), ("up-1", Category.UPCYCLING)]
    documents += [("up-2", Category.UPCYCLING)]
    passages = np.array([[1, 0], [0.9, 0.436], [0.8, 0.6]], dtype=np.float32)
    bank = FitBank(documents, passages, [], np.zeros((0, 2)))
    said = np.array([1, 0], dtype=np.float32)  # zw-1's own words: 1.0 against 0.9
    assert bank.outright(said, margin=0.05) == "zw-1"
    assert bank.category("zw-1") is Category.ZERO_WASTE and bank.category("none") is None
    assert bank.outright(said, margin=0.2) is None  # not by that much
    between = np.array([0.8, 0.6], dtype=np.float32)  # up-2 first, zw-1 a near second
    assert bank.outright(between, margin=0.05) is None
    alone = FitBank(documents[:1], passages[:1], [], np.zeros((0, 2)))
    assert alone.outright(said) is None  # nothing to stand out from


def test_words_a_message_shares_with_a_title_or_ask_move_its_fit() -> None:
    """The cosines barely part the two; the word "화상회의" the message shares with one
    title does, by WORDS_WEIGHT of the cosines' spread; a message sharing no word with any is
    fitted by its vector alone."""
    documents = [
        ("cf-1", Category.CARBON_FOOTPRINT),
        ("dc-1", Category.DIGITAL_CARBON),
        ("vg-1", Category.VEGAN),
    ]
    passages = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)
    words = Words(
        ["출장 대신 기차 타기 출장이 잦아", "화상회의 카메라 끄기 회의가 많아", "두부 먹기"]
    )
    assert len(words) == 3 and not words.scores("오늘 날씨").any()
    bank = FitBank(documents, passages, [], np.zeros((0, 2)), words)
    plain = FitBank(documents, passages, [], np.zeros((0, 2)))
    query = np.array([1, 0], dtype=np.float32)
    ids = ["cf-1", "dc-1", "vg-1"]
    cosines = plain.fit(query, ids)
    assert plain.categories(query, 1) == [Category.CARBON_FOOTPRINT]
    text = "재택이라 화상회의만 하루에 대여섯 개야"
    assert bank.categories(query, 1, text) == [Category.DIGITAL_CARBON]
    shared = words.scores(text)  # only dc-1 shares words: standardized, it stands √2 above
    assert shared[0] == shared[2] == 0 < shared[1]
    lift = WORDS_WEIGHT * float(np.std(list(cosines.values())))
    fit = bank.fit(query, ids, text)
    assert fit["dc-1"] - fit["cf-1"] == pytest.approx(
        cosines["dc-1"] - cosines["cf-1"] + lift * 3 / np.sqrt(2), abs=1e-5
    )
    assert bank.fit(query, ids, "오늘 날씨") == pytest.approx(cosines)
    with pytest.raises(ValueError, match="words per document"):
        FitBank(documents, passages, [], np.zeros((0, 2)), Words(["하나"]))


def test_a_question_is_answered_by_the_sentence_that_holds_it() -> None:
    tumbler = _hit(
        "t",
        title="텀블러로 음료 마시기",
        body="텀블러는 쓰고 나서 바로 헹궈 두세요. 물때가 끼면 베이킹소다를 푼 따뜻한 물에 담가 세척하면 됩니다.",
    )
    other = _hit(
        "o", body="장바구니를 챙겨 비닐봉지를 받지 않습니다. 현관에 걸어 두면 잊지 않습니다."
    )
    found = find_answer("텀블러 물때는 어떻게 세척해?", [other, tumbler])
    assert found is not None and found.hit is tumbler
    assert found.sentence == "물때가 끼면 베이킹소다를 푼 따뜻한 물에 담가 세척하면 됩니다."
    assert find_answer("주식은 언제 사는 게 좋아?", [other, tumbler]) is None


#: Two documents' sentences ("a": two, "b": two) and a question along the first axis.
_ROWS = [
    ("a", "첫 문장입니다."),
    ("a", "둘째 문장입니다."),
    ("b", "답이 되는 문장입니다."),
    ("b", "다른 문장입니다."),
]
_QUESTION = np.array([1.0, 0.0], dtype=np.float32)


def _bank(*cosines: float) -> SentenceBank:
    """A sentence bank whose sentences lie at these cosines to :data:`_QUESTION`."""
    vectors = [[c, float(np.sqrt(1 - c * c))] for c in cosines]
    return SentenceBank(_ROWS, np.array(vectors, dtype=np.float32))


def test_by_meaning_a_sure_answer_leads_a_related_one_is_only_offered() -> None:
    first = _hit("a", body="첫 문장입니다. 둘째 문장입니다.")
    second = _hit("b", body="답이 되는 문장입니다. 다른 문장입니다.")
    sure = find_answer("?", [first, second], vector=_QUESTION, bank=_bank(0.5, 0.5, 0.95, 0.1))
    assert sure is not None and sure.sure and sure.hit is second
    assert sure.sentence == "답이 되는 문장입니다."
    # Only related: the first challenge's own nearest sentence, said to be only that.
    related = find_answer("?", [first, second], vector=_QUESTION, bank=_bank(0.87, 0.5, 0.89, 0.1))
    assert related is not None and not related.sure and related.hit is first
    assert (
        find_answer("?", [first, second], vector=_QUESTION, bank=_bank(0.5, 0.5, 0.5, 0.1)) is None
    )


def test_a_question_about_a_challenge_just_shown_is_answered_from_it() -> None:
    fresh = _hit("a", body="첫 문장입니다. 둘째 문장입니다.")
    shown = _hit("b", body="답이 되는 문장입니다. 다른 문장입니다.")
    sure = find_answer(
        "?", [fresh], shown=[shown], vector=_QUESTION, bank=_bank(0.5, 0.5, 0.95, 0.1)
    )
    assert sure is not None and sure.sure and sure.hit is shown
    # Only near: the nearer of the best candidate's and the shown one's, offered as the
    # closest ("우유 대신 뭐 마셔?" after "식물성 우유로 바꾸기": its "귀리 우유, 두유 …").
    near = find_answer(
        "?", [fresh], shown=[shown], vector=_QUESTION, bank=_bank(0.87, 0.5, 0.89, 0.1)
    )
    assert near is not None and not near.sure and near.hit is shown
    nearer = find_answer(
        "?", [fresh], shown=[shown], vector=_QUESTION, bank=_bank(0.89, 0.5, 0.87, 0.1)
    )
    assert nearer is not None and not nearer.sure and nearer.hit is fresh
    # By words too (a burst).
    tumbler = _hit("t", body="물때가 끼면 베이킹소다를 푼 물에 담가 세척합니다. 매일 씁니다.")
    worded = find_answer("텀블러 물때는 어떻게 세척해?", [fresh], shown=[tumbler])
    assert worded is not None and worded.hit is tumbler


def test_asked_how_to_do_one_the_answer_is_what_its_text_says_to_do() -> None:
    from app.chat.answers import asks_how, instruction

    assert asks_how("이거 어떻게 시작하면 돼?") and asks_how("그거 어떻게 하는 거야?")
    assert asks_how("시작하는 방법 알려줘")
    assert not asks_how("이거 효과 있어?") and not asks_how("둘이 어떻게 달라?")
    told = _hit("t", body="텀블러를 가방에 넣어 다니세요. 컵 하나가 줄어듭니다.")
    found = instruction(told)
    assert found is not None and found.sentence == "텀블러를 가방에 넣어 다니세요." and found.sure
    assert instruction(_hit("n", body="종이컵은 재활용이 어렵습니다. 그래서 줄입니다.")) is None


def test_a_text_known_to_answer_a_question_answers_it_plainly() -> None:
    """``answered_by``: the challenge a question fits outright (app/chat/fit.py) holds its
    answer: how to do a thing, the instruction nearest the question; whether it helps, why;
    anything else, its nearest sentence; all said to be the answer."""
    from app.chat.answers import answered_by

    body = "건전지는 전용 수거함에 넣어 주세요. 불이 날 수 있습니다. 단자에 테이프를 붙이세요."
    battery = _hit("b", body=body)
    found = answered_by("다 쓴 건전지 어떻게 버려?", battery)
    assert (
        found is not None and found.sure and found.sentence == "건전지는 전용 수거함에 넣어 주세요."
    )
    # With the sentences' vectors, the instruction nearest the question, not the first.
    rows = [("b", sentence) for sentence in sentences_of(body)]
    bank = SentenceBank(rows, np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32))
    taped = answered_by("단자는 어떻게 해?", battery, vector=np.array([0, 1.0]), bank=bank)
    assert taped is not None and taped.sentence == "단자에 테이프를 붙이세요."
    why = answered_by("이거 정말 도움이 돼?", battery)
    assert why is not None and why.sure and why.sentence == "불이 날 수 있습니다."
    other = answered_by("불 안 나?", battery, vector=np.array([0.8, 0.6]), bank=bank)
    assert other is not None and other.sure and other.sentence == "불이 날 수 있습니다."


@pytest.mark.parametrize(
    ("question", "sentence", "held"),
    [
        ("텀블러는 얼마나 자주 씻어야 돼?", "텀블러 하나로 한 해 수백 개의 컵을 줄입니다.", False),
        ("텀블러는 얼마나 자주 씻어야 돼?", "쓰고 나면 매일 헹궈 두세요.", True),
        ("필터 청소는 몇 번 해야 돼?", "필터는 2주에 한 번 청소하세요.", True),
        # "며칠에 한 번" asks how often: a year said is no answer to it
        ("세척은 며칠에 한 번 해?", "텀블러 하나로 한 해 수백 개의 컵을 줄입니다.", False),
        ("세척은 며칠에 한 번 해?", "쓰고 나면 매일 헹궈 두세요.", True),
        ("행사는 보통 언제 열려?", "함께 모여 쓰레기를 치워 보세요.", False),
        ("행사는 보통 언제 열려?", "매년 9월 셋째 주 토요일에 열립니다.", True),
        ("에어컨 몇 도로 맞춰?", "선풍기와 함께 틀면 시원합니다.", False),
        ("에어컨 몇 도로 맞춰?", "여름에는 26℃ 안팎으로 맞춰 보세요.", True),
        ("건전지 어디다 버려야 해?", "불이 나는 원인이 되기도 합니다.", False),
        ("건전지 어디다 버려야 해?", "주민센터의 전용 수거함에 넣어 주세요.", True),
        # What to mind: a sentence warning of something.
        (
            "실외기 물로 씻을 때 주의할 점 있을까요?",
            "전원을 끄고 약한 물줄기로 씻어 내 보세요.",
            False,
        ),
        (
            "실외기 물로 씻을 때 주의할 점 있을까요?",
            "고압 세척은 얇은 핀을 휘게 하니 호스를 쓰세요.",
            True,
        ),
        ("밤새 틀어도 조심할 거 있어?", "몸이 닿는 곳만 데우면 에너지가 적게 듭니다.", False),
        # Asking none of these, any sentence may hold it (its meaning decides).
        ("에어컨 자주 껐다 켜면 전기 더 먹는다던데 진짜야?", "한 문장입니다.", True),
        ("전기 아끼려면 어디서부터 시작해?", "한 문장입니다.", True),
    ],
)
def test_a_question_of_how_often_long_much_where_or_what_to_mind_is_held_by_a_sentence_saying_it(
    question: str, sentence: str, held: bool
) -> None:
    from app.chat.answers import holds_what_is_asked

    assert holds_what_is_asked(question, sentence) is held


def test_a_text_that_never_says_what_a_question_asks_about_holds_no_answer_to_it() -> None:
    from app.chat.answers import says_what_is_asked_of

    cup = _hit("c", title="생리컵 써 보기", body="사이즈 안내를 참고해 몸에 맞는 것을 고르세요.")
    assert not says_what_is_asked_of("생리컵 처음인데 소독은 어떻게 해요?", cup.document)
    assert says_what_is_asked_of("사이즈는 어떻게 골라요?", cup.document)
    assert says_what_is_asked_of("이거 정말 도움이 돼?", cup.document)  # asks of nothing named


def test_a_sentence_near_in_meaning_that_says_nothing_of_what_is_asked_is_no_answer() -> None:
    """By meaning, the nearest sentence of the best candidate is the answer only when it says
    what a question of how often, how long, how much or where asks; the nearest that says it is,
    when related; with none, the nearest is offered as the closest only."""
    from app.chat.answers import answered_by

    body = "컵을 쓰지 않게 됩니다. 여름에는 26℃로 맞춰 보세요."
    aircon = _hit("a", body=body)
    bank = SentenceBank(
        [("a", s) for s in sentences_of(body)],
        np.array([[0.95, 0.31], [0.87, 0.49]], dtype=np.float32),
    )
    found = find_answer("에어컨 몇 도로 맞춰?", [aircon], vector=_QUESTION, bank=bank)
    assert found is not None and found.sure and found.sentence == "여름에는 26℃로 맞춰 보세요."
    nearest = find_answer("에어컨 얼마나 자주 꺼?", [aircon], vector=_QUESTION, bank=bank)
    assert nearest is not None and not nearest.sure and nearest.sentence == "컵을 쓰지 않게 됩니다."
    # A text known to hold the answer: the sentence saying what is asked, however far.
    told = answered_by("에어컨 몇 도로 맞춰?", aircon, vector=_QUESTION, bank=bank)
    assert told is not None and told.sure and told.sentence == "여름에는 26℃로 맞춰 보세요."


def test_asked_whether_it_helps_the_answer_is_why_its_text_says_it_does() -> None:
    from app.chat.answers import asks_worth, reason

    for asked in (
        "자전거로 출퇴근하면 진짜 탄소가 많이 줄어?",
        "메일 지우는 게 효과가 있긴 해?",
        "로컬푸드 사 먹는 게 의미가 있어?",
        "화질 낮춘다고 차이가 있어?",
        "이거 하면 도움이 돼?",
        "에어컨 온도 올리면 전기 덜 써?",
    ):
        assert asks_worth(asked), asked
    for asked in ("이거 어떻게 시작해?", "쿨맵시가 정확히 어떤 거야?", "쓰레기를 줄이고 싶어"):
        assert not asks_worth(asked), asked
    told = _hit("t", body="텀블러를 가방에 넣어 다니세요. 컵 하나가 줄어듭니다. 할인도 받아요.")
    found = reason(told)
    assert found is not None and found.sentence == "컵 하나가 줄어듭니다." and not found.sure
    assert reason(told, sure=True).sure  # type: ignore[union-attr]
    assert reason(_hit("one", body="한 문장뿐입니다.")) is None


def test_asked_what_one_is_the_answer_is_what_its_text_says_first() -> None:
    from app.chat.answers import asks_what, what_it_is

    for asked, subject in (
        ("쿨맵시가 정확히 어떤 거야?", "쿨맵시"),
        ("용기내 챌린지란 무슨 뜻이야?", "용기내 챌린지"),
        ("리필스테이션이 뭐예요", "리필스테이션"),
    ):
        assert asks_what(asked) == subject, asked
    # Requests and pointers with a question's words ask no meaning.
    for asked in (
        "그 중에 제일 쉬운 게 뭐야?",
        "추천할 만한 게 뭐야?",
        "이거 뭐야?",
        "또 뭐 있어?",
    ):
        assert asks_what(asked) is None, asked
    cool = _hit("c", title="여름철 쿨맵시 입기", body="반팔 셔츠로 일해 보세요. 냉방이 줄어듭니다.")
    other = _hit("o", title="대기전력 차단하기")
    found = what_it_is("쿨 맵시", [other, cool])  # spacing aside
    assert found is not None and found.hit is cool and found.sure
    assert found.sentence == "반팔 셔츠로 일해 보세요."
    assert what_it_is("온맵시", [other, cool]) is None


def test_a_question_names_the_challenge_whose_title_it_says_most_of() -> None:
    from app.chat.answers import named_in

    bike = _hit("b", title="자전거로 출퇴근하기")
    electric = _hit("e", title="언덕길 출퇴근은 전기자전거로")
    asked = "자전거로 출퇴근하면 진짜 탄소가 많이 줄어?"
    assert named_in(asked, [electric, bike, bike]) is bike  # 8 letters in a row against 4
    assert named_in("출퇴근 때 탄소가 줄어?", [electric, bike]) is None  # too little of either
    stream = _hit("s", title="스트리밍 화질 낮추기")
    assert named_in("화질 낮추면 진짜 효과 있어?", [bike, stream]) is stream
    food = _hit("f", title="음식물 쓰레기는 물기 빼고 버리기")
    assert named_in("음식물 처리기 사면 진짜 환경에 도움 되는 거야?", [food]) is None


def test_a_first_ask_lifts_the_fields_first_steps_a_little() -> None:
    # Alike for what was said (two and three places apart), the one anyone begins with
    # comes first on a conversation's first ask; one far better placed stays ahead of it.
    near = [_hit("solar"), _hit("x"), _hit("standby", starter=1)]
    assert _ids(rank(near))[0] == "solar"
    assert _ids(rank(near, opening=True))[0] == "standby"
    far = [_hit("solar"), *(_hit(f"x{i}") for i in range(4)), _hit("standby", starter=1)]
    assert _ids(rank(far, opening=True))[0] == "solar"
