"""The HTTP API over a real SQLite file, served by real uvicorn on 127.0.0.1: the happy paths."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextwright import Engine
from contextwright.server import create_app
from contextwright.settings import KeyScope, Settings
from servers import ACME_KEY, ADMIN_KEY, KEYS, auth, running


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Engine]]:
    db = tmp_path_factory.mktemp("api") / "api.db"
    engine = Engine.open(f"sqlite:///{db}")
    app = create_app(engine, Settings(db=f"sqlite:///{db}", api_keys=KEYS))
    with running(app) as base, httpx.Client(base_url=base, headers=auth(ACME_KEY)) as client:
        yield client, engine
    engine.close()


def add(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/projects/acme/records", json=fields)
    assert r.status_code == 201, r.text
    return dict(r.json())


def test_openapi_and_docs(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {
        "/v1/projects/{project}/records",
        "/v1/projects/{project}/records/batch",
        "/v1/projects/{project}/assemble",
        "/v1/projects/{project}/traces/{trace_id}",
        "/v1/projects/{project}/traces/{trace_id}/replay",
        "/health",
    } <= paths
    assert "swagger" in client.get("/docs").text.lower()


ASSET_REF = re.compile(r"""(?:src|href|url)\s*[:=(]\s*['"]([^'"]+)['"]""")


def test_docs_page_loads_only_local_assets(api: tuple[httpx.Client, Engine]) -> None:
    """/docs was a blank page offline: Swagger UI came from a CDN. Every script, style and icon
    the page names is now one of this server's paths, and each answers 200. /redoc (its logo
    comes from a CDN) is not served."""
    client, _ = api
    page = "/docs"
    assert httpx.get(str(client.base_url) + "/redoc").status_code == 404
    r = httpx.get(str(client.base_url) + page)  # no key: the docs are public, as /openapi.json
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    refs = ASSET_REF.findall(r.text)
    assert "/openapi.json" in refs
    assert any(ref.endswith(".js") for ref in refs)
    for ref in refs:
        assert ref.startswith("/") and not ref.startswith("//"), f"{page} loads {ref}"
        got = httpx.get(str(client.base_url) + ref)
        assert got.status_code == 200, ref
    assert "http://" not in r.text.replace(str(client.base_url), "")
    assert "https://" not in r.text


def test_records_add_get_list_with_filters(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    rec = add(client, author="alice", content="@bob please review auth.py", tags=["Auth"])
    add(client, author="carol", kind="decision", content="We use JWT for sessions.")
    got = client.get(f"/v1/projects/acme/records/{rec['id']}", params={"agent": "bob"}).json()
    assert got["content"] == "@bob please review auth.py" and got["mentions"] == ["bob"]

    listed = client.get(
        "/v1/projects/acme/records", params={"agent": "bob", "kind": "decision"}
    ).json()
    assert [r["author"] for r in listed["records"]] == ["carol"]
    tagged = client.get("/v1/projects/acme/records", params={"agent": "bob", "tag": "auth"}).json()
    assert [r["id"] for r in tagged["records"]] == [rec["id"]]


def test_batch_is_all_or_nothing(api: tuple[httpx.Client, Engine]) -> None:
    client, engine = api
    before = engine.store.count("acme")
    ok = client.post(
        "/v1/projects/acme/records/batch",
        json={"records": [{"author": "a", "content": f"note {i}"} for i in range(3)]},
    )
    assert ok.status_code == 201 and ok.json()["count"] == 3
    bad = client.post(
        "/v1/projects/acme/records/batch",
        json={"records": [{"author": "a", "content": "fine"}, {"author": "a", "content": " "}]},
    )
    assert bad.status_code == 422
    assert bad.json()["field"] == "records[1].content"
    assert engine.store.count("acme") == before + 3


def test_agents_and_roles(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    put = client.put("/v1/projects/acme/agents/rita", json={"role": "reviewer"})
    assert put.status_code == 200 and put.json()["profile"]["name"] == "reviewer"
    assert client.get("/v1/projects/acme/agents/rita").json()["role"] == "reviewer"
    names = [a["id"] for a in client.get("/v1/projects/acme/agents").json()["agents"]]
    assert "rita" in names
    assert "developer" in client.get("/v1/roles").json()["roles"]
    assert client.get("/v1/projects").json()["projects"] == ["acme"]


def test_assemble_formats_traces_replay_and_diff(api: tuple[httpx.Client, Engine]) -> None:
    client, engine = api
    add(client, author="alice", content="@bob the login bug is a token expiry in auth.py")
    # The default embedder loads in the background: a trace taken before it is ready and replayed
    # after it would differ by the vector source's candidates, not only by the budget.
    assert engine.wait_for_embeddings(timeout=120)
    body = {"agent": "bob", "task": "fix the login bug", "budget": 3000}
    results = {}
    for fmt in ("openai", "anthropic", "markdown"):
        r = client.post("/v1/projects/acme/assemble", json=body, params={"format": fmt})
        assert r.status_code == 200, r.text
        results[fmt] = r.json()
        assert r.json()["format"] == fmt and r.json()["tokens"] <= r.json()["available"]
    assert "token expiry" in results["markdown"]["text"]
    assert results["anthropic"]["payload"]["system"]

    assert set(results["openai"]["trace"]) == {"summary"}  # lean by default
    full = client.post("/v1/projects/acme/assemble", json=body, params={"trace": "true"}).json()
    assert full["trace"]["id"] == full["trace_id"] and full["trace"]["items"]

    trace_id = results["openai"]["trace_id"]
    trace = client.get(f"/v1/projects/acme/traces/{trace_id}").json()
    assert trace["request"]["task"] == "fix the login bug"
    assert {s["name"] for s in trace["sources"]} and trace["items"]
    by_agent = client.get("/v1/projects/acme/traces", params={"agent": "bob"}).json()["traces"]
    assert trace_id in [t["id"] for t in by_agent]

    replay = client.post(f"/v1/projects/acme/traces/{trace_id}/replay", json={"budget": 60})
    assert replay.status_code == 200, replay.text
    diff = replay.json()["diff"]
    assert diff["available"] == {"before": 3000, "after": 60}
    assert diff["changes"], "a 60-token budget must drop something the 3000 one kept"
    assert all(c["after"] in ("dropped", "truncated", "absent") for c in diff["changes"])

    other = results["markdown"]["trace_id"]
    d = client.get(f"/v1/projects/acme/traces/{trace_id}/diff/{other}").json()
    assert d["request"]["format"] == {"before": "openai", "after": "markdown"}


def test_kv(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    assert client.put("/v1/projects/acme/kv/arch", json={"value": "hexagonal"}).status_code == 200
    assert client.get("/v1/projects/acme/kv/arch").json()["value"] == "hexagonal"


def test_health_and_metrics(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    assert client.get("/health").json()["status"] == "ok"
    add(client, author="alice", kind="note", content="metrics")  # alice exists, run alone too
    r = client.post("/v1/projects/acme/assemble", json={"agent": "alice", "task": "x"})
    assert r.status_code == 200, r.text
    client.post("/v1/projects/acme/records", json={"author": 1})
    text = client.get("/metrics").text
    assert "contextwright_assemble_seconds_count" in text
    # Every assemble went through the engine's gate (as did the replays and the task and
    # session windows), one at a time: none waited for a slot.
    counts = re.findall(r"^contextwright_assemble_seconds_count\{[^}]*\} (\S+)$", text, re.M)
    queued = re.findall(r"^contextwright_assemble_queue_seconds_count (\S+)$", text, re.M)
    assert len(queued) == 1 and float(queued[0]) >= sum(float(c) for c in counts) >= 1
    assert "contextwright_assemble_queue_seconds_sum 0.0" in text
    assert "contextwright_records " in text or "contextwright_records{" in text
    assert 'contextwright_errors_total{status="422",type="validation_error"}' in text


def test_inspector_is_served(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    r = client.get("/", follow_redirects=True)
    assert r.status_code == 200 and "contextwright" in r.text


def test_admin_key_lists_without_agent(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    add(client, author="alice", content="private thought", visibility="private")
    admin = client.get("/v1/projects/acme/records", headers=auth(ADMIN_KEY), params={"limit": 500})
    assert any(r["content"] == "private thought" for r in admin.json()["records"])
    bob = client.get("/v1/projects/acme/records", params={"agent": "bob", "limit": 500})
    assert all(r["content"] != "private thought" for r in bob.json()["records"])


def test_sessions_append_gauge_compact_reset(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    for i in range(12):
        r = client.post(
            "/v1/projects/acme/sessions/s1/turns",
            json={
                "agent": "dev",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {i} " * 40,
            },
        )
        assert r.status_code == 201, r.text
    g = client.get(
        "/v1/projects/acme/sessions/s1/gauge", params={"agent": "dev", "budget": 2000}
    ).json()
    assert g["compaction_hint"] is True and g["threshold"] == 0.7 and "bar" in g
    done = client.post("/v1/projects/acme/sessions/s1/compact", json={"agent": "dev"}).json()
    assert done["replaced"] > 0 and done["summary_id"]
    after = client.get(
        "/v1/projects/acme/sessions/s1/gauge", params={"agent": "dev", "budget": 2000}
    ).json()
    assert after["used"] < g["used"]
    # What the compaction replaced, then its undo: the gauge is back where it was.
    listed = client.get("/v1/projects/acme/sessions/s1/compactions", params={"agent": "dev"})
    assert listed.status_code == 200, listed.text
    (report,) = listed.json()["compactions"]
    (summary,) = report["summaries"]
    assert summary["id"] == done["summary_id"] and len(summary["replaced"]) == done["replaced"]
    assert {x["kind"] for x in summary["replaced"]} == {"message"} and summary["kept"]
    undo = client.post("/v1/projects/acme/sessions/s1/compact/undo", json={"agent": "dev"})
    assert undo.status_code == 200 and undo.json()["summaries"] == [done["summary_id"]]
    back = client.get(
        "/v1/projects/acme/sessions/s1/gauge", params={"agent": "dev", "budget": 2000}
    ).json()
    assert back["used"] == g["used"]
    again = client.post("/v1/projects/acme/sessions/s1/compact/undo", json={"agent": "dev"})
    assert again.status_code == 422 and "no compaction to undo" in again.text
    bad = client.post("/v1/projects/acme/sessions/s1/compact/undo", json={"agent": 3})
    assert bad.status_code == 422 and "agent" in bad.text
    missing = client.get("/v1/projects/acme/sessions/s1/compactions")
    assert missing.status_code == 422 and "agent" in missing.text
    assert client.post("/v1/projects/acme/sessions/s1/compact", json={"agent": "dev"}).json()[
        "summary_id"
    ]
    reset = client.post(
        "/v1/projects/acme/sessions/s1/reset", json={"agent": "dev", "new_session": "s2"}
    )
    assert reset.status_code == 200 and reset.json()["new_session"] == "s2"


def test_tasks_handoffs_and_knowledge(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    first = client.post(
        "/v1/projects/acme/tasks",
        json={"name": "JWT", "objective": "Add JWT auth to src/api/auth.ts", "assignee": "bob"},
    )
    assert first.status_code == 201, first.text
    tid = first.json()["id"]
    handoff = {
        "summary": "JWT auth added",
        "patterns_discovered": [
            {"pattern": "wrap auth routes in requireAuth()", "applies_to": ["auth"]}
        ],
        "gotchas": [
            {
                "issue": "clock skew breaks exp checks in auth",
                "severity": "high",
                "applies_to": ["auth"],
            }
        ],
    }
    done = client.post(
        f"/v1/projects/acme/tasks/{tid}/complete", json={"handoff": handoff, "by": "bob"}
    )
    assert done.status_code == 200, done.text
    assert done.json()["task"]["status"] == "completed" and done.json()["nodes"]
    assert (
        client.get(f"/v1/projects/acme/tasks/{tid}").json()["handoff"]["summary"]
        == "JWT auth added"
    )
    second = client.post(
        "/v1/projects/acme/tasks",
        json={
            "name": "Refresh",
            "objective": "Add refresh tokens to the auth middleware",
            "dependencies": [tid],
        },
    ).json()
    ctx = client.get(
        f"/v1/projects/acme/tasks/{second['id']}/context", params={"agent": "bob"}
    ).json()
    assert "markdown" in ctx and ctx["task_id"] == second["id"]
    assert "JWT auth added" in ctx["markdown"]
    listed = client.get("/v1/projects/acme/tasks", params={"status": "completed"}).json()["tasks"]
    assert [t["id"] for t in listed] == [tid]


def test_rules_list_validate_reload(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    assert client.get("/v1/rules").json()["rules"] == []
    good = {
        "rules": [
            {
                "name": "r",
                "when": {"field": "task", "contains": "bug"},
                "then": [{"cap": "fulltext", "tokens": 100}],
            }
        ]
    }
    assert client.post("/v1/rules/validate", json=good).json()["valid"] is True
    bad = client.post("/v1/rules/validate", json={"rules": [{"name": "r", "then": []}]}).json()
    assert bad["valid"] is False and bad["problems"][0]["field"].startswith("rules[0]")
    assert client.post("/v1/rules/reload").status_code == 403  # not an admin key
    admin = client.post("/v1/rules/reload", headers=auth(ADMIN_KEY))
    assert admin.status_code == 200 and admin.json()["loaded"] == 0


def test_request_counter_uses_route_templates(api: tuple[httpx.Client, Engine]) -> None:
    client, _ = api
    client.get("/v1/projects/acme/agents")
    text = client.get("/metrics").text
    assert 'route="/v1/projects/{project}/agents"' in text


def test_settings_from_env() -> None:
    from contextwright.errors import ValidationError

    s = Settings.from_env(
        environ={
            "CONTEXTWRIGHT_DB": "memory://",
            "CONTEXTWRIGHT_PORT": "9001",
            "CONTEXTWRIGHT_API_KEYS": '{"acme-key-0000": ["acme"], "admin-key-000": "*", '
            '"alice-key-000": {"project": "acme", "agents": ["alice", "bob"]}}',
        }
    )
    assert s.db == "memory://" and s.port == 9001 and not s.open
    assert s.api_keys == {
        "acme-key-0000": KeyScope(("acme",)),
        "admin-key-000": KeyScope(("*",)),
        "alice-key-000": KeyScope(("acme",), ("alice", "bob")),
    }
    assert Settings.from_env(environ={}).open
    for env, field in [
        ({"CONTEXTWRIGHT_PORT": "http"}, "CONTEXTWRIGHT_PORT"),
        ({"CONTEXTWRIGHT_API_KEYS": "{nope"}, "CONTEXTWRIGHT_API_KEYS"),
        ({"CONTEXTWRIGHT_API_KEYS": '{"short": ["a"]}'}, "api_keys"),
        ({"CONTEXTWRIGHT_PORT": "70000"}, "port"),
    ]:
        with pytest.raises(ValidationError) as err:
            Settings.from_env(environ=env)
        assert err.value.field == field


def test_the_cli_engine_takes_its_embedder_from_the_settings(tmp_path: Path) -> None:
    from contextwright.cli import State

    settings = Settings.from_env(
        environ={
            "CONTEXTWRIGHT_DB": f"sqlite:///{tmp_path / 'v.db'}",
            "CONTEXTWRIGHT_EMBEDDER": "hash",
        }
    )
    assert settings.embedder == "hash" and Settings().embedder == "auto"
    state = State(settings)
    try:
        engine = state.engine
        engine.add(project="p", author="a", content="vectors on from the environment")
        assert engine.wait_for_embeddings(timeout=30)
        result = engine.assemble("p", "a", "environment vectors", 2000)
        assert "vector" in {s["name"] for s in result.trace.sources}
    finally:
        state.close()


def test_open_server_needs_no_key(tmp_path: Path) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 'open.db'}")
    with running(create_app(engine, Settings())) as base:
        r = httpx.post(f"{base}/v1/projects/p/records", json={"author": "a", "content": "hi"})
        assert r.status_code == 201
        listed = httpx.get(f"{base}/v1/projects/p/records").json()  # acts as admin
        assert listed["count"] == 1
    engine.close()


def test_openapi_is_a_typed_contract_that_real_answers_keep(tmp_path: Path) -> None:
    """A client generator gets a valid OpenAPI 3 document: a schema for every success answer, the
    problem+json errors, the key scheme and enums for closed sets; and what the server really
    sends on each route validates against the schema it publishes."""
    import jsonschema
    from fastapi.testclient import TestClient
    from openapi_spec_validator import validate

    engine = Engine.open(f"sqlite:///{tmp_path / 'c.db'}")
    client = TestClient(create_app(engine, Settings(api_keys=KEYS)), headers=auth(ADMIN_KEY))
    spec = client.get("/openapi.json").json()
    validate(spec)
    assert set(spec["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert spec["components"]["securitySchemes"]["apiKey"]["name"] == "X-API-Key"
    schemas = spec["components"]["schemas"]
    assert "enum" in schemas["RecordIn"]["properties"]["kind"]
    assert "project" in schemas["RecordIn"]["properties"]["visibility"]["anyOf"][0]["enum"]
    assert schemas["RecordOut"]["properties"]["kind"]["enum"][0] == "message"
    success: dict[tuple[str, str], dict[str, Any]] = {}
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            assert op["responses"]["422"]["content"]["application/problem+json"]
            for code, answer in op["responses"].items():
                if code.startswith("2"):
                    body = next(iter(answer["content"].values()))["schema"]
                    assert body, (method, path)  # never the {} a generator cannot type
                    success[(method, path)] = body

    def check(method: str, path: str, response: Any) -> dict[str, Any]:
        assert response.status_code < 300, response.text
        template = next(
            p
            for (m, p) in success
            if m == method
            and re.fullmatch(
                re.sub(r"\{[^}]+\}", "[^/]+", p.replace("{agent:path}", "{agent}")), path
            )
        )
        schema = {**success[(method, template)], "components": spec["components"]}
        jsonschema.validate(response.json(), schema)
        return dict(response.json())

    p = "/v1/projects/acme"
    rec = check(
        "post",
        f"{p}/records",
        client.post(f"{p}/records", json={"author": "pam", "content": "@dev hi"}),
    )
    check("get", f"{p}/records/{rec['id']}", client.get(f"{p}/records/{rec['id']}"))
    check("get", f"{p}/records", client.get(f"{p}/records"))
    check(
        "post",
        f"{p}/records/batch",
        client.post(f"{p}/records/batch", json={"records": [{"author": "a", "content": "x"}]}),
    )
    check("put", f"{p}/agents/dev", client.put(f"{p}/agents/dev", json={"role": "developer"}))
    check("get", f"{p}/agents/dev", client.get(f"{p}/agents/dev"))
    check("get", f"{p}/agents", client.get(f"{p}/agents"))
    check("get", "/v1/projects", client.get("/v1/projects"))
    check("get", "/v1/roles", client.get("/v1/roles"))
    check("put", f"{p}/kv/k", client.put(f"{p}/kv/k", json={"value": "v"}))
    check("get", f"{p}/kv/k", client.get(f"{p}/kv/k"))
    check("get", "/health", client.get("/health"))
    for fmt in ("openai", "anthropic", "markdown"):
        done = check(
            "post",
            f"{p}/assemble",
            client.post(f"{p}/assemble", json={"agent": "dev", "task": "hi", "format": fmt}),
        )
    t = done["trace_id"]
    check("get", f"{p}/traces", client.get(f"{p}/traces"))
    check("get", f"{p}/traces/{t}", client.get(f"{p}/traces/{t}"))
    again = check(
        "post",
        f"{p}/traces/{t}/replay",
        client.post(f"{p}/traces/{t}/replay", json={"budget": 900}),
    )
    check(
        "get",
        f"{p}/traces/{t}/diff/{again['trace']['id']}",
        client.get(f"{p}/traces/{t}/diff/{again['trace']['id']}"),
    )
    task = check(
        "post",
        f"{p}/tasks",
        client.post(f"{p}/tasks", json={"name": "T", "objective": "do src/a.py"}),
    )
    check("get", f"{p}/tasks", client.get(f"{p}/tasks"))
    check("get", f"{p}/tasks/{task['id']}/context", client.get(f"{p}/tasks/{task['id']}/context"))
    check(
        "post",
        f"{p}/tasks/{task['id']}/complete",
        client.post(f"{p}/tasks/{task['id']}/complete", json={"handoff": {"summary": "done"}}),
    )
    check("get", f"{p}/tasks/{task['id']}", client.get(f"{p}/tasks/{task['id']}"))
    check("get", "/v1/rules", client.get("/v1/rules"))
    check("post", "/v1/rules/validate", client.post("/v1/rules/validate", json={"rules": []}))
    s = f"{p}/sessions/s1"
    check(
        "post",
        f"{s}/turns",
        client.post(f"{s}/turns", json={"agent": "dev", "role": "user", "content": "hello"}),
    )
    check("get", f"{s}/gauge", client.get(f"{s}/gauge", params={"agent": "dev"}))
    check("get", f"{s}/compactions", client.get(f"{s}/compactions", params={"agent": "dev"}))
    engine.close()
