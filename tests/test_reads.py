"""The sources' store reads kept by (query, store version) across calls (assembly/reads.py): a
call at the version of an earlier one reads nothing again, an engine's own write of records keeps
the reads that none of its records may enter, any other write makes them read again, and the
window is the same as with every read made afresh."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Budget, Engine
from contextwright.assembly.reads import (
    Near,
    ReadCache,
    Replies,
    headed,
    may_change,
    may_enter,
)
from contextwright.ports import Query
from contextwright.records import Record, build_record
from contextwright.stores import open_store
from contextwright.stores.sqlite import SQLiteStore

P = "rd"
NOW = 1_800_000_000.0
BUDGET = Budget(model="gpt-4o", window=3000, reserve=500)
NAMES = ("ann", "bob", "cy")
KINDS = ("message", "decision", "question", "task", "constraint", "state", "note")


class CountedSQLite(SQLiteStore):
    """A real SQLite store that counts `query` calls (the reads the cache stands in for)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.queries = 0

    def query(self, q: Query) -> list[Record]:
        self.queries += 1
        return super().query(q)


def _fill(engine: Engine) -> None:
    for name in NAMES:
        engine.register_agent(P, name, "developer")
    engine.add_many(
        [
            {"project": P, "author": "ann", "kind": "decision", "content": "we ship on fridays"},
            {"project": P, "author": "bob", "kind": "constraint", "content": "no new deps"},
            {"project": P, "author": "cy", "kind": "question", "content": "@bob why is it slow?"},
            {"project": P, "author": "ann", "content": "the login form fails", "pinned": True},
        ]
    )


def _window(engine: Engine, agent: str, task: str, session: str = "s") -> Any:
    r = engine.assemble(P, agent, task, BUDGET, session=session)
    return r.messages, r.tokens, [(d["key"], d["decision"], d["reason"]) for d in r.trace.items]


def test_a_second_call_at_the_same_version_reads_only_what_is_new(tmp_path: Path) -> None:
    store = CountedSQLite(str(tmp_path / "r.db"))
    engine = Engine(store, clock=lambda: NOW)
    fresh = Engine(SQLiteStore(str(tmp_path / "r.db")), clock=lambda: NOW, cache_ttl_s=0)
    _fill(engine)
    first = _window(engine, "bob", "why is the login slow", session="s1")
    reads = store.queries
    # Another session and task: only the session's history is a read no call made at this
    # version; the project's decisions, pins, open items and bob's mentions are kept.
    second = _window(engine, "bob", "fix the login form", session="s2")
    assert store.queries - reads == 1
    assert first == _window(fresh, "bob", "why is the login slow", session="s1")
    assert second == _window(fresh, "bob", "fix the login form", session="s2")
    engine.close()
    fresh.close()


def test_own_writes_keep_what_they_cannot_change(tmp_path: Path) -> None:
    path = str(tmp_path / "w.db")
    store = CountedSQLite(path)
    engine = Engine(store, clock=lambda: NOW)
    fresh = Engine(SQLiteStore(path), clock=lambda: NOW, cache_ttl_s=0)
    _fill(engine)
    _window(engine, "bob", "why is the login slow")
    # A reply in the session: it may enter the session's history only, which it heads as the
    # newest turn (reads.headed): nothing is read again.
    engine.add(project=P, author="bob", content="looking at it", session="s")
    reads = store.queries
    assert _window(engine, "bob", "why is the login slow") == _window(
        fresh, "bob", "why is the login slow"
    )
    assert store.queries - reads == 0
    # A decision may enter the decisions in force: read again, and shown.
    engine.add(project=P, author="cy", kind="decision", content="we ship on mondays now")
    reads = store.queries
    after = _window(engine, "bob", "why is the login slow")
    assert store.queries - reads == 1  # the decisions; the session's history is kept
    assert "mondays" in str(after[0])
    assert after == _window(fresh, "bob", "why is the login slow")
    # A record addressed to bob may enter bob's mentions.
    engine.add(project=P, author="ann", content="@bob the mondays plan needs you")
    assert "needs you" in str(_window(engine, "bob", "the mondays plan")[0])
    engine.close()
    fresh.close()


