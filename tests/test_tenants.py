"""A record's identity is (project, id), and references resolve inside the writer's project.

Issue 24, findings 1 (reading another project's record by posting its id), 3 (retiring another
project's decision; links to ids that exist nowhere) and 4 (forging another project's task
handoff): in Python on every store, and over HTTP with keys scoped to one project each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextwright import Engine, ValidationError
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import auth, running

ALPHA_KEY = "alpha-key-00000"
BETA_KEY = "beta-key-000000"


def world(engine: Engine) -> dict[str, Any]:
    """alpha's secrets: a private note, a decision and a task with its real handoff."""
    note = engine.add(
        id="note-1",
        project="alpha",
        author="alice",
        content="alpha secret: the token is 1234",
        visibility="private",
    )
    decision = engine.add(project="alpha", author="alice", kind="decision", content="use JWT")
    task = engine.tasks.create("alpha", name="auth", objective="add auth", author="alice")
    engine.complete_task("alpha", task.id, {"summary": "REAL handoff"}, by="alice")
    return {"note": note, "decision": decision, "task": task}


def alpha_state(engine: Engine) -> list[tuple[str, str | None, str]]:
    return [
        (r.id, r.status, r.content) for r in engine.records("alpha", limit=1000, newest_first=False)
    ]


# -- finding 1: an id of another project is another record ---------------------------------------


def test_beta_posting_alphas_id_gets_its_own_record(engine: Engine) -> None:
    w = world(engine)
    before = alpha_state(engine)
    mine = engine.add(id="note-1", project="beta", author="eve", content="x")
    assert (mine.project, mine.content) == ("beta", "x")
    assert engine.get("alpha", "note-1") == w["note"]
    assert engine.get("beta", "note-1") == mine
    task = engine.add(id=w["task"].id, project="beta", author="eve", kind="task", content="t")
    assert task.project == "beta" and task.meta == {}
    assert alpha_state(engine) == before


def test_a_repeated_id_with_other_content_is_refused(engine: Engine) -> None:
    world(engine)
    with pytest.raises(ValidationError) as err:
        engine.add(id="note-1", project="alpha", author="alice", content="other")
    assert err.value.field == "id" and err.value.value == "note-1"
    assert "new id" in err.value.fix
    with pytest.raises(ValidationError) as err:
        engine.add_many(
            [
                {"project": "alpha", "author": "alice", "content": "fresh"},
                {"id": "note-1", "project": "alpha", "author": "alice", "content": "other"},
            ]
        )
    assert err.value.field == "records[1].id" or err.value.field == "id"
    assert [r.content for r in engine.records("alpha", limit=100) if r.content == "fresh"] == []


# -- finding 3: references resolve in the writer's project, and must resolve ---------------------


@pytest.mark.parametrize("field", ["supersedes", "reply_to"])
def test_a_link_to_another_projects_record_is_refused(engine: Engine, field: str) -> None:
    w = world(engine)
    before = alpha_state(engine)
    target = w["decision"].id
    with pytest.raises(ValidationError) as err:
        engine.add(project="beta", author="eve", kind="decision", content="x", **{field: target})
    assert err.value.field == field and err.value.value == target
    assert "alpha" not in err.value.message
    with pytest.raises(ValidationError) as err:
        engine.add_many(
            [
                {"project": "beta", "author": "eve", "content": "ok"},
                {"project": "beta", "author": "eve", "content": "x", field: target},
            ]
        )
    assert err.value.field == f"records[1].{field}"
    assert engine.store.count("beta") == 0  # nothing of the batch
    assert alpha_state(engine) == before
    assert engine.get("alpha", target).status == "active"


@pytest.mark.parametrize("field", ["supersedes", "reply_to"])
def test_a_link_to_an_id_that_exists_nowhere_is_refused(engine: Engine, field: str) -> None:
    world(engine)
    with pytest.raises(ValidationError) as err:
        engine.add(project="alpha", author="alice", content="x", **{field: "typo-id"})
    assert err.value.field == field and err.value.value == "typo-id"
    assert "give the id of a record" in err.value.fix


