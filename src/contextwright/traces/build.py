"""Building an assemble call's trace: the packer's decisions become the trace's items off the
call (a PendingTrace builds them on first read; the writer encodes them as rows, rows.py, without
keeping them, `decision_row`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..assembly.packing import Decision
from ..ids import new_id
from .rows import row_item
from .trace import PendingTrace, SourceRun


def build_trace(
    *,
    project: str,
    agent: str,
    created_at: float,
    request: dict[str, Any],
    budget: dict[str, Any],
    decisions: Sequence[Decision],
    runs: Sequence[SourceRun],
    sections: dict[str, int],
    tokens: int,
    warnings: list[str],
    timings_ms: dict[str, float],
    settle: Callable[[], None] = lambda: None,
) -> PendingTrace:
    """`settle` fills in what the packer left to count off the call (packing.Packed.settle):
    the items are built after it."""
    dropped = sum(1 for d in decisions if not d.kept and not d.truncated)
    truncated = sum(1 for d in decisions if d.truncated)

    def items() -> list[dict[str, Any]]:
        settle()
        return [decision_dict(d) for d in decisions]

    def item_rows() -> list[tuple[object, ...]]:
        settle()
        return [decision_row(d) for d in decisions]

    return PendingTrace(
        items,
        (len(decisions) - dropped, truncated, dropped),
        item_rows,
        id=new_id(),
        project=project,
        agent=agent,
        created_at=created_at,
        request=request,
        budget=budget,
        sources=[r.to_dict() for r in runs],
        sections=sections,
        tokens=tokens,
        warnings=warnings,
        timings_ms=timings_ms,
    )


def decision_dict(d: Decision) -> dict[str, object]:
    """A decision as the trace's readers see it: the item its stored row reads back as."""
    return row_item(decision_row(d))


def decision_row(d: Decision) -> tuple[object, ...]:
    """A decision as the trace writer stores it (rows.ITEM_FIELDS): what the candidate holds,
    unrounded, its components dict itself (not copied: the decisions are final once the call
    has returned). A tuple of strings, numbers and a dict of floats is untracked by the
    collector at the first collection it meets, so what the writer builds is never promoted to
    the old generation (with lists, ~750 objects of every call were, and counted toward the
    next full collection)."""
    c = d.candidate
    records = c.records
    ids: str | tuple[str, ...]
    if not records:
        ids, kind, author = (), "synthetic", None
    else:
        r = records[0]
        ids = r.id if len(records) == 1 else tuple([x.id for x in records])
        kind, author = r.kind, r.author
    return (
        c.key, ids, kind, author, c.section, c.source, c.sources, c.score, c.components,
        c.reasons, _DECISION[d.truncated][d.kept], d.reason, d.tokens, c.text[:160],
    )  # fmt: skip


# [truncated][kept] -> the item's decision (a truncated item is kept).
_DECISION = (("dropped", "kept"), ("truncated", "truncated"))
