"""Handoffs: YAML/JSON/mapping input, validation naming the field and the fix, and completion that
writes everything or nothing (a bad handoff leaves the task open and the store as it was)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwright import Engine, NotFound, ValidationError
from contextwright.ports import Query
from contextwright.tasks import Handoff, parse_handoff

GOOD_YAML = """
summary: Added JWT middleware that checks the Authorization header.
files_created:
  - {path: src/api/middleware/jwt.ts, lines: 1-80, purpose: verifies JWT tokens}
files_modified:
  - path: src/api/app.ts
    lines: 10-14
    purpose: registers the auth middleware
dependencies_for_next:
  - {file: src/api/middleware/jwt.ts, reason: the token check}
  - docs/auth.md
patterns_discovered:
  - {pattern: Wrap handlers with requireAuth(), applies_to: [auth, API], location: src/api/middleware/jwt.ts}
gotchas:
  - {issue: Tokens expire after 15 minutes, severity: high}
  - {issue: Verbose logs, severity: low}
  - Clock skew breaks exp checks
open_questions:
  - question: "Cookies or local storage for refresh tokens?"
    blocking: true
    context: XSS risk
    recommendation: httpOnly cookie
  - {question: "Rename the header?", blocking: false}
decisions:
  - {decision: Use RS256 signed JWTs, rationale: keys rotate without shared secrets}
