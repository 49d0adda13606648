"""Replay and diff (contextwright.replay): a stored assembly run again with another budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine, ValidationError
from contextwright.replay import diff_traces, stored_request


@pytest.fixture(scope="module")
def engine() -> Engine:
    e = Engine.open("memory://")
    for i in range(40):
        e.add(
            project="p",
            author="alice" if i % 2 else "bob",
            content=f"note {i} about the login token flow",
        )
    e.add(project="p", author="carol", kind="decision", content="Use JWT with refresh tokens.")
    return e


def test_replay_keeps_the_request_and_changes_only_the_budget(engine: Engine) -> None:
    first = engine.assemble("p", "bob", "fix the login token bug", 3000, "markdown")
    again = engine.replay(first.trace.project, first.trace.id, budget=200)
    assert again.trace.request["task"] == "fix the login token bug"
    assert again.format == "markdown" and again.available == 200
    assert again.trace.notes["replay_of"] == first.trace.id
    d = diff_traces(first.trace, again.trace)
    assert set(d["request"]) == {"budget"}
    assert d["changes"] and all(c["before"] == "kept" for c in d["changes"])
    assert stored_request(first.trace)["budget"] == {
        "model": "cl100k",
        "window": 3000,
        "reserve": 0,
        "section_caps": {},
    }


def test_replay_rejects_unknown_overrides_and_traces(engine: Engine) -> None:
    t = engine.assemble("p", "bob", "x", 1000).trace
    with pytest.raises(ValidationError) as err:
        engine.replay(t.project, t.id, colour="red")
    assert err.value.field == "colour"
    with pytest.raises(Exception, match="does not exist"):
        engine.replay("p", "NOPE", budget=100)


@settings(max_examples=30, deadline=None)
@given(a=st.integers(60, 4000), b=st.integers(60, 4000))
def test_diff_invariants(engine: Engine, a: int, b: int) -> None:
    ta = engine.assemble("p", "bob", "login token", a).trace
    tb = engine.replay(ta.project, ta.id, budget=b).trace
    assert diff_traces(ta, ta)["changes"] == []
    d = diff_traces(ta, tb)
    assert d["tokens"]["delta"] == tb.tokens - ta.tokens
    fate_a = {i["key"]: i["decision"] for i in ta.items}
    fate_b = {i["key"]: i["decision"] for i in tb.items}
    changed = {c["key"] for c in d["changes"]}
    assert {k for k in fate_a.keys() & fate_b.keys() if fate_a[k] != fate_b[k]} <= changed
    assert tb.tokens <= tb.budget["available"]
