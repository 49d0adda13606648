"""Records' lines kept across calls (assembly/lines.py): a call that takes a record's line, its
packing cost and its rendered count from an earlier call's gives the window, the count and the
trace of a call that makes them anew, also after the record's status changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.assembly import run
from contextwright.assembly.lines import Lines, dated_line
from contextwright.records import build_record
from contextwright.stores import open_store
from contextwright.testing import WordTokenizer
from strategies import AGENTS, PROJECT, T0, agents, budgets, formats, record_batches, tasks

NOW = T0 + 2 * 86_400
SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _window(engine: Engine, agent: str, task: str, budget: Any, fmt: str) -> Any:
    try:
        r = engine.assemble(PROJECT, agent, task, budget, fmt, session="s1")
    except Exception as exc:  # a budget error must be the same error either way
        return repr(exc)
    items = [(i["key"], i["decision"], i["reason"], i["tokens"]) for i in r.trace.items]
    return r.messages, r.tokens, items


def _fresh(engine: Engine, *args: Any) -> Any:
    """The window of a call with nothing kept from earlier calls."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run.Assembler, "lines", lambda self: Lines(self.counter))
        return _window(engine, *args)


@SETTINGS
@given(
    batch=record_batches(max_size=20),
    calls=st.lists(st.tuples(agents, tasks), min_size=1, max_size=4),
    agent=agents,
    task=tasks,
    budget=budgets(min_window=300, max_window=2500),
    fmt=formats,
    resolve=st.booleans(),
)
def test_kept_lines_give_the_window_of_lines_made_anew(
    batch: list[dict[str, Any]],
    calls: list[tuple[str, str]],
    agent: str,
    task: str,
    budget: Any,
    fmt: str,
    resolve: bool,
) -> None:
    engine = Engine(open_store("memory://"), clock=lambda: NOW, workers=1, cache_ttl_s=0)
    for name in AGENTS:
        engine.register_agent(PROJECT, name)
    engine.add_many(batch)
    for a, t in calls:  # earlier calls keep the lines of what they showed
        _window(engine, a, t, budget, fmt)
    if resolve:  # a status the kept lines showed changes: the line must show the new one
        for d in batch:
            if d["kind"] in ("question", "task"):
                engine.set_status(PROJECT, d["id"], "resolved", by=d["author"])
    assert _window(engine, agent, task, budget, fmt) == _fresh(engine, agent, task, budget, fmt)
    engine.close()


def test_a_changed_status_is_shown_though_the_old_line_was_kept(tmp_path: Path) -> None:
    engine = Engine(open_store(f"sqlite:///{tmp_path / 'l.db'}"), clock=lambda: NOW, workers=1)
    q = engine.add(
        project=PROJECT, author="bob", kind="question", content="Which login flow?", to=["alice"]
    )
    first = engine.assemble(PROJECT, "alice", "login flow", 2000, "markdown").text
    assert "- bob (question, open): Which login flow?" in first
    assert len(engine.assembler.lines()) > 0  # the line was kept
    engine.resolve(PROJECT, q.id, by="bob")
    second = engine.assemble(PROJECT, "alice", "login flow", 2000, "markdown").text
    assert "- bob (question, resolved): Which login flow?" in second
    assert second == _fresh(engine, "alice", "login flow", 2000, "markdown")[0][0]["content"]
    engine.close()


def test_lines_are_kept_for_one_counter() -> None:
    engine = Engine(open_store("memory://"), clock=lambda: NOW, workers=1)
    kept = engine.assembler.lines()
    assert engine.assembler.lines() is kept
    engine.assembler.counter = WordTokenizer()  # counts of another tokenizer: kept ones go
    assert engine.assembler.lines() is not kept
    assert engine.assembler.lines().counter is engine.assembler.counter
    engine.close()


def test_an_entry_serves_its_own_record_object_only_and_the_memo_is_bounded() -> None:
    counter = WordTokenizer()
    lines = Lines(counter, size=3)
    for i in range(10):
        r = build_record(
            {"project": PROJECT, "author": "bob", "kind": "question", "content": f"line {i}"},
            counter.count,
            now=T0,
        )
        text, n = lines.dated(r)
        assert (text, n) == dated_line(r, counter, None)
        assert lines.dated(r)[0] is text  # kept
        done = r.with_status("resolved")  # same id, another record: its own line
        assert lines.dated(done) == dated_line(done, counter, None) != (text, n)
        assert len(lines) <= 3
