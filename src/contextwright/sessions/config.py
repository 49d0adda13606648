"""Session settings: how many turns stay verbatim, when compaction fires, and the caps.

One typed object with documented fields, validated on creation, so that a bad setting fails with
the field, the value and the fix instead of misbehaving a thousand turns later.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ValidationError


def _whole(field: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValidationError(field, value, f"give a whole number from {low} to {high}")


@dataclass(frozen=True)
class SessionConfig:
    keep_turns: int = 6
    """Turns kept verbatim by compaction (a tool call with its result is one turn); 4 to 8."""
    threshold: float = 0.7
    """Compaction fires when history passes this fraction of what history + workspace may use."""
    tool_result_cap: int = 8_000
    """Tool results over this many tokens are cut in the window, with a marker."""
    file_cap: int = 4_000
    """Per workspace file: longer files are cut and flagged as truncated in the diagnostics."""
    personal_cap: int = 2_000
    """Per personalization file (soul.md, user.md, memory.md)."""
    summary_tokens: int = 800
    """The token bound of one compaction summary."""
    memory_limit: int = 8
    """Memory records re-injected by relevance into each window."""
    workspace: Path | None = None
    """Directory with soul.md, user.md, memory.md and memory/YYYY-MM-DD.md; None: records only."""

    def __post_init__(self) -> None:
        _whole("keep_turns", self.keep_turns, 4, 8)
        if (
            not isinstance(self.threshold, int | float)
            or isinstance(self.threshold, bool)
            or not 0.1 <= self.threshold <= 0.95
        ):
            raise ValidationError("threshold", self.threshold, "give a fraction from 0.1 to 0.95")
        _whole("tool_result_cap", self.tool_result_cap, 64, 1_000_000)
        _whole("file_cap", self.file_cap, 64, 1_000_000)
        _whole("personal_cap", self.personal_cap, 64, 1_000_000)
        _whole("summary_tokens", self.summary_tokens, 64, 20_000)
        _whole("memory_limit", self.memory_limit, 0, 100)
        if self.workspace is not None:
            if not isinstance(self.workspace, str | Path):
                raise ValidationError("workspace", self.workspace, "give a directory path")
            object.__setattr__(self, "workspace", Path(self.workspace))
