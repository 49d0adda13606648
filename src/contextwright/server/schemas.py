"""What each route answers, as typed models for OpenAPI: a client generated from /openapi.json
gets a type for every success body, enums for the closed sets, and the key scheme.

The models document; they do not filter. Routes keep answering the library's own `to_dict()`
(large traces are sent as they are, see deps.fast_json), and tests/test_server_api.py checks that
real answers validate against these schemas, so they cannot drift apart. The table is keyed by
method and path, not attached to each route, so the routes stay a few lines over the engine.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from ..assembly.render import FORMATS
from ..records import KINDS, STATUSES, VISIBILITIES

Kind = Literal[KINDS]  # type: ignore[valid-type]
Visibility = Literal[VISIBILITIES]  # type: ignore[valid-type]
Status = Literal[STATUSES]  # type: ignore[valid-type]
Format = Literal[FORMATS]  # type: ignore[valid-type]
Decision = Literal["kept", "truncated", "dropped"]


class Out(BaseModel):
    # Answers may gain fields; a client must not break on one it does not know.
    model_config = ConfigDict(extra="allow")


class RecordOut(Out):
    id: str
    project: str
    milestone: str | None
    session: str | None
    author: str
    kind: Kind
    to: list[str]
    visibility: Visibility
    mentions: list[str]
    tags: list[str]
    refs: list[str]
    status: Status | None
    supersedes: str | None
    reply_to: str | None
    pinned: bool
    created_at: float
    content: str
    tokens: int
    content_hash: str
    meta: dict[str, Any]


class RecordList(Out):
    records: list[RecordOut]
    count: int


class BatchOut(Out):
    count: int
    ids: list[str]


class ProfileOut(Out):
    name: str
    kind_weights: dict[str, float]
    source_weights: dict[str, float]
    default_kind_weight: float
    default_model: str
    default_window: int
    complexity: Literal["easy", "normal", "complex"]


class AgentOut(Out):
    id: str
    role: str
    profile: ProfileOut


class AgentList(Out):
    agents: list[AgentOut]


class ProjectList(Out):
    projects: list[str]


class RoleList(Out):
    roles: dict[str, ProfileOut]


class KeyValue(Out):
    key: str
    value: str


class Health(Out):
    status: Literal["ok"]
    version: str


class TraceOut(Out):
    id: str
    project: str
    agent: str
    created_at: float
    request: dict[str, Any]
    budget: dict[str, Any]
    sources: list[dict[str, Any]]
    items: list[dict[str, Any]]
    sections: dict[str, int]
    tokens: int
    warnings: list[str]
    timings_ms: dict[str, float]
    latency_ms: float
    notes: dict[str, Any]


class TraceSummary(Out):
    id: str
    agent: str
    created_at: float
    task: str
    tokens: int
    available: int | None
    latency_ms: float
    summary: str


class TraceList(Out):
    traces: list[TraceSummary]


class TraceDiff(Out):
    a: str
    b: str
    tokens: dict[str, int]
    available: dict[str, int | None]
    request: dict[str, Any]
    sections: dict[str, Any]
    kept_only_in_a: int
    kept_only_in_b: int
    changes: list[dict[str, Any]]


class WindowItem(Out):
    key: str
    section: str
    source: str
    tokens: int
    text: str


class AssemblyOut(Out):
    format: Format
    tokens: int
    available: int
    sections: dict[str, list[WindowItem]]
    messages: list[dict[str, Any]]
    system: str | None
    text: str
    payload: Any = Field(description="what is sent to the model, in `format`'s shape")
    warnings: list[str]
    breakdown: dict[str, Any]
    trace_id: str
    trace: dict[str, Any] = Field(description="{summary} or, with ?trace=true, the whole trace")


class ReplayOut(AssemblyOut):
    trace: TraceOut  # type: ignore[assignment]
    diff: TraceDiff


class TaskOut(RecordOut):
    handoff: dict[str, Any] | None = None


class TaskList(Out):
    tasks: list[RecordOut]


class CompletionOut(Out):
    task: RecordOut
    handoff: RecordOut
    nodes: list[str]
    files: list[str]


class ComputedContextOut(Out):
    task_id: str
    complexity: Literal["easy", "normal", "complex"]
    limits: dict[str, int]
    patterns_to_follow: list[dict[str, Any]]
    warnings: list[dict[str, Any]]
    relevant_decisions: list[dict[str, Any]]
    prior_work: list[dict[str, Any]]
    markdown: str


class RuleList(Out):
    directory: str | None
    rules: list[dict[str, Any]]


class RulesCheck(Out):
    valid: bool
    rules: list[dict[str, Any]]
    problems: list[dict[str, str]]


class RulesLoaded(Out):
    loaded: int
    rules: list[dict[str, Any]]


class SessionResult(Out):
    """A session operation's result (gauge, compaction, reset, undo): see docs/sessions.md."""


