"""Per-request context for routes: the engine, who is calling, and the project they may use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request

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


CtxDep = Annotated[Ctx, Depends(get_ctx)]
ProjectDep = Annotated[ProjectCtx, Depends(get_project_ctx)]
