"""Memory flush: before compaction discards history, keep what a later session will need.

From the turns about to leave the window it extracts decisions, preferences, key artifacts and
patterns (deterministic cues, no model), then writes each new one three ways: as a `memory` record
(so full-text search re-injects it by relevance in later sessions), as a line of `memory.md`, and
as a line of the daily log `memory/YYYY-MM-DD.md` in the workspace. Everything is deduplicated
against what is already there, so flushing twice writes nothing new. A note is readable by exactly
who could read the turn it came from (scopes.py); only notes from project turns reach the shared
workspace files.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..records import MAX_LIST_ITEMS, Record, content_hash
from . import scopes
from . import state as states
from .pruning import one_line
from .turns import Turn

if TYPE_CHECKING:
    from .host import SessionHost

CATEGORIES = ("decision", "preference", "artifact", "pattern")
_CUES: dict[str, re.Pattern[str]] = {
    "decision": re.compile(
        r"\b(decided|decision|chose|choose|going with|go with|settled on|agreed|approved|"
        r"we('ll| will) use|let'?s use|switch(ed)? to)\b",
        re.I,
    ),
    "preference": re.compile(
        r"\b(i prefer|prefers?|my preference|please (always|never|don'?t|do not|use|keep)|"
        r"i (like|want|hate)|no emojis|don'?t use|do not use|always use|never use)\b",
        re.I,
    ),
    "pattern": re.compile(
        r"\b(this (repo|project|codebase) uses|conventions?|we always|the pattern|"
        r"by convention|conventional commits|style guide)\b",
        re.I,
    ),
    "artifact": re.compile(
        r"\b(created|wrote|added|saved|generated|lives (at|in)|is at|moved to|renamed to)\b"
        r".*(`[^`]+`|[\w.\-]+/[\w.\-/]+|\b[\w\-]+\.\w{1,6}\b)",
        re.I,
    ),
}
_WRITE_TOOLS = re.compile(r"^(write|create|edit|save|patch|apply)", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_NOTE_CHARS = 300
MEMORY_TAG = "memory-flush"


@dataclass(frozen=True)
class Note:
    category: str
    text: str
    source_ids: tuple[str, ...]
    scope: scopes.Scope = scopes.PROJECT  # who may read the turn it came from

    @property
    def line(self) -> str:
        return f"- [{self.category}] {self.text}"


@dataclass
class MemoryFlush:
    """What one flush found and wrote."""

    notes: list[Note] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped_duplicates: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "notes": [n.line for n in self.notes],
            "records": [r.id for r in self.records],
            "files": list(self.files),
            "skipped_duplicates": self.skipped_duplicates,
        }


def _clean(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_NOTE_CHARS else text[: MAX_NOTE_CHARS - 1] + "…"


def extract_notes(turns: Sequence[Turn], agent: str) -> list[Note]:
    """Decisions, preferences, artifacts and patterns in `turns`, in order, without repeats."""
    notes: list[Note] = []
    seen: set[str] = set()

    def add(category: str, text: str, ids: Iterable[str]) -> None:
        text = _clean(text)
        key = scope.key(agent) + "\0" + content_hash(text)
        if text and key not in seen:
            seen.add(key)
            notes.append(Note(category, text, tuple(ids), scope))

    for turn in turns:
        head = turn.head
        scope = scopes.of_turn(turn)
        if turn.is_tool:
            name = str(head.meta.get("name") or head.meta.get("tool") or "")
            if _WRITE_TOOLS.match(name) and turn.result is not None:
                add("artifact", one_line(head, turn.result), turn.ids)
            continue
        if head.kind == "summary":
            continue
        for sentence in _SENTENCE.split(head.content):
            if not sentence.strip():
                continue
            for category in CATEGORIES:
                if _CUES[category].search(sentence):
                    add(category, sentence, turn.ids)
                    break
    return notes


def _norm(line: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", line.lower()).strip()


def known_lines(*paths: Path) -> set[str]:
    out: set[str] = set()
    for path in paths:
        if path.is_file():
            out.update(_norm(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln)
    return out


def write_workspace(
    workspace: Path, notes: Sequence[Note], *, now: float, session: str, agent: str
) -> tuple[list[Note], list[str]]:
    """Append new notes to memory.md and memory/YYYY-MM-DD.md; returns (new notes, files written).
    A note already in either file (compared without punctuation or case) is not written again."""
    day = datetime.fromtimestamp(now, UTC)
    memory_md = workspace / "memory.md"
    daily = workspace / "memory" / f"{day:%Y-%m-%d}.md"
    known = known_lines(memory_md, daily)
    fresh = [n for n in notes if _norm(n.line) not in known]
    if not fresh:
        return [], []
    workspace.mkdir(parents=True, exist_ok=True)
    daily.parent.mkdir(parents=True, exist_ok=True)
    written = []
    with memory_md.open("a", encoding="utf-8") as f:
        if memory_md.stat().st_size == 0:
            f.write("# Memory\n\n")
        f.writelines(n.line + "\n" for n in fresh)
    written.append(str(memory_md))
    with daily.open("a", encoding="utf-8") as f:
        if daily.stat().st_size == 0:
            f.write(f"# {day:%Y-%m-%d}\n")
        f.write(f"\n## {day:%H:%M:%S} UTC · session {session} · {agent}\n")
        f.writelines(n.line + "\n" for n in fresh)
    written.append(str(daily))
    return fresh, written


def run_flush(mgr: SessionHost, st: states.SessionState, turns: Sequence[Turn]) -> MemoryFlush:
    notes = extract_notes(turns, st.agent)
    if not notes:
        return MemoryFlush()
    ids = {n: _memory_id(st.project, n.line, n.scope.key(st.agent)) for n in notes}
    known = {r.id for r in mgr.store.get_many(st.project, list(ids.values()))}
    fresh = [n for n in notes if ids[n] not in known]
    records = mgr.book.add_many(
        {
            "id": ids[n],
            "project": st.project,
            "author": st.agent,
            "kind": "memory",
            "session": st.session,
            "content": n.text,
            "tags": [n.category, MEMORY_TAG],
            "refs": list(n.source_ids)[:MAX_LIST_ITEMS],
            "meta": {"category": n.category},
            **n.scope.fields(st.agent),
        }
        for n in fresh
    )
    files: list[str] = []
    # The workspace is one directory for every agent of the manager, and memory.md enters every
    # agent's window as personalization: only notes that every agent may read are written there.
    shared = [n for n in notes if n.scope.is_project]
    if mgr.config.workspace is not None and shared:
        _, files = write_workspace(
            mgr.config.workspace,
            shared,
            now=mgr.clock(),
            session=st.session,
            agent=st.agent,
        )
    return MemoryFlush(fresh, records, files, len(notes) - len(fresh))


def _memory_id(project: str, line: str, scope: str = "project") -> str:
    """Deterministic ids make the flush idempotent: the same note in a project and scope is one
    record. The scope is part of the id, so a private note never takes the id of a project one
    (the project's keep the ids they had before scopes)."""
    norm = " ".join(line.lower().split())
    key = f"{project}\0{norm}" if scope == "project" else f"{project}\0{scope}\0{norm}"
    digest = hashlib.blake2b(key.encode(), digest_size=12).hexdigest()
    return f"mem_{digest}"
