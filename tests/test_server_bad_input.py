"""Every endpoint with bad input: wrong types, missing fields, oversized bodies, unknown ids,
wrong or missing keys, and another project's ids. Each gets a 4xx problem that names the problem,
never a 500, and a rejected request changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import ACME_KEY, ADMIN_KEY, BETA_KEY, KEYS, auth, running

LIMIT = 64 * 1024


class World:
    def __init__(self, client: httpx.Client, bare: httpx.Client, engine: Engine) -> None:
        self.client = client
        self.bare = bare  # sends no key unless told
        self.engine = engine
        a = engine.add(project="acme", author="alice", content="@bob acme secret plan")
        b = engine.add(project="beta", author="zed", content="beta record")
        self.acme_record, self.beta_record = a.id, b.id
        self.acme_trace = engine.assemble("acme", "bob", "plan").trace.id
        self.beta_trace = engine.assemble("beta", "zed", "x").trace.id
        engine.kv_set("beta", "k", "v")
        self.acme_task = engine.tasks.create("acme", name="t", objective="add auth").id
        self.beta_task = engine.tasks.create("beta", name="t", objective="add auth").id

    def snapshot(self) -> Any:
        self.engine.flush()  # traces of earlier calls are written by a background thread
        s = self.engine.store
        return (
            s.count(),
            [
                (p, s.version(p), len(s.list_docs("traces", p, limit=1000)))
                for p in ("acme", "beta")
            ],
            [a.to_dict() for a in self.engine.agents("acme")],
            s.kv_list("acme"),
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    db = tmp_path_factory.mktemp("bad") / "bad.db"
    engine = Engine.open(f"sqlite:///{db}")
    app = create_app(engine, Settings(api_keys=KEYS, max_body_bytes=LIMIT))
    with (
        running(app) as base,
        httpx.Client(base_url=base, headers=auth(ACME_KEY)) as client,
        httpx.Client(base_url=base) as bare,
    ):
        yield World(client, bare, engine)
    engine.close()


# (method, path, valid body) for every endpoint that needs a key; {rec}/{trace} filled per world.
ENDPOINTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/projects/{p}/records", {"author": "alice", "content": "hi"}),
    ("POST", "/v1/projects/{p}/records/batch", {"records": [{"author": "a", "content": "x"}]}),
    ("GET", "/v1/projects/{p}/records/{rec}?agent=bob", None),
    ("GET", "/v1/projects/{p}/records?agent=bob", None),
    ("GET", "/v1/projects/{p}/agents", None),
    ("GET", "/v1/projects/{p}/agents/alice", None),
    ("PUT", "/v1/projects/{p}/agents/newbie", {"role": "developer"}),
    ("GET", "/v1/projects/{p}/kv/k", None),
    ("PUT", "/v1/projects/{p}/kv/k2", {"value": "v"}),
    ("POST", "/v1/projects/{p}/assemble", {"agent": "alice", "task": "x"}),
    ("GET", "/v1/projects/{p}/traces?agent=bob", None),
    ("GET", "/v1/projects/{p}/traces/{trace}", None),
    ("POST", "/v1/projects/{p}/traces/{trace}/replay", {"budget": 500}),
    ("GET", "/v1/projects/{p}/traces/{trace}/diff/{trace}", None),
    (
        "POST",
        "/v1/projects/{p}/sessions/s1/turns",
        {"agent": "dev", "role": "user", "content": "hi"},
    ),
    ("GET", "/v1/projects/{p}/sessions/s1/gauge?agent=dev", None),
    ("POST", "/v1/projects/{p}/sessions/s1/compact", {"agent": "dev"}),
    ("POST", "/v1/projects/{p}/sessions/s1/reset", {"agent": "dev"}),
    ("POST", "/v1/projects/{p}/tasks", {"name": "t2", "objective": "o"}),
    ("GET", "/v1/projects/{p}/tasks", None),
    ("GET", "/v1/projects/{p}/tasks/{task}", None),
    ("POST", "/v1/projects/{p}/tasks/{task}/complete", {"handoff": {"summary": "x"}}),
    ("GET", "/v1/projects/{p}/tasks/{task}/context?agent=bob", None),
]
GLOBAL: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/projects", None),
    ("GET", "/v1/roles", None),
    ("GET", "/v1/rules", None),
    ("POST", "/v1/rules/validate", {"rules": []}),
    ("POST", "/v1/rules/reload", None),
]
IDS = [f"{m} {p}" for m, p, _ in ENDPOINTS]
ALL = ENDPOINTS + GLOBAL
ALL_IDS = [f"{m} {p}" for m, p, _ in ALL]


def url(world: World, path: str, project: str = "acme") -> str:
    beta = project == "beta"
    return path.format(
        p=project,
        rec=world.beta_record if beta else world.acme_record,
        trace=world.beta_trace if beta else world.acme_trace,
        task=world.beta_task if beta else world.acme_task,
    )


def call(world: World, method: str, path: str, **kw: Any) -> httpx.Response:
    return world.client.request(method, path, **kw)


def assert_problem(r: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = dict(r.json())
    assert body["status"] == status and body["title"] and body["detail"]
    if field is not None:
        assert body.get("field") == field, body
    return body


@pytest.mark.parametrize(("method", "path", "body"), ALL, ids=ALL_IDS)
def test_missing_and_wrong_keys(world: World, method: str, path: str, body: Any) -> None:
    before = world.snapshot()
    for headers in (
        {},
        auth("not-a-real-key"),
        {"X-API-Key": "nope-nope"},
        {"Authorization": "Basic x"},
    ):
        r = world.bare.request(method, url(world, path), json=body, headers=headers)
        assert_problem(r, 401, "authorization")
    assert world.snapshot() == before


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=IDS)
def test_another_projects_key_and_ids(world: World, method: str, path: str, body: Any) -> None:
    before = world.snapshot()
    # acme's key on beta's path: forbidden.
    r = call(world, method, url(world, path, "beta"), json=body)
    assert_problem(r, 403, "project")
    # beta's ids under acme's path, with acme's key: not found (existence is not leaked).
    if "{rec}" in path or "{trace}" in path:
        leaked = path.replace("{p}", "acme").format(rec=world.beta_record, trace=world.beta_trace)
        assert_problem(call(world, method, leaked, json=body), 404)
    assert world.snapshot() == before


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/projects/acme/records", {"author": "alice", "content": 5}, "content"),
        ("POST", "/v1/projects/acme/records", {"author": "alice"}, "content"),
        ("POST", "/v1/projects/acme/records", {"author": " alice", "content": "x"}, "author"),
        ("POST", "/v1/projects/acme/records", {"author": "a", "content": "x", "kind": "?"}, "kind"),
        ("POST", "/v1/projects/acme/records", {"author": "a", "content": "x", "bogus": 1}, "bogus"),
        (
            "POST",
            "/v1/projects/acme/records",
            {"author": "a", "content": "x", "project": "beta"},
            "project",
        ),
        ("POST", "/v1/projects/acme/records", [1, 2], "body"),
        ("POST", "/v1/projects/acme/records/batch", {"records": "x"}, "records"),
        ("POST", "/v1/projects/acme/records/batch", {}, "records"),
        (
            "POST",
            "/v1/projects/acme/records/batch",
            {
                "records": [
                    {"author": "a", "content": "ok"},
                    {"author": "a", "content": "x", "to": 3},
                ]
            },
            "records[1].to",
        ),
        ("GET", "/v1/projects/acme/records?agent=bob&limit=abc", None, "limit"),
        ("GET", "/v1/projects/acme/records?agent=bob&limit=0", None, "limit"),
        ("GET", "/v1/projects/acme/records?agent=bob&pinned=maybe", None, "pinned"),
        ("GET", "/v1/projects/acme/records?agent=bob&since=nan", None, "since"),
        ("GET", "/v1/projects/acme/records?agent=bob&before=-inf", None, "before"),
        ("GET", "/v1/projects/acme/records", None, "agent"),
        ("GET", "/v1/projects/acme/records/{rec}", None, "agent"),
        ("PUT", "/v1/projects/acme/agents/x", {"role": 5}, "role"),
        (
            "PUT",
            "/v1/projects/acme/agents/x",
            {"profile": {"name": "r", "kind_weights": {"task": "hi"}}},
            "profile.kind_weights",
        ),
        ("PUT", "/v1/projects/acme/kv/k", {"value": 5}, "value"),
        ("PUT", "/v1/projects/acme/kv/k", {}, "value"),
        ("POST", "/v1/projects/acme/assemble", {}, "agent"),
        ("POST", "/v1/projects/acme/assemble", {"agent": "alice", "budget": "big"}, "budget"),
        (
            "POST",
            "/v1/projects/acme/assemble",
            {"agent": "alice", "budget": {"window": -5}},
            "budget.window",
        ),
        ("POST", "/v1/projects/acme/assemble", {"agent": "alice", "format": "xml"}, "format"),
        ("POST", "/v1/projects/acme/assemble", {"agent": "alice", "task": ["x"]}, "task"),
        ("POST", "/v1/projects/acme/assemble", {"agent": "alice", "sources": ["nope"]}, "sources"),
        ("POST", "/v1/projects/acme/assemble?format=xml", {"agent": "alice"}, "format"),
        ("GET", "/v1/projects/acme/traces?limit=-1", None, "limit"),
        ("POST", "/v1/projects/acme/traces/{trace}/replay", {"budget": "x"}, "budget"),
        ("POST", "/v1/projects/acme/traces/{trace}/replay", {"colour": "red"}, "colour"),
        ("GET", "/v1/projects/ac me/agents", None, "project"),
        (
            "POST",
            "/v1/projects/acme/sessions/s1/turns",
            {"agent": "dev", "role": "boss", "content": "x"},
            "role",
        ),
        (
            "POST",
            "/v1/projects/acme/sessions/s1/turns",
            {"agent": "dev", "role": "user"},
            "content",
        ),
        (
            "POST",
            "/v1/projects/acme/sessions/s1/turns",
            {"agent": "dev", "role": "user", "content": "x", "tags": "a"},
            "tags",
        ),
        ("GET", "/v1/projects/acme/sessions/s1/gauge", None, "agent"),
        ("GET", "/v1/projects/acme/sessions/s1/gauge?agent=dev&budget=abc", None, "budget"),
        ("POST", "/v1/projects/acme/sessions/s1/compact", {"agent": "dev", "keep": 2}, "keep"),
        ("POST", "/v1/projects/acme/sessions/s1/compact", {"agent": "dev", "keep": "4"}, "keep"),
        ("POST", "/v1/projects/acme/sessions/s1/reset", {}, "agent"),
        ("POST", "/v1/projects/acme/tasks", {"name": 5, "objective": "o"}, "name"),
        ("POST", "/v1/projects/acme/tasks", {"name": "t"}, "objective"),
        (
            "POST",
            "/v1/projects/acme/tasks",
            {"name": "t", "objective": "o", "complexity": "huge"},
            "complexity",
        ),
        ("GET", "/v1/projects/acme/tasks?limit=0", None, "limit"),
        ("POST", "/v1/projects/acme/tasks/{task}/complete", {"handoff": 5}, "handoff"),
        ("POST", "/v1/projects/acme/tasks/{task}/complete", {}, "handoff"),
        (
            "POST",
            "/v1/projects/acme/tasks/{task}/complete",
            {"handoff": {"summary": "x", "bogus": 1}},
            "handoff.bogus",
        ),
        (
            "POST",
            "/v1/projects/acme/tasks/{task}/complete",
            {"handoff": {"summary": "x", "gotchas": [{"issue": "i", "severity": "dire"}]}},
            "handoff.gotchas[0].severity",
        ),
        ("GET", "/v1/projects/acme/tasks/{task}/context", None, "agent"),
        ("POST", "/v1/rules/validate", {"rules": "x"}, "rules"),
        ("POST", "/v1/rules/validate", {}, "rules"),
    ],
)
def test_wrong_types_and_missing_fields(
    world: World, method: str, path: str, body: Any, field: str
) -> None:
    before = world.snapshot()
    r = call(world, method, url(world, path), json=body)
    problem = assert_problem(r, 422, field)
    assert field.split(".")[0].split("[")[0] in problem["detail"] or field == "body"
    assert world.snapshot() == before


@pytest.mark.parametrize(
    ("method", "path", "body", "what"),
    [
        ("GET", "/v1/projects/acme/records/NOPE?agent=bob", None, "record"),
        ("GET", "/v1/projects/acme/agents/nobody", None, "agent"),
        ("GET", "/v1/projects/acme/kv/missing", None, "key"),
        ("POST", "/v1/projects/acme/assemble", {"agent": "nobody", "task": "x"}, "agent"),
        ("GET", "/v1/projects/acme/traces/NOPE", None, "trace"),
        ("POST", "/v1/projects/acme/traces/NOPE/replay", {}, "trace"),
        ("GET", "/v1/projects/acme/traces/NOPE/diff/NOPE2", None, "trace"),
        ("GET", "/v1/projects/acme/tasks/NOPE", None, "task"),
        ("POST", "/v1/projects/acme/tasks/NOPE/complete", {"handoff": {"summary": "x"}}, "task"),
        ("GET", "/v1/projects/acme/tasks/NOPE/context?agent=bob", None, "task"),
        ("GET", "/v1/nothing/here", None, None),
    ],
)
def test_unknown_ids(world: World, method: str, path: str, body: Any, what: str | None) -> None:
    before = world.snapshot()
    problem = assert_problem(call(world, method, path, json=body), 404, what)
    assert "NOPE" in problem["detail"] or what != "record"
    assert world.snapshot() == before


def test_a_dependency_that_names_no_task_is_a_422(world: World) -> None:
    before = world.snapshot()
    body = {"name": "t", "objective": "o", "dependencies": ["NOPE"]}
    problem = assert_problem(
        call(world, "POST", "/v1/projects/acme/tasks", json=body), 422, "dependencies[0]"
    )
    assert "NOPE" in problem["detail"]
    assert world.snapshot() == before


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [e for e in ENDPOINTS if e[2]],
    ids=[i for i, e in zip(IDS, ENDPOINTS, strict=True) if e[2]],
)
def test_oversized_bodies(world: World, method: str, path: str, body: Any) -> None:
    before = world.snapshot()
    big = {**body, "padding": "x" * (LIMIT + 10)}
    assert_problem(call(world, method, url(world, path), json=big), 413, "body")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while streaming
        yield b'{"author": "a", "content": "'
        for _ in range(LIMIT // 1000 + 2):
            yield b"y" * 1000
        yield b'"}'

    r = call(
        world,
        method,
        url(world, path),
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    assert_problem(r, 413, "body")
    assert world.snapshot() == before


def test_private_records_stay_private(world: World) -> None:
    rec = world.engine.add(project="acme", author="alice", content="diary", visibility="private")
    direct = world.engine.add(
        project="acme", author="alice", content="for carol", visibility="direct", to=["carol"]
    )
    for rid in (rec.id, direct.id):
        assert_problem(
            world.client.get(f"/v1/projects/acme/records/{rid}", params={"agent": "bob"}),
            404,
            "record",
        )
    listed = world.client.get("/v1/projects/acme/records", params={"agent": "bob", "limit": 1000})
    assert {rec.id, direct.id}.isdisjoint(r["id"] for r in listed.json()["records"])
    carol = world.client.get(f"/v1/projects/acme/records/{direct.id}", params={"agent": "carol"})
    assert carol.status_code == 200
    window = world.client.post("/v1/projects/acme/assemble", json={"agent": "bob", "task": "diary"})
    assert "diary" not in str(window.json()["messages"]).replace("Task: diary", "")


def test_keys_see_only_their_projects(world: World) -> None:
    beta = world.client.get("/v1/projects", headers=auth(BETA_KEY)).json()["projects"]
    admin = world.client.get("/v1/projects", headers=auth(ADMIN_KEY)).json()["projects"]
    assert beta == ["beta"] and {"acme", "beta"} <= set(admin)
    ok = world.client.get(f"/v1/projects/beta/records/{world.beta_record}", headers=auth(ADMIN_KEY))
    assert ok.status_code == 200


def test_invalid_json_and_wrong_method(world: World) -> None:
    before = world.snapshot()
    r = call(
        world,
        "POST",
        "/v1/projects/acme/records",
        content=b'{"author": ',
        headers={"content-type": "application/json"},
    )
    assert_problem(r, 422)
    assert_problem(call(world, "DELETE", "/v1/projects/acme/records"), 405)
    assert world.snapshot() == before


FIELDS = [
    "author",
    "content",
    "kind",
    "agent",
    "task",
    "budget",
    "records",
    "role",
    "handoff",
    "visibility",
    "to",
    "tags",
    "format",
    "window",
    "value",
    "name",
    "objective",
    "rules",
]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=12,
)
FUZZED = [
    "/v1/projects/acme/records",
    "/v1/projects/acme/records/batch",
    "/v1/projects/acme/assemble",
    "/v1/projects/acme/sessions/s9/turns",
    "/v1/projects/acme/tasks",
    "/v1/rules/validate",
]


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=JSON, where=st.sampled_from(FUZZED))
def test_fuzzed_bodies_never_500_and_rejections_change_nothing(
    world: World, body: Any, where: str
) -> None:
    before = world.snapshot()
    r = world.client.post(where, json=body)
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["detail"]
        assert world.snapshot() == before
