"""Compaction: older turns become structured summaries; the last N turns stay verbatim.

The split is pure: `select` decides which turns a summary replaces and which stay, counting a tool
call with its result as one turn, so a pair is never split. Corrections, pinned instructions and
pending tool calls are never summarized away: they stay verbatim in the window. Previous
summaries are folded into the new ones (and leave the window with the turns they covered).

A summary quotes its turns, so there is one summary per visibility scope (scopes.py): the
project's turns make a project summary, the agent's private turns a private one, direct turns a
direct summary to the same agents. Each is a `summary` record whose `meta.replaces` lists the
records it replaces. The replacement applies to the compacting agent's view only (its session
state hides those ids; `sources.session_view` lets only the author's summaries stand in): no
record's status changes, so every other agent's view of the session is as it was.

Compaction never grows history: when the summaries would take as many tokens as the turns they
replace (a dozen short turns), nothing is written and `Compaction.skipped` says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..assembly.packing import truncate_text
from ..assembly.sources import SESSION_SUMMARY_TAG
from ..records import MAX_LIST_ITEMS, Record
from ..summarizers.extractive import SUMMARY_HEADING
from ..summarizers.fallback import summarize
from . import scopes
from . import state as states
from .flush import MemoryFlush
from .pruning import one_line
from .turns import Turn, build_turns, split_keep, turn_text

if TYPE_CHECKING:
    from .host import SessionHost

TRIGGERS = ("auto", "manual", "pre_flush", "emergency", "provider_overflow", "reset")
COMPACT_COMMAND = "/compact"
SUMMARY_INSTRUCTIONS = (
    "Summarize these earlier turns of an agent session as bullet points ('- ...'), one fact per "
    "line: what the user asked, what was decided and why, preferences, files and artifacts "
    "created or changed (with paths), numbers, corrections, and what is still open."
)


@dataclass(frozen=True)
class Selection:
    replace: list[Turn]  # summarized, then out of the compacting agent's view
    summaries: list[Turn]  # earlier summaries folded into the new one
    protected: list[Turn]  # older than the keep window, but stay verbatim
    kept: list[Turn]  # the last N turns

    @property
    def empty(self) -> bool:
        """Nothing to do: no turn to replace, and at most one summary per scope to fold."""
        if self.replace:
            return False
        return all(len(group) <= 1 for _, group in scopes.group(self.summaries))


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
    """What one compaction did; `summaries` is empty when there was nothing to compact. There is
    one summary per visibility scope of the replaced turns (scopes.py), widest first."""

    trigger: str
    session: str
    summaries: list[Record] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    flush: MemoryFlush | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    summarizer: str = ""
    skipped: str | None = None  # why the turns were kept as they are, when they were

    @property
    def summary(self) -> Record | None:
        """The widest summary (the project's when there is one)."""
        return self.summaries[0] if self.summaries else None

    @property
    def compacted(self) -> bool:
        return bool(self.summaries)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "session": self.session,
            "summary_id": self.summary.id if self.summary else None,
            "summary": self.summary.content if self.summary else None,
            "summaries": [summary_dict(s) for s in self.summaries],
            "replaced": len(self.replaced),
            "kept": list(self.kept),
            "protected": list(self.protected),
            "flush": self.flush.to_dict() if self.flush else None,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summarizer": self.summarizer,
            "skipped": self.skipped,
        }


def summary_dict(record: Record) -> dict[str, Any]:
    return {
        "id": record.id,
        "visibility": record.visibility,
        "to": list(record.to),
        "content": record.content,
    }


def heading(base: str, scope: scopes.Scope, writer: str) -> str:
    """`base` with the scope named inside its parentheses: '## Session Summary (compacted;
    private)'. The project's summary keeps the plain heading."""
    label = scope.label(writer)
    return f"{base[:-1]}; {label})" if label and base.endswith(")") else base


