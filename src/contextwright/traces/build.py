"""Building an assemble call's trace: the packer's decisions become the trace's items off the
call (a PendingTrace builds them on first read; the writer encodes them from tuples without
keeping them, `decision_json`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from ..assembly.candidates import round4, rounded_components
from ..assembly.packing import Decision
from ..ids import new_id
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

    def items_json() -> list[dict[str, Any]]:
        settle()
        return [decision_json(d) for d in decisions]

    return PendingTrace(
        items,
        (len(decisions) - dropped, truncated, dropped),
        items_json,
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
    """A decision as the trace's readers see it: `decision_json` with lists for its tuples."""
    out = decision_json(d)
    for key in ("record_ids", "sources", "reasons"):
        out[key] = list(cast(Iterable[str], out[key]))
    return out


def decision_json(d: Decision) -> dict[str, object]:
    """`decision_dict` as the trace writer encodes it: the same JSON, with the candidate's own
    tuples (of strings) where the dict has lists. What it builds lives only while the trace is
    encoded; the collector stops tracking a tuple of strings, and then the dict that holds only
    such values, at the first collection it meets, so none of it is ever promoted to the old
    generation. Lists stay tracked: with them, ~750 objects of every call were promoted and
    counted toward the next full collection (3 full collections in 200 cold calls at 100k
    records instead of 1)."""
    c = d.candidate
    records = c.records
    r = records[0] if records else None
    return {
        "key": c.key,
        "record_ids": (r.id,) if len(records) == 1 and r else tuple([x.id for x in records]),
        "kind": r.kind if r else "synthetic",
        "author": r.author if r else None,
        "section": c.section,
        "source": c.source,
        "sources": c.sources or (c.source,),
        "score": round4(c.score),
        "components": rounded_components(c.components),
        "reasons": c.reasons,
        "decision": "truncated" if d.truncated else ("kept" if d.kept else "dropped"),
        "reason": d.reason,
        "tokens": d.tokens,
        "preview": c.text[:160],
    }
