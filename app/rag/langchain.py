"""The retriever as a LangChain ``BaseRetriever``, for chains and agents that want one.

Streaming never goes through LangChain; this is an adapter for reuse, with the same search
(hybrid, category filter) as the gateway. LangChain is imported only by this module, and
installed only with the ``langchain`` extra (``pip install -e .[langchain]``).
"""

from __future__ import annotations

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from app.domain.categories import Category
from app.rag.retriever import Hit, HybridRetriever
from app.rag.scope import Scope

__all__ = ["ChallengeRetriever"]


def _to_langchain(hit: Hit) -> LCDocument:
    doc = hit.document
    return LCDocument(
        page_content=doc.text,
        metadata={
            "id": doc.id,
            "title": doc.title,
            "category": doc.category.code,
            "label": doc.category.label,
            "locations": list(doc.locations),
            "work_types": list(doc.work_types),
            "source": doc.source,
            "score": hit.score,
        },
    )


class ChallengeRetriever(BaseRetriever):
    """``ChallengeRetriever(retriever=HybridRetriever(...), k=3, category=None)``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: HybridRetriever
    k: int = 3
    category: Category | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        hits = self.retriever.search(query, k=self.k, scope=Scope(category=self.category))
        return [_to_langchain(hit) for hit in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        hits = await self.retriever.retrieve(query, k=self.k, scope=Scope(category=self.category))
        return [_to_langchain(hit) for hit in hits]
