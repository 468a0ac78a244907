"""How well the intent step understands free-text turns: per-class precision and recall, the
confusion matrix, on-topic turns refused, and the time per decision.

    .venv/bin/python bench/intent_eval.py                 # every design, dev and test
    .venv/bin/python bench/intent_eval.py --split dev     # tune on dev only

Designs, all over the same example bank (app/chat/data/intent_examples.jsonl) and the same
embeddings (the default embedder, one vector per turn), all read against the session the same
way (``IntentClassifier.decide``):
- ``knn``: nearest examples weighted by similarity;
- ``knn+catalogue``: the gateway's classifier: ``knn``, with the categories of the message's
  10 nearest catalogue documents as evidence of its category (``catalogue_evidence``,
  ``CATALOGUE_WEIGHT``; the corpus is embedded into an in-memory store first, about a minute);
- ``served``: what the gateway decides, all of it: ``knn`` with the evidence of the nearest
  documents and of the best-fitting ones (``fused_evidence``, app/chat/fit.py), a first
  turn that one challenge fits outright in that challenge's field (``FitBank.outright``),
  read again with the conversation as the gateway reads it (``in_conversation``: "그 중에 …"
  by its grammar is a choice among those shown, "아예 다른 분야로, …" by its words another
  field, a follow-up that leaves something aside goes where it wants, a request whose
  best-fitting challenges lie in another field goes there; each history turn counts as having
  shown challenges, as it did);
- ``lexical+confirm+catalogue``: the gateway in a burst: ``lexical+confirm`` with the evidence
  of a search by words alone;
- ``lexical``: the gateway's reading of a turn the embedding model is too busy for: the same
  vote over hashed word/bigram vectors (``app/rag/lexical.py``); its time includes encoding;
- ``lexical+confirm``: what a burst does: the lexical reading, and for a turn it would refuse
  as off-topic the embedding's decision (the turn waits for its embedding); its time excludes
  that embedding, and ``confirmations`` counts the turns that needed one;
- ``prototype``: the cosine to each label's (and category's) mean example vector;
- ``logreg``: scikit-learn's logistic regression on the example vectors (when installed);
- ``llm``: the served model as a router through vLLM structured output, a choice among the
  labels (``--llm-url``), with its extra round trip timed.

The sets: bench/data/intent/dev.jsonl (tuning) and test.jsonl (held out: never tuned on).
A turn is right when the decision matches (``more`` and ``among`` are decided only once the
session has shown something; before that they are ordinary questions, and so labelled); a
switch needs its category too; an ordinary
question that is decided as a "switch" to the current category is still an ordinary question,
and so is a general question asked before any category was chosen ("환경 챌린지 처음인데 뭐부터
해요?") when it is answered in some category: that is what answering it means.
Results: bench/results/intent.json; with ``--file`` a labelled set of one's own in the same
format (bench/data/intent/stranger_dev.jsonl, a stranger's follow-ups), beside it as
intent_<name>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.chat.candidates import EVERY_FIELD_K  # noqa: E402
from app.chat.constraints import (  # noqa: E402
    Constraint,
    clauses,
    leaving_aside,
    toward,
)
from app.chat.follow_up import (  # noqa: E402
    ONLY_CONSTRAINTS_MARGIN,
    about_something_else,
    in_conversation,
    turned_to,
)
from app.chat.intent import (  # noqa: E402
    Evidence,
    Intent,
    IntentClassifier,
    IntentClassifiers,
    IntentKind,
    Label,
    catalogue_evidence,
    fused_evidence,
    named_category,
)
from app.chat.intent_bank import (  # noqa: E402
    BUNDLED_EXAMPLES,
    build_facets,
    build_intents,
    example_vectors,
    load_examples,
)
from app.chat.ranking import rank  # noqa: E402
from app.chat.sentence_bank import build_fit_bank  # noqa: E402
from app.chat.sessions import SessionState, Turn  # noqa: E402
from app.chat.subjects import Subjects  # noqa: E402
from app.domain.categories import Category  # noqa: E402
from app.rag.corpus import Document, load_corpus  # noqa: E402
from app.rag.embedder import Embedder, load_embedder  # noqa: E402
from app.rag.ingest import ingest  # noqa: E402
from app.rag.retriever import HybridRetriever, SearchMode  # noqa: E402
from app.rag.scope import Scope  # noqa: E402
from app.rag.store_edge import EdgeStore  # noqa: E402

DATA = ROOT / "bench" / "data" / "intent"
CORPUS = ROOT / "app" / "rag" / "data" / "challenges.jsonl"
RESULTS = ROOT / "bench" / "results" / "intent.json"
CLASSES = ("switch", "ask", "more", "among", "another", "back", "off_topic", "nonsense")
ON_TOPIC = frozenset({"switch", "ask", "more", "among", "another", "back"})
REFUSED = frozenset({"off_topic", "nonsense"})


@dataclass(frozen=True)
class Turn_:
    id: str
    state: SessionState
    message: str
    gold: str
    category: Category | None
    tags: tuple[str, ...]


def load_turns(path: Path) -> list[Turn_]:
    turns = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        state = SessionState(
            session_id=row["id"],
            base_category=Category[row["base"]] if row.get("base") else None,
            category=Category[row["current"]] if row.get("current") else None,
            turns=tuple(Turn(t["user"], t["assistant"]) for t in row.get("history", [])),
        )
        turns.append(
            Turn_(
                row["id"],
                state,
                row["message"],
                row["intent"],
                Category[row["category"]] if row.get("category") else None,
                tuple(row.get("tags", ())),
            )
        )
    return turns


def predicted_class(intent: Intent, state: SessionState, gold: str) -> tuple[str, Category | None]:
    if intent.kind is IntentKind.SWITCH and intent.category is state.category:
        return "ask", None
    if intent.kind is IntentKind.SWITCH and gold == "ask" and state.category is None:
        return "ask", None
    return intent.kind.value, intent.category


class PrototypeClassifier(IntentClassifier):
    """Cosine to each label's mean vector; the category by the topic examples' mean vectors."""

    def __init__(self, examples: Sequence[Any], vectors: np.ndarray, **kwargs: Any) -> None:
        super().__init__(examples, vectors, **kwargs)
        labels = tuple(Label)
        self._act_means = np.stack(
            [_mean(vectors, [e.label is a for e in examples]) for a in labels]
        )
        self._cat_means = np.stack(
            [_mean(vectors, [e.category is c for e in examples]) for c in Category]
        )

    def label_scores(self, vector: np.ndarray) -> dict[Label, float]:
        sims = self._act_means @ vector
        weights = np.exp((sims - sims.max()) / 0.02)
        weights /= weights.sum()
        return {label: float(w) for label, w in zip(Label, weights, strict=True)}

    def topic_category(self, vector: np.ndarray, evidence: Evidence | None = None) -> Category:
        return tuple(Category)[int(np.argmax(self._cat_means @ vector))]


def _mean(vectors: np.ndarray, mask: Sequence[bool]) -> np.ndarray:
    mean = vectors[np.array(mask)].mean(axis=0)
    return mean / np.linalg.norm(mean)


class LogRegClassifier(IntentClassifier):
    """scikit-learn's LogisticRegression over the example vectors (labels, and topic categories)."""

    def __init__(self, examples: Sequence[Any], vectors: np.ndarray, **kwargs: Any) -> None:
        from sklearn.linear_model import LogisticRegression

        super().__init__(examples, vectors, **kwargs)
        self._act_model = LogisticRegression(C=10.0, max_iter=2000).fit(
            vectors, [e.label.value for e in examples]
        )
        topic = [i for i, e in enumerate(examples) if e.category is not None]
        self._cat_model = LogisticRegression(C=10.0, max_iter=2000).fit(
            vectors[topic], [examples[i].category.code for i in topic]
        )

    def label_scores(self, vector: np.ndarray) -> dict[Label, float]:
        probs = self._act_model.predict_proba(vector[None, :])[0]
        scores = {
            Label(label): float(p) for label, p in zip(self._act_model.classes_, probs, strict=True)
        }
        return {label: scores.get(label, 0.0) for label in Label}

    def topic_category(self, vector: np.ndarray, evidence: Evidence | None = None) -> Category:
        return Category[str(self._cat_model.predict(vector[None, :])[0])]


