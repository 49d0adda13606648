"""The four invariants of assemble, over random records, budgets, formats, agents and tasks, on
the memory and SQLite stores: never over budget, section priority respected, visibility never
leaked, and the same input gives the same output."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Assembly, Budget, BudgetError, Engine
from contextwright.assembly.candidates import SECTION_RANK
from contextwright.assembly.costs import heading_cost
from contextwright.assembly.render import tool_id
from contextwright.records import build_record
from contextwright.stores import open_store
from contextwright.tokens.counter import default_counter
from exact import exact_tokens
from strategies import AGENTS, PROJECT, T0, agents, budgets, formats, record_batches, tasks

C = default_counter()
FIXED = T0 + 2 * 86_400
STORE_KINDS = ["memory", "sqlite"]
PROPERTY = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextmanager
def engine_with(kind: str, batch: list[dict[str, Any]]) -> Iterator[Engine]:
    """A fresh store of `kind` holding `batch`, behind an engine with a fixed clock."""
    with tempfile.TemporaryDirectory() as tmp:
        url = "memory://" if kind == "memory" else f"sqlite:///{Path(tmp) / 'prop.db'}"
        engine = Engine(open_store(url), clock=lambda: FIXED, workers=1)
        try:
            engine.add_many(batch)
            for agent in AGENTS:  # every agent may ask, even one who never wrote
                engine.register_agent(PROJECT, agent)
            yield engine
        finally:
            engine.close()


def assemble(
    engine: Engine, agent: str, task: str, budget: Budget, fmt: str, session: str | None
) -> Assembly | None:
    try:
        return engine.assemble(
            project=PROJECT, agent=agent, task=task, budget=budget, format=fmt, session=session
        )
    except BudgetError:
        return None


sessions = st.sampled_from([None, "s1", "s2"])


@pytest.mark.parametrize("kind", STORE_KINDS)
@PROPERTY
@given(
    batch=record_batches(),
    budget=budgets(),
    fmt=formats,
    agent=agents,
    task=tasks,
    session=sessions,
)
def test_never_over_budget(
    kind: str,
    batch: list[dict[str, Any]],
    budget: Budget,
    fmt: str,
    agent: str,
    task: str,
    session: str | None,
) -> None:
    """The exact count of the rendered window, in the format's own accounting, never exceeds
    window − reserve (margin applied); a budget that cannot hold the task is a BudgetError."""
    with engine_with(kind, batch) as engine:
        result = assemble(engine, agent, task, budget, fmt, session)
        if result is None:
            # Only a budget too small for the envelope plus the task may refuse.
            assert budget.available < 120
            return
        assert result.tokens == exact_tokens(result) <= result.available == budget.available
        assert_tool_pairs_adjacent(result)


def assert_tool_pairs_adjacent(result: Assembly) -> None:
    """Both or neither: every tool call is answered right after it, and no answer stands alone."""
    if result.format == "openai":
        m = result.messages
        for i, msg in enumerate(m):
            if msg.get("tool_calls"):
                assert m[i + 1]["role"] == "tool"
                assert m[i + 1]["tool_call_id"] == msg["tool_calls"][0]["id"]
            if msg["role"] == "tool":
                assert m[i - 1]["tool_calls"][0]["id"] == msg["tool_call_id"]
    elif result.format == "anthropic":
        msgs = result.payload["messages"]
        for i, msg in enumerate(msgs):
            for block in msg["content"]:
                if block["type"] == "tool_use":
                    assert msgs[i + 1]["content"][0]["tool_use_id"] == block["id"]
                if block["type"] == "tool_result":
                    assert msgs[i - 1]["content"][-1]["id"] == block["tool_use_id"]


@pytest.mark.parametrize("kind", STORE_KINDS)
@PROPERTY
@given(
    batch=record_batches(),
    budget=budgets(max_window=2500),
    fmt=formats,
    agent=agents,
    task=tasks,
    session=sessions,
)
def test_section_priority_is_respected(
    kind: str,
    batch: list[dict[str, Any]],
    budget: Budget,
    fmt: str,
    agent: str,
    task: str,
    session: str | None,
) -> None:
    """What greedy priority packing guarantees, exactly.

    Sections are packed in priority order and the tokens left only ever shrink. An item D dropped
    for the budget ("budget exhausted") did not fit in what was left when its turn came: its cost
    was more than the tokens left minus its section heading (if D would have opened its section).
    Every item K packed later, so every kept item of a lower-priority section, fitted in at most
    those tokens. Hence:

    1. for every D dropped for the budget and every kept K of a strictly lower-priority section,
       cost(K) < cost(D) + heading(D's section). A lower section never wins budget that a
       higher-priority item of the same size or smaller could have used; it may only use leftovers
       too small for the dropped item. (It is NOT true that nothing lower is kept once something
       higher was dropped: a small lower item may fill a gap a large higher item could not.)
    2. Items dropped after rendering, because the exact count was over budget, go lowest priority
       first: after such a drop in section S, no item of a section below S is kept.

    Drops for a source cap, a section cap, a duplicate or a superseded record are not budget
    drops and are outside both statements.
    """
    with engine_with(kind, batch) as engine:
        result = assemble(engine, agent, task, budget, fmt, session)
        if result is None:
            return
        items = result.trace.items
        kept = [i for i in items if i["decision"] != "dropped"]
        for d in items:
            if d["decision"] != "dropped":
                continue
            rank_d = SECTION_RANK[d["section"]]
            if d["reason"].startswith("budget exhausted"):
                slack = heading_cost(d["section"], C)
                for k in kept:
                    if SECTION_RANK[k["section"]] > rank_d:
                        assert k["tokens"] < d["tokens"] + slack, (d, k)
            elif d["reason"].startswith("exact count"):
                assert all(SECTION_RANK[k["section"]] <= rank_d for k in kept), d
        # The window itself lists sections in priority order.
        shown = [name for name, its in result.sections.items() if its]
        assert shown == sorted(shown, key=SECTION_RANK.__getitem__)


@pytest.mark.parametrize("kind", STORE_KINDS)
@PROPERTY
@given(
    batch=record_batches(min_size=3),
    budget=budgets(min_window=2000),
    fmt=formats,
    agent=agents,
    task=tasks,
    session=sessions,
)
def test_visibility_is_never_leaked(
    kind: str,
    batch: list[dict[str, Any]],
    budget: Budget,
    fmt: str,
    agent: str,
    task: str,
    session: str | None,
) -> None:
    """No record the agent may not see (a direct record not to it, another agent's private one)
    appears in the window or in the trace, whatever source found it."""
    visible = {d["id"]: build_record(d, C.count).visible_to(agent) for d in batch}
    with engine_with(kind, batch) as engine:
        result = assemble(engine, agent, task, budget, fmt, session)
        if result is None:
            return
        shown = {
            rid for its in result.sections.values() for i in its for rid in i.candidate.record_ids
        }
        traced = {rid for i in result.trace.items for rid in i["record_ids"]}
        for rid in shown | traced:
            assert visible[rid], f"{agent} was given {rid}"
        hidden = [d for d in batch if not visible[d["id"]]]
        rendered = repr(result.messages) + repr(result.payload) + result.text
        for d in hidden:
            assert tool_id(d["id"]) not in rendered


@pytest.mark.parametrize("kind", STORE_KINDS)
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    batch=record_batches(),
    budget=budgets(),
    fmt=formats,
    agent=agents,
    task=tasks,
    session=sessions,
)
def test_same_input_same_output(
    kind: str,
    batch: list[dict[str, Any]],
    budget: Budget,
    fmt: str,
    agent: str,
    task: str,
    session: str | None,
) -> None:
    """Same store contents + same request + a fixed clock → identical messages, sections and
    decisions, whether asked twice of one store or once each of two stores built alike."""

    def window(engine: Engine) -> Any:
        result = assemble(engine, agent, task, budget, fmt, session)
        if result is None:
            return None
        decisions = [
            (i["key"], i["decision"], i["reason"], i["tokens"], i["score"])
            for i in result.trace.items
        ]
        sections = {
            n: [(i.candidate.key, i.text, i.tokens) for i in its]
            for n, its in result.sections.items()
        }
        return result.messages, result.payload, result.text, result.tokens, sections, decisions

    with engine_with(kind, batch) as one, engine_with(kind, batch) as two:
        first = window(one)
        assert window(one) == first
        assert window(two) == first
