"""The Pydantic AI history processor on a real agent run with Pydantic AI's `FunctionModel`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright import Engine
from contextwright.integrations.pydantic_ai import ContextwrightHistory, to_entries, to_messages

from .team import PROJECT, SECRET, SHARED, assert_pairs_intact, seed, text_of

BUDGET = 2_000


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    e = Engine.open(f"sqlite:///{tmp_path / 'cw.db'}")
    seed(e)
    yield e
    e.close()


def as_openai(messages: list[ModelMessage]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                out.append({"role": "assistant", "tool_calls": [{"id": p.tool_call_id}]})
            elif isinstance(p, ToolReturnPart):
                out.append({"role": "tool", "tool_call_id": p.tool_call_id})
    return out


def run(
    engine: Engine, agent: str, session: str
) -> tuple[list[list[ModelMessage]], ContextwrightHistory]:
    received: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        n = len(received)
        if n == 1:
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Lyon"}, "call_1")])
        return ModelResponse(
            parts=[TextPart("Lyon is sunny." if n == 2 else "You asked about Lyon.")]
        )

    history = ContextwrightHistory(engine, PROJECT, agent, session, budget=BUDGET)
    bot = Agent(
        FunctionModel(model),
        system_prompt=f"You are {agent}.",
        capabilities=[ProcessHistory(history)],
    )

    @bot.tool_plain
    def weather(city: str) -> str:
        """The forecast for a city."""
        return f"sunny in {city}"

    first = bot.run_sync("Weather in Lyon?")
    bot.run_sync("Which city did I ask about?", message_history=first.all_messages())
    return received, history


def test_an_agent_run_sees_its_window(engine: Engine) -> None:
    received, history = run(engine, "dev", "dev-1")
    assert len(received) == 3
    for got in received:
        system = got[0].parts[0]
        assert isinstance(system, SystemPromptPart)
        assert "You are dev." in system.content and SHARED in system.content
        assert SECRET not in text_of([m.parts for m in got])
        assert_pairs_intact(as_openai(got))
        window = history.bridge.window()
        assert window.session.tokens <= history.bridge.budget.available
    last = received[-1]
    kinds = [p.part_kind for m in last for p in m.parts]
    assert kinds == [
        "system-prompt",
        "user-prompt",
        "tool-call",
        "tool-return",
        "text",
        "user-prompt",
    ]
    assert text_of(last).count("Weather in Lyon?") == 1  # nothing recorded twice


def test_two_agents_share_a_project(engine: Engine) -> None:
    run(engine, "dev", "dev-1")
    received, _ = run(engine, "qa", "qa-1")
    for got in received:
        assert SECRET not in text_of([m.parts for m in got])
        assert "You are dev." not in text_of([m.parts for m in got])


def test_round_trip_is_lossless(engine: Engine) -> None:
    convo: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Weather in Lyon and Paris?")]),
        ModelResponse(
            parts=[
                TextPart("Checking both."),
                ToolCallPart("weather", {"city": "Lyon"}, "c1"),
                ToolCallPart("weather", {"city": "Paris"}, "c2"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("weather", "sunny in Lyon", "c1"),
                ToolReturnPart("weather", "rain in Paris", "c2"),
            ]
        ),
        ModelResponse(parts=[ThinkingPart("compare"), TextPart("Lyon sunny, Paris rain.")]),
    ]
    history = ContextwrightHistory(engine, PROJECT, "dev", "rt", budget=BUDGET)
    history.record(convo)
    notes = [r for r in engine.sessions.live_records(PROJECT, "dev", "rt") if r.kind == "note"]
    assert [n.meta["type"] for n in notes] == ["thinking"]
    back = history.bridge.fit(to_messages)
    first = back[0]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], SystemPromptPart)
    back[0] = ModelRequest(parts=first.parts[1:], timestamp=first.timestamp)
    assert back == convo
    assert len(to_entries(back)) == len(to_entries(convo))


def test_a_system_prompt_too_big_raises_pydantic_ais_overflow(engine: Engine) -> None:
    history = ContextwrightHistory(engine, PROJECT, "dev", "s", budget=300)
    with pytest.raises(ModelContextWindowExceededError):
        history.window("word " * 400)
