"""The knowledge graph, kept in the same store as the records (no graph database).

Nodes are records: `pattern`, `gotcha` and `decision` (tags = what they apply to; meta: location,
severity, rationale, score, task), `task` and `file`. Edges are store edges: task -> dependency
(`depends_on`), node -> task where discovered (`discovered_in`), decision -> superseded decision
(`supersedes`, written by the store). A `GraphSnapshot` indexes one project's live nodes by tag;
it is rebuilt when the store's project version moves, so repeated queries cost no I/O.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..ports import Query, Store
from ..records import Record
from .context_map import ContextEntry
from .handoff import Handoff, parse_handoff
from .limits import ContextLimits
from .signals import TaskSignals

NODE_KINDS = ("pattern", "gotcha", "decision")
DEAD = ("superseded", "cancelled", "resolved", "compacted")
SEVERITY_BONUS = {"high": 0.5, "medium": 0.25, "low": 0.0}
KEYWORD_WEIGHT = 1.0
DOMAIN_WEIGHT = 0.5
SNAPSHOT_LIMIT = 50_000
GRAPH_KINDS = ("task", *NODE_KINDS, "file", "handoff", "question")


@dataclass(frozen=True)
class Node:
    record: Record
    kind: str
    summary: str
    tags: tuple[str, ...]
    location: str = ""
    severity: str = "medium"
    rationale: str = ""
    prior: float = 0.0  # meta.score: a node's standing weight, added to its relevance
    task: str | None = None  # where it was discovered

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def bonus(self) -> float:
        """What a node adds to its tag matches: meta.score, and severity for a gotcha."""
        return self.prior + (SEVERITY_BONUS[self.severity] if self.kind == "gotcha" else 0.0)

    @classmethod
    def from_record(cls, r: Record) -> Node:
        m = r.meta
        raw = m.get("score", 0.0)
        prior = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else 0.0
        severity = str(m.get("severity") or "medium").lower()
        return cls(
            record=r,
            kind=r.kind,
            summary=r.content.strip(),
            tags=r.tags,
            location=str(m.get("location") or ""),
            severity=severity if severity in SEVERITY_BONUS else "medium",
            rationale=str(m.get("rationale") or ""),
            prior=prior,
            task=str(m["task"]) if m.get("task") else None,
        )


@dataclass(frozen=True)
class Match:
    node: Node
    relevance: float
    keywords: tuple[str, ...]
    domains: tuple[str, ...]

    @property
    def reason(self) -> str:
        parts = []
        if self.keywords:
            parts.append(f"keywords {', '.join(self.keywords)}")
        if self.domains:
            parts.append(f"domains {', '.join(self.domains)}")
        return f"knowledge graph: matches {'; '.join(parts)} (relevance {self.relevance:g})"


@dataclass
class Knowledge:
    """The spec's queryRelevantKnowledge result, before the dependency merge and limits."""

    patterns: list[Match] = field(default_factory=list)
    gotchas: list[Match] = field(default_factory=list)
    decisions: list[Match] = field(default_factory=list)
    related_tasks: list[Match] = field(default_factory=list)
    matched: dict[str, int] = field(default_factory=dict)  # per type, before the limits