class CompactionList(Out):
    compactions: list[dict[str, Any]]


P = "/v1/projects/{project}"
RESPONSES: dict[tuple[str, str], type[BaseModel]] = {
    ("get", "/health"): Health,
    ("get", "/v1/projects"): ProjectList,
    ("get", "/v1/roles"): RoleList,
    ("get", f"{P}/agents"): AgentList,
    ("get", f"{P}/agents/{{agent}}"): AgentOut,
    ("put", f"{P}/agents/{{agent}}"): AgentOut,
    ("get", f"{P}/kv/{{key}}"): KeyValue,
    ("put", f"{P}/kv/{{key}}"): KeyValue,
    ("post", f"{P}/records"): RecordOut,
    ("post", f"{P}/records/batch"): BatchOut,
    ("get", f"{P}/records/{{record_id}}"): RecordOut,
    ("get", f"{P}/records"): RecordList,
    ("post", f"{P}/assemble"): AssemblyOut,
    ("get", f"{P}/traces"): TraceList,
    ("get", f"{P}/traces/{{trace_id}}"): TraceOut,
    ("get", f"{P}/traces/{{a}}/diff/{{b}}"): TraceDiff,
    ("post", f"{P}/traces/{{trace_id}}/replay"): ReplayOut,
    ("post", f"{P}/tasks"): RecordOut,
    ("get", f"{P}/tasks"): TaskList,
    ("get", f"{P}/tasks/{{task_id}}"): TaskOut,
    ("post", f"{P}/tasks/{{task_id}}/complete"): CompletionOut,
    ("get", f"{P}/tasks/{{task_id}}/context"): ComputedContextOut,
    ("get", "/v1/rules"): RuleList,
    ("post", "/v1/rules/validate"): RulesCheck,
    ("post", "/v1/rules/reload"): RulesLoaded,
    ("post", f"{P}/sessions/{{session}}/turns"): RecordOut,
    ("get", f"{P}/sessions/{{session}}/gauge"): SessionResult,
    ("post", f"{P}/sessions/{{session}}/compact"): SessionResult,
    ("post", f"{P}/sessions/{{session}}/reset"): SessionResult,
    ("post", f"{P}/sessions/{{session}}/compact/undo"): SessionResult,
    ("get", f"{P}/sessions/{{session}}/compactions"): CompactionList,
}

# Request fields that take one of a closed set; their values are checked by the library (which
# names the fix), so the request models keep them as strings and OpenAPI states the set here.
REQUEST_ENUMS: dict[str, tuple[str, ...]] = {
    "kind": KINDS,
    "visibility": VISIBILITIES,
    "status": STATUSES,
    "format": FORMATS,
}

SECURITY_SCHEMES: dict[str, Any] = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: 'Authorization: Bearer KEY' (docs/security.md)",
    },
    "apiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "The same API key, in its own header",
    },
}
# With no keys configured (loopback use) every request is admin; these need no key at all.
OPEN_PATHS = {"/health", "/metrics"}


def apply(schema: dict[str, Any]) -> None:
    """Add the success models, the request enums and the key scheme to an OpenAPI document."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    models = sorted(set(RESPONSES.values()), key=lambda m: m.__name__)
    _, defs = models_json_schema(
        [(m, "serialization") for m in models], ref_template="#/components/schemas/{model}"
    )
    schemas.update(defs.get("$defs", {}))
    for path, operations in schema.get("paths", {}).items():
        plain = path.replace("{agent:path}", "{agent}")
        for method, operation in operations.items():
            model = RESPONSES.get((method, plain))
            responses = operation.setdefault("responses", {})
            for code, answer in responses.items():
                if model is not None and code.startswith("2"):
                    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
                    answer["content"] = {"application/json": {"schema": ref}}
            if path in OPEN_PATHS:
                operation["security"] = []
    for name, model_schema in schemas.items():
        if name.endswith("In") or name.startswith("Body_"):
            for field, values in REQUEST_ENUMS.items():
                prop = model_schema.get("properties", {}).get(field)
                if prop is not None:
                    _enum(prop, values)
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for param in operation.get("parameters", []):
                if param.get("in") == "query" and param.get("name") in REQUEST_ENUMS:
                    _enum(param.get("schema", {}), REQUEST_ENUMS[param["name"]])
    components["securitySchemes"] = SECURITY_SCHEMES
    schema["security"] = [{"bearer": []}, {"apiKey": []}]


def _enum(prop: dict[str, Any], values: tuple[str, ...]) -> None:
    """Put `values` on the string member of a (possibly nullable, possibly array) schema."""
    if prop.get("type") == "string" and "enum" not in prop:
        prop["enum"] = list(values)
    if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
        _enum(prop["items"], values)
    for member in prop.get("anyOf", []):
        _enum(member, values)
