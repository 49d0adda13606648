"""The engine: the one object users hold. Records in, context windows out, with a trace.

    engine = Engine.open("sqlite:///team.db")
    engine.add(project="p", author="alice", kind="message", content="@bob can you check auth?")
    result = engine.assemble(project="p", agent="bob", task="fix the login bug", budget=Budget(...))

The CLI, the HTTP API and the MCP server call these methods and nothing else.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from . import actions
from .assembly import Assembly
from .budget import Budget
from .cache import SourceCache
from .candidates import synthetic
from .errors import BudgetError, NotFound, ValidationError, _short
from .ids import new_id
from .packing import Decision, drop_last, pack
from .pipeline import decision_dict, merge, run_sources
from .ports import Embedder, Query, Store, Tokenizer
from .records import (
    MAX_CONTENT_CHARS,
    STATUSES,
    Record,
    build_record,
    check_display_name,
    check_json_text,
    check_name,
    check_text,
)
from .references import check_links, validate_refs
from .render import check_format, render
from .roles import Agent, RoleProfile, profile_for
from .rules import Facts, RuleSet, coerce_rules, given_task_kind
from .scoring import ScoringConfig, topic
from .selection import select
from .sources import Source, SourceContext, default_sources, pick_sources
from .stored_counts import StoredCounts
from .stores import open_store
from .stores._rows import query_terms
from .tasks import TaskBoard
from .tokens import default_counter
from .trace import PendingTrace, Trace
from .trace_writer import TraceWriter
from .vectors import Vectors

if TYPE_CHECKING:
    from .sessions import SessionManager

MAX_TASK_CHARS = 20_000
# Per-source caps as a fraction of the available budget; one verbose source cannot crowd out the rest.
DEFAULT_SOURCE_CAPS = {"fulltext": 0.35, "addressed": 0.25, "open_items": 0.2, "decisions": 0.2}

Viewers: TypeAlias = str | Collection[str] | None
"""Whose traces a call may read: one agent, any of several agents, or None for every agent."""


class Engine:
    def __init__(
        self,
        store: Store,
        *,
        counter: Tokenizer | None = None,
        sources: Sequence[Source] | None = None,
        scoring: ScoringConfig | None = None,
        source_caps: Mapping[str, float] | None = None,
        deadline_ms: float = 500.0,
        workers: int = 4,
        clock: Callable[[], float] = time.time,
        persist_traces: bool = True,
        locality: bool = True,
        rules: RuleSet | str | Path | Sequence[Any] | None = None,
        cache_ttl_s: float = 30.0,
        embedder: Embedder | str | None = None,
    ) -> None:
        self.store = store
        self.counter: Tokenizer = counter or default_counter()
        self.sources: list[Source] = list(sources) if sources is not None else default_sources()
        self.scoring = scoring or ScoringConfig()
        self.source_caps = dict(DEFAULT_SOURCE_CAPS if source_caps is None else source_caps)
        self.deadline_s = deadline_ms / 1000.0
        self.clock = clock
        self.persist_traces = persist_traces
        self._traces = TraceWriter(store)  # traces are written off the hot path (trace_writer.py)
        self.counts = StoredCounts(store, self.counter)  # whose counts records carry
        self.locality = locality  # lift records said near strong matches (locality.py)
        # Each project's authors, with the store version they were read at (see _people).
        self._people_cache: dict[str, tuple[int, frozenset[str]]] = {}
        self._pool = (
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cw-source")
            if workers > 1
            else None
        )
        self._known_agents: set[tuple[str, str]] = set()
        self._agent_docs: dict[tuple[str, str], tuple[dict[str, Any], Agent]] = {}
        # Context rules (rules.py) and the per-process source cache (cache.py).
        self._rules_arg = rules
        self.rules: RuleSet = coerce_rules(rules)
        self.cache = SourceCache(ttl_s=cache_ttl_s)
        # Vectors on with an embedder (or its name: "minilm"); see vectors.py.
        self.vectors = Vectors(self, embedder)
        # Tasks and computed context (tasks/); the `computed` source runs when assemble names a task.
        self.tasks = TaskBoard(self)
        if sources is None:
            self.sources.append(self.tasks.source)

    @classmethod
    def open(
        cls,
        url: str = "sqlite:///contextwright.db",
        *,
        embedder: Embedder | str | None = "auto",
        **kwargs: Any,
    ) -> Engine:
        """The engine over the store at `url`, with vectors on wherever the `vectors` extra is
        installed (`embedder="auto"`, see embedders/__init__.py; the model loads in the
        background); `embedder=None` turns them off."""
        return cls(open_store(url), embedder=embedder, **kwargs)

    def flush(self) -> None:
        """Wait until every trace of an assemble call is in the store (they are written by a
        background thread; `trace()` and `traces()` already see them), and for the reads a
        store started in the background (SQLite's word counts, stores/sqlite_vocab.py)."""
        self._traces.flush()
        settle = getattr(self.store, "settle", None)
        if settle is not None:
            settle()

    def close(self) -> None:
        self._traces.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self.vectors.close()
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- records --------------------------------------------------------------------------------

    def add(self, **fields: Any) -> Record:
        """Validate and store one record; returns it as stored. The same (project, id) with the
        same write returns the original; with another write it is refused (ValidationError), as
        is a `supersedes`, `reply_to` or `rec:` ref that names no record of the project."""
        now = self.clock()  # the write's time, for the record (unless given) and the note
        record = build_record(fields, self.counter.count, now=now)
        check_links(self.store, [record], batch=False)
        self.counts.declare([record.project], now)
        stored = self.store.add_many([record])[0]
        self.vectors.notify()
        return stored

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[Record]:
        """Validate every item first, then store them all in one transaction, or none."""
        return [stored for stored, _ in self.add_batch(items)]

    def add_batch(self, items: Iterable[Mapping[str, Any]]) -> list[tuple[Record, bool]]:
        """`add_many`, telling for each item whether this call stored it (True) or an existing
        record with its id was returned as stored (False): what an import reports."""
        if isinstance(items, Mapping | str | bytes) or not isinstance(items, Iterable):
            raise ValidationError("records", items, "give a list of record objects")
        now = self.clock()
        items = list(items)
        count = self._batch_counter(items)
        built = []
        for i, item in enumerate(items):
            try:
                built.append(build_record(item, count, now=now))
            except ValidationError as exc:
                # The message reads "{field}={value} {problem}: {fix}"; keep the problem whole.
                start = len(f"{exc.field}={_short(exc.value)} ")
                problem = exc.message[start : len(exc.message) - len(exc.fix) - 2] or None
                raise ValidationError(
                    f"records[{i}].{exc.field}", exc.value, exc.fix, problem=problem
                ) from exc
        check_links(self.store, built, batch=True)
        self.counts.declare([r.project for r in built], now)
        stored = self.store.add_many(built)
        self.vectors.notify()
        # A store returns a record it stored as given, the same object (ports.Store.add_many).
        return [(s, s is b) for s, b in zip(stored, built, strict=True)]

    def _batch_counter(self, items: Sequence[Any]) -> Callable[[str], int]:
        """Token counts for a batch's contents in one call (tiktoken encodes a batch on several
        threads); anything not in the batch falls back to counting one by one."""
        texts = [
            c
            for it in items
            if isinstance(it, Mapping) and isinstance(c := it.get("content"), str) and c.strip()
        ]
        if len(texts) < 8:
            return self.counter.count
        known = dict(zip(texts, self.counter.count_many(texts), strict=True))

        def count(text: str) -> int:
            n = known.get(text)
            return self.counter.count(text) if n is None else n

        return count

    def wait_for_embeddings(self, timeout: float | None = None) -> bool:
        """Block until the embedder has loaded and every stored record is searchable by vector
        (True at once without vectors; False on timeout or if the embedder failed to load)."""
        return self.vectors.wait(timeout)

    def get(self, project: str, record_id: str) -> Record:
        check_name("project", project)
        check_name("id", record_id)
        found = self.store.get_many(project, [record_id])
        if not found:
            raise NotFound("record", record_id)
        return found[0]

    def records(
        self, project: str, *, agent: str | None = None, limit: int = 50, **filters: Any
    ) -> list[Record]:
        check_name("project", project)
        if not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ValidationError("limit", limit, "give a whole number from 1 to 10000")
        allowed = {
            "kinds",
            "session",
            "author",
            "statuses",
            "addressed_to",
            "pinned",
            "tag",
            "milestone",
            "since",
            "before",
            "newest_first",
        }
        unknown = sorted(set(filters) - allowed)
        if unknown:
            raise ValidationError(
                unknown[0], filters[unknown[0]], f"filter by {', '.join(sorted(allowed))}"
            )
        for key in ("kinds", "statuses"):
            if isinstance(filters.get(key), list | str):
                value = filters[key]
                filters[key] = (value,) if isinstance(value, str) else tuple(value)
        _check_texts(("agent", agent), *filters.items())
        return self.store.query(Query(project=project, agent=agent, limit=limit, **filters))

    def set_status(
        self, project: str, record_id: str, status: str, *, by: str, note: str = ""
    ) -> Record:
        """Record a status change as a new fact (the record itself is never edited)."""
        if status not in STATUSES:
            raise ValidationError("status", status, f"use one of {', '.join(STATUSES)}")
        check_display_name("by", by)
        _check_texts(("note", note))
        record = self.get(project, record_id)
        self.store.set_status(project, record.id, status, by, self.clock(), note)
        return self.get(project, record_id)

    def resolve(self, project: str, record_id: str, *, by: str, note: str = "") -> Record:
        return self.set_status(project, record_id, "resolved", by=by, note=note)

    # -- agents and key-values ------------------------------------------------------------------

    def register_agent(
        self,
        project: str,
        agent: str,
        role: str = "default",
        profile: RoleProfile | Mapping[str, Any] | None = None,
    ) -> Agent:
        check_name("project", project)
        check_display_name("agent", agent)
        check_name("role", role)
        if profile is None:
            prof = profile_for(role)
        elif isinstance(profile, RoleProfile):
            prof = profile
        else:
            check_json_text("profile", profile)
            prof = RoleProfile.from_dict(profile)
        a = Agent(id=agent, role=role, profile=prof)
        check_json_text("profile", a.to_dict()["profile"])
        self.store.put_doc(
            "agents", f"{project}/{agent}", project, a.to_dict(), self.clock(), key=agent
        )
        self._known_agents.add((project, agent))
        return a

    def agent(self, project: str, agent: str) -> Agent:
        check_name("project", project)
        check_name("agent", agent)
        doc = self.store.get_doc("agents", project, f"{project}/{agent}")
        if doc is not None:
            # Read on every call (another process may change it), parsed only when it changed.
            seen = self._agent_docs.get((project, agent))
            if seen is None or seen[0] != doc:
                if len(self._agent_docs) >= 4096:
                    self._agent_docs.clear()
                seen = self._agent_docs[(project, agent)] = (doc, Agent.from_dict(doc))
            return seen[1]
        if self._is_known(project, agent):
            return Agent(id=agent)
        raise NotFound(
            "agent",
            agent,
            f"register it with register_agent() or add a record by it in {project!r}",
        )

    def agents(self, project: str) -> list[Agent]:
        check_name("project", project)
        registered = {
            d["id"]: Agent.from_dict(d)
            for d in self.store.list_docs("agents", project, limit=10_000)
        }
        for name in self.store.agents(project):
            registered.setdefault(name, Agent(id=name))
        return [registered[k] for k in sorted(registered)]

    def _is_known(self, project: str, agent: str) -> bool:
        if (project, agent) in self._known_agents:
            return True
        known = bool(
            self.store.get_doc("agents", project, f"{project}/{agent}")
            or self.store.query(Query(project, None, author=agent, limit=1))
            or self.store.query(Query(project, None, addressed_to=agent, limit=1))
        )
        if known:
            self._known_agents.add((project, agent))
        return known

    def kv_set(self, project: str, key: str, value: str) -> None:
        check_name("project", project)
        check_name("key", key)
        if not isinstance(value, str):
            raise ValidationError("value", value, "give the value as a string")
        if len(value) > MAX_CONTENT_CHARS:
            raise ValidationError(
                "value", f"<{len(value)} characters>",
                f"keep a value under {MAX_CONTENT_CHARS} characters", problem="is too large",
            )  # fmt: skip
        check_text("value", value)
        self.store.kv_set(project, key, value, self.clock())

    def kv_get(self, project: str, key: str) -> str:
        check_name("project", project)
        check_name("key", key)
        value = self.store.kv_get(project, key)
        if value is None:
            raise NotFound("key", key, f"set it with kv_set({project!r}, {key!r}, ...)")
        return value

    # -- traces ---------------------------------------------------------------------------------

    def trace(self, project: str, trace_id: str, agent: Viewers = None) -> Trace:
        """One trace of `project`, read as `agent` (one name, or any of several names; None reads
        as every agent). A trace is a view of what its agent saw: one of another project, or of an
        agent not given, is NotFound with the same message as an id that exists nowhere."""
        check_name("project", project)
        check_name("trace_id", trace_id)
        viewers = _viewers(agent)
        pending = self._traces.get(trace_id)
        if pending is not None and pending.project == project:
            # As the store would give it back: a JSON round trip, a copy of its own.
            found = Trace.from_dict(json.loads(json.dumps(pending.to_dict(), default=str)))
        else:
            doc = self.store.get_doc("traces", project, trace_id)
            if doc is None:
                raise NotFound("trace", trace_id)
            found = Trace.from_dict(doc)
        if found.project != project or (viewers is not None and found.agent not in viewers):
            raise NotFound("trace", trace_id)
        return found

    def traces(self, project: str, agent: Viewers = None, limit: int = 20) -> list[Trace]:
        """The newest traces of `project`, of `agent` (one name, or any of several; None: all)."""
        check_name("project", project)
        viewers = _viewers(agent)
        self._traces.flush()
        if viewers is None:
            docs = self.store.list_docs("traces", project, limit=limit)
        else:
            docs = [
                d
                for name in sorted(viewers)
                for d in self.store.list_docs("traces", project, key=name, limit=limit)
            ]
            docs.sort(key=lambda d: d.get("created_at") or 0.0, reverse=True)
        return [Trace.from_dict(d) for d in docs[:limit]]

    def diff(self, project: str, a: str, b: str, agent: Viewers = None) -> dict[str, Any]:
        """Compare two traces of `project`, both read as `agent` (see trace())."""
        from .replay import diff_traces

        return diff_traces(self.trace(project, a, agent), self.trace(project, b, agent))

    def complete_task(
        self, project: str, task_id: str, handoff: Any, *, by: str | None = None
    ) -> Record:
        """Complete a task with its structured handoff (YAML, JSON or a mapping); see tasks/."""
        return self.tasks.complete(project, task_id, handoff, by=by).task

    def replay(
        self, project: str, trace_id: str, agent: Viewers = None, **overrides: Any
    ) -> Assembly:
        """Run a stored assembly of `project` again with another budget, sources or rules, the
        trace read as `agent` (see trace() and replay.py)."""
        from .replay import replay

        return replay(self, project, trace_id, agent, **overrides)

    @property
    def sessions(self) -> SessionManager:
        """Each agent's running session: compaction, pruning, memory flush, reset, overflow
        recovery (sessions/). Created on first use; it adds the `session` source."""
        manager = self.__dict__.get("_sessions")
        if manager is None:
            from .sessions import SessionManager

            manager = self.__dict__["_sessions"] = SessionManager(self)
        return manager

    # -- assemble -------------------------------------------------------------------------------

    def _people(self, project: str, version: int) -> frozenset[str]:
        """The project's authors at `version`, for `scoring.topic`; re-read only after a write."""
        hit = self._people_cache.get(project)
        if hit is None or hit[0] != version:
            hit = self._people_cache[project] = (version, frozenset(self.store.agents(project)))
        return hit[1]

    def assemble(
        self,
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
        rules: RuleSet | str | Path | Sequence[Any] | None = None,
        task_id: str | None = None,
    ) -> Assembly:
        """Compute `agent`'s context window from scratch, packed into `budget`, with its trace.

        `include_superseded` shows superseded records beside their replacements; `task_kind`
        (review, bug, ...) is what rules match as `kind`, guessed from the task when absent;
        `rules` replaces the engine's rules for this call; `task_id` adds that task's computed
        context (tasks/) and makes its objective the task text when `task` is empty."""
        t0 = time.perf_counter()
        check_name("project", project)
        check_display_name("agent", agent)
        if task_id is not None:
            task = self.tasks.task_text(project, task_id, task)
        if not isinstance(task, str):
            raise ValidationError("task", task, "give the task as text")
        check_text("task", task)
        if len(task) > MAX_TASK_CHARS:
            raise ValidationError(
                "task",
                f"<{len(task)} characters>",
                f"keep the task under {MAX_TASK_CHARS} characters",
            )
        fmt = check_format(format)
        agent_obj = self.agent(project, agent)
        bud = (
            Budget.coerce(budget)
            if budget is not None
            else Budget(
                model=agent_obj.profile.default_model, window=agent_obj.profile.default_window
            )
        )
        if session is not None:
            check_name("session", session)
        if milestone is not None:
            check_name("milestone", milestone)
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
        active = pick_sources(self.sources, sources)
        now = self.clock()
        version = self.store.version(project)  # read once: the source cache and topic use it
        ctx = SourceContext(
            store=self.store,
            counter=self.counter,
            project=project,
            agent=agent,
            role=agent_obj.profile,
            task=task,
            session=session,
            now=now,
            milestone=milestone,
            terms=query_terms(task),
            topic=topic(task, self._people(project, version)),
            limits=dict(limits or {}),
            version=version,
        )
        ctx.options["locality"] = self.locality
        if task_id is not None:
            ctx.options["task_id"] = task_id
        warnings = self._validate_refs(project, agent, task)
        warnings.extend(self.vectors.warnings())
        t_validate = time.perf_counter()

        if not isinstance(include_superseded, bool):
            raise ValidationError("include_superseded", include_superseded, "use true or false")
        ruleset = self.rules if rules is None else coerce_rules(rules)
        kind = given_task_kind(task, task_kind)
        rule = ruleset.first_match(
            Facts(task, agent, agent_obj.role, project, kind, milestone or "", session or "")
        )
        ruled, rule_warnings = actions.includes(rule, ctx, ruleset.root)
        warnings.extend(rule_warnings)

        found, runs = run_sources(active, ctx, self._pool, self.deadline_s, cache=self.cache)
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
            include_superseded=bool(include_superseded),
            config=self.scoring,
            role=agent_obj.profile,
        )
        excluded: list[Decision] = [*duplicates, *left_out]
        kept.extend(synthetic(self.counter, task, warnings, working_memory))
        t_merge = time.perf_counter()

        available = bud.available
        caps = {name: int(frac * available) for name, frac in self.source_caps.items()}
        caps.update(actions.caps(rule))
        packed = pack(
            kept,
            available=available,
            agent=agent,
            fmt=fmt,
            counter=self.counter,
            source_caps=caps,
            section_caps=bud.section_caps,
        )
        t_pack = time.perf_counter()
        stored_counts = self.counts.trusted(project, version)  # stored_counts.py
        rendered = render(packed.sections, agent, fmt, self.counter, stored_counts)
        while rendered.tokens > available and drop_last(
            packed, "exact count of the rendered window over budget"
        ):
            rendered = render(packed.sections, agent, fmt, self.counter, stored_counts)
        if rendered.tokens > available:  # only the task is left, and it alone does not fit
            raise BudgetError(
                f"the budget leaves {available} tokens, too few for even the state section "
                f"(it needs {rendered.tokens}); raise budget.window or lower budget.reserve",
                available=available,
                needed=rendered.tokens,
            )
        t_render = time.perf_counter()

        sections = {n: items for n, items in packed.sections.items()}
        section_tokens = {n: sum(i.tokens for i in items) for n, items in sections.items() if items}
        decisions = [*packed.decisions, *excluded]
        trace = PendingTrace(
            lambda: [decision_dict(d) for d in decisions],  # built off the call (trace.py)
            id=new_id(),
            project=project,
            agent=agent,
            created_at=now,
            request={
                "project": project,
                "agent": agent,
                "task": task,
                "format": fmt,
                "session": session,
                "milestone": milestone,
                "budget": bud.to_dict(),
                "working_memory": list(working_memory),
                "sources": [s.name for s in active],
                "limits": dict(limits or {}),
                "include_superseded": bool(include_superseded),
                "task_kind": task_kind,
                "rules": rules if isinstance(rules, str | list) else None,
            },
            budget=bud.to_dict(),
            sources=[r.to_dict() for r in runs],
            sections=section_tokens,
            tokens=rendered.tokens,
            warnings=warnings,
            timings_ms={
                "validate": _ms(t0, t_validate),
                "sources": _ms(t_validate, t_sources),
                "merge": _ms(t_sources, t_merge),
                "pack": _ms(t_merge, t_pack),
                "render": _ms(t_pack, t_render),
            },
        )
        self.vectors.annotate(trace)
        trace.notes["rule"] = None if rule is None else rule.to_dict()
        trace.notes["rules_evaluated"] = len(ruleset)
        trace.notes["task_kind"] = kind
        # What full text and vectors searched for: the task without people's names (scoring.topic).
        trace.notes["search_text"] = ctx.query_text
        if task_id is not None:
            trace.request["task_id"] = task_id
            trace.notes["computed"] = ctx.options.get("notes", {}).get("computed")
        trace.latency_ms = _ms(t0, time.perf_counter())
        if self.persist_traces:
            self._traces.put(trace)
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

    def reload_rules(self) -> RuleSet:
        """Read the rules directory again (after an edit); keeps the old rules if invalid."""
        source = self.rules.directory if self.rules.directory is not None else self._rules_arg
        self.rules = coerce_rules(source)
        return self.rules

    def _validate_refs(self, project: str, agent: str, task: str) -> list[str]:
        """@references in the task that resolve to nothing become warnings, never silence."""
        return [
            str(u)
            for u in validate_refs(
                self.store,
                project,
                agent,
                task,
                is_agent=lambda name: self._is_known(project, name),
                root=self.rules.root,
            )
        ]


def _viewers(agent: Viewers) -> frozenset[str] | None:
    if agent is None:
        return None
    if isinstance(agent, str):
        return frozenset((check_display_name("agent", agent),))
    if not isinstance(agent, Collection):
        raise ValidationError("agent", agent, "give an agent's name, a list of names, or None")
    return frozenset(check_display_name("agent", a) for a in agent)


def _ms(a: float, b: float) -> float:
    return round((b - a) * 1000, 3)


def _check_texts(*pairs: tuple[str, Any]) -> None:
    """Text arguments of a read (filters, names): refused by name rather than by the store."""
    for key, value in pairs:
        if isinstance(value, str):
            check_text(key, value)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                if isinstance(item, str):
                    check_text(f"{key}[{i}]", item)
