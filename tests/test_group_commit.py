"""SQLiteStore's group commit (add_many): batches queued while another writer holds the write
lock are stored together, each in a savepoint of its own, so that a refused batch is rolled back
alone and every caller gets its own answer."""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from contextwright import ValidationError
from contextwright.records import Record, build_record
from contextwright.stores.sqlite import SQLiteStore

if TYPE_CHECKING:
    from contextwright.stores.postgres import PostgresStore

P = "gc"


def rec(rid: str, content: str) -> Record:
    data: dict[str, Any] = {"id": rid, "project": P, "author": "ann", "content": content,
                            "created_at": 1.0}  # fmt: skip
    return build_record(data, lambda text: len(text.split()))


def queued(store: SQLiteStore | PostgresStore, calls: Sequence[Callable[[], object]]) -> None:
    """Each of `calls` on a thread of its own, started while another writer's transaction holds
    the write lock and queued behind it (in order) before the next starts; back once all are done.
    Either store: both queue on groups.Groups."""
    threads = [threading.Thread(target=call) for call in calls]
    with store._write_lock:
        deadline = time.monotonic() + 30
        for n, t in enumerate(threads, 1):
            t.start()
            while len(store._groups.pending) < n and time.monotonic() < deadline:
                time.sleep(0.01)
        assert len(store._groups.pending) == len(threads)
    for t in threads:
        t.join()


def test_queued_batches_share_one_commit_and_a_refused_one_fails_alone(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "g.db"))
    store.add_many([rec("taken", "first words")])
    writes = store._writes
    results: dict[int, Any] = {}

    def add(n: int) -> None:
        batch = [rec(f"r{n}-{k}", f"batch {n} record {k}") for k in range(3)]
        if n == 3:  # the same id with other content: refused, with nothing of its batch stored
            batch.append(rec("taken", "other words"))
        try:
            results[n] = [r.id for r in store.add_many(batch)]
        except ValidationError as exc:
            results[n] = exc

    queued(store, [functools.partial(add, n) for n in range(8)])
    assert isinstance(results[3], ValidationError) and results[3].field == "id"
    for n in (0, 1, 2, 4, 5, 6, 7):
        assert results[n] == [f"r{n}-{k}" for k in range(3)]
    stored = {r.id for r in store.get_many(P, [f"r{n}-{k}" for n in range(8) for k in range(3)])}
    assert stored == {f"r{n}-{k}" for n in range(8) if n != 3 for k in range(3)}
    assert store.get_many(P, ["taken"])[0].content == "first words"
    assert store._writes == writes + 1  # one transaction for all eight
    assert store.version(P) == 8  # the first add and the seven stored batches, not the refused
    store.close()


def test_a_batch_alone_is_its_own_transaction(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "a.db"))
    assert [r.id for r in store.add_many([rec("a", "one")])] == ["a"]
    with pytest.raises(ValidationError):
        store.add_many([rec("b", "two"), rec("a", "changed")])
    assert store.get_many(P, ["b"]) == []
    store.close()


def test_a_group_is_stored_in_one_statement_per_table(tmp_path: Path) -> None:
    """Inside the write lock every statement is a turn at the GIL, so the queued batches are
    written together, not one savepoint and its statements each; a record repeated in a later
    batch answers the earlier one, as it would had they been stored one after another."""
    store = SQLiteStore(str(tmp_path / "t.db"))
    store.add_many([rec("first", "before the group")])
    statements: list[str] = []
    open_conn = store._conns._open

    def traced() -> Any:
        conn = open_conn()
        conn.set_trace_callback(statements.append)
        return conn

    store._conns._open = traced  # type: ignore[method-assign]
    results: dict[int, list[Record]] = {}
    batches = {n: [rec(f"g{n}", f"group record {n}")] for n in range(8)}
    batches[7] = [rec("g0", "group record 0")]  # the same write as batch 0's

    def add(n: int) -> None:
        results[n] = store.add_many(batches[n])

    queued(store, [functools.partial(add, n) for n in range(8)])
    assert [results[n][0].id for n in range(8)] == [f"g{n}" for n in range(7)] + ["g0"]
    assert results[7][0].content == "group record 0"
    stored = store.get_many(P, [f"g{n}" for n in range(7)])
    assert [r.content for r in stored] == [f"group record {n}" for n in range(7)]
    assert store.count(P) == 8
    assert store.version(P) == 2  # the first add and the group's one transaction
    begin = statements.index("BEGIN IMMEDIATE")
    inside = statements[begin : statements.index("COMMIT", begin)]
    # Ours, not the full-text index's own (which name their schema), and a statement run for
    # many rows, traced once per row, counted once.
    ours = [sql for sql in inside if not sql.startswith("-- ") and "'main'." not in sql]
    runs = [sql for sql, _ in itertools.groupby(ours, key=lambda sql: sql[:30])]
    assert len(runs) <= 10, runs  # batch by batch, the eight batches made 56
    store.close()