def test_a_group_commit_keeps_only_the_reads_that_no_batch_of_the_group_may_enter(
    tmp_path: Path,
) -> None:
    """Two threads' adds stored as one write (stores/groups.py): each caller learns the whole
    group's version step, so the reads kept across it are checked against every record of the
    group, not only the caller's own. Each batch enters one of bob's reads (a decision enters
    the decisions in force, a record addressed to bob his mentions): checked against one batch
    alone, the other's read would be kept and its record missing from the window."""
    path = str(tmp_path / "g.db")
    store = SQLiteStore(path)
    engine = Engine(store, clock=lambda: NOW)
    fresh = Engine(SQLiteStore(path), clock=lambda: NOW, cache_ttl_s=0)
    _fill(engine)
    _window(engine, "bob", "why is the login slow")
    before = engine.store.version(P)
    adds = [
        {"project": P, "author": "cy", "kind": "decision", "content": "we ship on tuesdays now"},
        {"project": P, "author": "ann", "content": "@bob the tuesdays plan needs you"},
    ]
    with store._write_lock:  # both batches queue behind the lock: one writer stores both
        threads = [threading.Thread(target=engine.add, kwargs=a) for a in adds]
        for t in threads:
            t.start()
        while len(store._groups.pending) < 2:
            time.sleep(0.001)
    for t in threads:
        t.join()
    assert engine.store.version(P) == before + 1  # the two adds were one write
    after = _window(engine, "bob", "why is the login slow")
    assert "tuesdays now" in str(after[0]) and "needs you" in str(after[0])
    assert after == _window(fresh, "bob", "why is the login slow")
    engine.close()
    fresh.close()


def test_writes_of_others_and_status_changes_are_read_again(tmp_path: Path) -> None:
    path = str(tmp_path / "o.db")
    engine = Engine(SQLiteStore(path), clock=lambda: NOW)
    other = Engine(SQLiteStore(path), clock=lambda: NOW)
    fresh = Engine(SQLiteStore(path), clock=lambda: NOW, cache_ttl_s=0)
    _fill(engine)
    _window(engine, "bob", "ship plan")
    other.add(project=P, author="cy", kind="decision", content="we ship on tuesdays")
    assert "tuesdays" in str(_window(engine, "bob", "ship plan")[0])
    # A status change is a write no carry follows: the question leaves the open items (it
    # stays as a mention of bob, shown resolved).
    (question,) = engine.records(P, kinds=("question",))
    assert "open" in str(_window(engine, "bob", "ship plan")[0])
    engine.resolve(P, question.id, by="bob")
    after = _window(engine, "bob", "ship plan")
    assert "(question, " in str(after[0]) and "open)" not in str(after[0])
    assert after == _window(fresh, "bob", "ship plan")
    engine.close()
    other.close()
    fresh.close()


def test_a_superseding_write_keeps_nothing() -> None:
    cache = ReadCache(ttl_s=30)
    q = Query(P, "bob", kinds=("constraint",))
    cache.put(q, 1, [])
    decision = _record("d2", kind="decision", supersedes="d1")
    cache.carry(P, 1, 2, [decision])
    assert cache.get(q, 2) is None and cache.get(q, 1) is None


def test_entries_expire_and_bounds_hold() -> None:
    t = [0.0]
    cache = ReadCache(ttl_s=10, per_group=2, groups=2, clock=lambda: t[0])
    qs = [Query(P, "bob", limit=n) for n in range(3)]
    for q in qs:
        cache.put(q, 1, [])
    assert cache.get(qs[0], 1) is None and len(cache) == 2  # the oldest left
    cache.put(qs[1], 2, [])
    assert cache.get(qs[1], 1) is None and len(cache) == 1  # a newer version: the older left
    cache.put(Query("other", "bob"), 1, [])
    cache.put(Query("third", "bob"), 1, [])
    assert cache.get(qs[1], 2) is None and len(cache) == 2  # two projects at most
    cache.put(qs[2], 3, [])
    t[0] = 10.0
    assert cache.get(qs[2], 3) is None
    assert len(ReadCache(ttl_s=0)) == 0
    off = ReadCache(ttl_s=0)
    off.put(qs[0], 1, [])
    assert off.get(qs[0], 1) is None


def _record(rid: str, **fields: Any) -> Record:
    data = {"id": rid, "project": P, "author": "ann", "content": f"{rid} text", **fields}
    return build_record(data, lambda text: len(text.split()), now=NOW)


names = st.sampled_from(NAMES)
record_fields = st.fixed_dictionaries(
    {
        "author": names,
        "kind": st.sampled_from(KINDS),
        "session": st.sampled_from([None, "s1", "s2"]),
        "milestone": st.sampled_from([None, "m1"]),
        "to": st.lists(names, max_size=1),
        "pinned": st.booleans(),
        "tags": st.lists(st.sampled_from(["ui", "db"]), max_size=1),
        "created_at": st.sampled_from([NOW - 300, NOW - 200, NOW - 100]),
        "content": st.sampled_from(
            ["plain words", "the login form fails", "ship plan for @bob?", "@cy see the ship plan"]
        ),
    }
)


def _sometimes(*values: Any) -> st.SearchStrategy[Any]:
    """None (no filter) most of the time, so that a query has one or two filters at once."""
    return st.sampled_from([None, None, None, *values])


