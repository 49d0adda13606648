"""The engine: the one object users hold. Records in, context windows out, with a trace.

    engine = Engine.open("sqlite:///team.db")
    engine.add(project="p", author="alice", kind="message", content="@bob can you check auth?")
    result = engine.assemble(project="p", agent="bob", task="fix the login bug", budget=Budget(...))

A facade: it composes the parts (records, agents, the assemble pipeline, traces, sessions, tasks,
vectors), registers their sources in one place (`_register`), and delegates. The CLI, HTTP and
MCP call these methods and nothing else; an agent's window, session or not, is `window()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .agents import AgentDirectory
from .assembly.cache import SourceCache
from .assembly.request import AssembleRequest
from .assembly.result import Assembly
from .assembly.retrieval import PipelinesArg, coerce_pipelines, install
from .assembly.run import Assembler, Setting
from .assembly.run import source_caps as default_caps
from .assembly.scoring import ScoringConfig
from .assembly.sources import Source
from .assembly.stored_counts import StoredCounts
from .budget import Budget
from .gate import CallGate
from .ports import Embedder, SettlesReads, Store, Tokenizer
from .recordbook import RecordBook
from .records import Record
from .roles import Agent, RoleProfile
from .rules.loading import coerce_rules
from .rules.ruleset import RuleSet
from .sessions import SessionManager
from .stores import open_store
from .tasks import TaskBoard
from .tokens.counter import default_counter
from .traces import reader
from .traces.diff import diff_traces
from .traces.reader import Viewers
from .traces.replay import check_overrides, replay
from .traces.trace import Trace
from .traces.writer import TraceWriter
from .vectors import Vectors

RulesArg = RuleSet | str | Path | Sequence[Any] | None


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
        rules: RulesArg = None,
        cache_ttl_s: float = 30.0,
        embedder: Embedder | str | None = None,
        pipelines: PipelinesArg = None,
        assemble_slots: int | None = None,
    ) -> None:
        self.store, self.pipelines = store, coerce_pipelines(pipelines)  # definitions: 1st
        self.counter: Tokenizer = counter or default_counter()
        self.clock = clock
        self._traces = TraceWriter(store)  # traces are written off the hot path (writer.py)
        self.counts = StoredCounts(store, self.counter)  # whose counts records carry
        self._rules_arg = rules
        pool = ThreadPoolExecutor if workers > 1 else None
        self._pool = pool(max_workers=workers, thread_name_prefix="cw-source") if pool else None
        self.scoring = scoring or ScoringConfig()
        # Vectors on with an embedder or its name ("minilm" loads in the background); vectors.py.
        self.vectors = Vectors(store, embedder, self.scoring)
        self.book = RecordBook(store, self.counter, clock, self.counts, self.vectors.notify)
        self.agents_dir = AgentDirectory(store, clock)
        self.assembler = Assembler(
            store=store, counter=self.counter, sources=[], scoring=self.scoring,
            source_caps=default_caps(source_caps), deadline_s=deadline_ms / 1000.0, clock=clock,
            rules=coerce_rules(rules), cache=SourceCache(ttl_s=cache_ttl_s), traces=self._traces,
            counts=self.counts, agent=self.agents_dir.get, is_agent=self.agents_dir.is_known,
            pool=self._pool, persist_traces=persist_traces, locality=locality,
            notes=[self.vectors], agent_at_version=self.agents_dir.get_at_version,
        )  # fmt: skip
        self.tasks = TaskBoard(self.book)  # tasks/; the `computed` source runs for a named task
        self.assembler.task_text = self.tasks.task_text
        self.book.on_written = self.assembler.written  # its version-keyed caches follow writes
        # Each agent's running session (sessions/): compaction, pruning, flush, reset, overflow.
        self.sessions = SessionManager(self.book, self.agents_dir, self.assembler)
        self._register(sources)
        self.gate = CallGate.for_store(store, assemble_slots)

    def _register(self, given: Sequence[Source] | None) -> None:
        """The one place that decides which sources run: the given list, or the pipelines'."""
        if given is not None:
            self.assembler.sources[:] = list(given)
            return
        install(self.pipelines, self.assembler, self.vectors.join,
                graph=self.tasks, session=self.sessions, vector=self.vectors)  # fmt: skip

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
        if isinstance(self.store, SettlesReads):
            self.store.settle()

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

    # The assembler holds these; the engine shows them as its own attributes.
    sources: Setting[list[Source]] = Setting("sources")
    cache: Setting[SourceCache] = Setting("cache")
    rules: Setting[RuleSet] = Setting("rules")
    persist_traces: Setting[bool] = Setting("persist_traces")

    # -- records, agents, key-values (recordbook.py, agents.py) ---------------------------------

    def add(self, **fields: Any) -> Record:
        """Validate and store one record; returns it as stored. The same (project, id) with the
        same write returns the original; with another write it is refused (ValidationError), as
        is a `supersedes`, `reply_to` or `rec:` ref that names no record of the project."""
        return self.book.add(**fields)

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[Record]:
        """Validate every item first, then store them all in one transaction, or none."""
        return self.book.add_many(items)

    def add_batch(self, items: Iterable[Mapping[str, Any]]) -> list[tuple[Record, bool]]:
        """`add_many`, telling for each item whether this call stored it (True) or an existing
        record with its id was returned as stored (False): what an import reports."""
        return self.book.add_batch(items)

    def wait_for_embeddings(self, timeout: float | None = None) -> bool:
        """Block until the embedder has loaded and every stored record is searchable by vector
        (True at once without vectors; False on timeout or if the embedder failed to load)."""
        return self.vectors.wait(timeout)

    def get(self, project: str, record_id: str) -> Record:
        return self.book.get(project, record_id)

    def records(
        self, project: str, *, agent: str | None = None, limit: int = 50, **filters: Any
    ) -> list[Record]:
        return self.book.records(project, agent=agent, limit=limit, **filters)

    def set_status(
        self, project: str, record_id: str, status: str, *, by: str, note: str = ""
    ) -> Record:
        """Record a status change as a new fact (the record itself is never edited)."""
        return self.book.set_status(project, record_id, status, by=by, note=note)

    def resolve(self, project: str, record_id: str, *, by: str, note: str = "") -> Record:
        return self.set_status(project, record_id, "resolved", by=by, note=note)

    def register_agent(
        self,
        project: str,
        agent: str,
        role: str = "default",
        profile: RoleProfile | Mapping[str, Any] | None = None,
    ) -> Agent:
        return self.agents_dir.register(project, agent, role, profile)

    def agent(self, project: str, agent: str) -> Agent:
        return self.agents_dir.get(project, agent)

    def agents(self, project: str) -> list[Agent]:
        return self.agents_dir.list(project)

    def kv_set(self, project: str, key: str, value: str) -> None:
        self.book.kv_set(project, key, value)

    def kv_get(self, project: str, key: str) -> str:
        return self.book.kv_get(project, key)

    # -- traces (traces/) -------------------------------------------------------------------------

    def trace(self, project: str, trace_id: str, agent: Viewers = None) -> Trace:
        """One trace of `project`, read as `agent` (one name, or any of several names; None reads
        as every agent). A trace is a view of what its agent saw: one of another project, or of an
        agent not given, is NotFound with the same message as an id that exists nowhere."""
        return reader.read_trace(self.store, self._traces, project, trace_id, agent)

    def traces(self, project: str, agent: Viewers = None, limit: int = 20) -> list[Trace]:
        """The newest traces of `project`, of `agent` (one name, or any of several; None: all)."""
        if isinstance(agent, str):  # an agent the project lacks is NotFound, not one with none
            self.agent(project, agent)
        return reader.list_traces(self.store, self._traces, project, agent, limit)

    def diff(self, project: str, a: str, b: str, agent: Viewers = None) -> dict[str, Any]:
        """Compare two traces of `project`, both read as `agent` (see trace())."""
        return diff_traces(self.trace(project, a, agent), self.trace(project, b, agent))

    def replay(
        self, project: str, trace_id: str, agent: Viewers = None, **overrides: Any
    ) -> Assembly:
        """Run a stored assembly of `project` again with another budget, sources or rules, the
        trace read as `agent` (see trace() and traces/replay.py)."""
        check_overrides(overrides)
        return replay(self.trace(project, trace_id, agent), self.assemble, **overrides)

    def complete_task(
        self, project: str, task_id: str, handoff: Any, *, by: str | None = None
    ) -> Record:
        """Complete a task with its structured handoff (YAML, JSON or a mapping); see tasks/."""
        return self.tasks.complete(project, task_id, handoff, by=by).task

    # -- windows ----------------------------------------------------------------------------------

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
        rules: RulesArg = None,
        task_id: str | None = None,
        pipelines: PipelinesArg = None,
    ) -> Assembly:
        """Compute `agent`'s context window from scratch, packed into `budget`, with its trace.

        Plain assembly: `session` only scopes history to that session (`window()` runs the
        session pipeline). A bare number as `budget` is the tokens available for the window.
        `include_superseded` shows superseded records beside their replacements; `task_kind`
        (review, bug, ...) is what rules match as `kind`, guessed from the task when absent;
        `rules` replaces the engine's rules for this call; `task_id` adds that task's computed
        context (tasks/) and makes its objective the task text when `task` is empty."""
        return self.gate.run(self.assembler.assemble, AssembleRequest.build(
            project, agent, task, budget, format, session=session, milestone=milestone,
            working_memory=working_memory, sources=sources, limits=limits,
            include_superseded=include_superseded, task_kind=task_kind, rules=rules,
            task_id=task_id, pipelines=pipelines,
        ))  # fmt: skip

    def window(
        self,
        request: AssembleRequest,
        *,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        skills: Sequence[str] = (),
        files: Sequence[str] | Mapping[str, str] = (),
    ) -> Assembly:
        """An agent's window, the one call every interface makes: plain assembly, or the session
        pipeline (`sessions.window`) when the request names a session."""
        if (sid := request.session) is None:
            return self.gate.run(self.assembler.assemble, request)
        return self.gate.run(lambda: self.sessions.window(
            request.project, request.agent, sid, request.task, request.budget, request.format,
            system=system, tools=tools, skills=skills, files=files, request=request,
        ).assembly)  # fmt: skip

    def reload_rules(self) -> RuleSet:
        """Read the rules directory again (after an edit); keeps the old rules if invalid."""
        source = self.rules.directory if self.rules.directory is not None else self._rules_arg
        self.rules = coerce_rules(source)
        return self.rules
