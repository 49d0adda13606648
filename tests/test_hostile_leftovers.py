"""What the hostile-input round noticed and left: each test fails on the code before its fix."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client

from contextwright import Engine
from contextwright.assembly.request import AssembleRequest
from contextwright.errors import NotFound, ValidationError
from contextwright.mcp.server import build_server
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import ADMIN_KEY, KEYS, auth


def _call(engine: Engine, tool: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(build_server(engine)) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(go())


def test_mcp_complete_task_needs_an_agent_and_a_hidden_task_reads_as_unknown() -> None:
    engine = Engine.open("memory://")
    try:
        secret = engine.add(
            project="p", author="alice", kind="task", visibility="private", content="SECRET-TASK"
        )
        engine.add(project="p", author="bob", content="bob is here")
        before = engine.store.count()
        handoff = {"summary": "done"}
        bare = _call(
            engine, "complete_task", {"project": "p", "task_id": secret.id, "handoff": handoff}
        )
        assert bare.is_error and "agent" in bare.content[0].text
        assert "SECRET" not in bare.content[0].text
        as_bob = _call(
            engine,
            "complete_task",
            {"project": "p", "task_id": secret.id, "handoff": handoff, "agent": "bob"},
        )
        nowhere = _call(
            engine,
            "complete_task",
            {"project": "p", "task_id": "NOPE", "handoff": handoff, "agent": "bob"},
        )
        assert as_bob.is_error and "SECRET" not in as_bob.content[0].text
        # The answer of an id that exists nowhere: the task's existence is not revealed.
        assert as_bob.content[0].text == nowhere.content[0].text.replace("NOPE", secret.id)
        assert engine.store.count() == before
        assert engine.get("p", secret.id).status != "completed"
    finally:
        engine.close()


@pytest.mark.parametrize("budget", [True, False, "2000", 2000.5])
def test_mcp_budget_that_is_not_a_whole_number_is_refused(budget: object) -> None:
    engine = Engine.open("memory://")
    try:
        engine.add(project="p", author="bob", content="hello")
        result = _call(
            engine, "assemble_context", {"project": "p", "agent": "bob", "budget": budget}
        )
        assert result.is_error
        assert "budget" in result.content[0].text and "whole number" in result.content[0].text
        assert engine.traces("p", "bob", 5) == []
    finally:
        engine.close()


def _overflowing_session(engine: Engine) -> None:
    """A session whose correction (required, kept whole) fits no small window: only a reset
    makes it fit."""
    s = engine.sessions
    for i in range(4):
        s.append("p", "dev", "s1", "user", f"question {i} about the parser")
        s.append("p", "dev", "s1", "assistant", f"answer {i}")
    big = "Actually, I meant: " + " ".join(f"thing{i}" for i in range(3_000))
    s.append("p", "dev", "s1", "correction", big)
    s.append("p", "dev", "s1", "user", "ok")


@pytest.mark.parametrize("interface", ["library", "http", "mcp"])
def test_a_session_reset_by_the_overflow_ladder_is_in_the_windows_warnings(
    interface: str,
) -> None:
    engine = Engine.open("memory://")
    try:
        _overflowing_session(engine)
        if interface == "library":
            result = engine.window(
                AssembleRequest.build("p", "dev", "next", 3000, "markdown", session="s1")
            )
            warnings, trace_id = result.warnings, result.trace.id
        elif interface == "http":
            client = TestClient(create_app(engine, Settings(api_keys=KEYS)))
            body = {"agent": "dev", "task": "next", "budget": 3000, "session": "s1"}
            answer = client.post("/v1/projects/p/assemble", json=body, headers=auth(ADMIN_KEY))
            assert answer.status_code == 200, answer.text
            warnings, trace_id = answer.json()["warnings"], answer.json()["trace_id"]
        else:
            args = {"project": "p", "agent": "dev", "task": "next", "budget": 3000}
            result = _call(engine, "assemble_context", {**args, "session": "s1"})
            assert not result.is_error, result
            data = result.structured_content
            warnings, trace_id = data["warnings"], data["trace_id"]
        trace = engine.trace("p", trace_id, "dev")
        new = trace.notes["session"]["session"]
        assert new != "s1"
        said = [w for w in warnings if "reset" in w]
        assert said == [w for w in trace.warnings if "reset" in w]
        assert len(said) == 1 and "s1" in said[0] and new in said[0]
    finally:
        engine.close()


def _snapshot(engine: Engine) -> list[tuple[str, str, str]]:
    return sorted((r.id, r.status, r.kind) for r in engine.records("p", limit=1000))


def test_limits_naming_no_source_is_refused_naming_the_sources() -> None:
    engine = Engine.open("memory://")
    try:
        for i in range(30):  # enough history that a session window compacts first
            engine.sessions.append("p", "dev", "s1", "user", f"question {i} " + "word " * 80)
            engine.sessions.append("p", "dev", "s1", "assistant", f"answer {i} " + "text " * 80)
        before = _snapshot(engine)
        for session in (None, "s1"):
            request = AssembleRequest.build(
                "p", "dev", "next", 3000, session=session, limits={"fulltxt": 3}
            )
            with pytest.raises(ValidationError) as err:
                engine.window(request)
            assert err.value.field == "limits.fulltxt"
            assert "fulltext" in err.value.fix and "history" in err.value.fix
            assert _snapshot(engine) == before  # the session window compacted nothing
        # An unknown source, likewise, is refused before a session window compacts.
        with pytest.raises(ValidationError):
            engine.window(
                AssembleRequest.build("p", "dev", "x", 3000, session="s1", sources=["no"])
            )
        assert _snapshot(engine) == before
        # A source's own size still works, plain and in a session.
        ok = engine.window(AssembleRequest.build("p", "dev", "next", 3000, limits={"fulltext": 2}))
        assert ok.tokens <= ok.available
        engine.window(AssembleRequest.build("p", "dev", "x", 3000, session="s1", limits={"kv": 1}))
        client = TestClient(create_app(engine, Settings(api_keys=KEYS)))
        body = {"agent": "dev", "task": "x", "budget": 3000, "limits": {"nope": 1}}
        answer = client.post("/v1/projects/p/assemble", json=body, headers=auth(ADMIN_KEY))
        assert answer.status_code == 422 and "limits.nope" in answer.text
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("role", "extra", "field"),
    [
        ("user", {"reply_to": "r1"}, "reply_to"),
        ("tool_call", {"tool": "ls", "reply_to": "r1"}, "reply_to"),
        ("assistant", {"tool": "ls"}, "tool"),
        ("tool_result", {"arguments": {"path": "."}}, "arguments"),
        ("note", {"arguments": "{}"}, "arguments"),
    ],
)
def test_append_refuses_a_field_its_role_does_not_keep(
    role: str, extra: dict[str, Any], field: str
) -> None:
    engine = Engine.open("memory://")
    try:
        call = engine.sessions.append("p", "dev", "s1", "tool_call", "", tool="ls")
        before = _snapshot(engine)
        with pytest.raises(ValidationError) as err:
            engine.sessions.append("p", "dev", "s1", role, "text", **extra)
        assert err.value.field == field and role in err.value.message
        assert _snapshot(engine) == before
        # Where the role keeps it, the field is taken as before.
        done = engine.sessions.append("p", "dev", "s1", "tool_result", "ok", reply_to=call.id)
        assert done.reply_to == call.id
    finally:
        engine.close()


@pytest.mark.parametrize("as_object", [False, True])
def test_a_profile_weighing_a_kind_no_record_has_is_refused(as_object: bool) -> None:
    from contextwright import RoleProfile

    engine = Engine.open("memory://")
    try:
        data = {"name": "r", "kind_weights": {"decision": 1.0, "decisions": 2.0}}
        profile: Any = RoleProfile.from_dict(data) if as_object else data
        with pytest.raises(ValidationError) as err:
            engine.register_agent("p", "ann", "r", profile)
        assert err.value.field == "profile.kind_weights.decisions"
        assert "decision" in err.value.fix and "gotcha" in err.value.fix
        assert engine.agents("p") == []
        client = TestClient(create_app(engine, Settings(api_keys=KEYS)))
        answer = client.put(
            "/v1/projects/p/agents/ann",
            json={"role": "r", "profile": data},
            headers=auth(ADMIN_KEY),
        )
        assert answer.status_code == 422 and "profile.kind_weights.decisions" in answer.text
        assert engine.agents("p") == []
    finally:
        engine.close()


def test_cli_trace_list_of_an_unknown_agent_says_it_does_not_exist(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from contextwright.cli import cli

    db = f"sqlite:///{tmp_path / 'cli.db'}"
    with Engine.open(db) as engine:
        engine.add(project="p", author="bob", content="hello")
        trace_id = engine.assemble("p", "bob", "hello", 2000).trace.id
        try:
            engine.agent("p", "nobody")
        except NotFound as exc:
            library = exc.message
    runner = CliRunner()
    unknown = runner.invoke(cli, ["--db", db, "trace", "list", "-p", "p", "-a", "nobody"])
    assert unknown.exit_code != 0 and "no traces" not in unknown.output
    assert library.splitlines()[0] in unknown.stderr
    known = runner.invoke(cli, ["--db", db, "trace", "list", "-p", "p", "-a", "bob"])
    assert known.exit_code == 0 and trace_id in known.stdout


def _chatty(engine: Engine) -> None:
    for i in range(30):
        engine.sessions.append("p", "dev", "s1", "user", f"question {i} " + "word " * 80)
        engine.sessions.append("p", "dev", "s1", "assistant", f"answer {i} " + "text " * 80)


def _snapshot(engine: Engine) -> list[tuple[str, str]]:
    return sorted((r.id, r.status) for r in engine.records("p", limit=1000))


def test_limits_may_name_any_pipeline_defined_and_its_steps_sources() -> None:
    """A limit on a switched-off pipeline (a replay of a call that limited it), on a step's
    source inside a pipeline, or on the vector search while no embedder runs is not a typo."""
    engine = Engine.open("memory://")
    try:
        engine.add(project="p", author="bob", content="hello world from bob")
        for limits in ({"vector": 5}, {"session_plan": 3}):
            engine.assemble("p", "bob", "hello", 2000, limits=limits)
        t = engine.assemble("p", "bob", "hello", 2000, limits={"fulltext": 3})
        off = [{"name": "fulltext", "enabled": False, "steps": [{"step": "fulltext"}]}]
        replayed = engine.replay("p", t.trace.id, "bob", pipelines=off)
        assert "fulltext" not in replayed.trace.request["sources"]
        hybrid = [
            *off,
            {"name": "hybrid", "steps": [{"step": "fulltext"}, {"step": "cap", "items": 5}]},
        ]
        engine.assemble("p", "bob", "hello", 2000, pipelines=hybrid, limits={"fulltext": 2})
    finally:
        engine.close()


def test_a_refused_session_window_writes_nothing_whoever_calls_it() -> None:
    """The session pipeline checks the request's sources and limits before compaction writes,
    called through the engine or the session manager directly; a call's own pipelines that switch
    a default off run in the session window too."""
    engine = Engine.open("memory://")
    try:
        _chatty(engine)
        before = _snapshot(engine)
        bad = AssembleRequest.build("p", "dev", "next", 3000, session="s1", limits={"fulltxt": 3})
        with pytest.raises(ValidationError) as err:
            engine.sessions.window("p", "dev", "s1", "next", 3000, "markdown", request=bad)
        assert err.value.field == "limits.fulltxt"
        with pytest.raises(ValidationError):
            engine.window(bad)
        assert _snapshot(engine) == before
        off = [{"name": "fulltext", "enabled": False, "steps": [{"step": "fulltext"}]}]
        ok = AssembleRequest.build("p", "dev", "next", 3000, session="s1", pipelines=off)
        assert "fulltext" not in engine.window(ok).trace.request["sources"]
    finally:
        engine.close()


def test_the_traces_of_an_agent_the_project_lacks_are_not_found_in_every_interface() -> None:
    engine = Engine.open("memory://")
    try:
        engine.add(project="p", author="bob", content="hello")
        engine.assemble("p", "bob", "hello", 1000)
        assert [t.agent for t in engine.traces("p", "bob")] == ["bob"]
        with pytest.raises(NotFound):
            engine.traces("p", "nobody")
        client = TestClient(create_app(engine, Settings(api_keys=KEYS)))
        got = client.get(
            "/v1/projects/p/traces", params={"agent": "nobody"}, headers=auth(ADMIN_KEY)
        )
        assert got.status_code == 404, got.text
    finally:
        engine.close()
