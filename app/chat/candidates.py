"""Where a turn's candidates come from: the catalogue searched, scope after scope.

    the answer's category (the intent's, another field's, or the nearest document's)
      -> scopes, best first: in the category, fitting the situation, not shown before; then
         wider (:func:`_scopes`), until one holds any that satisfies the constraints in force
      -> retrieval's hits there, joined by the challenges that fit the turn best where it
         missed them (app/chat/fit.py)
      -> a plain ask for a field: its classic first steps among them
      -> "그 중에 …": exactly the challenges pointed at
    a first ask telling only who the user is ("바닷가 사는데 …", "아이랑 …"): what the catalogue
    names first for that situation, whose first decides the category (:meth:`for_situation`)

Ranking them is app/chat/ranking.py's; what the turn means is app/chat/planning.py's.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, replace

from opentelemetry import trace

from app.chat.constraints import Constraint, satisfies
from app.chat.fit import FitBank
from app.chat.intent import Intent, IntentKind
from app.chat.ranking import Ranked, Situation, rank
from app.chat.sessions import SessionState
from app.config import ChatSettings
from app.domain.categories import Category
from app.metrics import Metrics
from app.rag.corpus import COMPANY
from app.rag.retriever import Hit, QueryVector, Retriever
from app.rag.scope import Scope

__all__ = [
    "BEST_FITTING_JOINED",
    "FALLBACK_CATEGORY",
    "Candidates",
    "Query",
    "named_one",
    "starter_query",
]

log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)  # a proxy: app/tracing.py

#: The category of a turn with nothing to decide it (no category yet, nothing found).
FALLBACK_CATEGORY = Category.ZERO_WASTE
#: How many of the challenges that fit a query best (app/chat/fit.py) join retrieval's
#: candidates where it missed them (:meth:`Candidates.with_best_fitting`; 3 of 0, 3 and 6 on
#: the fit bench's dev splits, bench/README.md "Eighth pass").
BEST_FITTING_JOINED = 3
#: A critique said in words leaves a field that meets it with so few challenges, or only with
#: ones written for a narrow persona, when another field's lie this much nearer the ask (a
#: cosine; 0.04-0.06 alike on the fit bench's dev splits, 0.02 moved good critiques away:
#: bench/README.md "Eighteenth pass").
WEAK_FIELD_MARGIN = 0.05
_WEAKLY_MEETING = 3  # so few meeting it that every field's are looked at too
#: Documents of every field looked at to see which fields still have some that fit the situation
#: and meet the constraints (another field, and the field a critique meets nearest).
EVERY_FIELD_K = 60


@dataclass(frozen=True, slots=True)
class Query:
    """What a search looks for: the turn's words, and its embedding when it has one."""

    text: str
    vector: QueryVector | None = None
    lexical: bool = False  # read without its embedding (a burst): sparse-only search


