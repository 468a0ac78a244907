"""A turn (``RecommendationService``: plan, admit, generate) when retrieval cannot do its part: a vector store that is down
degrades the answer (no context), it does not fail; an embedding model too busy to wait for
reads the turn by its words, and a refusal so read waits for the embedding to confirm it. Real
upstream client against the scripted server."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import httpx
import numpy as np
import pytest

from app.chat.candidates import starter_query
from app.chat.constraints import FacetExample, FacetReader, FacetReaders
from app.chat.generation import Generator
from app.chat.intent import Example, IntentClassifier, IntentClassifiers, Label
from app.chat.plan import BaseInfoTurn, FreeTextTurn, TurnPlan
from app.chat.planning import Planner
from app.chat.sessions import InMemorySessionStore, SessionState, Turn
from app.chat.turn import RecommendationService
from app.config import Settings
from app.domain.categories import Category
from app.domain.events import Delta, Done
from app.llm.client import build_http_client
from app.llm.usage import TokenUsage
from app.metrics import Metrics
from app.rag.corpus import Document, Traits
from app.rag.lexical import LexicalEmbedder
from app.rag.retriever import EmbedderBusy, Hit
from app.rag.scope import ANYWHERE, Scope
from tests.support.llm import llm_client
from tests.upstream.scripted_openai import ScriptedUpstreamThread, expected_display_text

pytestmark = pytest.mark.anyio


class _StoreDown:
    calls = 0

    async def embed(self, query: str, *, wait: bool = False) -> np.ndarray:
        return np.ones(4, np.float32)

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: np.ndarray | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        self.calls += 1
        raise ConnectionError("qdrant at 10.0.0.9:6333 refused")


TOPIC_VECTOR = np.array([1, 0, 0, 0], np.float32)  # dense: VEGAN
OFF_TOPIC_VECTOR = np.array([0, 1, 0, 0], np.float32)


def _intents() -> IntentClassifiers:
    """Dense: TOPIC_VECTOR is VEGAN, OFF_TOPIC_VECTOR off-topic. Lexical: "두유" is VEGAN,
    "전기" ENERGY_SAVING, "주식 시세" off-topic."""
    lexical = LexicalEmbedder()
    examples = [
        Example("두유", Label.TOPIC, Category.VEGAN),
        Example("전기", Label.TOPIC, Category.ENERGY_SAVING),
        Example("주식 시세", Label.OFF_TOPIC),
    ]
    return IntentClassifiers(
        IntentClassifier(
            [Example("두유", Label.TOPIC, Category.VEGAN), Example("주식", Label.OFF_TOPIC)],
            np.stack([TOPIC_VECTOR, OFF_TOPIC_VECTOR]),
            k=1,
        ),
        IntentClassifier(examples, lexical.embed_queries([e.text for e in examples]), k=1),
        lambda message: lexical.embed_queries([message])[0],
    )


def _reads(example: str, *labels: str) -> FacetReaders:
    """Facet readers over one example carrying ``labels``: every message is read as it is."""
    lexical = LexicalEmbedder()
    examples = [FacetExample(example, frozenset(labels))]
    return FacetReaders(
        FacetReader(examples, np.stack([TOPIC_VECTOR]), k=1),
        FacetReader(examples, lexical.embed_queries([example]), k=1),
        lambda message: lexical.embed_queries([message])[0],
    )


def _facets() -> FacetReaders:
    """Reads nothing: no constraint, situation or question in any message."""
    return _reads("두유")


class _EmbedderBusy:
    """Busy for every turn; a turn that waits (``wait=True``) gets ``waited`` (None: busy too)."""

    def __init__(self, waited: np.ndarray | None = None) -> None:
        self.retrieved: list[tuple[str, Category | None, object, bool]] = []
        self.waited = waited
        self.waits = 0

    async def embed(self, query: str, *, wait: bool = False) -> np.ndarray:
        if wait:
            self.waits += 1
            if self.waited is not None:
                return self.waited
        raise EmbedderBusy("9 queries waiting")

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: np.ndarray | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        self.retrieved.append((query, scope.category, vector, lexical))
        return []


class _Open:
    """A gate that always admits (admission itself: tests/web/test_admission.py)."""

    def check(self) -> None:
        pass

    @asynccontextmanager
    async def hold(self, usage: TokenUsage, expected: int = 0) -> AsyncIterator[None]:
        yield


def _free_text(message: str) -> FreeTextTurn:
    return FreeTextTurn("s", None, time.monotonic(), message)


def _service(
    http: httpx.AsyncClient,
    settings: Settings,
    retriever: object,
    *,
    sessions: InMemorySessionStore | None = None,
    metrics: Metrics | None = None,
) -> RecommendationService:
    if sessions is None:  # (an empty store is falsy: it has a length)
        sessions = InMemorySessionStore(max_sessions=10, max_turns=5, ttl_seconds=60)
    metrics = metrics or Metrics()
    planner = Planner(
        retriever=retriever,  # type: ignore[arg-type]
        intents=_intents(),
        facets=_facets(),
        sentences=None,
        sessions=sessions,
        settings=settings,
        metrics=metrics,
    )
    generator = Generator(
        llm=llm_client(http, settings, metrics), sessions=sessions, metrics=metrics
    )
    return RecommendationService(planner, generator)


async def test_a_turn_the_embedder_is_too_busy_for_is_read_by_its_words(
    scripted: ScriptedUpstreamThread,
) -> None:
    settings = Settings(_env_file=None, llm_base_url=scripted.base_url)  # type: ignore[call-arg]
    retriever = _EmbedderBusy()
    sessions = InMemorySessionStore(max_sessions=10, max_turns=5, ttl_seconds=60)
    metrics = Metrics()
    async with build_http_client(settings) as http:
        service = _service(http, settings, retriever, sessions=sessions, metrics=metrics)
        events = [e async for e in service.free_text(_free_text("두유 마시기"), _Open())]
    assert isinstance(events[-1], Done)
    # The lexical vote chose VEGAN (the dense one would have left the category open), and the
    # searches (the catalogue's evidence of the category, then the candidates) went by words
    # alone, without a vector.
    assert retriever.retrieved == [
        ("두유 마시기", None, None, True),
        ("두유 마시기", Category.VEGAN, None, True),
    ]
    assert (await sessions.load("s")).category is Category.VEGAN
    assert metrics.registry.get_sample_value("gateway_lexical_turns_total") == 1


@pytest.mark.parametrize(
    ("waited", "outcome", "answered"),
    [
        (TOPIC_VECTOR, "overturned", True),
        (OFF_TOPIC_VECTOR, "confirmed", False),
        (None, "unconfirmed", False),
    ],
)
async def test_a_refusal_read_by_words_is_confirmed_by_the_embedding(
    scripted: ScriptedUpstreamThread, waited: np.ndarray | None, outcome: str, answered: bool
) -> None:
    settings = Settings(_env_file=None, llm_base_url=scripted.base_url)  # type: ignore[call-arg]
    retriever = _EmbedderBusy(waited)
    metrics = Metrics()
    async with build_http_client(settings) as http:
        service = _service(http, settings, retriever, metrics=metrics)
        events = [e async for e in service.free_text(_free_text("주식 시세"), _Open())]
    done = events[-1]
    assert isinstance(done, Done)
    assert retriever.waits == 1
    assert bool(done.payload["challenges"]) is answered
    assert bool(scripted.chat_requests) is answered
    searched = [("주식 시세", None, None, True)]  # the catalogue's evidence, by words
    if answered:  # searched by words: the burst's rule for search still holds
        searched.append(("주식 시세", Category.VEGAN, None, True))
    assert retriever.retrieved == searched
    sample = metrics.registry.get_sample_value
    assert sample("gateway_lexical_refusals_total", {"outcome": outcome}) == 1


async def test_retrieval_failure_degrades_to_an_answer_without_context(
    scripted: ScriptedUpstreamThread,
) -> None:
    settings = Settings(_env_file=None, llm_base_url=scripted.base_url)  # type: ignore[call-arg]
    retriever = _StoreDown()
    async with build_http_client(settings) as http:
        service = _service(http, settings, retriever)
        events = [
            event
            async for event in service.base_info(
                BaseInfoTurn("s", None, time.monotonic(), "산", "사무직", Category.VEGAN), _Open()
            )
        ]
    assert retriever.calls == 1
    assert isinstance(events[-1], Done)
    assert "".join(e.text for e in events if isinstance(e, Delta)) == expected_display_text()
    question = scripted.chat_requests[-1]["body"]["messages"][-1]["content"]
    assert "산" in question and "후보" not in question  # the model writes the whole answer


class _CountsEmbeddings:
    """Embeds every query (the dense examples' VEGAN vector) and counts them; searches find
    nothing."""

    def __init__(self) -> None:
        self.embedded: list[str] = []

    async def embed(self, query: str, *, wait: bool = False) -> np.ndarray:
        self.embedded.append(query)
        return TOPIC_VECTOR

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: np.ndarray | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        return []


class _ClauseEmbeddingFails(_CountsEmbeddings):
    """The whole message embeds; its clauses' embeddings fail (a remote embedder falling
    over between two calls)."""

    async def embed(self, query: str, *, wait: bool = False) -> np.ndarray:
        vector = await super().embed(query, wait=wait)
        if len(self.embedded) > 1:
            raise httpx.ConnectError("embedder at 10.0.0.9:8000 refused")
        return vector


async def test_a_clause_the_embedder_fails_on_leaves_the_whole_to_be_read(
    scripted: ScriptedUpstreamThread,
) -> None:
    settings = Settings(_env_file=None, llm_base_url=scripted.base_url)  # type: ignore[call-arg]
    retriever = _ClauseEmbeddingFails()
    message = "바닷가에 사는데 두유 마시기"
    async with build_http_client(settings) as http:
        service = _service(http, settings, retriever)
        events = [e async for e in service.free_text(_free_text(message), _Open())]
    assert retriever.embedded == [message, "바닷가에 사는데"]  # the first clause failed
    assert isinstance(events[-1], Done)


async def test_a_message_cut_into_many_clauses_costs_a_bounded_number_of_embeddings(
    scripted: ScriptedUpstreamThread,
) -> None:
    from app.chat.constraints import CLAUSES_READ

    settings = Settings(_env_file=None, llm_base_url=scripted.base_url)  # type: ignore[call-arg]
    retriever = _CountsEmbeddings()
    message = ", ".join(["두유 마시기"] * 20)  # 20 clauses in 158 characters (the bound: 200)
    async with build_http_client(settings) as http:
        service = _service(http, settings, retriever)
        events = [e async for e in service.free_text(_free_text(message), _Open())]
    assert isinstance(events[-1], Done)
    assert len(retriever.embedded) == 1 + CLAUSES_READ  # the whole, then the first clauses


def _vegan(
    doc_id: str,
    title: str,
    body: str = "두유를 사 보세요. 일주일을 마십니다.",
    *,
    cost: str = "free",
    where: tuple[str, str] = ("도시", "사무직"),
    starter: int | None = None,
) -> Hit:
    """An easy VEGAN challenge done at home, alone, by anyone (written for ``where``: a
    location and a work type; ``starter``: its place among the field's classic first steps)."""
    traits = Traits("easy", cost, frozenset({"home"}), frozenset({"alone"}), True, starter)
    location, work_type = where
    document = Document(
        doc_id, title, body, Category.VEGAN, (location,), (work_type,), (), "", traits
    )
    return Hit(document, 0.5)


class _Catalogue(_CountsEmbeddings):
    """A few challenges, each search finding those its scope allows, in the given order."""

    def __init__(self, *hits: Hit) -> None:
        super().__init__()
        self.hits = hits

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: np.ndarray | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        return [
            hit
            for hit in self.hits
            if hit.document.id not in scope.exclude
            and (not scope.only or hit.document.id in scope.only)
        ]


class _Situated(_Catalogue):
    """Each search finds the challenges its scope's category and situation allow too."""

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: np.ndarray | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        found = await super().retrieve(query, k=k, scope=scope)
        return [
            hit
            for hit in found
            if scope.category in (None, hit.document.category)
            and scope.location in (None, *hit.document.locations)
            and scope.work_type in (None, *hit.document.work_types)
        ]


class _FindsShown(_Catalogue):
    """A catalogue of one challenge, written for money (it fails "free"), found by any search."""

    hit = _vegan(
        "vg-1",
        "두유로 바꾸기",
        "우유 대신 두유를 사 보세요. 한 팩이면 일주일을 마십니다.",
        cost="low",
    )

    def __init__(self) -> None:
        super().__init__(self.hit)

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: np.ndarray | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        return [self.hit]


def _asks() -> FacetReaders:
    """Reads every message as a question (the real reader's verdict on "어떻게 …?")."""
    return _reads("어떻게 해?", "question")


async def _after(
    scripted: ScriptedUpstreamThread,
    shown: Turn,
    retriever: object,
    facets: FacetReaders,
    classics: dict[Category, tuple[str, ...]] | None = None,
) -> tuple[Planner, SessionState]:
    """A planner whose session (in VEGAN, begun there) has had the turn ``shown``."""
    settings = Settings(_env_file=None, llm_base_url=scripted.base_url)  # type: ignore[call-arg]
    sessions = InMemorySessionStore(max_sessions=10, max_turns=5, ttl_seconds=60)
    state = await sessions.record(
        "s", turn=shown, category=Category.VEGAN, base_category=Category.VEGAN
    )
    planner = Planner(
        retriever=retriever,  # type: ignore[arg-type]
        intents=_intents(),
        facets=facets,
        sentences=None,
        classics=classics,
        sessions=sessions,
        settings=settings,
        metrics=Metrics(),
    )
    return planner, state


async def _shown_one(scripted: ScriptedUpstreamThread) -> Planner:
    """A planner whose session has shown the one challenge, under a critique it fails."""
    shown = Turn("돈 안 드는 거", "{}", Category.VEGAN, ("vg-1",), constraints=("free",))
    planner, _ = await _after(scripted, shown, _FindsShown(), _asks())
    return planner


async def test_asked_how_to_do_the_one_shown_the_answer_is_its_instruction_not_the_critiques(
    scripted: ScriptedUpstreamThread,
) -> None:
    planner = await _shown_one(scripted)
    plan = await planner.free_text(_free_text("그 중에 이거 어떻게 시작해?"))
    assert isinstance(plan, TurnPlan) and plan.lead is _FindsShown.hit
    assert plan.recommend == (
        "우유 대신 두유를 사 보세요. '두유로 바꾸기'가 바로 그 이야기를 담은 챌린지예요."
    )
    assert plan.lead_description == "한 팩이면 일주일을 마십니다."


async def test_asked_whether_the_one_shown_helps_the_answer_is_why_its_text_says_it_does(
    scripted: ScriptedUpstreamThread,
) -> None:
    planner = await _shown_one(scripted)
    plan = await planner.free_text(_free_text("그 중에 이거 하면 진짜 효과 있어?"))
    assert isinstance(plan, TurnPlan) and plan.lead is _FindsShown.hit
    assert plan.recommend == (
        "한 팩이면 일주일을 마십니다. '두유로 바꾸기'가 바로 그 이야기를 담은 챌린지예요."
    )
    assert plan.lead_description == "우유 대신 두유를 사 보세요."


async def test_more_shows_nothing_again_while_anything_new_is_left(
    scripted: ScriptedUpstreamThread,
) -> None:
    """Nothing new satisfies "free": the nearest new one (said to be only that), not the one
    shown before that does."""
    from app.chat.candidates import Query
    from app.chat.constraints import Constraint

    catalogue = _Catalogue(_vegan("vg-old", "헌 것"), _vegan("vg-new", "새 것", cost="some"))
    shown = Turn("두유", "{}", Category.VEGAN, ("vg-old",), constraints=("free",))
    planner, state = await _after(scripted, shown, catalogue, _asks())
    free = frozenset({Constraint.FREE})
    more = await planner._candidates.fitting(
        Query("더"), Category.VEGAN, state, more=True, constraints=free
    )
    assert [hit.document.id for hit in more[1]] == ["vg-new"]
    # An ordinary turn may show again what fits (the question may be about it).
    asked = await planner._candidates.fitting(
        Query("두유"), Category.VEGAN, state, more=False, constraints=free
    )
    assert [hit.document.id for hit in asked[1]] == ["vg-old", "vg-new"]


@pytest.mark.parametrize("more", [True, False])
async def test_a_critique_never_brings_what_does_not_fit_the_given_situation(
    scripted: ScriptedUpstreamThread, more: bool
) -> None:
    """In a base-info session (산, 현장직) nothing fitting satisfies "free": the nearest that
    fits (the answer says none satisfies it), not a free one written for the city (SPEC: every
    challenge fits base-info's location and work type). Only a situation that holds nothing
    at all is relaxed."""
    from app.chat.candidates import Query
    from app.chat.constraints import Constraint

    fitting = _vegan("vg-fit", "산에서", cost="low", where=("산", "현장직"))
    city = _vegan("vg-city", "도시에서", where=("도시", "사무직"))
    shown = Turn("채식", "{}", Category.VEGAN, ("vg-shown",))
    free = frozenset({Constraint.FREE})
    planner, state = await _after(scripted, shown, _Situated(city, fitting), _asks())
    state = replace(state, location="산", work_type="현장직")
    _, hits = await planner._candidates.fitting(
        Query("돈 안 드는 거"), Category.VEGAN, state, more=more, constraints=free
    )
    assert [hit.document.id for hit in hits] == ["vg-fit"]

    planner, state = await _after(scripted, shown, _Situated(city), _asks())
    state = replace(state, location="산", work_type="현장직")
    _, hits = await planner._candidates.fitting(
        Query("돈 안 드는 거"), Category.VEGAN, state, more=more, constraints=free
    )
    assert [hit.document.id for hit in hits] == ["vg-city"]  # nothing fits: the nearest


def _reads_nothing() -> FacetReaders:
    """A facet reader that reads no facet (pointers are read by their words)."""
    return _reads("아무거나")


def _reads_plain() -> FacetReaders:
    """Reads every message as a plain ask for its field ("비건 챌린지 추천해줘")."""
    return _reads("비건 챌린지", "plain")


class _FindsByWords(_Situated):
    """A search finds the challenges its scope allows whose titles say "비건", unless it names
    the ids it wants (``Scope.only``)."""

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        scope: Scope = ANYWHERE,
        vector: np.ndarray | None = None,
        lexical: bool = False,
    ) -> list[Hit]:
        found = await super().retrieve(query, k=k, scope=scope)
        return found if scope.only else [h for h in found if "비건" in h.document.title]


