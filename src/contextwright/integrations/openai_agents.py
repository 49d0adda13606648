"""OpenAI Agents SDK: a `Session` whose history is the agent's contextwright window.

    session = ContextwrightSession(engine, "acme", "dev", "s1", budget=8_000,
                                   instructions=agent.instructions)
    await Runner.run(agent, "Weather in Lyon?", session=session)

`add_items` appends the SDK's items to the agent's contextwright session (each item's own dict is
kept, so it comes back unchanged); `get_items` returns the session window as input items: a
`developer` item with the context the engine computed (team constraints, knowledge, summaries),
then the history, every function call followed by its output, compacted and pruned as the session
pipeline does. The SDK sends the agent's instructions itself: give them as `instructions` so the
budget keeps room for them. The SDK has no context-overflow error of its own: an overflow raises
contextwright's `ContextOverflow`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..budget import Budget
from ..errors import ContextOverflow
from ._core import Bridge, Entry, Part, Window, raw_of, regroup, require, shown

if TYPE_CHECKING:
    from ..engine import Engine

_agents = require("agents.memory", "ContextwrightSession", "openai-agents")
from agents.memory import SessionABC  # noqa: E402

FRAMEWORK = "openai-agents"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(c.get("text") or c.get("refusal") or "") for c in content if isinstance(c, dict)
        )
    return json.dumps(content, default=str)


def to_entries(items: Sequence[Any]) -> list[Entry]:
    """SDK input items as session entries. The SDK hands over only new items, so each is its own
    group; an item type this adapter does not know becomes a note that names it."""
    out: list[Entry] = []
    for item in items:
        raw = json.loads(json.dumps(item, default=str))
        group = f"sdk:{uuid.uuid4().hex}"
        kind = raw.get("type") or "message"
        role = raw.get("role")
        if kind == "message" and role == "user":
            out.append(Entry("user", _text(raw.get("content")), group, raw))
        elif kind == "message" and role == "assistant":
            out.append(Entry("assistant", _text(raw.get("content")), group, raw))
        elif kind == "function_call":
            out.append(
                Entry(
                    "tool_call",
                    f"{raw['name']}({raw.get('arguments', '')})",
                    group,
                    raw,
                    tool=raw["name"],
                    arguments=raw.get("arguments") or "{}",
                    call_id=raw["call_id"],
                )
            )
        elif kind == "function_call_output":
            output = raw.get("output")
            text = output if isinstance(output, str) else _text(output)
            out.append(Entry("tool_result", text, group, raw, call_id=raw["call_id"]))
        else:
            name = f"{role} message" if kind == "message" else str(kind)
            out.append(Entry("note", _text(raw.get("content", raw)), group, raw, type=name))
    return out


def to_items(window: Window) -> list[dict[str, Any]]:
    """The window as SDK input items: the computed context first, then the history."""
    items: list[dict[str, Any]] = [{"role": "developer", "content": window.system}]
    for group in regroup(window.history):
        raw = raw_of(group)
        if raw is not None:
            items.append(raw)
            continue
        items.extend(_build(p) for p in group)
    return items


def _build(p: Part) -> dict[str, Any]:
    if p.role == "tool_call":
        return {
            "type": "function_call",
            "call_id": p.call_id,
            "name": p.tool,
            "arguments": p.arguments,
        }
    if p.role == "tool_result":
        return {"type": "function_call_output", "call_id": p.call_id, "output": p.text}
    if p.role == "assistant":
        return {"role": "assistant", "content": p.text}
    return {"role": "user", "content": shown(p)}


class ContextwrightSession(SessionABC):
    """The SDK's session protocol (get_items, add_items, pop_item, clear_session) on contextwright."""

    def __init__(
        self,
        engine: Engine,
        project: str,
        agent: str,
        session: str,
        *,
        budget: Budget | int | None = None,
        instructions: str = "",
        task: str = "",
    ) -> None:
        self.session_id = session
        self.session_settings = None
        self.instructions = instructions
        self.bridge = Bridge(
            engine, project, agent, session, framework=FRAMEWORK, budget=budget, task=task
        )

    def _budget(self) -> Budget:
        """The budget less the instructions, which the SDK sends beside the items."""
        bud = self.bridge.budget
        self.bridge.check_system(self.instructions)
        if not self.instructions.strip():
            return bud
        assert bud.window is not None and bud.reserve is not None
        need = self.bridge.engine.counter.count(self.instructions) + 4
        return Budget(model=bud.model, window=bud.window, reserve=bud.reserve + need)

    def window(self) -> list[dict[str, Any]]:
        bud = self._budget()
        return to_items(self.bridge.window("", bud))

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items = self.window()
        if limit is None or limit >= len(items):
            return items
        tail = items[len(items) - limit :] if limit > 0 else []
        # A cut that starts at an output would orphan it: start at its call instead.
        while tail and tail[0].get("type") == "function_call_output":
            tail = items[len(items) - len(tail) - 1 :]
        return tail

    async def add_items(self, items: list[Any]) -> None:
        self.bridge.record(to_entries(items))

    async def pop_item(self) -> Any | None:
        popped = self.bridge.pop()
        if popped is None:
            return None
        raw = popped.meta.get("raw")
        if raw is not None:
            return raw
        return {"role": "user", "content": popped.content}

    async def clear_session(self) -> None:
        self.bridge.clear()


__all__ = ["ContextOverflow", "ContextwrightSession", "to_entries", "to_items"]
