"""Sessions (engine.sessions): append a turn, gauge, compact (and undo, and inspect), reset."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, status
from pydantic import BaseModel, ConfigDict, Field

from ..deps import ProjectDep

router = APIRouter(tags=["sessions"])
SessionName = Annotated[str, Path(min_length=1, max_length=200)]
Role = Literal["user", "assistant", "tool_call", "tool_result", "note", "instruction", "correction"]


class TurnIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    agent: str
    role: Role
    content: str
    author: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | str | None = None
    reply_to: str | None = None
    pinned: bool = False
    tags: list[str] = Field(default_factory=list)
    meta: dict[str, Any] | None = None


class CompactIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    agent: str
    keep: int | None = None


class ResetIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    agent: str
    new_session: str | None = None
    reason: str = "manual"


@router.post("/v1/projects/{project}/sessions/{session}/turns", status_code=status.HTTP_201_CREATED)
def append_turn(ctx: ProjectDep, session: SessionName, body: TurnIn) -> dict[str, Any]:
    ctx.access.require_as(body.agent)
    if body.author is not None:
        # A turn's default author is the session's agent, or "user" (its human) for user turns.
        ctx.access.require_as(body.author, "author")
    fields = body.model_dump(exclude={"agent", "role", "content"}, exclude_none=True)
    record = ctx.engine.sessions.append(
        ctx.project, body.agent, session, body.role, body.content, **fields
    )
    ctx.metrics.records_added.inc()
    return record.to_dict()


@router.get("/v1/projects/{project}/sessions/{session}/gauge")
def gauge(
    ctx: ProjectDep,
    session: SessionName,
    agent: Annotated[str, Query(min_length=1, max_length=200)],
    budget: Annotated[int | None, Query(ge=1)] = None,
    format: Literal["openai", "anthropic", "markdown"] = "openai",
) -> dict[str, Any]:
    ctx.access.require_as(agent)
    g = ctx.engine.sessions.gauge(ctx.project, agent, session, budget, format)
    out = g.to_dict()
    out["bar"] = g.bar()
    return out


@router.post("/v1/projects/{project}/sessions/{session}/compact")
def compact(ctx: ProjectDep, session: SessionName, body: CompactIn) -> dict[str, Any]:
    ctx.access.require_as(body.agent)
    done = ctx.engine.sessions.compact(ctx.project, body.agent, session, keep=body.keep)
    return dict(done.to_dict())


@router.post("/v1/projects/{project}/sessions/{session}/reset")
def reset(ctx: ProjectDep, session: SessionName, body: ResetIn) -> dict[str, Any]:
    ctx.access.require_as(body.agent)
    done = ctx.engine.sessions.reset(
        ctx.project, body.agent, session, new_session=body.new_session, reason=body.reason
    )
    return dict(done.to_dict())


class UndoIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    agent: str


@router.post("/v1/projects/{project}/sessions/{session}/compact/undo")
def undo_compaction(ctx: ProjectDep, session: SessionName, body: UndoIn) -> dict[str, Any]:
    ctx.access.require_as(body.agent)
    return ctx.engine.sessions.undo_compaction(ctx.project, body.agent, session).to_dict()


@router.get("/v1/projects/{project}/sessions/{session}/compactions")
def compactions(
    ctx: ProjectDep,
    session: SessionName,
    agent: Annotated[str, Query(min_length=1, max_length=200)],
) -> dict[str, Any]:
    """What the agent's compactions replaced and what their summaries kept, newest first."""
    ctx.access.require_as(agent)
    done = ctx.engine.sessions.compactions(ctx.project, agent, session)
    return {"compactions": [c.to_dict() for c in done]}
