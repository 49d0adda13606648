"""API keys scoped to agents, over real uvicorn on a real SQLite file: a key for acme's alice acts
in acme only as alice, on every route family (records, assemble, traces, replay, diff, sessions,
tasks, agents). Acting as another agent is 403; another agent's or project's trace or task is the
404 of an id that exists nowhere; no answer holds a marker only another agent may see; a refused
request changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contextwright import Engine, ValidationError
from contextwright.server import create_app
from contextwright.settings import KeyScope, Settings
from servers import ADMIN_KEY, auth, running

ALICE_KEY = "alice-key-0000"
PAIR_KEY = "alice-carol-00"
ACME_KEY = "acme-all-00000"
KEYS: dict[str, Any] = {
    ADMIN_KEY: ["*"],
    ACME_KEY: ["acme"],
    ALICE_KEY: {"project": "acme", "agents": ["alice"]},
    PAIR_KEY: {"project": "acme", "agents": ["alice", "carol"]},
}
# Text that only bob (or beta) may see; none of it may reach alice's key.
FOREIGN = ("SECRET-BOB", "SECRET-DIRECT", "SECRET-BETA", "SECRET-TASK")


class World:
    def __init__(self, client: httpx.Client, engine: Engine) -> None:
        self.client = client  # alice's key
        self.engine = engine
        add = engine.add
        add(project="acme", author="alice", content="alice works on the login token refresh")
        add(project="acme", author="alice", visibility="private", content="alice's own login note")
        add(project="acme", author="bob", visibility="private", content="SECRET-BOB login token")
        add(
            project="acme",
            author="bob",
            visibility="direct",
            to=["carol"],
            content="@carol SECRET-DIRECT login token",
        )
        add(project="acme", author="carol", content="carol reviews the login token flow")
        add(project="beta", author="zed", content="SECRET-BETA login token")
        self.bob_private_task = add(
            project="acme", author="bob", kind="task", visibility="private", content="SECRET-TASK"
        ).id
        self.task = engine.tasks.create("acme", name="login", objective="Fix the login bug").id
        self.alice_trace = engine.assemble("acme", "alice", "login token", 2000).trace.id
        self.bob_trace = engine.assemble("acme", "bob", "SECRET-BOB login token", 2000).trace.id
        self.carol_trace = engine.assemble("acme", "carol", "login token", 2000).trace.id
        self.beta_trace = engine.assemble("beta", "zed", "SECRET-BETA login", 2000).trace.id
        engine.flush()

    def call(self, method: str, path: str, key: str = ALICE_KEY, **kw: Any) -> httpx.Response:
        r = self.client.request(method, path, headers=auth(key), **kw)
        assert r.status_code < 500, r.text
        for marker in FOREIGN if key == ALICE_KEY else ():
            assert marker not in r.text, (path, r.text)
        return r

    def snapshot(self) -> Any:
        self.engine.flush()
        s = self.engine.store
        return [
            (p, s.count(p), s.version(p), len(s.list_docs("traces", p, limit=1000)))
            for p in ("acme", "beta")
        ], [a.to_dict() for a in self.engine.agents("acme")]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    db = tmp_path_factory.mktemp("scoped") / "scoped.db"
    engine = Engine.open(f"sqlite:///{db}")
    app = create_app(engine, Settings(api_keys=KEYS))
    with running(app) as base, httpx.Client(base_url=base) as client:
        yield World(client, engine)
    engine.close()


def problem(r: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = dict(r.json())
    if field is not None:
        assert body.get("field") == field, body
    return body


A = "/v1/projects/acme"

# (method, path, body, field): each acts as bob with alice's key; refused with 403 on that field.
AS_BOB: list[tuple[str, str, Any, str]] = [
    ("POST", f"{A}/records", {"author": "bob", "content": "forged"}, "author"),
    (
        "POST",
        f"{A}/records/batch",
        {"records": [{"author": "alice", "content": "ok"}, {"author": "bob", "content": "x"}]},
        "records[1].author",
    ),
    ("GET", f"{A}/records?agent=bob", None, "agent"),
    ("GET", f"{A}/records/{{rec}}?agent=bob", None, "agent"),
    ("POST", f"{A}/assemble", {"agent": "bob", "task": "login"}, "agent"),
    ("GET", f"{A}/traces?agent=bob", None, "agent"),
    ("POST", f"{A}/sessions/s1/turns", {"agent": "bob", "role": "user", "content": "x"}, "agent"),
    (
        "POST",
        f"{A}/sessions/s1/turns",
        {"agent": "alice", "role": "assistant", "content": "x", "author": "bob"},
        "author",
    ),
    ("GET", f"{A}/sessions/s1/gauge?agent=bob", None, "agent"),
    ("POST", f"{A}/sessions/s1/compact", {"agent": "bob"}, "agent"),
    ("POST", f"{A}/sessions/s1/reset", {"agent": "bob"}, "agent"),
    ("POST", f"{A}/tasks", {"name": "t", "objective": "o", "author": "bob"}, "author"),
    ("POST", f"{A}/tasks", {"name": "t", "objective": "o"}, "author"),  # author: planner
    ("POST", f"{A}/tasks/{{task}}/complete", {"handoff": {"summary": "x"}, "by": "bob"}, "by"),
    ("GET", f"{A}/tasks/{{task}}/context?agent=bob", None, "agent"),
    ("GET", f"{A}/agents/bob", None, "agent"),
    ("PUT", f"{A}/agents/bob", {"role": "developer"}, "agent"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), AS_BOB, ids=lambda v: str(v))
def test_acting_as_another_agent_is_forbidden(
    world: World, method: str, path: str, body: Any, field: str
) -> None:
    before = world.snapshot()
    rec = world.engine.records("acme", author="bob", limit=1)[0].id
    r = world.call(method, path.format(rec=rec, task=world.task), json=body)
    detail = problem(r, 403, field)["detail"]
    assert "alice" in detail  # says which agents the key may act as
    assert world.snapshot() == before


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("GET", f"{A}/records", None, "agent"),
        ("GET", f"{A}/tasks/{{task}}/context", None, "agent"),
        ("POST", f"{A}/tasks/{{task}}/complete", {"handoff": {"summary": "x"}}, "by"),
    ],
)
def test_an_agent_scoped_key_must_say_which_agent(
    world: World, method: str, path: str, body: Any, field: str
) -> None:
    before = world.snapshot()
    problem(world.call(method, path.format(task=world.task), json=body), 422, field)
    assert world.snapshot() == before


def test_another_project_is_forbidden(world: World) -> None:
    for method, path, body in [
        ("GET", "/v1/projects/beta/records?agent=alice", None),
        ("POST", "/v1/projects/beta/assemble", {"agent": "alice"}),
        ("GET", "/v1/projects/beta/traces", None),
        ("GET", f"/v1/projects/beta/traces/{world.beta_trace}", None),
    ]:
        problem(world.call(method, path, json=body), 403, "project")
    assert world.call("GET", "/v1/projects").json() == {"projects": ["acme"]}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", f"{A}/traces/{{t}}", None),
        ("POST", f"{A}/traces/{{t}}/replay", {"budget": 500}),
        ("GET", f"{A}/traces/{{own}}/diff/{{t}}", None),
        ("GET", f"{A}/traces/{{t}}/diff/{{own}}", None),
    ],
)
@pytest.mark.parametrize("whose", ["bob", "beta", "nowhere"])
def test_other_agents_and_projects_traces_are_not_found(
    world: World, method: str, path: str, body: Any, whose: str
) -> None:
    """Bob's trace in alice's project, and beta's trace under acme's path, answer exactly what an id
    that exists nowhere answers (the same detail, id aside): alice's key learns nothing."""
    before = world.snapshot()
    t = {"bob": world.bob_trace, "beta": world.beta_trace, "nowhere": "01NOSUCHTRACE0000"}[whose]
    got = problem(world.call(method, path.format(t=t, own=world.alice_trace), json=body), 404)
    assert got["detail"] == f"trace {t!r} does not exist"
    assert world.snapshot() == before


