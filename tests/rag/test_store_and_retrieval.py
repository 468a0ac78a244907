"""The vector stores (embedded qdrant-edge; the server path through qdrant-client, its
in-memory mode standing in for a server), idempotent ingest, hybrid retrieval in Korean, the
same ranking on both engines, the operator CLI, the LangChain adapter, and the gateway's
first-start ingest."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from app.domain.categories import Category
from app.rag.corpus import Document, load_corpus
from app.rag.embedder import Embedder, load_embedder
from app.rag.ingest import ingest
from app.rag.langchain import ChallengeRetriever
from app.rag.retriever import HybridRetriever, SearchMode
from app.rag.scope import Scope
from app.rag.store import StoreMismatch, StoreUnavailable, VectorStore
from app.rag.store_edge import EdgeStore
from app.rag.store_open import open_store
from app.rag.store_server import ServerStore, in_memory
from tests.support.gateway import ROOT, GatewayProcess
from tests.support.sse import read_stream
from tests.support.store import CORPUS, stored_points
from tests.upstream.scripted_openai import ScriptedUpstreamThread

COLLECTION = "challenges"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return load_embedder(None)


@pytest.fixture(scope="module")
def small_corpus() -> list[Document]:
    """Three documents of each category (24)."""
    by_id = {d.id: d for d in load_corpus(CORPUS)}
    prefixes = ("zw", "pl", "cf", "es", "up", "md", "dc", "vg")
    return [by_id[f"{prefix}-00{n}"] for prefix in prefixes for n in (1, 2, 3)]


@pytest.fixture(params=["edge", "server"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    """Each engine in turn: the embedded store, and the server path (in-memory stand-in)."""
    store = EdgeStore(tmp_path / "qdrant") if request.param == "edge" else in_memory()
    yield store
    store.close()


@pytest.fixture(scope="module")
def bundled(store_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.support.store import store_copy

    yield str(store_copy(store_template, tmp_path_factory.mktemp("rag") / "qdrant"))


def test_ingest_is_idempotent_and_replaces_edited_documents(
    any_store: VectorStore, embedder: Embedder, small_corpus: list[Document]
) -> None:
    progress: list[tuple[int, int]] = []
    first = ingest(
        any_store,
        COLLECTION,
        embedder,
        small_corpus,
        batch_size=10,
        progress=lambda done, total: progress.append((done, total)),
    )
    assert (first.added, first.unchanged, first.replaced) == (24, 0, 0)
    assert progress == [(10, 24), (20, 24), (24, 24)]
    assert any_store.count(COLLECTION) == 24

    second = ingest(any_store, COLLECTION, embedder, small_corpus)
    assert (second.added, second.unchanged, second.replaced) == (0, 24, 0)
    assert any_store.count(COLLECTION) == 24

    edited = [
        replace(small_corpus[0], body=small_corpus[0].body + " 오늘부터 시작해요."),
        *small_corpus[1:],
    ]
    third = ingest(any_store, COLLECTION, embedder, edited)
    assert (third.added, third.unchanged, third.replaced) == (1, 23, 1)
    assert any_store.count(COLLECTION) == 24


def test_a_point_is_read_back_once_and_an_edit_reads_afresh(
    any_store: VectorStore,
    embedder: Embedder,
    small_corpus: list[Document],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingest(any_store, COLLECTION, embedder, small_corpus)
    fetched: list[str] = []
    fetch = any_store._fetch

    def counted(name: str, point_ids: list[str]) -> object:
        fetched.extend(point_ids)
        return fetch(name, point_ids)

    monkeypatch.setattr(any_store, "_fetch", counted)
    retriever = HybridRetriever(any_store, COLLECTION, embedder)
    first = retriever.search("해변 쓰레기 줍기", k=5)
    assert len(fetched) == 5
    again = retriever.search("해변 쓰레기 줍기", k=5)
    assert len(fetched) == 5, "the second search reads nothing back"
    assert [h.document for h in again] == [h.document for h in first]
    lead = first[0].document
    source = next(d for d in small_corpus if d.id == lead.id)
    edited = [replace(source, body=source.body + " 오늘부터 시작해요."), *small_corpus]
    ingest(any_store, COLLECTION, embedder, [d for d in edited if d is not source])
    bodies = {h.document.id: h.document.body for h in retriever.search("해변 쓰레기 줍기", k=5)}
    assert bodies[lead.id].endswith("오늘부터 시작해요.")


def test_collection_of_another_width_is_refused(any_store: VectorStore, tmp_path: Path) -> None:
    assert any_store.ensure_collection(COLLECTION, 384)
    assert not any_store.ensure_collection(COLLECTION, 384)
    with pytest.raises(StoreMismatch, match=r"384-wide .* makes 768.*--recreate"):
        any_store.ensure_collection(COLLECTION, 768)
    if isinstance(any_store, EdgeStore):  # and after a restart, from what the shard keeps
        any_store.close()
        reopened = EdgeStore(tmp_path / "qdrant")
        try:
            with pytest.raises(StoreMismatch, match="--recreate"):
                reopened.ensure_collection(COLLECTION, 768)
        finally:
            reopened.close()


def _search_all(store: VectorStore, embedder: Embedder) -> list[list[str]]:
    retriever = HybridRetriever(store, COLLECTION, embedder)
    return [
        [hit.document.id for hit in retriever.search(query, k=5, scope=Scope(category=category))]
        for query in ("텀블러 챌린지", "해변 플로깅", "회사에서 할 수 있는 것")
        for category in (None, Category.PLOGGING)
    ]


def test_edge_store_survives_a_restart(
    tmp_path: Path, embedder: Embedder, small_corpus: list[Document]
) -> None:
    store = EdgeStore(tmp_path / "qdrant")
    ingest(store, COLLECTION, embedder, small_corpus)
    before = _search_all(store, embedder)
    store.close()

    reopened = EdgeStore(tmp_path / "qdrant")
    try:
        assert reopened.count(COLLECTION) == 24
        assert _search_all(reopened, embedder) == before
        again = ingest(reopened, COLLECTION, embedder, small_corpus)
        assert (again.added, again.unchanged) == (0, 24)
    finally:
        reopened.close()


def test_edge_store_folder_serves_one_process_at_a_time(tmp_path: Path, embedder: Embedder) -> None:
    first = EdgeStore(tmp_path / "qdrant")
    first.ensure_collection(COLLECTION, embedder.dim)
    second = EdgeStore(tmp_path / "qdrant")
    try:
        with pytest.raises(StoreUnavailable, match="one process at a time"):
            second.count(COLLECTION)
        with pytest.raises(StoreUnavailable):  # `ingest --recreate` deletes nothing in use
            second.drop(COLLECTION)
        assert first.count(COLLECTION) == 0 and (tmp_path / "qdrant" / COLLECTION).is_dir()
    finally:
        second.close()
        first.close()


def test_memory_path_is_a_throwaway_folder() -> None:
    store = open_store(url=None, path=":memory:")
    assert isinstance(store, EdgeStore) and store.root.is_dir()
    store.ensure_collection(COLLECTION, 8)
    store.close()
    assert not store.root.exists()


def _server_copy(edge_path: str) -> ServerStore:
    """The bundled store's points, exactly as stored, in the server path's store."""
    points = stored_points(edge_path, COLLECTION)
    server = in_memory()
    server.ensure_collection(COLLECTION, points.dense.shape[1])
    server.upsert(COLLECTION, points.ids, points.dense, points.sparse, points.payloads)
    return server


# Short queries that share a bigram or two with many documents (equal BM25 scores), and
# queries whose candidates tie on RRF: the engines order such ties differently by themselves.
_RANKING_QUERIES = [
    ("카페에서 텀블러 쓰는 챌린지 있어?", Category.ZERO_WASTE),
    ("사무실에서 종이컵 줄이는 챌린지 추천해줘", Category.ZERO_WASTE),
    ("해변에서 플로깅 하고 싶어요", Category.PLOGGING),
    ("줍깅 준비물 머 챙겨야대요?", Category.PLOGGING),
    ("메일함 정리해서 탄소 줄이기", Category.DIGITAL_CARBON),
    ("비건 도시락", Category.VEGAN),
    ("커피 찌꺼기 재활용하는 방법", Category.UPCYCLING),
    ("자전거로 출근하기", Category.CARBON_FOOTPRINT),
    ("강남역 맛집 추천해줘", Category.ENERGY_SAVING),
    ("엑셀 VLOOKUP 함수 쓰는 법", Category.MEDIA),
    ("바닷가에서 ghost fishing 막으려면 낡은 그물 어디에 버려요?", Category.PLOGGING),
    ("안녕하세요 반가워요", Category.VEGAN),
]


@pytest.mark.parametrize("mode", list(SearchMode))
def test_edge_and_server_paths_rank_alike(
    bundled: str, embedder: Embedder, mode: SearchMode
) -> None:
    server = _server_copy(bundled)
    edge = open_store(url=None, path=bundled)
    try:
        assert server.count(COLLECTION) == edge.count(COLLECTION) == 408
        rankings, scores = [], []
        for store in (edge, server):
            retriever = HybridRetriever(store, COLLECTION, embedder, mode=mode)
            hits = [
                retriever.search(query, k=10, scope=Scope(category=category))
                for query, maybe in _RANKING_QUERIES
                for category in (None, maybe)
            ]
            rankings.append([[hit.document.id for hit in found] for found in hits])
            scores.append([hit.score for found in hits for hit in found])
        assert rankings[0] == rankings[1]
        assert scores[0] == pytest.approx(scores[1], abs=1e-5)  # cosine, float32 either way
        if mode is not SearchMode.LEXICAL:  # lexical search finds only documents sharing a term
            assert all(len(ranking) == 10 for ranking in rankings[0])
    finally:
        edge.close()
        server.close()


@pytest.mark.parametrize("mode", list(SearchMode))
def test_a_scope_keeps_what_fits_on_both_engines(
    bundled: str, embedder: Embedder, mode: SearchMode
) -> None:
    docs = {d.id: d for d in load_corpus(CORPUS)}
    server = _server_copy(bundled)
    edge = open_store(url=None, path=bundled)
    query = "사무실에서 전기 아끼는 챌린지"
    try:
        found = []
        for store in (edge, server):
            retriever = HybridRetriever(store, COLLECTION, embedder, mode=mode)
            fits = Scope(category=Category.ENERGY_SAVING, location="도시", work_type="사무직")
            first = [h.document.id for h in retriever.search(query, k=5, scope=fits)]
            assert first, "the sparse search finds them too"
            for doc_id in first:
                doc = docs[doc_id]
                assert doc.category is Category.ENERGY_SAVING
                assert "도시" in doc.locations and "사무직" in doc.work_types
            unseen = Scope(
                category=Category.ENERGY_SAVING,
                location="도시",
                work_type="사무직",
                exclude=frozenset(first),
            )
            more = [h.document.id for h in retriever.search(query, k=5, scope=unseen)]
            assert more and not set(more) & set(first)
            among = Scope(only=frozenset(first[:2]))
            assert {h.document.id for h in retriever.search(query, k=5, scope=among)} == set(
                first[:2]
            )
            found.append((first, more))
        assert found[0] == found[1], "both engines filter and rank alike"
    finally:
        edge.close()
        server.close()


def test_a_hybrid_search_finds_as_many_as_asked_for_beyond_each_lists_own(
    bundled: str, embedder: Embedder
) -> None:
    # A critique asks a field for 36 to find what satisfies it; RRF over each list's 30 had
    # found only their union (33 of the 47 left of a field).
    store = open_store(url=None, path=bundled)
    try:
        retriever = HybridRetriever(store, COLLECTION, embedder, mode=SearchMode.HYBRID)
        field = Scope(category=Category.PLOGGING)
        hits = retriever.search("여섯 살 딸이랑 주말에 해볼 만한 거 더 쉬운 거", k=50, scope=field)
    finally:
        store.close()
    in_field = sum(d.category is Category.PLOGGING for d in load_corpus(CORPUS))
    assert len(hits) == min(50, in_field)
    assert len({hit.document.id for hit in hits}) == len(hits)


@pytest.mark.parametrize("mode", list(SearchMode))
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("카페에서 텀블러 쓰는 챌린지 있어?", "zw-001"),
        ("메일함 정리해서 탄소 줄이기", "dc-001"),
        ("해변에서 플로깅 하고 싶어요", "pl-001"),
    ],
)
def test_korean_queries_find_their_documents(
    bundled: str, embedder: Embedder, mode: SearchMode, query: str, expected: str
) -> None:
    store = open_store(url=None, path=bundled)
    try:
        hits = HybridRetriever(store, COLLECTION, embedder, mode=mode).search(query, k=3)
    finally:
        store.close()
    assert expected in [hit.document.id for hit in hits]


@pytest.mark.anyio
async def test_category_filter_scores_and_async_face(bundled: str, embedder: Embedder) -> None:
    store = open_store(url=None, path=bundled)
    try:
        retriever = HybridRetriever(store, COLLECTION, embedder)
        hits = await retriever.retrieve(
            "회사에서 할 수 있는 챌린지", k=5, scope=Scope(category=Category.VEGAN)
        )
        assert len(hits) == 5 and {h.document.category for h in hits} == {Category.VEGAN}
        on_topic = (await retriever.retrieve("텀블러로 일회용 컵 줄이기", k=1))[0].score
        off_topic = (await retriever.retrieve("오늘 삼성전자 주가 어때?", k=1))[0].score
        assert 0 < off_topic < on_topic <= 1
        docs = await ChallengeRetriever(retriever=retriever, k=2).ainvoke("비건 도시락")
        assert len(docs) == 2 and all(d.metadata["category"] == "VEGAN" for d in docs)
        sync_docs = ChallengeRetriever(retriever=retriever, k=1, category=Category.PLOGGING).invoke(
            "산에서 할 수 있는 것"
        )
        assert sync_docs[0].metadata["category"] == "PLOGGING" and sync_docs[0].page_content
    finally:
        store.close()


def _cli(args: list[str], store: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "QDRANT_PATH": store, "HOME": str(Path.home())}
    return subprocess.run(
        [sys.executable, "-m", "app.rag", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_search_json_and_stdin(bundled: str) -> None:
    done = _cli(["search", "텀블러 챌린지", "--k", "2", "--json"], bundled)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["rank"] for line in lines] == [1, 2]
    assert set(lines[0]) >= {"query", "rank", "score", "text", "category"}
    assert lines[0]["query"] == "텀블러 챌린지" and lines[0]["category"] == "ZERO_WASTE"

    done = _cli(
        ["search", "-", "--k", "3", "--json"], bundled, stdin="비건 도시락\n\n해변 플로깅\n"
    )
    assert done.returncode == 0, done.stderr
    queries = [json.loads(line)["query"] for line in done.stdout.splitlines()]
    assert queries == ["비건 도시락"] * 3 + ["해변 플로깅"] * 3


def test_cli_ingest_is_idempotent(bundled: str) -> None:
    done = _cli(["ingest"], bundled)
    assert done.returncode == 0, done.stderr
    assert "0 added" in done.stdout and "408 unchanged" in done.stdout
    assert "search index" in done.stderr  # ingest ends by building the index


def test_cli_search_on_an_empty_store_says_so(tmp_path: Path) -> None:
    done = _cli(["search", "텀블러"], str(tmp_path / "empty"))
    assert done.returncode == 1
    assert "ingest" in done.stderr


@pytest.mark.anyio
async def test_gateway_ingests_its_corpus_on_first_start(
    tmp_path: Path, upstream: ScriptedUpstreamThread, small_corpus: list[Document]
) -> None:
    corpus = tmp_path / "small.jsonl"
    lines = [line for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    wanted = {d.id for d in small_corpus}
    corpus.write_text(
        "\n".join(line for line in lines if json.loads(line)["id"] in wanted) + "\n",
        encoding="utf-8",
    )
    env = {
        "LLM_BASE_URL": upstream.base_url,
        "CORPUS_PATH": str(corpus),
        "QDRANT_PATH": str(tmp_path / "fresh"),
    }
    upstream.set_scenario("ok")
    with GatewayProcess(env, startup_timeout=120) as gateway:
        assert "ingest done: 24 documents added" in gateway.log_text()
        assert "search index" in gateway.log_text()
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
            params = {"location": "바닷가", "workType": "현장직", "category": "PLOGGING"}
            result = await read_stream(client, "/ai/chatbot/recommendation/base-info", params)
            assert result.terminal.event == "close"
            prompt = json.dumps(upstream.chat_requests[-1]["body"]["messages"], ensure_ascii=False)
            titles = [d.title for d in small_corpus if d.category is Category.PLOGGING]
            assert any(title in prompt for title in titles)


def test_server_mode_uses_the_same_client_and_fails_clearly(tmp_path: Path) -> None:
    store = open_store(url="http://127.0.0.1:9", path=None, timeout=2)
    try:
        assert isinstance(store, ServerStore) and not store.local
        with pytest.raises(Exception, match=r"(?i)connect|refused"):
            store.count(COLLECTION)
    finally:
        store.close()


def test_gateway_refuses_to_start_without_its_vector_store(tmp_path: Path) -> None:
    env = {"QDRANT_URL": "http://127.0.0.1:9", "LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    gateway = GatewayProcess(env, startup_timeout=60)
    with pytest.raises(RuntimeError, match="exited early"):
        gateway.__enter__()
    log = gateway.log_text()
    gateway.__exit__(None, None, None)
    assert "the vector store at http://127.0.0.1:9 did not answer" in log


def test_gateway_refuses_a_store_folder_another_process_holds(
    store_path: str, upstream: ScriptedUpstreamThread
) -> None:
    holder = EdgeStore(store_path)
    assert holder.count(COLLECTION) == 408  # opens (and locks) the shard
    try:
        gateway = GatewayProcess(
            {"QDRANT_PATH": store_path, "LLM_BASE_URL": upstream.base_url}, startup_timeout=60
        )
        with pytest.raises(RuntimeError, match="exited early"):
            gateway.__enter__()
        log = gateway.log_text()
        gateway.__exit__(None, None, None)
    finally:
        holder.close()
    assert "one process at a time" in log
