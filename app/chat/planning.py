"""The first half of a turn: from a validated request to a :class:`TurnPlan`.

    base-info:  session <- situation -> candidates -> rank -> prompt -> plan
    free text:  session -> embed -> intent and facets -> category and candidates -> rank
                -> a question's answer -> recommend, suggestions -> prompt -> plan
                (off-topic or nonsense: a :class:`Reply` saying what the bot can do)

A free-text turn is embedded once: the intent step and retrieval read the same vector. When the
embedding model's queue is long, the turn is read by its words instead (lexical intent,
sparse-only search) rather than wait behind it.

A plain ask for a field ("비건 챌린지 추천해줘") is answered with the field's classic first
steps (the catalogue's ``starter`` rank), and so is more of it after.

The candidates (app/chat/candidates.py) are catalogue challenges: in the answer's category,
fitting the user's situation (base-info's location and work type), not shown before in the
session ("다른 거", "더 쉬운 거"), or exactly the ones just shown ("그 중에 …"); satisfying the
constraints in force ("돈 안 드는 거", "집에서": app/chat/constraints.py) when any does. The
turn decides what to search them with (its own words, the conversation's topic, a subject
it names, the first ask again), and they are ranked
(app/chat/ranking.py); in the ``picks`` composition the best is the answer's first challenge,
put by the gateway, and the model orders the next ones. A question is answered from the
catalogue sentence that holds it (app/chat/answers.py), its challenge first.

What a follow-up carries over from the conversation (the constraints in force, the situation
told, the intent read with the facets) is app/chat/follow_up.py's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from opentelemetry import trace

from app.chat.answers import (
    LOOK_IN,
    Found,
    SentenceBank,
    answered_by,
    asks_how,
    asks_how_to,
    asks_what,
    asks_worth,
    find_answer,
    holds_what_is_asked,
    instruction,
    named_in,
    reason,
    says_what_is_asked_of,
    sentences_of,
    what_it_is,
)
from app.chat.candidates import FALLBACK_CATEGORY, Candidates, Query, named_one, starter_query
from app.chat.constraints import (
    Constraint,
    FacetReaders,
    Facets,
    asks_to_see_again,
    clauses,
    field_blanked,
    leaving_aside,
    left_words,
    moves_on,
    off_work,
    ordinal,
    points_at_one,
    said_in_words,
    tells_others_doing,
    toward,
    wanting,
    without_field,
)
from app.chat.fit import ANSWERED_MARGIN, OUTRIGHT_MARGIN, FitBank
from app.chat.follow_up import (
    ONLY_CONSTRAINTS_MARGIN,
    about_something_else,
    in_conversation,
    in_force,
    reads_no_situation,
    situation_of,
    told_so_far,
    turned_to,
)
from app.chat.intent import (
    Evidence,
    Intent,
    IntentClassifiers,
    IntentKind,
    catalogue_evidence,
    field_alone,
    fused_evidence,
    named_category,
    says_thanks,
)
from app.chat.plan import BaseInfoTurn, FreeTextTurn, Reply, TurnPlan
from app.chat.prompts import PromptInput, answer_messages
from app.chat.ranking import ACROSS_TOP, ACROSS_TOP_ASKED, Ranked, Situation, across_fields, rank
from app.chat.recommend import Opening, compose_recommend
from app.chat.sessions import SessionState, SessionStore, Turn
from app.chat.subjects import Subjects, names_a_field, words_of_its_own
from app.chat.suggestions import suggest
from app.chat.told import (
    already_done,
    personas_told,
    place_lived,
    says_a_site,
    says_an_office,
    trade_told,
)
from app.config import ChatSettings
from app.domain.categories import CITY, OFFICE, SALES, SHOP, SITE, Category
from app.domain.events import Delta, Done
from app.llm.schema import Answer
from app.metrics import Metrics
from app.rag.corpus import COMPANY, Document
from app.rag.retriever import EmbedderBusy, Hit, QueryVector, Retriever
from app.rag.scope import ANYWHERE

__all__ = ["OFF_TOPIC_REPLY", "THANKS_REPLY", "Planner"]

log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)  # a proxy: app/tracing.py

OFF_TOPIC_REPLY = (
    "저는 일상에서 실천할 수 있는 친환경 챌린지를 추천해 드리는 챗봇이에요. "
    "제로웨이스트, 플로깅, 탄소발자국, 에너지 절약, 업사이클, 문화 공유, 디지털 탄소, "
    "비건 중에서 궁금한 분야를 말씀해 주시거나 "
    "'사무실에서 할 수 있는 챌린지 추천해 줘'처럼 물어봐 주세요."
)
THANKS_REPLY = "도움이 되었다니 기뻐요. 해 보시다가 더 쉬운 방법이나 다른 분야가 궁금해지면 언제든 말씀해 주세요."


def _said(text: str) -> Reply:
    """``text`` as a normal stream, a sentence at a time, whose close recommends nothing."""
    return Reply(
        (
            *(Delta(sentence) for sentence in re.split(r"(?<=\. )", text)),
            Done({"recommend": text, "challenges": []}),
        )
    )


#: What the bot can do, as a normal stream, for off-topic or nonsense input.
FRIENDLY_REPLY = _said(OFF_TOPIC_REPLY)
#: What thanks hears in a conversation ("고마워요!"): nothing new is recommended.
THANKS = _said(THANKS_REPLY)
#: Nearest catalogue documents whose categories are evidence of a message's category
#: (the weight: app/chat/intent.py CATALOGUE_WEIGHT).
_EVIDENCE_K = 10
#: What the gateway's recommend says the turn did, by what the message asked for.
_OPENING_KIND = {
    IntentKind.SWITCH: "switch",
    IntentKind.ANOTHER: "another",
    IntentKind.BACK_TO_BASE: "back",
    IntentKind.MORE: "more",
    IntentKind.AMONG: "among",
    IntentKind.ASK: "ask",
}
_FOLLOW_UPS = (IntentKind.ASK, IntentKind.MORE, IntentKind.AMONG)
#: What asks for a challenge done at work, or with the people there: with an office's words,
#: the user works in an office.
_AT_WORK = frozenset({Constraint.WORK, Constraint.COWORKERS})
#: How much nearer an example of a situation than any field's a first ask telling a trade in
#: words ("꽃집을 운영하는데", "옷가게 사장인데"; a driver's is taken as a shop's) must lie to
#: tell only that (cosines, the bundled embedder): shops' asks lay at -0.002 to 0.065
#: ("꽃집을 운영하는데 가게에서 실천할 만한 게 있을까요?" had gone to plogging by its meaning:
#: "작업 차량 적재함 덮고 다니기"), one naming its subject at -0.060 ("식당 운영 중인데 음식물
#: 쓰레기 줄이는 법 있을까요?").
TRADE_MARGIN = -0.03
#: The same for one who tells a persona the situation firsts name challenges for ("사과 농사
#: 짓고 있습니다"): between the two, as a persona told may still ask of its own matter
#: ("건설현장 반장입니다. 현장 폐기물이 맨날 다 섞여서 …").
PERSONA_MARGIN = -0.01
#: How much a critique's own embedding weighs against its conversation's topic's in its search
#: (app/chat/planning.py ``_leaning``): by the concatenation alone, the topic's words drowned
#: the critique's (fit bench, bench/README.md "Twentieth pass").
CRITIQUE_LEAN = 2.0
#: A first ask that says this many words of its own (app/chat/subjects.py
#: ``words_of_its_own``) asks for something, whether or not the catalogue's keywords know its
#: words: "장 보면 꼭 반은 썩혀서 버리게 돼요 … 음쓰가 너무 많이" (13) and "환경 문제에 …
#: 뭐부터 보고 읽으면 좋을지" (6) had been answered as "추천 좀 해줘", with anyone's first
#: steps ("분리배출 네 가지 원칙 지키기"); a plain ask in other words says at most 4 ("여기
#: 말고 다른 데서 골라 주세요").
SAYS_ITS_OWN = 5


@dataclass(frozen=True, slots=True)
class _Readings:
    """:class:`app.chat.follow_up.Readings` of one turn, on the planner's banks and store."""

    planner: Planner
    message: str
    query: Query
    wants: Query | None
    state: SessionState

    async def turns_to(self) -> Intent | None:
        return await self.planner._turns_to(self.message, self.query, self.state)

    def nearer_a_constraint(self) -> bool:
        return self.planner._nearer_a_constraint(self.message, self.query)

    def says_only_constraints(self) -> bool:
        return self.planner._says_only_constraints(self.message)

    def shown_fit(self) -> float | None:
        return self.planner._shown_fit(self.message, self.query, self.state)

    def wanted(self) -> tuple[Intent | None, Category | None]:
        planner = self.planner
        wanted = planner._wanted(self.message, self.wants, self.state)
        return wanted, planner._best_fit(self.wants)

    async def beyond_shown(self) -> tuple[bool, Category | None]:
        return await self.planner._beyond_shown(self.message, self.query, self.state)

    def fitting(self) -> list[Category] | None:
        return self.planner._fitting_fields(self.query)

    async def unsaid_by_shown(self) -> bool:
        return await self.planner._unsaid_by_shown(self.message, self.query, self.state)

    async def said_by_shown(self) -> bool:
        return await self.planner._said_by_shown(self.message, self.query, self.state)

    async def meets_nearest_in_field(self, constraints: frozenset[Constraint]) -> bool:
        return await self.planner._meets_nearest_in_field(
            self.message, self.query, self.state, constraints
        )


