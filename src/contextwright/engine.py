"""The engine: the one object users hold. Records in, context windows out, with a trace.

    engine = Engine.open("sqlite:///team.db")
    engine.add(project="p", author="alice", kind="message", content="@bob can you check auth?")
    result = engine.assemble(project="p", agent="bob", task="fix the login bug", budget=Budget(...))

The CLI, the HTTP API and the MCP server call these methods and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .assembly import Assembly
from .budget import Budget
from .candidates import Candidate
from .errors import NotFound, ValidationError
from .ids import new_id
from .packing import Decision, drop_last, pack
from .pipeline import decision_dict, merge, run_sources
from .ports import Query, Store, Tokenizer
from .records import MAX_NAME_CHARS, STATUSES, Record, build_record, parse_mentions
from .render import check_format, render
from .roles import Agent, RoleProfile, profile_for
from .scoring import ScoringConfig, finish
from .sources import Source, SourceContext, default_sources
from .stores import open_store
from .stores._rows import query_terms
from .tokens import default_counter
from .trace import Trace

MAX_TASK_CHARS = 20_000
# Per-source caps as a fraction of the available budget; one verbose source cannot crowd out the rest.
DEFAULT_SOURCE_CAPS = {"fulltext": 0.35, "addressed": 0.25, "open_items": 0.2, "decisions": 0.2}


def _check_name(field: str, value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise ValidationError(
            field, value, f"give a non-empty string of at most {MAX_NAME_CHARS} characters"
        )
    return value


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
    ) -> None:
        self.store = store
        self.counter: Tokenizer = counter or default_counter()
        self.sources: list[Source] = list(sources) if sources is not None else default_sources()
        self.scoring = scoring or ScoringConfig()
        self.source_caps = dict(DEFAULT_SOURCE_CAPS if source_caps is None else source_caps)
        self.deadline_s = deadline_ms / 1000.0
        self.clock = clock
        self.persist_traces = persist_traces
        self._pool = (
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cw-source")
            if workers > 1
            else None
        )
        self._known_agents: set[tuple[str, str]] = set()

    @classmethod
    def open(cls, url: str = "sqlite:///contextwright.db", **kwargs: Any) -> Engine:
        return cls(open_store(url), **kwargs)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- records --------------------------------------------------------------------------------

    def add(self, **fields: Any) -> Record:
        """Validate and store one record; returns it as stored (an existing id returns the original)."""
        record = build_record(fields, self.counter.count, now=self.clock())
        return self.store.add_many([record])[0]

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[Record]:
        """Validate every item first, then store them all in one transaction, or none."""
        if isinstance(items, Mapping | str | bytes) or not isinstance(items, Iterable):
            raise ValidationError("records", items, "give a list of record objects")
        now = self.clock()
        built = []
        for i, item in enumerate(items):
            try:
                built.append(build_record(item, self.counter.count, now=now))
            except ValidationError as exc:
                raise ValidationError(
                    f"records[{i}].{exc.field}",
                    exc.value,
                    exc.fix,
                    problem=exc.message.split(": ")[0].split(" ", 1)[-1] if exc.message else None,
                ) from exc
        return self.store.add_many(built)

    def get(self, record_id: str) -> Record:
        _check_name("id", record_id)
        found = self.store.get_many([record_id])
        if not found:
            raise NotFound("record", record_id)
        return found[0]

    def records(
        self, project: str, *, agent: str | None = None, limit: int = 50, **filters: Any
    ) -> list[Record]:
        _check_name("project", project)
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
        return self.store.query(Query(project=project, agent=agent, limit=limit, **filters))

    def set_status(self, record_id: str, status: str, *, by: str, note: str = "") -> Record:
        """Record a status change as a new fact (the record itself is never edited)."""
        if status not in STATUSES:
            raise ValidationError("status", status, f"use one of {', '.join(STATUSES)}")
        _check_name("by", by)
        record = self.get(record_id)
        self.store.set_status(record.id, status, by, self.clock(), note)
        return self.get(record_id)

    def resolve(self, record_id: str, *, by: str, note: str = "") -> Record:
        return self.set_status(record_id, "resolved", by=by, note=note)

    # -- agents and key-values ------------------------------------------------------------------

    def register_agent(
        self,
        project: str,
        agent: str,
        role: str = "default",
        profile: RoleProfile | Mapping[str, Any] | None = None,
    ) -> Agent:
        _check_name("project", project)
        _check_name("agent", agent)
        _check_name("role", role)
        if profile is None:
            prof = profile_for(role)
        elif isinstance(profile, RoleProfile):
            prof = profile
        else:
            prof = RoleProfile.from_dict(profile)
        a = Agent(id=agent, role=role, profile=prof)
        self.store.put_doc(
            "agents", f"{project}/{agent}", project, a.to_dict(), self.clock(), key=agent
        )
        self._known_agents.add((project, agent))
        return a

    def agent(self, project: str, agent: str) -> Agent:
        doc = self.store.get_doc("agents", f"{project}/{agent}")
        if doc is not None:
            return Agent.from_dict(doc)
        if self._is_known(project, agent):
            return Agent(id=agent)
        raise NotFound(
            "agent",
            agent,
            f"register it with register_agent() or add a record by it in {project!r}",
        )

    def agents(self, project: str) -> list[Agent]:
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
            self.store.get_doc("agents", f"{project}/{agent}")
            or self.store.query(Query(project, None, author=agent, limit=1))
            or self.store.query(Query(project, None, addressed_to=agent, limit=1))
        )
        if known:
            self._known_agents.add((project, agent))
        return known

    def kv_set(self, project: str, key: str, value: str) -> None:
        _check_name("project", project)
        _check_name("key", key)
        if not isinstance(value, str):
            raise ValidationError("value", value, "give the value as a string")
        self.store.kv_set(project, key, value, self.clock())

    def kv_get(self, project: str, key: str) -> str:
        value = self.store.kv_get(project, key)
        if value is None:
            raise NotFound("key", key, f"set it with kv_set({project!r}, {key!r}, ...)")
        return value

    # -- traces ---------------------------------------------------------------------------------

    def trace(self, trace_id: str) -> Trace:
        _check_name("trace_id", trace_id)
        doc = self.store.get_doc("traces", trace_id)
        if doc is None:
            raise NotFound("trace", trace_id)
        return Trace.from_dict(doc)

    def traces(self, project: str, agent: str | None = None, limit: int = 20) -> list[Trace]:
        return [
            Trace.from_dict(d)
            for d in self.store.list_docs("traces", project, key=agent, limit=limit)
        ]

    # -- assemble -------------------------------------------------------------------------------

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
    ) -> Assembly:
        """Compute `agent`'s context window from scratch, packed into `budget`, with its trace."""
        t0 = time.perf_counter()
        _check_name("project", project)
        _check_name("agent", agent)
        if not isinstance(task, str):
            raise ValidationError("task", task, "give the task as text")
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
            _check_name("session", session)
        if isinstance(working_memory, str) or not all(isinstance(w, str) for w in working_memory):
            raise ValidationError("working_memory", working_memory, "give a list of strings")
        active = self._select_sources(sources)
        now = self.clock()
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
            limits=dict(limits or {}),
        )
        warnings = self._validate_refs(project, agent, task)
        t_validate = time.perf_counter()

        found, runs = run_sources(active, ctx, self._pool, self.deadline_s)
        t_sources = time.perf_counter()
        for run in runs:
            if run.error:
                warnings.append(
                    f"source {run.name} failed: {run.error}; the window was built without it"
                )

        merged, duplicates = merge(found)
        kept: list[Candidate] = []
        excluded: list[Decision] = list(duplicates)
        superseded = self.store.superseded_by(
            [c.key for c in merged if c.record and c.record.status == "superseded"]
        )
        for c in merged:
            r = c.record
            if r is not None and r.status == "superseded":
                excluded.append(
                    Decision(
                        c,
                        False,
                        f"superseded by {superseded.get(r.id, 'a later record')}",
                        c.tokens,
                    )
                )
                continue
            kept.append(
                finish(
                    c,
                    now=now,
                    agent=agent,
                    role=agent_obj.profile,
                    config=self.scoring,
                    milestone=milestone,
                    session=session,
                )
            )
        kept.extend(self._synthetic(task, warnings, working_memory))
        t_merge = time.perf_counter()

        available = bud.available
        caps = {name: int(frac * available) for name, frac in self.source_caps.items()}
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
        rendered = render(packed.sections, agent, fmt, self.counter)
        while rendered.tokens > available and drop_last(
            packed, "exact count of the rendered window over budget"
        ):
            rendered = render(packed.sections, agent, fmt, self.counter)
        t_render = time.perf_counter()

        sections = {n: items for n, items in packed.sections.items()}
        section_tokens = {n: sum(i.tokens for i in items) for n, items in sections.items() if items}
        trace = Trace(
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
            },
            budget=bud.to_dict(),
            sources=[r.to_dict() for r in runs],
            items=[decision_dict(d) for d in [*packed.decisions, *excluded]],
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
        trace.latency_ms = _ms(t0, time.perf_counter())
        if self.persist_traces:
            self.store.put_doc("traces", trace.id, project, trace.to_dict(), now, key=agent)
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

    def _select_sources(self, names: Sequence[str] | None) -> list[Source]:
        if names is None:
            return list(self.sources)
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise ValidationError("sources", names, "give a list of source names")
        by_name = {s.name: s for s in self.sources}
        for n in names:
            if n not in by_name:
                raise ValidationError("sources", n, f"use source names: {', '.join(by_name)}")
        return [by_name[n] for n in names]

    def _validate_refs(self, project: str, agent: str, task: str) -> list[str]:
        """@references in the task that resolve to nothing become warnings, never silence."""
        warnings = []
        for ref in parse_mentions(task):
            if ref.startswith("kv:"):
                if self.store.kv_get(project, ref[3:]) is None:
                    warnings.append(f"@{ref}: no KV key {ref[3:]!r} in project {project!r}")
                continue
            if self.store.kv_get(project, ref) is not None or self._is_known(project, ref):
                continue
            if self.store.get_many([ref.removeprefix("rec:")]):
                continue
            if "/" in ref or "." in ref:
                if self.store.query(
                    Query(project, agent, kinds=("file", "artifact"), tag=ref.lower(), limit=1)
                ):
                    continue
                warnings.append(
                    f"@{ref}: no file or artifact {ref!r} is known in project {project!r}"
                )
            else:
                warnings.append(f"@{ref}: not an agent, KV key or record id in project {project!r}")
        return warnings

    def _synthetic(
        self, task: str, warnings: Sequence[str], working: Sequence[str]
    ) -> list[Candidate]:
        out = []
        if task.strip():
            text = f"- Task: {task.strip()}"
            out.append(
                Candidate(
                    key="task",
                    section="state",
                    source="request",
                    text=text,
                    tokens=self.counter.count(text),
                    pinned=True,
                    reasons=["the current task"],
                    components={"source": 10.0},
                    score=10.0,
                )
            )
        for i, w in enumerate(warnings):
            text = f"- ⚠ {w}"
            out.append(
                Candidate(
                    key=f"warning:{i}",
                    section="warnings",
                    source="validate",
                    text=text,
                    tokens=self.counter.count(text),
                    pinned=True,
                    reasons=["validation"],
                    components={"source": 5.0},
                    score=5.0 - i * 0.01,
                )
            )
        for i, w in enumerate(working):
            text = f"- {w}"
            out.append(
                Candidate(
                    key=f"working:{i}",
                    section="working_memory",
                    source="request",
                    text=text,
                    tokens=self.counter.count(text),
                    reasons=["per-turn scratchpad"],
                    score=1.0 - i * 0.001,
                )
            )
        return out


def _ms(a: float, b: float) -> float:
    return round((b - a) * 1000, 3)
