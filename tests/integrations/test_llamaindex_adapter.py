"""The LlamaIndex memory on a real FunctionAgent run with LlamaIndex's own mock function-calling LLM."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from contextwright import ContextOverflow, Engine
from contextwright.integrations.llamaindex import ContextwrightMemory

from .team import PROJECT, SECRET, SHARED, assert_pairs_intact, seed, text_of, weather

BUDGET = 2_000
# LlamaIndex's own workflow code still reads pydantic's `__fields__`.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    e = Engine.open(f"sqlite:///{tmp_path / 'cw.db'}")
    seed(e)
    yield e
    e.close()


def as_openai(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        calls = [{"id": b.tool_call_id} for b in m.blocks if isinstance(b, ToolCallBlock)]
        out.append(
            {
                "role": m.role.value,
                "tool_calls": calls,
                "tool_call_id": m.additional_kwargs.get("tool_call_id"),
            }
        )
    return out


def run(
    engine: Engine, agent: str, session: str
) -> tuple[list[list[ChatMessage]], ContextwrightMemory]:
    received: list[list[ChatMessage]] = []

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        received.append(list(messages))
        n = len(received)
        if n == 1:
            call = ToolCallBlock(
                tool_call_id="call_1", tool_name="weather", tool_kwargs={"city": "Lyon"}
            )
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
        text = "Lyon is sunny." if n == 2 else "You asked about Lyon."
        return ChatMessage(role=MessageRole.ASSISTANT, content=text)

    llm = MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)
    memory = ContextwrightMemory.open(engine, PROJECT, agent, session, budget=BUDGET)
    bot = FunctionAgent(
        tools=[FunctionTool.from_defaults(weather)], llm=llm, system_prompt=f"You are {agent}."
    )

    async def both() -> None:
        await bot.run("Weather in Lyon?", memory=memory)
        await bot.run("Which city did I ask about?", memory=memory)

    asyncio.run(both())
    return received, memory


def test_an_agent_run_sees_its_window(engine: Engine) -> None:
    received, memory = run(engine, "dev", "dev-1")
    assert len(received) == 3
    for got in received:
        text = text_of([m.content for m in got])
        assert SHARED in text and SECRET not in text
        assert_pairs_intact(
            [{k: v for k, v in m.items() if v} for m in as_openai(got) if m["role"] != "system"]
        )
    window = memory.get()
    assert memory.count(window) <= memory.bridge.budget.available
    roles = [m.role.value for m in received[-1] if m.role != MessageRole.SYSTEM]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]


def test_two_agents_share_a_project(engine: Engine) -> None:
    run(engine, "dev", "dev-1")
    received, _ = run(engine, "qa", "qa-1")
    for got in received:
        assert SECRET not in text_of([m.content for m in got])
        assert sum(m.role == MessageRole.TOOL for m in got) <= 1


def test_round_trip_is_lossless(engine: Engine) -> None:
    convo = [
        ChatMessage(role=MessageRole.USER, content="Weather in Lyon?"),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[
                TextBlock(text="Checking."),
                ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Lyon"}),
            ],
        ),
        ChatMessage(
            role=MessageRole.TOOL, content="sunny", additional_kwargs={"tool_call_id": "c1"}
        ),
        ChatMessage(role=MessageRole.CHATBOT, content="beep"),
        ChatMessage(role=MessageRole.ASSISTANT, content="Sunny."),
    ]
    memory = ContextwrightMemory.open(engine, PROJECT, "dev", "rt", budget=BUDGET)
    memory.put_messages(convo)
    assert memory.get()[1:] == convo
    notes = [r for r in engine.sessions.live_records(PROJECT, "dev", "rt") if r.kind == "note"]
    assert [n.meta["type"] for n in notes] == ["chatbot message"]
    memory.reset()
    assert memory.get()[1:] == []


def test_a_system_prompt_too_big_overflows(engine: Engine) -> None:
    memory = ContextwrightMemory.open(engine, PROJECT, "dev", "s", budget=300, system="word " * 400)
    with pytest.raises(ContextOverflow, match="system prompt"):
        memory.get()