class Planner:
    def __init__(
        self,
        *,
        retriever: Retriever,
        intents: IntentClassifiers,
        facets: FacetReaders,
        sentences: SentenceBank | None,
        fit: FitBank | None = None,
        classics: Mapping[Category, tuple[str, ...]] | None = None,
        firsts: Mapping[str, tuple[str, ...]] | None = None,
        subjects: Subjects | None = None,
        pairings: Mapping[tuple[str, str], float] | None = None,
        sessions: SessionStore,
        settings: ChatSettings,
        metrics: Metrics,
    ) -> None:
        self._retriever = retriever
        # Where candidates are looked for, and each field's classic first steps (app/rag/
        # corpus.py classics_of): a plain ask's.
        self._candidates = Candidates(
            retriever=retriever,
            fit=fit,
            classics=classics or {},
            settings=settings,
            metrics=metrics,
            firsts=firsts,
        )
        self._intents = intents
        self._facets = facets
        self._sentences = sentences  # None: questions are matched by their words alone
        self._fit_bank = fit  # None: ranked by retrieval's order, categorized without it
        # What the catalogue's challenges are about: an ask that names one is not plain.
        self._subjects = subjects
        # How usual each place is with each company (app/rag/corpus.py pairings_of): a place
        # or company kept from before that the one said now rarely goes with is dropped.
        self._pairings = pairings
        self._sessions = sessions
        self._settings = settings
        self._metrics = metrics

    # ------------------------------------------------------------------ base-info
    async def base_info(self, turn: BaseInfoTurn) -> TurnPlan:
        chosen, place, work = turn.category, turn.location, turn.work_type
        state = await self._sessions.record(
            turn.session_id, base_category=chosen, category=chosen, location=place, work_type=work
        )
        query = Query(_situation_query(chosen, place, work))
        _, pool = await self._candidates.fitting(query, chosen, state, more=False)
        classics: tuple[str, ...] = ()
        if place == CITY:
            # No ask of its own, in the place most challenges are written for: the field's
            # classic first steps that fit the work type come first (elsewhere, what is written
            # for the place: app/chat/ranking.py LOCAL_BONUS).
            classics = self._candidates.first_steps(chosen)
            pool = await self._candidates.with_classics(query, chosen, state, classics, pool)
        # No ask of its own: the first is a challenge to start with (easy, for anyone).
        ranked = rank(
            pool, situation=Situation(place, work, given=True), starter=True, classics=classics
        )
        return self._plan(
            turn,
            PromptInput(category=chosen, candidates=(), location=place, work_type=work),
            ranked,
            Opening(chosen, "first", place, work, turn=len(state.turns)),
            user_text=f"사는 곳: {place}, 일하는 방식: {work}, 카테고리: {chosen.label}",
            topic=query.text,
        )

    # ------------------------------------------------------------------ free-text
    async def free_text(self, turn: FreeTextTurn) -> TurnPlan | Reply:
        state = await self._sessions.load(turn.session_id)
        if says_thanks(turn.message):
            # "고마워요!" asks for nothing: after an answer, an acknowledgement; before any,
            # what the bot can do (read as an ask, a first "고마워" had brought "출장지에서 채식
            # 한 끼").
            return THANKS if state.turns else FRIENDLY_REPLY
        query, nearest, intent = await self._understand(turn.message, state)
        # What a message that leaves something aside wants ("현장 말고 집에서", "쓰레기 얘기
        # 말고, 먹을거리를 …"): read for its place, its field, and another field's search.
        wants = await self._wants(turn.message, query)
        facets = await self._read_facets(turn.message, query, wants)
        if not facets.plain and self._field_and_nothing_in_it(turn.message):
            facets = replace(facets, plain=True)  # "에너지 절약 챌린지", whatever the vote
        intent, facets = await self._in_conversation(
            turn.message, query, intent, facets, wants, state
        )
        if intent.kind in (IntentKind.OFF_TOPIC, IntentKind.NONSENSE):
            return FRIENDLY_REPLY
        # "처음 거로 다시 보여줘": the first answer's challenges again, as they were shown.
        again = _first_answer(state) if asks_to_see_again(turn.message) else None
        if again is not None:
            intent = Intent(IntentKind.BACK_TO_BASE)
        trade = trade_told(turn.message)  # "작은 카페를 하고 있는데", "택배 기사인데"
        shop = trade == SHOP  # the catalogue's 영업직
        if not facets.work_type:  # work told in words that the examples' vote leaves out
            if shop:
                facets = replace(facets, work_type=SALES)
            elif says_a_site(turn.message):
                facets = replace(facets, work_type=SITE)  # "공장 생산직인데 회사에서 …"
            elif facets.constraints & _AT_WORK and says_an_office(turn.message):
                # "사무실에서 해 볼 만한 거", "회사 동료들이랑 같이 할 만한 거"
                facets = replace(facets, work_type=OFFICE)
        if not facets.location and (lived := place_lived(turn.message)):
            facets = replace(facets, location=lived)  # "충청도 시골로 내려온 지 2년 됐어요"
        if not state.turns:
            # A conversation's first ask demands only what its words say: the vote's other
            # readings of it tell who the user is ("주말마다 방파제 낚시 다니는 사람인데요": at
            # home, by its neighbours), which the search's meaning carries, not a filter.
            facets = replace(facets, constraints=said_in_words(turn.message, facets.constraints))
        constraints = in_force(
            intent, facets, state, afresh=moves_on(turn.message), pairings=self._pairings
        )
        told = told_so_far(facets, state, personas_told(turn.message))
        situation = situation_of(state, told)
        situated = (
            None
            if again is not None
            else await self._situated(
                turn.message, query, intent, facets, state, constraints, situation, trade=trade
            )
        )
        if situated is not None:  # the field of what is named first for who the user is
            intent = Intent(IntentKind.SWITCH, situated[0])
        critique = bool(facets.constraints)
        # It names something challenges are about ("에어컨", "아침 식사"): searched and ranked
        # by it, not by a field's first steps.
        names = reads_no_situation(facets) and self._names_a_subject(turn.message)
        topic, search = _subject(turn.message, query, intent, state, critique=critique, names=names)
        if (
            intent.kind is IntentKind.ASK
            and critique
            and search is not query
            and query.vector is not None
            and (topic_vector := await self._embedding_if_free(topic)) is not None
        ):
            # A critique searched with the topic ("… 배달 …", then "폰이 느려져서 바꿀까
            # 고민이에요 … 돈 안 들이고"): its own words lean the search their way.
            search = replace(search, vector=_leaning(query.vector, topic_vector, CRITIQUE_LEAN))
        if intent.kind is IntentKind.ANOTHER and wants is not None:
            # Another field is searched for what the message wants, not for what it leaves.
            topic, search = wants.text, wants
        # "그 중에" points into a list (the one a choice among it came from); "이거" at the
        # answer just shown.
        pointed = state.last_list if facets.among else state.last_shown
        # "그 중에 …" with no critique of its own, pointing at no one of them ("이거", "두 번째
        # 거"), chooses by what else it says.
        by_what_it_says = (
            facets.among and not facets.constraints and not points_at_one(turn.message)
        )
        plain = _plain(facets, intent, constraints, told)
        # "원룸인데 전기세가 많이 나와서 줄이고 싶어": a first ask plain in all but the vote;
        # what follows it is read as after what it said, not after a plain ask.
        by_matter = (
            not plain
            and not state.turns
            and self._by_its_matter_alone(turn.message, facets, intent, constraints, told)
        )
        plain = plain or by_matter
        # "에어컨 전기 아끼는 법 알려줘": plain by meaning, but it names what it is about; so
        # does "아침 식사로 할 만한 건 없어?" after a plain ask: no classic first steps for it.
        # Any ask in its own words that names its field and a subject ("고양이 키우는데 할
        # 만한 업사이클 있어?"): the field's name says where to look, not which challenge (a
        # title saying it, "업사이클 공방 원데이 클래스 듣기", fitted it by that word first).
        named_field = search is query and field_blanked(query.text) != query.text
        subject = (plain or named_field) and names
        plain = plain and not names
        if subject:
            # Searched and fitted by its subject alone: by the whole, "등산 플로깅 챌린지
            # 추천해줘" finds "원격 팀의 비대면 플로깅 챌린지" (its title, its meaning) first.
            blanked = field_blanked(search.text)
            vector = await self._embedding_if_free(blanked) if not search.lexical else None
            search = replace(
                search, text=blanked, vector=search.vector if vector is None else vector
            )
            if named_field:
                # More of it, or a critique of it, is searched by that subject too ("채식하면
                # 단백질은 뭘로 채워야 돼?", then "비슷한 거 몇 개 더": protein, not "주 1회
                # 채식하기").
                topic = blanked.strip()
        if (
            intent.kind is IntentKind.MORE
            and search is not query
            and state.topic
            and not search.lexical
        ):
            # "이런 거 몇 개만 더": more of what was asked, searched and fitted by the topic's
            # own embedding (the topic's words and the message's still count, as words).
            # Unfitted, more after "휴대폰 용량이 맨날 꽉 차서" began with "가끔 쓰는 기기는
            # 빌려 쓰기"; now with "위치 서비스와 백그라운드 새로고침 끄기".
            # One that names a subject of its own ("여름에 전기 아끼는 방법 또 뭐 있어?" after
            # the air conditioner): by the topic and its words together.
            text = search.text if names else state.topic
            search = replace(search, vector=await self._embedding_if_free(text))
        if intent.kind is IntentKind.BACK_TO_BASE and search.vector is None and not search.lexical:
            # "처음 거로 다시": the first ask, searched and fitted by its own embedding (by its
            # words alone and unfitted, food waste's first ask found a beach picnic first).
            vector = await self._embedding_if_free(search.text)
            search = replace(search, vector=vector)
        at = ordinal(turn.message)  # "두 번째 거", "3번은": a place in the list shown
        classics: tuple[str, ...] = ()
        if again is not None:
            pool = await self._candidates.these(search, again.shown)
            first = pool[0].document.category if pool else FALLBACK_CATEGORY
            category = again.category or state.category or first
        elif situated is not None:
            category, pool, classics = situated  # what is named for it first, in its order
        else:
            category, pool = await self._candidates.choose(
                search,
                intent,
                state,
                nearest,
                constraints,
                pointed=pointed,
                by_what_it_says=by_what_it_says,
                at=at,
                plain=plain,
                names=names,
                said=bool(facets.constraints),
            )
            classics = self._candidates.classics_for(
                category, intent, state, plain=plain, names=names
            )
        if plain and not by_matter:
            # "더 쉬운 거" next: easier ones to begin with, not more that say "비건"
            topic = starter_query(category)
        # A conversation begun here, without base-info, begins in its first answer's category.
        began = category if state.base_category is None else None
        await self._sessions.record(turn.session_id, category=category, base_category=began)
        among = intent.kind is IntentKind.AMONG and bool(state.last_shown)
        named = named_one(pool, pointed, at) if among else None
        if among and named is None and names:
            # "내복은 어떻게 입어?": the one of them that says what it names, first.
            named = self._saying(turn.message, pool)
        asked_of = (
            await self._candidates.just_shown(query, state) if facets.question and not among else ()
        )
        ranked, found = (
            (Ranked(pool), None)
            if again is not None and pool
            else self._ranked(
                turn.message,
                query,
                pool,
                situation=situation,
                constraints=constraints,
                among=among,
                question=facets.question,
                fit=None if plain or classics else self._fit(search, pool),
                shown=asked_of,
                starter=plain,
                classics=classics,
                named=named,
                answering=self._outright(query, ANSWERED_MARGIN) if facets.question else None,
                opening=not state.turns and not facets.question,
            )
        )
        if (
            not state.turns
            and again is None
            and situated is None
            and not (plain or classics or among)
            and state.location is None
            and not names_a_field(turn.message)
        ):
            # A first ask whose subject spans fields ("옷 관련해서 할 수 있는 거"): the other
            # fields' challenges its own search puts above the field's next ones join them.
            ranked = across_fields(
                ranked,
                nearest,
                shown=state.shown,
                constraints=constraints,
                situation=situation,
                top=ACROSS_TOP_ASKED if facets.question else ACROSS_TOP,
            )
        opening = replace(
            _opening(intent, state, category, among=among, plain=plain, again=again is not None),
            location=situation.location,
            work_type=situation.work_type,
            constraints=tuple(c for c in Constraint if c in constraints),
            unmet=ranked.unmet,
            question=facets.question,
            answer=found.sentence if found else None,
            answer_sure=found.sure if found else False,
            message=turn.message,
        )
        return self._plan(
            turn,
            self._prompt(turn.message, intent, state, category, ()),
            ranked,
            opening,
            user_text=turn.message,
            among=among,
            found=found,
            constraints=constraints,
            told=told,
            topic=topic,
        )

    async def _situated(
        self,
        message: str,
        query: Query,
        intent: Intent,
        facets: Facets,
        state: SessionState,
        constraints: frozenset[Constraint],
        situation: Situation,
        *,
        trade: str | None = None,
    ) -> tuple[Category, tuple[Hit, ...], tuple[str, ...]] | None:
        """A first ask that tells who the user is and nothing else ("바닷가 사는데 뭐 할 만한 거
        있어?", "아이랑 할 만한 거"), or nothing at all ("추천 좀 해줘", "환경 챌린지
        추천해줘"): its field and candidates, what the catalogue names first for that situation,
        or for the city (what anyone may begin with) (:meth:`Candidates.for_situation`). By
        the message's meaning they had gone to a field near the form of asking: "해녀 문화
        배우기" for the seaside, "와이셔츠로 앞치마 만들기" with a child, "텃밭 채소로 쌈밥 한 상"
        for anything. ``trade``: the work the message tells in words (a shop's firsts, not a
        salesperson's road; a driver's). None for any other turn."""
        # One who tells who they are in the words of a persona the catalogue names firsts for
        # ("사과 농사 짓고 있습니다") tells a situation though the vote reads none.
        persona = self._candidates.names_firsts_for_a_persona(situation)
        if self._asks_for_anything(message, intent, facets, state) and not (trade or persona):
            situation = Situation(CITY)
        elif not self._tells_only_a_situation(
            message, query, intent, facets, state, trade=trade, persona=persona
        ):
            return None
        elif self._alone_and_its_own(message, constraints, situation, trade):
            return None
        return await self._candidates.for_situation(
            query, state, constraints, situation, trade=trade
        )

    def _alone_and_its_own(
        self,
        message: str,
        constraints: frozenset[Constraint],
        situation: Situation,
        trade: str | None,
    ) -> bool:
        """Whether all a first ask tells of who the user is is doing it alone, and it names
        subjects of its own (:data:`SAYS_ITS_OWN` words, one the catalogue's): it asks
        for something ("혼자 사는 직장인인데 장 보면 채소를 반도 못 먹고 버려요 … 혼자서 할 수
        있는 방법": vegetables thrown away, not the firsts for one alone, "배달 주문은 일회용
        수저 없이"); alone says least of who one is."""
        company = {c for c in constraints if c.value in COMPANY}
        return (
            company == {Constraint.ALONE}
            and not (situation.location or situation.work_type or trade)
            and self._subjects is not None
            and len(words_of_its_own(message)) >= SAYS_ITS_OWN
            and bool(self._subjects.beyond_constraints(message))
        )

    def _tells_only_a_situation(
        self,
        message: str,
        query: Query,
        intent: Intent,
        facets: Facets,
        state: SessionState,
        *,
        trade: str | None = None,
        persona: bool = False,
    ) -> bool:
        """Whether a conversation's first ask tells where the user lives or works, or with
        whom, or who the user is (``persona``: one the situation firsts name challenges for),
        and asks for nothing else: no field by name or by what it is about ("전기세",
        "만들"), no question, and it lies nearer an example of a place, a company or a
        situation than any field's by :data:`ONLY_CONSTRAINTS_MARGIN` (by its embedding: at
        0.0, "탕비실에 종이컵이 …", "해변을 걷거든" and "환경 공부를 혼자" were read so), or,
        told a ``trade`` in words (a shop's, a driver's), by :data:`TRADE_MARGIN`."""
        if state.category is not None or query.vector is None:
            return False
        if intent.kind not in (IntentKind.SWITCH, IntentKind.ASK) or named_category(message):
            return False
        if (
            facets.question
            or facets.among
            or (reads_no_situation(facets) and not (trade or persona))
        ):
            return False
        if names_a_field(message):
            return False
        vector = query.vector
        nearer = self._facets.dense.nearest_told(vector) - self._intents.dense.nearest_topic(vector)
        margin = TRADE_MARGIN if trade else PERSONA_MARGIN if persona else ONLY_CONSTRAINTS_MARGIN
        return nearer >= margin

    def _asks_for_anything(
        self, message: str, intent: Intent, facets: Facets, state: SessionState
    ) -> bool:
        """Whether a conversation's first ask asks for a challenge and says nothing of which:
        no field by name or matter, no subject, place, company or question ("추천 좀 해줘",
        "뭐 해볼까", "환경 챌린지 추천해줘")."""
        if state.category is not None or self._subjects is None:
            return False
        if intent.kind not in (IntentKind.SWITCH, IntentKind.ASK, IntentKind.ANOTHER):
            return False
        if named_category(message) or names_a_field(message) or self._subjects.named_in(message):
            return False
        if len(words_of_its_own(message)) >= SAYS_ITS_OWN:
            return False  # "장 보면 꼭 반은 썩혀서 버리게 돼요 … 음쓰가": by its meaning
        if tells_others_doing(message):
            return False  # "우리 애들이 편식이 심해": by its meaning, not anyone's firsts
        return reads_no_situation(facets) and not (facets.question or facets.among)

    async def _in_conversation(
        self,
        message: str,
        query: Query,
        intent: Intent,
        facets: Facets,
        wants: Query | None,
        state: SessionState,
    ) -> tuple[Intent, Facets]:
        """The intent and facets read with the conversation (:func:`in_conversation`), measured
        on the gateway's banks and store."""
        readings = _Readings(self, message, query, wants, state)
        return await in_conversation(
            message, intent, facets, state, readings, leaves_aside=wants is not None
        )

    async def _meets_nearest_in_field(
        self, message: str, query: Query, state: SessionState, constraints: frozenset[Constraint]
    ) -> bool:
        """:meth:`app.chat.follow_up.Readings.meets_nearest_in_field`: one search of every
        field, by the conversation's topic and the message (none without a topic)."""
        if not state.topic:
            return False
        search = Query(f"{state.topic} {message}", lexical=query.lexical)
        return await self._candidates.nearest_meeting(search, state, constraints) is state.category

    def _ranked(
        self,
        message: str,
        query: Query,
        pool: tuple[Hit, ...],
        *,
        situation: Situation,
        constraints: frozenset[Constraint],
        among: bool,
        question: bool,
        fit: dict[str, float] | None,
        shown: tuple[Hit, ...] = (),
        starter: bool = False,
        classics: tuple[str, ...] = (),
        named: Hit | None = None,
        answering: str | None = None,
        opening: bool = False,
    ) -> tuple[Ranked, Found | None]:
        """The candidates in the order to show them, and a question's answer (its challenge
        first when it is the answer, one of those just ``shown`` too). ``fit``: :meth:`_fit`
        (a choice among those shown leans on the topic: never fitted); ``named``: the one of
        those shown the message names by its place ("3번은 어떻게 해?"), first; ``answering``:
        the challenge whose text answers the question outright (:meth:`_outright`);
        ``opening``: the conversation's first ask, no question (app/chat/ranking.py)."""
        if among:  # the one that answers it: no persona or situation reordering among them
            ranked = rank(pool, constraints=constraints)
            if constraints == {Constraint.EASY}:  # "그 중에 제일 쉬운 건?": the easiest of them
                ranked = replace(ranked, unmet=False)
            if named is not None:  # "3번은 어떻게 해?": that one, whatever the ranking says
                ranked = Ranked((named, *(hit for hit in ranked.hits if hit is not named)))
        else:
            aside = left_words(message)  # "텀블러 말고 또 뭐 있어?": not the tumbler first
            # "두부 말고 콩으로 먹을 만한 것도 있어?": a title saying what it wants stays.
            wanted = (
                self._subjects.titled(
                    self._subjects.beyond_constraints(leaving_aside(message)),
                    (hit.document for hit in pool),
                )
                if aside and self._subjects is not None
                else set()
            )
            ranked = rank(
                pool,
                constraints=constraints,
                situation=situation,
                fit=fit,
                aside=aside,
                wanted=wanted,
                starter=starter,
                classics=classics,
                opening=opening,
                # "이미 버스 타고 다녀요": not the bus first (a question of it is answered by it)
                done="" if question else already_done(message),
            )
        if not question:
            return ranked, None
        found = find_answer(
            message, ranked.hits, shown=shown, vector=query.vector, bank=self._sentences
        )
        if (found is None or not found.sure) and not among and answering is not None:
            # "다 쓴 건전지 어떻게 버려?" says one of "폐건전지와 폐형광등은 …"'s asks nearly
            # word for word: its text holds the answer, however near its sentences lie.
            held = next((hit for hit in ranked.hits if hit.document.id == answering), None)
            if held is not None:
                found = (
                    answered_by(message, held, vector=query.vector, bank=self._sentences) or found
                )
        if found is None and among and ranked.hits and asks_how(message):
            # "이거 어떻게 시작해?": what its text says to do; how to do this one was asked, not
            # whether it meets the critiques in force (said on the turn that showed it). Of the
            # one that says what the question names, if it names something ("내복은 어떻게
            # 입어?"); none says it ("보일러는 어떻게 해?" after standby power): not theirs.
            if (asked := self._saying(message, ranked.hits)) is not None:
                found = instruction(asked)
                ranked = replace(ranked, unmet=False)
        subject = asks_what(message)
        if (found is None or not found.sure) and subject and field_alone(subject) is None:
            # "쿨맵시가 정확히 어떤 거야?": what the challenge its title names asks, as its text
            # says it first (a field's name is no challenge's: "제로웨이스트가 뭐예요?").
            found = what_it_is(subject, (*ranked.hits, *shown)) or found
        if (found is None or not found.sure) and ranked.hits and asks_worth(message):
            # "메일 지우는 게 진짜 효과가 있어?", "이거 하면 진짜 효과 있어?": why the first
            # challenge helps, as it says; or why the one whose title the question says does
            # (the answer itself when the question points at it, or names it).
            named = named_in(message, (*ranked.hits[:LOOK_IN], *shown, *pool))
            found = reason(named or ranked.hits[0], sure=among or named is not None) or found
            if among:  # whether this one helps was asked, not whether it meets the critiques
                ranked = replace(ranked, unmet=False)
        if found is not None and found.sure and asks_how_to(message):
            # "투명 페트병은 어떻게 버려?": what to do, as its text says it (the nearest of its
            # instructions), not why it helps ("깨끗하게 따로 모인 투명 페트병은 …").
            told = answered_by(message, found.hit, vector=query.vector, bank=self._sentences)
            found = told or found
        if (
            found is not None
            and found.sure
            and not (
                holds_what_is_asked(message, found.sentence)
                and says_what_is_asked_of(message, found.hit.document)
            )
        ):
            # "텀블러는 얼마나 자주 씻어야 돼?": the tumbler's text says why it helps, not how
            # often to wash it; "생리컵 … 소독은 어떻게 …?": its text never says disinfecting.
            # Offered as the closest it says, never as the answer.
            found = replace(found, sure=False)
        if found is not None:
            answer = found.hit.document.id
            rest = tuple(hit for hit in ranked.hits if hit.document.id != answer)
            ranked = replace(ranked, hits=(found.hit, *rest))
        return ranked, found

    async def _wants(self, message: str, query: Query) -> Query | None:
        """The words a message wants after what it leaves aside (:func:`leaving_aside`), with
        their own embedding (read by their words in a burst, or when the model is busy or
        fails); None when it leaves nothing aside."""
        wanted = leaving_aside(message)
        if wanted == message:
            return None
        vector = None if query.lexical else await self._embedding_if_free(wanted)
        return Query(wanted, vector, lexical=vector is None)

    def _wanted(self, message: str, wants: Query | None, state: SessionState) -> Intent | None:
        """What a follow-up that leaves something aside asks for, read alone; None when it
        leaves nothing aside, or names a category (the whole's reading has it)."""
        if wants is None or not state.turns or named_category(message) is not None:
            return None
        return self._intents.decide(wants.text, wants.vector, state)

    async def _turns_to(self, message: str, query: Query, state: SessionState) -> Intent | None:
        """Where a follow-up turns in its own words (:func:`toward`), read alone by its
        meaning: a field ("이번엔 먹는 거 쪽으로", "스마트폰 쪽도 알려줘"; the field whose topic
        examples and best-fitting challenges the words are nearest: a switch there), or a
        place, company or situation ("회사 쪽으로는 뭐 있어?": a critique, in its field). None
        when it says none, names a field (the whole's reading has it), or without embeddings."""
        words = toward(message)
        if words is None or query.lexical or not state.turns or named_category(message):
            return None
        vector = await self._embedding_if_free(words)
        if vector is None:
            return None
        return turned_to(words, vector, self._facets, self._intents.dense, self._fit_bank)

    def _shown_fit(self, message: str, query: Query, state: SessionState) -> float | None:
        """How much better the challenges just shown fit the message than the rest of the
        catalogue (:meth:`FitBank.nearer_shown`), for a message naming no field; None without
        the embedding or the bank, or with nothing shown."""
        if (
            self._fit_bank is None
            or query.vector is None
            or not state.last_shown
            or named_category(message) is not None
        ):
            return None
        return self._fit_bank.nearer_shown(query.vector, state.last_shown, message)

    async def _beyond_shown(
        self, message: str, query: Query, state: SessionState
    ) -> tuple[bool, Category | None]:
        """:func:`about_something_else`, on the store (what was just shown) and the fit bank;
        never without the catalogue's subjects."""
        if self._subjects is None:
            return False, None

        async def shown() -> list[Document]:
            return await self._shown_documents(query, state)

        def fitting() -> list[Category] | None:
            return self._fitting_fields(query)

        return await about_something_else(message, state, self._subjects, shown, fitting)

    async def _unsaid_by_shown(self, message: str, query: Query, state: SessionState) -> bool:
        """Whether ``message`` names a subject none of the challenges just shown says (never
        without the catalogue's subjects)."""
        if self._subjects is None or not self._subjects.named_in(message):
            return False
        shown = await self._shown_documents(query, state)
        return bool(shown) and bool(self._subjects.unsaid(message, shown))

    async def _said_by_shown(self, message: str, query: Query, state: SessionState) -> bool:
        """Whether ``message`` names a subject one of the challenges just shown says (never
        without the catalogue's subjects)."""
        if self._subjects is None or not self._subjects.named_in(message):
            return False
        return bool(self._subjects.said_by(message, await self._shown_documents(query, state)))

    async def _shown_documents(self, query: Query, state: SessionState) -> list[Document]:
        """The challenges the turn before showed, as documents (from the store)."""
        return [hit.document for hit in await self._candidates.just_shown(query, state)]

    def _saying(self, message: str, hits: tuple[Hit, ...]) -> Hit | None:
        """The first of ``hits`` whose text says every subject ``message`` names (the first
        when it names none); None when none says them."""
        if self._subjects is None or not self._subjects.named_in(message):
            return hits[0]
        subjects = self._subjects
        return next((hit for hit in hits if not subjects.unsaid(message, (hit.document,))), None)

    def _names_a_subject(self, message: str) -> bool:
        """Whether ``message`` names something challenges are about besides its field
        ("에어컨 전기 아끼는 법 알려줘", "아침 식사 비건 챌린지 추천해줘"): it reads as a plain
        ask by meaning, and is answered by what fits it, not by the field's first steps."""
        return self._subjects is not None and bool(self._subjects.named_in(message))

    def _by_its_matter_alone(
        self,
        message: str,
        facets: Facets,
        intent: Intent,
        constraints: frozenset[Constraint],
        told: tuple[str, ...],
    ) -> bool:
        """Whether ``message`` asks for a field by its matter and nothing in it, at home at
        most ("원룸인데 전기세가 생각보다 많이 나와서 좀 줄이고 싶어", "우리 집 전기 아끼는
        방법"): a plain ask that the examples' vote misses under what it tells."""
        return (
            self._subjects is not None
            and constraints <= {Constraint.HOME}
            and _asks_anew(facets, intent, told)
            and names_a_field(message)
            and not self._subjects.beyond_constraints(message)
        )

    def _field_and_nothing_in_it(self, message: str) -> bool:
        """Whether ``message`` names a field and no subject in it ("에너지 절약 챌린지",
        "탄소발자국 챌린지 알려줘"): a plain ask by its words (the vote had read "에너지 절약
        챌린지" as an ask about something, answered first by "에너지캐시백 신청하기"). Never
        without the catalogue's subjects (nothing tells then what else it names)."""
        subjects = self._subjects
        return (
            subjects is not None
            and named_category(message) is not None
            and not subjects.named_in(message)
        )

    def _nearer_a_constraint(self, message: str, query: Query) -> bool:
        """Whether the message names no field and lies nearer an example of a constraint than
        any field's, by :data:`ONLY_CONSTRAINTS_MARGIN` (by its embedding; False without one)."""
        if query.vector is None or named_category(message) is not None:
            return False
        vector = query.vector
        nearer = self._facets.dense.nearest_constraint(vector) - self._intents.dense.nearest_topic(
            vector
        )
        return nearer >= ONLY_CONSTRAINTS_MARGIN

    def _says_only_constraints(self, message: str) -> bool:
        """Whether ``message`` names no field, in name or matter, and no subject but the words
        of its constraints. Never without the catalogue's subjects."""
        subjects = self._subjects
        return (
            subjects is not None
            and named_category(message) is None
            and subjects.names_only_constraints(message)
        )

    def _best_fit(self, query: Query | None) -> Category | None:
        """The category of the challenge that fits the query's words best (None without its
        embedding or the fit bank)."""
        if query is None or query.vector is None or self._fit_bank is None:
            return None
        best = self._fit_bank.categories(query.vector, 1, query.text)
        return best[0] if best else None

    async def _embedding_if_free(self, text: str) -> QueryVector | None:
        """The embedding of words the turn reads besides its own (what it wants, beside what
        it leaves): best-effort, None when the model is busy or fails (read by their words)."""
        try:
            return await self._retriever.embed(text)
        except EmbedderBusy:
            return None
        except Exception:  # read by its words, as in a burst
            log.warning("an embedding besides the turn's failed; read by words", exc_info=True)
            return None

    def _fit(self, search: Query, pool: tuple[Hit, ...]) -> dict[str, float] | None:
        """How well each candidate fits what the turn says in its own words (app/chat/fit.py);
        None for a follow-up that leans on the conversation's topic ("더 쉬운 거": fitting
        the topic again moved critiques away from what they asked, on the fit bench's dev
        split), in a burst, or without the bank."""
        if self._fit_bank is None or search.vector is None or not pool:
            return None
        ids = (hit.document.id for hit in pool)
        return self._fit_bank.fit(search.vector, ids, search.text)

    async def _read_facets(self, message: str, query: Query, wants: Query | None) -> Facets:
        """The message's facets; a message told in clauses is read clause by clause too (an
        embedding each; none when the embedding model is busy: the whole is read alone), and
        one that leaves a place aside ("현장 말고 집에서") for the place it ``wants``."""
        with _tracer.start_as_current_span("facets") as span:
            told_in = clauses(message)
            parts: list[QueryVector] = []
            if query.vector is not None:
                try:
                    for clause in told_in:
                        parts.append(await self._retriever.embed(clause))
                except EmbedderBusy:
                    parts = []
                except Exception:  # the clauses only add to the whole's reading
                    log.warning("a clause's embedding failed; the whole is read", exc_info=True)
                    parts = []
            # "돈 안 드는 비건 챌린지": read without the field's name too, for its constraints.
            unnamed = None
            if query.vector is not None and (text := without_field(message)):
                unnamed = await self._embedding_if_free(text)
            facets = self._facets.read(message, query.vector, parts, unnamed)
            if asks_what(message):
                # "쿨맵시가 뭐야?": a question and no critique, whatever the vote read
                facets = replace(facets, question=True, constraints=frozenset())
            if wants is not None:
                # Its own clauses are read for it too ("디지털 얘긴 됐고, 이번엔 먹는 거 쪽으로.
                # 현장에서 챙길 수 있는 걸로": the place is the last clause's).
                # (no parts at all when the embedder was busy for the clauses)
                pairs = zip(told_in, parts, strict=False)
                own = [part for clause, part in pairs if clause in wants.text]
                facets = wanting(facets, self._facets.read(wants.text, wants.vector, own))
            if off_work(message):
                # "가게 쉬는 날", "마감하고 나서": time off work, neither at the workplace the
                # message names nor at the one asked for before.
                facets = replace(
                    facets,
                    constraints=facets.constraints - {Constraint.WORK},
                    left_aside=facets.left_aside | {Constraint.WORK},
                )
            span.set_attribute("gateway.clauses", len(parts))
            span.set_attribute("gateway.constraints", sorted(c.value for c in facets.constraints))
            span.set_attribute("gateway.question", facets.question)
        return facets

    def _prompt(
        self,
        message: str,
        intent: Intent,
        state: SessionState,
        category: Category,
        candidates: tuple[Hit, ...],
    ) -> PromptInput:
        """A free-text turn's prompt: a follow-up in the same category sees the last exchange;
        the descriptions composition replays the turns of this category only (answers about
        another one would be copied by a small model; turns stored without a category count
        as the current one's); the picks composition replays the conversation's last turns
        word for word when PROMPT_REPLAY_TURNS asks (:func:`_replay`)."""
        follow_up = intent.kind in _FOLLOW_UPS and category is state.category
        keep = self._settings.prompt_history_turns
        mine = [
            turn
            for turn in state.turns
            if turn.category is category or (turn.category is None and category is state.category)
        ]
        return PromptInput(
            category=category,
            candidates=candidates,
            message=message,
            location=state.location,
            work_type=state.work_type,
            previous=_previous_exchange(state) if follow_up else None,
            history=mine[-keep:] if keep else (),
            replay=_replay(state.turns, self._settings.prompt_replay_turns),
        )

    async def _understand(
        self, text: str, state: SessionState
    ) -> tuple[Query, tuple[Hit, ...], Intent]:
        """The turn as a search query (its embedding, or its words alone in a burst), its
        nearest catalogue documents, and what it asks for: the examples' reading, with those
        documents' categories as evidence of the category it is about."""
        with _tracer.start_as_current_span("intent") as span:
            try:
                with _tracer.start_as_current_span("retrieval.embed"):
                    vector: QueryVector | None = await self._retriever.embed(text)
            except EmbedderBusy:
                vector = None  # read by its words: lexical intent, sparse-only search
                self._metrics.lexical_turns.inc()
            query = Query(text, vector, lexical=vector is None)
            nearest = await self._candidates.search(query, ANYWHERE, k=_EVIDENCE_K) or ()
            evidence = self._evidence(query, nearest)
            answering = self._outright(query)
            outright = self._fit_bank.category(answering) if answering and self._fit_bank else None
            intent = self._intents.decide(text, vector, state, evidence=evidence, outright=outright)
            if vector is None and IntentClassifiers.needs_embedding(intent):
                intent = await self._confirm_refusal(text, state, intent, evidence)
            self._metrics.intents.labels(intent.kind.value).inc()
            span.set_attribute("gateway.intent", intent.kind.value)
            span.set_attribute("gateway.lexical", query.lexical)
        return query, nearest, intent

    def _evidence(self, query: Query, nearest: tuple[Hit, ...]) -> Evidence | None:
        """What the catalogue says of the message's category: the categories of its nearest
        documents, and of the documents that fit it best (users' words against users' words;
        :func:`fused_evidence`)."""
        nearby = [hit.document.category for hit in nearest]
        best = self._fitting_fields(query)
        return catalogue_evidence(nearby) if best is None else fused_evidence(nearby, best)

    def _fitting_fields(self, query: Query) -> list[Category] | None:
        """The categories of the challenges that fit the query best, best first (None
        without its embedding or the fit bank)."""
        if query.vector is None or self._fit_bank is None:
            return None
        return self._fit_bank.categories(query.vector, _EVIDENCE_K, query.text)

    def _outright(self, query: Query, margin: float = OUTRIGHT_MARGIN) -> str | None:
        """The one challenge that fits the message better than any other by ``margin``
        (app/chat/fit.py): its text answers it. None without its embedding or the bank."""
        if query.vector is None or self._fit_bank is None:
            return None
        return self._fit_bank.outright(query.vector, query.text, margin=margin)

    async def _confirm_refusal(
        self, text: str, state: SessionState, intent: Intent, evidence: Evidence | None
    ) -> Intent:
        """An off-topic verdict read by words alone, decided again on the turn's embedding
        (waited for, burst or not): the lexical reading refuses some plain questions ("전기
        아끼는 법 알려줘"), and a refused user is worse off than a burst a little slower. The
        turn's search stays by words: the burst's rule for search."""
        try:
            with _tracer.start_as_current_span("retrieval.embed"):
                vector = await self._retriever.embed(text, wait=True)
        except EmbedderBusy:
            self._metrics.lexical_refusals.labels("unconfirmed").inc()
            return intent
        decided = self._intents.decide(text, vector, state, evidence=evidence)
        confirmed = decided.kind in (IntentKind.OFF_TOPIC, IntentKind.NONSENSE)
        self._metrics.lexical_refusals.labels("confirmed" if confirmed else "overturned").inc()
        return decided

    # ------------------------------------------------------------------ the plan
    def _plan(
        self,
        turn: BaseInfoTurn | FreeTextTurn,
        prompt: PromptInput,
        ranked: Ranked,
        opening: Opening,
        *,
        user_text: str,
        among: bool = False,
        found: Found | None = None,
        constraints: frozenset[Constraint] = frozenset(),
        told: tuple[str, ...] = (),
        topic: str = "",
    ) -> TurnPlan:
        """The plan from the ranked candidates. In the ``picks`` composition the best is the
        first challenge, put by the gateway; the model orders the next ``RETRIEVAL_K`` (none
        for "그 중에 …": the one that answers it). Other compositions give the model the best
        ``RETRIEVAL_K`` to write from."""
        settings = self._settings
        hits = ranked.hits
        # Without candidates (the vector store failed) there is nothing to choose among: the
        # model writes the whole answer.
        composition = settings.answer_composition if hits else "descriptions"
        picks = settings.answer_challenges
        lead: Hit | None = None
        if composition == "picks":
            # "그 중에 제일 쉬운 건?": the one that answers it, chosen by the gateway alone.
            lead, rest = hits[0], hits[1:]
            candidates = () if among else rest[: settings.retrieval_k]
            least = most = min(picks - 1, len(candidates))
        else:
            candidates = hits[: settings.retrieval_k]
            most = 1 if among else picks
            least = min(most, len(candidates)) or 1
        prompt = replace(
            prompt, candidates=candidates, chosen=lead.document.title if lead else None
        )
        messages = answer_messages(prompt, composition, examples=settings.prompt_examples)
        recommend = None
        if composition == "picks" and lead is not None:
            recommend = compose_recommend(replace(opening, lead=lead.document.title))
        shown = {hit.document.id for hit in (*candidates, *((lead,) if lead else ()))}
        in_force = tuple(c.value for c in Constraint if c in constraints)
        return TurnPlan(
            session_id=turn.session_id,
            request_id=turn.request_id,
            endpoint=turn.endpoint,
            client=turn.client,
            started=turn.started,
            category=prompt.category,
            candidates=tuple(candidates),
            messages=tuple(messages),
            replays=composition == "picks" and settings.prompt_replay_turns > 0,
            replayed=len(prompt.replay) if composition == "picks" else 0,
            composition=composition,
            min_picks=least,
            max_picks=most,
            grounded=settings.llm_grounded_titles and bool(candidates),
            user_text=user_text,
            recommend=recommend,
            lead=lead,
            lead_description=_described(lead, found),
            suggestions=suggest(
                [c for c in Constraint if c in constraints],
                [hit for hit in hits if hit.document.id not in shown],
            )
            if hits
            else (),
            constraints=in_force,
            told=told,
            topic=topic,
        )


