"""Diff of two traces: a pure function. What changed between two windows, item by item, and why."""

from __future__ import annotations

from typing import Any

from .trace import Trace


def _by_key(trace: Trace) -> dict[str, dict[str, Any]]:
    return {str(i["key"]): i for i in trace.items}


def diff_traces(a: Trace, b: Trace) -> dict[str, Any]:
    """Compare two traces: request changes, token deltas per section, and every item whose fate
    differs (added, removed, kept→dropped, dropped→kept, truncated), each with both reasons."""
    ia, ib = _by_key(a), _by_key(b)
    changes: list[dict[str, Any]] = []
    for key in sorted(set(ia) | set(ib)):
        x, y = ia.get(key), ib.get(key)
        before = x["decision"] if x else "absent"
        after = y["decision"] if y else "absent"
        if before == after and (x or {}).get("tokens") == (y or {}).get("tokens"):
            continue
        item = y or x
        assert item is not None
        changes.append(
            {
                "key": key,
                "kind": item.get("kind"),
                "section": item.get("section"),
                "preview": item.get("preview", ""),
                "before": before,
                "after": after,
                "reason_before": x.get("reason") if x else "not a candidate",
                "reason_after": y.get("reason") if y else "not a candidate",
                "tokens_before": x.get("tokens", 0) if x else 0,
                "tokens_after": y.get("tokens", 0) if y else 0,
                "score_before": x.get("score") if x else None,
                "score_after": y.get("score") if y else None,
            }
        )
    request = {
        k: {"before": a.request.get(k), "after": b.request.get(k)}
        for k in sorted(set(a.request) | set(b.request))
        if a.request.get(k) != b.request.get(k)
    }
    sections = {
        s: {"before": a.sections.get(s, 0), "after": b.sections.get(s, 0)}
        for s in sorted(set(a.sections) | set(b.sections))
        if a.sections.get(s, 0) != b.sections.get(s, 0)
    }
    kept_a = {k for k, i in ia.items() if i["decision"] != "dropped"}
    kept_b = {k for k, i in ib.items() if i["decision"] != "dropped"}
    return {
        "a": a.id,
        "b": b.id,
        "tokens": {"before": a.tokens, "after": b.tokens, "delta": b.tokens - a.tokens},
        "available": {"before": a.budget.get("available"), "after": b.budget.get("available")},
        "request": request,
        "sections": sections,
        "kept_only_in_a": len(kept_a - kept_b),
        "kept_only_in_b": len(kept_b - kept_a),
        "changes": changes,
    }
