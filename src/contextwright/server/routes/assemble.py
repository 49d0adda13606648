"""Assemble: compute an agent's window, in the requested format, with its trace."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ...assembly.request import AssembleRequest
from ..deps import ProjectDep, fast_json

router = APIRouter(tags=["assemble"])
Format = Literal["openai", "anthropic", "markdown"]


class BudgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str = "gpt-4o"
    window: int | None = None
    reserve: int | None = None
    section_caps: dict[str, int] | None = None


class AssembleIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    agent: str
    task: str = ""
    budget: BudgetIn | int | None = Field(
        default=None, description="a Budget object, or the tokens available for the window"
    )
    format: Format | None = None
    session: str | None = None
    milestone: str | None = None
    working_memory: list[str] = Field(default_factory=list, max_length=256)
    sources: list[str] | None = None
    limits: dict[str, int] | None = None
    pipelines: list[dict[str, Any]] | None = Field(
        default=None,
        description="retrieval pipelines over the defaults, for this call only (docs/pipelines.md)",
    )


def budget_arg(budget: BudgetIn | int | None) -> Any:
    if isinstance(budget, BudgetIn):
        return budget.model_dump(exclude_none=True)
    return budget


@router.post("/v1/projects/{project}/assemble")
def assemble(
    ctx: ProjectDep,
    body: AssembleIn,
    format: Annotated[Format | None, Query(description="overrides the body's format")] = None,
    trace: Annotated[bool, Query(description="include the whole trace in the answer")] = False,
) -> JSONResponse:
    ctx.access.require_as(body.agent)
    fmt = format or body.format or "openai"
    t0 = time.perf_counter()
    request = AssembleRequest.build(
        ctx.project,
        body.agent,
        body.task,
        budget_arg(body.budget),
        fmt,
        session=body.session,
        milestone=body.milestone,
        working_memory=body.working_memory,
        sources=body.sources,
        limits=body.limits,
        pipelines=body.pipelines,
    )
    result = ctx.engine.window(request)  # the session pipeline when a session is named
    ctx.metrics.assemble_seconds.labels(format=fmt).observe(time.perf_counter() - t0)
    out = result.to_json()
    out["trace"] = result.trace.to_dict() if trace else {"summary": result.trace.summary()}
    return fast_json(out)