def test_rec_refs_must_resolve_and_other_refs_stay_free(engine: Engine) -> None:
    w = world(engine)
    ok = engine.add(
        project="alpha",
        author="alice",
        content="x",
        refs=["src/app.py", "https://example.com", f"rec:{w['decision'].id}"],
    )
    assert ok.refs[-1] == f"rec:{w['decision'].id}"
    with pytest.raises(ValidationError) as err:
        engine.add(project="beta", author="eve", content="x", refs=[f"rec:{w['decision'].id}"])
    assert err.value.field == "refs[0]"


def test_a_record_may_supersede_one_later_in_the_same_batch(engine: Engine) -> None:
    stored = engine.add_many(
        [
            {"id": "new", "project": "p", "author": "a", "kind": "decision", "content": "B",
             "supersedes": "old"},
            {"id": "old", "project": "p", "author": "a", "kind": "decision", "content": "A"},
        ]
    )  # fmt: skip
    assert [r.id for r in stored] == ["new", "old"]
    assert engine.get("p", "old").status == "superseded"


@pytest.mark.parametrize("field", ["supersedes", "reply_to"])
def test_a_record_may_not_name_itself(engine: Engine, field: str) -> None:
    # Found by tests/test_isolation_properties.py: the record itself made the link resolve, and a
    # decision that superseded itself was acknowledged active and stored superseded.
    fields = {"id": "d1", "project": "p", "author": "a", "kind": "decision", "content": "x"}
    with pytest.raises(ValidationError) as err:
        engine.add(**fields, **{field: "d1"})
    assert err.value.field == field and "names the record itself" in err.value.message
    with pytest.raises(ValidationError) as err:
        engine.add_many([{**fields, field: "d1"}])
    assert err.value.field == f"records[0].{field}"
    with pytest.raises(ValidationError) as err:
        engine.add(**fields, refs=["rec:d1"])
    assert err.value.field == "refs[0]"
    assert engine.store.count("p") == 0


def test_superseding_needs_the_right_to_see_the_decision(engine: Engine) -> None:
    mine = engine.add(
        project="p", author="alice", kind="decision", content="mine", visibility="private"
    )
    with pytest.raises(ValidationError) as err:
        engine.add(project="p", author="bob", kind="decision", content="no", supersedes=mine.id)
    assert err.value.field == "supersedes" and "'bob' may see" in err.value.message
    assert engine.get("p", mine.id).status == "active"
    engine.add(project="p", author="alice", kind="decision", content="yes", supersedes=mine.id)
    assert engine.get("p", mine.id).status == "superseded"


def test_a_status_change_never_crosses_projects(engine: Engine) -> None:
    w = world(engine)
    engine.add(id="note-1", project="beta", author="eve", content="x")
    engine.set_status("beta", "note-1", "resolved", by="eve")
    assert engine.get("alpha", "note-1").status == w["note"].status
    assert engine.store.status_history("alpha", "note-1") == []


# -- finding 4: handoffs come from the task's own project, newest by the store's order ----------


def test_a_forged_handoff_is_refused_and_never_read(engine: Engine) -> None:
    w = world(engine)
    task = w["task"]
    forged = {
        "project": "beta",
        "author": "eve",
        "kind": "handoff",
        "reply_to": task.id,
        "created_at": 9e9,
        "meta": {"handoff": {"summary": "FORGED"}},
        "content": "FORGED",
    }
    with pytest.raises(ValidationError) as err:
        engine.add(**forged)
    assert err.value.field == "reply_to"
    # Even one written past the engine (straight into the store) is never read for alpha.
    engine.add(project="beta", author="eve", kind="task", content="t", id=task.id)
    engine.add(**forged)  # now it resolves: to beta's own record with that id
    handoff = engine.tasks.handoff("alpha", task.id)
    assert handoff is not None and handoff.summary == "REAL handoff"


