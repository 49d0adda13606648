"""The session manager: contextwright owns each agent's running session (the spec's "Board").

    engine.sessions.append("acme", "dev", "s1", "user", "Build a landing page, dark theme.")
    win = engine.sessions.window("acme", "dev", "s1", system="You are dev.", budget=8_000)
    win.messages   # fits the budget; compacted, pruned or recovered on the way if it had to be

Every window goes through the ordinary assemble pipeline (one packer, one renderer): the session's
layers enter as candidates of `SessionSource`, and this class decides what those candidates are.
Compaction, memory flush and reset write records and status facts, never edit or delete one.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..assembly.render import check_format
from ..assembly.request import AssembleRequest
from ..assembly.run import profile_budget
from ..assembly.sources import session_view
from ..budget import Budget
from ..errors import NotFound, ValidationError
from ..ports import Query, Summarizer
from ..records import Record, check_display_name, check_identifier, check_json_text, check_name
from ..summarizers.extractive import ExtractiveSummarizer
from . import accounting
from . import state as states
from .compaction import COMPACT_COMMAND, TRIGGERS, Compaction, run_compaction
from .config import SessionConfig
from .diagnostics import Breakdown, Gauge
from .flush import MemoryFlush, run_flush
from .layers import (
    Plan,
    PlanBoard,
    SessionSource,
    build_candidates,
    load_personalization,
    memory_for,
    tools_tokens,
)
from .overflow import parse_provider_error, retarget
from .pruning import Pruned
from .reset import Reset, run_reset
from .scopes import Scope
from .turns import SESSION_KINDS, Turn, build_turns, call_text, check_turn
from .undo import CompactionReport, Undo, reports, run_undo
from .window import Layers, SessionWindow, check_fixed, effective_budget, estimate, make_layers
from .window import build as build_window
from .window import calibrate as calibrate_window

if TYPE_CHECKING:
    from ..agents import AgentDirectory
    from ..assembly.run import Assembler
    from ..recordbook import RecordBook


class SessionManager:
    """Append turns, read the gauge, compact, flush, reset, and build windows that fit."""

    def __init__(
        self,
        book: RecordBook,
        agents: AgentDirectory,
        assembler: Assembler,
        *,
        config: SessionConfig | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        # The narrow parts it uses: validated writes (book), agents, and the assemble pipeline.
        self.book = book
        self.agents = agents
        self.assembler = assembler
        self.store = book.store
        self.counter = book.counter
        self.clock = book.clock
        self.config = config or SessionConfig()
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer(book.counter)
        self.board = PlanBoard()
        # The engine registers it with the other sources; it is silent without a plan.
        self.source = SessionSource(self.board)
        self._prune_cache: dict[tuple[str, int, str], Pruned] = {}
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()
        self._agents: set[tuple[str, str]] = set()

    # -- plumbing -------------------------------------------------------------------------------

    def _lock(self, project: str, agent: str, session: str) -> threading.RLock:
        key = states.doc_id(project, agent, session)
        with self._locks_guard:
            return self._locks.setdefault(key, threading.RLock())

    def load_state(self, project: str, agent: str, session: str) -> states.SessionState:
        check_identifier("project", project)
        check_display_name("agent", agent)
        check_identifier("session", session)
        return states.load(self.store, project, agent, session, self.clock())

    def _active(self, project: str, agent: str, session: str) -> states.SessionState:
        st = self.load_state(project, agent, session)
        if st.status == "reset":
            raise ValidationError(
                "session",
                session,
                f"this session was reset into {st.next_session!r}; use that session id",
                problem="is closed",
            )
        return st

    def save_state(self, st: states.SessionState) -> None:
        states.save(self.store, st, self.clock())

    def live_records(self, project: str, agent: str, session: str) -> list[Record]:
        """The session's records still in its window (not compacted), oldest first."""
        st = self.load_state(project, agent, session)
        return self.live_of(st)

    def live_of(self, st: states.SessionState) -> list[Record]:
        store = self.store
        q = Query(
            st.project,
            st.agent,
            kinds=SESSION_KINDS,
            session=st.session,
            since=st.cutoff,
            limit=10_000,
            newest_first=False,
        )
        found = {r.id: r for r in store.query(q)}
        extra = [i for i in [*st.protected, *st.summary_ids] if i not in found]
        for r in store.get_many(st.project, extra):
            if r.project == st.project and r.visible_to(st.agent):
                found[r.id] = r
        view = session_view(list(found.values()), st.agent)
        return sorted(
            (r for r in view if r.id not in st.hidden), key=lambda r: (r.created_at, r.id)
        )

    def turns(self, project: str, agent: str, session: str) -> list[Turn]:
        return build_turns(self.live_records(project, agent, session))

    # -- append ---------------------------------------------------------------------------------

    def append(
        self,
        project: str,
        agent: str,
        session: str,
        role: str,
        content: str,
        *,
        author: str | None = None,
        tool: str | None = None,
        arguments: Mapping[str, Any] | str | None = None,
        reply_to: str | None = None,
        pinned: bool = False,
        tags: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> Record:
        """Add one turn to the session. Roles: user, assistant, tool_call, tool_result, note,
        instruction (a pinned user message) and correction (a user message marked as one).
        A `/compact` message compacts the session at once; it is kept as a record that never
        enters a window."""
        check_turn(role, tool, arguments, reply_to)
        with self._lock(project, agent, session):
            st = self._active(project, agent, session)
            extra_meta: dict[str, Any] = dict(meta or {})
            fields: dict[str, Any] = {
                "project": project,
                "session": session,
                "content": content,
                "pinned": pinned or role == "instruction",
                "tags": [*tags, *(["correction"] if role == "correction" else [])],
            }
            if id is not None:
                fields["id"] = id
            if role in ("user", "instruction", "correction"):
                fields.update(kind="message", author=author or "user")
            elif role in ("assistant", "note"):
                fields.update(
                    kind="message" if role == "assistant" else "note", author=author or agent
                )
            elif role == "tool_call":
                if not isinstance(tool, str) or not tool:
                    raise ValidationError("tool", tool, "name the tool that was called")
                extra_meta.setdefault("name", tool)
                if arguments is not None:
                    extra_meta.setdefault("arguments", arguments)
                if isinstance(content, str) and not content.strip():
                    # tool= and arguments= describe the call; the record's text is then the call.
                    fields["content"] = call_text(tool, arguments)
                fields.update(kind="tool_call", author=author or agent)
            else:
                fields.update(
                    kind="tool_result",
                    author=author or agent,
                    reply_to=reply_to or self._pending_call(st),
                )
            fields["meta"] = extra_meta
            command = (
                role in ("user", "assistant")
                and isinstance(content, str)
                and content.strip() == COMPACT_COMMAND
            )
            if command:
                fields.update(status="compacted", tags=[*fields["tags"], "command"])
            record = self.book.add(**fields)
            self.ensure_agent(project, agent)
            if command:
                self.compact_state(st, trigger="manual", keep=self.config.keep_turns)
            return record

    def _pending_call(self, st: states.SessionState) -> str:
        pending = [t for t in build_turns(self.live_of(st)) if t.pending]
        if not pending:
            raise ValidationError(
                "reply_to", None, "give the id of the tool_call this result answers"
            )
        return pending[-1].key

    def ensure_agent(self, project: str, agent: str) -> None:
        if (project, agent) in self._agents:
            return
        self._agents.add((project, agent))
        try:
            self.agents.get(project, agent)
        except NotFound:
            self.agents.register(project, agent)

    def flush(self, project: str, agent: str, session: str) -> MemoryFlush:
        """Extract decisions, preferences, artifacts and patterns from the whole live session."""
        with self._lock(project, agent, session):
            st = self.load_state(project, agent, session)
            return self.flush_state(st, build_turns(self.live_of(st)))

    def flush_state(self, st: states.SessionState, turns: Sequence[Turn]) -> MemoryFlush:
        return run_flush(self, st, turns)

    def compact(
        self, project: str, agent: str, session: str, *, trigger: str = "manual",
        keep: int | None = None,
    ) -> Compaction:  # fmt: skip
        """Flush memory, then summarize all but the last `keep` turns (default from config)."""
        if trigger not in TRIGGERS:
            raise ValidationError("trigger", trigger, f"use one of {', '.join(TRIGGERS)}")
        if keep is not None and (
            not isinstance(keep, int) or isinstance(keep, bool) or not 4 <= keep <= 8
        ):
            raise ValidationError("keep", keep, "keep from 4 to 8 turns verbatim")
        with self._lock(project, agent, session):
            st = self._active(project, agent, session)
            return self.compact_state(st, trigger=trigger, keep=keep or self.config.keep_turns)

    def compact_state(self, st: states.SessionState, *, trigger: str, keep: int) -> Compaction:
        return run_compaction(self, st, trigger=trigger, keep=keep)

    def undo_compaction(self, project: str, agent: str, session: str) -> Undo:
        """Undo `agent`'s newest compaction of the session: its summaries leave the view and the
        records they replaced come back, so the window is the one before it."""
        with self._lock(project, agent, session):
            return run_undo(self, self._active(project, agent, session))

    def compactions(self, project: str, agent: str, session: str) -> list[CompactionReport]:
        """What `agent`'s compactions of the session replaced (ids, kinds, authors, tokens) and
        what their summaries kept, newest first: those that can still be undone."""
        return reports(self, self.load_state(project, agent, session))

    # -- reset ----------------------------------------------------------------------------------

    def reset(
        self,
        project: str,
        agent: str,
        session: str,
        *,
        new_session: str | None = None,
        reason: str = "manual",
    ) -> Reset:
        """Start a new session with a transfer summary of this one; memory is flushed first."""
        if new_session is not None:
            check_name("new_session", new_session)
        check_json_text("reason", reason)
        with self._lock(project, agent, session):
            st = self._active(project, agent, session)
            return self.reset_state(st, new_session=new_session, reason=reason)

    def reset_state(
        self,
        st: states.SessionState,
        *,
        new_session: str | None,
        reason: str,
        drafts: list[tuple[Scope, list[Turn], str]] | None = None,
    ) -> Reset:
        return run_reset(self, st, new_session=new_session, reason=reason, drafts=drafts)

    # -- windows --------------------------------------------------------------------------------

    def budget_for(
        self, project: str, agent: str, budget: Budget | Mapping[str, Any] | int | None
    ) -> Budget:
        if budget is not None:
            return Budget.coerce(budget)
        try:
            return profile_budget(self.agents.get(project, agent))
        except NotFound:
            return Budget()

    def plan(
        self,
        st: states.SessionState,
        layers: Layers,
        task: str,
        *,
        keep: int,
        purge: bool,
        drop: bool,
    ) -> Plan:
        counter = self.counter
        cfg = self.config
        turns = build_turns(self.live_of(st))
        plan = Plan(
            project=st.project,
            agent=st.agent,
            session=st.session,
            turns=turns,
            keep=keep,
            purge=purge,
            drop_files=drop,
            system=layers.system,
            skills=list(layers.skills),
            tools=list(layers.tools),
            tools_tokens=tools_tokens(layers.tools, counter),
            personal=load_personalization(cfg.workspace, cfg.personal_cap, counter),
            files=list(layers.files),
            memory=memory_for(self.store, st.project, st.agent, turns, task, cfg.memory_limit),
        )
        if len(self._prune_cache) > 50_000:
            self._prune_cache.clear()
        build_candidates(plan, counter, cfg.tool_result_cap, self._prune_cache)
        return plan

    def window(
        self,
        project: str,
        agent: str,
        session: str,
        task: str = "",
        budget: Budget | Mapping[str, Any] | int | None = None,
        format: str = "openai",
        *,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        skills: Sequence[str] = (),
        files: Sequence[str] | Mapping[str, str] = (),
        request: AssembleRequest | None = None,
    ) -> SessionWindow:
        """A window that fits `budget`: compacts at the threshold, climbs the overflow ladder if
        it must, and raises ContextOverflow (with the breakdown) only when nothing helps.
        `request` (Engine.window) carries the rest of an assemble request to every step."""
        return self._window(
            project, agent, session, task, budget, format, system, tools, skills, files,
            request=request,
        )  # fmt: skip

    prepare = window

    def _window(
        self,
        project: str,
        agent: str,
        session: str,
        task: str,
        budget: Budget | Mapping[str, Any] | int | None,
        format: str,
        system: str,
        tools: Sequence[Mapping[str, Any]],
        skills: Sequence[str],
        files: Sequence[str] | Mapping[str, str],
        *,
        auto: bool = True,
        steps: list[dict[str, Any]] | None = None,
        request: AssembleRequest | None = None,
    ) -> SessionWindow:
        fmt = check_format(format)
        if not isinstance(task, str):
            raise ValidationError("task", task, "give the task as text")
        if request is not None:  # its sources and limits, before compaction writes; it runs
            request, active = self.assembler.check_names(request)  # its own pipelines' sources
            request = replace(request, sources=request.sources or tuple(s.name for s in active))
        with self._lock(project, agent, session):
            st = self._active(project, agent, session)
            bud = self.budget_for(project, agent, budget)
            layers = make_layers(self.config, self.counter, system, tools, skills, files)
            layers.request = request
            eff = effective_budget(self, project, bud) if auto else bud
            win = build_window(self, st, layers, task, eff, fmt, auto=auto, steps=steps)
            win.budget = bud
            return win

    def breakdown(
        self,
        project: str,
        agent: str,
        session: str,
        task: str = "",
        budget: Budget | Mapping[str, Any] | int | None = None,
        format: str = "openai",
        *,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        skills: Sequence[str] = (),
        files: Sequence[str] | Mapping[str, str] = (),
    ) -> Breakdown:
        """Tokens per layer, the budget, per-file flags and the gauge, without compacting."""
        win = self._window(
            project, agent, session, task, budget, format, system, tools, skills, files, auto=False
        )
        return win.breakdown

    def gauge(
        self,
        project: str,
        agent: str,
        session: str,
        budget: Budget | Mapping[str, Any] | int | None = None,
        format: str = "openai",
        *,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        skills: Sequence[str] = (),
        files: Sequence[str] | Mapping[str, str] = (),
    ) -> Gauge:
        """Used against the limit for the session's own layers, from the plan alone: no assemble,
        no writes. The compaction hint is on when history passes the threshold."""
        fmt = check_format(format)
        st = self.load_state(project, agent, session)
        bud = self.budget_for(project, agent, budget)
        layers = make_layers(self.config, self.counter, system, tools, skills, files)
        plan = self.plan(st, layers, "", keep=self.config.keep_turns, purge=False, drop=False)
        return estimate(self, plan, bud, fmt)

    # -- provider feedback ----------------------------------------------------------------------

    def handle_provider_error(
        self,
        project: str,
        agent: str,
        session: str,
        error: object,
        task: str = "",
        budget: Budget | Mapping[str, Any] | int | None = None,
        format: str = "openai",
        *,
        sent_tokens: int | None = None,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        skills: Sequence[str] = (),
        files: Sequence[str] | Mapping[str, str] = (),
    ) -> SessionWindow:
        """Take a provider's context-length error (OpenAI or Anthropic), compact, and return a
        window that fits the limit the provider reported (scaled by its count against ours)."""
        parsed = parse_provider_error(error)
        if parsed is None:
            raise ValidationError(
                "error",
                error,
                "pass the provider's context-length error (OpenAI 'context_length_exceeded' or "
                "Anthropic 'prompt is too long: N tokens > M maximum')",
                problem="is not a context overflow",
            )
        retargeted, step = retarget(self.budget_for(project, agent, budget), parsed, sent_tokens)
        fmt = check_format(format)
        with self._lock(project, agent, session):
            st = self._active(project, agent, session)
            # Before compacting: a limit the fixed layers cannot fit must leave the session alone.
            layers = make_layers(self.config, self.counter, system, tools, skills, files)
            plan = self.plan(st, layers, task, keep=self.config.keep_turns, purge=False, drop=False)
            check_fixed(self, plan, effective_budget(self, project, retargeted), fmt)
            c = self.compact_state(st, trigger="provider_overflow", keep=self.config.keep_turns)
            if c.compacted:
                step["summary"] = c.summary.id if c.summary else None
            elif c.skipped:
                step["skipped"] = c.skipped
            win = self._window(
                project, agent, session, task, retargeted, format, system, tools, skills, files,
                steps=[step],
            )  # fmt: skip
            if c.compacted:
                win.compactions.insert(0, c)
            return win

    def calibrate(self, window: SessionWindow, usage: Mapping[str, Any]) -> accounting.Calibration:
        """Compare the provider's reported prompt tokens with our count of the same window; the
        running ratio per model shrinks later windows when the provider counts more."""
        return calibrate_window(self, window, usage)
