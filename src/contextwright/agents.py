"""The agents of each project: registered ones (a document with a role profile) and the ones
known only because they wrote or were addressed. Read on every call, so that another process's
registration is seen; parsed again only when the document changed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from .errors import NotFound, ValidationError
from .ports import Query, ReadsDocWithVersion, Store, capable
from .records import check_display_name, check_identifier, check_json_text, check_name
from .roles import ROLE_PROFILES, Agent, RoleProfile, check_kinds, profile_for


class AgentDirectory:
    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        self._known: set[tuple[str, str]] = set()
        self._docs: dict[tuple[str, str], tuple[dict[str, Any], Agent]] = {}

    def register(
        self,
        project: str,
        agent: str,
        role: str = "default",
        profile: RoleProfile | Mapping[str, Any] | None = None,
    ) -> Agent:
        check_identifier("project", project)
        check_display_name("agent", agent)
        check_name("role", role)
        if profile is None:
            if role not in ROLE_PROFILES:
                # A typo would silently give default weights; a new role needs its weights.
                raise ValidationError(
                    "role",
                    role,
                    f"use one of {', '.join(ROLE_PROFILES)}, or give a profile "
                    "(kind_weights, source_weights) to define it",
                    problem="is not a known role",
                )
            prof = profile_for(role)
        elif isinstance(profile, RoleProfile):
            prof = profile
        else:
            check_json_text("profile", profile)
            prof = RoleProfile.from_dict(profile)
        check_kinds(prof)
        a = Agent(id=agent, role=role, profile=prof.check_model())
        check_json_text("profile", a.to_dict()["profile"])
        self.store.put_doc(
            "agents", f"{project}/{agent}", project, a.to_dict(), self.clock(), key=agent
        )
        self._known.add((project, agent))
        return a

    def get(self, project: str, agent: str) -> Agent:
        check_identifier("project", project)
        check_name("agent", agent)
        return self._agent(
            project, agent, self.store.get_doc("agents", project, f"{project}/{agent}")
        )

    def get_at_version(
        self, project: str, agent: str, words: Sequence[str] = ()
    ) -> tuple[Agent, int | None]:
        """`get`, and the project's store version read in the same round trip where the store
        can (`ReadsDocWithVersion`: PostgreSQL); None where it cannot. `words`: the task's,
        whose counts for full text the store may read in that round trip too."""
        store = self.store
        if not capable(store, ReadsDocWithVersion):
            return self.get(project, agent), None
        check_identifier("project", project)
        check_name("agent", agent)
        doc, version = cast(ReadsDocWithVersion, store).doc_with_version(
            "agents", project, f"{project}/{agent}", words
        )
        return self._agent(project, agent, doc), version

    def _agent(self, project: str, agent: str, doc: dict[str, Any] | None) -> Agent:
        if doc is not None:
            seen = self._docs.get((project, agent))
            if seen is None or seen[0] != doc:
                if len(self._docs) >= 4096:
                    self._docs.clear()
                seen = self._docs[(project, agent)] = (doc, Agent.from_dict(doc))
            return seen[1]
        if self.is_known(project, agent):
            return Agent(id=agent)
        raise NotFound(
            "agent",
            agent,
            f"register it as an agent of {project!r} (engine.register_agent, PUT /v1/projects/"
            f"{project}/agents/{{agent}}) or store a record written by it (post_message over MCP)",
        )

    def list(self, project: str) -> list[Agent]:
        check_identifier("project", project)
        registered = {
            d["id"]: Agent.from_dict(d)
            for d in self.store.list_docs("agents", project, limit=10_000)
        }
        for name in self.store.agents(project):
            registered.setdefault(name, Agent(id=name))
        return [registered[k] for k in sorted(registered)]

    def is_known(self, project: str, agent: str) -> bool:
        """Registered, or the author or an addressee of a record of the project."""
        if (project, agent) in self._known:
            return True
        known = bool(
            self.store.get_doc("agents", project, f"{project}/{agent}")
            or self.store.query(Query(project, None, author=agent, limit=1))
            or self.store.query(Query(project, None, addressed_to=agent, limit=1))
        )
        if known:
            self._known.add((project, agent))
        return known
