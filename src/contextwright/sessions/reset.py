"""Session reset: a clean slate that still knows how the last session ended.

A reset starts a new session id, carries a short transfer summary of the old session's outcome
(its compaction summary, its decisions and the conclusions of its tool calls, never their raw
output), and re-injects memory by relevance in the new session's windows. The old session's
records all stay in the store; its state says which session replaced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..ids import new_id
from ..records import Record
from . import state as states
from .compaction import SUMMARY_INSTRUCTIONS, format_summary
from .pruning import one_line
from .turns import Turn, build_turns, turn_text

if TYPE_CHECKING:
    from .manager import SessionManager

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
    old_session: str
    new_session: str
    transfer: Record
    reason: str
    compaction: dict[str, Any] | None = None
    carried: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "old_session": self.old_session,
            "new_session": self.new_session,
            "transfer_id": self.transfer.id,
            "transfer": self.transfer.content,
            "reason": self.reason,
            "carried": list(self.carried),
        }


def run_reset(
    mgr: SessionManager, st: states.SessionState, *, new_session: str | None, reason: str
) -> Reset:
    engine = mgr.engine
    new = new_session or f"s{new_id()}"
    target = mgr._state(st.project, st.agent, new)
    if new == st.session or target.compactions or target.previous_session or mgr._live(target):
        raise ValidationError("new_session", new, "give an id that no session uses yet")
    turns = build_turns(mgr._live(st))
    mgr._flush(st, turns)
    bullets = mgr.summarizer.summarize(
        transfer_texts(turns, st.agent),
        max_tokens=mgr.config.summary_tokens,
        instructions=SUMMARY_INSTRUCTIONS,
    )
    content = format_summary(bullets, TRANSFER_HEADING.format(session=st.session))
    transfer = engine.add(
        project=st.project,
        author=st.agent,
        kind="summary",
        session=new,
        content=content,
        tags=["session-summary", "transfer"],
        refs=[st.summary_id] if st.summary_id else [],
        meta={"transferred_from": st.session, "reason": reason},
    )
    now = engine.clock()
    st.status, st.next_session = "reset", new
    st.note({"event": "reset", "into": new, "reason": reason, "at": now})
    mgr._save(st)
    target.previous_session, target.summary_id = st.session, transfer.id
    target.note({"event": "created by reset", "from": st.session, "at": now})
    mgr._save(target)
    return Reset(st.session, new, transfer, reason, carried=[transfer.id])
