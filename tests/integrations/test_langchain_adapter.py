"""The LangChain v1 middleware and the LangGraph pre-model hook, on a real agent run with
LangChain's own fake chat model: what the model received is the window."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import convert_to_openai_messages, count_tokens_approximately
from langchain_core.tools import tool

from contextwright import Engine
from contextwright.integrations._core import Bridge
from contextwright.integrations.langchain import (
    ContextwrightMiddleware,
    to_entries,
    to_messages,
)

from .team import PROJECT, SECRET, SHARED, assert_pairs_intact, seed, text_of

BUDGET = 2_000


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model, keeping what each call received."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 (set per instance)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


def script() -> Iterator[AIMessage]:
    yield AIMessage(
        content="", tool_calls=[{"name": "weather", "args": {"city": "Lyon"}, "id": "call_1"}]
    )
    yield AIMessage(content="Lyon is sunny.")
    yield AIMessage(content="You asked about Lyon.")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    e = Engine.open(f"sqlite:///{tmp_path / 'cw.db'}")
    seed(e)
    yield e
    e.close()


def run_agent(engine: Engine, agent: str, session: str = "s1") -> ScriptedChat:
    model = ScriptedChat(messages=script())
    model.received = []
    mw = ContextwrightMiddleware(engine, PROJECT, agent, session, budget=BUDGET)
    graph = create_agent(model, [weather], system_prompt=f"You are {agent}.", middleware=[mw])
    graph.invoke({"messages": [HumanMessage("Weather in Lyon?")]})
    # No checkpointer: the second turn brings only its new message; contextwright has the rest.
    graph.invoke({"messages": [HumanMessage("Which city did I ask about?")]})
    return model


def test_an_agent_run_sees_its_window(engine: Engine) -> None:
    model = run_agent(engine, "dev")
    assert len(model.received) == 3
    for got in model.received:
        assert isinstance(got[0], SystemMessage)
        assert "You are dev." in got[0].text
        assert SHARED in got[0].text  # the team's constraint reaches the agent
        assert SECRET not in text_of([m.text for m in got])
        assert count_tokens_approximately(got) <= Bridge_available(engine)
        assert_pairs_intact(convert_to_openai_messages(got))
    last = model.received[-1]
    # The first turn's question, tool pair and answer came back from the store.
    assert [type(m).__name__ for m in last[1:]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert last[3].text == "sunny in Lyon" and last[3].tool_call_id == "call_1"


def Bridge_available(engine: Engine) -> int:
    return Bridge(engine, PROJECT, "dev", "s1", framework="t", budget=BUDGET).budget.available


def test_two_agents_each_see_only_their_own_session(engine: Engine) -> None:
    run_agent(engine, "dev", "dev-1")
    model = run_agent(engine, "qa", "qa-1")
    for got in model.received:
        history = got[1:]
        assert all("You are dev." not in m.text for m in got)
        assert sum(isinstance(m, ToolMessage) for m in history) <= 1
        assert SECRET not in text_of([m.text for m in got])


def test_round_trip_is_lossless(engine: Engine) -> None:
    convo: list[BaseMessage] = [
        HumanMessage("Weather in Lyon and Paris?", id="m1", name="alice"),
        AIMessage(
            content="Checking both.",
            id="m2",
            tool_calls=[
                {"name": "weather", "args": {"city": "Lyon"}, "id": "c1"},
                {"name": "weather", "args": {"city": "Paris"}, "id": "c2"},
            ],
        ),
        ToolMessage("sunny in Lyon", tool_call_id="c1", id="m3"),
        ToolMessage("", tool_call_id="c2", id="m4"),
        AIMessage("Lyon sunny, Paris unknown.", id="m5"),
    ]
    bridge = Bridge(engine, PROJECT, "dev", "rt", framework="langchain", budget=BUDGET)
    bridge.record(to_entries(convo))
    back = bridge.fit(to_messages)[1:]
    assert back == convo


def test_unknown_types_are_notes_that_name_them(engine: Engine) -> None:
    bridge = Bridge(engine, PROJECT, "dev", "odd", framework="langchain", budget=BUDGET)
    bridge.record(to_entries([ChatMessage(content="beep", role="robot", id="x1")]))
    (rec,) = engine.sessions.live_records(PROJECT, "dev", "odd")
    assert rec.kind == "note" and rec.meta["type"] == "ChatMessage"
    assert "[ChatMessage] beep" in rec.content
    assert bridge.fit(to_messages)[1] == ChatMessage(content="beep", role="robot", id="x1")


def test_a_system_prompt_too_big_raises_langchains_overflow(engine: Engine) -> None:
    mw = ContextwrightMiddleware(engine, PROJECT, "dev", "s1", budget=300)
    with pytest.raises(ContextOverflowError, match="system prompt"):
        mw.window("word " * 400)
    assert engine.sessions.live_records(PROJECT, "dev", "s1") == []


def test_a_langgraph_pre_model_hook(engine: Engine) -> None:
    from langgraph.prebuilt import create_react_agent

    model = ScriptedChat(messages=script())
    model.received = []
    mw = ContextwrightMiddleware(engine, PROJECT, "dev", "g1", budget=BUDGET, system="You are dev.")
    with warnings.catch_warnings():  # moved to langchain.agents; still LangGraph's own hook
        warnings.simplefilter("ignore")
        graph = create_react_agent(model, [weather], pre_model_hook=mw.pre_model_hook)
    graph.invoke({"messages": [HumanMessage("Weather in Lyon?")]})
    assert len(model.received) == 2
    second = model.received[1]
    assert isinstance(second[0], SystemMessage) and "You are dev." in second[0].text
    assert SECRET not in text_of([m.text for m in second])
    assert_pairs_intact(convert_to_openai_messages(second))
    assert [type(m).__name__ for m in second[1:]] == ["HumanMessage", "AIMessage", "ToolMessage"]
