"""Visibility scopes for what a session derives from its turns (summaries, memory notes, transfers).

A derived record quotes its sources, so it may reach only agents who could read every one of
them. A record's *audience* is everyone (a `project` record), or a set of agents: the author and
recipients of a `direct` record, the author alone of a `private` one. A turn's audience is the
narrowest of its records' (a tool call with its result). Turns are grouped by audience and each
group becomes its own derived record, written with exactly that audience: `project` for the
project's turns, `private` when only the writing agent may read them, `direct` to the others of
the set otherwise. No derived record is ever wider than its narrowest source.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..records import Record
from .turns import Turn


@dataclass(frozen=True)
class Scope:
    """Who may read a derived record: `members` None is the whole project."""

    members: frozenset[str] | None = None

    @property
    def is_project(self) -> bool:
        return self.members is None

    def narrow(self, other: Scope) -> Scope:
        if self.members is None:
            return other
        if other.members is None:
            return self
        return Scope(self.members & other.members)

    def within(self, other: Scope) -> bool:
        """True when everyone in this audience is also in `other` (may read what it reads)."""
        if other.members is None:
            return True
        return self.members is not None and self.members <= other.members

    def fields(self, writer: str) -> dict[str, Any]:
        """`visibility` and `to` for a record `writer` writes for this audience."""
        if self.members is None:
            return {"visibility": "project"}
        others = sorted(self.members - {writer})
        if not others:
            return {"visibility": "private"}
        return {"visibility": "direct", "to": others}

    def label(self, writer: str) -> str:
        """A short tag for a heading: '' for the project, 'private', or 'direct: a, b'."""
        if self.members is None:
            return ""
        others = sorted(self.members - {writer})
        return f"direct: {', '.join(others)}" if others else "private"

    def key(self, writer: str) -> str:
        """A stable text for ids and dedup keys ('project', 'private:a', 'direct:a,b')."""
        if self.members is None:
            return "project"
        others = sorted(self.members - {writer})
        names = ",".join(sorted(self.members))
        return f"direct:{names}" if others else f"private:{names}"

    def order(self) -> tuple[int, tuple[str, ...]]:
        """Widest first: the project, then direct sets by size and name, then private."""
        if self.members is None:
            return (0, ())
        return (
            1 if len(self.members) > 1 else 2,
            (f"{len(self.members):04}", *sorted(self.members)),
        )


PROJECT = Scope()


def of_record(record: Record) -> Scope:
    if record.visibility == "project":
        return PROJECT
    if record.visibility == "direct":
        return Scope(frozenset({record.author, *record.to}))
    return Scope(frozenset({record.author}))


def of_turn(turn: Turn) -> Scope:
    scope = PROJECT
    for r in turn.records:
        scope = scope.narrow(of_record(r))
    return scope


def group(turns: Iterable[Turn]) -> list[tuple[Scope, list[Turn]]]:
    """Turns by audience, widest audience first, each group in the turns' order."""
    groups: dict[Scope, list[Turn]] = {}
    for t in turns:
        groups.setdefault(of_turn(t), []).append(t)
    return sorted(groups.items(), key=lambda kv: kv[0].order())
