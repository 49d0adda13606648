"""What the engine remembers about one session between calls, as a JSON document in the store.

The engine keeps no state in memory between calls (many workers may serve one database), so the
session's compaction boundary, its protected records, its current summaries, the records its
compactions took out of this agent's view, and its fate (active or reset into another session)
live in the store's `sessions` collection.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..ports import Store

COLLECTION = "sessions"
MAX_LOG = 50
MAX_UNDO = 20  # compactions that can be undone (and inspected), newest last


@dataclass
class SessionState:
    project: str
    agent: str
    session: str
    created_at: float
    status: str = "active"  # "active" or "reset"
    cutoff: float | None = None  # records before this left the window (compacted or protected)
    protected: list[str] = field(default_factory=list)  # ids before the cutoff that stay verbatim
    summary_ids: list[str] = field(default_factory=list)  # this agent's summaries, one per scope
    # Records this agent's compactions replaced, by id, with their time: they leave this agent's
    # view only (their status is untouched). Entries older than the cutoff are dropped, since the
    # cutoff already keeps them out.
    hidden: dict[str, float] = field(default_factory=dict)
    compactions: int = 0
    next_session: str | None = None
    previous_session: str | None = None
    log: list[dict[str, Any]] = field(default_factory=list)
    # What each recent compaction changed in this state, so that it can be undone exactly.
    undo: list[dict[str, Any]] = field(default_factory=list)

    @property
    def doc_id(self) -> str:
        return doc_id(self.project, self.agent, self.session)

    def note(self, event: dict[str, Any]) -> None:
        self.log.append(event)
        del self.log[:-MAX_LOG]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if "summary_ids" not in data and data.get("summary_id"):
            fields["summary_ids"] = [data["summary_id"]]  # a state saved before summaries per scope
        return cls(**fields)

    def hide(self, replaced: dict[str, float]) -> None:
        """Take `replaced` out of this agent's view, forgetting what the cutoff already hides."""
        merged = {**self.hidden, **replaced}
        cutoff = self.cutoff
        self.hidden = {i: at for i, at in merged.items() if cutoff is None or at >= cutoff}


def doc_id(project: str, agent: str, session: str) -> str:
    return f"{project}/{agent}/{session}"


def load(store: Store, project: str, agent: str, session: str, now: float) -> SessionState:
    data = store.get_doc(COLLECTION, project, doc_id(project, agent, session))
    if data is None:
        return SessionState(project=project, agent=agent, session=session, created_at=now)
    return SessionState.from_dict(data)


def save(store: Store, state: SessionState, now: float) -> None:
    store.put_doc(COLLECTION, state.doc_id, state.project, state.to_dict(), now, key=state.agent)
