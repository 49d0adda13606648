"""The OpenAI Agents SDK session on a real `Runner` run with the SDK's own `ScriptedModel`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from contextwright import ContextOverflow, Engine
from contextwright.assembly.render import count_openai
from contextwright.integrations.openai_agents import ContextwrightSession

from .team import PROJECT, SECRET, SHARED, seed, text_of

BUDGET = 2_000


@function_tool
def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    set_tracing_disabled(True)
    e = Engine.open(f"sqlite:///{tmp_path / 'cw.db'}")
    seed(e)
    yield e
    e.close()


def run(engine: Engine, agent: str, session: str) -> tuple[ScriptedModel, ContextwrightSession]:
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Lyon"}, call_id="call_1")],
            [assistant_message("Lyon is sunny.", item_id="msg_1")],
            [assistant_message("You asked about Lyon.", item_id="msg_2")],
        ]
    )
    bot = Agent(name=agent, instructions=f"You are {agent}.", model=model, tools=[weather])
    cw = ContextwrightSession(
        engine, PROJECT, agent, session, budget=BUDGET, instructions=bot.instructions or ""
    )
    asyncio.run(Runner.run(bot, "Weather in Lyon?", session=cw))
    asyncio.run(Runner.run(bot, "Which city did I ask about?", session=cw))
    return model, cw


def as_openai(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for it in items:
        if it.get("type") == "function_call":
            fn = {"name": it["name"], "arguments": it["arguments"]}
            out.append({"role": "assistant", "tool_calls": [{"id": it["call_id"], "function": fn}]})
        elif it.get("type") == "function_call_output":
            out.append({"role": "tool", "tool_call_id": it["call_id"], "content": it["output"]})
        else:
            out.append({"role": it.get("role", "user"), "content": text_of(it.get("content"))})
    return out


def test_a_runner_sees_its_window(engine: Engine) -> None:
    model, cw = run(engine, "dev", "dev-1")
    assert len(model.calls) == 3
    avail = cw.bridge.budget.available - engine.counter.count("You are dev.")
    for call in model.calls:
        items = call.input
        assert isinstance(items, list)
        assert items[0]["role"] == "developer" and SHARED in items[0]["content"]
        assert SECRET not in text_of(items)
        msgs = as_openai(items)
        pending: set[str] = set()
        for m in msgs:  # pairs intact: every output right after a call it answers
            for tc in m.get("tool_calls") or []:
                pending.add(tc["id"])
            if m["role"] == "tool":
                assert m["tool_call_id"] in pending
                pending.discard(m["tool_call_id"])
        assert not pending
        assert count_openai(msgs, engine.counter) <= avail
    last = model.calls[-1].input
    assert [i.get("type") or i.get("role") for i in last[1:]] == [
        "user",
        "function_call",
        "function_call_output",
        "message",
        "user",
    ]
    assert last[3]["output"] == "sunny in Lyon"


def test_two_agents_share_a_project(engine: Engine) -> None:
    run(engine, "dev", "dev-1")
    model, _ = run(engine, "qa", "qa-1")
    for call in model.calls:
        assert SECRET not in text_of(call.input)
        assert "You are dev." not in text_of(call.input)
        assert sum(i.get("type") == "function_call" for i in call.input) <= 1


def test_round_trip_pop_and_clear(engine: Engine) -> None:
    items: list[Any] = [
        {"role": "user", "content": "Weather in Lyon?"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}", "id": "f"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "id": "m1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
        },
    ]
    cw = ContextwrightSession(engine, PROJECT, "dev", "rt", budget=BUDGET)
    asyncio.run(cw.add_items(items))
    assert asyncio.run(cw.get_items())[1:] == items
    notes = [r for r in engine.sessions.live_records(PROJECT, "dev", "rt") if r.kind == "note"]
    assert [n.meta["type"] for n in notes] == ["reasoning"]
    assert asyncio.run(cw.get_items(limit=3))[0]["type"] == "function_call"
    assert asyncio.run(cw.pop_item()) == items[-1]
    assert asyncio.run(cw.get_items())[1:] == items[:-1]
    asyncio.run(cw.clear_session())
    assert asyncio.run(cw.get_items())[1:] == []


def test_instructions_too_big_overflow(engine: Engine) -> None:
    cw = ContextwrightSession(engine, PROJECT, "dev", "s", budget=300, instructions="word " * 400)
    with pytest.raises(ContextOverflow, match="system prompt"):
        asyncio.run(cw.get_items())