def evaluate(
    name: str,
    decide: Callable[[Turn_, np.ndarray], Intent],
    turns: Sequence[Turn_],
    vectors: np.ndarray,
) -> dict[str, Any]:
    confusion: Counter[tuple[str, str]] = Counter()
    wrong_category = 0
    errors = []
    timings = []
    for turn, vector in zip(turns, vectors, strict=True):
        started = time.perf_counter()
        intent = decide(turn, vector)
        timings.append(time.perf_counter() - started)
        predicted, category = predicted_class(intent, turn.state, turn.gold)
        if predicted == "switch" and turn.gold == "switch" and category is not turn.category:
            wrong_category += 1
            predicted = "switch(wrong)"
        confusion[(turn.gold, predicted)] += 1
        if predicted != turn.gold:
            errors.append(
                {
                    "id": turn.id,
                    "message": turn.message,
                    "current": turn.state.category and turn.state.category.code,
                    "gold": turn.gold + (f":{turn.category.code}" if turn.category else ""),
                    "got": predicted + (f":{category.code}" if category else ""),
                }
            )
    per_class = {}
    for cls in CLASSES:
        tp = confusion[(cls, cls)]
        gold = sum(v for (g, _), v in confusion.items() if g == cls)
        got = sum(v for (_, p), v in confusion.items() if p == cls)
        per_class[cls] = {
            "support": gold,
            "precision": round(tp / got, 3) if got else None,
            "recall": round(tp / gold, 3) if gold else None,
        }
    correct = sum(confusion[(c, c)] for c in CLASSES)
    refused = sum(v for (g, p), v in confusion.items() if g in ON_TOPIC and p in REFUSED)
    ms = np.array(timings) * 1000
    return {
        "design": name,
        "turns": len(turns),
        "accuracy": round(correct / len(turns), 3),
        "min_recall": min(v["recall"] for v in per_class.values() if v["recall"] is not None),
        "on_topic_refused": refused,
        "switch_wrong_category": wrong_category,
        "per_class": per_class,
        "confusion": {f"{g} -> {p}": v for (g, p), v in sorted(confusion.items())},
        "decision_ms_p50": round(float(np.percentile(ms, 50)), 4),
        "decision_ms_p99": round(float(np.percentile(ms, 99)), 4),
        "errors": errors,
    }