def test_a_group_with_a_superseding_record_goes_batch_by_batch(tmp_path: Path) -> None:
    """Stored as one after another: a record that supersedes one queued after it finds nothing
    to mark (as if their writers had come in that order alone), where one batch of both would
    have marked it."""
    store = SQLiteStore(str(tmp_path / "s.db"))
    old = rec("old", "the old plan")
    new = build_record(
        {"id": "new", "project": P, "author": "ann", "content": "the new plan",
         "created_at": 2.0, "supersedes": "old"},
        lambda text: len(text.split()),
    )  # fmt: skip
    queued(store, [functools.partial(store.add_many, [r]) for r in (new, old)])
    assert store.get_many(P, ["old"])[0].status is None
    store.close()


class CountingLock:
    """The store's write lock, noting each thread that takes it."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.takers: set[int] = set()

    def __enter__(self) -> Any:
        self.lock.acquire()
        self.takers.add(threading.get_ident())
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_queued_callers_wait_for_their_turn_not_for_the_write_lock(tmp_path: Path) -> None:
    """A caller whose batch the leader stored returns at once: waiting for the write lock only to
    find its batch stored, it waited behind later writers (most of the slowest adds' time)."""
    store = SQLiteStore(str(tmp_path / "t.db"))
    lock = store._write_lock = CountingLock(store._write_lock)  # type: ignore[assignment]
    answers: dict[int, list[str]] = {}

    def add(n: int) -> None:
        answers[n] = [r.id for r in store.add_many([rec(f"t{n}", f"turn {n}")])]

    queued(store, [functools.partial(add, n) for n in range(5)])
    assert answers == {n: [f"t{n}"] for n in range(5)}
    assert len(lock.takers - {threading.get_ident()}) == 1  # the group's writer alone
    store.close()


def test_batches_queued_during_a_group_are_the_next_group(tmp_path: Path) -> None:
    """Batches queued while a group is written are stored together in the next transaction,
    written by the first of their callers; then a lone batch is written by its own caller."""
    first: list[Record] = []

    class Store(SQLiteStore):
        def _store_jobs(self, jobs: list[Any]) -> None:
            if not first:  # the first group: two more batches queue behind it meanwhile
                first.extend(j.records[0] for j in jobs)
                for n in (1, 2):
                    later.append(threading.Thread(target=add, args=(n,)))
                    later[-1].start()
                    deadline = time.monotonic() + 30
                    while len(self._groups.pending) < n and time.monotonic() < deadline:
                        time.sleep(0.01)
                assert [j.records[0].id for j in self._groups.pending] == ["h1", "h2"]
            super()._store_jobs(jobs)

    store = Store(str(tmp_path / "h.db"))
    writes = store._writes
    later: list[threading.Thread] = []
    answers: dict[int, list[str]] = {}

    def add(n: int) -> None:
        answers[n] = [r.id for r in store.add_many([rec(f"h{n}", f"hand {n}")])]

    add(0)
    for t in later:
        t.join()
    assert answers == {0: ["h0"], 1: ["h1"], 2: ["h2"]}
    assert store._writes == writes + 2  # h0's group, then h1 and h2 together
    assert not store._groups.writing and not store._groups.pending
    assert [r.id for r in store.add_many([rec("h3", "alone")])] == ["h3"]
    store.close()
