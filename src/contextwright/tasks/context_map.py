"""The context map: which files and components exist, where, and what they are for.

Entries are `file` records (meta: component, location, notes); a completed task adds or replaces
them (a new record supersedes the older entry for the same path). `filter_context_map` is the
spec's scoring, pure: keyword in component +2, keyword in location +1, domain in notes +1, file
mentioned in location +3; entries scoring 0 are left out and the top ones kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..records import Record
from .signals import TaskSignals

# Directories that say where code lives, not what it is.
_ROOTS = {"src", "lib", "app", "apps", "packages", "pkg", "internal", "source", "code", "."}
SPEC_TAKE = 10


@dataclass(frozen=True)
class ContextEntry:
    component: str
    location: str
    notes: str
    record: Record | None = None

    @property
    def record_id(self) -> str | None:
        return self.record.id if self.record else None

    @classmethod
    def from_record(cls, r: Record) -> ContextEntry:
        meta = r.meta
        return cls(
            component=str(meta.get("component") or ""),
            location=str(meta.get("location") or meta.get("path") or ""),
            notes=str(meta.get("notes") or ""),
            record=r,
        )


@dataclass(frozen=True)
class ScoredEntry:
    entry: ContextEntry
    relevance: int
    matched: tuple[str, ...]

    @property
    def reason(self) -> str:
        return f"context map relevance {self.relevance} ({', '.join(self.matched)})"


def infer_component(path: str) -> str:
    """src/auth/jwt.ts -> auth; src/app.ts -> app; tests/test_login.py -> tests."""
    parts = [p for p in path.strip("/").split("/") if p and p not in _ROOTS]
    if len(parts) > 1:
        return parts[0]
    name = parts[0] if parts else path
    return name.split(".")[0] or name


def score_entry(signals: TaskSignals, entry: ContextEntry) -> ScoredEntry:
    component = entry.component.lower()
    location = entry.location.lower()
    notes = entry.notes.lower()
    score = 0
    matched: list[str] = []
    for kw in signals.keywords:
        if kw in component:
            score += 2
            matched.append(f"'{kw}' in component +2")
        if kw in location:
            score += 1
            matched.append(f"'{kw}' in location +1")
    for domain in signals.domains:
        if domain in notes:
            score += 1
            matched.append(f"domain {domain} in notes +1")
    for path in signals.files_mentioned:
        if path in entry.location:
            score += 3
            matched.append(f"mentions {path} +3")
    return ScoredEntry(entry, score, tuple(matched))


def filter_context_map(
    signals: TaskSignals, entries: Sequence[ContextEntry], take: int = SPEC_TAKE
) -> list[ScoredEntry]:
    """Entries with relevance > 0, best first (ties: newest entry first, then location)."""
    scored = [s for s in (score_entry(signals, e) for e in entries) if s.relevance > 0]
    scored.sort(
        key=lambda s: (
            -s.relevance,
            -(s.entry.record.created_at if s.entry.record else 0.0),
            s.entry.location,
        )
    )
    return scored[:take]
