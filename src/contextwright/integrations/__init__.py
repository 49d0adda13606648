"""Drop-in adapters for the agent frameworks people already use, one module per framework.

Each imports its framework only when used and, without it, raises `MissingExtra` with the exact
install command:

    from contextwright.integrations.openai_agents import ContextwrightSession   # [openai-agents]
    from contextwright.integrations.langchain import ContextwrightMiddleware    # [langchain]
    from contextwright.integrations.llamaindex import ContextwrightMemory       # [llamaindex]
    from contextwright.integrations.pydantic_ai import ContextwrightHistory     # [pydantic-ai]

All four stand on one bridge (`_core.Bridge`): the framework's messages become records of the
agent's session, and the model's input is the session window (`engine.sessions.window`).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ContextwrightSession": "openai_agents",
    "ContextwrightMiddleware": "langchain",
    "ContextwrightMemory": "llamaindex",
    "ContextwrightHistory": "pydantic_ai",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
