"""The task board: tasks, their completion with a structured handoff, and their computed context.

    task = engine.tasks.create("acme", name="JWT", objective="Add JWT auth to src/api/app.ts")
    engine.complete_task("acme", task.id, handoff_yaml)  # validates, then records everything
    engine.tasks.computed_context("acme", later.id).render()  # "## Context (Computed)"

Everything is a record in the engine's store: a task is a `task` record, a handoff a `handoff`
record replying to it, discoveries become `pattern`/`gotcha`/`decision`/`question` nodes and the
files touched become `file` entries of the context map; edges link them to the task.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, ValidationError
from ..ports import Query
from ..recordbook import check_choice
from ..records import (
    MAX_NAME_CHARS,
    STATUSES,
    Record,
    build_record,
    check_identifier,
    check_name,
    check_text,
)
from ..sessions import scopes
from .computed import ComputedContext, compute_context
from .context_map import infer_component
from .dependencies import extract_dependency_context, handoff_of, latest_handoffs
from .graph import GraphCache
from .handoff import FileChange, Handoff, parse_handoff
from .limits import ContextLimits, check_complexity, limits_table
from .signals import DEFAULT_DOMAINS, TaskSignals, signals_of_task, tags_for_text
from .source import ComputedSource

if TYPE_CHECKING:
    from ..recordbook import RecordBook

MAX_OBJECTIVE = 8_000
MAX_CRITERIA = 50
MAX_DEPENDENCIES = 100


@dataclass(frozen=True)
class Completion:
    """What `complete` wrote: the task (now completed), its handoff and the graph records."""

    task: Record
    handoff: Record
    nodes: tuple[Record, ...]
    files: tuple[Record, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task.to_dict(),
            "handoff": self.handoff.to_dict(),
            "nodes": [n.id for n in self.nodes],
            "files": [f.id for f in self.files],
        }


def _text(value: object, field: str, limit: int, fix: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field, value, fix)
    if len(value) > limit:
        raise ValidationError(
            field, f"<{len(value)} characters>", f"keep it under {limit} characters"
        )
    return check_text(field, value.strip())


def missing_task(task_id: str) -> NotFound:
    """The one answer for a task id that names nothing the caller may see."""
    return NotFound("task", task_id, "create the task first, or check the id")


class TaskBoard:
    """Tasks and computed context for one engine (available as `engine.tasks`)."""

    def __init__(
        self,
        book: RecordBook,
        *,
        limits: Mapping[str, ContextLimits | Mapping[str, Any]] | None = None,
        domains: Mapping[str, Sequence[str]] | None = None,
        template: str | None = None,
    ) -> None:
        self.book = book  # the store, counter and clock, and validated writes
        self.limits = limits_table(limits)
        self.domains: Mapping[str, Sequence[str]] = dict(domains or DEFAULT_DOMAINS)
        self.template = template
        self.graph = GraphCache(book.store)
        self._signal_cache: dict[str, TaskSignals] = {}
        self.source = ComputedSource(
            lambda project, task_id, complexity, agent: self.computed_context(
                project, task_id, complexity, agent=agent
            )
        )

    # -- tasks ----------------------------------------------------------------------------------

    def create(
        self,
        project: str,
        name: str,
        objective: str,
        acceptance_criteria: Sequence[str] = (),
        type: str = "feature",
        complexity: str = "normal",
        dependencies: Sequence[str] = (),
        author: str = "planner",
        assignee: str | None = None,
    ) -> Record:
        """Validate and store a task (status open) with its `depends_on` edges."""
        check_identifier("project", project)
        check_name("author", author)
        if assignee is not None:
            check_name("assignee", assignee)
        name = _text(name, "name", MAX_NAME_CHARS, "give the task a short name")
        objective = _text(objective, "objective", MAX_OBJECTIVE, "say what the task must achieve")
        if isinstance(acceptance_criteria, str) or not isinstance(acceptance_criteria, Sequence):
            raise ValidationError(
                "acceptance_criteria", acceptance_criteria, "give a list of sentences"
            )
        if len(acceptance_criteria) > MAX_CRITERIA:
            raise ValidationError(
                "acceptance_criteria",
                f"{len(acceptance_criteria)} items",
                f"give at most {MAX_CRITERIA} criteria",
            )
        criteria = [
            _text(c, f"acceptance_criteria[{i}]", 2_000, "give each criterion as a sentence")
            for i, c in enumerate(acceptance_criteria)
        ]
        task_type = _text(type, "type", 50, "name the type, e.g. feature, bugfix, refactor, test")
        complexity = check_complexity(complexity)
        if isinstance(dependencies, str) or not isinstance(dependencies, Sequence):
            raise ValidationError("dependencies", dependencies, "give a list of task ids")
        if len(dependencies) > MAX_DEPENDENCIES:
            raise ValidationError(
                "dependencies",
                f"{len(dependencies)} items",
                f"give at most {MAX_DEPENDENCIES} dependencies",
            )
        for i, dep in enumerate(dependencies):
            check_name(f"dependencies[{i}]", dep)
        deps = list(dict.fromkeys(dependencies))
        found = {r.id: r for r in self.book.store.get_many(project, deps)} if deps else {}
        for i, dep in enumerate(deps):
            r = found.get(dep)
            # Missing, not a task and hidden from the author read alike: nothing says what the
            # id is elsewhere, or that a task the author may not see exists.
            if r is None or r.kind != "task" or not r.visible_to(author):
                raise ValidationError(
                    f"dependencies[{i}]",
                    dep,
                    f"name a task of project {project!r} (engine.tasks.find lists them)",
                    problem=f"names no task of project {project!r}",
                )
            # The new task is project-wide: its refs, meta and computed context would show every
            # reader a narrower task's id and status.
            if r.visibility != "project":
                fix = "name a project-wide task: a project task may depend only on those"
                raise ValidationError(f"dependencies[{i}]", dep, fix, problem="is not project-wide")
        signals = signals_of_task(
            {
                "name": name,
                "objective": objective,
                "acceptance_criteria": criteria,
                "type": task_type,
            },
            self.domains,
        )
        lines = [f"Task {name}: {objective}"]
        if criteria:
            lines += ["Acceptance criteria:", *(f"- {c}" for c in criteria)]
        record = self.book.add(
            project=project,
            author=author,
            kind="task",
            content="\n".join(lines),
            to=[assignee] if assignee else [],
            tags=list(signals.tags)[:200],
            refs=deps,
            meta={
                "name": name,
                "objective": objective,
                "acceptance_criteria": criteria,
                "type": task_type,
                "complexity": complexity,
                "dependencies": deps,
                "assignee": assignee,
            },
        )
        if deps:
            self.book.store.add_edges(project, [(record.id, d, "depends_on") for d in deps])
        return record

    def get(
        self, project: str, task_id: str, viewer: str | Collection[str] | None = None
    ) -> Record:
        """The task `task_id` of `project` (a task of another project reads as missing). With a
        `viewer` (one name, or any of several), a record none of them may see reads as missing
        too, before its kind is told: "is a message record" would say a hidden record exists."""
        if not isinstance(task_id, str) or not task_id:
            raise ValidationError("task_id", task_id, "give a task id")
        check_text("task_id", task_id)
        found = self.book.store.get_many(project, [task_id])
        viewers = (viewer,) if isinstance(viewer, str) else viewer
        if not found or (viewers is not None and not any(map(found[0].visible_to, viewers))):
            raise missing_task(task_id)
        if found[0].kind != "task":
            raise ValidationError(
                "task_id",
                task_id,
                "give the id of a task (a record of kind 'task'; create one with tasks.create)",
                problem=f"is a {found[0].kind} record, not a task",
            )
        return found[0]

    def find(self, project: str, status: str | None = None, limit: int = 200) -> list[Record]:
        check_identifier("project", project)
        statuses = None if status is None else (check_choice("status", status, STATUSES),)
        return self.book.store.query(
            Query(
                project, None, kinds=("task",), statuses=statuses, limit=limit, newest_first=False
            )
        )

    def handoff(
        self, project: str, task_id: str, agent: str | Collection[str] | None = None
    ) -> Handoff | None:
        """The task's newest handoff that `agent` (one name, or any of several) may see; None
        reads as every agent (the library's caller is trusted)."""
        viewers = None if agent is None else (agent,) if isinstance(agent, str) else agent
        task = self.get(project, task_id, viewers)  # hidden: as an unknown id, before its kind
        found = latest_handoffs(self.book.store, project, [task.id], viewers).get(task.id)
        return handoff_of(found) if found else None

    def signals(self, project: str, task_id: str) -> TaskSignals:
        return self._signals(self.get(project, task_id))

    def _signals(self, task: Record) -> TaskSignals:
        # A task record never changes, so its signals are computed once per board.
        found = self._signal_cache.get(task.id)
        if found is None:
            found = signals_of_task(task.meta, self.domains)
            if len(self._signal_cache) >= 4096:
                self._signal_cache.clear()
            self._signal_cache[task.id] = found
        return found

    # -- completion -----------------------------------------------------------------------------

    def complete(
        self, project: str, task_id: str, handoff: Any, *, by: str | None = None
    ) -> Completion:
        """Validate the handoff, then store it with its graph nodes and context-map entries and
        mark the task completed. Any error leaves the store as it was and the task open. A task
        that `by` may not see is missing for it: an agent never completes what it cannot read."""
        task = self.get(project, task_id, by)
        if task.status == "completed":
            raise ValidationError(
                "task_id",
                task_id,
                "it is already completed; create a follow-up task instead",
                problem="is already completed",
            )
        author = by or str(task.meta.get("assignee") or "") or task.author
        if not task.visible_to(author):
            # Checked before any write: set_status acts as `author` and would refuse only after
            # the handoff, nodes and entries were stored (each retry adding more).
            raise ValidationError(
                "by",
                by,
                "name the agent completing it (by=...): one that may see the task",
                problem=f"is unset, and the assignee {author!r} may not see the task",
            )
        parsed = parse_handoff(handoff)
        store = self.book.store
        for i, d in enumerate(parsed.decisions):
            if d.supersedes is not None:
                old = store.get_many(project, [d.supersedes])
                if not old or old[0].kind != "decision" or not old[0].visible_to(author):
                    raise ValidationError(
                        f"handoff.decisions[{i}].supersedes",
                        d.supersedes,
                        f"name a decision of project {project!r} that {author!r} may see",
                        problem=f"names no decision of project {project!r} that {author!r} may see",
                    )
        now = self.book.clock()
        count = self.book.counter.count

        # What a completion writes is derived from the task, so it is never wider than the task:
        # a private or direct task's handoff, nodes and file entries reach only who sees the task
        # (a private task's `to` sees nothing of it).
        seen_by = scopes.of_record(task)
        scope = {} if seen_by.is_project else seen_by.fields(author)

        def build(**fields: Any) -> Record:
            return build_record(
                {"project": project, "author": author, **scope, **fields}, count, now=now
            )

        name = str(task.meta.get("name") or task.id)
        patterns = [
            build(
                kind="pattern",
                content=p.pattern,
                tags=list(p.applies_to) or tags_for_text(p.pattern, self.domains),
                refs=[task.id],
                meta={"location": p.location, "task": task.id, "score": 0.0},
            )
            for p in parsed.patterns_discovered
        ]
        gotchas = [
            build(
                kind="gotcha",
                content=g.issue,
                tags=list(g.applies_to) or tags_for_text(g.issue, self.domains),
                refs=[task.id],
                meta={"severity": g.severity, "location": g.location, "task": task.id},
            )
            for g in parsed.gotchas
        ]
        decisions = [
            build(
                kind="decision",
                content=d.decision,
                tags=list(d.applies_to) or tags_for_text(d.decision, self.domains),
                refs=[task.id],
                supersedes=d.supersedes,
                meta={"rationale": d.rationale, "task": task.id},
            )
            for d in parsed.decisions
        ]
        questions = [
            build(
                kind="question",
                content=q.question,
                tags=["blocking"] if q.blocking else [],
                refs=[task.id],
                meta={
                    "blocking": q.blocking,
                    "context": q.context,
                    "recommendation": q.recommendation,
                    "task": task.id,
                },
            )
            for q in parsed.open_questions
        ]
        files = self._file_entries(project, task.id, parsed, build, author, seen_by)
        nodes = [*patterns, *gotchas, *decisions, *questions]
        summary_lines = [f"Handoff from {name}: {parsed.summary}"]
        for f in (*parsed.files_created, *parsed.files_modified):
            summary_lines.append(f"- {f.location}" + (f": {f.purpose}" if f.purpose else ""))
        handoff_record = build(
            kind="handoff",
            content="\n".join(summary_lines),
            reply_to=task.id,
            refs=[task.id],
            tags=list(task.tags)[:50],
            meta={
                "task": task.id,
                "handoff": parsed.to_dict(),
                "nodes": {
                    "patterns": [r.id for r in patterns],
                    "gotchas": [r.id for r in gotchas],
                    "decisions": [r.id for r in decisions],
                    "questions": [r.id for r in questions],
                    "files": [r.id for r in files],
                },
            },
        )
        self.book.counts.declare([project], now)  # whose counts they carry
        stored = store.add_many([handoff_record, *nodes, *files])
        edges = [(r.id, task.id, "discovered_in") for r in nodes]
        edges += [(r.id, task.id, "changed_in") for r in files]
        edges.append((handoff_record.id, task.id, "handoff_of"))
        store.add_edges(project, edges)
        done = self.book.set_status(
            project, task.id, "completed", by=author, note=f"handoff {handoff_record.id}"
        )
        return Completion(
            done, stored[0], tuple(stored[1 : 1 + len(nodes)]), tuple(stored[1 + len(nodes) :])
        )

    def _file_entries(
        self,
        project: str,
        task_id: str,
        handoff: Handoff,
        build: Any,
        author: str,
        readers: scopes.Scope,
    ) -> list[Record]:
        """UPDATE_OR_ADD: one entry per path; a changed path supersedes its current entry of the
        same audience. A wider or narrower entry stays: those who see only one of the two would
        lose the entry they had for nothing in its place (or see two current entries)."""
        latest: dict[str, FileChange] = {}
        for f in (*handoff.files_created, *handoff.files_modified):
            latest[f.path] = f
        out = []
        for path, f in latest.items():
            tag = f"path:{path.lower()}"
            found = self.book.store.query(
                Query(project, author, kinds=("file",), tag=tag, statuses=("active",), limit=50)
            )
            current = [r for r in found if scopes.of_record(r) == readers]
            component = f.component or infer_component(path)
            out.append(
                build(
                    kind="file",
                    status="active",
                    content=f"{f.location} ({component})" + (f": {f.purpose}" if f.purpose else ""),
                    tags=[path.lower(), tag, component.lower()],
                    supersedes=current[0].id if current else None,
                    refs=[task_id],
                    meta={
                        "component": component,
                        "location": f.location,
                        "notes": f.purpose,
                        "path": path,
                        "lines": f.lines,
                        "task": task_id,
                    },
                )
            )
        return out

    # -- computed context -----------------------------------------------------------------------

    def limits_for(
        self, complexity: str, overrides: Mapping[str, int] | None = None
    ) -> ContextLimits:
        limits = self.limits[check_complexity(complexity)]
        return limits.override(overrides) if overrides else limits

    def computed_context(
        self,
        project: str,
        task_id: str,
        complexity: str | None = None,
        debug: bool = False,
        *,
        agent: str | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> ComputedContext:
        """The spec's computeContext + applyContextLimits for one task, as `agent` may see it."""
        if agent is not None:
            check_name("agent", agent)
        task = self.get(project, task_id, agent)
        level = complexity or str(task.meta.get("complexity") or "normal")
        lim = self.limits_for(level, limits)
        deps = [str(d) for d in task.meta.get("dependencies") or []]
        snapshot = self.graph.get(task.project)
        report = extract_dependency_context(snapshot, deps, agent)
        return compute_context(
            task_id=task.id,
            signals=self._signals(task),
            snapshot=snapshot,
            dependencies=report,
            limits=lim,
            complexity=level,
            agent=agent,
            exclude_tasks=deps,
            debug=debug,
        )

    def render(
        self, project: str, task_id: str, complexity: str | None = None, debug: bool = False
    ) -> str:
        return self.computed_context(project, task_id, complexity, debug).render(self.template)

    def task_text(self, project: str, task_id: str, task: str, agent: str | None = None) -> str:
        """For assemble: check the task belongs to `project` and that `agent` may see it (its
        objective becomes the window's task); empty task text -> its objective."""
        try:
            record = self.get(project, task_id, agent)
        except NotFound:  # missing, another project's or hidden from the agent: the same answer
            raise ValidationError(
                "task_id", task_id, f"name a task of project {project!r}"
            ) from None
        if isinstance(task, str) and not task.strip():
            return str(record.meta.get("objective") or record.content)
        return task
