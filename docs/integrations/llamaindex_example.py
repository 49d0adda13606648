"""A LlamaIndex FunctionAgent whose memory is contextwright (offline: LlamaIndex's mock LLM)."""

import asyncio
import warnings
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from contextwright import Engine
from contextwright.integrations.llamaindex import ContextwrightMemory

warnings.simplefilter("ignore", DeprecationWarning)  # LlamaIndex's own pydantic v1 leftovers


def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


replies = iter(
    [
        ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Lyon"})
            ],
        ),
        ChatMessage(role="assistant", content="Lyon is sunny."),
        ChatMessage(role="assistant", content="You asked about Lyon."),
    ]
)


def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    return next(replies)


async def main() -> None:
    engine = Engine.open("memory://")
    memory = ContextwrightMemory.open(engine, "acme", "dev", "s1", budget=4_000)
    llm = MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(weather)], llm=llm, system_prompt="You are dev."
    )
    await agent.run("Weather in Lyon?", memory=memory)
    answer = await agent.run("Which city did I ask about?", memory=memory)
    print("answer:", answer)
    for m in memory.get()[1:]:
        print(" ", m.role.value, "|", m.content or [b.tool_name for b in m.blocks])


asyncio.run(main())
