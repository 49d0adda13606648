"""Replay and diff (contextwright.traces.replay): a stored assembly run again with another budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine, ValidationError
from contextwright.traces.diff import diff_traces
from contextwright.traces.replay import stored_request


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
    again = engine.replay("p", first.trace.id, budget=200)
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
        engine.replay("p", t.id, colour="red")
    assert err.value.field == "colour"
    with pytest.raises(Exception, match="does not exist"):
        engine.replay("p", "NOPE", budget=100)


@settings(max_examples=30, deadline=None)
@given(a=st.integers(60, 4000), b=st.integers(60, 4000))
def test_diff_invariants(engine: Engine, a: int, b: int) -> None:
    ta = engine.assemble("p", "bob", "login token", a).trace
    tb = engine.replay("p", ta.id, budget=b).trace
    assert diff_traces(ta, ta)["changes"] == []
    d = diff_traces(ta, tb)
    assert d["tokens"]["delta"] == tb.tokens - ta.tokens
    fate_a = {i["key"]: i["decision"] for i in ta.items}
    fate_b = {i["key"]: i["decision"] for i in tb.items}
    changed = {c["key"] for c in d["changes"]}
    assert {k for k in fate_a.keys() & fate_b.keys() if fate_a[k] != fate_b[k]} <= changed
    assert tb.tokens <= tb.budget["available"]


@settings(max_examples=40, deadline=None)
@given(
    project=st.sampled_from(["p", "q", "r"]),
    viewers=st.none()
    | st.sampled_from(["alice", "bob", "zed"])
    | st.frozensets(st.sampled_from(["alice", "bob", "zed"]), max_size=3),
    flushed=st.booleans(),
)
def test_a_trace_resolves_only_in_its_project_and_for_its_agents(
    project: str, viewers: str | frozenset[str] | None, flushed: bool
) -> None:
    """engine.trace, traces, replay and diff all find bob's trace of project p exactly when asked
    in p by someone who may read bob's traces, pending or stored; otherwise the NotFound of an id
    that exists nowhere."""
    from contextwright import NotFound

    e = Engine.open("memory://")
    e.add(project="p", author="alice", visibility="private", content="alice login secret")
    e.add(project="p", author="bob", content="bob on the login token")
    e.add(project="q", author="zed", content="zed on the login token")
    bob = e.assemble("p", "bob", "login token", 1000).trace.id
    e.assemble("q", "zed", "login token", 1000)
    if flushed:
        e.flush()
    if viewers is None:
        readers = {"alice", "bob", "zed"}
    else:
        readers = {viewers} if isinstance(viewers, str) else set(viewers)
    allowed = project == "p" and "bob" in readers
    calls = [
        lambda: e.trace(project, bob, viewers),
        lambda: e.replay(project, bob, viewers, budget=300),
        lambda: e.diff(project, bob, bob, viewers),
    ]
    for call in calls:
        if allowed:
            call()
        else:
            with pytest.raises(NotFound) as err:
                call()
            assert err.value.message == f"trace {bob!r} does not exist"
    agents = {"p": {"alice", "bob"}, "q": {"zed"}, "r": set()}[project]
    if isinstance(viewers, str) and viewers not in agents:  # not an agent with no traces
        with pytest.raises(NotFound):
            e.traces(project, viewers, limit=100)
    else:
        listed = {t.agent for t in e.traces(project, viewers, limit=100)}
        expected = {"p": {"bob"}, "q": {"zed"}, "r": set()}[project]
        assert listed == expected & readers
    e.close()
