"""Typed settings for the service edges (CLI, HTTP server, MCP server).

The environment is read once, here, with a prefix; the library itself reads only
CONTEXTWRIGHT_EMBEDDER, to resolve `embedder="auto"` (embedders/__init__.py). Every field
has a default that works on one machine: a SQLite file next to you, loopback only, no keys.

    settings = Settings.from_env()          # CONTEXTWRIGHT_DB, CONTEXTWRIGHT_API_KEYS, ...
    settings = Settings(api_keys={"k1": ("acme",), "admin": ("*",)})
    settings = Settings(api_keys={"k2-alice": {"project": "acme", "agents": ["alice"]}})

`api_keys` maps a key to its scope (a KeyScope), given in one of three forms: a list of projects
it may read and write; `["*"]`, an admin key that may see every project and list records without
an agent's visibility filter; or `{"project": "p", "agents": ["alice", ...]}`, a key that may act
in one project only as those agents (docs/security.md). With no keys configured the server is open
(meant for loopback use), and every request acts as admin.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import ValidationError

ADMIN = "*"
DEBUG_ENV_VAR = "CONTEXTWRIGHT_DEBUG_CONTEXT"
KEY_FORMS = 'give ["project", ...], ["*"] or {"project": "p", "agents": ["agent", ...]}'


@dataclass(frozen=True)
class KeyScope:
    """What one API key may do: use `projects` (ADMIN for all), and, when `agents` is set, act
    only as those agents (read their views and traces, write records they author)."""

    projects: tuple[str, ...]
    agents: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, key: str, given: object) -> KeyScope:
        """A scope from any of the settings' three forms; `key` names the field in errors."""
        where = f"api_keys.{key[:4]}…"
        if isinstance(given, KeyScope):
            return given
        if isinstance(given, str):
            given = (given,)
        if isinstance(given, list | tuple):
            if not given or not all(isinstance(p, str) and p for p in given):
                raise ValidationError(where, given, KEY_FORMS)
            return cls(tuple(given))
        if not isinstance(given, Mapping):
            raise ValidationError(where, given, KEY_FORMS)
        unknown = sorted(set(given) - {"project", "agents"})
        if unknown:
            raise ValidationError(f"{where}.{unknown[0]}", given[unknown[0]], KEY_FORMS)
        project, agents = given.get("project"), given.get("agents")
        if not isinstance(project, str) or not project or project == ADMIN:
            raise ValidationError(
                f"{where}.project", project, "name the one project this key's agents work in"
            )
        if (
            not isinstance(agents, list | tuple)
            or not agents
            or not all(isinstance(a, str) and a for a in agents)
        ):
            raise ValidationError(
                f"{where}.agents", agents, "give the agents this key may act as, e.g. ['alice']"
            )
        return cls((project,), tuple(agents))


def debug_enabled(environ: Mapping[str, str], name: str = DEBUG_ENV_VAR) -> bool:
    """Whether the flag `name` of `environ` is on (1, true, yes, on): the "## Context Debug"
    block of computed context (tasks/debug.py). Here, in the core, because settings read it."""
    return environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Settings:
    db: str = "sqlite:///contextwright.db"
    """Store URL: sqlite:///file.db, memory://, or postgresql://..."""
    host: str = "127.0.0.1"
    port: int = 8765
    api_keys: Mapping[str, KeyScope] = field(default_factory=dict)
    """API key -> its scope; given as a KeyScope or any form of KeyScope.parse (see above)."""
    max_body_bytes: int = 2_000_000
    """Request bodies above this get 413 before they are read."""
    rules_dir: str | None = None
    """A directory of JSON context rules to load at startup (when rules are available)."""
    pipelines: str | None = None
    """A file or directory of JSON retrieval pipelines that change and extend the defaults."""
    log_level: str = "warning"
    embedder: str = "auto"
    """Vector search: "auto" (minilm where the `vectors` extra is installed), "minilm", "hash",
    "static:PATH", or "none"."""
    debug_context: bool = False
    """Append the "## Context Debug" block to every computed context the CLI and the server
    render (CONTEXTWRIGHT_DEBUG_CONTEXT=true; see tasks/debug.py)."""
    assemble_slots: int | None = None
    """Assemble calls one process runs at once (`Engine(assemble_slots=...)`, gate.py): None for
    the engine's default (one per core on SQLite, four per core on PostgreSQL), 0 for no limit."""

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValidationError("port", self.port, "give a port number from 0 to 65535")
        if not isinstance(self.max_body_bytes, int) or self.max_body_bytes < 1024:
            raise ValidationError("max_body_bytes", self.max_body_bytes, "give at least 1024 bytes")
        slots = self.assemble_slots
        if slots is not None and (
            not isinstance(slots, int) or isinstance(slots, bool) or slots < 0
        ):
            raise ValidationError(
                "assemble_slots", slots, "give a whole number of calls: 0 for no limit, or more"
            )
        keys: dict[str, KeyScope] = {}
        if not isinstance(self.api_keys, Mapping):
            raise ValidationError("api_keys", self.api_keys, '{"key": scope}: ' + KEY_FORMS)
        for key, given in self.api_keys.items():
            if not isinstance(key, str) or len(key) < 8:
                raise ValidationError("api_keys", key, "use keys of at least 8 characters")
            keys[key] = KeyScope.parse(key, given)
        object.__setattr__(self, "api_keys", keys)

    @property
    def open(self) -> bool:
        """No keys configured: every request acts as admin (loopback use)."""
        return not self.api_keys

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @classmethod
    def from_env(
        cls, prefix: str = "CONTEXTWRIGHT_", environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Read PREFIX_DB, _HOST, _PORT, _API_KEYS (JSON object), _MAX_BODY_BYTES, _RULES_DIR,
        _EMBEDDER, _DEBUG_CONTEXT, _ASSEMBLE_SLOTS."""
        env = os.environ if environ is None else environ
        kwargs: dict[str, Any] = {}
        if debug_enabled(env, prefix + "DEBUG_CONTEXT"):
            kwargs["debug_context"] = True
        for name in ("db", "host", "rules_dir", "log_level", "embedder", "pipelines"):
            value = env.get(prefix + name.upper())
            if value:
                kwargs[name] = value
        for name in ("port", "max_body_bytes", "assemble_slots"):
            value = env.get(prefix + name.upper())
            if value:
                try:
                    kwargs[name] = int(value)
                except ValueError:
                    raise ValidationError(
                        prefix + name.upper(), value, "give a whole number"
                    ) from None
        raw = env.get(prefix + "API_KEYS")
        if raw:
            try:
                keys = json.loads(raw)
            except json.JSONDecodeError:
                raise ValidationError(
                    prefix + "API_KEYS",
                    "<not JSON>",
                    'give JSON like {"key": ["project"]} or '
                    '{"key": {"project": "p", "agents": ["alice"]}}',
                ) from None
            kwargs["api_keys"] = keys
        return cls(**kwargs)
