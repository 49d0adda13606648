"""Dependency context: what each completed dependency handed off to the tasks after it.

Only completed dependencies count; an open, active or cancelled one contributes nothing, not even
its name. From each handoff: the files to read, the patterns, the gotchas of high or medium
severity (low ones are filtered out) and the open questions that block (and are not resolved since).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..ports import Store
from ..records import Record
from .handoff import FileRef, Gotcha, Handoff, OpenQuestion, PatternFound, parse_handoff

if TYPE_CHECKING:
    from .graph import GraphSnapshot


@dataclass(frozen=True)
class Inherited:
    """One handoff item and the graph record it became (if complete_task stored one)."""

    record_id: str | None


@dataclass(frozen=True)
class InheritedPattern(Inherited):
    pattern: PatternFound


@dataclass(frozen=True)
class InheritedGotcha(Inherited):
    gotcha: Gotcha


@dataclass(frozen=True)
class InheritedQuestion(Inherited):
    question: OpenQuestion
    record: Record | None = None


@dataclass
class DependencyContext:
    task_id: str
    task_name: str
    summary: str
    files_to_read: tuple[FileRef, ...]
    handoff_record: Record | None
    patterns: list[InheritedPattern] = field(default_factory=list)
    gotchas: list[InheritedGotcha] = field(default_factory=list)
    open_questions: list[InheritedQuestion] = field(default_factory=list)


@dataclass
class DependencyReport:
    contexts: list[DependencyContext]
    skipped: dict[str, str]  # dependency id -> why it was left out


def _ids(meta_ids: object, n: int) -> list[str | None]:
    ids = list(meta_ids) if isinstance(meta_ids, list) else []
    return [str(ids[i]) if i < len(ids) and ids[i] else None for i in range(n)]


def latest_handoffs(
    store: Store,
    project: str,
    task_ids: Sequence[str],
    viewers: Collection[str] | None = None,
) -> dict[str, Record]:
    """task id -> its newest handoff record of the task's own `project` (a handoff replies to
    its task) that one of `viewers` may see (None: any); newest in the store's insertion order,
    which no writer's created_at can move."""
    found: dict[str, Record] = {}
    for r in store.replies_to(project, list(task_ids), None):
        if viewers is not None and not any(r.visible_to(a) for a in viewers):
            continue
        if r.kind == "handoff" and r.reply_to is not None:
            found[r.reply_to] = r  # replies_to is in insertion order: the last one wins
    return found


def extract_dependency_context(
    snap: GraphSnapshot, dependencies: Sequence[str], agent: str | None = None
) -> DependencyReport:
    """Pure over the snapshot (which follows the store version, so statuses are current)."""
    skipped: dict[str, str] = {}
    contexts = []
    for dep_id in dependencies:
        dep = snap.tasks.get(dep_id)
        # One a reader may not see reads as one that exists nowhere: its status is not told.
        if dep is None or (agent is not None and not dep.visible_to(agent)):
            skipped[dep_id] = "not found"
            continue
        if dep.status != "completed":
            skipped[dep_id] = f"not completed (status {dep.status})"
            continue
        found = snap.handoff(dep_id, agent)
        if found is None:
            skipped[dep_id] = "completed without a handoff"
            continue
        record, handoff = found
        nodes = record.meta.get("nodes") or {}
        ctx = DependencyContext(
            task_id=dep.id,
            task_name=str(dep.meta.get("name") or dep.id),
            summary=handoff.summary,
            files_to_read=handoff.files_to_read(),
            handoff_record=record,
        )
        ps = handoff.patterns_discovered
        for p, rid in zip(ps, _ids(nodes.get("patterns"), len(ps)), strict=True):
            ctx.patterns.append(InheritedPattern(rid, p))
        gs = handoff.gotchas
        for g, rid in zip(gs, _ids(nodes.get("gotchas"), len(gs)), strict=True):
            if g.severity != "low":
                ctx.gotchas.append(InheritedGotcha(rid, g))
        qs = handoff.open_questions
        for q, rid in zip(qs, _ids(nodes.get("questions"), len(qs)), strict=True):
            qr = snap.questions.get(rid or "")
            if q.blocking and (qr is None or qr.status not in ("resolved", "cancelled")):
                ctx.open_questions.append(InheritedQuestion(rid, q, qr))
        contexts.append(ctx)
    return DependencyReport(contexts, skipped)


def handoff_of(record: Record) -> Handoff:
    return parse_handoff(record.meta.get("handoff", {}))
