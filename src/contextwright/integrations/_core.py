"""The one bridge every framework adapter stands on: framework messages in, the session window out.

An adapter turns its framework's messages into `Entry`s (user, assistant, tool_call, tool_result
or note), and the bridge appends them to the agent's session (`engine.sessions.append`), keeping
the framework's own serialization in `meta["raw"]` so that what the framework stored comes back
unchanged. Before a model call the bridge computes the session window (`engine.sessions.window`:
compaction, pruning and overflow recovery included) and hands the adapter `Part`s in window order:
the system text, then the history, a tool call always followed by its result. A part whose text is
still the record's content (not pruned, cut or summarized) carries its raw message back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..assembly.costs import fixed_cost, heading_cost
from ..assembly.render import NO_RESULT
from ..budget import Budget
from ..errors import ContextOverflow, MissingExtra, ValidationError
from ..ports import Query
from ..records import Record
from ..sessions.turns import SESSION_KINDS

if TYPE_CHECKING:
    from ..engine import Engine
    from ..sessions.window import SessionWindow

T = TypeVar("T")

ROLES = ("user", "assistant", "tool_call", "tool_result", "note")
EMPTY = "(empty)"  # records need text; the raw message keeps the real, empty one
FIT_ATTEMPTS = 4


def require(module: str, what: str, extra: str) -> Any:
    """Import an optional framework, or fail with the exact install command."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(what, extra) from exc


@dataclass
class Entry:
    """One piece of a framework message, as the session stores it."""

    role: str
    content: str
    group: str  # the framework message it came from; parts of one message share it
    raw: Any = None
    tool: str | None = None
    arguments: str | None = None
    call_id: str | None = None
    author: str | None = None
    type: str | None = None  # a note's original message type, named

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValidationError("role", self.role, f"use one of {', '.join(ROLES)}")


@dataclass
class Part:
    """One piece of the window, in order. `raw` is set only when the text is still the stored
    content, so an adapter may give the framework its own message back unchanged."""

    role: str  # system, user, assistant, tool_call, tool_result, note, summary
    text: str
    record: Record | None = None
    group: str | None = None
    raw: Any = None
    tool: str = ""
    arguments: str = "{}"
    call_id: str = ""
    author: str = ""
    type: str = ""
    exact: bool = False


@dataclass
class Window:
    parts: list[Part]
    session: SessionWindow
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def system(self) -> str:
        return self.parts[0].text if self.parts and self.parts[0].role == "system" else ""

    @property
    def history(self) -> list[Part]:
        return [p for p in self.parts if p.role != "system"]


def key_of(raw: Any) -> str:
    """A stable identity for a message without an id of its own: its canonical JSON."""
    import hashlib

    text = json.dumps(raw, sort_keys=True, default=str)
    return "h:" + hashlib.sha256(text.encode()).hexdigest()[:32]


