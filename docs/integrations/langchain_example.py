"""A LangChain v1 agent whose model input is the contextwright window (offline: a fake model)."""

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from contextwright import Engine
from contextwright.integrations.langchain import ContextwrightMiddleware


class FakeChat(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> "FakeChat":
        return self


@tool
def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


engine = Engine.open("memory://")
model = FakeChat(
    messages=iter(
        [
            AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Lyon"}, "id": "c1"}]),
            AIMessage("Lyon is sunny."),
            AIMessage("You asked about Lyon."),
        ]
    )
)
middleware = ContextwrightMiddleware(engine, "acme", "dev", "s1", budget=4_000)
agent = create_agent(model, [weather], system_prompt="You are dev.", middleware=[middleware])
agent.invoke({"messages": [HumanMessage("Weather in Lyon?")]})
state = agent.invoke({"messages": [HumanMessage("Which city did I ask about?")]})
print("answer:", state["messages"][-1].text)
for m in middleware.window()[1:]:
    print(" ", type(m).__name__, "|", m.text or m.tool_calls)
