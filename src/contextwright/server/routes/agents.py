"""Projects, agents and role profiles; and the project's key-value memory."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict

from ...roles import ROLE_PROFILES
from ..deps import CtxDep, ProjectDep

router = APIRouter(tags=["agents"])
AgentName = Annotated[str, Path(min_length=1, max_length=200)]
# Agents are display names ("Ada Lovelace", "team/reviewer"): the last segment of the path takes
# the rest of it, so a '/' in a name (sent as %2F, which the server decodes before routing) works.


class AgentIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    role: str = "default"
    profile: dict[str, Any] | None = None


class ValueIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    value: str


@router.get("/v1/projects")
def list_projects(ctx: CtxDep) -> dict[str, Any]:
    names = [p for p in ctx.engine.store.projects() if ctx.access.allows(p)]
    return {"projects": names}


@router.get("/v1/roles")
def list_roles(ctx: CtxDep) -> dict[str, Any]:
    return {"roles": {name: p.to_dict() for name, p in ROLE_PROFILES.items()}}


@router.get("/v1/projects/{project}/agents")
def list_agents(ctx: ProjectDep) -> dict[str, Any]:
    agents = {a.id: a for a in ctx.engine.agents(ctx.project)}
    return {"agents": [agents[name].to_dict() for name in ctx.access.own_agents(agents)]}


@router.get("/v1/projects/{project}/agents/{agent:path}")
def get_agent(ctx: ProjectDep, agent: AgentName) -> dict[str, Any]:
    ctx.access.require_as(agent)
    return ctx.engine.agent(ctx.project, agent).to_dict()


@router.put("/v1/projects/{project}/agents/{agent:path}")
def register_agent(ctx: ProjectDep, agent: AgentName, body: AgentIn) -> dict[str, Any]:
    ctx.access.require_as(agent)
    return ctx.engine.register_agent(ctx.project, agent, body.role, body.profile).to_dict()


@router.get("/v1/projects/{project}/kv/{key}")
def kv_get(
    ctx: ProjectDep, key: Annotated[str, Path(min_length=1, max_length=200)]
) -> dict[str, Any]:
    return {"key": key, "value": ctx.engine.kv_get(ctx.project, key)}


@router.put("/v1/projects/{project}/kv/{key}")
def kv_set(
    ctx: ProjectDep, key: Annotated[str, Path(min_length=1, max_length=200)], body: ValueIn
) -> dict[str, Any]:
    ctx.engine.kv_set(ctx.project, key, body.value)
    return {"key": key, "value": body.value}