class Bridge:
    """Records a framework's messages in one agent's session and computes that agent's window."""

    def __init__(
        self,
        engine: Engine,
        project: str,
        agent: str,
        session: str,
        *,
        framework: str,
        budget: Budget | int | None = None,
        system: str = "",
        task: str = "",
    ) -> None:
        self.engine = engine
        self.project = project
        self.agent = agent
        self.session = session
        self.framework = framework
        self.budget = engine.sessions.budget_for(project, agent, budget)
        self.system = system
        self.task = task
        self._seen: set[str] | None = None
        self._calls: dict[str, str] = {}

    # -- writing --------------------------------------------------------------------------------

    def _session_records(self) -> list[Record]:
        """Every record of the session, compacted ones too (they were seen, never re-added)."""
        q = Query(
            self.project,
            self.agent,
            kinds=SESSION_KINDS,
            session=self.session,
            limit=10_000,
            newest_first=False,
        )
        return list(self.engine.store.query(q))

    def seen(self) -> set[str]:
        if self._seen is None:
            self._seen = set()
            for r in self._session_records():
                if r.meta.get("framework") == self.framework and r.meta.get("agent") == self.agent:
                    self._seen.add(str(r.meta.get("group")))
                    if r.kind == "tool_call" and r.meta.get("call_id"):
                        self._calls[str(r.meta["call_id"])] = r.id
        return self._seen

    def mark_seen(self, group: str) -> None:
        self.seen().add(group)

    def is_new(self, group: str) -> bool:
        return group not in self.seen()

    def record(self, entries: Sequence[Entry]) -> list[Record]:
        """Append the entries to the session, in order; a group already stored is skipped."""
        seen = self.seen()
        out: list[Record] = []
        fresh = {e.group for e in entries if e.group not in seen}
        for i, e in enumerate(entries):
            if e.group not in fresh:
                continue
            out.append(self._append(e, first=i == 0 or entries[i - 1].group != e.group))
        seen.update(fresh)
        return out

    def _append(self, e: Entry, *, first: bool) -> Record:
        meta: dict[str, Any] = {"framework": self.framework, "agent": self.agent, "group": e.group}
        if first and e.raw is not None:
            meta["raw"] = e.raw
        if e.call_id:
            meta["call_id"] = e.call_id
        if e.type:
            meta["type"] = e.type
        role, reply_to = e.role, None
        content = e.content if e.content.strip() else EMPTY
        if role == "tool_result":
            reply_to = self._calls.get(e.call_id or "")
            if reply_to is None:
                # Its call is not in this session: kept, named, never rendered as an orphan.
                role, meta["type"] = "note", "tool_result without its call"
                content = f"[tool result for {e.call_id or 'an unknown call'}] {content}"
        elif role == "note" and e.type:
            content = f"[{e.type}] {content}"
        rec = self.engine.sessions.append(
            self.project,
            self.agent,
            self.session,
            role,
            content,
            author=e.author,
            tool=e.tool,
            arguments=e.arguments,
            reply_to=reply_to,
            meta=meta,
        )
        if e.role == "tool_call" and e.call_id:
            self._calls[e.call_id] = rec.id
        return rec

    def clear(self) -> int:
        """Take every live record out of the window (records are never deleted). Returns how
        many left."""
        live = self.engine.sessions.live_records(self.project, self.agent, self.session)
        for r in live:
            self.engine.set_status(self.project, r.id, "compacted", by=self.agent, note="cleared")
        self._calls.clear()
        return len(live)

    def pop(self) -> Record | None:
        """Take the newest live record out of the window; a tool result takes its call along."""
        live = self.engine.sessions.live_records(self.project, self.agent, self.session)
        if not live:
            return None
        last = live[-1]
        self.engine.set_status(self.project, last.id, "compacted", by=self.agent, note="popped")
        return last

    # -- reading --------------------------------------------------------------------------------

    def check_system(self, system: str) -> None:
        """A system prompt that cannot fit is an overflow now, before any recovery step (which
        would reset the session for nothing)."""
        counter = self.engine.counter
        need = (
            counter.count(system.strip())
            + fixed_cost(self.agent, "openai", counter)
            + heading_cost("state", counter)
        )
        available = self.budget.available
        if need >= available:
            raise ContextOverflow(
                f"the system prompt needs {need} tokens and the budget leaves {available}; "
                "give a larger budget or a shorter system prompt",
                breakdown={"system": need, "available": available},
            )

    def window(self, system: str | None = None, budget: Budget | None = None) -> Window:
        system = self.system if system is None else system
        bud = budget or self.budget
        self.check_system(system)
        # A window may come before the first turn (an empty session): the agent must exist.
        self.engine.sessions.ensure_agent(self.project, self.agent)
        win = self.engine.sessions.window(
            self.project, self.agent, self.session, self.task, bud, "openai", system=system
        )
        self.session = win.session  # a reset moves the conversation to a new session
        return Window(parts(win), win)

    def fit(
        self,
        build: Callable[[Window], T],
        count: Callable[[T], int] | None = None,
        system: str | None = None,
    ) -> T:
        """The window as the framework's messages, under the budget by the framework's own
        count when it has one: the budget shrinks by the excess until the count fits."""
        bud = self.budget
        limit = bud.available
        for _ in range(FIT_ATTEMPTS):
            out = build(self.window(system, bud))
            if count is None:
                return out
            used = count(out)
            if used <= limit:
                return out
            assert bud.window is not None
            smaller = bud.window - (used - limit) - 1
            if smaller <= (bud.reserve or 0) + 1:
                break
            bud = Budget(model=bud.model, window=smaller, reserve=bud.reserve)
        raise ContextOverflow(
            f"the window does not fit {limit} tokens by the framework's own count",
            breakdown={"available": limit},
        )


