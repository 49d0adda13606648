"""Records: add one, add a batch (all or nothing), get by id, list with filters."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ...errors import NotFound, ValidationError
from ...records import Record
from ..deps import ProjectDep, fast_json

router = APIRouter(tags=["records"])


class RecordIn(BaseModel):
    """A record to store; the project comes from the path (a body `project` must match it)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    content: str
    author: str
    kind: str = "message"
    project: str | None = None
    id: str | None = None
    milestone: str | None = None
    session: str | None = None
    to: list[str] | None = None
    visibility: str | None = None
    tags: list[str] | None = None
    refs: list[str] | None = None
    status: str | None = None
    supersedes: str | None = None
    reply_to: str | None = None
    pinned: bool | None = None
    created_at: float | None = None
    meta: dict[str, Any] | None = None


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    records: list[RecordIn] = Field(max_length=10_000)


def fields_for(project: str, rec: RecordIn, where: str = "project") -> dict[str, Any]:
    data = rec.model_dump(exclude_unset=True, exclude_none=True)
    given = data.pop("project", project)
    if given != project:
        raise ValidationError(where, given, f"post it under /v1/projects/{given}/records")
    data["project"] = project
    return data


def visible(ctx: ProjectDep, record: Record, agent: str | None) -> Record:
    """404 for another project's record or one the agent may not see: existence is not leaked."""
    if record.project != ctx.project or (agent is not None and not record.visible_to(agent)):
        raise NotFound("record", record.id)
    return record


@router.post("/v1/projects/{project}/records", status_code=status.HTTP_201_CREATED)
def add_record(ctx: ProjectDep, body: RecordIn) -> JSONResponse:
    ctx.access.require_as(body.author, "author")
    record = ctx.engine.add(**fields_for(ctx.project, body))
    ctx.metrics.records_added.inc()
    return fast_json(record.to_dict(), status.HTTP_201_CREATED)


@router.post("/v1/projects/{project}/records/batch", status_code=status.HTTP_201_CREATED)
def add_batch(ctx: ProjectDep, body: BatchIn) -> JSONResponse:
    for i, r in enumerate(body.records):
        ctx.access.require_as(r.author, f"records[{i}].author")
    items = [
        fields_for(ctx.project, r, f"records[{i}].project") for i, r in enumerate(body.records)
    ]
    stored = ctx.engine.add_many(items)
    ctx.metrics.records_added.inc(len(stored))
    return fast_json({"count": len(stored), "ids": [r.id for r in stored]}, status.HTTP_201_CREATED)


@router.get("/v1/projects/{project}/records/{record_id}")
def get_record(
    ctx: ProjectDep,
    record_id: str,
    agent: Annotated[str | None, Query(description="read as this agent (visibility)")] = None,
) -> dict[str, Any]:
    ctx.access.require_agent(agent, "record")
    return visible(ctx, ctx.engine.get(ctx.project, record_id), agent).to_dict()


@router.get("/v1/projects/{project}/records")
def list_records(
    ctx: ProjectDep,
    agent: Annotated[
        str | None, Query(description="list what this agent may see; admin keys may omit it")
    ] = None,
    kind: Annotated[list[str] | None, Query()] = None,
    status_: Annotated[list[str] | None, Query(alias="status")] = None,
    session: str | None = None,
    author: str | None = None,
    addressed_to: str | None = None,
    pinned: bool | None = None,
    tag: str | None = None,
    milestone: str | None = None,
    since: float | None = None,
    before: float | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 50,
    newest_first: bool = True,
) -> JSONResponse:
    ctx.access.require_agent(agent, "records")
    filters: dict[str, Any] = {
        "kinds": kind,
        "statuses": status_,
        "session": session,
        "author": author,
        "addressed_to": addressed_to,
        "pinned": pinned,
        "tag": tag.lower() if tag else None,
        "milestone": milestone,
        "since": since,
        "before": before,
        "newest_first": newest_first,
    }
    found = ctx.engine.records(
        ctx.project,
        agent=agent,
        limit=limit,
        **{k: v for k, v in filters.items() if v is not None},
    )
    return fast_json({"records": [r.to_dict() for r in found], "count": len(found)})
