"""Session reset: a clean slate that still knows how the last session ended.

A reset starts a new session id, carries a short transfer summary of the old session's outcome
(its compaction summaries, its decisions and the conclusions of its tool calls, never their raw
output), and re-injects memory by relevance in the new session's windows. Like compaction, it
writes one transfer summary per visibility scope of the old turns (scopes.py), each readable by
exactly the agents who could read its sources. The old session's
records all stay in the store; its state says which session replaced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..assembly.packing import truncate_text
from ..assembly.sources import SESSION_SUMMARY_TAG
from ..errors import ValidationError
from ..ids import new_id
from ..records import Record
from ..summarizers.fallback import summarize
from . import scopes
from . import state as states
from .compaction import SUMMARY_INSTRUCTIONS, format_summary, heading, summary_dict
from .pruning import one_line
from .turns import Turn, build_turns, turn_text

if TYPE_CHECKING:
    from .host import SessionHost

TRANSFER_HEADING = "## Session Summary (transferred from session {session})"


def transfer_texts(turns: Sequence[Turn], agent: str) -> list[str]:
    """What the transfer summary is made from: summaries whole, messages as text, and a tool call
    only as its one-line conclusion (stale raw output does not carry over)."""
    out = []
    for t in turns:
        if t.is_tool:
            out.append(one_line(t.head, t.result))
        else:
            out.append(turn_text(t, agent))
    return out


@dataclass
class Reset:
    """A reset; `transfers` holds one transfer summary per visibility scope, widest first."""

    old_session: str
    new_session: str
    transfers: list[Record]
    reason: str
    compaction: dict[str, Any] | None = None
    carried: list[str] = field(default_factory=list)

    @property
    def transfer(self) -> Record:
        """The widest transfer summary (the project's when there is one)."""
        return self.transfers[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "old_session": self.old_session,
            "new_session": self.new_session,
            "transfer_id": self.transfer.id,
            "transfer": self.transfer.content,
            "transfers": [summary_dict(t) for t in self.transfers],
            "reason": self.reason,
            "carried": list(self.carried),
        }


def draft_transfers(
    mgr: SessionHost, st: states.SessionState, turns: Sequence[Turn]
) -> list[tuple[scopes.Scope, list[Turn], str]]:
    """The transfer summaries a reset would write, one per scope, without writing anything: the
    overflow ladder asks whether they would fit before it closes a session."""
    counter = mgr.counter
    bound = mgr.config.summary_tokens + 16
    out = []
    for scope, group in scopes.group(turns) or [(scopes.PROJECT, [])]:
        bullets, _ = summarize(
            mgr.summarizer,
            transfer_texts(group, st.agent),
            max_tokens=mgr.config.summary_tokens,
            instructions=SUMMARY_INSTRUCTIONS,
            counter=counter,
        )
        base = TRANSFER_HEADING.format(session=st.session)
        content = format_summary(bullets, heading(base, scope, st.agent))
        if counter.count(content) > bound:
            content = truncate_text(content, bound, counter)[0]
        out.append((scope, group, content))
    return out


def run_reset(
    mgr: SessionHost,
    st: states.SessionState,
    *,
    new_session: str | None,
    reason: str,
    drafts: list[tuple[scopes.Scope, list[Turn], str]] | None = None,
) -> Reset:
    new = new_session or f"s{new_id()}"
    target = mgr.load_state(st.project, st.agent, new)
    if new == st.session or target.compactions or target.previous_session or mgr.live_of(target):
        raise ValidationError("new_session", new, "give an id that no session uses yet")
    turns = build_turns(mgr.live_of(st))
    mgr.flush_state(st, turns)
    transfers = []
    for scope, group, content in drafts if drafts is not None else draft_transfers(mgr, st, turns):
        transfers.append(
            mgr.book.add(
                project=st.project,
                author=st.agent,
                kind="summary",
                session=new,
                content=content,
                tags=[SESSION_SUMMARY_TAG, "transfer"],
                # Only the summaries of this scope: a reference is no wider than its record.
                refs=[t.key for t in group if t.is_summary],
                meta={
                    "transferred_from": st.session,
                    "reason": reason,
                    "scope": scope.key(st.agent),
                },
                **scope.fields(st.agent),
            )
        )
    now = mgr.clock()
    st.status, st.next_session = "reset", new
    st.note({"event": "reset", "into": new, "reason": reason, "at": now})
    mgr.save_state(st)
    target.previous_session, target.summary_ids = st.session, [t.id for t in transfers]
    target.note({"event": "created by reset", "from": st.session, "at": now})
    mgr.save_state(target)
    return Reset(st.session, new, transfers, reason, carried=[t.id for t in transfers])
