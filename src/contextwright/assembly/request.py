"""One assemble request, validated once: the object every interface builds (the library, the
HTTP API, MCP, the CLI), the trace stores (`trace.request` is its `to_dict()`), and replay runs
again (`AssembleRequest.from_dict`).

`build` checks what needs nothing but the request itself; the engine then resolves what needs
the store (the agent's default budget, a task's objective, the active source names) with
`dataclasses.replace`, so the request in the trace is the one that ran.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ..budget import Budget
from ..errors import ValidationError
from ..records import check_display_name, check_identifier, check_name, check_text
from .render import check_format

MAX_TASK_CHARS = 20_000

RulesArg = Any
"""A call's own rules: a RuleSet, a rules directory or file, or a list of rule documents."""


@dataclass(frozen=True)
class AssembleRequest:
    project: str
    agent: str
    task: str = ""
    budget: Budget | None = None  # None: the agent's role default (resolved by the engine)
    format: str = "openai"
    session: str | None = None
    milestone: str | None = None
    working_memory: tuple[str, ...] = ()
    sources: tuple[str, ...] | None = None
    limits: Mapping[str, int] = field(default_factory=dict)
    include_superseded: bool = False
    task_kind: str | None = None
    rules: RulesArg = None
    task_id: str | None = None
    # The call's own retrieval pipelines (definitions.py), over the defaults; the engine resolves
    # them to a Pipelines, which the trace keeps whole, so that replay runs the same ones.
    pipelines: Any = None

    @classmethod
    def build(
        cls,
        project: str,
        agent: str,
        task: str = "",
        budget: Budget | Mapping[str, Any] | int | None = None,
        format: str = "openai",
        *,
        session: str | None = None,
        milestone: str | None = None,
        working_memory: Sequence[str] = (),
        sources: Sequence[str] | None = None,
        limits: Mapping[str, int] | None = None,
        include_superseded: bool = False,
        task_kind: str | None = None,
        rules: RulesArg = None,
        task_id: str | None = None,
        pipelines: Any = None,
    ) -> AssembleRequest:
        """A request from `assemble()`'s arguments, each checked by name (ValidationError)."""
        check_identifier("project", project)
        check_display_name("agent", agent)
        check_task(task)
        fmt = check_format(format)
        bud = Budget.coerce(budget) if budget is not None else None
        if session is not None:
            check_identifier("session", session)
        if milestone is not None:
            check_identifier("milestone", milestone)
        if task_id is not None:
            check_name("task_id", task_id)
        if limits is not None and (
            not isinstance(limits, Mapping)
            or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10_000
                for v in limits.values()
            )
        ):
            raise ValidationError("limits", limits, "give {source name: count from 0 to 10000}")
        if isinstance(working_memory, str) or not all(isinstance(w, str) for w in working_memory):
            raise ValidationError("working_memory", working_memory, "give a list of strings")
        for i, note in enumerate(working_memory):
            check_text(f"working_memory[{i}]", note)
        if sources is not None and (isinstance(sources, str) or not isinstance(sources, Sequence)):
            raise ValidationError("sources", sources, "give a list of source names")
        if not isinstance(include_superseded, bool):
            raise ValidationError("include_superseded", include_superseded, "use true or false")
        return cls(
            project=project,
            agent=agent,
            task=task,
            budget=bud,
            format=fmt,
            session=session,
            milestone=milestone,
            working_memory=tuple(working_memory),
            sources=None if sources is None else tuple(sources),
            limits=dict(limits or {}),
            include_superseded=include_superseded,
            task_kind=task_kind,
            rules=rules,
            task_id=task_id,
            pipelines=pipelines,
        )

    def to_dict(self) -> dict[str, Any]:
        """The trace's `request`: JSON, budget resolved; rules only when given as data."""
        out: dict[str, Any] = {
            "project": self.project,
            "agent": self.agent,
            "task": self.task,
            "format": self.format,
            "session": self.session,
            "milestone": self.milestone,
            "budget": None if self.budget is None else self.budget.to_dict(),
            "working_memory": list(self.working_memory),
            "sources": None if self.sources is None else list(self.sources),
            "limits": dict(self.limits),
            "include_superseded": self.include_superseded,
            "task_kind": self.task_kind,
            "rules": self.rules if isinstance(self.rules, str | list) else None,
        }
        if self.task_id is not None:
            out["task_id"] = self.task_id
        if self.pipelines is not None:
            to_dict = getattr(self.pipelines, "to_dict", None)
            out["pipelines"] = to_dict()["pipelines"] if to_dict else self.pipelines
        return out

    def kwargs(self) -> dict[str, Any]:
        """As keyword arguments of `Engine.assemble` (what replay and the adapters pass on)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


def check_task(task: object) -> str:
    if not isinstance(task, str):
        raise ValidationError("task", task, "give the task as text")
    check_text("task", task)
    if len(task) > MAX_TASK_CHARS:
        raise ValidationError(
            "task", f"<{len(task)} characters>", f"keep the task under {MAX_TASK_CHARS} characters"
        )
    return task


def check_limits(
    limits: Mapping[str, int], sources: Sequence[Any], named: Collection[str] = ()
) -> None:
    """Each `limits` key names a source, a pipeline defined (`named`: enabled or not, and the
    sources of its steps, the vector search's while the embedder loads), or a key a source reads
    (`limit_keys`): a misspelt name would otherwise be ignored and the call run on the source's
    default size. Runs per call, so only set lookups; the names are listed only for the error."""
    if not limits:
        return
    known = {s.name for s in sources}
    for name in limits:
        if name in known or name in named:
            continue
        if not any(name in getattr(s, "limit_keys", ()) for s in sources):
            names = sorted(known | set(named))
            raise ValidationError(
                f"limits.{name}",
                limits[name],
                f"name a source or a pipeline: {', '.join(names)}",
                problem="names no source",
            )


def defined_names(pipelines: Iterable[Any]) -> frozenset[str]:
    """The names `limits` may use for these pipeline definitions (`check_limits`): each
    pipeline's, enabled or not, and its retrieval steps' sources'."""
    return frozenset(
        n for p in pipelines for n in (p.name, *(s.step for s in p.steps if s.retrieves))
    )