def test_the_newest_handoff_is_by_insertion_not_created_at(engine: Engine) -> None:
    task = engine.tasks.create("p", name="t", objective="o", author="lead")
    engine.complete_task("p", task.id, {"summary": "first"}, by="lead")

    def handoff(summary: str, at: float) -> dict[str, Any]:
        return {"project": "p", "author": "x", "kind": "handoff", "reply_to": task.id,
                "created_at": at, "content": summary, "meta": {"handoff": {"summary": summary}}}  # fmt: skip

    after = engine.tasks.create(
        "p", name="next", objective="after t", dependencies=[task.id], author="lead"
    )
    engine.tasks.computed_context("p", after.id, agent="lead")  # a graph snapshot, then newer
    engine.add(**handoff("from the future", 9e9))
    engine.add(**handoff("written last", 1.0))
    found = engine.tasks.handoff("p", task.id)
    assert found is not None and found.summary == "written last"
    # The computed context of a task that depends on it reads the same one, from a refreshed
    # snapshot and from a fresh one.
    for _ in range(2):
        context = json.dumps(engine.tasks.computed_context("p", after.id).to_dict(), default=str)
        assert "written last" in context and "from the future" not in context
        engine.tasks.graph.full_reload_s = 0


def private_handoff(engine: Engine) -> tuple[str, str]:
    """A completed task with a project handoff, then alice's private one (newer); and a task that
    depends on it. Returns (done, next)."""
    done = engine.tasks.create("p", name="login", objective="fix the login", author="lead").id
    engine.complete_task("p", done, {"summary": "PUBLIC handoff"}, by="lead")
    engine.add(
        project="p",
        author="alice",
        kind="handoff",
        visibility="private",
        reply_to=done,
        content="mine",
        meta={"handoff": {"summary": "ALICE-ONLY handoff"}},
    )
    after = engine.tasks.create(
        "p", name="next", objective="after the login", dependencies=[done], author="lead"
    )
    return done, after.id


def test_a_private_handoff_reaches_only_whom_it_was_written_to(engine: Engine) -> None:
    # Found by tests/test_isolation_properties.py: the newest handoff was read whatever its
    # visibility, so bob read alice's private one (task reads, and his computed context).
    done, after = private_handoff(engine)
    bob = engine.tasks.handoff("p", done, "bob")
    assert bob is not None and bob.summary == "PUBLIC handoff"
    alice = engine.tasks.handoff("p", done, "alice")
    assert alice is not None and alice.summary == "ALICE-ONLY handoff"
    trusted = engine.tasks.handoff("p", done)
    assert trusted is not None and trusted.summary == "ALICE-ONLY handoff"
    context = engine.tasks.computed_context("p", after, agent="bob")
    text = json.dumps(context.to_dict(), default=str) + context.render(engine.tasks.template)
    assert "ALICE-ONLY" not in text and "PUBLIC handoff" in text
    context = engine.tasks.computed_context("p", after, agent="alice")
    assert "ALICE-ONLY" in json.dumps(context.to_dict(), default=str)


def test_http_a_private_handoff_is_shown_only_to_whom_it_was_written_to(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    bob_key = "p-bob-key-00000"
    keys: dict[str, Any] = {ALPHA_KEY: ["p"], bob_key: {"project": "p", "agents": ["bob"]}}
    with Engine.open(db) as engine:
        done, after = private_handoff(engine)
        app = create_app(engine, Settings(db=db, api_keys=keys))
        with running(app) as base, httpx.Client(base_url=base) as c:

            def task(key: str, **params: str) -> httpx.Response:
                return c.get(f"/v1/projects/p/tasks/{done}", headers=auth(key), params=params)

            for r in (task(bob_key), task(bob_key, agent="bob"), task(ALPHA_KEY, agent="bob")):
                assert r.status_code == 200, r.text
                assert r.json()["handoff"]["summary"] == "PUBLIC handoff", r.text
            r = task(ALPHA_KEY, agent="alice")
            assert r.json()["handoff"]["summary"] == "ALICE-ONLY handoff"
            assert task(bob_key, agent="alice").status_code == 403
            r = c.get(
                f"/v1/projects/p/tasks/{after}/context",
                headers=auth(bob_key),
                params={"agent": "bob"},
            )
            assert r.status_code == 200 and "PUBLIC handoff" in r.text
            assert "ALICE-ONLY" not in r.text


def test_a_dependency_of_another_project_is_refused(engine: Engine) -> None:
    w = world(engine)
    with pytest.raises(ValidationError) as err:
        engine.tasks.create("beta", name="t", objective="o", dependencies=[w["task"].id])
    assert err.value.field == "dependencies[0]" and "alpha" not in err.value.message
    assert engine.store.count("beta") == 0


def test_another_projects_task_reads_as_missing(engine: Engine) -> None:
    w = world(engine)
    with pytest.raises(Exception, match="does not exist"):
        engine.tasks.get("beta", w["task"].id)
    with pytest.raises(Exception, match="does not exist"):
        engine.complete_task("beta", w["task"].id, {"summary": "x"})


# -- over HTTP, with keys scoped to one project each --------------------------------------------


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Engine]]:
    db = tmp_path_factory.mktemp("tenants") / "t.db"
    engine = Engine.open(f"sqlite:///{db}")
    keys = {ALPHA_KEY: ("alpha",), BETA_KEY: ("beta",)}
    app = create_app(engine, Settings(db=f"sqlite:///{db}", api_keys=keys))
    world(engine)
    with running(app) as base:
        yield base, engine
    engine.close()


