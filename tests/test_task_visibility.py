"""A task is a record with a visibility: an agent that may not see it gets, from every entry point
that takes a task id (complete, computed context, assemble's task_id; the library, HTTP, MCP and
the CLI), exactly the answer of an id that exists nowhere, and nothing changes.

Found by probing every id-taking route with hidden ids beside unknown ones: an agent-scoped key got
"task 'X' does not exist" for a hidden record but "...: create the task first, or check the id"
for an unknown one; bob completed alice's private task over MCP and got its text back; and
`assemble(agent="bob", task_id=<alice's private task>)` made its objective bob's task line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from mcp import Client

from contextwright import Engine, NotFound, ValidationError
from contextwright.cli import cli
from contextwright.mcp.server import build_server
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import auth, running

UNKNOWN = "01M8FZEA1E3W64XEF0TRQQWHZZ"
BOB_KEY = "bob-key-00000000"


def hidden(engine: Engine) -> dict[str, str]:
    """alice's private task, private message and direct task to carol; bob sees none of them."""
    engine.register_agent("acme", "bob")
    ids = {
        "private task": engine.add(
            project="acme",
            author="alice",
            kind="task",
            content="SECRET private task",
            visibility="private",
            meta={"objective": "SECRET payroll migration"},
        ).id,
        "private message": engine.add(
            project="acme", author="alice", content="SECRET note", visibility="private"
        ).id,
        "direct task": engine.add(
            project="acme",
            author="alice",
            kind="task",
            content="SECRET for carol",
            to=["carol"],
            visibility="direct",
        ).id,
    }
    return ids


def state(engine: Engine) -> list[tuple[str, str | None, str]]:
    return [
        (r.id, r.status, r.content) for r in engine.records("acme", limit=1000, newest_first=False)
    ]


def same_as_unknown(call: Any, hidden_id: str) -> str:
    """`call(id)` refuses `hidden_id` with the message it gives an id that exists nowhere."""
    messages = []
    for given in (hidden_id, UNKNOWN):
        with pytest.raises((NotFound, ValidationError)) as err:
            call(given)
        messages.append((type(err.value).__name__, err.value.message.replace(given, "<id>")))
    assert messages[0] == messages[1]
    assert "SECRET" not in messages[0][1]
    return messages[0][1]


@pytest.mark.parametrize("what", ["private task", "private message", "direct task"])
def test_an_agent_cannot_complete_a_task_it_may_not_see(engine: Engine, what: str) -> None:
    task_id = hidden(engine)[what]
    before = state(engine)
    same_as_unknown(
        lambda i: engine.complete_task("acme", i, {"summary": "done"}, by="bob"), task_id
    )
    assert state(engine) == before
    # Whom the record is written to may complete it.
    if what != "private message":
        done = engine.complete_task("acme", task_id, {"summary": "done"}, by="alice")
        assert done.status == "completed"


@pytest.mark.parametrize("what", ["private task", "direct task"])
def test_a_window_never_takes_its_task_from_a_task_its_agent_may_not_see(
    engine: Engine, what: str
) -> None:
    task_id = hidden(engine)[what]
    same_as_unknown(lambda i: engine.assemble("acme", "bob", "", 2000, task_id=i), task_id)
    same_as_unknown(lambda i: engine.tasks.computed_context("acme", i, agent="bob"), task_id)
    own = engine.assemble("acme", "alice", "", 2000, task_id=task_id)
    assert "SECRET" in own.text  # its author's window does take it


def test_cli_assemble_with_a_hidden_task_id_says_only_unknown(tmp_path: Any) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    with Engine.open(db) as engine:
        task_id = hidden(engine)["private task"]
    outs = []
    for given in (task_id, UNKNOWN):
        result = CliRunner().invoke(
            cli, ["--db", db, "assemble", "-p", "acme", "-a", "bob", "--task-id", given]
        )
        assert result.exit_code != 0
        outs.append(result.output.replace(given, "<id>"))
    assert outs[0] == outs[1] and "SECRET" not in outs[0]


def test_mcp_complete_task_of_a_hidden_task_is_not_found_and_changes_nothing() -> None:
    engine = Engine.open("memory://")
    ids = hidden(engine)
    before = state(engine)

    async def texts() -> list[str]:
        out = []
        async with Client(build_server(engine)) as client:
            for given in (ids["private task"], ids["private message"], UNKNOWN):
                args = {"project": "acme", "task_id": given, "handoff": {"summary": "x"}}
                result = await client.call_tool("complete_task", {**args, "agent": "bob"})
                assert result.is_error
                out.append(" ".join(c.text for c in result.content).replace(given, "<id>"))
        return out

    try:
        got = asyncio.run(texts())
        assert got[0] == got[1] == got[2] and "SECRET" not in json.dumps(got)
        assert state(engine) == before
    finally:
        engine.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Engine]]:
    db = tmp_path_factory.mktemp("tasks") / "t.db"
    engine = Engine.open(f"sqlite:///{db}")
    keys = {BOB_KEY: {"project": "acme", "agents": ["bob"]}}
    with running(create_app(engine, Settings(api_keys=keys))) as base:
        yield base, engine
    engine.close()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/tasks/{id}", None),
        ("GET", "/tasks/{id}?agent=bob", None),
        ("POST", "/tasks/{id}/complete", {"handoff": {"summary": "x"}, "by": "bob"}),
        ("GET", "/tasks/{id}/context?agent=bob", None),
    ],
)
def test_http_a_hidden_record_is_the_404_of_an_unknown_task(
    served: tuple[str, Engine], method: str, path: str, body: Any
) -> None:
    base, engine = served
    ids = hidden(engine)
    before = state(engine)
    with httpx.Client(base_url=f"{base}/v1/projects/acme", headers=auth(BOB_KEY)) as bob:
        unknown = bob.request(method, path.format(id=UNKNOWN), json=body)
        assert unknown.status_code == 404
        for given in ids.values():
            r = bob.request(method, path.format(id=given), json=body)
            assert r.status_code == 404
            assert r.text.replace(given, "<id>") == unknown.text.replace(UNKNOWN, "<id>")
    assert state(engine) == before


