"""Hypothesis strategies for records, record batches, budgets and formats.

Batches carry client-supplied ids and fixed timestamps, so the same batch stored twice gives the
same store contents (the determinism property needs that); tool results point at a tool call of
the same batch, so tool pairs occur often.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from contextwright import Budget
from contextwright.assembly.render import FORMATS

AGENTS = ("alice", "bob", "carol", "dave")
PROJECT = "p"
T0 = 1_750_000_000.0  # a fixed moment; every record is created in the day after it
WORDS = (
    "login",
    "auth",
    "flow",
    "token",
    "cache",
    "schema",
    "deploy",
    "review",
    "latency",
    "bug",
    "release",
    "migration",
    "index",
    "query",
    "session",
    "budget",
)
KIND_CHOICES = (
    "message",
    "message",
    "message",
    "tool_call",
    "tool_call",
    "decision",
    "question",
    "task",
    "constraint",
    "state",
    "gotcha",
    "pattern",
    "note",
    "artifact",
    "handoff",
)

sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(
    lambda ws: " ".join(ws).capitalize() + "."
)


@st.composite
def contents(draw: st.DrawFn) -> str:
    """Short text usually; sometimes long enough to need truncation; sometimes @mentions."""
    sep = draw(st.sampled_from([" ", " ", "\n", "\n\n"]))
    text = sep.join(draw(st.lists(sentences, min_size=1, max_size=4)))
    if draw(st.integers(0, 5)) == 0:
        text += draw(st.sampled_from([" naïve café ✓", " 日本語のテキスト。", " 🚀🚀", " x=1;y=2"]))
    if draw(st.integers(0, 9)) == 0:
        text = " ".join([text] * draw(st.integers(20, 80)))
    if draw(st.booleans()):
        text = f"@{draw(st.sampled_from(AGENTS))} {text}"
    return text


@st.composite
def record_dicts(draw: st.DrawFn, index: int = 0, project: str = PROJECT) -> dict[str, Any]:
    """One valid record as raw input (what a client sends), with a client id."""
    author = draw(st.sampled_from(AGENTS))
    visibility = draw(st.sampled_from(("project", "project", "direct", "private")))
    data: dict[str, Any] = {
        "id": f"r{index:04d}",
        "project": project,
        "author": author,
        "kind": draw(st.sampled_from(KIND_CHOICES)),
        "content": draw(contents()),
        "visibility": visibility,
        "created_at": T0 + index * 60 + draw(st.integers(0, 59)),
        "pinned": draw(st.integers(0, 7)) == 0,
    }
    if visibility == "direct":
        data["to"] = draw(st.lists(st.sampled_from(AGENTS), min_size=1, max_size=2, unique=True))
    if draw(st.integers(0, 3)) > 0:
        data["session"] = draw(st.sampled_from(("s1", "s1", "s2")))
    if draw(st.integers(0, 3)) == 0:
        data["tags"] = draw(st.lists(st.sampled_from(WORDS), max_size=3))
    return data


@st.composite
def record_batches(draw: st.DrawFn, min_size: int = 1, max_size: int = 25) -> list[dict[str, Any]]:
    """A batch of records with unique ids, in time order; most tool calls get a result."""
    n = draw(st.integers(min_size, max_size))
    batch: list[dict[str, Any]] = []
    for _ in range(n):
        rec = draw(record_dicts(index=len(batch)))
        batch.append(rec)
        if rec["kind"] == "tool_call" and draw(st.integers(0, 3)) > 0:
            rec["meta"] = {"name": "grep", "arguments": {"pattern": draw(st.sampled_from(WORDS))}}
            result = draw(record_dicts(index=len(batch)))
            result.update(
                kind="tool_result",
                reply_to=rec["id"],
                author=rec["author"],
                visibility=rec["visibility"],
                session=rec.get("session"),
                to=rec.get("to"),
                pinned=False,
            )
            batch.append(result)
    return batch


MODELS_FOR_TESTS = ("gpt-4o", "gpt-4", "claude-sonnet-4", "llama-3.1-8b", "mistral-small", "cl100k")


@st.composite
def budgets(draw: st.DrawFn, min_window: int = 300, max_window: int = 6000) -> Budget:
    """Budgets from tight (a few hundred tokens) to roomy, over models with and without margins."""
    model = draw(st.sampled_from(MODELS_FOR_TESTS))
    window = draw(st.integers(min_window, max_window))
    reserve = draw(st.integers(0, window // 5))
    return Budget(model=model, window=window, reserve=reserve)


formats = st.sampled_from(FORMATS)
agents = st.sampled_from(AGENTS)
tasks = st.one_of(
    st.just(""), st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
)