@dataclass
class GraphSnapshot:
    """One project's graph at one store version: live nodes by tag, tasks, handoffs, questions and
    context-map entries. Built with a handful of queries; every later read is in memory."""

    version: int
    by_tag: dict[str, list[str]]  # tag -> node ids
    by_id: dict[str, Node]
    tasks_by_tag: dict[str, list[Record]]
    files: list[ContextEntry]
    tasks: dict[str, Record]
    handoffs: dict[str, list[Record]]  # task id -> its handoff records, oldest first
    questions: dict[str, Record]
    parsed: dict[str, Handoff] = field(default_factory=dict, repr=False)
    records: dict[str, Record] = field(default_factory=dict, repr=False)
    max_created: float = 0.0
    loaded_at: float = 0.0  # time.monotonic() of the last full load

    def handoff(self, task_id: str, agent: str | None = None) -> tuple[Record, Handoff] | None:
        """A task's latest handoff that `agent` may see (None: any), parsed once (records never
        change, so the cache is shared). A private or direct handoff is a record like any other:
        the newest one must not stand in for an older one its reader may see, nor reach a reader
        it was not written to."""
        handoffs = reversed(self.handoffs.get(task_id, ()))
        seen = (r for r in handoffs if agent is None or r.visible_to(agent))
        record = next(seen, None)
        if record is None:
            return None
        found = self.parsed.get(record.id)
        if found is None:
            found = self.parsed[record.id] = parse_handoff(record.meta["handoff"])
        return record, found

    @property
    def task_status(self) -> dict[str, str | None]:
        return {k: r.status for k, r in self.tasks.items()}

    @classmethod
    @classmethod
    def load(
        cls, store: Store, project: str, parsed: dict[str, Handoff] | None = None
    ) -> GraphSnapshot:
        """Read every graph record of the project (one query) and index it."""
        version = store.version(project)
        q = Query(project, None, kinds=GRAPH_KINDS, limit=SNAPSHOT_LIMIT, newest_first=False)
        records = {r.id: r for r in store.query(q)}
        replies = _task_replies(store, project, records)
        return cls.build(version, records, {} if parsed is None else parsed, replies=replies)

    def refresh(self, store: Store, project: str) -> GraphSnapshot:
        """A newer snapshot from this one without re-reading everything: the records created
        since, the supersessions they carry, and the current status of every task and question
        (what completing, reopening and resolving change). A status set by hand on a node or a
        file is seen at the next full load (GraphCache reloads fully every `full_reload_s`)."""
        version = store.version(project)
        records = dict(self.records)
        new = store.query(
            Query(
                project,
                None,
                kinds=GRAPH_KINDS,
                since=self.max_created,
                limit=SNAPSHOT_LIMIT,
                newest_first=False,
            )
        )
        for r in new:
            records[r.id] = r
        for r in new:
            old = records.get(r.supersedes or "")
            if old is not None and old.status != "superseded":
                records[old.id] = old.with_status("superseded")
        for r in store.query(
            Query(project, None, kinds=("task", "question"), limit=SNAPSHOT_LIMIT)
        ):
            records[r.id] = r
        replies = _task_replies(store, project, records)
        fresh = self.build(version, records, self.parsed, previous=self, replies=replies)
        fresh.loaded_at = self.loaded_at
        return fresh

    @classmethod
    def build(
        cls,
        version: int,
        records: dict[str, Record],
        parsed: dict[str, Handoff],
        previous: GraphSnapshot | None = None,
        replies: Sequence[Record] | None = None,
    ) -> GraphSnapshot:
        """Index graph records; pure. Nodes whose record did not change are reused. `replies`
        are the records that answer the project's tasks in the order the store took them
        (`Store.replies_to`): a task's latest handoff is the last one stored, whatever
        `created_at` its writer gave. Without them, `records` are taken in time order."""
        ordered = sorted(records.values(), key=lambda r: (r.created_at, r.id))
        tasks = {r.id: r for r in ordered if r.kind == "task"}

        def done(task_id: object) -> bool:
            # Knowledge from a task that was reopened or cancelled is not known yet.
            r = tasks.get(str(task_id)) if task_id else None
            return r is None or r.status == "completed"

        old = previous.by_id if previous is not None else {}
        by_tag: dict[str, list[str]] = {}
        by_id: dict[str, Node] = {}
        tasks_by_tag: dict[str, list[Record]] = {}
        files: list[ContextEntry] = []
        handoffs: dict[str, list[Record]] = {}
        questions: dict[str, Record] = {}
        for r in ordered:
            if r.kind in NODE_KINDS:
                if r.status in DEAD or not done(r.meta.get("task")):
                    continue
                node = old.get(r.id)
                by_id[r.id] = (
                    node
                    if node is not None and node.record.status == r.status
                    else Node.from_record(r)
                )
                for t in r.tags:
                    by_tag.setdefault(t, []).append(r.id)
            elif r.kind == "task":
                if r.status == "completed":  # related tasks are finished work to learn from
                    for t in r.tags:
                        tasks_by_tag.setdefault(t, []).append(r)
            elif r.kind == "file":
                if r.status == "active" and done(r.meta.get("task")):
                    files.append(ContextEntry.from_record(r))
            elif r.kind == "handoff" and replies is None:  # oldest first: the latest wins
                if r.reply_to in tasks and isinstance(r.meta.get("handoff"), Mapping):
                    handoffs.setdefault(r.reply_to, []).append(r)
            elif r.kind == "question":
                questions[r.id] = r
        for r in replies or ():  # in the store's order: the last one stored wins
            if (
                r.kind == "handoff"
                and r.reply_to in tasks
                and isinstance(r.meta.get("handoff"), Mapping)
            ):
                handoffs.setdefault(r.reply_to, []).append(r)
        files.reverse()  # newest entries first, as the store would list them
        return cls(
            version,
            by_tag,
            by_id,
            tasks_by_tag,
            files,
            tasks,
            handoffs,
            questions,
            parsed,
            records,
            max((r.created_at for r in ordered), default=0.0),
            time.monotonic(),
        )

    def files_visible_to(self, agent: str | None) -> list[ContextEntry]:
        if agent is None:
            return self.files
        return [e for e in self.files if e.record is None or e.record.visible_to(agent)]


