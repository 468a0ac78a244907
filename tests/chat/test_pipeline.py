"""RecommendationService with a vector store that is down: the answer degrades (no context),
it does not fail. Real upstream client against the scripted server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.chat.categories import Category
from app.chat.events import Delta, Done
from app.chat.intent import Act, Example, IntentClassifier
from app.chat.pipeline import RecommendationService
from app.chat.sessions import InMemorySessionStore
from app.config import Settings
from app.llm.client import LLMClient, build_http_client
from app.rag.retriever import Hit
from tests.upstream.scripted_openai import ScriptedUpstreamThread, expected_display_text

pytestmark = pytest.mark.anyio


class _StoreDown:
    calls = 0

    async def embed(self, query: str) -> np.ndarray:
        return np.ones(4, np.float32)

    async def retrieve(
        self,
        query: str,
        *,
        k: int,
        category: Category | None = None,
        vector: np.ndarray | None = None,
    ) -> list[Hit]:
        self.calls += 1
        raise ConnectionError("qdrant at 10.0.0.9:6333 refused")


async def test_retrieval_failure_degrades_to_an_answer_without_context(
    scripted: ScriptedUpstreamThread,
) -> None:
    settings = Settings(_env_file=None, llm_base_url=scripted.base_url)  # type: ignore[call-arg]
    retriever = _StoreDown()
    async with build_http_client(settings) as http:
        service = RecommendationService(
            llm=LLMClient(http, settings),
            retriever=retriever,
            intents=IntentClassifier([Example("질문", Act.ASK)], np.ones((1, 4), np.float32)),
            sessions=InMemorySessionStore(max_sessions=10, max_turns=5, ttl_seconds=60),
            settings=settings,
        )
        events = [
            event
            async for event in service.base_info(
                session_id="s", location="산", work_type="사무직", category="VEGAN"
            )
        ]
    assert retriever.calls == 1
    assert isinstance(events[-1], Done)
    assert "".join(e.text for e in events if isinstance(e, Delta)) == expected_display_text()
    prompt = json.dumps(scripted.chat_requests[-1]["body"]["messages"], ensure_ascii=False)
    assert "참고할 챌린지 자료" not in prompt
