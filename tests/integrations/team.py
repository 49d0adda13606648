"""The team every framework test runs: two agents of one project, and what each may not see."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from contextwright import Engine

PROJECT = "acme"
SECRET = "the vault code is 7731"  # a direct message between two other agents
SHARED = "staging deploys freeze on Fridays"  # a broadcast every agent may see


def seed(engine: Engine) -> None:
    engine.add(
        project=PROJECT, author="pm", content=f"ops, {SECRET}", visibility="direct", to=["ops"]
    )
    engine.add(project=PROJECT, author="pm", kind="constraint", content=SHARED)


def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


def assert_pairs_intact(messages: Iterable[dict[str, Any]]) -> None:
    """OpenAI-shaped messages: every tool call answered, every tool result after its call."""
    pending: set[str] = set()
    for m in messages:
        for tc in m.get("tool_calls") or []:
            pending.add(tc["id"])
        if m.get("role") == "tool":
            assert m["tool_call_id"] in pending, f"orphan result {m}"
            pending.discard(m["tool_call_id"])
    assert not pending, f"unanswered calls {pending}"


def text_of(obj: Any) -> str:
    return json.dumps(obj, default=str)