def _catalogue_retriever(embedder: Embedder) -> HybridRetriever:
    """The catalogue embedded into an in-memory store, searched as the gateway searches it."""
    store = EdgeStore(":memory:")
    ingest(store, "intent", embedder, load_corpus(CORPUS))
    store.optimize("intent")
    return HybridRetriever(store, "intent", embedder)


def _nearest(retriever: HybridRetriever) -> Callable[[str, np.ndarray | None], list[Category]]:
    """The categories of a message's 10 nearest catalogue documents (by its embedding, or by
    its words alone when there is none)."""

    def nearest(message: str, vector: np.ndarray | None) -> list[Category]:
        mode = SearchMode.LEXICAL if vector is None else SearchMode.HYBRID
        hits = retriever.search(message, k=10, vector=vector, mode=mode)
        return [hit.document.category for hit in hits]

    return nearest


def _catalogue(
    nearest: Callable[[str, np.ndarray | None], list[Category]],
) -> Callable[[str, np.ndarray | None], Evidence | None]:
    """What the gateway's catalogue says of a message's category: its nearest documents'."""

    def evidence(message: str, vector: np.ndarray | None) -> Evidence | None:
        return catalogue_evidence(nearest(message, vector))

    return evidence


def _served(
    embedder: Embedder, knn: IntentClassifier, retriever: HybridRetriever
) -> Callable[[Turn_, np.ndarray], Intent]:
    """The gateway's whole reading of a turn with its embedding (``served`` above)."""
    nearest = _nearest(retriever)
    fit = build_fit_bank(embedder, CORPUS)
    facets = build_facets(embedder)
    corpus = load_corpus(CORPUS)
    titles = {document.title: document.id for document in corpus}
    documents = {document.id: document for document in corpus}
    subjects = Subjects(corpus)

    def named(answer: str, i: int) -> tuple[str, ...]:
        """The challenges an earlier answer showed: the catalogue titles it says."""
        return tuple(doc_id for title, doc_id in titles.items() if title in answer) or (
            f"shown-{i}",
        )

    class TurnReadings:
        """As Planner's ``_Readings``, on this bench's own banks (app/chat/follow_up.py)."""

        def __init__(self, message: str, vector: np.ndarray, state: SessionState) -> None:
            self.message, self.vector, self.state = message, vector, state
            self.names_a_field = named_category(message) is not None

        async def turns_to(self) -> Intent | None:
            # Where it says it turns ("먹는 거 쪽으로", "회사 쪽으로는").
            words = toward(self.message)
            if words is None or not self.state.turns or self.names_a_field:
                return None
            return turned_to(words, embedder.embed_queries([words])[0], facets, knn, fit)

        def nearer_a_constraint(self) -> bool:
            nearer = facets.dense.nearest_constraint(self.vector) - knn.nearest_topic(self.vector)
            return not self.names_a_field and nearer >= ONLY_CONSTRAINTS_MARGIN

        def says_only_constraints(self) -> bool:
            return not self.names_a_field and subjects.names_only_constraints(self.message)

        def shown_fit(self) -> float | None:
            state = self.state
            if not state.last_shown or self.names_a_field:
                return None
            return fit.nearer_shown(self.vector, state.last_shown, self.message)

        def wanted(self) -> tuple[Intent | None, Category | None]:
            words = leaving_aside(self.message)
            vector = embedder.embed_queries([words])[0]
            best = fit.categories(vector, 1, words)
            best_fit = best[0] if best else None
            if not self.state.turns or self.names_a_field:
                return None, best_fit
            return knn.decide(words, vector, self.state), best_fit

        async def beyond_shown(self) -> tuple[bool, Category | None]:
            state = self.state

            async def shown() -> list[Document]:
                return [documents[i] for i in state.last_shown if i in documents]

            return await about_something_else(self.message, state, subjects, shown, self.fitting)

        def fitting(self) -> list[Category]:
            return fit.categories(self.vector, 10, self.message)

        async def unsaid_by_shown(self) -> bool:
            shown = [documents[i] for i in self.state.last_shown if i in documents]
            return bool(shown) and bool(subjects.unsaid(self.message, shown))

        async def said_by_shown(self) -> bool:
            shown = [documents[i] for i in self.state.last_shown if i in documents]
            return bool(subjects.said_by(self.message, shown))

        async def meets_nearest_in_field(self, constraints: frozenset[Constraint]) -> bool:
            # The bench's turns keep no topic: the last user message stands for it.
            state = self.state
            text = f"{state.turns[-1].user} {self.message}"
            scope = Scope(exclude=state.shown)
            vector = embedder.embed_queries([text])[0]
            hits = retriever.search(text, k=EVERY_FIELD_K, scope=scope, vector=vector)
            met = rank(hits, constraints=constraints)
            return (
                not met.unmet and bool(met.hits) and met.hits[0].document.category is state.category
            )

    def decide(turn: Turn_, vector: np.ndarray) -> Intent:
        evidence = fused_evidence(nearest(turn.message, vector), fit.categories(vector, 10))
        # Each earlier turn showed challenges (the history's answers list them).
        shown = tuple(
            replace(t, shown=named(t.assistant, i)) for i, t in enumerate(turn.state.turns)
        )
        state = replace(turn.state, turns=shown)
        answering = fit.outright(vector, turn.message)
        outright = fit.category(answering) if answering else None
        intent = knn.decide(turn.message, vector, state, evidence=evidence, outright=outright)
        parts = clauses(turn.message)
        pieces = list(embedder.embed_queries(parts)) if parts else []
        read = facets.read(turn.message, vector, pieces)
        readings = TurnReadings(turn.message, vector, state)
        leaves_aside = leaving_aside(turn.message) != turn.message
        reading = in_conversation(
            turn.message, intent, read, state, readings, leaves_aside=leaves_aside
        )
        return asyncio.run(reading)[0]

    return decide