async def test_a_plain_ask_for_a_field_is_answered_with_its_classic_first_steps(
    scripted: ScriptedUpstreamThread,
) -> None:
    """ "비건 챌린지 추천해줘" names the field and nothing in it: its words find the challenges
    that say "비건" most; the field's classic first steps come first, in the catalogue's order,
    wherever the search ranks them, and more of them next. Read as asking something of its
    own, the same message goes by its search."""
    catalogue = _FindsByWords(
        _vegan("vg-x", "라면은 비건 제품으로"),
        _vegan("vg-3", "두부와 콩으로 단백질 채우기", starter=3),
        _vegan("vg-2", "식물성 우유로 바꾸기", starter=2),
        _vegan("vg-1", "주 1회 채식하기", starter=1),
    )
    classics = {Category.VEGAN: ("vg-1", "vg-2", "vg-3")}
    shown = Turn("두유", "{}", Category.VEGAN, ("vg-0",))
    for facets, order in ((_reads_plain(), ["vg-1", "vg-2", "vg-3"]), (_reads_nothing(), ["vg-x"])):
        planner, _ = await _after(scripted, shown, catalogue, facets, classics)
        plan = await planner.free_text(_free_text("비건 챌린지 추천해줘"))
        assert isinstance(plan, TurnPlan) and plan.lead is not None
        shown_ids = [plan.lead.document.id, *(hit.document.id for hit in plan.candidates)]
        assert shown_ids[: len(order)] == order
        assert (plan.topic == starter_query(Category.VEGAN)) is (order[0] == "vg-1")
    # More after two classics were shown for it (its topic is the field's first steps): the
    # classic not shown yet.
    topic = starter_query(Category.VEGAN)
    first = Turn("비건 챌린지 추천해줘", "{}", Category.VEGAN, ("vg-1", "vg-2"), topic=topic)
    planner, _ = await _after(scripted, first, catalogue, _reads_nothing(), classics)
    more = await planner.free_text(_free_text("또 뭐 있어?"))
    assert isinstance(more, TurnPlan) and more.lead is not None
    assert more.lead.document.id == "vg-3"


