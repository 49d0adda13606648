"""Replay and diff: what-if on a stored assembly. A trace keeps the request that produced it, so the
same request can run again with another budget, other sources or other rules, and the two traces
can be compared item by item: what changed, and why.

    b = replay(engine, trace_id, budget={"model": "gpt-4o", "window": 2000})
    d = diff_traces(engine.trace(trace_id), b.trace)

Replay runs against the store as it is now; records added since the original show up in the diff
as items that were not there before. `diff_traces` is a pure function of two traces.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import ValidationError
from .trace import Trace

if TYPE_CHECKING:
    from .assembly import Assembly
    from .engine import Engine

# Request fields that a replay may override; everything else comes from the stored request.
OVERRIDABLE = ("budget", "format", "sources", "task", "working_memory", "limits", "rules")
_BUDGET_INPUT = ("model", "window", "reserve", "section_caps")


def stored_request(trace: Trace) -> dict[str, Any]:
    """The assemble() keyword arguments that produced `trace`."""
    req = dict(trace.request)
    budget = req.get("budget")
    if isinstance(budget, Mapping):
        req["budget"] = {k: budget[k] for k in _BUDGET_INPUT if k in budget}
    return {k: v for k, v in req.items() if v is not None}


def replay(engine: Engine, project: str, trace_id: str, **overrides: Any) -> Assembly:
    """Run a stored assembly's request again with `overrides` (budget, rules, sources, ...)."""
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ValidationError(
            unknown[0], overrides[unknown[0]], f"a replay may change {', '.join(OVERRIDABLE)}"
        )
    trace = engine.trace(project, trace_id)
    kwargs = stored_request(trace)
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    accepted = inspect.signature(engine.assemble).parameters
    if "rules" in kwargs and "rules" not in accepted:
        raise ValidationError("rules", kwargs["rules"], "this engine's assemble takes no rules")
    kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    result: Assembly = engine.assemble(**kwargs)
    result.trace.notes["replay_of"] = trace.id
    return result


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
