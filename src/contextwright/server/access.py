"""API keys scoped to projects. A key for project A can neither read nor write project B.

Keys come from Settings.api_keys ({key: [projects]} or ["*"] for admin). The key travels as
`Authorization: Bearer KEY` or `X-API-Key: KEY`. With no keys configured (loopback use) every
request acts as admin. Records and traces found by id in another project answer 404, so a key
cannot even learn that another project's ids exist.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Request

from ..settings import ADMIN, Settings
from .problems import HTTPProblem


@dataclass(frozen=True)
class Access:
    projects: tuple[str, ...]

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

    def require_agent(self, agent: str | None, what: str) -> None:
        """Only an admin key may read across every agent's visibility."""
        if agent is None and not self.admin:
            raise HTTPProblem(
                422,
                "Invalid request",
                f"agent is missing: give the agent whose view of the {what} to return; "
                "only an admin key may read without one",
                field="agent",
            )


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
    for candidate, projects in settings.api_keys.items():
        if hmac.compare_digest(candidate.encode(), key.encode()):
            return Access(projects)
    raise HTTPProblem(
        401, "Unauthorized", "API key is not valid for this server", field="authorization"
    )


def get_access(request: Request) -> Access:
    """FastAPI dependency: who is calling, and which projects they may use."""
    settings: Settings = request.app.state.settings
    return resolve(settings, presented_key(request))
