"""Work moved off the assemble call: the trace's items are built on first read (by the background
writer or the caller), and a source that says it has nothing to add runs on the calling thread."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from contextwright import Engine
from contextwright.assembly.pipeline import is_inline
from contextwright.assembly.sources import SourceContext
from contextwright.roles import profile_for
from contextwright.stores.memory import MemoryStore
from contextwright.stores.sqlite import SQLiteStore
from contextwright.tasks.source import ComputedSource
from contextwright.traces.rows import ITEM_ROWS
from contextwright.traces.trace import PendingTrace, Trace


def _engine(tmp_path: Path) -> Engine:
    engine = Engine.open(f"sqlite:///{tmp_path / 't.db'}")
    engine.add(project="p", author="alice", content="@bob the login form posts to /api/session")
    engine.add(project="p", author="bob", content="I will look at the login form", session="s1")
    engine.add(project="p", author="carol", kind="decision", content="Sessions expire after 1h")
    return engine


def test_items_read_by_the_caller_equal_the_stored_ones(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    result = engine.assemble("p", "bob", "fix the login form session", budget=2000, session="s1")
    items = result.trace.items
    assert {i["decision"] for i in items} >= {"kept"}
    assert any(i["section"] == "knowledge" for i in items)
    assert result.trace.items is items  # built once
    engine.flush()
    doc = engine.store.get_doc("traces", "p", result.trace.id)
    assert doc is not None and Trace.from_dict(doc).items == result.trace.to_dict()["items"]
    engine.close()


def test_items_built_by_the_writer_first_are_the_same(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    result = engine.assemble("p", "bob", "fix the login form session", budget=2000, session="s1")
    engine.flush()  # the writer encoded them from tuples, and kept nothing
    stored = engine.trace("p", result.trace.id)
    assert stored.items and stored.to_dict()["items"] == result.trace.items
    assert stored.kept == result.trace.kept and stored.dropped == result.trace.dropped
    engine.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_the_writer_encodes_the_items_from_tuples_and_keeps_none(tmp_path: Path, kind: str) -> None:
    """What the writer stores reads back as `to_dict`, and is built with no list (a list is
    never untracked by the collector: with them every call's trace promoted ~750 objects
    toward the next full collection), and the items a reader gets stay lists."""
    store = MemoryStore() if kind == "memory" else SQLiteStore(str(tmp_path / "j.db"))
    engine = Engine(store)
    for who, text in (("alice", "@bob the login form posts"), ("carol", "login form decision")):
        engine.add(project="p", author=who, content=text)
    result = engine.assemble("p", "bob", "fix the login form", budget=2000)
    trace = result.trace
    assert isinstance(trace, PendingTrace)
    engine.flush()
    assert trace.__dict__.get("_build") is not None  # the writer did not build (or keep) them
    encoded = trace.to_json_dict()

    def lists(value: object) -> int:
        if isinstance(value, dict):
            return sum(lists(v) for v in value.values())
        return isinstance(value, list) + (sum(map(lists, value)) if isinstance(value, tuple) else 0)

    assert "items" not in encoded
    assert encoded[ITEM_ROWS] and sum(lists(i) for i in encoded[ITEM_ROWS]) == 0
    read = Trace.from_dict(json.loads(json.dumps(encoded))).to_dict()
    assert read == json.loads(json.dumps(trace.to_dict()))  # built now: the lists
    stored = engine.trace("p", trace.id)
    assert stored.items == trace.items and type(stored.items[0]["record_ids"]) is list
    engine.close()


def test_pending_items_are_built_once_under_concurrent_reads() -> None:
    calls: list[int] = []

    def build() -> list[dict[str, Any]]:
        calls.append(1)
        return [{"key": "a", "decision": "kept"}]

    trace = PendingTrace(
        build, id="t", project="p", agent="a", created_at=0.0, request={}, budget={}
    )
    seen: list[list[dict[str, Any]]] = []
    threads = [threading.Thread(target=lambda: seen.append(trace.items)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and all(s is seen[0] for s in seen)
    trace.items = [{"key": "b", "decision": "dropped"}]  # an assignment wins over the builder
    assert trace.dropped == [{"key": "b", "decision": "dropped"}]
    assert Trace.from_dict(trace.to_dict()).items == trace.items


def test_computed_runs_inline_without_a_task(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    computed = next(s for s in engine.sources if s.name == "computed")
    assert isinstance(computed, ComputedSource)
    ctx = SourceContext(
        engine.store, engine.counter, "p", "bob", profile_for("developer"), "x", None, 0.0
    )
    assert is_inline(computed, ctx) and computed.run(ctx) == []
    ctx.options["task_id"] = "t1"
    assert not is_inline(computed, ctx)  # a named task: it reads the board, on the pool
    result = engine.assemble("p", "bob", "fix the login form", budget=2000)
    run = next(r for r in result.trace.sources if r["name"] == "computed")
    assert run["candidates"] == 0 and run["error"] is None
    engine.close()


def test_the_summary_is_the_built_traces_and_builds_nothing(tmp_path: Path) -> None:
    """The summary every HTTP answer carries counts kept, truncated and dropped items from the
    packer's decisions: the same text as from the built items, and the items stay unbuilt."""
    engine = Engine.open(f"sqlite:///{tmp_path / 't.db'}", persist_traces=False)
    for i in range(40):
        engine.add(project="p", author="alice", content=f"note {i} on the login form " * 30)
    result = engine.assemble("p", "alice", "fix the login form", budget=900)
    trace = result.trace
    assert isinstance(trace, PendingTrace)
    pending = trace.summary()
    assert trace.__dict__.get("_build") is not None  # not built by the summary
    built = Trace.from_dict(trace.to_dict())  # to_dict reads (builds) the items
    assert built.summary() == pending
    decisions = {i["decision"] for i in built.items}
    assert {"kept", "dropped"} <= decisions  # the counts are not all in one bucket
    engine.close()
