"""An engine's own write keeps the assembler's version-keyed caches (the project's authors and
the token-count note, run.Assembler.written): SQLite reports the version steps of each write of
records (ports.ReportsWrites), read inside the write's transaction, so that the next call of the
agent loop reads neither again; any other writer between makes them read again."""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Budget, Engine
from contextwright.assembly.stored_counts import COLLECTION
from contextwright.ports import Written
from contextwright.records import Record, build_record
from contextwright.stores.sqlite import SQLiteStore
from contextwright.testing import WordTokenizer
from test_group_commit import queued

P = "wv"
BUDGET = Budget(model="gpt-4o", window=4000, reserve=500)


class ReadsCounted(SQLiteStore):
    """A real SQLite store that counts the reads the caches under test stand in for."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.reads = {"agents": 0, "note": 0}

    def agents(self, project: str) -> list[str]:
        self.reads["agents"] += 1
        return super().agents(project)

    def get_doc(self, collection: str, project: str, doc_id: str) -> dict[str, Any] | None:
        if collection == COLLECTION:
            self.reads["note"] += 1
        return super().get_doc(collection, project, doc_id)


def rec(rid: str, author: str, **extra: Any) -> Record:
    data = {"id": rid, "project": P, "author": author, "content": f"{rid} by {author}", **extra}
    return build_record(data, lambda text: len(text.split()), now=1.0)


def _fill(engine: Engine) -> None:
    for name in ("ann", "bob"):
        engine.register_agent(P, name, "developer")
    engine.add_many(
        [
            {"project": P, "author": a, "content": f"the login form fails on step {i}"}
            for i, a in enumerate(["ann", "bob", "ann", "bob"])
        ]
    )


def _window(engine: Engine, agent: str = "ann") -> str:
    result = engine.assemble(P, agent, "fix the login form with bob", BUDGET, session="s")
    return str(result.messages)


def test_a_write_reports_its_version_step_and_authors(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "w.db"))
    stored, steps = store.add_many_written([rec("a", "ann"), rec("b", "cy")])
    assert [r.id for r in stored] == ["a", "b"]
    assert steps == (Written(P, 0, 1, frozenset({"ann", "cy"}), ()),)  # records: not compared
    assert steps[0].records == tuple(stored)  # the records the write stored, as it answered
    # A superseding record changes another's status in the same step.
    _, steps = store.add_many_written([rec("c", "dee", kind="decision", supersedes="a")])
    assert steps == (Written(P, 1, 2, frozenset({"dee"}), ()),)
    assert [r.id for r in steps[0].records] == ["c"]
    # The same write again stores nothing, changes no version, and reports no step.
    assert store.add_many_written([rec("a", "ann")])[1] == ()
    assert store.version(P) == 2
    store.close()


@contextlib.contextmanager
def _filled(path: str) -> Iterator[tuple[Engine, ReadsCounted]]:
    """An engine on a counting store, filled and with one window assembled (its caches warm)."""
    with Engine(ReadsCounted(path), persist_traces=False) as engine:
        store = engine.store
        assert isinstance(store, ReadsCounted)
        _fill(engine)
        _window(engine)
        yield engine, store


def test_the_loop_reads_neither_authors_nor_note_after_its_own_write(tmp_path: Path) -> None:
    path = str(tmp_path / "loop.db")
    with _filled(path) as (engine, store):
        for turn in range(3):
            engine.add(project=P, author="cy" if turn == 1 else "ann", content=f"turn {turn}")
            before = dict(store.reads)
            mine = _window(engine)
            assert store.reads == before  # neither read again after the engine's own write
            # The same window as an engine with nothing cached, on the same file.
            with Engine(SQLiteStore(path), persist_traces=False) as fresh:
                assert _window(fresh) == mine
        version = store.version(P)
        assert engine.assembler.people(P, version) == frozenset(store.agents(P)) >= {"cy"}
        assert engine.counts.trusted(P, version)


def test_another_writer_between_makes_the_caches_read_again(tmp_path: Path) -> None:
    path = str(tmp_path / "two.db")
    with _filled(path) as (mine, store):
        assert mine.counts.trusted(P, store.version(P))
        # Another process's engine, with another tokenizer, writes between: the note becomes
        # `mixed` and `zed` an author; then this engine's own write follows.
        with Engine(SQLiteStore(path), counter=WordTokenizer(), persist_traces=False) as other:
            other.add(project=P, author="zed", content="the login form again")
        mine.add(project=P, author="ann", content="my reply")
        before = dict(store.reads)
        _window(mine)
        assert store.reads["agents"] == before["agents"] + 1
        assert store.reads["note"] == before["note"] + 1
        version = store.version(P)
        assert "zed" in mine.assembler.people(P, version)
        assert not mine.counts.trusted(P, version)


def test_a_note_declared_by_the_write_is_read_again(tmp_path: Path) -> None:
    """The first write of an engine in a project writes the note (no version step of its own):
    what was read before it is not carried."""
    with Engine(ReadsCounted(str(tmp_path / "new.db")), persist_traces=False) as engine:
        store = engine.store
        assert isinstance(store, ReadsCounted)
        engine.register_agent(P, "ann", "developer")
        assert not engine.counts.trusted(P, store.version(P))  # no note yet
        engine.add(project=P, author="ann", content="the very first record")
        assert engine.counts.trusted(P, store.version(P))


@settings(max_examples=15, deadline=None)
@given(
    authors=st.lists(st.sampled_from(["ann", "bob", "cy", "dee"]), min_size=2, max_size=5),
    refused=st.booleans(),
)
def test_group_commit_steps_chain_and_hold_every_author(
    tmp_path_factory: Any, authors: list[str], refused: bool
) -> None:
    """Batches of several threads folded into one commit (as one batch, or one savepoint each
    when one is refused): the steps the callers are told chain from the version before the group
    to the one after it, and each holds the authors of every record stored in it, so a cache
    carried along a step that starts at its own version holds what the store holds."""
    store = SQLiteStore(str(tmp_path_factory.mktemp("g") / "g.db"))
    store.add_many([rec("taken", "ann")])
    start = store.version(P)
    told: dict[int, tuple[Written, ...]] = {}
    lock = threading.Lock()

    def add(n: int, author: str) -> None:
        batch = [rec(f"r{n}-{k}", author) for k in range(2)]
        if refused and n == 1:
            batch.append(build_record({"id": "taken", "project": P, "author": "x",
                                       "content": "changed"}, len, now=1.0))  # fmt: skip
        try:
            steps = store.add_many_written(batch)[1]
        except Exception:
            steps = ()
        with lock:
            told[n] = steps

    queued(store, [functools.partial(add, n, a) for n, a in enumerate(authors)])
    steps = sorted({w for ws in told.values() for w in ws}, key=lambda w: w.before)
    assert steps[0].before == start and steps[-1].after == store.version(P)
    for a, b in itertools.pairwise(steps):
        assert a.after == b.before
    # Each step holds every record its write stored, whoever's batch: the authors say so.
    assert all({r.author for r in w.records} == w.authors for w in steps)
    stored_authors = {a for n, a in enumerate(authors) if not (refused and n == 1)}
    assert set().union(*(w.authors for w in steps)) == stored_authors
    for n, author in enumerate(authors):
        if not (refused and n == 1):
            assert any(author in w.authors for w in told[n])
    assert {"ann"} | stored_authors == set(store.agents(P))
    store.close()
