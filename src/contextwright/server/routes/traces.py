"""Traces by id and by agent; replay a stored assembly with other settings; diff two traces.

A trace is a view of what its agent saw: every id is read through engine.trace with the path's
project and the key's agents, so another project's trace, or another agent's for an agent-scoped
key, is the same 404 as an id that exists nowhere."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from ...traces.diff import diff_traces
from ...traces.reader import Viewers
from ...traces.trace import Trace
from ..deps import ProjectDep, fast_json
from .assemble import BudgetIn, Format, budget_arg

router = APIRouter(tags=["traces"])


class ReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    budget: BudgetIn | int | None = None
    format: Format | None = None
    sources: list[str] | None = None
    task: str | None = None
    rules: list[dict[str, Any]] | None = None
    pipelines: list[dict[str, Any]] | None = None  # retrieval pipelines (docs/pipelines.md)


def own_trace(ctx: ProjectDep, trace_id: str) -> Trace:
    return ctx.engine.trace(ctx.project, trace_id, ctx.access.viewers)


@router.get("/v1/projects/{project}/traces")
def list_traces(
    ctx: ProjectDep,
    agent: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> dict[str, Any]:
    viewers: Viewers = ctx.access.viewers
    if agent is not None:
        ctx.access.require_as(agent)
        viewers = agent
    traces = ctx.engine.traces(ctx.project, viewers, limit)
    return {
        "traces": [
            {
                "id": t.id,
                "agent": t.agent,
                "created_at": t.created_at,
                "task": t.request.get("task", ""),
                "tokens": t.tokens,
                "available": t.budget.get("available"),
                "latency_ms": t.latency_ms,
                "summary": t.summary(),
            }
            for t in traces
        ]
    }


@router.get("/v1/projects/{project}/traces/{trace_id}")
def get_trace(ctx: ProjectDep, trace_id: str) -> JSONResponse:
    return fast_json(own_trace(ctx, trace_id).to_dict())


@router.get("/v1/projects/{project}/traces/{a}/diff/{b}")
def diff(ctx: ProjectDep, a: str, b: str) -> dict[str, Any]:
    return ctx.engine.diff(ctx.project, a, b, ctx.access.viewers)


@router.post("/v1/projects/{project}/traces/{trace_id}/replay")
def replay(ctx: ProjectDep, trace_id: str, body: ReplayIn) -> JSONResponse:
    original = own_trace(ctx, trace_id)
    overrides = body.model_dump(exclude_none=True)
    if "budget" in overrides:
        overrides["budget"] = budget_arg(body.budget)
    result = ctx.engine.replay(ctx.project, original.id, ctx.access.viewers, **overrides)
    out = result.to_json()
    out["trace"] = result.trace.to_dict()
    out["diff"] = diff_traces(original, result.trace)
    return fast_json(out)
