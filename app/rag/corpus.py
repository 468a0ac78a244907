"""The bundled eco-challenge corpus: one JSON document per line (see data/README.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.domain.categories import Category

__all__ = ["Document", "load_corpus"]


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    title: str
    body: str
    category: Category
    locations: tuple[str, ...]
    work_types: tuple[str, ...]
    keywords: tuple[str, ...]
    source: str

    @property
    def text(self) -> str:
        return f"{self.title}\n{self.body}"


def load_corpus(path: Path) -> list[Document]:
    """Read ``path``; a malformed line fails loudly with its line number."""
    documents: list[Document] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                documents.append(
                    Document(
                        id=str(raw["id"]),
                        title=str(raw["title"]),
                        body=str(raw["body"]),
                        category=Category[raw["category"]],
                        locations=tuple(raw.get("locations", ())),
                        work_types=tuple(raw.get("work_types", ())),
                        keywords=tuple(raw.get("keywords", ())),
                        source=str(raw.get("source", "")),
                    )
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: bad corpus line ({exc!r})") from exc
    return documents
