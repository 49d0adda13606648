"""Bad input, on every store: a typed error whose message names the field, the value and the fix,
and a store left exactly as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextwright import (
    Budget,
    BudgetError,
    ContextwrightError,
    Engine,
    NotFound,
    StoreError,
    ValidationError,
)
from contextwright.ports import Query, Store
from contextwright.records import MAX_CONTENT_CHARS
from contextwright.stores import open_store

T0 = 1_750_000_000.0


def snapshot(store: Store) -> tuple[Any, ...]:
    """Everything a bad call could have touched."""
    records = store.query(Query("p", None, limit=10_000))
    return (
        store.count(),
        store.version("p"),
        store.projects(),
        [(r, store.status_history(r.project, r.id)) for r in records],
        store.kv_list("p"),
        store.list_docs("traces", "p", limit=1000),
        store.list_docs("agents", "p", limit=1000),
        store.edges("p"),
    )


@pytest.fixture
def team(store: Store) -> Engine:
    engine = Engine(store, clock=lambda: T0 + 100, workers=1)
    engine.add(id="m1", project="p", author="alice", content="@bob the login is broken")
    engine.add(id="q1", project="p", author="bob", kind="question", content="Which DB?")
    engine.kv_set("p", "deploy", "staging")
    engine.assemble(project="p", agent="bob", task="login", budget=4000)
    return engine


def rejected(
    engine: Engine, call: Callable[[], object], error: type[ContextwrightError]
) -> ContextwrightError:
    engine.flush()  # traces of earlier calls are written by a background thread
    before = snapshot(engine.store)
    with pytest.raises(error) as info:
        call()
    assert snapshot(engine.store) == before
    assert info.value.message and str(info.value) == info.value.message
    return info.value


GOOD: dict[str, Any] = {"project": "p", "author": "alice", "content": "fine"}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"project": "p", "author": "alice"}, "content"),
        ({"author": "alice", "content": "x"}, "project"),
        ({**GOOD, "content": ""}, "content"),
        ({**GOOD, "content": "\n\t "}, "content"),
        ({**GOOD, "content": "x" * (MAX_CONTENT_CHARS + 1)}, "content"),
        ({**GOOD, "content": b"bytes"}, "content"),
        ({**GOOD, "content": ["a"]}, "content"),
        ({**GOOD, "content": "a NUL \x00 byte"}, "content"),
        ({**GOOD, "author": 3}, "author"),
        ({**GOOD, "author": "a" * 201}, "author"),
        ({**GOOD, "kind": "rumour"}, "kind"),
        ({**GOOD, "kind": ["message"]}, "kind"),
        ({**GOOD, "visibility": "public"}, "visibility"),
        ({**GOOD, "visibility": "direct"}, "to"),
        ({**GOOD, "to": {"bob": 1}}, "to"),
        ({**GOOD, "to": ["x"] * 300}, "to"),
        ({**GOOD, "status": "maybe"}, "status"),
        ({**GOOD, "pinned": 1}, "pinned"),
        ({**GOOD, "created_at": "now"}, "created_at"),
        ({**GOOD, "created_at": float("inf")}, "created_at"),
        ({**GOOD, "meta": "x"}, "meta"),
        ({**GOOD, "meta": {"s": {1, 2}}}, "meta.s"),
        ({**GOOD, "id": "has space"}, "id"),
        ({**GOOD, "supersedes": 5}, "supersedes"),
        ({**GOOD, "colour": "red"}, "colour"),
        ({**GOOD, "content_hash": "abc"}, "content_hash"),
    ],
)
def test_bad_records_are_rejected_and_nothing_is_stored(
    team: Engine, fields: dict[str, Any], field: str
) -> None:
    err = rejected(team, lambda: team.add(**fields), ValidationError)
    assert isinstance(err, ValidationError)
    assert err.field == field and err.fix in err.message
    # The same record inside a batch: the whole batch is refused, with its index.
    err = rejected(
        team, lambda: team.add_many([GOOD, {**GOOD, "id": "ok2"}, fields]), ValidationError
    )
    assert isinstance(err, ValidationError)
    assert err.field == f"records[2].{field}"


@pytest.mark.parametrize(
    "items", [GOOD, "records", b"x", 5, None, [GOOD, "not a record"], [GOOD, None]]
)
def test_bad_batches(team: Engine, items: Any) -> None:
    err = rejected(team, lambda: team.add_many(items), ValidationError)
    assert "record" in err.message


def bob(team: Engine, **kw: Any) -> Any:
    args: dict[str, Any] = {"project": "p", "agent": "bob", "task": "login", "budget": 4000}
    args.update(kw)
    return team.assemble(**args)


@pytest.mark.parametrize(
    ("kw", "error", "words"),
    [
        ({"format": "xml"}, ValidationError, "openai, anthropic, markdown"),
        ({"format": None}, ValidationError, "openai"),
        ({"budget": Budget(model="gpt-4", window=20, reserve=0)}, BudgetError, "budget.window"),
        ({"budget": {"model": "gpt-7"}}, ValidationError, "register_model"),
        ({"budget": {"model": "gpt-4o", "window": "big"}}, ValidationError, "whole number"),
        (
            {"budget": {"model": "gpt-4o", "window": 100, "reserve": 200}},
            ValidationError,
            "smaller than the window",
        ),
        ({"budget": -3}, ValidationError, "Budget("),
        ({"budget": "lots"}, ValidationError, "Budget("),
        ({"agent": "zed"}, NotFound, "register_agent"),
        ({"project": "nope"}, NotFound, "register_agent"),
        ({"agent": ""}, ValidationError, "non-empty"),
        ({"agent": None}, ValidationError, "non-empty"),
        ({"project": 5}, ValidationError, "must be a string"),
        ({"task": 42}, ValidationError, "text"),
        ({"task": "x" * 20_001}, ValidationError, "20000"),
        ({"session": ""}, ValidationError, "1-200 characters"),
        ({"milestone": 7}, ValidationError, "must be a string"),
        ({"working_memory": "just a string"}, ValidationError, "list of strings"),
        ({"working_memory": [1, 2]}, ValidationError, "list of strings"),
        ({"sources": ["history", "astrology"]}, ValidationError, "source names"),
        ({"sources": "history"}, ValidationError, "list of source names"),
        ({"limits": {"history": "many"}}, ValidationError, "limits"),
        ({"limits": {"history": -1}}, ValidationError, "limits"),
        ({"limits": [1]}, ValidationError, "limits"),
    ],
)
def test_bad_assemble_requests(
    team: Engine, kw: dict[str, Any], error: type[ContextwrightError], words: str
) -> None:
    err = rejected(team, lambda: bob(team, **kw), error)
    assert words in err.message


def test_a_budget_too_small_for_the_state_section_says_what_it_needs(team: Engine) -> None:
    err = rejected(
        team,
        lambda: bob(team, budget=Budget(model="gpt-4", window=20, reserve=0), task="fix the login"),
        BudgetError,
    )
    assert err.details["available"] == 20 and err.details["needed"] > 0


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda e: e.get("p", "01NOPE"), NotFound, "'01NOPE' does not exist"),
        (lambda e: e.get("p", ""), ValidationError, "id"),
        (lambda e: e.get("p", None), ValidationError, "id"),
        (lambda e: e.set_status("p", "01NOPE", "resolved", by="bob"), NotFound, "record"),
        (lambda e: e.set_status("p", "q1", "finished", by="bob"), ValidationError, "use one of"),
        (lambda e: e.set_status("p", "q1", "resolved", by=""), ValidationError, "by"),
        (lambda e: e.resolve("p", "01NOPE", by="bob"), NotFound, "record"),
        (lambda e: e.trace("p", "01NOPE"), NotFound, "trace"),
        (lambda e: e.trace("p", 7), ValidationError, "trace_id"),
        (lambda e: e.kv_get("p", "missing"), NotFound, "kv_set"),
        (lambda e: e.kv_set("p", "k", 5), ValidationError, "value"),
        (lambda e: e.kv_set("p", "", "v"), ValidationError, "key"),
        (lambda e: e.records("p", limit=0), ValidationError, "limit"),
        (lambda e: e.records("p", colour="red"), ValidationError, "filter by"),
        (lambda e: e.records("p", since=float("nan")), ValidationError, "since=nan"),
        (lambda e: e.records("p", before=float("inf")), ValidationError, "before=inf"),
        (lambda e: e.records("p", since="yesterday"), ValidationError, "seconds since the epoch"),
        (lambda e: e.records("p", since=True), ValidationError, "since=True"),
        (
            lambda e: e.register_agent("p", "zed", profile={"name": "x", "wings": 2}),
            ValidationError,
            "profile.wings",
        ),
        (lambda e: e.agent("p", "zed"), NotFound, "agent"),
        # issue 26, "Smaller": each error names its fix.
        (lambda e: e.register_agent("p", "zed", role="develper"), ValidationError, "developer"),
        (lambda e: e.records("p", kind="question"), ValidationError, "kinds=('question',)"),
        (lambda e: e.records("p", status="open"), ValidationError, "statuses=('open',)"),
        (
            lambda e: e.complete_task("p", "q1", {"summary": "done"}),
            ValidationError,
            "is a question record, not a task",
        ),
        (lambda e: e.tasks.computed_context("p", "m1"), ValidationError, "not a task"),
        (lambda e: e.complete_task("p", "01NOPE", {"summary": "x"}), NotFound, "task"),
        (
            lambda e: e.assemble("p", "bob", "x", milestone="bad name!"),
            ValidationError,
            "milestone",
        ),
        (lambda e: e.tasks.create("p", name="", objective="x"), ValidationError, "name"),
        (lambda e: e.tasks.create("p", name="n", objective=5), ValidationError, "objective"),
        (
            lambda e: e.tasks.create("p", name="n", objective="x" * 9000),
            ValidationError,
            "under 8000",
        ),
        (
            lambda e: e.tasks.create("p", name="n", objective="o", dependencies=["m1"]),
            ValidationError,
            "dependencies[0]",
        ),
        (lambda e: e.replay("p", "01NOPE"), NotFound, "trace"),
        (lambda e: e.diff("p", "01NOPE", "01NOPE2"), NotFound, "trace"),
    ],
)
def test_unknown_ids_and_bad_arguments(
    team: Engine, call: Callable[[Engine], object], error: type[ContextwrightError], words: str
) -> None:
    err = rejected(team, lambda: call(team), error)
    assert words in err.message


@pytest.mark.parametrize(
    "url",
    [
        "",
        None,
        5,
        "sqlite://relative.db",
        "sqlite:///",
        "mysql://localhost/db",
        "memory:",
        "team.db",
        "http://x",
    ],
)
def test_malformed_store_urls(url: Any) -> None:
    with pytest.raises(ValidationError) as info:
        open_store(url)
    assert info.value.field == "url"
    assert "sqlite:///" in info.value.message
    with pytest.raises(ValidationError):
        Engine.open(url)


def test_a_path_that_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError) as info:
        open_store(f"sqlite:///{blocker / 'team.db'}")
    assert "does not exist" in info.value.message
    with pytest.raises(StoreError):
        open_store(f"sqlite:///{tmp_path / 'missing-dir' / 'team.db'}")
    with pytest.raises(StoreError) as info:
        open_store(f"sqlite:///{tmp_path}")  # a directory, not a file
    assert str(tmp_path) in info.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_file_that_is_not_a_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    content = b"these are my notes, not a database\n" * 200
    path.write_bytes(content)
    with pytest.raises(StoreError) as info:
        open_store(f"sqlite:///{path}")
    assert "cannot open" in info.value.message
    assert path.read_bytes() == content


def test_a_read_only_database_refuses_writes_with_a_store_error(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "ro.db"
    store = open_store(f"sqlite:///{path}")
    engine = Engine(store, workers=1)
    engine.add(project="p", author="a", content="kept")
    before = snapshot(store)
    # Another connection holds the write lock; the store must fail cleanly, not corrupt anything.
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA busy_timeout=0")
    other.execute("BEGIN EXCLUSIVE")
    conn = store._conn()  # type: ignore[attr-defined]
    conn.execute("PRAGMA busy_timeout=50")
    try:
        with pytest.raises(StoreError) as info:
            engine.add(project="p", author="a", content="blocked")
        assert "cannot write" in info.value.message
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert snapshot(store) == before
    engine.close()


def test_a_role_defined_by_its_profile_is_accepted(team: Engine) -> None:
    agent = team.register_agent("p", "zed", role="lawyer", profile={"name": "lawyer"})
    assert agent.role == "lawyer"


def test_a_tool_call_described_by_tool_and_arguments_needs_no_text(team: Engine) -> None:
    call = team.sessions.append(
        "p", "bob", "s1", "tool_call", "", tool="search", arguments={"q": "auth"}
    )
    assert call.content == 'search({"q": "auth"})' and call.meta["name"] == "search"
    bare = team.sessions.append("p", "bob", "s1", "tool_call", " ", tool="ls")
    assert bare.content == "ls()"
    rejected(
        team,
        lambda: team.sessions.append("p", "bob", "s1", "tool_call", "", tool=""),
        ValidationError,
    )
