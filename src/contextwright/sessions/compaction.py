"""Compaction: older turns become one structured summary; the last N turns stay verbatim.

The split is pure: `select` decides which turns a summary replaces and which stay, counting a tool
call with its result as one turn, so a pair is never split. Corrections, pinned instructions and
pending tool calls are never summarized away: they stay verbatim in the window. A previous
summary is folded into the new one (and leaves the window with the turns it covered). The
manager persists the summary as a `summary` record whose `meta.replaces` lists every record it
replaces; the originals stay in the store, marked `compacted`, and only leave the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..packing import truncate_text
from ..records import MAX_LIST_ITEMS, Record
from ..summarizers.extractive import SUMMARY_HEADING
from . import state as states
from .flush import MemoryFlush
from .pruning import one_line
from .turns import Turn, build_turns, split_keep, turn_text

if TYPE_CHECKING:
    from .manager import SessionManager

TRIGGERS = ("auto", "manual", "pre_flush", "emergency", "provider_overflow", "reset")
COMPACT_COMMAND = "/compact"
SUMMARY_INSTRUCTIONS = (
    "Summarize these earlier turns of an agent session as bullet points ('- ...'), one fact per "
    "line: what the user asked, what was decided and why, preferences, files and artifacts "
    "created or changed (with paths), numbers, corrections, and what is still open."
)


@dataclass(frozen=True)
class Selection:
    replace: list[Turn]  # summarized, then marked compacted
    summaries: list[Turn]  # earlier summaries folded into the new one
    protected: list[Turn]  # older than the keep window, but stay verbatim
    kept: list[Turn]  # the last N turns

    @property
    def empty(self) -> bool:
        return not self.replace and len(self.summaries) <= 1


def select(turns: Sequence[Turn], keep: int) -> Selection:
    older, kept = split_keep(turns, keep)
    summaries = [t for t in older if t.is_summary]
    protected = [t for t in older if not t.is_summary and t.protected]
    replace = [t for t in older if not t.is_summary and not t.protected]
    return Selection(replace, summaries, protected, kept)


def format_summary(bullets: str, heading: str = SUMMARY_HEADING) -> str:
    """The spec's structured summary: a heading, then one `- ` bullet per line."""
    lines = []
    for raw in bullets.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line[0] in "*•" and len(line) > 1:
            line = line[1:].strip()
        lines.append(line if line.startswith("- ") else f"- {line.lstrip('- ')}")
    if not lines:
        lines = ["- (no lasting facts in the compacted turns)"]
    return heading + "\n" + "\n".join(lines)


@dataclass
class Compaction:
    """What one compaction did; `summary` is None when there was nothing to compact."""

    trigger: str
    session: str
    summary: Record | None
    replaced: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    flush: MemoryFlush | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    summarizer: str = ""

    @property
    def compacted(self) -> bool:
        return self.summary is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "session": self.session,
            "summary_id": self.summary.id if self.summary else None,
            "summary": self.summary.content if self.summary else None,
            "replaced": len(self.replaced),
            "kept": list(self.kept),
            "protected": list(self.protected),
            "flush": self.flush.to_dict() if self.flush else None,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summarizer": self.summarizer,
        }


def run_compaction(
    mgr: SessionManager, st: states.SessionState, *, trigger: str, keep: int
) -> Compaction:
    engine = mgr.engine
    turns = build_turns(mgr._live(st))
    sel = select(turns, keep)
    before = sum(t.tokens for t in turns)
    kept_ids = [t.key for t in sel.kept]
    if sel.empty:
        return Compaction(
            trigger, st.session, None, kept=kept_ids, tokens_before=before, tokens_after=before
        )
    flush = mgr._flush(st, [*sel.replace, *sel.protected])
    texts = [t.head.content for t in sel.summaries]
    texts += [
        turn_text(t, st.agent, one_line(t.head, t.result) if t.is_tool else None)
        for t in sel.replace
    ]
    bullets = mgr.summarizer.summarize(
        texts, max_tokens=mgr.config.summary_tokens, instructions=SUMMARY_INSTRUCTIONS
    )
    content = format_summary(bullets)
    bound = mgr.config.summary_tokens + 16
    if engine.counter.count(content) > bound:
        content = truncate_text(content, bound, engine.counter)[0]
    replaced = [rid for t in [*sel.summaries, *sel.replace] for rid in t.ids]
    previous = [t.key for t in sel.summaries]
    summary = engine.add(
        project=st.project,
        author=st.agent,
        kind="summary",
        session=st.session,
        content=content,
        tags=["session-summary", trigger],
        refs=[*previous, *[r for r in replaced if r not in previous]][:MAX_LIST_ITEMS],
        meta={
            "replaces": replaced,
            "trigger": trigger,
            "summarizer": mgr.summarizer.name,
            "kept": kept_ids,
            "protected": [t.key for t in sel.protected],
        },
    )
    now = engine.clock()
    engine.store.set_status_many(
        st.project, replaced, "compacted", "contextwright", now, f"summarized in {summary.id}"
    )
    kept_records = [r for t in sel.kept for r in t.records]
    st.cutoff = min((r.created_at for r in kept_records), default=summary.created_at)
    st.protected = sorted({rid for t in sel.protected for rid in t.ids})
    st.summary_id = summary.id
    st.compactions += 1
    after = summary.tokens + sum(t.tokens for t in [*sel.protected, *sel.kept])
    st.note(
        {
            "event": "compaction",
            "trigger": trigger,
            "summary": summary.id,
            "at": now,
            "replaced": len(replaced),
            "tokens_before": before,
            "tokens_after": after,
        }
    )
    mgr._save(st)
    return Compaction(
        trigger,
        st.session,
        summary,
        replaced=replaced,
        kept=kept_ids,
        protected=[t.key for t in sel.protected],
        flush=flush,
        tokens_before=before,
        tokens_after=after,
        summarizer=mgr.summarizer.name,
    )