def run_compaction(
    mgr: SessionHost, st: states.SessionState, *, trigger: str, keep: int
) -> Compaction:
    turns = build_turns(mgr.live_of(st))
    sel = select(turns, keep)
    before = sum(t.tokens for t in turns)
    kept_ids = [t.key for t in sel.kept]
    if sel.empty:
        return Compaction(
            trigger, st.session, kept=kept_ids, tokens_before=before, tokens_after=before
        )
    flush = mgr.flush_state(st, [*sel.replace, *sel.protected])
    groups = scopes.group([*sel.summaries, *sel.replace])
    composed = [_compose(mgr, st, scope, group) for scope, group in groups]
    drafts = [text for text, _ in composed]
    # Who wrote them: the configured summarizer, or the extractive one where it failed.
    by = ", ".join(dict.fromkeys(name for _, name in composed))
    # A summary that is not shorter than what it replaces only loses detail: keep the turns.
    replaced_tokens = sum(t.tokens for _, group in groups for t in group)
    summary_tokens = sum(mgr.counter.count(d) for d in drafts)
    if summary_tokens >= replaced_tokens:
        n = sum(1 for _, group in groups for t in group if not t.is_summary)
        return Compaction(
            trigger,
            st.session,
            kept=kept_ids,
            flush=flush,
            tokens_before=before,
            tokens_after=before,
            summarizer=by,
            skipped=(
                f"summarizing {n} turns ({replaced_tokens} tokens) would take {summary_tokens} "
                "tokens; kept them as they are"
            ),
        )
    summaries: list[Record] = []
    replaced: list[str] = []
    for (scope, group), (content, writer) in zip(groups, composed, strict=True):
        summaries.append(_write(mgr, st, scope, group, content, writer, trigger, sel))
        replaced += [rid for t in group for rid in t.ids]
    at = {r.id: r.created_at for t in [*sel.summaries, *sel.replace] for r in t.records}
    now = mgr.clock()
    undo: dict[str, Any] = {
        "at": now,
        "trigger": trigger,
        "summaries": [s.id for s in summaries],
        "cutoff": st.cutoff,
        "protected": list(st.protected),
        "summary_ids": list(st.summary_ids),
    }
    hidden_before = dict(st.hidden)
    kept_records = [r for t in sel.kept for r in t.records]
    st.cutoff = min((r.created_at for r in kept_records), default=summaries[0].created_at)
    st.hide({rid: at[rid] for rid in replaced})
    st.protected = sorted({rid for t in sel.protected for rid in t.ids})
    st.summary_ids = [s.id for s in summaries]
    st.compactions += 1
    after = sum(s.tokens for s in summaries) + sum(t.tokens for t in [*sel.protected, *sel.kept])
    undo["hidden_added"] = [i for i in st.hidden if i not in hidden_before]
    undo["hidden_dropped"] = {i: t for i, t in hidden_before.items() if i not in st.hidden}
    undo["tokens_before"], undo["tokens_after"] = before, after
    st.undo.append(undo)
    del st.undo[: -states.MAX_UNDO]
    st.note(
        {
            "event": "compaction",
            "trigger": trigger,
            "summary": summaries[0].id,
            "summaries": st.summary_ids,
            "at": now,
            "replaced": len(replaced),
            "tokens_before": before,
            "tokens_after": after,
        }
    )
    mgr.save_state(st)
    return Compaction(
        trigger,
        st.session,
        summaries,
        replaced=replaced,
        kept=kept_ids,
        protected=[t.key for t in sel.protected],
        flush=flush,
        tokens_before=before,
        tokens_after=after,
        summarizer=by,
    )


def _compose(
    mgr: SessionHost, st: states.SessionState, scope: scopes.Scope, group: Sequence[Turn]
) -> tuple[str, str]:
    """The text of one scope's summary (its earlier summaries first), within its bound, and the
    name of the summarizer that wrote it."""
    texts = [t.head.content for t in group if t.is_summary]
    texts += [
        turn_text(t, st.agent, one_line(t.head, t.result) if t.is_tool else None)
        for t in group
        if not t.is_summary
    ]
    bullets, by = summarize(
        mgr.summarizer,
        texts,
        max_tokens=mgr.config.summary_tokens,
        instructions=SUMMARY_INSTRUCTIONS,
        counter=mgr.counter,
    )
    content = format_summary(bullets, heading(SUMMARY_HEADING, scope, st.agent))
    bound = mgr.config.summary_tokens + 16
    if mgr.counter.count(content) > bound:
        content = truncate_text(content, bound, mgr.counter)[0]
    return content, by


def _write(
    mgr: SessionHost,
    st: states.SessionState,
    scope: scopes.Scope,
    group: Sequence[Turn],
    content: str,
    writer: str,
    trigger: str,
    sel: Selection,
) -> Record:
    """One scope's summary as a record readable by exactly that scope."""
    replaced = [rid for t in group for rid in t.ids]
    previous_ids = [t.key for t in group if t.is_summary]
    return mgr.book.add(
        project=st.project,
        author=st.agent,
        kind="summary",
        session=st.session,
        content=content,
        tags=[SESSION_SUMMARY_TAG, trigger],
        refs=[*previous_ids, *[r for r in replaced if r not in previous_ids]][:MAX_LIST_ITEMS],
        meta={
            "replaces": replaced,
            "scope": scope.key(st.agent),
            "trigger": trigger,
            "summarizer": writer,
            # Even an id says a record exists: name only those this summary's readers may read.
            "kept": [t.key for t in sel.kept if scope.within(scopes.of_turn(t))],
            "protected": [t.key for t in sel.protected if scope.within(scopes.of_turn(t))],
        },
        **scope.fields(st.agent),
    )
