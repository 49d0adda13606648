"""The MCP server, driven by the SDK's own client: stdio (a real subprocess) and streamable HTTP
(real uvicorn on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters

from contextwright import Engine
from contextwright.mcp.server import TOOLS, build_server, trace_uri
from servers import running


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    if result.structured_content is not None:
        sc = result.structured_content
        return sc.get("result", sc) if set(sc) == {"result"} else sc
    return json.loads(result.content[0].text)


def _prepare(engine: Engine) -> str:
    """A task to complete over MCP; returns its id."""
    return engine.tasks.create("acme", name="JWT", objective="Add JWT auth to the API").id


async def _exercise(client: Client, task_id: str) -> None:
    tools = {t.name for t in (await client.list_tools()).tools}
    assert set(TOOLS) <= tools

    posted = _data(
        await client.call_tool(
            "post_message",
            {"project": "acme", "author": "alice", "content": "@bob the login bug is in auth.py"},
        )
    )
    assert posted["mentions"] == ["bob"]
    await client.call_tool(
        "post_message",
        {
            "project": "acme",
            "author": "alice",
            "content": "secret salary note",
            "visibility": "private",
        },
    )

    window = _data(
        await client.call_tool(
            "assemble_context",
            {"project": "acme", "agent": "bob", "task": "fix the login bug", "budget": 2000},
        )
    )
    assert "login bug is in auth.py" in window["text"]
    assert "salary" not in window["text"]
    assert window["tokens"] <= window["available"]

    found = _data(
        await client.call_tool(
            "search_memory", {"project": "acme", "agent": "bob", "query": "login"}
        )
    )
    assert [r["author"] for r in found["results"]] == ["alice"]
    hidden = _data(
        await client.call_tool(
            "search_memory", {"project": "acme", "agent": "bob", "query": "salary"}
        )
    )
    assert hidden["results"] == []

    assert window["trace_uri"] == f"trace://acme/bob/{window['trace_id']}"
    trace = await client.read_resource(window["trace_uri"])
    body = json.loads(trace.contents[0].text)
    assert body["id"] == window["trace_id"] and body["agent"] == "bob"
    recent = await client.read_resource("traces://acme/bob")
    assert window["trace_uri"] in [t["uri"] for t in json.loads(recent.contents[0].text)]

    bad = await client.call_tool(
        "post_message", {"project": "acme", "author": "alice", "content": "x", "kind": "nope"}
    )
    assert bad.is_error
    assert "kind='nope'" in bad.content[0].text

    unknown = await client.call_tool(
        "assemble_context", {"project": "acme", "agent": "nobody", "task": "x"}
    )
    assert unknown.is_error and "nobody" in unknown.content[0].text

    detail = "the login flow checks the token, refreshes it and logs out on expiry. " * 20
    for i in range(10):
        # Long enough that a summary is shorter: compaction never grows history.
        content = f"turn {i} on auth: {detail}"
        await client.call_tool(
            "post_message",
            {"project": "acme", "author": "bob", "session": "s1", "content": content},
        )
    gauge = _data(
        await client.call_tool(
            "session_gauge", {"project": "acme", "agent": "bob", "session": "s1"}
        )
    )
    assert gauge["used"] > 0 and gauge["compaction_hint"] is False
    compacted = _data(
        await client.call_tool(
            "compact_session", {"project": "acme", "agent": "bob", "session": "s1"}
        )
    )
    assert compacted["replaced"] > 0 and compacted["summary"]
    args = {"project": "acme", "agent": "bob", "session": "s1"}
    undone = _data(await client.call_tool("undo_compaction", args))
    assert undone["summaries"] == [compacted["summary_id"]]
    nothing = await client.call_tool("undo_compaction", args)
    assert nothing.is_error and "no compaction to undo" in nothing.content[0].text

    done = _data(
        await client.call_tool(
            "complete_task",
            {
                "project": "acme",
                "task_id": task_id,
                "handoff": {"summary": "JWT added"},
                "agent": "bob",
            },
        )
    )
    assert done["status"] == "completed"
    again = await client.call_tool(
        "complete_task",
        {"project": "acme", "task_id": task_id, "handoff": {"summary": "x"}, "agent": "bob"},
    )
    assert again.is_error and "already completed" in again.content[0].text


def test_stdio_subprocess(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'mcp.db'}"
    with Engine.open(db) as engine:
        task_id = _prepare(engine)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextwright.cli", "--db", db, "mcp"],
        # The subprocess imports the code under test, wherever PYTHONPATH points this run.
        env={"HOME": str(tmp_path), **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}},
    )

    async def go() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            await _exercise(client, task_id)

    asyncio.run(go())
    # The subprocess wrote to the same file the library reads.
    with Engine.open(db) as engine:
        assert engine.get("acme", task_id).status == "completed"
        assert len(engine.records("acme", author="alice", limit=100)) == 2


def test_streamable_http_uvicorn(tmp_path: Path) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 'mcp-http.db'}")
    app = build_server(engine).streamable_http_app()
    task_id = _prepare(engine)

    async def go(url: str) -> None:
        async with Client(url, read_timeout_seconds=60) as client:
            await _exercise(client, task_id)

    try:
        with running(app) as base:
            asyncio.run(go(f"{base}/mcp"))
        assert engine.get("acme", task_id).status == "completed"
        assert len(engine.records("acme", author="alice", limit=100)) == 2
    finally:
        engine.close()


@pytest.mark.parametrize("tool", ["post_message", "assemble_context", "search_memory"])
def test_missing_arguments_are_tool_errors(tool: str) -> None:
    engine = Engine.open("memory://")
    server = build_server(engine)

    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, {"project": 5})

    result = asyncio.run(go())
    engine.close()
    assert result.is_error
    assert engine.store.count() == 0


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        # The SDK drops arguments a tool does not take; the server names them instead.
        (
            "session_gauge",
            {"project": "acme", "agent": "bob", "session": "s1", "budget": "lots"},
            "budget is not an argument of session_gauge",
        ),
        (
            "post_message",
            {"project": "acme", "author": "bob", "content": "hi", "visibilty": "private"},
            "visibilty is not an argument of post_message",
        ),
        # A project is an identifier in every tool, as records require.
        ("search_memory", {"project": "bad name", "agent": "bob", "query": "x"}, "project="),
        ("session_gauge", {"project": "bad name", "agent": "bob", "session": "s1"}, "project="),
        # An unknown agent: the fix names calls an MCP client can make, not only Python's.
        ("search_memory", {"project": "acme", "agent": "nobody", "query": "x"}, "post_message"),
    ],
)
def test_tool_arguments_are_checked_and_errors_name_the_fix(
    tool: str, arguments: dict[str, Any], says: str
) -> None:
    engine = Engine.open("memory://")
    engine.add(project="acme", author="bob", content="hello")
    server = build_server(engine)

    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, arguments)

    result = asyncio.run(go())
    try:
        assert result.is_error
        assert says in result.content[0].text
        assert engine.store.count() == 1  # nothing stored
    finally:
        engine.close()


def test_trace_resources_are_read_as_their_agent() -> None:
    """A trace holds what its agent saw (here alice's private note): the resources give it only
    under its own project and agent; any other URI is "not found" with the message of an id that
    exists nowhere, and the listings hold only that agent's traces."""
    engine = Engine.open("memory://")
    engine.add(project="alpha", author="alice", visibility="private", content="SECRET-A1 token")
    engine.add(project="alpha", author="bob", content="bob works on the token refresh")
    engine.add(project="beta", author="eve", content="eve works on the token refresh")
    alice = engine.assemble("alpha", "alice", "token", 2000).trace.id
    bob = engine.assemble("alpha", "bob", "token", 2000).trace.id
    eve = engine.assemble("beta", "eve", "token", 2000).trace.id

    async def read(client: Client, uri: str) -> Any:
        return json.loads((await client.read_resource(uri)).contents[0].text)

    async def go() -> None:
        async with Client(build_server(engine)) as client:
            own = await read(client, trace_uri("alpha", "alice", alice))
            assert own["agent"] == "alice" and "SECRET-A1" in json.dumps(own)
            for uri in (
                trace_uri("alpha", "bob", alice),  # another agent's trace
                trace_uri("beta", "eve", alice),  # another project's trace
                trace_uri("beta", "alice", alice),
                f"trace://{alice}",  # the old, agent-less form is gone
            ):
                with pytest.raises(MCPError) as err:
                    await client.read_resource(uri)
                assert "SECRET" not in str(err.value)
            with pytest.raises(MCPError) as missing:
                await client.read_resource(trace_uri("beta", "eve", "NOPE"))
            with pytest.raises(MCPError) as foreign:
                await client.read_resource(trace_uri("beta", "eve", alice))
            # Same answer as for an id that exists nowhere: the id's existence is not revealed.
            assert str(foreign.value) == str(missing.value).replace("NOPE", alice)
            assert [t["uri"] for t in await read(client, "traces://alpha/bob")] == [
                trace_uri("alpha", "bob", bob)
            ]
            assert [t["uri"] for t in await read(client, "traces://beta/eve")] == [
                trace_uri("beta", "eve", eve)
            ]
            with pytest.raises(MCPError):
                await client.read_resource("traces://beta/alice")  # no such agent in beta
            with pytest.raises(MCPError):
                await client.read_resource("traces://alpha")

    try:
        asyncio.run(go())
    finally:
        engine.close()
