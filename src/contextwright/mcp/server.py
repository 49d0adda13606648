"""The MCP server: the tools an agent calls directly, over stdio or streamable HTTP.

Built on the official `mcp` SDK's MCPServer. Each tool is a few lines over the Engine; a library
error reaches the model as a tool error with the library's own message (field, value and fix).
Traces are resources, read as the agent the URI names, like the tools take the agent they act
as: `trace://{project}/{agent}/{trace_id}` (one trace as JSON) and `traces://{project}/{agent}`
(that agent's recent traces). A trace of another project or agent is "not found", like an id that
exists nowhere: a trace holds what its agent saw, private and direct records included.

    contextwright mcp                      # stdio, for a local agent
    contextwright mcp --transport http     # streamable HTTP on 127.0.0.1:8766/mcp

The SDK is imported by absolute name, so `contextwright.mcp` never shadows it.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from pydantic import BeforeValidator

from ..assembly.request import AssembleRequest
from ..engine import Engine
from ..errors import ContextwrightError, MissingExtra, ValidationError

T = TypeVar("T")


def _whole_tokens(value: object) -> object:
    """The SDK validates arguments in pydantic's lax mode, where `true` becomes 1 and "2000"
    becomes 2000: a budget is a number of tokens, refused otherwise as HTTP (strict) refuses it."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ValueError(
        ValidationError(
            "budget", value, "give the tokens available for the window as a whole number"
        ).message
    )


TokenCount = Annotated[int | None, BeforeValidator(_whole_tokens)]

TOOLS = (
    "post_message",
    "assemble_context",
    "search_memory",
    "complete_task",
    "compact_session",
    "session_gauge",
    "undo_compaction",
)


# Each tool's parameter names, as registered (build_server): what StrictServer accepts.
_PARAMETERS: dict[str, frozenset[str]] = {}


def _errors_as_tool_errors(fn: Callable[..., T]) -> Callable[..., T]:
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except ContextwrightError as exc:
            raise ToolError(exc.message) from exc

    return wrapper


