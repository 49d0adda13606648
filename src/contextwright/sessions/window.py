"""Building a session window that fits: auto-compaction at the threshold, then the overflow ladder.

One window is one ordinary `engine.assemble` call whose session layers come from a plan. The
plan's required candidates (system prompt, skills, the summary, corrections, pinned instructions
and the last N turns) must all be kept whole; if one is not, the next rung of the ladder runs
(emergency compaction, tool-result purge, file drop, session reset) and the window is built
again. Each rung is recorded in the breakdown and in the trace (`trace.notes["session"]`).

A window that cannot fit raises `ContextOverflow` without closing the session: the fixed layers
(system prompt, skills, tool definitions) are checked before any step, since no compaction or
reset can shrink them, and the reset rung runs only when its transfer summaries would fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..assembly.costs import fixed_cost, heading_cost, unit_cost
from ..assembly.request import AssembleRequest
from ..assembly.result import Assembly
from ..budget import Budget
from ..errors import ContextOverflow, ValidationError
from ..ports import Tokenizer
from ..records import check_json_text
from ..summarizers.fallback import noting
from . import accounting
from .compaction import Compaction
from .config import SessionConfig
from .diagnostics import Breakdown, Gauge, breakdown
from .layers import PLAN_LIMIT, Plan, WorkspaceFile, load_files
from .overflow import EMERGENCY_KEEP, LADDER, receipts
from .reset import Reset, draft_transfers
from .state import SessionState

if TYPE_CHECKING:
    from .host import SessionHost


@dataclass
class SessionWindow:
    """A window that fits, with how it got there. `session` may be a new id after a reset."""

    project: str
    agent: str
    session: str
    assembly: Assembly
    breakdown: Breakdown
    budget: Budget
    tools: list[dict[str, Any]] = field(default_factory=list)
    tools_tokens: int = 0
    compactions: list[Compaction] = field(default_factory=list)
    reset: Reset | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.assembly.messages

    @property
    def tokens(self) -> int:
        """Exact count of the rendered messages, as the provider counts them."""
        return self.assembly.tokens

    @property
    def total_tokens(self) -> int:
        """Messages plus tool definitions: what the provider will report as prompt tokens."""
        return self.assembly.tokens + self.tools_tokens

    @property
    def gauge(self) -> Gauge:
        return self.breakdown.gauge

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.breakdown.steps

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "agent": self.agent,
            "session": self.session,
            "messages": self.messages,
            "tools": self.tools,
            "tokens": self.tokens,
            "breakdown": self.breakdown.to_dict(),
            "compactions": [c.to_dict() for c in self.compactions],
            "reset": self.reset.to_dict() if self.reset else None,
            "trace_id": self.assembly.trace.id,
        }


@dataclass
class Layers:
    """The caller's layers for one window: system prompt, tool definitions, skills, files."""

    system: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    files: list[WorkspaceFile] = field(default_factory=list)
    # The request the window answers (Engine.window): its other fields (milestone, rules,
    # working memory...) apply to every assemble call of the ladder.
    request: AssembleRequest | None = None


def make_layers(
    config: SessionConfig,
    counter: Tokenizer,
    system: str,
    tools: Sequence[Mapping[str, Any]],
    skills: Sequence[str],
    files: Sequence[str] | Mapping[str, str],
) -> Layers:
    """The caller's layers, checked by name, with the files read from the workspace."""
    if not isinstance(system, str):
        raise ValidationError("system", system, "give the system prompt as text")
    if isinstance(skills, str) or not all(isinstance(s, str) for s in skills):
        raise ValidationError("skills", skills, "give a list of skill instructions (strings)")
    if isinstance(tools, Mapping) or not all(isinstance(t, Mapping) for t in tools):
        raise ValidationError("tools", tools, "give a list of tool definitions (objects)")
    # The layers are rendered into the window and recorded in its trace: the same text check.
    check_json_text("system", system)
    check_json_text("skills", list(skills))
    check_json_text("tools", list(tools))
    check_json_text("files", files if isinstance(files, Mapping) else list(files))
    loaded = load_files(files, config.workspace, config.file_cap, counter)
    return Layers(system, [dict(t) for t in tools], [s for s in skills if s.strip()], loaded)


def effective_budget(mgr: SessionHost, project: str, bud: Budget) -> Budget:
    """Shrink the window by the provider/ours ratio when the provider has counted more."""
    ratio = accounting.ratio(mgr.store, project, bud.model)
    if ratio <= 1.01:
        return bud
    assert bud.window is not None and bud.reserve is not None
    window = bud.reserve + int((bud.window - bud.reserve) / ratio)
    return Budget(
        model=bud.model, window=window, reserve=bud.reserve, section_caps=dict(bud.section_caps)
    )