def _confirmed(
    intents: IntentClassifiers,
    evidence: Callable[[str, np.ndarray | None], Evidence | None] | None = None,
) -> Callable[[Turn_, np.ndarray], Intent]:
    """The lexical reading; an off-topic verdict decided again on the turn's embedding."""

    def decide(turn: Turn_, vector: np.ndarray) -> Intent:
        seen = evidence(turn.message, None) if evidence else None
        intent = intents.decide(turn.message, None, turn.state, evidence=seen)
        if IntentClassifiers.needs_embedding(intent):
            decide.confirmations += 1  # type: ignore[attr-defined]
            return intents.decide(turn.message, vector, turn.state, evidence=seen)
        return intent

    decide.confirmations = 0  # type: ignore[attr-defined]
    return decide


def llm_router(url: str, model: str | None) -> Callable[[Turn_, np.ndarray], Intent]:
    """The served model picks one label (vLLM ``structured_outputs.choice``)."""
    import httpx

    choices = [
        "ask",
        "more",
        "among",
        "another",
        "back",
        "off_topic",
        "nonsense",
        *(f"switch:{c.code}" for c in Category),
    ]
    client = httpx.Client(base_url=url, timeout=120)
    served = model or client.get("/models").json()["data"][0]["id"]
    system = (
        "너는 친환경 챌린지 추천 챗봇의 의도 분류기다. 사용자의 새 메시지가 무엇을 원하는지 "
        "라벨 하나로만 답하라.\n"
        "- switch:CODE: 현재와 다른 카테고리의 챌린지를 원함 (이름이나 뜻으로). 카테고리: "
        + ", ".join(f"{c.code}={c.label}" for c in Category)
        + "\n- ask: 현재 카테고리 안의 평범한 질문\n"
        "- more: 같은 분야에서 아직 안 보여준 다른 챌린지를 원함 (더 쉬운 거, 딴 거)\n"
        "- among: 방금 보여준 챌린지에 대한 질문 (그 중에, 두 번째 거, 그거 어떻게 해)\n"
        "- another: 아무거나 다른 분야\n"
        "- back: 처음 고른 카테고리로 돌아가기\n- off_topic: 친환경 챌린지와 무관한 질문\n"
        "- nonsense: 의미 없는 입력"
    )
    timings: list[float] = []

    def decide(turn: Turn_, _: np.ndarray) -> Intent:
        state = turn.state
        context = "\n".join(f"사용자: {t.user}\n봇: {t.assistant[:80]}" for t in state.turns)
        user = (
            f"처음 카테고리: {state.base_category.label if state.base_category else '없음'}\n"
            f"현재 카테고리: {state.category.label if state.category else '없음'}\n"
            f"대화:\n{context or '(없음)'}\n새 메시지: {turn.message}"
        )
        started = time.perf_counter()
        response = client.post(
            "/chat/completions",
            json={
                "model": served,
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ],
                "temperature": 0,
                "max_tokens": 12,
                "structured_outputs": {"choice": choices},
            },
        )
        timings.append(time.perf_counter() - started)
        label = response.json()["choices"][0]["message"]["content"].strip()
        if label in ("more", "among") and not state.turns:
            return Intent(IntentKind.ASK)  # nothing shown yet, as the classifier reads it
        if label.startswith("switch:"):
            category = Category[label.split(":", 1)[1]]
            if category is state.category:
                return Intent(IntentKind.ASK)
            return Intent(IntentKind.SWITCH, category)
        return Intent(IntentKind(label))

    decide.timings = timings  # type: ignore[attr-defined]
    return decide