def test_own_traces_are_listed_read_replayed_and_diffed(world: World) -> None:
    listed = world.call("GET", f"{A}/traces", params={"limit": 1000}).json()["traces"]
    assert listed and {t["agent"] for t in listed} == {"alice"}
    assert world.alice_trace in [t["id"] for t in listed]
    mine = world.call("GET", f"{A}/traces", params={"agent": "alice"}).json()["traces"]
    assert {t["agent"] for t in mine} == {"alice"}
    got = world.call("GET", f"{A}/traces/{world.alice_trace}").json()
    assert got["agent"] == "alice" and "alice's own login note" in json.dumps(got)
    again = world.call("POST", f"{A}/traces/{world.alice_trace}/replay", json={"budget": 300})
    assert again.status_code == 200 and again.json()["trace"]["agent"] == "alice"
    diff = world.call("GET", f"{A}/traces/{world.alice_trace}/diff/{again.json()['trace_id']}")
    assert diff.status_code == 200 and diff.json()["a"] == world.alice_trace
    # A key of two agents reads both, and only both.
    pair = world.call("GET", f"{A}/traces", key=PAIR_KEY, params={"limit": 1000}).json()
    assert {t["agent"] for t in pair["traces"]} == {"alice", "carol"}
    carol = world.call("GET", f"{A}/traces/{world.carol_trace}", key=PAIR_KEY)
    assert carol.status_code == 200
    problem(world.call("GET", f"{A}/traces/{world.bob_trace}", key=PAIR_KEY), 404)
    # A key of the whole project still reads every agent's trace, as before.
    every = world.call("GET", f"{A}/traces", key=ACME_KEY, params={"limit": 1000}).json()
    assert {"alice", "bob", "carol"} <= {t["agent"] for t in every["traces"]}
    assert world.call("GET", f"{A}/traces/{world.bob_trace}", key=ACME_KEY).status_code == 200


