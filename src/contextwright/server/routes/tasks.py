"""Tasks and handoffs (engine.tasks), and the knowledge query: a task's computed context."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field

from ...errors import ValidationError
from ...records import Record
from ...tasks.board import missing_task
from ..deps import ProjectDep

router = APIRouter(tags=["tasks"])


class TaskIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    objective: str
    acceptance_criteria: list[str] = Field(default_factory=list)
    type: str = "feature"
    complexity: str = "normal"
    dependencies: list[str] = Field(default_factory=list)
    author: str = "planner"
    assignee: str | None = None


class CompleteIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    handoff: dict[str, Any] | str = Field(description="the structured handoff (object or YAML)")
    by: str | None = None


def own_task(ctx: ProjectDep, task_id: str) -> Record:
    try:
        # A task none of the key's agents may see reads as an id that exists nowhere (get).
        return ctx.engine.tasks.get(ctx.project, task_id, ctx.access.agents)
    except ValidationError:
        # An agent-scoped key gets the same 404 for a record that is not a task.
        if ctx.access.agents is not None:
            raise missing_task(task_id) from None
        raise


@router.post("/v1/projects/{project}/tasks", status_code=status.HTTP_201_CREATED)
def create_task(ctx: ProjectDep, body: TaskIn) -> dict[str, Any]:
    ctx.access.require_as(body.author, "author")
    return ctx.engine.tasks.create(ctx.project, **body.model_dump()).to_dict()


@router.get("/v1/projects/{project}/tasks")
def list_tasks(
    ctx: ProjectDep,
    status_: Annotated[str | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> dict[str, Any]:
    found = ctx.engine.tasks.find(ctx.project, status_, limit)
    return {"tasks": [t.to_dict() for t in found if ctx.access.sees(t)]}


@router.get("/v1/projects/{project}/tasks/{task_id}")
def get_task(
    ctx: ProjectDep,
    task_id: str,
    agent: Annotated[
        str | None, Query(description="show the newest handoff this agent may see")
    ] = None,
) -> dict[str, Any]:
    task = own_task(ctx, task_id)
    # A handoff is a record with its own visibility: shown only to whom it was written to.
    if agent is not None:
        ctx.access.require_as(agent)
    viewers = ctx.access.viewers if agent is None else frozenset((agent,))
    handoff = ctx.engine.tasks.handoff(ctx.project, task.id, viewers)
    out = task.to_dict()
    out["handoff"] = (
        handoff.to_dict() if handoff is not None and hasattr(handoff, "to_dict") else None
    )
    return out


@router.post("/v1/projects/{project}/tasks/{task_id}/complete")
def complete_task(ctx: ProjectDep, task_id: str, body: CompleteIn) -> dict[str, Any]:
    # The handoff is a record authored by `by`: an agent-scoped key must name one of its agents.
    ctx.access.require_as(body.by, "by")
    own_task(ctx, task_id)
    done = ctx.engine.tasks.complete(ctx.project, task_id, body.handoff, by=body.by)
    return {
        "task": done.task.to_dict(),
        "handoff": done.handoff.to_dict(),
        "nodes": [n.id for n in done.nodes],
        "files": [f.id for f in done.files],
    }


@router.get("/v1/projects/{project}/tasks/{task_id}/context")
def computed_context(
    ctx: ProjectDep,
    task_id: str,
    request: Request,
    agent: str | None = None,
    complexity: str | None = None,
    debug: Annotated[
        bool | None,
        Query(description="Append '## Context Debug' (default: CONTEXTWRIGHT_DEBUG_CONTEXT)"),
    ] = None,
) -> dict[str, Any]:
    """The knowledge query: patterns, gotchas, decisions and dependency handoffs for a task."""
    ctx.access.require_agent(agent, "task context")
    own_task(ctx, task_id)
    if debug is None:
        debug = request.app.state.settings.debug_context
    computed = ctx.engine.tasks.computed_context(
        ctx.project, task_id, complexity, bool(debug), agent=agent
    )
    out = computed.to_dict()
    out["markdown"] = computed.render(ctx.engine.tasks.template)
    return out