def print_report(result: dict[str, Any]) -> None:
    print(
        f"\n== {result['design']} on {result['split']} ({result['turns']} turns): "
        f"accuracy {result['accuracy']:.3f}, min per-class recall {result['min_recall']:.3f}, "
        f"on-topic refused {result['on_topic_refused']}, "
        f"decision p50 {result['decision_ms_p50']:.3f} ms p99 {result['decision_ms_p99']:.3f} ms"
    )
    print(f"   {'class':<10} {'n':>4} {'precision':>9} {'recall':>7}")
    for cls, row in result["per_class"].items():
        p = "-" if row["precision"] is None else f"{row['precision']:.3f}"
        r = "-" if row["recall"] is None else f"{row['recall']:.3f}"
        print(f"   {cls:<10} {row['support']:>4} {p:>9} {r:>7}")
    columns = [*CLASSES, "switch(wrong)"]
    print("   confusion (rows: gold, columns: decided)")
    print("   " + " " * 10 + "".join(f"{c[:9]:>10}" for c in columns))
    for gold in CLASSES:
        counts = {p: v for (g, p), v in _pairs(result["confusion"]) if g == gold}
        print("   " + f"{gold:<10}" + "".join(f"{counts.get(c, 0):>10}" for c in columns))


def _pairs(confusion: dict[str, int]) -> list[tuple[tuple[str, str], int]]:
    return [(tuple(key.split(" -> ")), value) for key, value in confusion.items()]  # type: ignore[misc]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["dev", "test", "both"], default="both")
    parser.add_argument("--designs", default="knn,knn+catalogue,served,lexical,prototype,logreg")
    parser.add_argument("--llm-url", help="an OpenAI-compatible base URL: adds the llm design")
    parser.add_argument("--llm-model")
    parser.add_argument("--examples", type=Path, default=BUNDLED_EXAMPLES, help="the example bank")
    parser.add_argument("--errors", action="store_true", help="print each wrong decision")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--file",
        type=Path,
        help="a labelled set in the splits' format instead of them (a stranger's: "
        "bench/data/intent/stranger_followups.jsonl); its results are written beside",
    )
    args = parser.parse_args()

    embedder = load_embedder(None)
    examples = load_examples(args.examples)
    bank = example_vectors(embedder, examples, args.examples)
    splits = ["dev", "test"] if args.split == "both" else [args.split]
    if args.file is not None:
        splits = [args.file.stem]
    designs: dict[str, IntentClassifier] = {}
    wanted = args.designs.split(",")
    needs_catalogue = "knn+catalogue" in wanted or "served" in wanted
    retriever = _catalogue_retriever(embedder) if needs_catalogue else None
    nearest = _nearest(retriever) if retriever is not None else None
    evidence = _catalogue(nearest) if nearest is not None else None
    for name in wanted:
        if name == "knn":
            designs[name] = IntentClassifier(examples, bank)
        elif name == "prototype":
            designs[name] = PrototypeClassifier(examples, bank)
        elif name == "logreg":
            try:
                designs[name] = LogRegClassifier(examples, bank)
            except ImportError:
                print("logreg skipped: scikit-learn is not installed", file=sys.stderr)
    results = []
    for split in splits:
        turns = load_turns(args.file if args.file is not None else DATA / f"{split}.jsonl")
        started = time.perf_counter()
        vectors = embedder.embed_queries([t.message for t in turns])
        embed_ms = (time.perf_counter() - started) * 1000 / len(turns)
        print(f"\n{split}: {len(turns)} turns, embedding {embed_ms:.1f} ms per turn (shared)")
        runs: dict[str, Callable[[Turn_, np.ndarray], Intent]] = {
            name: (lambda c: lambda t, v: c.decide(t.message, v, t.state))(classifier)
            for name, classifier in designs.items()
        }
        if evidence is not None:
            knn = IntentClassifier(examples, bank)
            runs["knn+catalogue"] = lambda t, v, knn=knn: knn.decide(
                t.message, v, t.state, evidence=evidence(t.message, v)
            )
        if retriever is not None and "served" in wanted:
            knn = IntentClassifier(examples, bank)
            runs["served"] = _served(embedder, knn, retriever)
        if "lexical" in wanted:
            intents = build_intents(embedder, args.examples)
            runs["lexical"] = (lambda i: lambda t, _: i.decide(t.message, None, t.state))(intents)
            runs["lexical+confirm"] = _confirmed(intents)
            if evidence is not None:
                runs["lexical+confirm+catalogue"] = _confirmed(intents, evidence)
        if args.llm_url:
            runs["llm"] = llm_router(args.llm_url, args.llm_model)
        for name, decide in runs.items():
            result = {"split": split, **evaluate(name, decide, turns, vectors)}
            if name.startswith("lexical+confirm"):
                result["confirmations"] = decide.confirmations  # type: ignore[attr-defined]
            if name == "llm":
                ms = np.array(decide.timings) * 1000  # type: ignore[attr-defined]
                result["decision_ms_p50"] = round(float(np.percentile(ms, 50)), 1)
                result["decision_ms_p99"] = round(float(np.percentile(ms, 99)), 1)
            result["embedding_ms_per_turn"] = round(embed_ms, 2)
            print_report(result)
            if "confirmations" in result:
                print(f"   turns that waited for their embedding: {result['confirmations']}")
            if args.errors:
                for error in result["errors"]:
                    print(f"     {error}")
            results.append(result)
    if not args.no_write:
        out = RESULTS if args.file is None else RESULTS.with_name(f"intent_{args.file.stem}.json")
        out.write_text(
            json.dumps(
                {
                    "bench": "intent",
                    "embedder": embedder.name,
                    "examples": len(examples),
                    "results": results,
                },
                ensure_ascii=False,
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
        print(f"\nwritten: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