SECRETS = ("SECRETNAME", "SECRETSUM", "SECRETDEC", "SECRETWHY", "SECRETFILE", "SECRETNEXT")


def completed_private_task(engine: Engine, visibility: str) -> str:
    """alice's private (or direct to carol) task, completed by alice with a full handoff."""
    engine.register_agent("acme", "bob")
    task = engine.add(
        project="acme",
        author="alice",
        kind="task",
        content="Task SECRETNAME: move the payroll api to jwt auth",
        visibility=visibility,
        to=["carol"] if visibility == "direct" else [],
        meta={"name": "SECRETNAME", "objective": "move the payroll api to jwt auth"},
    ).id
    handoff = {
        "summary": "SECRETSUM payroll api on jwt auth",
        "patterns_discovered": [{"pattern": "SECRETPAT jwt auth middleware", "location": "a.py"}],
        "decisions": [{"decision": "SECRETDEC jwt auth for payroll", "rationale": "SECRETWHY"}],
        "files_modified": ["src/SECRETFILE.py"],
        "dependencies_for_next": ["SECRETNEXT"],
    }
    engine.complete_task("acme", task, handoff, by="alice")
    return task


@pytest.mark.parametrize("visibility", ["private", "direct"])
def test_what_completing_a_hidden_task_writes_is_no_wider_than_the_task(
    engine: Engine, visibility: str
) -> None:
    """The handoff ("Handoff from <the task's name>: ..."), its graph nodes and file entries are
    derived from the task: bob, who may not see the task, sees none of them, in his records, his
    window, its trace or the computed context of his own task on the same topic."""
    task = completed_private_task(engine, visibility)
    mine = engine.tasks.create(
        "acme", name="auth2", objective="add jwt auth to the payroll api", author="bob"
    )
    seen = json.dumps([r.to_dict() for r in engine.records("acme", agent="bob", limit=1000)])
    window = engine.assemble("acme", "bob", "jwt auth for the payroll api", 4000, task_id=mine.id)
    computed = engine.tasks.computed_context("acme", mine.id, agent="bob")
    for where, text in {
        "records": seen,
        "window": window.text,
        "trace": json.dumps(window.trace.to_dict(), default=str),
        "computed": json.dumps(computed.to_dict(), default=str) + computed.render(None),
    }.items():
        leaked = [s for s in (*SECRETS, task) if s in text]
        assert not leaked, (where, leaked)
    # Who may see the task sees what its completion wrote.
    readers = ("alice", "carol") if visibility == "direct" else ("alice",)
    for reader in readers:
        own = json.dumps([r.to_dict() for r in engine.records("acme", agent=reader, limit=1000)])
        assert all(s in own for s in ("SECRETSUM", "SECRETDEC", "SECRETFILE")), reader


def test_a_private_completion_supersedes_no_file_entry_others_see(engine: Engine) -> None:
    public = engine.tasks.create("acme", name="t1", objective="touch the api", author="lead")
    engine.complete_task("acme", public.id, {"summary": "x", "files_modified": ["src/api.py"]})
    before = [(r.id, r.status) for r in engine.records("acme", agent="bob", kinds=["file"])]
    private = engine.add(
        project="acme", author="alice", kind="task", content="t2", visibility="private"
    )
    engine.complete_task(
        "acme", private.id, {"summary": "y", "files_modified": ["src/api.py"]}, by="alice"
    )
    assert [(r.id, r.status) for r in engine.records("acme", agent="bob", kinds=["file"])] == before


def test_a_task_may_not_depend_on_a_task_its_author_may_not_see(engine: Engine) -> None:
    ids = hidden(engine)
    before = state(engine)
    messages = []
    for given in (ids["private task"], ids["direct task"], UNKNOWN):
        with pytest.raises(ValidationError) as err:
            engine.tasks.create("acme", name="t", objective="o", author="bob", dependencies=[given])
        assert err.value.field == "dependencies[0]"
        messages.append(err.value.message.replace(given, "<id>"))
    assert messages[0] == messages[1] == messages[2]
    assert state(engine) == before