def installed(dist: str) -> str | None:
    """'mcp 1.30.0' when the distribution is installed (so the import failed on its version)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{dist} {version(dist)}"
    except PackageNotFoundError:
        return None


def build_server(engine: Engine, name: str = "contextwright") -> Any:
    """An MCPServer exposing `engine`'s tools and traces."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ResourceError
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise MissingExtra("the MCP server", "mcp", found=installed("mcp")) from None

    class StrictServer(MCPServer):
        """Refuses arguments a tool does not take: the SDK would drop them silently, so a
        misspelt or misplaced argument (`budget` given to session_gauge) would look accepted."""

        async def call_tool(self, tool_name: str, arguments: dict[str, Any], *a: Any) -> Any:
            known = _PARAMETERS.get(tool_name)
            unknown = sorted(set(arguments) - known) if known is not None else []
            if unknown:
                from mcp.server.mcpserver.exceptions import ToolError

                raise ToolError(
                    f"{unknown[0]} is not an argument of {tool_name}: "
                    f"give only {', '.join(sorted(known or ()))}"
                )
            return await super().call_tool(tool_name, arguments, *a)

    server = StrictServer(
        name,
        instructions=(
            "Post what you say, decide and learn with post_message; call assemble_context before "
            "each model call to get your context window, computed for your role and task."
        ),
    )

    def tool(description: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def register(fn: Callable[..., T]) -> Callable[..., T]:
            _PARAMETERS[fn.__name__] = frozenset(inspect.signature(fn).parameters)
            return server.tool(description=description)(fn)

        return register

    @tool(description="Store a message, decision, question or note from an agent.")
    @_errors_as_tool_errors
    def post_message(
        project: str,
        author: str,
        content: str,
        kind: str = "message",
        to: list[str] | None = None,
        visibility: str = "project",
        tags: list[str] | None = None,
        session: str | None = None,
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "project": project,
            "author": author,
            "content": content,
            "kind": kind,
            "visibility": visibility,
            "to": to,
            "tags": tags,
            "session": session,
        }
        record = engine.add(**{k: v for k, v in fields.items() if v is not None})
        return {"id": record.id, "tokens": record.tokens, "mentions": list(record.mentions)}

    @tool(
        description="Compute this agent's context window for a task, packed into a budget (the "
        "tokens available for the window); with a session, its session window (pruned, compacted). "
        "`pipelines`: retrieval pipelines that replace or add to the defaults for this call, e.g. "
        '[{"name": "vector", "steps": [{"step": "vector", "topK": 10}]}].'
    )
    @_errors_as_tool_errors
    def assemble_context(
        project: str,
        agent: str,
        task: str = "",
        budget: TokenCount = None,
        format: str = "markdown",
        session: str | None = None,
        pipelines: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        request = AssembleRequest.build(
            project, agent, task, budget, format, session=session, pipelines=pipelines
        )
        result = engine.window(request)  # the session pipeline when a session is named
        return {
            "text": result.text,
            "messages": result.messages,
            "tokens": result.tokens,
            "available": result.available,
            "warnings": result.warnings,
            "trace_id": result.trace.id,
            "trace_uri": trace_uri(project, agent, result.trace.id),
        }

    @tool(description="Search the records this agent may see, by relevance to a query.")
    @_errors_as_tool_errors
    def search_memory(project: str, agent: str, query: str, limit: int = 10) -> dict[str, Any]:
        return {"results": search(engine, project, agent, query, limit)}

    @tool(
        description="Complete a task as `agent` with its structured handoff (a mapping, YAML or "
        "JSON); a task the agent may not see is unknown to it."
    )
    @_errors_as_tool_errors
    def complete_task(
        project: str, task_id: str, handoff: dict[str, Any] | str, agent: str
    ) -> dict[str, Any]:
        # Required, as in every other tool: the server is bound to no agent, and without one the
        # task would be read and completed unchecked (a private task's text in the answer).
        return engine.complete_task(project, task_id, handoff, by=agent).to_dict()

    @tool(description="Gauge an agent's session: tokens used against its window, with a hint.")
    @_errors_as_tool_errors
    def session_gauge(project: str, agent: str, session: str) -> dict[str, Any]:
        return _plain(engine.sessions.gauge(project, agent, session))

    @tool(description="Compact an agent's session: summarize old turns, keep recent ones.")
    @_errors_as_tool_errors
    def compact_session(project: str, agent: str, session: str) -> dict[str, Any]:
        return _plain(engine.sessions.compact(project, agent, session))

    @tool(description="Undo an agent's newest compaction of a session: its turns come back.")
    @_errors_as_tool_errors
    def undo_compaction(project: str, agent: str, session: str) -> dict[str, Any]:
        return engine.sessions.undo_compaction(project, agent, session).to_dict()

    @server.resource(
        "trace://{project}/{agent}/{trace_id}",
        mime_type="application/json",
        description="One trace of an agent's window: what went in, what was left out, and why",
    )
    def trace_resource(project: str, agent: str, trace_id: str) -> str:
        try:
            return json.dumps(engine.trace(project, trace_id, agent).to_dict())
        except ContextwrightError as exc:
            raise ResourceError(exc.message) from exc

    @server.resource(
        "traces://{project}/{agent}",
        mime_type="application/json",
        description="An agent's recent traces",
    )
    def traces_resource(project: str, agent: str) -> str:
        try:
            return json.dumps(
                [
                    {
                        "uri": trace_uri(project, agent, t.id),
                        "agent": t.agent,
                        "summary": t.summary(),
                    }
                    for t in engine.traces(project, agent, 20)
                ]
            )
        except ContextwrightError as exc:
            raise ResourceError(exc.message) from exc

    return server


def trace_uri(project: str, agent: str, trace_id: str) -> str:
    """The resource URI of a trace; names may hold any character, so each part is quoted."""
    return "trace://" + "/".join(quote(part, safe="") for part in (project, agent, trace_id))


def search(
    engine: Engine, project: str, agent: str, query: str, limit: int
) -> list[dict[str, Any]]:
    """Full-text search as `agent` sees the project (the engine's own search when it has one)."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query", query, "give the words to search for")
    if not isinstance(limit, int) or not 1 <= limit <= 100:
        raise ValidationError("limit", limit, "give a whole number from 1 to 100")
    engine.agent(project, agent)  # an unknown agent is an error, not an empty answer
    hits = engine.store.search_text(project, agent, query, limit)
    return [
        {
            "id": h.record.id,
            "author": h.record.author,
            "kind": h.record.kind,
            "content": h.record.content,
            "score": round(h.score, 4),
        }
        for h in hits
    ]


def _plain(value: Any) -> dict[str, Any]:
    if hasattr(value, "to_dict"):
        return dict(value.to_dict())
    if isinstance(value, dict):
        return value
    return {"result": value}
