"""The layers of a session's window, as candidates for the ordinary assemble pipeline.

Spec 2 names five layers: the system prompt (rules, tool definitions, skill instructions),
personalization (soul.md, user.md, memory.md), conversation history, tool calls and results, and
workspace files; its diagnostics count the system prompt, tool definitions and skills apart. Each
becomes candidates with a recognisable key (`system:`, `skill:`, `personal:`, `file:`, or a record
id for history), so that the same packer and renderer build the window and the diagnostics can
say how many tokens each layer took. Tool definitions are no candidate: they travel in the
request's `tools` field and are counted and reserved beside the window. `SessionSource` hands a
prepared plan's candidates to `engine.assemble`; it is silent in every other assemble call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..assembly.candidates import Candidate, Item
from ..assembly.packing import truncate_text
from ..assembly.sources import SourceContext
from ..errors import ValidationError
from ..ports import Store, Tokenizer
from ..records import Record
from .pruning import Pruned, prune_result
from .turns import Turn

PERSONAL_FILES = ("soul.md", "user.md", "memory.md")
LAYERS = (
    "system",
    "tools",  # tool definitions (the request's `tools` field)
    "skills",
    "personalization",
    "history",
    "tool_results",  # tool calls with their results
    "files",
    "retrieved",
    "task",
    "overhead",
)
PLAN_LIMIT = "session_plan"  # the assemble `limits` key that switches SessionSource on


@dataclass(frozen=True)
class WorkspaceFile:
    """One file as the window may show it, with the per-file truncation flag."""

    path: str
    text: str
    tokens: int
    original_tokens: int
    omitted: int = 0

    @property
    def truncated(self) -> bool:
        return self.omitted > 0


def capped_file(path: str, text: str, cap: int, counter: Tokenizer) -> WorkspaceFile:
    original = counter.count(text)
    if original <= cap:
        return WorkspaceFile(path, text, original, original)
    cut, tokens, omitted = truncate_text(text, cap, counter)
    return WorkspaceFile(path, cut, tokens, original, omitted)


def load_personalization(
    workspace: Path | None, cap: int, counter: Tokenizer
) -> list[WorkspaceFile]:
    if workspace is None:
        return []
    out = []
    for name in PERSONAL_FILES:
        path = workspace / name
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace").strip()
            if text:
                out.append(capped_file(name, text, cap, counter))
    return out


def load_files(
    files: Sequence[str] | Mapping[str, str],
    workspace: Path | None,
    cap: int,
    counter: Tokenizer,
) -> list[WorkspaceFile]:
    """`files` is {path: content}, or paths read from the workspace (or relative to cwd)."""
    if isinstance(files, str):
        raise ValidationError("files", files, "give a list of paths or {path: content}")
    out = []
    if isinstance(files, Mapping):
        for path, text in files.items():
            if not isinstance(path, str) or not isinstance(text, str):
                raise ValidationError("files", path, "give {path: content} with text values")
            out.append(capped_file(path, text, cap, counter))
        return out
    for name in files:
        if not isinstance(name, str) or not name:
            raise ValidationError("files", name, "give each file as a path string")
        file = Path(name) if workspace is None else workspace / name
        if not file.is_file():
            raise ValidationError(
                "files", name, f"no such file{' in ' + str(workspace) if workspace else ''}"
            )
        content = file.read_text(encoding="utf-8", errors="replace")
        out.append(capped_file(name, content, cap, counter))
    return out


def tools_tokens(tools: Sequence[Mapping[str, Any]], counter: Tokenizer) -> int:
    """Tool definitions travel in the request's `tools` field, not in a message; they still take
    room in the window. Counted as their JSON (an upper bound of OpenAI's internal format)."""
    if not tools:
        return 0
    return counter.count(json.dumps(list(tools), sort_keys=True, separators=(",", ":"))) + 4


@dataclass
class Plan:
    """Everything one session window is built from, before packing."""

    project: str
    agent: str
    session: str
    turns: list[Turn]
    keep: int
    purge: bool = False
    drop_files: bool = False
    system: str = ""
    skills: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tools_tokens: int = 0
    personal: list[WorkspaceFile] = field(default_factory=list)
    files: list[WorkspaceFile] = field(default_factory=list)
    memory: list[Record] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    required: set[str] = field(default_factory=set)
    pruned: dict[str, Pruned] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    costs: dict[str, dict[str, int]] = field(default_factory=dict)  # by format, see window.py

    def kept_keys(self) -> set[str]:
        convo = [t for t in self.turns if not t.is_summary]
        return {t.key for t in convo[-self.keep :]} if self.keep else set()


def _synthetic(key: str, section: str, text: str, counter: Tokenizer, score: float) -> Candidate:
    return Candidate(
        key=key,
        section=section,
        source="session",
        text=text,
        tokens=counter.count(text),
        pinned=section != "knowledge",
        reasons=(f"session layer {key.split(':')[0]}",),
        components={"session": score},
        score=score,
        sources=("session",),
    )


def build_candidates(
    plan: Plan, ctx_counter: Tokenizer, cap: int, prune_cache: dict[tuple[str, int, str], Pruned]
) -> None:
    """Fill `plan.candidates`, `plan.required` and `plan.pruned` (pure but for the token counter)."""
    counter = ctx_counter
    out: list[Candidate] = []
    required: set[str] = set()
    if plan.system.strip():
        out.append(_synthetic("system:rules", "state", plan.system.strip(), counter, 9.0))
        required.add("system:rules")
    for i, skill in enumerate(plan.skills):
        key = f"skill:{i}"
        out.append(_synthetic(key, "state", skill.strip(), counter, 8.0 - i * 0.01))
        required.add(key)
    for f in plan.personal:
        out.append(
            _synthetic(f"personal:{f.path}", "constraints", f"### {f.path}\n{f.text}", counter, 7.0)
        )
    if not plan.drop_files:
        for i, f in enumerate(plan.files):
            text = f"### {f.path}\n{f.text}"
            out.append(_synthetic(f"file:{f.path}", "knowledge", text, counter, 6.0 - i * 0.01))
    convo = [t for t in plan.turns if not t.is_summary]
    kept = plan.kept_keys()
    rank = {t.key: i for i, t in enumerate(convo)}
    first_at = min((t.head.created_at for t in plan.turns), default=0.0)
    n = max(len(convo), 1)
    for turn in plan.turns:
        head = turn.head
        c = _history_candidate(head, counter)
        c.records = turn.records
        if turn.is_summary:
            c.created_at = first_at - 0.001  # a summary reads before the turns it precedes
            c.components["history"] = 20.0
            c.pinned = True
            required.add(c.key)
        else:
            c.components["history"] = 10.0 * (rank[turn.key] + 1) / n
            if turn.protected:
                c.components["history"] += 10.0
            if turn.protected or turn.key in kept:
                c.pinned = True
                required.add(c.key)
        if turn.is_tool and turn.result is not None:
            stale = turn.key not in kept
            one = stale or plan.purge
            ckey = (turn.result.id, cap, f"{stale}{plan.purge}" if one else "fresh")
            pruned = prune_cache.get(ckey)
            if pruned is None:
                pruned = prune_result(
                    head, turn.result, stale=stale, purge=plan.purge, cap=cap, counter=counter
                )
                prune_cache[ckey] = pruned
            plan.pruned[c.key] = pruned
            c.text, c.tokens = pruned.text, pruned.tokens
            c.created_at = turn.created_at
            c.content_hash = turn.result.content_hash
        out.append(c)
    for r in plan.memory:
        c = _history_candidate(r, counter)
        c.section = "knowledge"
        prefix = f"- [memory · {r.meta.get('category', r.kind)}]"
        c.text = f"{prefix} {r.content}"
        c.tokens = counter.count(c.text)
        c.reasons = ("memory re-injected by relevance",)
        c.components = {"session": 4.0}
        out.append(c)
    plan.candidates = out
    plan.required = required


def _history_candidate(r: Record, counter: Tokenizer) -> Candidate:
    c = Candidate(
        key=r.id,
        section="history",
        source="session",
        text=r.content,
        records=(r,),
        reasons=("session turn",),
        pinned=False,
        tokens=r.tokens,
        created_at=r.created_at,
        content_hash=r.content_hash,
        sources=("session",),
        components={"prior": 2.0},
    )
    return c


class PlanBoard:
    """Plans in flight, by the token passed through `assemble(limits={PLAN_LIMIT: token})`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plans: dict[int, Plan] = {}
        self._next = 0

    def put(self, plan: Plan) -> int:
        with self._lock:
            self._next = self._next % 10_000 + 1
            self._plans[self._next] = plan
            return self._next

    def get(self, token: int) -> Plan | None:
        with self._lock:
            return self._plans.get(token)

    def pop(self, token: int) -> None:
        with self._lock:
            self._plans.pop(token, None)


class SessionSource:
    """Feeds a session plan's candidates into assemble; returns nothing unless a plan is named."""

    name = "session"
    limit_keys = (PLAN_LIMIT,)  # the window's plan token: a `limits` key, though not a source
    inline = True  # a dictionary lookup: never worth a thread (assembly/pipeline.py)

    def __init__(self, board: PlanBoard) -> None:
        self.board = board

    def run(self, ctx: SourceContext) -> list[Candidate]:
        token = ctx.limits.get(PLAN_LIMIT, 0)
        plan = self.board.get(token) if token else None
        if plan is None or plan.project != ctx.project or plan.agent != ctx.agent:
            return []
        return [
            replace(c, components=dict(c.components))  # reasons, sources: tuples, shared
            for c in plan.candidates
        ]


def layer_of(item: Item) -> str:
    c = item.candidate
    prefix = c.key.split(":", 1)[0] if ":" in c.key else ""
    if prefix == "system":
        return "system"
    if prefix == "skill":
        return "skills"
    if prefix == "personal":
        return "personalization"
    if prefix == "file":
        return "files"
    if c.key == "task":
        return "task"
    if c.section == "history":
        return (
            "tool_results"
            if c.records and c.records[0].kind in ("tool_call", "tool_result")
            else "history"
        )
    return "retrieved"


def memory_for(
    store: Store, project: str, agent: str, turns: Sequence[Turn], task: str, limit: int
) -> list[Record]:
    """Memory records relevant to the task; without a task, at the start of a session (or
    after a reset), relevant to its first user message."""
    query = task.strip()
    convo = [t for t in turns if not t.is_summary]
    if not query and len(convo) <= 2:
        users = [t.head for t in convo if t.head.kind == "message" and t.head.author != agent]
        query = users[-1].content[:2_000] if users else ""
    if not limit or not query:
        return []
    hits = store.search_text(project, agent, query, limit * 4)
    return [h.record for h in hits if h.record.kind == "memory"][:limit]
