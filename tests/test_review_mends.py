"""Mends of a review of the visibility and input fixes: each test fails on the code before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextwright import Engine, NotFound, ValidationError
from contextwright.importers import read_rows


@pytest.fixture
def engine() -> Engine:
    e = Engine.open("memory://", embedder=None)
    for name in ("alice", "bob", "carol"):
        e.register_agent("acme", name)
    return e


def test_a_private_record_is_its_authors_alone_whatever_its_to(engine: Engine) -> None:
    """A private file entry with `to` is alice's alone: her direct task's completion, which bob
    sees, must not supersede it (bob would read an id he may not see, and her entry's status
    would change)."""
    mine = engine.add(
        project="acme", author="alice", kind="file", content="f", visibility="private",
        to=["bob"], tags=["path:a.py"], status="active",
    )  # fmt: skip
    task = engine.add(
        project="acme", author="alice", kind="task", content="T", visibility="direct",
        to=["bob"], meta={"name": "t", "objective": "o"},
    )  # fmt: skip
    done = engine.tasks.complete(
        "acme", task.id, {"summary": "s", "files_created": [{"path": "a.py", "purpose": "p"}]},
        by="alice",
    )  # fmt: skip
    assert [f.supersedes for f in done.files] == [None]
    assert engine.get("acme", mine.id).status == mine.status


def test_a_dependency_its_reader_may_not_see_reads_as_one_that_exists_nowhere(
    engine: Engine,
) -> None:
    hidden = engine.add(
        project="acme", author="alice", kind="task", content="SECRET", visibility="private",
        meta={"name": "secret", "objective": "x"},
    )  # fmt: skip
    engine.tasks.complete("acme", hidden.id, {"summary": "done"}, by="alice")
    public = engine.add(
        project="acme", author="alice", kind="task", content="public",
        meta={"name": "pub", "objective": "o", "dependencies": [hidden.id, "nowhere"]},
    )  # fmt: skip
    context = engine.tasks.computed_context("acme", public.id, agent="bob", debug=True)
    skipped = context.stats.dependencies_skipped
    assert skipped[hidden.id] == skipped["nowhere"] == "not found"


def test_the_handoff_of_a_hidden_record_is_the_answer_of_an_unknown_id(engine: Engine) -> None:
    message = engine.add(project="acme", author="alice", content="secret", visibility="private")
    with pytest.raises(NotFound) as hidden:
        engine.tasks.handoff("acme", message.id, "bob")
    with pytest.raises(NotFound) as unknown:
        engine.tasks.handoff("acme", "01M8FZEA1E3W64XEF0TRQQWHZZ", "bob")
    assert str(hidden.value).replace(message.id, "ID") == str(unknown.value).replace(
        "01M8FZEA1E3W64XEF0TRQQWHZZ", "ID"
    )
    with pytest.raises(ValidationError, match="not a task"):  # alice sees it: its kind is told
        engine.tasks.handoff("acme", message.id, "alice")


@pytest.mark.parametrize(
    "conversation",
    [
        {"id": "c", "messages": [{"role": "user", "content": "hi", "create_time": int("9" * 400)}]},
        {"id": "c", "create_time": int("9" * 400), "messages": [{"role": "user", "content": "hi"}]},
        {"id": "c", "create_time": 1e308, "messages": [{"role": "user", "content": "hi"}]},
        {"id": "c", "messages": [{"role": "user", "content": "hi", "create_time": float("nan")}]},
    ],
    ids=["huge-integer", "huge-base-integer", "huge-float", "nan"],
)
def test_a_time_no_clock_can_hold_is_refused_at_its_place(
    tmp_path: Path, conversation: dict[str, object]
) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps([conversation]))
    with pytest.raises(ValidationError) as err:
        read_rows(str(path), "openai", "p")
    assert err.value.field.startswith("conversations[0]")
    assert "create_time" in err.value.field


@pytest.mark.parametrize(
    ("profile", "field"),
    [
        ({"default_model": "mystery-model"}, "profile.default_model"),
        ({"default_model": "gpt-4o", "default_window": 10**9}, "profile.default_window"),
    ],
)
def test_a_stored_profile_this_process_cannot_budget_names_the_profile(
    engine: Engine, profile: dict[str, object], field: str
) -> None:
    """A profile stored by a process that knew its model: a call without a budget is refused
    naming the profile's field (not `model`, which the caller never sent); with one it runs."""
    doc = engine.agent("acme", "bob").to_dict()
    stored = {**doc, "profile": {**doc["profile"], **profile}}
    engine.store.put_doc("agents", "acme/bob", "acme", stored, 1.0, key="bob")
    engine.add(project="acme", author="alice", content="hello bob")
    fresh = Engine(engine.store)
    with pytest.raises(ValidationError) as err:
        fresh.assemble("acme", "bob", "hello")
    assert err.value.field == field
    assert "give the call a budget" in err.value.fix
    assert fresh.assemble("acme", "bob", "hello", 1000).tokens > 0


class _Refusing:
    """A plug-in summarizer whose provider refused, in its own ValidationError."""

    name = "mine"

    def summarize(self, texts: object, *, max_tokens: int, instructions: str = "") -> str:
        raise ValidationError("reply", "SECRET-PROVIDER-ANSWER", "provider said no")


def _chatty(engine: Engine) -> None:
    for i in range(12):
        engine.sessions.append("acme", "bob", "s1", "user", f"Build page {i}. " + "word " * 60)
        engine.sessions.append("acme", "bob", "s1", "assistant", f"Built {i}. " + "detail " * 60)


def test_a_plugin_summarizers_own_validation_error_falls_back_and_stays_unread(
    engine: Engine,
) -> None:
    engine.sessions.summarizer = _Refusing()
    _chatty(engine)
    with pytest.warns(UserWarning, match="ValidationError"):
        done = engine.sessions.compact("acme", "bob", "s1", keep=4)
    assert done.summarizer == "extractive"
    assert done.summary is not None and "SECRET-PROVIDER-ANSWER" not in done.summary.content


def test_a_session_window_names_the_profile_it_cannot_budget(engine: Engine) -> None:
    doc = engine.agent("acme", "bob").to_dict()
    stored = {**doc, "profile": {**doc["profile"], "default_model": "mystery-model"}}
    engine.store.put_doc("agents", "acme/bob", "acme", stored, 1.0, key="bob")
    fresh = Engine(engine.store)
    with pytest.raises(ValidationError) as err:
        fresh.sessions.window("acme", "bob", "s1", "hello", None, "openai")
    assert err.value.field == "profile.default_model"


def test_what_completing_a_private_task_writes_is_its_authors_alone_whatever_its_to(
    engine: Engine,
) -> None:
    """A private task with `to` is its author's alone (Record.visible_to): its handoff and file
    entries must not be written direct to the names in `to`."""
    task = engine.add(
        project="acme", author="alice", kind="task", content="T", visibility="private",
        to=["bob"], meta={"name": "t", "objective": "o"},
    )  # fmt: skip
    done = engine.tasks.complete(
        "acme", task.id, {"summary": "SECRET handoff", "files_created": [{"path": "b.py"}]},
        by="alice",
    )  # fmt: skip
    written = [done.handoff, *done.files]
    assert {(r.visibility, r.to) for r in written} == {("private", ())}
    seen = engine.records("acme", agent="bob", limit=1000)
    assert not {r.id for r in written} & {r.id for r in seen}
