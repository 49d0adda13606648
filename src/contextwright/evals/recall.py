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
    """How many hits the bm25 baseline ranks (twice this): enough to fill the budget twice over."""
    return max(40, budget // 12)


# Why an evidence turn is not in the window, by what the trace says of its record.
MISSED = ("not_found", "outranked", "capped", "left_out")


def why_missed(reason: str | None) -> str:
    """`not_found`: no source found the record (it is not in the trace); `outranked`: found, but
    the window filled with higher-scored items first; `capped`: a source or section cap left it
    out; `left_out`: something else did (a rule, the deep end of a list, a superseded record)."""
    if reason is None:
        return "not_found"
    if reason.startswith("budget exhausted"):
        return "outranked"
    if reason.startswith(("source cap", "section cap")):
        return "capped"
    return "left_out"


class Scores:
    """Turn recall and all-evidence recall, overall and per category; the tokens the windows
    used; how many questions' evidence could fit at all (`fits`: the evidence turns alone,
    rendered, within the budget: the ceiling of all-evidence recall); and, for the engine, why
    each missed evidence turn was missed (`missed`, MISSED)."""

    def __init__(self) -> None:
        self.turn: list[float] = []
        self.whole: list[float] = []
        self.tokens: list[float] = []
        self.fits: list[float] = []
        self.missed: dict[str, int] | None = None
        self.by_cat: defaultdict[int, tuple[list[float], list[float]]] = defaultdict(
            lambda: ([], [])
        )

    def add(self, q: Question, inside: set[str], tokens: int = 0, fits: bool = True) -> None:
        found = len(q.evidence & inside) / len(q.evidence)
        whole = 1.0 if q.evidence <= inside else 0.0
        self.turn.append(found)
        self.whole.append(whole)
        self.tokens.append(float(tokens))
        self.fits.append(1.0 if fits else 0.0)
        self.by_cat[q.category][0].append(found)
        self.by_cat[q.category][1].append(whole)

    def add_missed(self, reasons: Iterable[str | None]) -> None:
        """Count the missed evidence turns by `why_missed` of their records' trace reasons."""
        if self.missed is None:
            self.missed = dict.fromkeys(MISSED, 0)
        for reason in reasons:
            self.missed[why_missed(reason)] += 1

    def to_dict(self, method: str, budget: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": method,
            "budget": budget,
            "turn_recall": _mean(self.turn),
            "all_evidence_recall": _mean(self.whole),
            "questions": len(self.turn),
            "tokens_used": round(sum(self.tokens) / len(self.tokens), 1) if self.tokens else 0.0,
            "evidence_fits": _mean(self.fits),
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
        if self.missed is not None:
            out["missed"] = dict(self.missed)
        return out


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

    def fit(self, ranked: Iterable[Record], task: str, budget: int) -> tuple[set[str], int]:
        """The records that fit, first come first kept, and the tokens they and the skeleton use."""
        fixed = self.fixed(task)
        left = budget - fixed
        kept = set()
        for r in ranked:
            c = self.cost[r.id]
            if c <= left:
                kept.add(r.id)
                left -= c
        return kept, budget - left

    def fits(self, task: str, ids: Iterable[str], budget: int) -> bool:
        """Would these records alone, rendered as the baselines render them, fit the budget?"""
        return self.fixed(task) + sum(self.cost[i] for i in ids) <= budget

    def recency(self, task: str, budget: int) -> tuple[set[str], int]:
        return self.fit(self.newest, task, budget)

    def bm25(self, project: str, task: str, budget: int) -> tuple[set[str], int]:
        hits = self.engine.store.search_text(project, AGENT, task, source_limit(budget) * 2)
        return self.fit((h.record for h in hits), task, budget)


def assembled_ids(
    engine: Engine, project: str, task: str, budget: int
) -> tuple[set[str], int, dict[str, str]]:
    """The records inside the window the engine assembles for `task`, its tokens, and the
    reason the trace gives for each record it left out: the call as users make it, with the
    engine's own source caps and hit limits."""
    result = engine.assemble(project, AGENT, task, budget, format=FORMAT)
    ids: set[str] = set()
    dropped: dict[str, str] = {}
    for item in result.trace.items:
        for rid in item["record_ids"]:
            if item["decision"] != "dropped":
                ids.add(rid)
            else:
                dropped[rid] = str(item.get("reason") or "")
    return ids, result.tokens, dropped


def run_recall(
    path: str | Path,
    budgets: Sequence[int] | str = (500, 1000, 2000, 4000),
    methods: Sequence[str] = METHODS,
    *,
    embedder: Embedder | str | None = "auto",
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
                if engine.vectors.on or engine.vectors.loading:
                    if progress:
                        progress(done, total, f"embedding {conv.sample_id}")
                    engine.wait_for_embeddings()
                by_dia = {d: i for i, d in dia.items()}
                for q in conv.questions:
                    evidence = [by_dia[d] for d in q.evidence if d in by_dia]
                    for b in budget_list:
                        fits = base.fits(q.question, evidence, b)
                        for m in methods:
                            if m == "contextwright":
                                ids, used, out = assembled_ids(engine, conv.project, q.question, b)
                                scores[(m, b)].add_missed(
                                    out.get(i) for i in evidence if i not in ids
                                )
                            elif m == "recency":
                                ids, used = base.recency(q.question, b)
                            else:
                                ids, used = base.bm25(conv.project, q.question, b)
                            inside = {dia[i] for i in ids if i in dia}
                            scores[(m, b)].add(q, inside, used, fits)
                    done += 1
                    if progress:
                        progress(done, total, conv.sample_id)
            vectors = engine.vectors.status()
            config = configuration(engine, embedder)
        finally:
            engine.close()
    return {
        "dataset": str(path),
        "conversations": len(convs),
        "skipped_questions": sum(c.skipped for c in convs),
        "configuration": config,
        "vectors": vectors,
        "seconds": round(time.perf_counter() - t0, 1),
        "results": [scores[(m, b)].to_dict(m, b) for b in budget_list for m in methods],
    }


def configuration(engine: Engine, embedder: Embedder | str | None) -> dict[str, Any]:
    """What the contextwright method measured: the engine's defaults but for what is listed."""
    given = embedder if isinstance(embedder, str) or embedder is None else embedder.name
    return {
        "embedder": given,
        "vectors": engine.vectors.embedder.name if engine.vectors.embedder else None,
        "fusion": engine.scoring.fusion,
        "sources": [s.name for s in engine.sources],
        "source_caps": dict(engine.assembler.source_caps),
        "source_limits": (
            "the sources' defaults (fulltext 40 hits; vector 40, or budget // 25 up to 80)"
        ),
        "format": FORMAT,
    }


def bar(done: int, total: int, label: str) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<24}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def table(report: dict[str, Any]) -> str:
    """The report as text: the configuration measured, then one line per method and budget with
    the per-category turn recall."""
    lines = []
    config = report.get("configuration")
    if config:
        lines.append(
            f"measured: embedder {config['embedder']} (vectors: {config['vectors'] or 'off'}), "
            f"fusion {config['fusion']}, sources {', '.join(config['sources'])}"
        )
    cats: list[str] = []
    for r in report["results"]:
        for c in r.get("by_category", {}).values():
            if c["name"] not in cats:
                cats.append(c["name"])
    head = "method          budget  tokens  turn recall  all-evidence  fits"
    lines.append(head + "".join(f"  {c[:11]:>11}" for c in cats))
    for r in report["results"]:
        by_name = {c["name"]: c["turn_recall"] for c in r.get("by_category", {}).values()}
        lines.append(
            f"{r['method']:<15} {r['budget']:>6}  {r.get('tokens_used', 0):>6.0f}  "
            f"{r['turn_recall']:>11.3f}  {r['all_evidence_recall']:>12.3f}  "
            f"{r.get('evidence_fits', 0):>4.2f}"
            + "".join(f"  {by_name[c]:>11.3f}" if c in by_name else f"  {'':>11}" for c in cats)
        )
    return "\n".join(lines)


def plot(report: dict[str, Any], path: str | Path) -> Path:
    """Draw turn recall (solid) and all-evidence recall (dashed) against the budget, one colour
    per method, into a PNG at `path`. Needs matplotlib (the `bench` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display is needed or wanted
        import matplotlib.pyplot as plt
    except ImportError as exc:
        from ..errors import MissingExtra

        raise MissingExtra("bench recall --plot", "bench") from exc
    out = Path(path)
    if out.suffix.lower() != ".png":
        raise ValidationError("plot", str(path), "give a file name ending in .png")
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    methods = list(dict.fromkeys(r["method"] for r in report["results"]))
    for i, m in enumerate(methods):
        rows = sorted((r for r in report["results"] if r["method"] == m), key=lambda r: r["budget"])
        xs = [r["budget"] for r in rows]
        colour = f"C{i}"
        ax.plot(xs, [r["turn_recall"] for r in rows], "o-", color=colour, label=f"{m}: turns")
        ax.plot(
            xs,
            [r["all_evidence_recall"] for r in rows],
            "s--",
            color=colour,
            alpha=0.7,
            label=f"{m}: all evidence",
        )
    ax.set_xscale("log", base=2)
    budgets = sorted({r["budget"] for r in report["results"]})
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.set_xlabel("token budget")
    ax.set_ylabel("recall of evidence turns")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    config = report.get("configuration") or {}
    ax.set_title(f"{Path(str(report['dataset'])).name}: vectors {config.get('vectors') or 'off'}")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m contextwright.evals.recall")
    parser.add_argument("--path", required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--budgets", default="500,1000,2000,4000")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--embedder", default="auto", help="auto, minilm, hash or none")
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
