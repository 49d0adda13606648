"""Reading stored traces as an agent: a trace is a view of what its agent saw, so one of another
project, or of an agent the reader does not speak for, is NotFound with the same message as an
id that exists nowhere."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TypeAlias

from ..errors import NotFound, ValidationError
from ..ports import Store
from ..records import check_display_name, check_identifier, check_name
from .trace import Trace
from .writer import TraceWriter

Viewers: TypeAlias = str | Collection[str] | None
"""Whose traces a call may read: one agent, any of several agents, or None for every agent."""


def viewers_of(agent: Viewers) -> frozenset[str] | None:
    if agent is None:
        return None
    if isinstance(agent, str):
        return frozenset((check_display_name("agent", agent),))
    if not isinstance(agent, Collection):
        raise ValidationError("agent", agent, "give an agent's name, a list of names, or None")
    return frozenset(check_display_name("agent", a) for a in agent)


def read_trace(
    store: Store, writer: TraceWriter, project: str, trace_id: str, agent: Viewers = None
) -> Trace:
    check_identifier("project", project)
    check_name("trace_id", trace_id)
    viewers = viewers_of(agent)
    pending = writer.get(trace_id)
    if pending is not None and pending.project == project:
        # As the store would give it back: a JSON round trip, a copy of its own.
        found = Trace.from_dict(json.loads(json.dumps(pending.to_dict(), default=str)))
    else:
        doc = store.get_doc("traces", project, trace_id)
        if doc is None:
            raise NotFound("trace", trace_id)
        found = Trace.from_dict(doc)
    if found.project != project or (viewers is not None and found.agent not in viewers):
        raise NotFound("trace", trace_id)
    return found


def list_traces(
    store: Store, writer: TraceWriter, project: str, agent: Viewers = None, limit: int = 20
) -> list[Trace]:
    check_identifier("project", project)
    viewers = viewers_of(agent)
    writer.flush()
    if viewers is None:
        docs = store.list_docs("traces", project, limit=limit)
    else:
        docs = [
            d
            for name in sorted(viewers)
            for d in store.list_docs("traces", project, key=name, limit=limit)
        ]
        docs.sort(key=lambda d: d.get("created_at") or 0.0, reverse=True)
    return [Trace.from_dict(d) for d in docs[:limit]]