def _costs(plan: Plan, fmt: str, mgr: SessionHost) -> dict[str, int]:
    if fmt in plan.costs:
        return plan.costs[fmt]
    counter = mgr.counter
    out = {"state": 0, "constraints": 0, "history": 0, "knowledge": 0}
    for c in plan.candidates:
        if c.section in out:
            out[c.section] += unit_cost(c, fmt, plan.agent, counter)
    out["fixed"] = fixed_cost(plan.agent, fmt, counter) + sum(
        heading_cost(s, counter) for s in ("state", "constraints", "knowledge") if out[s]
    )
    plan.costs[fmt] = out
    return out


def _inner_budget(plan: Plan, bud: Budget, fmt: str, mgr: SessionHost) -> Budget:
    """Reserve the tool definitions, and cap knowledge at what history leaves, so retrieved
    records never crowd out the session's own turns (knowledge packs before history)."""
    assert bud.window is not None and bud.reserve is not None
    reserve = bud.reserve + plan.tools_tokens
    if reserve >= bud.window:
        raise ContextOverflow(
            f"the tool definitions ({plan.tools_tokens} tokens) and the reserve leave no room "
            f"in a {bud.window}-token window; send fewer tools or use a larger model",
            breakdown={"tools": plan.tools_tokens, "window": bud.window, "reserve": bud.reserve},
        )
    inner = Budget(model=bud.model, window=bud.window, reserve=reserve)
    costs = _costs(plan, fmt, mgr)
    room = (
        inner.available - costs["fixed"] - costs["state"] - costs["constraints"] - costs["history"]
    )
    caps = dict(bud.section_caps)
    caps["knowledge"] = max(0, min(caps.get("knowledge", room), room - 8))
    return Budget(model=bud.model, window=bud.window, reserve=reserve, section_caps=caps)


def fixed_layers(mgr: SessionHost, plan: Plan, fmt: str) -> dict[str, int]:
    """Tokens of the layers no recovery step can shrink: the caller's system prompt, skills and
    tool definitions, and the format's envelope around them."""
    counter = mgr.counter
    out = {"system": 0, "skills": 0, "tools": plan.tools_tokens, "overhead": 0}
    for c in plan.candidates:
        if c.key == "system:rules":
            out["system"] += unit_cost(c, fmt, plan.agent, counter)
        elif c.key.startswith("skill:"):
            out["skills"] += unit_cost(c, fmt, plan.agent, counter)
    out["overhead"] = fixed_cost(plan.agent, fmt, counter)
    if out["system"] or out["skills"]:
        out["overhead"] += heading_cost("state", counter)
    return out


def message_room(bud: Budget, tools: int) -> int:
    """Tokens the messages may use once the reserve and the tool definitions are set aside."""
    assert bud.window is not None and bud.reserve is not None
    if bud.reserve + tools >= bud.window:
        return 0
    return Budget(model=bud.model, window=bud.window, reserve=bud.reserve + tools).available


def _fixed_text(need: dict[str, int]) -> str:
    return (
        f"the system prompt ({need['system']:,} tokens), skills ({need['skills']:,}) and tool "
        f"definitions ({need['tools']:,})"
    )


def _fix(bud: Budget) -> str:
    return (
        "shorten the system prompt or the skills, send fewer tools, or give a larger budget "
        f"(now {bud.window:,} tokens with {bud.reserve:,} reserved for the response); "
        "the session was left as it was"
    )


def check_fixed(mgr: SessionHost, plan: Plan, bud: Budget, fmt: str) -> None:
    """Raise before any step when the fixed layers alone overflow: compacting or resetting the
    session could not help, and would only close it."""
    need = fixed_layers(mgr, plan, fmt)
    room = message_room(bud, plan.tools_tokens)
    messages = need["system"] + need["skills"] + need["overhead"]
    if messages <= room and room > 0:
        return
    raise ContextOverflow(
        f"{_fixed_text(need)} need {messages + need['tools']:,} tokens of the "
        f"{bud.window:,}-token window, which leaves {room:,} for messages after the reserve and "
        f"the tools; no compaction or reset can shrink them: {_fix(bud)}",
        breakdown={
            "layers": need,
            "budget": {
                "window": bud.window or 0,
                "reserved_response": bud.reserve or 0,
                "available_for_messages": room,
            },
            "steps": [],
        },
    )


