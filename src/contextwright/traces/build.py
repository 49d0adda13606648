"""Building an assemble call's trace: the packer's decisions become the trace's items off the
call (a PendingTrace builds them on first read, usually on the writer's thread)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..assembly.candidates import round4
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
) -> PendingTrace:
    dropped = sum(1 for d in decisions if not d.kept and not d.truncated)
    truncated = sum(1 for d in decisions if d.truncated)
    return PendingTrace(
        lambda: [decision_dict(d) for d in decisions],
        (len(decisions) - dropped, truncated, dropped),
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
    c = d.candidate
    records = c.records
    r = records[0] if records else None
    comps = c.components
    return {
        "key": c.key,
        "record_ids": [x.id for x in records],
        "kind": r.kind if r else "synthetic",
        "author": r.author if r else None,
        "section": c.section,
        "source": c.source,
        "sources": list(c.sources or [c.source]),
        "score": round(c.score, 4),
        "components": {k: round4(comps[k]) for k in sorted(comps)},
        "reasons": list(c.reasons),
        "decision": "truncated" if d.truncated else ("kept" if d.kept else "dropped"),
        "reason": d.reason,
        "tokens": d.tokens,
        "preview": c.text[:160],
    }
