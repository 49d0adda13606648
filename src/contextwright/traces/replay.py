"""Replay and diff: what-if on a stored assembly. A trace keeps the request that produced it, so the
same request can run again with another budget, other sources or other rules, and the two traces
can be compared item by item: what changed, and why.

    b = engine.replay("acme", trace_id, "bob", budget={"model": "gpt-4o", "window": 2000})
    d = engine.diff("acme", trace_id, b.trace.id, "bob")   # diff.py

The Engine reads the trace as the agent (traces/reader.py, the one place that refuses a trace of
another project or agent: a replay re-computes that agent's window, so it needs the same right
as reading the trace) and hands it here with its assemble function. Replay runs against the
store as it is now; records added since the original show up in the diff as new items.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ..assembly.definitions import default_pipelines
from ..assembly.result import Assembly
from ..errors import ValidationError
from .trace import Trace

# Request fields that a replay may override; everything else comes from the stored request.
OVERRIDABLE = (
    "budget", "format", "sources", "task", "working_memory", "limits", "rules", "pipelines",
)  # fmt: skip
_BUDGET_INPUT = ("model", "window", "reserve", "section_caps")


def stored_request(trace: Trace) -> dict[str, Any]:
    """The assemble() keyword arguments that produced `trace`."""
    req = dict(trace.request)
    budget = req.get("budget")
    if isinstance(budget, Mapping):
        req["budget"] = {k: budget[k] for k in _BUDGET_INPUT if k in budget}
    notes = trace.notes.get("pipelines")
    defined = notes.get("defined") if isinstance(notes, Mapping) else None
    if req.get("pipelines") is None and defined:
        # The pipelines of a user's file ran: the same definitions run again, whatever the file
        # holds now (assembly/retrieval.py's PipelineNotes keeps them).
        req["pipelines"] = [{k: v for k, v in d.items() if k != "file"} for d in defined.values()]
    return {k: v for k, v in req.items() if v is not None}


def check_overrides(overrides: Mapping[str, Any]) -> None:
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ValidationError(
            unknown[0], overrides[unknown[0]], f"a replay may change {', '.join(OVERRIDABLE)}"
        )


def _names(pipelines: Any) -> set[str]:
    if not isinstance(pipelines, list | tuple):
        return set()
    return {
        p["name"] for p in pipelines if isinstance(p, Mapping) and isinstance(p.get("name"), str)
    }


def sources_with(stored: Any, pipelines: Any, old: Any = None) -> Any:
    """The stored request's sources as the replay's pipelines change them: one switched off
    leaves, one added joins, and one of the old call's own pipelines (`old`) that the new ones
    do not define leaves (a packaged one it redefined stays). A stored request names every
    source that ran, so without this an added pipeline would not run and a dropped or
    switched-off one would be refused as an unknown source, a field the caller never sent.
    Definitions that are not well formed are left to the engine, which names their fields."""
    if not isinstance(stored, list | tuple) or not isinstance(pipelines, list | tuple):
        return stored
    gone = _names(old) - _names(pipelines) - {p.name for p in default_pipelines().enabled}
    names = [n for n in stored if n not in gone]
    for p in pipelines:
        name = p.get("name") if isinstance(p, Mapping) else None
        if not isinstance(name, str):
            continue
        if p.get("enabled", True) is False:
            names = [n for n in names if n != name]
        elif name not in names:
            names.append(name)
    return names


def replay(trace: Trace, assemble: Callable[..., Assembly], **overrides: Any) -> Assembly:
    """Run a stored assembly's request again with `overrides` (budget, rules, sources, ...)."""
    check_overrides(overrides)
    kwargs = stored_request(trace)
    old = kwargs.get("pipelines")
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    if overrides.get("pipelines") is not None and overrides.get("sources") is None:
        kwargs["sources"] = sources_with(kwargs.get("sources"), overrides["pipelines"], old)
    accepted = inspect.signature(assemble).parameters
    if "rules" in kwargs and "rules" not in accepted:
        raise ValidationError("rules", kwargs["rules"], "this engine's assemble takes no rules")
    kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    result = assemble(**kwargs)
    result.trace.notes["replay_of"] = trace.id
    return result
