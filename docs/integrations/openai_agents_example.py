"""An OpenAI Agents SDK agent whose session is contextwright (runs offline: a scripted model)."""

import asyncio

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from contextwright import Engine
from contextwright.integrations.openai_agents import ContextwrightSession


@function_tool
def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


async def main() -> None:
    set_tracing_disabled(True)
    engine = Engine.open("memory://")
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Lyon"}, call_id="call_1")],
            [assistant_message("Lyon is sunny.", item_id="msg_1")],
            [assistant_message("You asked about Lyon.", item_id="msg_2")],
        ]
    )
    agent = Agent(name="dev", instructions="You are dev.", model=model, tools=[weather])
    session = ContextwrightSession(
        engine, "acme", "dev", "s1", budget=4_000, instructions="You are dev."
    )
    await Runner.run(agent, "Weather in Lyon?", session=session)
    result = await Runner.run(agent, "Which city did I ask about?", session=session)
    print("answer:", result.final_output)
    for item in model.calls[-1].input[1:]:
        print(
            " ",
            item.get("type") or item.get("role"),
            "|",
            item.get("content") or item.get("output") or item.get("arguments"),
        )


asyncio.run(main())
