"""LlamaIndex: a memory whose `get` returns the agent's contextwright window as `ChatMessage`s.

    memory = ContextwrightMemory.open(engine, "acme", "dev", "s1", budget=8_000)
    await FunctionAgent(tools=[...], llm=llm).run("Weather in Lyon?", memory=memory)

`put` appends a message to the agent's session (its own dump kept, so it comes back unchanged);
`get` returns the session window: a system message with the context the engine computed, then the
history, every tool call answered by its result, compacted and pruned as the session pipeline
does. The window is counted with LlamaIndex's own tokenizer (`llama_index.core.utils.get_tokenizer`,
or the `tokenizer_fn` given) and shrunk until it fits. LlamaIndex has no context-overflow error of
its own: an overflow raises contextwright's `ContextOverflow`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._core import Bridge, Entry, Part, Window, raw_of, regroup, require, shown

if TYPE_CHECKING:
    from ..budget import Budget
    from ..engine import Engine

_li = require("llama_index.core.memory", "ContextwrightMemory", "llamaindex")
from llama_index.core.base.llms.types import (  # noqa: E402
    ChatMessage,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.memory.types import BaseMemory  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

FRAMEWORK = "llamaindex"


def _dump(m: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(m.model_dump_json())
    return out


def to_entries(messages: Sequence[ChatMessage]) -> list[Entry]:
    """Chat messages as session entries; a role this adapter does not know becomes a note that
    names it."""
    out: list[Entry] = []
    for m in messages:
        raw = _dump(m)
        group = f"li:{uuid.uuid4().hex}"
        text = "".join(b.text for b in m.blocks if isinstance(b, TextBlock))
        calls = [b for b in m.blocks if isinstance(b, ToolCallBlock)]
        if m.role == MessageRole.USER:
            out.append(Entry("user", text, group, raw))
        elif m.role == MessageRole.ASSISTANT:
            if text.strip() or not calls:
                out.append(Entry("assistant", text, group, raw))
            for c in calls:
                args = c.tool_kwargs
                args_text = args if isinstance(args, str) else json.dumps(args, sort_keys=True)
                out.append(
                    Entry(
                        "tool_call",
                        f"{c.tool_name}({args_text})",
                        group,
                        raw,
                        tool=c.tool_name,
                        arguments=args_text,
                        call_id=c.tool_call_id or "",
                    )
                )
        elif m.role == MessageRole.TOOL:
            call_id = str(m.additional_kwargs.get("tool_call_id") or "")
            out.append(Entry("tool_result", text, group, raw, call_id=call_id))
        else:
            out.append(Entry("note", text, group, raw, type=f"{m.role.value} message"))
    return out


def to_messages(window: Window) -> list[ChatMessage]:
    out = [ChatMessage(role=MessageRole.SYSTEM, content=window.system)]
    for group in regroup(window.history):
        raw = raw_of(group)
        if raw is not None:
            out.append(ChatMessage.model_validate(raw))
        else:
            out.extend(_build(group))
    return out


def _build(group: Sequence[Part]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    calls = [p for p in group if p.role == "tool_call"]
    text = "".join(p.text for p in group if p.role == "assistant")
    if calls or any(p.role == "assistant" for p in group):
        blocks: list[Any] = [TextBlock(text=text)] if text else []
        blocks += [
            ToolCallBlock(tool_call_id=p.call_id, tool_name=p.tool, tool_kwargs=p.arguments)
            for p in calls
        ]
        out.append(ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks))
    for p in group:
        if p.role == "tool_result":
            out.append(
                ChatMessage(
                    role=MessageRole.TOOL,
                    content=p.text,
                    additional_kwargs={"tool_call_id": p.call_id},
                )
            )
        elif p.role not in ("assistant", "tool_call"):
            out.append(ChatMessage(role=MessageRole.USER, content=shown(p)))
    return out


def default_tokenizer() -> Callable[[str], list[Any]]:
    from llama_index.core.utils import get_tokenizer

    fn: Callable[[str], list[Any]] = get_tokenizer()
    return fn


class ContextwrightMemory(BaseMemory):
    """A LlamaIndex memory backed by one agent's contextwright session."""

    _bridge: Bridge = PrivateAttr()
    _tokenizer: Callable[[str], list[Any]] = PrivateAttr()

    @classmethod
    def class_name(cls) -> str:
        return "ContextwrightMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> ContextwrightMemory:
        return cls.open(**kwargs)

    @classmethod
    def open(
        cls,
        engine: Engine,
        project: str,
        agent: str,
        session: str,
        *,
        budget: Budget | int | None = None,
        system: str = "",
        task: str = "",
        tokenizer_fn: Callable[[str], list[Any]] | None = None,
    ) -> ContextwrightMemory:
        memory = cls()
        memory._bridge = Bridge(
            engine,
            project,
            agent,
            session,
            framework=FRAMEWORK,
            budget=budget,
            system=system,
            task=task,
        )
        memory._tokenizer = tokenizer_fn or default_tokenizer()
        return memory

    @property
    def bridge(self) -> Bridge:
        return self._bridge

    def count(self, messages: Sequence[ChatMessage]) -> int:
        """LlamaIndex's own view: its tokenizer over each message's text and tool calls."""
        total = 0
        for m in messages:
            total += 4 + len(self._tokenizer(m.content or ""))
            for b in m.blocks:
                if isinstance(b, ToolCallBlock):
                    total += 8 + len(self._tokenizer(f"{b.tool_name}{b.tool_kwargs}"))
        return total

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        return self._bridge.fit(to_messages, self.count)

    def get_all(self) -> list[ChatMessage]:
        return self.get()

    def put(self, message: ChatMessage) -> None:
        self._bridge.record(to_entries([message]))

    def put_messages(self, messages: list[ChatMessage]) -> None:
        self._bridge.record(to_entries(messages))

    def set(self, messages: list[ChatMessage]) -> None:
        self._bridge.clear()
        self.put_messages(messages)

    def reset(self) -> None:
        self._bridge.clear()

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        return self.get(input, **kwargs)

    async def aget_all(self) -> list[ChatMessage]:
        return self.get_all()

    async def aput(self, message: ChatMessage) -> None:
        self.put(message)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        self.put_messages(messages)

    async def aset(self, messages: list[ChatMessage]) -> None:
        self.set(messages)

    async def areset(self) -> None:
        self.reset()


__all__ = ["ContextwrightMemory", "to_entries", "to_messages"]
