"""Session reset: a clean slate that still knows how the last session ended.

A reset starts a new session id, carries a short transfer summary of the old session's outcome
(its compaction summary, its decisions and the conclusions of its tool calls, never their raw
output), and re-injects memory by relevance in the new session's windows. The old session's
records all stay in the store; its state says which session replaced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records import Record
from .pruning import one_line
from .turns import Turn, turn_text

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
