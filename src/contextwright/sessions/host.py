"""What the session steps (compaction, flush, reset, undo, window) use of the SessionManager, as
a Protocol: the manager implements it, and the steps import this, never the manager, so that
imports point one way. What the steps return to each other (a Compaction, a Reset, a
MemoryFlush) is typed `Any` here for the same reason; their own modules type it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..ports import Store, Summarizer, Tokenizer
from ..records import Record
from .config import SessionConfig
from .layers import Plan, PlanBoard
from .scopes import Scope
from .state import SessionState
from .turns import Turn

if TYPE_CHECKING:
    from ..assembly.run import Assembler
    from ..recordbook import RecordBook


class SessionHost(Protocol):
    store: Store
    counter: Tokenizer
    clock: Callable[[], float]
    config: SessionConfig
    summarizer: Summarizer
    board: PlanBoard
    book: RecordBook
    assembler: Assembler

    def load_state(self, project: str, agent: str, session: str) -> SessionState: ...
    def save_state(self, st: SessionState) -> None: ...
    def live_of(self, st: SessionState) -> list[Record]: ...
    def plan(
        self, st: SessionState, layers: Any, task: str, *, keep: int, purge: bool, drop: bool
    ) -> Plan: ...
    def flush_state(self, st: SessionState, turns: Sequence[Turn]) -> Any: ...
    def compact_state(self, st: SessionState, *, trigger: str, keep: int) -> Any: ...
    def reset_state(
        self,
        st: SessionState,
        *,
        new_session: str | None,
        reason: str,
        drafts: list[tuple[Scope, list[Turn], str]] | None = None,
    ) -> Any: ...