def test_own_records_assemble_sessions_tasks_and_agents_work(world: World) -> None:
    r = world.call("POST", f"{A}/records", json={"author": "alice", "content": "alice again"})
    assert r.status_code == 201, r.text
    batch = world.call(
        "POST", f"{A}/records/batch", json={"records": [{"author": "alice", "content": "b1"}]}
    )
    assert batch.status_code == 201
    bob_private = world.engine.records("acme", author="bob", kinds=["message"], limit=10)
    for rec in bob_private:
        problem(world.call("GET", f"{A}/records/{rec.id}", params={"agent": "alice"}), 404)
    listed = world.call("GET", f"{A}/records", params={"agent": "alice", "limit": 1000}).json()
    assert "alice's own login note" in json.dumps(listed)
    window = world.call("POST", f"{A}/assemble", json={"agent": "alice", "task": "login token"})
    assert window.status_code == 200 and "alice's own login note" in window.text
    turn = world.call(
        "POST", f"{A}/sessions/a1/turns", json={"agent": "alice", "role": "user", "content": "hi"}
    )
    assert turn.status_code == 201 and turn.json()["author"] == "user"  # the session's human
    gauge = world.call("GET", f"{A}/sessions/a1/gauge", params={"agent": "alice"})
    assert gauge.status_code == 200
    task = world.call("POST", f"{A}/tasks", json={"name": "t", "objective": "o", "author": "alice"})
    assert task.status_code == 201
    tasks = world.call("GET", f"{A}/tasks").json()["tasks"]
    assert world.bob_private_task not in [t["id"] for t in tasks] and tasks
    problem(world.call("GET", f"{A}/tasks/{world.bob_private_task}"), 404, "task")
    done = world.call(
        "POST",
        f"{A}/tasks/{task.json()['id']}/complete",
        json={"handoff": {"summary": "done"}, "by": "alice"},
    )
    assert done.status_code == 200, done.text
    agents = world.call("GET", f"{A}/agents").json()["agents"]
    assert [a["id"] for a in agents] == ["alice"]
    assert world.call("GET", f"{A}/agents/alice").status_code == 200
    pair = world.call("GET", f"{A}/agents", key=PAIR_KEY).json()["agents"]
    assert [a["id"] for a in pair] == ["alice", "carol"]


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"project": "acme"}, "agents"),
        ({"project": "acme", "agents": []}, "agents"),
        ({"project": "acme", "agents": ["ok", ""]}, "agents"),
        ({"project": "*", "agents": ["alice"]}, "project"),
        ({"agents": ["alice"]}, "project"),
        ({"project": "acme", "agents": ["alice"], "admin": True}, "admin"),
        ([], None),
        (5, None),
    ],
)
def test_key_scopes_are_checked(given: Any, field: str | None) -> None:
    with pytest.raises(ValidationError) as err:
        Settings(api_keys={"some-key-000": given})
    assert err.value.field.startswith("api_keys.some")
    if field is not None:
        assert err.value.field.endswith("." + field)
    assert Settings(api_keys={"some-key-000": {"project": "p", "agents": ["a"]}}).api_keys == {
        "some-key-000": KeyScope(("p",), ("a",))
    }