queries = st.builds(
    Query,
    project=st.just(P),
    agent=st.sampled_from([None, *NAMES]),
    kinds=_sometimes(("decision",), ("task", "question"), ("message", "note")),
    session=_sometimes("s1"),
    author=_sometimes("ann"),
    statuses=_sometimes(("open",), ("active",)),
    addressed_to=_sometimes("bob"),
    pinned=_sometimes(True, False),
    tag=_sometimes("ui"),
    milestone=_sometimes("m1"),
    since=_sometimes(NOW - 200),
    before=_sometimes(NOW - 200),
    limit=st.sampled_from([1, 3, 50]),
)
_ids = itertools.count()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stored=st.lists(record_fields, max_size=8), new=record_fields, q=queries)
def test_a_record_that_may_not_enter_leaves_the_read_as_it_was(
    kind: str, tmp_path: Path, stored: list[dict[str, Any]], new: dict[str, Any], q: Query
) -> None:
    """The invariant `carry` rests on, against real stores: a record that `may_enter` says the
    read cannot return changes nothing it returns (it may if `may_enter` says it may)."""
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path}/p{next(_ids)}.db"
    store = open_store(url)
    n = next(_ids)
    store.add_many([_record(f"r{n}-{i}", **f) for i, f in enumerate(stored)])
    before = [r.id for r in store.query(q)]
    r = _record(f"new{n}", **new)
    store.add_many([r])
    if not may_enter(q, r):
        assert [x.id for x in store.query(q)] == before
    store.close()


new_fields = st.fixed_dictionaries(
    {
        "created_at": st.sampled_from([NOW - 200, NOW]),
        "meta": st.sampled_from([{}, {"n": 1}, {"ids": ["a"]}]),
        "visibility": st.sampled_from(["project", "private", "direct"]),
    }
)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stored=st.lists(record_fields, max_size=8), new=record_fields, more=new_fields, q=queries)
def test_a_record_that_heads_a_read_gives_what_the_store_reads(
    kind: str,
    tmp_path: Path,
    stored: list[dict[str, Any]],
    new: dict[str, Any],
    more: dict[str, Any],
    q: Query,
) -> None:
    """`headed`, the carry of a read that the written record enters, against real stores:
    where it gives an answer, the store reads the same records in the same order."""
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path}/h{next(_ids)}.db"
    store = open_store(url)
    n = next(_ids)
    store.add_many([_record(f"r{n}-{i}", **f) for i, f in enumerate(stored)])
    before = store.query(q)
    fields = {**new, **more}
    if fields["visibility"] == "direct" and not fields["to"]:
        fields["to"] = ["cy"]
    r = _record(f"new{n}", **fields)
    store.add_many([r])
    if may_enter(q, r):
        found = headed(q, before, [r])
        if found is not None:
            after = store.query(q)
            assert [(x.id, x.status) for x in found] == [(x.id, x.status) for x in after]
            assert found == after  # the records as the store gives them back
    store.close()


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), record_fields),
        st.tuples(st.just("call"), names, st.sampled_from(["ship plan", "login form"])),
        st.tuples(st.just("resolve"), st.integers(0, 20)),
    ),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=ops)
def test_same_windows_with_reads_kept_or_not(tmp_path: Path, steps: list[Any]) -> None:
    """Writes (the engine's own, with their carries, and status changes) between calls: every
    window is the one an engine that reads everything afresh builds."""
    path = str(tmp_path / f"s{next(_ids)}.db")
    kept = Engine(SQLiteStore(path), clock=lambda: NOW, workers=1)
    fresh = Engine(SQLiteStore(path), clock=lambda: NOW, workers=1, cache_ttl_s=0)
    _fill(kept)
    for step in steps:
        if step[0] == "add":
            kept.add(project=P, **step[1])
        elif step[0] == "resolve":
            found = kept.records(P, limit=50)
            if found:
                kept.resolve(P, found[step[1] % len(found)].id, by="ann")
        else:
            _, agent, task = step
            assert _window(kept, agent, task, "s1") == _window(fresh, agent, task, "s1")
    kept.close()
    fresh.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    stored=st.lists(record_fields, min_size=1, max_size=8),
    new=record_fields,
    at=st.sampled_from([NOW - 250, NOW - 200, NOW - 150]),
    agent=names,
)
def test_a_record_in_no_anchor_session_leaves_the_neighbours_as_they_were(
    tmp_path: Path, stored: list[dict[str, Any]], new: dict[str, Any], at: float, agent: str
) -> None:
    store = SQLiteStore(f"{tmp_path}/n{next(_ids)}.db")
    n = next(_ids)
    store.add_many([_record(f"r{n}-{i}", **f) for i, f in enumerate(stored)])
    anchors = ((stored[0]["session"], at), ("s2", at))
    before = [
        [[r.id for r in side] for side in pair] for pair in store.neighbours(P, agent, anchors)
    ]
    r = _record(f"new{n}", **new)
    store.add_many([r])
    if not may_change(Near(P, agent, anchors), r):
        after = store.neighbours(P, agent, anchors)
        assert [[[x.id for x in side] for side in pair] for pair in after] == before
    store.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    stored=st.lists(st.tuples(record_fields, st.integers(-1, 3)), min_size=1, max_size=8),
    new=st.tuples(record_fields, st.integers(-1, 3)),
    asked=st.sets(st.integers(0, 3), min_size=1),
    agent=names,
)
def test_a_record_replying_to_none_of_them_leaves_the_replies_as_they_were(
    tmp_path: Path,
    stored: list[tuple[dict[str, Any], int]],
    new: tuple[dict[str, Any], int],
    asked: set[int],
    agent: str,
) -> None:
    store = SQLiteStore(f"{tmp_path}/q{next(_ids)}.db")
    n = next(_ids)
    ids = [f"r{n}-{i}" for i in range(len(stored))]

    def replying(rid: str, fields: dict[str, Any], to: int) -> Record:
        return _record(rid, **fields, reply_to=ids[to] if 0 <= to < len(ids) else None)

    for i, (fields, to) in enumerate(stored):  # one by one: a reply names a stored record
        store.add_many([replying(ids[i], fields, to if to < i else -1)])
    questions = tuple(ids[i] for i in sorted(asked) if i < len(ids))
    before = [r.id for r in store.replies_to(P, questions, agent)]
    r = replying(f"new{n}", *new)
    store.add_many([r])
    if not may_change(Replies(P, agent, questions), r):
        assert [x.id for x in store.replies_to(P, questions, agent)] == before
    store.close()


