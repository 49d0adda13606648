"""Per-request context for routes: the engine, who is calling, and the project they may use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.responses import JSONResponse

from ..engine import Engine
from .access import Access, get_access
from .metrics import Metrics

ProjectName = Annotated[
    str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:\-]*$")
]


@dataclass(frozen=True)
class Ctx:
    engine: Engine
    access: Access
    metrics: Metrics


@dataclass(frozen=True)
class ProjectCtx(Ctx):
    project: str


def get_ctx(request: Request, access: Annotated[Access, Depends(get_access)]) -> Ctx:
    return Ctx(request.app.state.engine, access, request.app.state.metrics)


def get_project_ctx(project: ProjectName, ctx: Annotated[Ctx, Depends(get_ctx)]) -> ProjectCtx:
    ctx.access.require(project)
    return ProjectCtx(ctx.engine, ctx.access, ctx.metrics, project)


def fast_json(data: Any) -> JSONResponse:
    """Answer plain JSON data directly: FastAPI's generic encoder walks every nested value and
    costs more than the assemble itself on a large trace; our payloads are JSON already."""
    return JSONResponse(data)


CtxDep = Annotated[Ctx, Depends(get_ctx)]
ProjectDep = Annotated[ProjectCtx, Depends(get_project_ctx)]