def _described(lead: Hit | None, found: Found | None) -> str:
    """The lead's description: the catalogue's, less the sentence the recommend quotes as a
    question's answer (no sentence twice in one answer)."""
    if lead is None:
        return ""
    body = lead.document.body
    if found is None or found.hit is not lead:
        return body
    rest = [s for s in sentences_of(body) if s != found.sentence]
    return " ".join(rest) or body


#: How a base-info situation reads as a search: who the user is, in words the catalogue uses.
_LIVES = {
    "도시": "도시에 사는",
    "바닷가": "바닷가 마을에 사는",
    "산": "산 가까이 사는",
    "농촌": "농촌 마을에 사는",
}
_WORKS = {
    "사무직": "사무실에서 일하는 직장인이",
    "현장직": "현장에서 몸을 쓰며 일하는 사람이",
    "영업직": "외근과 출장이 많은 영업직이",
    "재택근무": "집에서 일하는 재택근무자가",
}


def _situation_query(category: Category, location: str, work_type: str) -> str:
    """Base-info as a search: the situation said as a person would, so that retrieval finds
    the challenges written for it ("농촌 마을에 사는 현장에서 몸을 쓰며 일하는 사람이 …")."""
    lives = _LIVES.get(location, location)
    works = _WORKS.get(work_type, work_type)
    return f"{lives} {works} 일상에서 쉽게 할 수 있는 {category.label} 챌린지"