def test_a_write_checks_only_the_reads_asked_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Carried lazily: a write records its step and checks no kept read; a read asked at the
    # newer version is checked against the records written since, across several writes.
    import contextwright.assembly.reads as reads

    checked: list[str] = []
    real = reads.may_change
    monkeypatch.setattr(reads, "may_change", lambda key, r: checked.append(r.id) or real(key, r))
    cache = ReadCache(ttl_s=30)
    kept = [Query(P, "bob", kinds=("constraint",), limit=n) for n in range(50)]
    for q in kept:
        cache.put(q, 1, [])
    cache.carry(P, 1, 2, [_record("m1", kind="message")])
    cache.carry(P, 2, 3, [_record("m2", kind="message")])
    assert checked == []
    assert cache.get(kept[0], 3) == []  # neither message may enter a read of constraints
    assert checked == ["m2", "m1"] or checked == ["m1", "m2"]
    cache.carry(P, 3, 4, [_record("c1", kind="constraint")])
    assert cache.get(kept[1], 4) == [_record("c1", kind="constraint")]  # it heads the read
    cache.carry(P, 4, 5, [_record("c2", kind="constraint"), _record("c3", kind="constraint")])
    assert cache.get(kept[2], 5) is None  # constraints written since may enter it


class CountedReplies(SQLiteStore):
    """A real SQLite store that counts `replies_to` calls."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.replies = 0

    def replies_to(self, project: str, ids: Any, agent: str | None) -> list[Record]:
        self.replies += 1
        return super().replies_to(project, ids, agent)


def test_the_results_of_a_sessions_calls_are_read_once_per_version(tmp_path: Path) -> None:
    """History looks for the results of its unanswered tool calls outside the window; an agent's
    loop asks again on every turn. The read is kept across the engine's own writes that cannot
    answer them, and read again after one that does."""
    path = str(tmp_path / "t.db")
    store = CountedReplies(path)
    engine = Engine(store, clock=lambda: NOW, workers=1)
    fresh = Engine(SQLiteStore(path), clock=lambda: NOW, workers=1, cache_ttl_s=0)
    _fill(engine)
    call = engine.add(
        project=P, author="bob", kind="tool_call", content="grep login", session="s",
        meta={"name": "grep", "arguments": "{}"},
    )  # fmt: skip
    first = _window(engine, "bob", "why is the login slow")
    reads = store.replies  # the call's results, and the replies to the question (chains.py)
    engine.add(project=P, author="bob", content="still looking", session="s")
    assert _window(engine, "bob", "why is the login slow") == _window(
        fresh, "bob", "why is the login slow"
    )
    assert store.replies == reads  # the reply answers no call: the reads are kept
    engine.add(
        project=P, author="bob", kind="tool_result", content="login.py:12", session="other",
        reply_to=call.id,
    )  # fmt: skip
    after = _window(engine, "bob", "why is the login slow")
    assert store.replies == reads + 1  # the call's results only
    assert "login.py:12" in str(after[0]) and after != first
    assert after == _window(fresh, "bob", "why is the login slow")
    engine.close()
    fresh.close()
