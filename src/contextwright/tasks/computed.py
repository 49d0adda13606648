"""Computed context: the task-specific slice of what the project learned, within limits.

`compute_context` runs the spec's pipeline: task signals -> knowledge graph query -> dependency
handoffs -> context map filter, then `apply_context_limits`. The result is plain data; template.py
renders it as markdown and source.py turns it into assembly candidates.

Limits and obligations. The complexity limits cap what the graph and the context map offer
(patterns, graph gotchas, decisions, code references, prior-work entries, related tasks). A completed
dependency's high/medium gotchas and its blocking questions are obligations, never cut: warnings
hold every inherited gotcha, and graph gotchas fill only the room left under `max_gotchas`. So
`len(warnings) <= max(max_gotchas, inherited gotchas)` always, and equals the limit when graph
gotchas are there to fill it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..records import Record
from .context_map import filter_context_map
from .dependencies import DependencyReport
from .graph import GraphSnapshot, Node, query_relevant_knowledge
from .handoff import FileRef
from .limits import ContextLimits
from .signals import TaskSignals

SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class PatternItem:
    pattern: str
    location: str
    relevance: float
    reason: str
    record_id: str | None = None
    inherited_from: str | None = None  # the dependency's task id


@dataclass(frozen=True)
class WarningItem:
    issue: str
    severity: str
    relevance: float
    reason: str
    record_id: str | None = None
    inherited_from: str | None = None


@dataclass(frozen=True)
class DecisionItem:
    decision: str
    rationale: str
    relevance: float
    reason: str
    record_id: str | None = None


@dataclass(frozen=True)
class PriorWork:
    task_id: str
    task: str
    summary: str
    files_created: tuple[FileRef, ...]
    reason: str
    record_id: str | None = None  # the handoff record


@dataclass(frozen=True)
class QuestionItem:
    question: str
    context: str
    recommendation: str
    task_id: str
    reason: str
    record_id: str | None = None


@dataclass(frozen=True)
class CodeRef:
    file: str
    component: str
    notes: str
    relevance: float
    reason: str
    record_id: str | None = None


@dataclass(frozen=True)
class RelatedTask:
    task_id: str
    summary: str
    reason: str


@dataclass
class ComputeStats:
    """What the debug block reports: how the context was computed."""

    signals: TaskSignals = field(default_factory=TaskSignals)
    nodes_matched: dict[str, int] = field(default_factory=dict)
    dependencies_processed: list[str] = field(default_factory=list)
    dependencies_skipped: dict[str, str] = field(default_factory=dict)
    patterns_inherited: int = 0
    warnings_inherited: int = 0
    questions_inherited: int = 0
    map_total: int = 0
    map_matched: int = 0
    map_kept: int = 0
    top_score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["signals"] = self.signals.to_dict()
        return d


@dataclass
class ComputedContext:
    task_id: str
    complexity: str
    limits: ContextLimits
    patterns_to_follow: list[PatternItem] = field(default_factory=list)
    warnings: list[WarningItem] = field(default_factory=list)
    relevant_decisions: list[DecisionItem] = field(default_factory=list)
    prior_work: list[PriorWork] = field(default_factory=list)
    blocking_questions: list[QuestionItem] = field(default_factory=list)
    code_references: list[CodeRef] = field(default_factory=list)
    related_tasks: list[RelatedTask] = field(default_factory=list)
    stats: ComputeStats = field(default_factory=ComputeStats)
    debug: bool = False
    # Records behind the items, by id, for the assembly source (not serialized).
    records: dict[str, Record] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        def items(xs: Sequence[Any]) -> list[dict[str, Any]]:
            return [asdict(x) for x in xs]

        return {
            "task_id": self.task_id,
            "complexity": self.complexity,
            "limits": self.limits.to_dict(),
            "patterns_to_follow": items(self.patterns_to_follow),
            "warnings": items(self.warnings),
            "relevant_decisions": items(self.relevant_decisions),
            "prior_work": items(self.prior_work),
            "blocking_questions": items(self.blocking_questions),
            "code_references": items(self.code_references),
            "related_tasks": items(self.related_tasks),
            "_computed": self.stats.to_dict(),
        }

    def render(self, template: str | None = None, *, debug: bool | None = None) -> str:
        """The spec's "## Context (Computed)" markdown, plus "## Context Debug" when debugging."""
        from .debug import render_debug
        from .template import render_computed

        text = render_computed(self, template)
        if self.debug if debug is None else debug:
            text = text.rstrip("\n") + "\n\n" + render_debug(self)
        return text


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def compute_context(
    *,
    task_id: str,
    signals: TaskSignals,
    snapshot: GraphSnapshot,
    dependencies: DependencyReport,
    limits: ContextLimits,
    complexity: str,
    agent: str | None = None,
    exclude_tasks: Sequence[str] = (),
    extra_records: Mapping[str, Record] | None = None,
    debug: bool = False,
) -> ComputedContext:
    """Pure given its inputs: the same snapshot, signals and handoffs give the same context."""
    records: dict[str, Record] = dict(extra_records or {})
    stats = ComputeStats(signals=signals, dependencies_skipped=dict(dependencies.skipped))

    # Dependencies first: their items are what this task was promised.
    patterns: list[PatternItem] = []
    warnings: list[WarningItem] = []
    questions: list[QuestionItem] = []
    prior: list[PriorWork] = []
    seen_text: set[tuple[str, str]] = set()  # (type, normalized text)
    seen_ids: set[str] = set()
    for dep in dependencies.contexts:
        stats.dependencies_processed.append(dep.task_id)
        why = f"from completed dependency {dep.task_name} ({dep.task_id})"
        if dep.handoff_record is not None:
            records[dep.handoff_record.id] = dep.handoff_record
        prior.append(
            PriorWork(
                dep.task_id,
                dep.task_name,
                dep.summary,
                dep.files_to_read,
                f"prior work {why}",
                dep.handoff_record.id if dep.handoff_record else None,
            )
        )
        for ip in dep.patterns:
            key = ("pattern", _norm(ip.pattern.pattern))
            if key in seen_text:
                continue
            seen_text.add(key)
            if ip.record_id:
                seen_ids.add(ip.record_id)
            p = ip.pattern
            patterns.append(
                PatternItem(p.pattern, p.location, 1.0, f"pattern {why}", ip.record_id, dep.task_id)
            )
            stats.patterns_inherited += 1
        for ig in dep.gotchas:
            key = ("gotcha", _norm(ig.gotcha.issue))
            if key in seen_text:
                continue
            seen_text.add(key)
            if ig.record_id:
                seen_ids.add(ig.record_id)
            g = ig.gotcha
            warnings.append(
                WarningItem(
                    g.issue,
                    g.severity,
                    1.0,
                    f"{g.severity} gotcha {why}",
                    ig.record_id,
                    dep.task_id,
                )
            )
            stats.warnings_inherited += 1
        for iq in dep.open_questions:
            key = ("question", _norm(iq.question.question))
            if key in seen_text:
                continue
            seen_text.add(key)
            if iq.record is not None:
                records[iq.record.id] = iq.record
            q = iq.question
            questions.append(
                QuestionItem(
                    q.question,
                    q.context,
                    q.recommendation,
                    dep.task_id,
                    f"blocking question {why}",
                    iq.record_id,
                )
            )
            stats.questions_inherited += 1
    warnings.sort(key=lambda w: SEVERITY_ORDER.get(w.severity, 1))  # stable: deps order kept
    for rid in seen_ids:
        node = snapshot.by_id.get(rid)
        if node is not None:
            records[rid] = node.record

    # Then the graph, minus what the dependencies already gave.
    knowledge = query_relevant_knowledge(
        snapshot,
        signals,
        limits,
        agent=agent,
        exclude_tasks=[task_id, *exclude_tasks],
        extra=len(seen_ids) + len(seen_text),
    )
    stats.nodes_matched = dict(knowledge.matched)

    def fresh(node: Node) -> bool:
        key = (node.kind, _norm(node.summary))
        if node.id in seen_ids or key in seen_text:
            return False
        seen_ids.add(node.id)
        seen_text.add(key)
        return True

    for m in knowledge.patterns:
        n = m.node
        if fresh(n):
            records[n.id] = n.record
            patterns.append(PatternItem(n.summary, n.location, m.relevance, m.reason, n.id))
    graph_warnings = []
    for m in knowledge.gotchas:
        n = m.node
        if fresh(n):
            records[n.id] = n.record
            graph_warnings.append(WarningItem(n.summary, n.severity, m.relevance, m.reason, n.id))
    warnings.extend(graph_warnings)
    decisions = []
    for m in knowledge.decisions:
        n = m.node
        if fresh(n):
            records[n.id] = n.record
            decisions.append(DecisionItem(n.summary, n.rationale, m.relevance, m.reason, n.id))
    related = [
        RelatedTask(m.node.id, m.node.summary.splitlines()[0][:200], m.reason)
        for m in knowledge.related_tasks
    ]

    # The context map, filtered by relevance.
    entries = snapshot.files_visible_to(agent)
    scored = filter_context_map(signals, entries, take=max(limits.max_code_refs, 10))
    stats.map_total = len(entries)
    stats.map_matched = len(scored)
    stats.top_score = float(scored[0].relevance) if scored else 0.0
    refs = []
    for s in scored:
        e = s.entry
        if e.record is not None:
            records[e.record.id] = e.record
        refs.append(
            CodeRef(e.location, e.component, e.notes, float(s.relevance), s.reason, e.record_id)
        )

    computed = ComputedContext(
        task_id=task_id,
        complexity=complexity,
        limits=limits,
        patterns_to_follow=patterns,
        warnings=warnings,
        relevant_decisions=decisions,
        prior_work=prior,
        blocking_questions=questions,
        code_references=refs,
        related_tasks=related,
        stats=stats,
        debug=debug,
        records=records,
    )
    return apply_context_limits(computed, limits)


def apply_context_limits(computed: ComputedContext, limits: ContextLimits) -> ComputedContext:
    """The spec's TAKE per list, except that inherited gotchas and blocking questions stay.

    Idempotent and pure. Warnings keep every inherited (dependency) gotcha, then graph gotchas up
    to whatever room `max_gotchas` leaves.
    """
    inherited = [w for w in computed.warnings if w.inherited_from is not None]
    graph = [w for w in computed.warnings if w.inherited_from is None]
    room = max(limits.max_gotchas - len(inherited), 0)
    out = replace(
        computed,
        limits=limits,
        patterns_to_follow=computed.patterns_to_follow[: limits.max_patterns],
        warnings=inherited + graph[:room],
        relevant_decisions=computed.relevant_decisions[: limits.max_decisions],
        prior_work=computed.prior_work[: limits.max_prior_tasks],
        blocking_questions=list(computed.blocking_questions),
        code_references=computed.code_references[: limits.max_code_refs],
        related_tasks=computed.related_tasks[: limits.max_related_tasks],
    )
    out.stats = replace(computed.stats)
    out.stats.map_kept = len(out.code_references)
    return out