def test_a_project_task_may_not_depend_on_a_narrower_task(engine: Engine) -> None:
    """Even its author's own: bob would read the private id in the task's refs and its status in
    the computed context's skipped dependencies."""
    ids = hidden(engine)
    before = state(engine)
    for given in (ids["private task"], ids["direct task"]):
        with pytest.raises(ValidationError) as err:
            engine.tasks.create(
                "acme", name="t", objective="o", author="alice", dependencies=[given]
            )
        assert err.value.field == "dependencies[0]"
        assert "project-wide" in err.value.message
    assert state(engine) == before
    public = engine.tasks.create("acme", name="p", objective="o", author="alice")
    after = engine.tasks.create(
        "acme", name="t", objective="o", author="alice", dependencies=[public.id]
    )
    assert after.refs == (public.id,)


def test_completing_without_by_refuses_before_writing_when_the_assignee_is_blind(
    engine: Engine,
) -> None:
    """The author is then the assignee; one that may not see the task was refused by set_status
    only after the handoff and file entries were stored (each retry adding more)."""
    task = engine.add(
        project="acme",
        author="alice",
        kind="task",
        content="t",
        visibility="private",
        meta={"name": "n", "objective": "o", "assignee": "carol"},
    )
    before = state(engine)
    for _ in range(2):
        with pytest.raises(ValidationError) as err:
            engine.complete_task("acme", task.id, {"summary": "done", "files_modified": ["a.py"]})
        assert err.value.field == "by"
    assert state(engine) == before
    engine.complete_task("acme", task.id, {"summary": "done"}, by="alice")
    assert engine.get("acme", task.id).status == "completed"


def test_handoff_of_a_task_the_agent_may_not_see_reads_as_unknown(engine: Engine) -> None:
    task = completed_private_task(engine, "private")
    same_as_unknown(lambda i: engine.tasks.handoff("acme", i, "bob"), task)
    assert engine.tasks.handoff("acme", task, "alice") is not None


def test_a_file_entry_supersedes_only_the_current_one_of_its_audience(engine: Engine) -> None:
    """A private completion supersedes its author's earlier private entry; a project completion
    supersedes the project entry, never the author's private one: each reader sees one current
    entry per path."""

    def active(agent: str) -> list[tuple[str, str]]:
        return sorted(
            (r.author, r.visibility)
            for r in engine.records("acme", agent=agent, kinds=["file"], limit=100)
            if r.status == "active"
        )

    change = {"summary": "x", "files_modified": ["src/api.py"]}
    first = engine.tasks.create("acme", name="t1", objective="o", author="lead")
    engine.complete_task("acme", first.id, change)
    for _ in range(2):
        private = engine.add(
            project="acme", author="alice", kind="task", content="t", visibility="private"
        )
        engine.complete_task("acme", private.id, change, by="alice")
    assert active("alice") == [("alice", "private"), ("lead", "project")]
    second = engine.tasks.create("acme", name="t2", objective="o", author="lead")
    engine.complete_task("acme", second.id, change, by="alice")
    assert active("bob") == [("alice", "project")]
    assert active("alice") == [("alice", "private"), ("alice", "project")]


def test_an_agent_cannot_change_the_status_of_a_record_it_may_not_see(engine: Engine) -> None:
    """engine.resolve / set_status act as `by`: alice's private question is, for bob, an id that
    exists nowhere, and its status stays open."""
    question = engine.add(
        project="acme", author="alice", kind="question", content="SECRET?", visibility="private"
    )
    same_as_unknown(lambda i: engine.resolve("acme", i, by="bob"), question.id)
    same_as_unknown(
        lambda i: engine.set_status("acme", i, "cancelled", by="bob", note="x"), question.id
    )
    assert engine.get("acme", question.id).status == "open"
    assert engine.store.status_history("acme", question.id) == []
    assert engine.resolve("acme", question.id, by="alice").status == "resolved"


@pytest.mark.parametrize(
    "link",
    [
        {"reply_to": "{id}"},
        {"refs": ["rec:{id}"]},
        {"kind": "decision", "supersedes": "{id}"},
    ],
    ids=["reply_to", "refs", "supersedes"],
)
def test_a_link_to_a_hidden_record_is_refused_like_one_to_nothing(
    engine: Engine, link: dict[str, Any]
) -> None:
    """Accepted for alice's private record but refused for an unknown id, a link told bob
    whether a hidden id exists (client ids like "note-1" are guessable)."""
    secret = engine.add(
        project="acme", author="alice", kind="decision", content="SECRET", visibility="private"
    )
    before = state(engine)

    def write(given: str) -> object:
        fields = {k: json.loads(json.dumps(v).replace("{id}", given)) for k, v in link.items()}
        return engine.add(project="acme", author="bob", content="re", **fields)

    same_as_unknown(write, secret.id)
    turn = engine.sessions.append  # a tool result names the call it answers
    same_as_unknown(lambda i: turn("acme", "bob", "s", "tool_result", "x", reply_to=i), secret.id)
    assert state(engine) == before
    mine = {k: json.loads(json.dumps(v).replace("{id}", secret.id)) for k, v in link.items()}
    assert engine.add(project="acme", author="alice", content="re", **mine).project == "acme"
