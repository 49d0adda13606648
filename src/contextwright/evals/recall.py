"""Recall on real conversations: does the assembled window hold the turns a question needs?

Each LoCoMo turn becomes a record (its speaker as author, its session date as the time, the image
caption appended). Each question is one `engine.assemble` call at the end of its conversation, the
call users make, with the question as the task, for a neutral `assistant` agent. A question's
evidence turns are "inside" when the trace lists their records as kept. Two baselines run on the
same records, budget and token counting: a recency window and BM25 alone.

    python -m contextwright.evals.recall --path locomo-dev.json --budgets 500,1000,2000,4000 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..assembly.render import header
from ..assembly.scoring import item_prefix
from ..engine import Engine
from ..errors import ValidationError
from ..ports import Embedder
from ..records import Record
from ..stores.sqlite import SQLiteStore
from . import METHODS
from .locomo import CATEGORIES, Conversation, Question, load_locomo

AGENT = "assistant"
FORMAT = "markdown"
# Relevance sources may fill the window here: nothing else competes for it in a conversation.
SOURCE_CAPS: dict[str, float] = {}

Progress = Callable[[int, int, str], None]


def parse_budgets(text: str | Iterable[int]) -> list[int]:
    parts = text.split(",") if isinstance(text, str) else list(text)
    try:
        budgets = [int(str(b).strip()) for b in parts if str(b).strip()]
    except ValueError as exc:
        raise ValidationError("budgets", text, "give token budgets like 500,1000,2000") from exc
    if not budgets or any(b < 100 for b in budgets):
        raise ValidationError("budgets", text, "give budgets of at least 100 tokens")
    return budgets


def source_limit(budget: int) -> int:
    """How many hits each relevance source returns: enough to fill the budget twice over."""
    return max(40, budget // 12)


class Scores:
    """Turn recall and all-evidence recall, overall and per category."""

    def __init__(self) -> None:
        self.turn: list[float] = []
        self.whole: list[float] = []
        self.by_cat: defaultdict[int, tuple[list[float], list[float]]] = defaultdict(
            lambda: ([], [])
        )

    def add(self, q: Question, inside: set[str]) -> None:
        found = len(q.evidence & inside) / len(q.evidence)
        whole = 1.0 if q.evidence <= inside else 0.0
        self.turn.append(found)
        self.whole.append(whole)
        self.by_cat[q.category][0].append(found)
        self.by_cat[q.category][1].append(whole)

    def to_dict(self, method: str, budget: int) -> dict[str, Any]:
        return {
            "method": method,
            "budget": budget,
            "turn_recall": _mean(self.turn),
            "all_evidence_recall": _mean(self.whole),
            "questions": len(self.turn),
            "by_category": {
                str(cat): {
                    "name": CATEGORIES.get(cat, str(cat)),
                    "turn_recall": _mean(t),
                    "all_evidence_recall": _mean(w),
                    "questions": len(t),
                }
                for cat, (t, w) in sorted(self.by_cat.items())
            },
        }


def _mean(xs: Sequence[float]) -> float:
    return round(sum(xs) / len(xs), 4) if xs else 0.0


def ingest(engine: Engine, conv: Conversation) -> dict[str, str]:
    """Store the conversation's turns; returns record id -> dia_id."""
    items = [
        {
            "project": conv.project,
            "author": t.speaker,
            "kind": "message",
            "content": t.text,
            "created_at": t.created_at,
            "session": f"session_{t.session}",
            "meta": {"dia_id": t.dia_id},
        }
        for t in conv.turns
    ]
    records = engine.add_many(items)
    engine.register_agent(conv.project, AGENT, role="default")
    return {r.id: str(r.meta["dia_id"]) for r in records}