def parts(win: SessionWindow) -> list[Part]:
    asm = win.assembly
    out = [Part("system", str(asm.messages[0]["content"]))]
    for item in asm.sections.get("history") or []:
        recs = item.candidate.records
        if not recs:
            out.append(Part("note", item.text, author="context"))
            continue
        head = recs[0]
        if head.kind == "tool_call":
            out.append(_part(head, head.content, "tool_call"))
            if len(recs) > 1:
                out.append(_part(recs[1], item.text, "tool_result", call=head))
            else:
                out.append(_part(head, NO_RESULT, "tool_result", call=head, synthetic=True))
            continue
        role = {"summary": "summary", "note": "note"}.get(head.kind)
        if role is None:
            role = "assistant" if head.author == win.agent else "user"
        out.append(_part(head, item.text, role))
    return out


def _part(
    r: Record, text: str, role: str, *, call: Record | None = None, synthetic: bool = False
) -> Part:
    from ..assembly.render import tool_call_id, tool_call_parts

    exact = not synthetic and text == r.content
    group = r.meta.get("group")
    p = Part(
        role,
        "" if exact and text == EMPTY and r.meta.get("raw") is not None else text,
        record=r,
        group=str(group) if group is not None and not synthetic else None,
        raw=r.meta.get("raw") if exact else None,
        author=r.author,
        type=str(r.meta.get("type") or ""),
        exact=exact,
    )
    head = call or (r if r.kind == "tool_call" else None)
    if head is not None:
        p.tool, p.arguments = tool_call_parts(head)
        p.call_id = tool_call_id(head)
    return p


def regroup(history: Sequence[Part]) -> list[list[Part]]:
    """Parts back into the framework's messages: consecutive parts of one group form one message,
    and pairs whose calls came in one message show their calls first, then their results (the
    window lays pairs out one after another)."""
    items = list(history)
    ordered: list[Part] = []
    i = 0
    while i < len(items):
        p = items[i]
        if p.role == "tool_call" and p.group is not None:
            calls, results = [], []
            j = i
            while (
                j + 1 < len(items)
                and items[j].role == "tool_call"
                and items[j].group == p.group
                and items[j + 1].role == "tool_result"
            ):
                calls.append(items[j])
                results.append(items[j + 1])
                j += 2
            if calls:
                ordered.extend(calls)
                ordered.extend(results)
                i = j
                continue
        ordered.append(p)
        i += 1
    groups: list[list[Part]] = []
    for p in ordered:
        if groups and p.group is not None and groups[-1][-1].group == p.group:
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def raw_of(group: Sequence[Part]) -> Any:
    """The framework's own message for a group, when every part of it is shown as stored."""
    first = group[0]
    if first.raw is None or not all(p.exact for p in group):
        return None
    return first.raw


def shown(p: Part) -> str:
    """The text of a part that has no raw message: another speaker's words carry their name."""
    if p.role == "summary":
        return f"[summary of earlier turns] {p.text}"
    if p.role == "user" and p.author not in ("", "user"):
        return f"[{p.author}] {p.text}"
    if p.role == "note" and p.type and not p.text.startswith(f"[{p.type}]"):
        return f"[{p.type}] {p.text}"
    return p.text
