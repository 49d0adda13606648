"""API keys scoped to projects, and optionally to agents. A key for project A can neither read nor
write project B; a key for A's agent alice can act in A only as alice.

Keys come from Settings.api_keys (a KeyScope each: projects, ["*"] for admin, or one project with
its agents). The key travels as `Authorization: Bearer KEY` or `X-API-Key: KEY`. With no keys
configured (loopback use) every request acts as admin. Records, tasks and traces found by id in
another project, or outside the key's agents' views, answer 404, so a key cannot even learn that
they exist. docs/security.md states the whole model.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from fastapi import Request

from ..records import Record
from ..settings import ADMIN, KeyScope, Settings
from .problems import HTTPProblem


@dataclass(frozen=True)
class Access:
    projects: tuple[str, ...]
    agents: frozenset[str] | None = None
    """The only agents this key may act as; None: any agent of its projects."""

    @classmethod
    def of(cls, scope: KeyScope) -> Access:
        return cls(scope.projects, None if scope.agents is None else frozenset(scope.agents))

    @property
    def admin(self) -> bool:
        return ADMIN in self.projects

    def allows(self, project: str) -> bool:
        return self.admin or project in self.projects

    def require(self, project: str) -> None:
        if not self.allows(project):
            raise HTTPProblem(
                403,
                "Forbidden",
                f"this API key may not use project {project!r}; it is scoped to "
                f"{', '.join(self.projects)}",
                field="project",
            )

    def require_as(self, agent: str | None, field: str = "agent") -> None:
        """The request acts as `agent` (reads its view, writes as its author): an agent-scoped
        key must name one of its own agents."""
        if self.agents is None:
            return
        mine = ", ".join(sorted(self.agents))
        if agent is None:
            raise HTTPProblem(
                422,
                "Invalid request",
                f"{field} is missing: this API key acts only as {mine}; name which",
                field=field,
            )
        if agent not in self.agents:
            raise HTTPProblem(
                403,
                "Forbidden",
                f"this API key may not act as {agent!r}; it acts only as {mine}",
                field=field,
            )

    def require_agent(self, agent: str | None, what: str) -> None:
        """A read as `agent`: only an admin key may read across every agent's visibility, and an
        agent-scoped key only as one of its agents."""
        if agent is None and not self.admin:
            raise HTTPProblem(
                422,
                "Invalid request",
                f"agent is missing: give the agent whose view of the {what} to return; "
                "only an admin key may read without one",
                field="agent",
            )
        self.require_as(agent)

    @property
    def viewers(self) -> frozenset[str] | None:
        """Whose traces this key may read (engine.trace's `agent`): its agents, or None for all."""
        return self.agents

    def sees(self, record: Record) -> bool:
        """Whether one of this key's agents may see `record` (always, for a key of all agents)."""
        return self.agents is None or any(record.visible_to(a) for a in self.agents)

    def own_agents(self, names: Iterable[str]) -> list[str]:
        """The names among `names` this key may act as."""
        return [n for n in names if self.agents is None or n in self.agents]


def presented_key(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return request.headers.get("x-api-key") or None


def resolve(settings: Settings, key: str | None) -> Access:
    if settings.open:
        return Access((ADMIN,))
    if key is None:
        raise HTTPProblem(
            401,
            "Unauthorized",
            "API key is missing: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
            field="authorization",
        )
    for candidate, scope in settings.api_keys.items():
        if hmac.compare_digest(candidate.encode(), key.encode()):
            return Access.of(scope)
    raise HTTPProblem(
        401, "Unauthorized", "API key is not valid for this server", field="authorization"
    )


async def get_access(request: Request) -> Access:
    """FastAPI dependency: who is calling, and which projects and agents they may use. Async,
    though it never waits: FastAPI runs a plain function dependency in its thread pool, and
    each such hop cost a request a thread wake-up and a turn at the GIL (deps.py)."""
    settings: Settings = request.app.state.settings
    return resolve(settings, presented_key(request))
