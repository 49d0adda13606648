"""What the hostile-input round noticed and left: each test fails on the code before its fix."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client

from contextwright import Engine
from contextwright.mcp.server import build_server


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
