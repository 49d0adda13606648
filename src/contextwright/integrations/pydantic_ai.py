"""Pydantic AI: a history processor that returns the agent's contextwright window.

    history = ContextwrightHistory(engine, "acme", "dev", "s1", budget=8_000)
    agent = Agent(model, system_prompt="You are dev.", capabilities=[ProcessHistory(history)])

Before each model request Pydantic AI hands the processor the message history: new messages
become records of the agent's session (each message's own serialization kept, so it comes back
unchanged), and the processor returns the session window: the system prompt parts go into the
window's computed system text (with the team's constraints and knowledge), then the history, tool
calls answered by their returns, compacted and pruned as the session pipeline does. Pydantic AI
has no local token counter, so the budget is counted as contextwright counts the OpenAI format.
An overflow raises `pydantic_ai.exceptions.ModelContextWindowExceededError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ContextOverflow
from ._core import Bridge, Entry, Part, Window, key_of, raw_of, regroup, require, shown

if TYPE_CHECKING:
    from ..budget import Budget
    from ..engine import Engine

_pai = require("pydantic_ai.messages", "ContextwrightHistory", "pydantic-ai")
from pydantic_ai import RunContext  # noqa: E402
from pydantic_ai.exceptions import ModelContextWindowExceededError  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

FRAMEWORK = "pydantic-ai"


def dump(m: ModelMessage) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(
        json.dumps(ModelMessagesTypeAdapter.dump_python([m], mode="json")[0], default=str)
    )
    return out


def load(raw: dict[str, Any]) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_python([raw])[0]


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str)


def split_system(m: ModelMessage) -> tuple[ModelMessage, list[str]]:
    """(the message without its system prompt parts, their texts): the system prompt belongs to
    the window's system text, which contextwright computes."""
    if not isinstance(m, ModelRequest):
        return m, []
    texts = [p.content for p in m.parts if isinstance(p, SystemPromptPart)]
    if not texts:
        return m, []
    kept = [p for p in m.parts if not isinstance(p, SystemPromptPart)]
    raw = dump(m)
    raw["parts"] = [p for p in raw["parts"] if p.get("part_kind") != "system-prompt"]
    return (load(raw) if kept else m), texts


def to_entries(messages: Sequence[ModelMessage]) -> list[Entry]:
    """Model messages as session entries (system prompt parts left out, see `split_system`);
    a part kind this adapter does not know becomes a note that names it."""
    out: list[Entry] = []
    for original in messages:
        m, system = split_system(original)
        if (
            system
            and isinstance(m, ModelRequest)
            and not any(not isinstance(p, SystemPromptPart) for p in m.parts)
        ):
            continue
        raw = dump(m)
        group = key_of(dump(original))
        for p in m.parts:
            if isinstance(p, UserPromptPart):
                out.append(Entry("user", _text(p.content), group, raw))
            elif isinstance(p, ToolReturnPart):
                text = p.model_response_str()
                out.append(Entry("tool_result", text, group, raw, call_id=p.tool_call_id))
            elif isinstance(p, RetryPromptPart) and p.tool_name:
                out.append(
                    Entry("tool_result", p.model_response(), group, raw, call_id=p.tool_call_id)
                )
            elif isinstance(p, TextPart):
                out.append(Entry("assistant", p.content, group, raw))
            elif isinstance(p, ToolCallPart):
                args = p.args_as_json_str()
                out.append(
                    Entry(
                        "tool_call",
                        f"{p.tool_name}({args})",
                        group,
                        raw,
                        tool=p.tool_name,
                        arguments=args,
                        call_id=p.tool_call_id,
                    )
                )
            else:
                kind = str(getattr(p, "part_kind", type(p).__name__))
                text = _text(getattr(p, "content", None) or dump_part(p))
                out.append(Entry("note", text, group, raw, type=kind))
    return out


def dump_part(p: Any) -> str:
    return json.dumps(getattr(p, "__dict__", str(p)), default=str)


def to_messages(window: Window) -> list[ModelMessage]:
    """The window as model messages; the system text opens the first request."""
    out: list[ModelMessage] = []
    for group in regroup(window.history):
        raw = raw_of(group)
        if raw is not None and len(group) == len(to_entries([load(raw)])):
            out.append(load(raw))
        else:
            out.extend(_build(group))
    system = SystemPromptPart(content=window.system)
    if out and isinstance(out[0], ModelRequest):
        first = out[0]
        out[0] = ModelRequest(
            parts=[system, *first.parts], timestamp=first.timestamp, instructions=first.instructions
        )
    else:
        out.insert(0, ModelRequest(parts=[system]))
    return out


def _build(group: Sequence[Part]) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for p in group:
        response = p.role in ("assistant", "tool_call")
        if p.role == "assistant":
            part: Any = TextPart(content=p.text)
        elif p.role == "tool_call":
            part = ToolCallPart(tool_name=p.tool, args=p.arguments, tool_call_id=p.call_id)
        elif p.role == "tool_result":
            part = ToolReturnPart(tool_name=p.tool, content=p.text, tool_call_id=p.call_id)
        else:
            part = UserPromptPart(content=shown(p))
        last = out[-1] if out else None
        if (response and isinstance(last, ModelResponse)) or (
            not response and isinstance(last, ModelRequest)
        ):
            last.parts = [*last.parts, part]
        else:
            out.append(ModelResponse(parts=[part]) if response else ModelRequest(parts=[part]))
    return out


class ContextwrightHistory:
    """A Pydantic AI history processor: records the new messages, returns the window."""

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
    ) -> None:
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
        # The messages last returned: Pydantic AI keeps them as its history (and may amend them
        # in place), so they are known by identity, not by content.
        self._ours: list[ModelMessage] = []

    def record(self, messages: Sequence[ModelMessage]) -> None:
        """Record messages the processor has not seen, e.g. a run's last reply
        (`result.new_messages()`) when the next run does not pass `message_history`."""
        self.bridge.record(to_entries(messages))

    def window(self, system: str | None = None, model_name: str = "unknown") -> list[ModelMessage]:
        try:
            out = self.bridge.fit(to_messages, None, system)
        except ContextOverflow as exc:
            raise ModelContextWindowExceededError(model_name, exc.message) from exc
        self._ours = list(out)
        return out

    def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        new = [m for m in messages if not any(m is o for o in self._ours)]
        system = [t for m in new for t in split_system(m)[1]]
        if system:
            self.bridge.system = "\n\n".join(system)
        self.record(new)
        return self.window(None, getattr(ctx.model, "model_name", "unknown"))


__all__ = ["ContextwrightHistory", "to_entries", "to_messages"]