class GraphCache:
    """One snapshot per project, at the store's current project version.

    When the version moves, the snapshot is refreshed from the records created since (cheap), and
    fully reloaded at most every `full_reload_s` seconds (so a status set by hand on a node is seen
    within that time) or when `full_reload_s` is 0.
    """

    def __init__(self, store: Store, size: int = 16, full_reload_s: float = 30.0) -> None:
        self.store = store
        self.size = size
        self.full_reload_s = full_reload_s
        self._lock = threading.Lock()
        self._snaps: dict[str, GraphSnapshot] = {}
        self._parsed: dict[str, Handoff] = {}  # handoff record id -> parsed (records are immutable)
        self.hits = 0
        self.refreshes = 0
        self.misses = 0

    def get(self, project: str) -> GraphSnapshot:
        version = self.store.version(project)
        with self._lock:
            snap = self._snaps.get(project)
            if snap is not None and snap.version == version:
                self.hits += 1
                return snap
        if snap is not None and time.monotonic() - snap.loaded_at < self.full_reload_s:
            fresh = snap.refresh(self.store, project)
            counter = "refreshes"
        else:
            if len(self._parsed) > 50_000:
                self._parsed.clear()
            fresh = GraphSnapshot.load(self.store, project, self._parsed)
            counter = "misses"
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)
            if len(self._snaps) >= self.size and project not in self._snaps:
                self._snaps.pop(next(iter(self._snaps)))
            self._snaps[project] = fresh
        return fresh


def _task_replies(store: Store, project: str, records: Mapping[str, Record]) -> list[Record]:
    """What answers the project's tasks, in the order the store took it (handoffs among it)."""
    tasks = [r.id for r in records.values() if r.kind == "task"]
    return store.replies_to(project, tasks, None) if tasks else []


def query_relevant_knowledge(
    snap: GraphSnapshot,
    signals: TaskSignals,
    limits: ContextLimits,
    *,
    agent: str | None = None,
    exclude_tasks: Sequence[str] = (),
    extra: int = 0,
) -> Knowledge:
    """Nodes whose tags match the signals, scored, deduplicated, best first per type.

    relevance = 1 per keyword tag + 0.5 per domain tag + severity bonus (gotchas) + meta.score.
    Not offered: superseded/resolved nodes and nodes of a reopened task (left out of the snapshot)
    and nodes the agent may not see. `extra` asks for that many more per type, so that the caller
    can drop the nodes it already has from the dependencies.
    """
    keywords = set(signals.keywords)
    score: dict[str, float] = {}
    for tag in signals.tags:
        weight = KEYWORD_WEIGHT if tag in keywords or tag not in signals.domains else DOMAIN_WEIGHT
        for node_id in snap.by_tag.get(tag, ()):
            score[node_id] = score.get(node_id, 0.0) + weight
    by_kind: dict[str, list[tuple[Node, float]]] = {k: [] for k in NODE_KINDS}
    for node_id, rel in score.items():
        node = snap.by_id[node_id]
        if agent is not None and not node.record.visible_to(agent):
            continue
        by_kind[node.kind].append((node, round(rel + node.bonus, 4)))

    def best(kind: str, k: int) -> list[Match]:
        top = heapq.nsmallest(
            k, by_kind[kind], key=lambda nr: (-nr[1], -nr[0].record.created_at, nr[0].id)
        )
        return [_explain(node, rel, signals) for node, rel in top]

    exclude = set(exclude_tasks)
    related: dict[str, tuple[Record, list[str]]] = {}
    for tag in signals.tags:
        for r in snap.tasks_by_tag.get(tag, ()):
            if r.id in exclude or (agent is not None and not r.visible_to(agent)):
                continue
            related.setdefault(r.id, (r, []))[1].append(tag)
    top_related = heapq.nsmallest(
        limits.max_related_tasks,
        related.values(),
        key=lambda rt: (-len(rt[1]), -rt[0].created_at, rt[0].id),
    )
    related_matches = [
        Match(Node(record=r, kind="task", summary=r.content, tags=r.tags), len(t), tuple(t), ())
        for r, t in top_related
    ]
    return Knowledge(
        patterns=best("pattern", limits.max_patterns + extra),
        gotchas=best("gotcha", limits.max_gotchas + extra),
        decisions=best("decision", limits.max_decisions + extra),
        related_tasks=related_matches,
        matched={
            "pattern": len(by_kind["pattern"]),
            "gotcha": len(by_kind["gotcha"]),
            "decision": len(by_kind["decision"]),
            "task": len(related),
        },
    )


def _explain(node: Node, rel: float, signals: TaskSignals) -> Match:
    tags = set(node.tags)
    kws = tuple(t for t in signals.keywords if t in tags)
    doms = tuple(t for t in (*signals.domains, *signals.task_types) if t in tags and t not in kws)
    return Match(node, rel, kws, doms)
