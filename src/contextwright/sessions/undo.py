"""Undoing a compaction, and what a compaction replaced: the "what was lost" view.

A compaction writes summaries and changes only the compacting agent's session state (which ids
left its view, the cutoff, the protected records). Each compaction keeps in that state exactly
what it changed, so the newest one can be undone: its summaries are marked `cancelled` (they
then stand in for nothing, `sources.session_view`) and the state is put back, so the session's
window is the one it was before. The originals never left the store, so nothing has to be
restored but the view. The last `state.MAX_UNDO` compactions can be undone, newest first, and
inspected: which records each summary replaced (id, kind, author, tokens) and what it kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from . import state as states

if TYPE_CHECKING:
    from .host import SessionHost

UNDONE = "cancelled"  # the status of an undone compaction's summaries


@dataclass
class Undo:
    """One undone compaction: its summaries (now `cancelled`) and the records back in view."""

    session: str
    summaries: list[str]
    restored: list[str]
    remaining: int  # compactions of this session that can still be undone

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "summaries": list(self.summaries),
            "restored": list(self.restored),
            "remaining": self.remaining,
        }


@dataclass
class CompactionReport:
    """What one compaction replaced and what its summaries kept, as its agent may see it."""

    trigger: str
    at: float
    tokens_before: int
    tokens_after: int
    summaries: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "at": self.at,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summaries": [dict(s) for s in self.summaries],
        }


def run_undo(mgr: SessionHost, st: states.SessionState) -> Undo:
    if not st.undo:
        raise ValidationError(
            "session",
            st.session,
            f"{st.agent} has no compaction of this session left to undo (the last "
            f"{states.MAX_UNDO} can be undone); list them with compactions()",
            problem="has no compaction to undo",
        )
    entry = st.undo.pop()
    for sid in entry["summaries"]:
        mgr.book.set_status(st.project, sid, UNDONE, by=st.agent, note="compaction undone")
    st.cutoff = entry["cutoff"]
    st.protected = list(entry["protected"])
    st.summary_ids = list(entry["summary_ids"])
    for rid in entry["hidden_added"]:
        st.hidden.pop(rid, None)
    st.hidden.update(entry["hidden_dropped"])
    st.note({"event": "compaction undone", "summaries": entry["summaries"], "at": mgr.clock()})
    mgr.save_state(st)
    restored = [
        rid
        for s in mgr.store.get_many(st.project, entry["summaries"])
        for rid in s.meta.get("replaces", [])
        if isinstance(rid, str)
    ]
    return Undo(st.session, list(entry["summaries"]), restored, len(st.undo))


def reports(mgr: SessionHost, st: states.SessionState) -> list[CompactionReport]:
    """The compactions that can still be undone, newest first."""
    store = mgr.store

    def visible(ids: list[str]) -> dict[str, Any]:
        # get_many reads by id without a visibility filter: apply it here.
        return {r.id: r for r in store.get_many(st.project, ids) if r.visible_to(st.agent)}

    entries = list(reversed(st.undo))
    summaries = visible([sid for e in entries for sid in e["summaries"]])
    replaced = visible(
        [
            rid
            for s in summaries.values()
            for rid in s.meta.get("replaces", [])
            if isinstance(rid, str)
        ]
    )
    out = []
    for e in entries:
        report = CompactionReport(e["trigger"], e["at"], e["tokens_before"], e["tokens_after"])
        for sid in e["summaries"]:
            s = summaries.get(sid)
            if s is None:
                continue
            ids = [i for i in s.meta.get("replaces", []) if i in replaced]
            report.summaries.append(
                {
                    "id": s.id,
                    "scope": s.meta.get("scope", "project"),
                    "visibility": s.visibility,
                    "to": list(s.to),
                    "tokens": s.tokens,
                    "content": s.content,
                    "replaced": [
                        {
                            "id": r.id,
                            "kind": r.kind,
                            "author": r.author,
                            "tokens": r.tokens,
                            "created_at": r.created_at,
                        }
                        for r in (replaced[i] for i in ids)
                    ],
                    "replaced_tokens": sum(replaced[i].tokens for i in ids),
                    "kept": list(s.meta.get("kept", [])),
                    "protected": list(s.meta.get("protected", [])),
                }
            )
        out.append(report)
    return out
