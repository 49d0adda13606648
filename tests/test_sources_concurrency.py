"""Sources run concurrently under a deadline: a slow or failing source becomes a warning in the
window and in the trace, never a failed call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextwright import Engine
from contextwright.assembly.defaults import default_sources
from contextwright.ports import Store
from contextwright.testing import FailingSource, ScriptedSource, SlowSource


@pytest.fixture
def slow() -> Iterator[SlowSource]:
    s = SlowSource("slow", ["late news that never arrives"], delay_s=10.0)
    yield s
    s.release()


def _seed(engine: Engine) -> None:
    engine.add(project="p", author="alice", content="the login form posts to /api/session")
    engine.add(project="p", author="bob", content="I will look at the login form", session="s1")


def test_slow_source_becomes_a_warning(store: Store, slow: SlowSource) -> None:
    fast = ScriptedSource("fast", ["fast fact about login"])
    engine = Engine(store, sources=[*default_sources(), slow, fast], deadline_ms=150)
    _seed(engine)
    result = engine.assemble("p", "bob", "fix the login form", budget=2000)

    runs = {s["name"]: s for s in result.trace.sources}
    assert "deadline" in runs["slow"]["error"]
    assert runs["fast"]["error"] is None and runs["fast"]["candidates"] == 1
    assert any("source slow failed" in w and "deadline" in w for w in result.warnings)
    warned = [i.text for i in result.sections["warnings"]]
    assert any("source slow failed" in t for t in warned)
    assert any(i.text == "- fast fact about login" for i in result.sections["knowledge"])
    assert not any("late news" in i.text for items in result.sections.values() for i in items)
    # The persisted trace says the same.
    stored = engine.trace("p", result.trace.id)
    assert any("source slow failed" in w for w in stored.warnings)
    engine.close()


@pytest.mark.parametrize("workers", [1, 4])
def test_failing_source_becomes_a_warning(store: Store, workers: int) -> None:
    broken = FailingSource("broken", ValueError("index is corrupt"))
    engine = Engine(store, sources=[*default_sources(), broken], workers=workers)
    _seed(engine)
    result = engine.assemble("p", "bob", "fix the login form", budget=2000)

    runs = {s["name"]: s for s in result.trace.sources}
    assert runs["broken"]["error"] == "ValueError: index is corrupt"
    assert runs["broken"]["candidates"] == 0
    warning = "source broken failed: ValueError: index is corrupt; the window was built without it"
    assert warning in result.warnings
    assert any(warning in i.text for i in result.sections["warnings"])
    # The other sources still ran and filled the window.
    assert runs["fulltext"]["error"] is None
    assert any("login form" in i.text for i in result.sections["knowledge"])
    assert broken.runs == 1
    engine.close()


def test_every_source_failing_still_returns_the_task(store: Store, slow: SlowSource) -> None:
    engine = Engine(store, sources=[FailingSource("a"), FailingSource("b"), slow], deadline_ms=100)
    engine.register_agent("p", "bob", "developer")
    result = engine.assemble("p", "bob", "anything at all", budget=1000)
    assert [i.candidate.key for i in result.sections["state"]] == ["task"]
    assert len(result.sections["warnings"]) == 3
    assert {s["name"] for s in result.trace.sources if s["error"]} == {"a", "b", "slow"}
    engine.close()


def test_sources_run_concurrently(store: Store) -> None:
    """Two sources that each wait for the other can only finish if they run at the same time."""
    import threading

    barrier = threading.Barrier(2, timeout=5)

    class Meeting(ScriptedSource):
        def run(self, ctx):  # type: ignore[no-untyped-def]
            barrier.wait()
            return super().run(ctx)

    engine = Engine(store, sources=[Meeting("x", ["x"]), Meeting("y", ["y"])], deadline_ms=5000)
    engine.register_agent("p", "bob")
    result = engine.assemble("p", "bob", "meet", budget=1000)
    assert all(s["error"] is None for s in result.trace.sources)
    assert {i.text for i in result.sections["knowledge"]} == {"- x", "- y"}
    engine.close()
