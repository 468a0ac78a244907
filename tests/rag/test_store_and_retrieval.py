"""The vector store in embedded local mode, idempotent ingest, hybrid retrieval in Korean,
the operator CLI, the LangChain adapter, and the gateway's first-start ingest."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from app.chat.categories import Category
from app.rag.corpus import Document, load_corpus
from app.rag.embedder import Embedder, load_embedder
from app.rag.ingest import ingest
from app.rag.langchain import ChallengeRetriever
from app.rag.retriever import HybridRetriever, SearchMode
from app.rag.store import StoreMismatch, VectorStore, open_store
from tests.support.gateway import ROOT, GatewayProcess
from tests.support.sse import read_stream
from tests.support.store import CORPUS
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


@pytest.fixture
def local_store(tmp_path: Path) -> Iterator[VectorStore]:
    store = open_store(url=None, path=tmp_path / "qdrant")
    yield store
    store.close()


@pytest.fixture(scope="module")
def bundled(store_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.support.store import store_copy

    yield str(store_copy(store_template, tmp_path_factory.mktemp("rag") / "qdrant"))


def test_ingest_is_idempotent_and_replaces_edited_documents(
    local_store: VectorStore, embedder: Embedder, small_corpus: list[Document]
) -> None:
    progress: list[tuple[int, int]] = []
    first = ingest(
        local_store,
        COLLECTION,
        embedder,
        small_corpus,
        batch_size=10,
        progress=lambda done, total: progress.append((done, total)),
    )
    assert (first.added, first.unchanged, first.replaced) == (24, 0, 0)
    assert progress == [(10, 24), (20, 24), (24, 24)]
    assert local_store.count(COLLECTION) == 24

    second = ingest(local_store, COLLECTION, embedder, small_corpus)
    assert (second.added, second.unchanged, second.replaced) == (0, 24, 0)
    assert local_store.count(COLLECTION) == 24

    edited = [
        replace(small_corpus[0], body=small_corpus[0].body + " 오늘부터 시작해요."),
        *small_corpus[1:],
    ]
    third = ingest(local_store, COLLECTION, embedder, edited)
    assert (third.added, third.unchanged, third.replaced) == (1, 23, 1)
    assert local_store.count(COLLECTION) == 24


def test_collection_of_another_width_is_refused(local_store: VectorStore) -> None:
    local_store.ensure_collection(COLLECTION, 384)
    with pytest.raises(StoreMismatch, match="--recreate"):
        local_store.ensure_collection(COLLECTION, 768)


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
        hits = await retriever.retrieve("회사에서 할 수 있는 챌린지", k=5, category=Category.VEGAN)
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
        assert not store.local
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
