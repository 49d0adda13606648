"""Drops counted off the call (packing.Unpriced): a candidate that meets less room than it costs
at least (`least_cost`) is dropped before its cost is counted, and its cost and reason are filled
in when the trace is built. The bound holds for any tokenizer, and the decisions, the trace and
the window are those of a packer that counts every candidate on the call."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.assembly import packing
from contextwright.assembly.candidates import Candidate
from contextwright.assembly.render import DATED_SECTIONS
from contextwright.assembly.scoring import day_label
from contextwright.assembly.sources import SourceContext, pair_tool_calls, record_candidate
from contextwright.ports import Tokenizer
from contextwright.records import Record, build_record
from contextwright.roles import RoleProfile
from contextwright.stores import open_store
from contextwright.testing import WordTokenizer
from contextwright.tokens.counter import TokenCounter, default_counter
from strategies import AGENTS, PROJECT, T0, agents, budgets, formats, record_batches, tasks

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NOW = T0 + 2 * 86_400
COUNTERS: dict[str, Tokenizer] = {"cl100k": default_counter(), "words": WordTokenizer()}


def _candidates(batch: list[dict[str, Any]], counter: Tokenizer) -> list[Candidate]:
    """The candidates the sources make of `batch`: history turns (tool pairs joined) and record
    lines of every other section."""
    records: list[Record] = [build_record(d, counter.count, now=NOW) for d in batch]
    store = open_store("memory://")
    store.add_many(records)
    ctx = SourceContext(store, counter, PROJECT, "alice", RoleProfile("default"), "", None, NOW)
    out = pair_tool_calls(list(reversed(records)), ctx, "history")
    for r in records:
        for section in ("knowledge", "suggestions", "constraints", "state"):
            out.append(record_candidate(r, ctx, "s", section, "why"))
    return out


@SETTINGS
@given(batch=record_batches(max_size=8), fmt=formats, name=st.sampled_from(sorted(COUNTERS)))
def test_the_least_cost_is_at_most_what_pack_counts(
    batch: list[dict[str, Any]], fmt: str, name: str
) -> None:
    counter = COUNTERS[name]
    stored = isinstance(counter, TokenCounter)
    for c in _candidates(batch, counter):
        dated = c.section in DATED_SECTIONS
        bound = packing.least_cost(c, c.section, dated, fmt)
        assert bound <= c.tokens + packing.MOST_LEAST  # where pack looks for the bound at all
        for days in (set(), {"every day"}):
            cost, _, _ = packing.fit_cost(c, dated, days, fmt, "alice", counter, stored)
            assert bound <= cost, (c.key, c.section, fmt)
        if c.records and c.section != "history":  # a paid day's line costs nothing more
            day = day_label(c.records[0])
            cost, _, _ = packing.fit_cost(c, dated, {day}, fmt, "alice", counter, stored)
            assert bound <= cost


def _trace(engine: Engine, agent: str, task: str, budget: Any, fmt: str) -> Any:
    r = engine.assemble(PROJECT, agent, task, budget, fmt, session="s1")
    items = [(i["key"], i["decision"], i["reason"], i["tokens"]) for i in r.trace.items]
    return r.messages, r.tokens, items


@SETTINGS
@given(
    batch=record_batches(max_size=20),
    agent=agents,
    task=tasks,
    budget=budgets(min_window=300, max_window=2500),
    fmt=formats,
)
def test_the_same_decisions_as_counting_every_candidate(
    batch: list[dict[str, Any]], agent: str, task: str, budget: Any, fmt: str
) -> None:
    store = open_store("memory://")
    engine = Engine(store, clock=lambda: NOW, workers=1, cache_ttl_s=0)
    for name in AGENTS:
        engine.register_agent(PROJECT, name)
    engine.add_many(batch)
    try:
        lazy = _trace(engine, agent, task, budget, fmt)
    except Exception as exc:  # a budget error must be the same error either way
        lazy = repr(exc)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(packing, "least_cost", lambda *args: -1)  # count every candidate
        try:
            eager = _trace(engine, agent, task, budget, fmt)
        except Exception as exc:
            eager = repr(exc)
    assert lazy == eager
    engine.close()


def test_a_spent_budget_leaves_the_drops_unpriced_until_the_trace_is_built() -> None:
    store = open_store("memory://")
    engine = Engine(store, clock=lambda: NOW, workers=1)
    engine.add_many(
        [
            {
                "project": PROJECT,
                "author": "bob",
                "content": f"turn {i} " + "word " * 30,
                "session": "s1",
                "created_at": T0 + i,
            }
            for i in range(40)
        ]
    )
    seen: list[packing.Packed] = []
    real = packing.pack

    def spy(*args: Any, **kwargs: Any) -> packing.Packed:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    with pytest.MonkeyPatch.context() as mp:
        from contextwright.assembly import run

        mp.setattr(run, "pack", spy)
        result = engine.assemble(PROJECT, "bob", "", 900, session="s1")
    (packed,) = seen
    # The history turns past the budget wait for the trace, their reasons not yet written.
    assert len(packed.unpriced) > 10
    assert all(u.decision.reason == "" for u in packed.unpriced)
    dropped = [i for i in result.trace.items if i["decision"] == "dropped"]
    assert len(dropped) >= len(packed.unpriced) and not packed.unpriced
    assert all(i["reason"].startswith("budget exhausted: needs ") for i in dropped)
    assert all(i["tokens"] > 0 for i in dropped)
    engine.close()