def _reset_would_fit(
    mgr: SessionHost, plan: Plan, asm: Assembly, bud: Budget, fmt: str, drafts: list[str]
) -> tuple[bool, str]:
    """Whether the new session's window would fit: its fixed layers, the transfer summaries, and
    the pinned records other sources put in this window (they are not the session's, so they
    come back after a reset). Also the sentence that says what would not."""
    counter = mgr.counter
    need = fixed_layers(mgr, plan, fmt)
    envelope = 12 + counter.count(plan.agent)  # a history message's, in the widest format
    transfers = sum(counter.count(d) + envelope for d in drafts)
    ours = {c.key for c in plan.candidates} | {"task"}
    pinned = sum(
        i.tokens
        for items in asm.sections.values()
        for i in items
        if i.candidate.pinned and i.candidate.key not in ours
    )
    total = need["system"] + need["skills"] + need["overhead"] + transfers + pinned
    total += heading_cost("history", counter)
    room = message_room(bud, plan.tools_tokens)
    why = (
        f"a session reset would not make it fit either: {_fixed_text(need)} and the transfer "
        f"summary ({transfers:,}) would need {total + need['tools']:,} tokens, and the window "
        f"leaves {room:,} for messages"
    )
    return total <= room, why


def estimate(mgr: SessionHost, plan: Plan, bud: Budget, fmt: str) -> Gauge:
    """The gauge from the plan alone (no assemble, no writes): session layers only."""
    costs = _costs(plan, fmt, mgr)
    available = Budget(model=bud.model, window=bud.window, reserve=bud.reserve).available
    fixed = costs["fixed"] + costs["state"] + costs["constraints"] + plan.tools_tokens
    used = fixed + costs["history"] + costs["knowledge"] + heading_cost("history", mgr.counter)
    assert bud.window is not None
    return Gauge(
        used=used,
        limit=available,
        window=bud.window,
        history=costs["history"],
        history_available=max(available - fixed, 0),
        threshold=mgr.config.threshold,
    )


def assemble(
    mgr: SessionHost,
    plan: Plan,
    bud: Budget,
    fmt: str,
    task: str,
    base: AssembleRequest | None = None,
) -> Assembly:
    inner = _inner_budget(plan, bud, fmt, mgr)
    base = base or AssembleRequest(plan.project, plan.agent)
    # The session's own layers replace `history`; the request's other sources run beside them.
    given = base.sources or tuple(s.name for s in mgr.assembler.sources)
    names = tuple(n for n in given if n != "history")
    names = names if "session" in names else (*names, "session")
    token = mgr.board.put(plan)
    try:
        return mgr.assembler.assemble(
            replace(
                base,
                task=task,
                budget=inner,
                format=fmt,
                session=plan.session,
                sources=names,
                limits={**base.limits, PLAN_LIMIT: token},
            )
        )
    finally:
        mgr.board.pop(token)


def problems(asm: Assembly, plan: Plan) -> tuple[list[str], list[str]]:
    """(required keys left out or cut, other session turns left out)."""
    kept = {i.candidate.key: i for items in asm.sections.values() for i in items}
    missing = sorted(k for k in plan.required if k not in kept or kept[k].truncated)
    dropped = [c.key for c in plan.candidates if c.section == "history" and c.key not in kept]
    return missing, dropped