def _plain(
    facets: Facets, intent: Intent, constraints: frozenset[Constraint], told: tuple[str, ...]
) -> bool:
    """Whether the turn asks for a field and nothing in it ("비건 챌린지 추천해줘", "에너지
    절약 뭐부터 하면 돼?"): no critique, and :func:`_asks_anew`."""
    return facets.plain and not constraints and _asks_anew(facets, intent, told)


def _asks_anew(facets: Facets, intent: Intent, told: tuple[str, ...]) -> bool:
    """Whether the turn is a new or plain ask, with no question, situation told or pointer at
    what was shown."""
    return (
        intent.kind in (IntentKind.SWITCH, IntentKind.ASK)
        and not told
        and not facets.question
        and not facets.among
    )


def _first_answer(state: SessionState) -> Turn | None:
    """The conversation's first answer that showed challenges (where it began, else the
    first remembered)."""
    began = state.began
    if began is not None and began.shown:
        return began
    return next((turn for turn in state.turns if turn.shown), None)


def _first_topic(state: SessionState) -> str | None:
    """The topic of the first turn remembered in the category the conversation began in."""
    return began.topic if (began := state.began) else None


def _subject(
    message: str,
    query: Query,
    intent: Intent,
    state: SessionState,
    *,
    critique: bool,
    names: bool = False,
) -> tuple[str, Query]:
    """What the turn is about, and what to search with. A follow-up ("비슷한 거 더", "돈 안
    드는 걸로만") says little of its own subject: it searches with the conversation's topic
    before its words, and keeps the topic, unless the topic is a field's first steps (a plain
    ask) and it ``names`` a subject ("점심 도시락으로 할 만한 것도 있어?"); back to where the
    conversation began ("처음 얘기로 돌아가자"), with the topic it began with; anything else
    is its own topic."""
    if intent.kind is IntentKind.BACK_TO_BASE and (began := _first_topic(state)):
        return began, Query(began, lexical=query.lexical)
    follow_up = intent.kind in (IntentKind.MORE, IntentKind.AMONG) or (
        intent.kind is IntentKind.ASK and critique
    )
    if not follow_up or not state.topic:
        return message, query
    if names and state.category is not None and state.topic == starter_query(state.category):
        return message, query
    text = f"{state.topic} {message}"
    return state.topic, Query(text, lexical=query.lexical)