class Candidates:
    """The catalogue as a turn's candidates are looked for in it: the retriever, the fit bank
    (None: retrieval's own hits only), each field's classic first steps and each situation's
    firsts (by "at:바닷가", "job:현장직", "with:family"; none: such an ask is read as any)."""

    def __init__(
        self,
        *,
        retriever: Retriever,
        fit: FitBank | None,
        classics: Mapping[Category, tuple[str, ...]],
        settings: ChatSettings,
        metrics: Metrics,
        firsts: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self._retriever = retriever
        self._fit_bank = fit
        self._classics = classics
        self._firsts = firsts or {}
        self._settings = settings
        self._metrics = metrics

    def first_steps(self, category: Category) -> tuple[str, ...]:
        """The field's classic first steps, in their order (document ids)."""
        return self._classics.get(category, ())

    async def choose(
        self,
        query: Query,
        intent: Intent,
        state: SessionState,
        nearest: tuple[Hit, ...],
        constraints: frozenset[Constraint],
        *,
        pointed: tuple[str, ...] = (),
        by_what_it_says: bool = False,
        at: int | None = None,
        plain: bool = False,
        names: bool = False,
        said: bool = False,
    ) -> tuple[Category, tuple[Hit, ...]]:
        """The answer's category and its candidates, in retrieval's order (a choice among
        those ``pointed`` at: in the order they were shown, unless ``by_what_it_says``; the
        one at the place ``at`` names first). A ``plain`` ask for a field ("비건 챌린지
        추천해줘"), and more of it or a critique of it after: its words find the challenges
        that say "비건" most, not those to begin with, so the field is searched for what anyone
        begins with, and its classic first steps are candidates wherever that search ranks them
        (ranked first: app/chat/ranking.py)."""
        kind = intent.kind
        if kind is IntentKind.AMONG and pointed:
            last = pointed
            # In the order they were shown: "이거", "그 중에 돈 안 드는 거" point at the answer
            # as the user read it, whose first was the best for what was asked. A choice by
            # what it says instead ("방금 세 개 중에 비행기 탈 일 있을 때 써먹을 만한 건?"): in
            # the order of its search.
            among = await self.these(query, last, as_shown=not by_what_it_says)
            if among:
                named = named_one(among, last, at)
                if named is not None:  # "두 번째 거 어떻게 시작해?": that one, first
                    among = (named, *(hit for hit in among if hit is not named))
                return state.category or among[0].document.category, among
        if kind is IntentKind.ANOTHER:
            category: Category | None = await self.another_field(
                query, state, constraints, intent.away_from
            )
        else:
            category = _next_category(intent, state)
        if category is None:
            # Nothing chosen yet: the closest document decides (the server's choice, not the
            # model's).
            category = nearest[0].document.category if nearest else FALLBACK_CATEGORY
        # A critique in the same field asks for new ones ("더 쉬운 거", "돈 안 드는 거").
        critique = bool(constraints) and bool(state.turns) and category is state.category
        more = kind is IntentKind.MORE or (critique and kind is IntentKind.ASK)
        if plain:
            query = Query(starter_query(category))
        category, pool = await self.fitting(
            query, category, state, more=more, constraints=constraints, said=said
        )
        classics = self.classics_for(category, intent, state, plain=plain, names=names)
        if not classics:
            return category, pool
        return category, await self.with_classics(query, category, state, classics, pool)

    async def these(
        self, query: Query, shown: tuple[str, ...], *, as_shown: bool = True
    ) -> tuple[Hit, ...]:
        """The challenges ``shown`` (doc ids), in the order they were shown (else in the order
        of the search for ``query``); () when the store fails or holds none of them."""
        found = await self.search(query, Scope(only=frozenset(shown)), k=len(shown)) or ()
        if as_shown:
            found = tuple(sorted(found, key=lambda hit: shown.index(hit.document.id)))
        return found

    async def just_shown(self, query: Query, state: SessionState) -> tuple[Hit, ...]:
        """The challenges the turn before showed: a question may be about one of them."""
        last = state.last_shown
        return await self.these(query, last, as_shown=False) if last else ()

    async def fitting(
        self,
        query: Query,
        category: Category,
        state: SessionState,
        *,
        more: bool,
        constraints: frozenset[Constraint] = frozenset(),
        said: bool = False,
    ) -> tuple[Category, tuple[Hit, ...]]:
        """The best candidates for the session's situation, searched scope after scope
        (:func:`_scopes`) until one holds any that satisfies the constraints (none does: the
        first that holds any). A scope without a category (``more``, when the category has no
        new challenge fitting the situation left, whatever the constraints) moves the answer to
        its best hit's category; so does a critique ``said`` in the turn's own words that
        nothing new in the category satisfies, when another field's challenge does ("비 오면 못
        나가니까 집 안에서 할 수 있는 걸로도" after a family's plogging: "아이와 환경 그림책
        읽기"), and constraints kept from before ("비슷한 걸로 몇 개만 더") when it also lies
        nearer the ask than any the category has left (:func:`_nearer_than_the_field`). A
        critique said in words that the category meets only weakly leaves too, when another
        field meets it far better (:func:`_met_better_elsewhere`: "밖에 나가서 하는 걸로는?"
        after a remote worker's energy picks is not "고추는 햇볕에 먼저 말리기")."""
        if not self._settings.retrieval_k:  # RETRIEVAL_K=0: no candidates, nothing searched
            return category, ()
        first: tuple[Category, tuple[Hit, ...]] | None = None
        # A constraint filters what is found: look at more to find what satisfies it.
        k = min(self._settings.rank_pool * (3 if constraints else 1), 60)
        situated = bool(state.location and state.work_type)
        weakly: tuple[Hit, ...] = ()  # the category's own that meet a critique, if weakly
        for scope in _scopes(category, state.location, state.work_type, state.shown, more=more):
            if more and first is not None and not scope.exclude:
                # "More" shows nothing again while anything new is left: the nearest new one
                # (and the answer says none fits) rather than one shown before that fits.
                break
            if first is not None and situated and not (scope.location and scope.work_type):
                # Every challenge fits base-info's location and work type (SPEC): a scope
                # that relaxes them is for a situation that holds nothing at all, not for a
                # constraint nothing there satisfies (the nearest, and the answer says so).
                break
            hits = await self.search(query, scope, k=k)
            if hits is None:  # the store failed: no use asking it again
                break
            hits = await self.with_best_fitting(query, scope, hits)
            if not hits:
                continue
            found = category
            if scope.category is None:
                if constraints:  # the best hit that satisfies them decides the category
                    everywhere = rank(hits, constraints=constraints)
                    if first is not None and not (
                        said or _nearer_than_the_field(everywhere.hits[0], hits, category)
                    ):
                        break
                    if weakly and (
                        everywhere.unmet
                        or not _met_better_elsewhere(weakly, everywhere.hits, state)
                    ):
                        break  # the category's own, after all
                    hits = everywhere.hits
                    if first is not None:  # the field of the nearest of the best others
                        nearest = max(hits[:_WEAKLY_MEETING], key=lambda hit: hit.score)
                        hits = (nearest, *(hit for hit in hits if hit is not nearest))
                found = hits[0].document.category
                hits = tuple(h for h in hits if h.document.category is found)
            if not constraints:
                return found, hits
            met = rank(hits, constraints=constraints)
            if not met.unmet:
                if said and more and first is None and _meets_weakly(met.hits, state):
                    weakly, first = met.hits, (found, hits)
                    continue  # seen against every field's first
                return found, hits
            first = first or (found, hits)
        return first or (category, ())

    async def with_best_fitting(
        self, query: Query, scope: Scope, hits: tuple[Hit, ...]
    ) -> tuple[Hit, ...]:
        """``hits`` joined by the challenges of the scope's category that fit the query best
        (app/chat/fit.py: the message against each challenge's asks) where retrieval missed
        them ("휴대폰 용량이 맨날 꽉 차서": "스마트폰 사진과 앱 정리하기" fits it best and was
        not in retrieval's 12), each at its place in the fit's order. Only those within the
        scope; none in a burst (no embedding) or without the bank."""
        if self._fit_bank is None or query.vector is None or not hits:
            return hits
        best = self._fit_bank.best(
            query.vector, BEST_FITTING_JOINED, query.text, category=scope.category
        )
        have = {hit.document.id for hit in hits}
        missed = [doc_id for doc_id in best if doc_id not in have]
        if not missed:
            return hits
        only = frozenset(missed) & scope.only if scope.only else frozenset(missed)
        found = await self.search(query, replace(scope, only=only), k=len(missed)) or ()
        joined = list(hits)
        for hit in sorted(found, key=lambda hit: best.index(hit.document.id)):
            joined.insert(min(best.index(hit.document.id), len(joined)), hit)
        return tuple(joined)

    async def with_classics(
        self,
        query: Query,
        category: Category,
        state: SessionState,
        classics: tuple[str, ...],
        pool: tuple[Hit, ...],
    ) -> tuple[Hit, ...]:
        """``pool`` with the field's classic first steps, wherever the search ranks them
        (fitting the situation, not shown yet), before the rest."""
        only = frozenset(classics)
        scope = Scope(category, state.location, state.work_type, only=only, exclude=state.shown)
        found = await self.search(query, scope, k=len(classics)) or ()
        return (*found, *(hit for hit in pool if hit.document.id not in classics))

    def classics_for(
        self,
        category: Category,
        intent: Intent,
        state: SessionState,
        *,
        plain: bool,
        names: bool = False,
    ) -> tuple[str, ...]:
        """The field's classic first steps, in their order, for a plain ask for it and for
        more of it or a critique of it after (:func:`_after_plain`), unless that ``names`` a
        subject of its own; none otherwise."""
        if plain or (_after_plain(intent, state, category) and not names):
            return self.first_steps(category)
        return ()

    async def nearest_meeting(
        self, query: Query, state: SessionState, constraints: frozenset[Constraint]
    ) -> Category | None:
        """The field of the challenge nearest ``query`` that meets ``constraints`` (fitting the
        situation, not shown yet); None when none meets them or the store fails."""
        met = await self._meeting_everywhere(query, state, constraints)
        return None if met.unmet or not met.hits else met.hits[0].document.category

    async def another_field(
        self,
        query: Query,
        state: SessionState,
        constraints: frozenset[Constraint],
        away_from: Category | None = None,
    ) -> Category:
        """The user asked for '아예 다른 분야로': a category the user has not been in (neither
        the current nor base-info's, nor one left aside by name: ``away_from``), the one of the
        best challenge there that fits the user's situation and the constraints in force and
        was not shown yet (some situations fit none in some categories)."""
        seen = {state.category, state.base_category, away_from}
        ranked = (await self._meeting_everywhere(query, state, constraints, away=seen)).hits
        if ranked:
            return ranked[0].document.category
        return random.choice([c for c in Category if c not in seen])

    async def _meeting_everywhere(
        self,
        query: Query,
        state: SessionState,
        constraints: frozenset[Constraint],
        *,
        away: Collection[Category | None] = (),
    ) -> Ranked:
        """The challenges of every field but those ``away`` nearest ``query``, in one search
        (fitting the situation, not shown yet), ranked by ``constraints``: those that meet them
        first."""
        scope = Scope(None, state.location, state.work_type, exclude=state.shown)
        hits = await self.search(query, scope, k=EVERY_FIELD_K) or ()
        elsewhere = [hit for hit in hits if hit.document.category not in away]
        return rank(elsewhere, constraints=constraints)

    def names_firsts_for_a_persona(self, situation: Situation) -> bool:
        """Whether the situation firsts name challenges for a persona told ("as:farming")."""
        return not situation.personas.isdisjoint(self._firsts)

    async def for_situation(
        self,
        query: Query,
        state: SessionState,
        constraints: frozenset[Constraint],
        situation: Situation,
        *,
        trade: str | None = None,
    ) -> tuple[Category, tuple[Hit, ...], tuple[str, ...]] | None:
        """A first ask that tells only who the user is ("바닷가 사는데 뭐 할 만한 거 있어?"),
        answered with what the catalogue names first for that situation
        (app/rag/corpus.py ``SITUATION_FIRSTS``): those named for more of what was told first
        (a seaside family's), then in their lists' order (:func:`_situation_keys`), fitting
        the location and work type told and satisfying the constraints. The answer's field is
        the first one's; its candidates are that field's named ones, then the rest of the field
        the search finds. Returns the field, its candidates and the named ones among them (to
        rank first, as a field's classics are); None when nothing is named for what was told,
        or none fits. ``trade``: work told in words that the catalogue's work types do not
        name (app/chat/told.py ``trade_told``), a shop's ("작은 카페를 하고 있는데") or a
        driver's ("택배 기사인데"): what is named for it, and the catalogue's work types left
        aside (it tags a shop's work and a salesperson's alike, and a shop's everyday ones as
        neither; a driver's, as a salesperson's or a site's)."""
        keys = _situation_keys(situation, constraints, trade=trade)
        told = [key for key in keys if key in self._firsts]
        if not told:
            return None
        named = Counter(doc_id for key in told for doc_id in self._firsts[key])
        order = sorted(named, key=lambda doc_id: -named[doc_id])  # stable: each list's order
        work_type = None if trade else situation.work_type
        place = Scope(None, situation.location, work_type, exclude=state.shown)
        found = await self.search(query, replace(place, only=frozenset(order)), k=len(order))
        meeting = [hit for hit in found or () if satisfies(hit.document.traits, constraints)]
        if not meeting:
            return None
        meeting.sort(key=lambda hit: order.index(hit.document.id))
        category = meeting[0].document.category
        firsts = tuple(hit for hit in meeting if hit.document.category is category)
        ids = {hit.document.id for hit in firsts}
        k = min(self._settings.rank_pool * (3 if constraints else 1), 60)  # as :meth:`fitting`
        rest = await self.search(query, replace(place, category=category), k=k) or ()
        pool = (*firsts, *(hit for hit in rest if hit.document.id not in ids))
        return category, pool, tuple(hit.document.id for hit in firsts)

    async def search(
        self, query: Query, scope: Scope, *, k: int | None = None
    ) -> tuple[Hit, ...] | None:
        """Search within ``scope`` (by its words alone for a turn read without its embedding).
        A failing vector store (None) degrades the answer (no candidates: the model writes it
        all) instead of failing it, and /ready reports the store."""
        attributes = {
            "gateway.k": k or self._settings.retrieval_k,
            "gateway.lexical": query.lexical,
        }
        with (
            self._metrics.retrieval.time(),
            _tracer.start_as_current_span("retrieval.search", attributes=attributes),
        ):
            try:
                hits = await self._retriever.retrieve(
                    query.text,
                    k=k or self._settings.retrieval_k,
                    scope=scope,
                    vector=query.vector,
                    lexical=query.lexical,
                )
            except Exception:
                log.warning("retrieval failed; answering without candidates", exc_info=True)
                return None
        return tuple(hits)


def _meets_weakly(meeting: tuple[Hit, ...], state: SessionState) -> bool:
    """Whether a field's challenges that meet a critique (best first) may meet it only
    weakly: few enough to look at every field's (:data:`_WEAKLY_MEETING`)."""
    return 0 < len(meeting) <= _WEAKLY_MEETING or _all_narrow(meeting, state)


def _all_narrow(meeting: tuple[Hit, ...], state: SessionState) -> bool:
    """Whether every one of ``meeting`` is written for a narrow persona, and base-info does not
    say the user's place (which would make it theirs: app/chat/ranking.py)."""
    return state.location is None and all(
        hit.document.traits is not None and not hit.document.traits.anyone for hit in meeting
    )


def _met_better_elsewhere(
    weakly: tuple[Hit, ...], meeting: tuple[Hit, ...], state: SessionState
) -> bool:
    """Whether every field's challenges that meet a critique (``meeting``, best first) meet it
    far better than the category's own (``weakly``): those are all written for a narrow
    persona (:func:`_all_narrow`), or the nearest of the best others lies :data:`WEAK_FIELD_MARGIN` nearer the ask
    than the nearest of the category's ("동네 주민분들이랑" after a seaside shop's energy picks:
    "에너지캐시백 신청하기" at 0.81, a village's culture ones at 0.87)."""
    if not meeting:
        return False
    own = {hit.document.id for hit in weakly}
    elsewhere = [hit for hit in meeting if hit.document.id not in own][:_WEAKLY_MEETING]
    if not elsewhere:
        return False
    if _all_narrow(weakly, state):
        return True
    nearest = max(hit.score for hit in weakly)
    return max(hit.score for hit in elsewhere) - nearest >= WEAK_FIELD_MARGIN


def _nearer_than_the_field(best: Hit, hits: tuple[Hit, ...], category: Category) -> bool:
    """Whether ``best`` (of another field, satisfying what the field left nothing to
    satisfy) lies nearer the ask, in one search of every field, than anything ``category`` has
    left: more asked with a neighbour kept from before, after a seaside shop's energy picks,
    finds a village's culture ones first; more of a commute's plogging with coworkers finds a
    wreath of rice ("축하 화환 대신 쌀 화환이나 화분") behind twenty plogging ones, and stays."""
    for hit in hits:
        if hit is best:
            return True
        if hit.document.category is category:
            return False
    return False


def _scopes(
    category: Category,
    location: str | None,
    work_type: str | None,
    shown: frozenset[str],
    *,
    more: bool,
) -> Iterator[Scope]:
    """Where to look for candidates, best first. Always first: in the category, fitting the
    situation (base-info's location and work type, when given), not shown before. Then, for an
    ordinary turn, shown before too; for "more" (SPEC: in the current category while it has
    fitting ones left), the nearest other category's fitting ones not shown. Only then the
    scopes fitting less of the situation (its work type, then its location), then anything
    (the caller stops before them when a fitting scope held any: SPEC, every challenge fits
    base-info's location and work type)."""
    situated = bool(location and work_type)
    tried: set[Scope] = set()
    order = [Scope(category, location, work_type, exclude=shown)]
    if more:
        order.append(Scope(None, location, work_type, exclude=shown))
    else:
        order.append(Scope(category, location, work_type))
    if situated:
        order += [
            Scope(category, work_type=work_type, exclude=shown),
            Scope(category, location=location, exclude=shown),
        ]
    order += [Scope(category, exclude=shown), Scope(category)]
    for scope in order:
        if scope not in tried:
            tried.add(scope)
            yield scope


def _situation_keys(
    situation: Situation, constraints: frozenset[Constraint], *, trade: str | None = None
) -> list[str]:
    """What was told, as the situation firsts are keyed, in the order their lists are read
    (one named for several comes first whatever the order): who the user is (a persona),
    where the user lives, with whom (before who, when asked for), then the work (a seaside
    village's neighbours first hear the seaside's, not
    "에너지캐시백 신청하기"; an office's team, the team's, not "텀블러로 음료 마시기")."""
    keys = [f"at:{situation.location}"] if situation.location else []
    company = [c for c in Constraint if c in constraints and c.value in COMPANY]
    together = [f"with:{c.value}" for c in company if c is not Constraint.ALONE]
    # Who one is (a farm's, a boat's, a developer's) says more than where one lives ("벼농사
    # 짓고 있는데": the farm's, not the countryside's), less than the company asked for
    # ("농사짓는 마을 어르신들이랑 같이": the neighbours').
    personas = sorted(situation.personas)
    keys = [*keys, *together, *personas] if together else [*personas, *keys]
    if trade:
        keys.append(f"job:{trade}")
    elif situation.work_type:
        keys.append(f"job:{situation.work_type}")
    # Alone says least of who one is (anything may be done alone): after the work ("동네에서
    # 혼자 작은 카페 운영하고 있어요" had begun with "배달 주문은 일회용 수저 없이").
    keys += [f"with:{c.value}" for c in company if c is Constraint.ALONE]
    return keys


def named_one(hits: tuple[Hit, ...], shown: tuple[str, ...], at: int | None) -> Hit | None:
    """The one of ``hits`` at the place ``at`` of the list ``shown`` (None: no such place, or
    not among them)."""
    if at is None or not -len(shown) <= at < len(shown):
        return None
    wanted = shown[at]
    return next((hit for hit in hits if hit.document.id == wanted), None)


def _next_category(intent: Intent, state: SessionState) -> Category | None:
    kind = intent.kind
    if kind is IntentKind.SWITCH:
        return intent.category
    if kind is IntentKind.BACK_TO_BASE:
        return state.base_category or state.category
    return state.category


def starter_query(category: Category) -> str:
    """A field asked for with nothing in it, as a search: what anyone may begin with there."""
    return f"누구나 일상에서 쉽게 시작할 수 있는 {category.label} 챌린지"


def _after_plain(intent: Intent, state: SessionState, category: Category) -> bool:
    """Whether the turn asks for more, or critiques, what a plain ask for its field was
    answered with ("비건 챌린지 추천해줘", then "더 쉬운 거"): the conversation's topic is still
    the field's first steps."""
    return (
        intent.kind in (IntentKind.MORE, IntentKind.ASK)
        and category is state.category
        and state.topic == starter_query(category)
    )