def build(
    mgr: SessionHost,
    st: SessionState,
    layers: Layers,
    task: str,
    bud: Budget,
    fmt: str,
    *,
    auto: bool = True,
    steps: list[dict[str, Any]] | None = None,
) -> SessionWindow:
    # A summarizer that failed: its summary's receipt (summarizers/fallback.py).
    with noting() as fallbacks:
        cfg = mgr.config
        steps = list(steps or [])
        compactions: list[Compaction] = []
        reset: Reset | None = None
        keep, purge, drop = cfg.keep_turns, False, False
        plan = mgr.plan(st, layers, task, keep=keep, purge=purge, drop=drop)
        if auto:
            check_fixed(mgr, plan, bud, fmt)
        skipped = False  # a compaction that kept the turns would keep them again: do not retry
        if auto and estimate(mgr, plan, bud, fmt).compaction_hint:
            c = mgr.compact_state(st, trigger="auto", keep=keep)
            skipped = c.skipped is not None
            if c.compacted:
                compactions.append(c)
                steps.append(
                    {
                        "step": "auto_compaction",
                        "summary": c.summary.id if c.summary else None,
                        "replaced": len(c.replaced),
                    }
                )
                plan = mgr.plan(st, layers, task, keep=keep, purge=purge, drop=drop)
            elif c.skipped:
                steps.append({"step": "auto_compaction", "skipped": c.skipped})
        asm = assemble(mgr, plan, bud, fmt, task, layers.request)
        missing, dropped = problems(asm, plan)
        if auto and not missing and dropped and not skipped:
            c = mgr.compact_state(st, trigger="auto", keep=keep)
            if c.compacted:
                compactions.append(c)
                steps.append(
                    {
                        "step": "auto_compaction",
                        "reason": f"{len(dropped)} turns did not fit",
                        "summary": c.summary.id if c.summary else None,
                    }
                )
                plan = mgr.plan(st, layers, task, keep=keep, purge=purge, drop=drop)
                asm = assemble(mgr, plan, bud, fmt, task, layers.request)
                missing, dropped = problems(asm, plan)
            elif c.skipped:
                steps.append({"step": "auto_compaction", "skipped": c.skipped})
        for rung in LADDER:
            if not missing or not auto:
                break
            step: dict[str, Any] = {"step": rung, "missing_before": missing[:20]}
            if rung == "emergency_compaction":
                keep = EMERGENCY_KEEP
                c = mgr.compact_state(st, trigger="emergency", keep=keep)
                if c.compacted:
                    compactions.append(c)
                    step["summary"] = c.summary.id if c.summary else None
                elif c.skipped:
                    step["skipped"] = c.skipped
            elif rung == "purge_tool_results":
                purge = True
                if not any(t.is_tool for t in plan.turns):  # the window is the same: no receipt
                    step["skipped"] = "no tool results to purge"
            elif rung == "drop_files":
                drop = True
                if not layers.files:
                    step["skipped"] = "no workspace files to drop"
            else:
                drafts = draft_transfers(mgr, st, plan.turns)
                fits, why = _reset_would_fit(mgr, plan, asm, bud, fmt, [d for _, _, d in drafts])
                if not fits:
                    plan.steps = [*steps, {**step, "skipped": why}]
                    bd = breakdown(asm, plan, threshold=cfg.threshold)
                    raise ContextOverflow(
                        f"the window for {st.agent} in session {st.session} overflows after "
                        "emergency compaction, the tool-result purge and dropping files "
                        f"(left out: {', '.join(missing[:5])}); {why}: {_fix(bud)}",
                        breakdown=bd.to_dict(),
                    )
                reset = mgr.reset_state(
                    st, new_session=None, reason="context overflow", drafts=drafts
                )
                st = mgr.load_state(st.project, st.agent, reset.new_session)
                step["new_session"] = reset.new_session
            steps.append(step)
            plan = mgr.plan(st, layers, task, keep=keep, purge=purge, drop=drop)
            asm = assemble(mgr, plan, bud, fmt, task, layers.request)
            missing, dropped = problems(asm, plan)
        plan.steps = steps
        bd = breakdown(asm, plan, threshold=cfg.threshold)
        if missing and auto:
            raise ContextOverflow(
                f"the window for {st.agent} in session {st.session} overflows even after every "
                f"recovery step; left out: {', '.join(missing[:5])}",
                breakdown=bd.to_dict(),
            )
        # Every step that left the window less than asked for says so where every interface looks
        # (HTTP and MCP answer only the assembly), not only in the trace's notes.
        old = reset.old_session if reset is not None else st.session
        asm.warnings.extend([*receipts(steps, old), *fallbacks])  # the trace's list, too (run.py)
        asm.trace.notes["session"] = {
            "session": st.session,
            "steps": steps,
            "compactions": [c.summary.id for c in compactions if c.summary],
            "layers": bd.layers,
            "gauge": bd.gauge.to_dict(),
            "files": [f.to_dict() for f in bd.files],
            "missing": missing,
        }
        if mgr.assembler.persist_traces and (steps or missing):
            # The trace was persisted by assemble; store it again only when a step was taken.
            mgr.store.put_doc(
                "traces",
                asm.trace.id,
                st.project,
                asm.trace.to_json_dict(),  # its items as rows unless read (traces/rows.py)
                asm.trace.created_at,
                key=st.agent,
            )
        return SessionWindow(
            project=st.project,
            agent=st.agent,
            session=st.session,
            assembly=asm,
            breakdown=bd,
            budget=bud,
            tools=plan.tools,
            tools_tokens=plan.tools_tokens,
            compactions=compactions,
            reset=reset,
        )


def calibrate(
    mgr: SessionHost, window: SessionWindow, usage: Mapping[str, Any]
) -> accounting.Calibration:
    """Compare the provider's reported prompt tokens with our count of the same window; the
    running ratio per model shrinks later windows when the provider counts more."""
    if not isinstance(window, SessionWindow):
        raise ValidationError("window", window, "pass the SessionWindow that was sent")
    provider = accounting.prompt_tokens(usage)
    w = window
    cal = accounting.record(
        mgr.store, w.project, w.budget.model, w.total_tokens, provider, mgr.clock()
    )
    trace = window.assembly.trace
    trace.notes.setdefault("session", {})["calibration"] = cal.to_dict()
    if mgr.assembler.persist_traces:
        doc = trace.to_json_dict()
        mgr.store.put_doc(
            "traces", trace.id, window.project, doc, trace.created_at, key=window.agent
        )
    return cal
