"""A Pydantic AI agent whose history is the contextwright window (offline: a FunctionModel)."""

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextwright import Engine
from contextwright.integrations.pydantic_ai import ContextwrightHistory

calls: list[list[ModelMessage]] = []


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    calls.append(messages)
    if len(calls) == 1:
        return ModelResponse(parts=[ToolCallPart("weather", {"city": "Lyon"}, "c1")])
    return ModelResponse(
        parts=[TextPart("Lyon is sunny." if len(calls) == 2 else "You asked about Lyon.")]
    )


engine = Engine.open("memory://")
history = ContextwrightHistory(engine, "acme", "dev", "s1", budget=4_000)
agent = Agent(
    FunctionModel(model), system_prompt="You are dev.", capabilities=[ProcessHistory(history)]
)


@agent.tool_plain
def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


first = agent.run_sync("Weather in Lyon?")
second = agent.run_sync("Which city did I ask about?", message_history=first.all_messages())
print("answer:", second.output)
for m in calls[-1]:
    for p in m.parts:
        print(
            " ",
            p.part_kind,
            "|",
            str(getattr(p, "content", "") or getattr(p, "args", ""))[:60].replace("\n", " "),
        )
