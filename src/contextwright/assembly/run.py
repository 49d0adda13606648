"""One assemble call, start to end: the steps of DESIGN.md's "One assemble call" in order, for a
validated `AssembleRequest`. The Engine holds one `Assembler`; the session pipeline and replay
call the same `assemble`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar, cast

from ..budget import Budget
from ..errors import BudgetError, ValidationError
from ..ports import Store, Tokenizer, Written
from ..roles import Agent
from ..rules import actions
from ..rules.loading import coerce_rules
from ..rules.ruleset import Facts, RuleSet, given_task_kind
from ..text import query_terms
from ..traces.build import build_trace
from ..traces.trace import Trace
from ..traces.writer import TraceWriter
from . import ahead
from .cache import SourceCache
from .candidates import synthetic
from .lines import Lines
from .packing import Decision, drop_last, pack
from .pipeline import merge, run_sources
from .references import addressed_refs, validate_refs
from .render import render
from .request import AssembleRequest, check_limits, defined_names
from .result import Assembly
from .scoring import ScoringConfig, topic
from .selection import select
from .sources import Source, SourceContext, pick_sources
from .stored_counts import StoredCounts

# Per-source caps as a fraction of the available budget; one verbose source cannot crowd out the rest.
DEFAULT_SOURCE_CAPS = {"fulltext": 0.35, "addressed": 0.25, "open_items": 0.2, "decisions": 0.2}


class TraceNotes(Protocol):
    """A feature that adds warnings to every call and notes to every trace (vectors.py)."""

    def warnings(self) -> list[str]: ...
    def annotate(self, trace: Trace) -> None: ...


@dataclass
class Assembler:
    """What an assemble call reads: the store, the counter, the sources and their settings."""

    store: Store
    counter: Tokenizer
    sources: list[Source]
    scoring: ScoringConfig
    source_caps: dict[str, float]
    deadline_s: float
    clock: Callable[[], float]
    rules: RuleSet
    cache: SourceCache
    traces: TraceWriter
    counts: StoredCounts
    agent: Callable[[str, str], Agent]
    is_agent: Callable[[str, str], bool]
    pool: Executor | None = None
    persist_traces: bool = True
    locality: bool = True
    notes: list[TraceNotes] = field(default_factory=list)
    task_text: Callable[[str, str, str, str], str] | None = None
    # A call's own pipelines -> (them resolved, their sources): retrieval.install sets it.
    call_pipelines: Callable[[Any], tuple[Any, list[Source]]] | None = None
    # The pipelines defined (enabled or not) and their steps' sources: names `limits` may use.
    limit_names: frozenset[str] = frozenset()
    _people: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)
    _answered: ahead.Answered = field(default_factory=ahead.Answered)  # ahead.py
    # `agent`, and the store version read with it where the store can (None: read it apart).
    # (project, agent, the task's words): the agent and the store version in one read.
    agent_at_version: Callable[[str, str, Sequence[str]], tuple[Agent, int | None]] | None = None
    # The records' lines and counts kept across calls (lines.py), for `counter`.
    _lines: Lines | None = None

    def lines(self) -> Lines:
        """The kept lines, made anew when the counter was replaced (they are its counts)."""
        kept = self._lines
        if kept is None or kept.counter is not self.counter:
            kept = self._lines = Lines(self.counter)
        return kept

    def people(self, project: str, version: int) -> frozenset[str]:
        """The project's authors at `version`, for `scoring.topic`; re-read only after a write."""
        hit = self._people.get(project)
        if hit is None or hit[0] != version:
            hit = self._people[project] = (version, frozenset(self.store.agents(project)))
        return hit[1]

    def written(self, steps: Sequence[Written]) -> None:
        """A write made through this engine (RecordBook): the project's authors and token-count
        note read at a step's `before` version hold at its `after` (with the written records'
        authors added), and so do the sources' reads that none of the step's records may enter
        (reads.py), so the next call reads none of them again. The step's records are the
        whole write's, other callers' batches of a group commit included: this caller's own
        would let a read be kept that another's record enters. At any other version (another
        writer came between) they are read again as after any write."""
        for w in steps:
            hit = self._people.get(w.project)
            if hit is not None and hit[0] == w.before:
                self._people[w.project] = (w.after, hit[1] | w.authors)
            self.counts.carry(w.project, w.before, w.after)
            self.cache.reads.carry(w.project, w.before, w.after, w.records)

    def check_names(self, request: AssembleRequest) -> tuple[AssembleRequest, list[Source]]:
        """The request with its pipelines resolved, and the sources it runs: its `sources` and
        `limits` keys checked against them. A session window checks first, since its steps
        (compaction) write before the assembly would."""
        sources, named = self.sources, self.limit_names
        if request.pipelines is not None and self.call_pipelines is not None:
            resolved, sources = self.call_pipelines(request.pipelines)
            request = replace(request, pipelines=resolved)
            named = named | defined_names(resolved)
        active = pick_sources(sources, request.sources)
        check_limits(request.limits, sources, named)
        return request, active

    def _resolve(
        self, request: AssembleRequest, counts: bool
    ) -> tuple[AssembleRequest, Agent, list[Source], int | None, list[str]]:
        """`resolve`, the project's store version where it was read with the agent, and the
        task's query terms. `counts`: the first read may carry the terms' full-text counts
        (not where the search was started ahead, which reads its own)."""
        if request.task_id is not None and self.task_text is not None:
            request = replace(
                request,
                task=self.task_text(request.project, request.task_id, request.task, request.agent),
            )
        version: int | None = None
        terms = query_terms(request.task)
        if self.agent_at_version is not None:
            # The task's words: the store may count them for full text in the same round trip.
            words = terms if counts else []
            agent, version = self.agent_at_version(request.project, request.agent, words)
        else:
            agent = self.agent(request.project, request.agent)
        if request.budget is None:
            request = replace(request, budget=profile_budget(agent))
        request, active = self.check_names(request)
        return (
            replace(request, sources=tuple(s.name for s in active)),
            agent,
            active,
            version,
            terms,
        )

    def assemble(self, request: AssembleRequest) -> Assembly:
        """Compute the request's window from scratch, packed into its budget, with its trace."""
        t0 = time.perf_counter()
        # Before the first read, so that the search overlaps it and the call's setup (ahead.py).
        early = ahead.start(
            self.store, self.pool, self.sources, self._people, request, self._answered
        )  # fmt: skip
        request, agent_obj, active, read_version, terms = self._resolve(request, early is None)
        bud = request.budget
        assert bud is not None
        project, agent, task, fmt = request.project, request.agent, request.task, request.format
        now = self.clock()
        lines = self.lines()
        # Read once: the source cache and topic use it. With the agent where the store can.
        version = self.store.version(project) if read_version is None else read_version
        if early is not None:
            early.version = version
        ctx = SourceContext(
            store=self.store,
            counter=self.counter,
            project=project,
            agent=agent,
            role=agent_obj.profile,
            task=task,
            session=request.session,
            now=now,
            milestone=request.milestone,
            terms=terms,
            topic=topic(task, self.people(project, version)),
            limits=dict(request.limits),
            version=version,
            budget=bud.available,
            shared=self.cache.reads if self.cache.enabled else None,
            lines=lines,
            ahead=early,
        )
        ctx.options["locality"] = self.locality
        if request.task_id is not None:
            ctx.options["task_id"] = request.task_id
        if request.pipelines is not None:  # the cache keys on options: other definitions, others
            ctx.options["pipelines"] = getattr(request.pipelines, "digest", "")
        ruleset = self.rules if request.rules is None else coerce_rules(request.rules)
        # @references in the task that resolve to nothing become warnings, never silence.
        warnings = [
            str(u)
            for u in validate_refs(
                self.store, project, agent, task,
                is_agent=lambda name: self.is_agent(project, name), root=self.rules.root,
            )
        ]  # fmt: skip
        for hook in self.notes:
            warnings.extend(hook.warnings())
        t_validate = time.perf_counter()

        kind = given_task_kind(task, request.task_kind)
        rule = ruleset.first_match(
            Facts(
                task, agent, agent_obj.role, project, kind, request.milestone or "",
                request.session or "",
            )
        )  # fmt: skip
        ruled, rule_warnings = actions.includes(rule, ctx, ruleset.root)
        warnings.extend(rule_warnings)
        if early is not None:  # the sources' own deadline (run_sources)
            early.deadline = time.perf_counter() + self.deadline_s
        found, runs = run_sources(active, ctx, self.pool, self.deadline_s, cache=self.cache)
        if ahead.searches_ahead(self.store, self.pool):  # what `ahead.start` asks of it
            self._answered.note(request, version, runs)
        found.extend(ruled)
        t_sources = time.perf_counter()
        for run in runs:
            if run.error:
                warnings.append(
                    f"source {run.name} failed: {run.error}; the window was built without it"
                )

        merged, duplicates = merge(found)
        # Rules, chains, then bm25 + vector signals fused into relevance, and scores (selection.py).
        kept, left_out = select(
            merged,
            ctx,
            rule=rule,
            include_superseded=request.include_superseded,
            config=self.scoring,
            role=agent_obj.profile,
        )
        excluded: list[Decision] = [*duplicates, *left_out]
        addressed = [r for c in kept if "addressed" in (c.source, *c.sources) for r in c.records]
        warnings.extend(
            str(u)
            for u in addressed_refs(self.store, project, agent, addressed, root=self.rules.root)
        )
        kept.extend(synthetic(self.counter, task, warnings, request.working_memory))
        t_merge = time.perf_counter()

        available = bud.available
        caps = {name: int(frac * available) for name, frac in self.source_caps.items()}
        caps.update(actions.caps(rule))
        stored_counts = self.counts.trusted(project, version)  # stored_counts.py
        packed = pack(
            kept,
            available=available,
            agent=agent,
            fmt=fmt,
            counter=self.counter,
            source_caps=caps,
            section_caps=bud.section_caps,
            stored_counts=stored_counts,
            lines=lines,
        )
        t_pack = time.perf_counter()
        rendered = render(packed.sections, agent, fmt, self.counter, stored_counts, lines)
        while rendered.tokens > available and drop_last(
            packed, "exact count of the rendered window over budget"
        ):
            rendered = render(packed.sections, agent, fmt, self.counter, stored_counts, lines)
        if rendered.tokens > available:  # only the task is left, and it alone does not fit
            raise BudgetError(
                f"the budget leaves {available} tokens, too few for even the state section "
                f"(it needs {rendered.tokens}); raise budget.window or lower budget.reserve",
                available=available,
                needed=rendered.tokens,
            )
        t_render = time.perf_counter()

        sections = dict(packed.sections)
        trace = build_trace(
            project=project,
            agent=agent,
            created_at=now,
            request=request.to_dict(),
            budget=bud.to_dict(),
            decisions=[*packed.pending, *excluded],
            runs=runs,
            sections={n: sum(i.tokens for i in items) for n, items in sections.items() if items},
            tokens=rendered.tokens,
            warnings=warnings,
            timings_ms={
                "validate": _ms(t0, t_validate),
                "sources": _ms(t_validate, t_sources),
                "merge": _ms(t_sources, t_merge),
                "pack": _ms(t_merge, t_pack),
                "render": _ms(t_pack, t_render),
            },
            settle=packed.settle,
        )
        for hook in self.notes:
            hook.annotate(trace)
        trace.notes["rule"] = None if rule is None else rule.to_dict()
        trace.notes["rules_evaluated"] = len(ruleset)
        trace.notes["task_kind"] = kind
        # What full text and vectors searched for: the task without people's names (scoring.topic).
        trace.notes["search_text"] = ctx.query_text
        if request.task_id is not None:
            trace.notes["computed"] = ctx.options.get("notes", {}).get("computed")
        trace.latency_ms = _ms(t0, time.perf_counter())
        if self.persist_traces:
            self.traces.put(trace)
        return Assembly(
            format=fmt,
            sections=sections,
            messages=rendered.messages,
            system=rendered.system,
            text=rendered.text or rendered.system,
            payload=rendered.payload,
            tokens=rendered.tokens,
            available=available,
            trace=trace,
            warnings=warnings,
        )


def source_caps(given: Mapping[str, float] | None) -> dict[str, float]:
    return dict(DEFAULT_SOURCE_CAPS if given is None else given)


def _ms(a: float, b: float) -> float:
    return round((b - a) * 1000, 3)


T = TypeVar("T")


class Setting(Generic[T]):
    """An attribute of the object's `assembler`, shown as its own (the Engine's `rules`, ...)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, owner: Any, cls: object = None) -> T:
        return cast(T, getattr(owner.assembler, self.name))

    def __set__(self, owner: Any, value: T) -> None:
        setattr(owner.assembler, self.name, value)


def profile_budget(agent: Agent) -> Budget:
    """The budget of a call that gives none: its agent's profile's. A profile stored by a process
    that knew its model (register_model is per process) is named as the field at fault."""
    try:
        return agent.profile.budget()
    except ValidationError as exc:
        fix = (
            f"give the call a budget, register the model in this process, or register agent "
            f"{agent.id!r} again with a model and window it knows ({exc.fix})"
        )
        raise ValidationError(exc.field, exc.value, fix) from exc