def _leaning(vector: QueryVector, toward: QueryVector, weight: float) -> QueryVector:
    """``vector`` weighed ``weight`` times against ``toward``, as one unit embedding."""
    blend = weight * np.asarray(vector, dtype=np.float32) + np.asarray(toward, dtype=np.float32)
    norm = float(np.linalg.norm(blend))
    return blend / norm if norm else blend


def _replay(turns: tuple[Turn, ...], keep: int) -> tuple[Turn, ...]:
    """The earlier turns a ``picks`` prompt replays (at most ``keep``: PROMPT_REPLAY_TURNS):
    those the last turn's prompt replayed, and the last turn, so that this prompt begins with
    the whole of the last one (vLLM's prefix cache has it on the session's replica; the model's
    reply and what follows are prefilled again). Past ``keep``, the window starts
    again from the newest ``keep // 2`` (at least one): it moves in steps, each costing the
    cache once, rather than by a turn every turn, which would cost it every turn. A turn with
    nothing to replay (salvaged, or stored by an older release) ends the window."""
    if keep <= 0 or not turns:
        return ()
    count = turns[-1].replayed + 1
    if count > keep:
        count = max(1, keep // 2)
    window: list[Turn] = []
    for turn in reversed(turns[-count:]):
        if not turn.asked:
            break
        window.append(turn)
    return tuple(reversed(window))


def _previous_exchange(state: SessionState) -> tuple[str, list[str]] | None:
    """The last turn's words and the titles it showed, for a follow-up's prompt."""
    if not state.turns:
        return None
    last = state.turns[-1]
    try:
        answer = Answer.model_validate_json(last.assistant)
    except ValueError:  # a turn stored by another release
        return last.user, []
    return last.user, [item.title for item in answer.challenges]


def _opening(
    intent: Intent,
    state: SessionState,
    category: Category,
    *,
    among: bool,
    plain: bool = False,
    again: bool = False,
) -> Opening:
    """What the gateway's recommend says this free-text turn did."""
    kind = _OPENING_KIND.get(intent.kind, "ask") if state.turns else "first"
    if intent.kind is IntentKind.AMONG and not among:
        kind = "ask"  # nothing shown to choose among
    if plain:  # "비건 챌린지 추천해줘": one of the field's first steps
        kind = "plain"
    if again:  # "처음 거로 다시 보여줘": the first answer, shown again
        kind = "again"
    return Opening(
        category,
        kind,
        state.location,
        state.work_type,
        turn=len(state.turns),
        previous_category=state.category,
    )