"""


def test_yaml_json_and_mapping_give_the_same_handoff() -> None:
    from_yaml = parse_handoff(GOOD_YAML)
    as_dict = from_yaml.to_dict()
    assert parse_handoff(json.dumps(as_dict)) == from_yaml
    assert parse_handoff(as_dict) == from_yaml
    assert parse_handoff(from_yaml) == from_yaml
    assert from_yaml.patterns_discovered[0].applies_to == ("auth", "api")
    assert from_yaml.gotchas[2].severity == "medium"  # the spec's default
    assert from_yaml.dependencies_for_next[1].file == "docs/auth.md"
    assert from_yaml.files_modified[0].location == "src/api/app.ts:10-14"


def test_files_to_read_falls_back_to_files_created() -> None:
    h = parse_handoff({"summary": "s", "files_created": [{"path": "a.py", "purpose": "p"}]})
    assert [(f.file, f.reason) for f in h.files_to_read()] == [("a.py", "p")]


BAD: list[tuple[Any, str, str]] = [
    ("[1, 2]", "handoff", "must be an object"),
    ("summary: [unclosed", "handoff", "does not parse"),
    ({}, "handoff.summary", "is missing"),
    ({"summary": "  "}, "handoff.summary", "is empty"),
    ({"summary": "s", "sumary": "typo"}, "handoff.sumary", "the known fields are"),
    ({"summary": "s", "gotchas": "oops"}, "handoff.gotchas", "must be a list"),
    (
        {"summary": "s", "gotchas": [{"issue": "x", "severity": "urgent"}]},
        "handoff.gotchas[0].severity",
        "low, medium, high",
    ),
    ({"summary": "s", "gotchas": [{"severity": "high"}]}, "handoff.gotchas[0].issue", "is missing"),
    (
        {"summary": "s", "open_questions": [{"question": "q", "blocking": "yes"}]},
        "handoff.open_questions[0].blocking",
        "true or false",
    ),
    (
        {"summary": "s", "decisions": [{"decision": "d"}]},
        "handoff.decisions[0].rationale",
        "is missing",
    ),
    (
        {"summary": "s", "files_created": [{"lines": "1-2"}]},
        "handoff.files_created[0].path",
        "is missing",
    ),
    (
        {"summary": "s", "files_modified": [{"path": "a", "colour": 1}]},
        "handoff.files_modified[0].colour",
        "known fields",
    ),
    (
        {"summary": "s", "patterns_discovered": [{"pattern": "p", "applies_to": [""]}]},
        "handoff.patterns_discovered[0].applies_to[0]",
        "is empty",
    ),
    (
        {"summary": "s", "gotchas": [{"issue": "x" * 5000}]},
        "handoff.gotchas[0].issue",
        "under 4000",
    ),
]


@pytest.mark.parametrize(("handoff", "field", "says"), BAD)
def test_bad_handoff_names_the_field_and_the_fix(handoff: Any, field: str, says: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_handoff(handoff)
    assert info.value.field == field
    assert says in info.value.message
    assert info.value.fix


def _snapshot(engine: Engine, project: str) -> tuple[int, int, list[tuple[str, str, str]]]:
    return (
        engine.store.count(project),
        engine.store.version(project),
        engine.store.edges(project),
    )


@pytest.mark.parametrize(("handoff", "field", "says"), BAD[:6])
def test_bad_handoff_leaves_task_open_and_store_unchanged(
    engine: Engine, handoff: Any, field: str, says: str
) -> None:
    task = engine.tasks.create("p", name="t", objective="do the thing")
    before = _snapshot(engine, "p")
    with pytest.raises(ValidationError) as info:
        engine.complete_task(task.project, task.id, handoff)
    assert info.value.field == field
    assert engine.get(task.project, task.id).status == "open"
    assert _snapshot(engine, "p") == before


def test_superseding_an_unknown_decision_is_rejected_before_any_write(engine: Engine) -> None:
    task = engine.tasks.create("p", name="t", objective="do it")
    before = _snapshot(engine, "p")
    bad = {"summary": "s", "decisions": [{"decision": "d", "rationale": "r", "supersedes": "NOPE"}]}
    with pytest.raises(ValidationError, match=r"handoff\.decisions"):
        engine.complete_task(task.project, task.id, bad)
    assert engine.get(task.project, task.id).status == "open"
    assert _snapshot(engine, "p") == before


def test_completing_twice_is_rejected(engine: Engine) -> None:
    task = engine.tasks.create("p", name="t", objective="do it")
    engine.complete_task(task.project, task.id, {"summary": "done"})
    with pytest.raises(ValidationError, match="already completed"):
        engine.complete_task(task.project, task.id, {"summary": "again"})


def test_complete_writes_handoff_nodes_edges_and_status(engine: Engine) -> None:
    task = engine.tasks.create("p", name="JWT", objective="Add JWT auth", assignee="dev")
    done = engine.tasks.complete(task.project, task.id, GOOD_YAML)
    assert done.task.status == "completed"
    assert engine.store.status_history(task.project, task.id)[-1]["status"] == "completed"
    assert done.handoff.kind == "handoff" and done.handoff.reply_to == task.id
    assert engine.tasks.handoff(task.project, task.id) == parse_handoff(GOOD_YAML)
    kinds = sorted(r.kind for r in done.nodes)
    assert kinds == ["decision", "gotcha", "gotcha", "gotcha", "pattern", "question", "question"]
    gotcha = next(r for r in done.nodes if r.content == "Tokens expire after 15 minutes")
    assert gotcha.meta["severity"] == "high"
    assert gotcha.author == "dev"  # the assignee did the work
    pattern = next(r for r in done.nodes if r.kind == "pattern")
    assert pattern.tags == ("auth", "api")
    edges = engine.store.edges("p", dst=task.id, kind="discovered_in")
    assert {e[0] for e in edges} == {r.id for r in done.nodes}
    assert engine.store.edges("p", dst=task.id, kind="changed_in")
    files = {r.meta["path"]: r for r in done.files}
    assert files["src/api/app.ts"].meta["location"] == "src/api/app.ts:10-14"
    assert files["src/api/app.ts"].meta["component"] == "api"
    assert files["src/api/middleware/jwt.ts"].status == "active"


def test_context_map_update_or_add_supersedes_the_older_entry(engine: Engine) -> None:
    a = engine.tasks.create("p", name="a", objective="first")
    b = engine.tasks.create("p", name="b", objective="second", dependencies=[a.id])
    first = engine.tasks.complete(
        "p", a.id, {"summary": "s", "files_created": [{"path": "src/x.py", "purpose": "old"}]}
    )
    second = engine.tasks.complete(
        "p",
        b.id,
        {
            "summary": "s",
            "files_modified": [{"path": "src/x.py", "lines": "3-9", "purpose": "new"}],
        },
    )
    old, new = first.files[0], second.files[0]
    assert new.supersedes == old.id
    assert engine.get(old.project, old.id).status == "superseded"
    live = engine.store.query(Query("p", None, kinds=("file",), statuses=("active",)))
    assert [r.meta["notes"] for r in live] == ["new"]


def test_task_creation_validates(engine: Engine) -> None:
    with pytest.raises(ValidationError) as info:
        engine.tasks.create("p", name="t", objective="o", complexity="hard")
    assert info.value.field == "complexity"
    with pytest.raises(ValidationError) as info:
        engine.tasks.create("p", name="", objective="o")
    assert info.value.field == "name"
    with pytest.raises(ValidationError) as info:
        engine.tasks.create("p", name="t", objective="o", acceptance_criteria="one string")
    assert info.value.field == "acceptance_criteria"
    with pytest.raises(ValidationError, match=r"dependencies\[0\]"):
        engine.tasks.create("p", name="t", objective="o", dependencies=["missing"])
    note = engine.add(project="p", author="a", content="not a task")
    with pytest.raises(ValidationError) as info:
        engine.tasks.create("p", name="t", objective="o", dependencies=[note.id])
    assert info.value.field == "dependencies[0]"
    assert engine.store.count("p") == 1


def test_task_record_and_dependency_edges(engine: Engine) -> None:
    a = engine.tasks.create("p", name="a", objective="Build the schema migration")
    b = engine.tasks.create(
        "p",
        name="b",
        objective="Query users",
        acceptance_criteria=["fast"],
        type="bugfix",
        complexity="easy",
        dependencies=[a.id],
        author="lead",
        assignee="dev",
    )
    assert b.kind == "task" and b.status == "open" and b.to == ("dev",)
    assert b.meta["dependencies"] == [a.id] and b.meta["complexity"] == "easy"
    assert engine.store.edges("p", src=b.id) == [(b.id, a.id, "depends_on")]
    assert "database" in engine.get(a.project, a.id).tags
    assert [t.id for t in engine.tasks.find("p")] == [a.id, b.id]
    with pytest.raises(ValidationError, match="is a message record, not a task"):
        engine.tasks.get("p", engine.add(project="p", author="x", content="note").id)
    with pytest.raises(NotFound):
        engine.tasks.get("p", "01NOSUCHTASK")


def test_handoff_type_is_exported() -> None:
    assert Handoff(summary="x").to_dict()["summary"] == "x"