@pytest.mark.parametrize(
    ("message", "lead"),
    [
        ("그 중에 비행기 탈 때 할 만한 건?", "vg-b"),  # by what it says: its search's order
        ("그 중에 첫 번째 거 말이야", "vg-a"),  # at one of them: as they were shown
        ("그 중에 두 번째 거 어떻게 시작해?", "vg-b"),  # the place it names
    ],
)
async def test_a_choice_among_those_shown_goes_by_what_it_says_unless_it_points_at_one(
    scripted: ScriptedUpstreamThread, message: str, lead: str
) -> None:
    # Shown in the order a, b; a search among them finds b first.
    catalogue = _Catalogue(_vegan("vg-b", "기내식은 채식으로"), _vegan("vg-a", "두유로 바꾸기"))
    shown = Turn("두유", "{}", Category.VEGAN, ("vg-a", "vg-b"))
    planner, _ = await _after(scripted, shown, catalogue, _reads_nothing())
    plan = await planner.free_text(_free_text(message))
    assert isinstance(plan, TurnPlan) and plan.lead is not None
    assert plan.lead.document.id == lead


async def test_what_a_message_wants_beside_what_it_leaves_is_embedded_once(
    scripted: ScriptedUpstreamThread,
) -> None:
    """Read for its place, for its field and as another field's search: one embedding."""
    settings = Settings(_env_file=None, llm_base_url=scripted.base_url)  # type: ignore[call-arg]
    sessions = InMemorySessionStore(max_sessions=10, max_turns=5, ttl_seconds=60)
    shown = Turn("두유", "{}", Category.VEGAN, ("vg-1",))
    await sessions.record("s", turn=shown, category=Category.VEGAN, base_category=Category.VEGAN)
    retriever = _CountsEmbeddings()
    async with build_http_client(settings) as http:
        service = _service(http, settings, retriever, sessions=sessions)
        message = "두유 얘기는 됐고 다른 분야로"
        events = [e async for e in service.free_text(_free_text(message), _Open())]
    assert isinstance(events[-1], Done)
    assert retriever.embedded.count("다른 분야로") == 1