class Baseline:
    """Rank turns some simple way and keep the first that fit, counted like the engine counts."""

    def __init__(self, engine: Engine, records: list[Record]) -> None:
        self.engine = engine
        self.by_id = {r.id: r for r in records}
        self.newest = sorted(records, key=lambda r: r.created_at, reverse=True)
        self.cost = {r.id: engine.counter.count(self.line(r)) + 1 for r in records}

    @staticmethod
    def line(r: Record) -> str:
        return f"{item_prefix(r)} {r.content}"

    def fixed(self, task: str) -> int:
        skeleton = f"{header(AGENT)}\n## State\n- Task: {task}\n\n## Knowledge\n"
        return self.engine.counter.count(skeleton)

    def fit(self, ranked: Iterable[Record], task: str, budget: int) -> set[str]:
        left = budget - self.fixed(task)
        kept = set()
        for r in ranked:
            c = self.cost[r.id]
            if c <= left:
                kept.add(r.id)
                left -= c
        return kept

    def recency(self, task: str, budget: int) -> set[str]:
        return self.fit(self.newest, task, budget)

    def bm25(self, project: str, task: str, budget: int) -> set[str]:
        hits = self.engine.store.search_text(project, AGENT, task, source_limit(budget) * 2)
        return self.fit((h.record for h in hits), task, budget)


def assembled_ids(engine: Engine, project: str, task: str, budget: int) -> set[str]:
    limits = {"fulltext": source_limit(budget), "vector": source_limit(budget)}
    result = engine.assemble(project, AGENT, task, budget, format=FORMAT, limits=limits)
    return {
        rid
        for item in result.trace.items
        if item["decision"] != "dropped"
        for rid in item["record_ids"]
    }


def run_recall(
    path: str | Path,
    budgets: Sequence[int] | str = (500, 1000, 2000, 4000),
    methods: Sequence[str] = METHODS,
    *,
    embedder: Embedder | str | None = "minilm",
    conversations: int | None = None,
    questions: int | None = None,
    progress: Progress | None = None,
    workdir: str | Path | None = None,
) -> dict[str, Any]:
    """Run every method at every budget over the file's questions; see the module docstring."""
    budget_list = parse_budgets(budgets)
    for m in methods:
        if m not in METHODS:
            raise ValidationError("methods", m, f"use {', '.join(METHODS)}")
    convs = load_locomo(path)[:conversations]
    if questions is not None:
        for c in convs:
            c.questions = c.questions[:questions]
    total = sum(len(c.questions) for c in convs)
    scores = {(m, b): Scores() for m in methods for b in budget_list}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        clock = {"now": 0.0}
        engine = Engine(
            SQLiteStore(str(Path(tmp) / "recall.db")),
            embedder=embedder if "contextwright" in methods else None,
            source_caps=SOURCE_CAPS,
            clock=lambda: clock["now"],
            persist_traces=False,
        )
        try:
            done = 0
            for conv in convs:
                dia = ingest(engine, conv)
                clock["now"] = conv.end + 3600.0
                records = engine.store.get_many(conv.project, list(dia))
                base = Baseline(engine, records)
                if engine.vectors.on:
                    if progress:
                        progress(done, total, f"embedding {conv.sample_id}")
                    engine.wait_for_embeddings()
                for q in conv.questions:
                    for b in budget_list:
                        for m in methods:
                            if m == "contextwright":
                                ids = assembled_ids(engine, conv.project, q.question, b)
                            elif m == "recency":
                                ids = base.recency(q.question, b)
                            else:
                                ids = base.bm25(conv.project, q.question, b)
                            scores[(m, b)].add(q, {dia[i] for i in ids if i in dia})
                    done += 1
                    if progress:
                        progress(done, total, conv.sample_id)
            vectors = engine.vectors.status()
        finally:
            engine.close()
    return {
        "dataset": str(path),
        "conversations": len(convs),
        "skipped_questions": sum(c.skipped for c in convs),
        "vectors": vectors,
        "seconds": round(time.perf_counter() - t0, 1),
        "results": [scores[(m, b)].to_dict(m, b) for b in budget_list for m in methods],
    }


def bar(done: int, total: int, label: str) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<24}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def table(report: dict[str, Any]) -> str:
    lines = ["method          budget  turn recall  all-evidence  questions"]
    for r in report["results"]:
        lines.append(
            f"{r['method']:<15} {r['budget']:>6}  {r['turn_recall']:>11.3f}  "
            f"{r['all_evidence_recall']:>12.3f}  {r['questions']:>9}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m contextwright.evals.recall")
    parser.add_argument("--path", required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--budgets", default="500,1000,2000,4000")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--embedder", default="minilm", help="minilm, hash or none")
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    args = parser.parse_args(argv)
    try:
        report = run_recall(
            args.path,
            args.budgets,
            [m.strip() for m in args.methods.split(",") if m.strip()],
            embedder=args.embedder,
            conversations=args.conversations,
            progress=bar,
        )
    except ValidationError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
