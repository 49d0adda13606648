"""LangChain v1 agents and LangGraph graphs: the model sees the agent's contextwright window.

    agent = create_agent(model, tools, system_prompt="You are dev.",
                         middleware=[ContextwrightMiddleware(engine, "acme", "dev", "s1", budget=8_000)])

As `AgentMiddleware`, before each model call (`wrap_model_call`) it records the state's new
messages in the agent's session and replaces the model's input (messages and system message) with
the window; after the call (`after_model`) it records the reply, so a run without a checkpointer
loses nothing. For a LangGraph `create_react_agent`, pass `pre_model_hook=middleware.pre_model_hook`:
it returns the window as `llm_input_messages` and leaves the graph's state alone (give the
system prompt to the middleware, `system=`, so the budget counts it). The window is
counted with LangChain's own `count_tokens_approximately` (or the `token_counter` given) and
shrunk until it fits. An overflow raises `langchain_core.exceptions.ContextOverflowError`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..errors import ContextOverflow
from ._core import Bridge, Entry, Part, Window, key_of, raw_of, regroup, require, shown

if TYPE_CHECKING:
    from ..budget import Budget
    from ..engine import Engine

_lc_core = require("langchain_core.messages", "ContextwrightMiddleware", "langchain")
_middleware = require("langchain.agents.middleware", "ContextwrightMiddleware", "langchain")
from langchain.agents.middleware import AgentMiddleware, ModelRequest  # noqa: E402
from langchain_core.exceptions import ContextOverflowError  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402

FRAMEWORK = "langchain"


def to_entries(messages: Sequence[Any]) -> list[Entry]:
    """LangChain messages as session entries; a type this adapter does not know becomes a note
    that names it."""
    out: list[Entry] = []
    for m in messages:
        raw = json.loads(json.dumps(message_to_dict(m), default=str))
        group = f"lc:{m.id}" if getattr(m, "id", None) else key_of(raw)
        text = m.text if isinstance(m, BaseMessage) else str(m)
        if isinstance(m, HumanMessage):
            out.append(Entry("user", text, group, raw, author=m.name))
        elif isinstance(m, AIMessage):
            if text.strip() or not m.tool_calls:
                out.append(Entry("assistant", text, group, raw))
            for tc in m.tool_calls:
                args = json.dumps(tc["args"], sort_keys=True)
                out.append(
                    Entry(
                        "tool_call",
                        f"{tc['name']}({args})",
                        group,
                        raw,
                        tool=tc["name"],
                        arguments=args,
                        call_id=tc.get("id") or "",
                    )
                )
        elif isinstance(m, ToolMessage):
            out.append(Entry("tool_result", text, group, raw, call_id=m.tool_call_id))
        else:
            out.append(Entry("note", text, group, raw, type=type(m).__name__))
    return out


def to_messages(window: Window) -> list[BaseMessage]:
    """The window as LangChain messages, the system text first; a message shown as stored is
    the framework's own message back."""
    out: list[BaseMessage] = [SystemMessage(content=window.system)]
    for group in regroup(window.history):
        raw = raw_of(group)
        if raw is not None and len(group) == _parts_of(raw):
            out.extend(messages_from_dict([raw]))
            continue
        out.extend(_build(group))
    return out


def _parts_of(raw: dict[str, Any]) -> int:
    """How many parts the stored message made (a group cut by the window is rebuilt)."""
    return len(to_entries(messages_from_dict([raw])))


def _build(group: Sequence[Part]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    calls = [p for p in group if p.role == "tool_call"]
    text = "".join(p.text for p in group if p.role == "assistant")
    if calls or any(p.role == "assistant" for p in group):
        out.append(
            AIMessage(
                content=text,
                tool_calls=[
                    {"name": p.tool, "args": json.loads(p.arguments), "id": p.call_id}
                    for p in calls
                ],
            )
        )
    for p in group:
        if p.role == "tool_result":
            out.append(ToolMessage(content=p.text, tool_call_id=p.call_id))
        elif p.role not in ("assistant", "tool_call"):
            out.append(HumanMessage(content=shown(p)))
    return out


class ContextwrightMiddleware(AgentMiddleware):
    """Each model call sees this agent's window from contextwright, under its budget."""

    def __init__(
        self,
        engine: Engine,
        project: str,
        agent: str,
        session: str,
        *,
        budget: Budget | int | None = None,
        system: str = "",
        task: str = "",
        token_counter: Callable[[Sequence[BaseMessage]], int] | None = None,
    ) -> None:
        super().__init__()
        self.bridge = Bridge(
            engine,
            project,
            agent,
            session,
            framework=FRAMEWORK,
            budget=budget,
            system=system,
            task=task,
        )
        self.token_counter = token_counter or count_tokens_approximately

    @property
    def name(self) -> str:
        return f"contextwright_{self.bridge.agent}"

    def record(self, messages: Sequence[Any]) -> None:
        self.bridge.record(to_entries(messages))

    def window(self, system: str | None = None) -> list[BaseMessage]:
        """The window as LangChain messages, system message first (`system`: the prompt, by
        default the constructor's); records nothing."""
        try:
            return self.bridge.fit(to_messages, self.token_counter, system)
        except ContextOverflow as exc:
            raise ContextOverflowError(exc.message) from exc

    def _request(self, request: ModelRequest) -> ModelRequest:
        self.record(request.messages)
        system = request.system_message.text if request.system_message is not None else None
        messages = self.window(system)
        head = messages[0]
        assert isinstance(head, SystemMessage)
        return request.override(system_message=head, messages=cast("list[Any]", messages[1:]))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        return handler(self._request(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        return await handler(self._request(request))

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.record(state["messages"])
        return None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.after_model(state, runtime)

    def pre_model_hook(self, state: Any) -> dict[str, Any]:
        """A LangGraph pre-model hook or node: the window as `llm_input_messages`."""
        messages = list(state["messages"])
        system = [m for m in messages if isinstance(m, SystemMessage)]
        self.record([m for m in messages if not isinstance(m, SystemMessage)])
        return {"llm_input_messages": self.window(system[0].text if system else None)}

    def post_model_hook(self, state: Any) -> dict[str, Any]:
        """A LangGraph post-model hook: records the reply."""
        self.record(state["messages"])
        return {}


__all__ = ["ContextwrightMiddleware", "to_entries", "to_messages"]