@pytest.mark.parametrize(("place", "lead"), [("도시", "vg-1"), ("산", "vg-x")])
async def test_base_info_in_the_city_begins_with_the_fields_classic_first_steps(
    scripted: ScriptedUpstreamThread, place: str, lead: str
) -> None:
    """Base-info asks nothing of its own: in the city, the place most challenges are written
    for, the field's classic first steps that fit the work type come first, wherever the
    search ranks them (a classic written for another work type is not one of them);
    elsewhere, what the search finds for the place."""
    catalogue = _FindsByWords(
        _vegan("vg-x", "라면은 비건 제품으로", where=(place, "사무직")),
        _vegan("vg-2", "식물성 우유로 바꾸기", where=("도시", "현장직"), starter=2),
        _vegan("vg-1", "주 1회 채식하기", where=(place, "사무직"), starter=1),
    )
    classics = {Category.VEGAN: ("vg-2", "vg-1")}
    planner, _ = await _after(
        scripted, Turn("두유", "{}", Category.VEGAN, ()), catalogue, _reads_nothing(), classics
    )
    plan = await planner.base_info(
        BaseInfoTurn("fresh", None, time.monotonic(), place, "사무직", Category.VEGAN)
    )
    assert plan.lead is not None and plan.lead.document.id == lead
    shown = [plan.lead.document.id, *(hit.document.id for hit in plan.candidates)]
    assert "vg-2" not in shown  # fits the city, not the office: never shown there


async def test_one_named_by_its_place_leads_whatever_the_ranking_would_put_first(
    scripted: ScriptedUpstreamThread,
) -> None:
    """ "3번은 어떻게 해?": the third shown, though an easier one of them would lead a choice
    among them by ease."""
    easy, also = _vegan("vg-a", "두유로 바꾸기"), _vegan("vg-b", "콩물 마시기")
    hard_doc = _vegan("vg-c", "비건 김치 담그기").document
    hard = Hit(replace(hard_doc, traits=replace(hard_doc.traits, effort="hard")), 0.5)
    catalogue = _Catalogue(easy, also, hard)
    shown = Turn("두유", "{}", Category.VEGAN, ("vg-a", "vg-b", "vg-c"))
    planner, _ = await _after(scripted, shown, catalogue, _asks())
    plan = await planner.free_text(_free_text("3번은 어떻게 해?"))
    assert isinstance(plan, TurnPlan) and plan.lead is not None
    assert plan.lead.document.id == "vg-c"