def beta(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers=auth(BETA_KEY))


def test_http_beta_posting_alphas_id(http: tuple[str, Engine]) -> None:
    base, engine = http
    before = alpha_state(engine)
    with beta(base) as c:
        r = c.post(
            "/v1/projects/beta/records", json={"author": "eve", "content": "x", "id": "note-1"}
        )
        assert r.status_code == 201, r.text
        assert r.json()["project"] == "beta" and "secret" not in r.text
        r = c.post(
            "/v1/projects/beta/records/batch",
            json={"records": [{"author": "eve", "content": "y", "id": "note-2"}]},
        )
        assert r.status_code == 201 and r.json() == {"count": 1, "ids": ["note-2"]}
        assert engine.get("beta", "note-2").content == "y"
        r = c.post(
            "/v1/projects/beta/records", json={"author": "eve", "content": "z", "id": "note-1"}
        )
        assert r.status_code == 422 and r.json()["field"] == "id" and "alpha" not in r.text
    assert alpha_state(engine) == before


@pytest.mark.parametrize("field", ["supersedes", "reply_to"])
def test_http_links_across_projects_or_to_nothing_are_422(
    http: tuple[str, Engine], field: str
) -> None:
    base, engine = http
    target = engine.records("alpha", kinds=["decision"], limit=1)[0].id
    before = alpha_state(engine)
    with beta(base) as c:
        for value in (target, "no-such-id"):
            body = {"author": "eve", "kind": "decision", "content": "x", field: value}
            r = c.post("/v1/projects/beta/records", json=body)
            assert r.status_code == 422 and r.json()["field"] == field, r.text
            r = c.post("/v1/projects/beta/records/batch", json={"records": [body]})
            assert r.status_code == 422 and r.json()["field"] == f"records[0].{field}", r.text
            assert "alpha" not in r.text
    assert alpha_state(engine) == before


def test_http_forged_handoff(http: tuple[str, Engine]) -> None:
    base, engine = http
    task = engine.tasks.find("alpha")[0]
    forged = {
        "author": "eve",
        "kind": "handoff",
        "reply_to": task.id,
        "created_at": 9e9,
        "content": "FORGED",
        "meta": {"handoff": {"summary": "FORGED"}},
    }
    with beta(base) as c:
        r = c.post("/v1/projects/beta/records", json=forged)
        assert r.status_code == 422 and r.json()["field"] == "reply_to"
    with httpx.Client(base_url=base, headers=auth(ALPHA_KEY)) as c:
        r = c.get(f"/v1/projects/alpha/tasks/{task.id}")
        assert r.status_code == 200 and r.json()["handoff"]["summary"] == "REAL handoff"


def test_sqlite_file_reopens_with_both_records(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with Engine.open(url) as e:
        e.add(id="same", project="alpha", author="a", content="A")
        e.add(id="same", project="beta", author="b", content="B")
    with Engine.open(url) as e:
        assert e.get("alpha", "same").content == "A" and e.get("beta", "same").content == "B"
